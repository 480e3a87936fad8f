//! `kiln rpc server | tracker | summary`: the RPC server and tracker (TVM 0.27's protocol).

use clap::Subcommand;
use std::path::PathBuf;

/// What `kiln rpc` runs.
#[derive(Subcommand)]
pub enum RpcCommand {
    /// Serves RPC clients (Kiln's or Apache TVM's): each connection gets its own thread and
    /// temporary folder. Uploading a library and loading it runs its code on this machine.
    Server {
        /// Address to bind.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// First port to try.
        #[arg(long, default_value_t = 9090)]
        port: u16,
        /// One past the last port to try (default: port + 100).
        #[arg(long)]
        port_end: Option<u16>,
        /// Key that clients must present; clients without it are refused.
        #[arg(long, default_value = "")]
        key: String,
        /// Where session folders are made (default: the system's temporary folder).
        #[arg(long)]
        workdir: Option<PathBuf>,
        /// Tracker to register with, `host:port`.
        #[arg(long)]
        tracker: Option<String>,
        /// Address the tracker gives clients for this server.
        #[arg(long)]
        custom_addr: Option<String>,
        /// Largest packet accepted, in bytes.
        #[arg(long, default_value_t = kiln_rpc::protocol::DEFAULT_MAX_PACKET_BYTES)]
        max_packet_bytes: u64,
    },
    /// Runs a tracker: servers register under keys, clients ask for a free server by key.
    Tracker {
        /// Address to bind.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// First port to try.
        #[arg(long, default_value_t = 9190)]
        port: u16,
        /// One past the last port to try.
        #[arg(long, default_value_t = 9199)]
        port_end: u16,
    },
    /// Prints a tracker's servers and queues.
    Summary {
        /// The tracker, `host:port`.
        #[arg(long, default_value = "127.0.0.1:9190")]
        tracker: String,
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `kiln rpc` command.
pub fn run(cmd: RpcCommand) -> Result<(), String> {
    match cmd {
        RpcCommand::Server {
            host,
            port,
            port_end,
            key,
            workdir,
            tracker,
            custom_addr,
            max_packet_bytes,
        } => {
            let server = kiln_rpc::Server::start(kiln_rpc::ServerConfig {
                host,
                port,
                port_end: port_end.unwrap_or(port.saturating_add(100)),
                key,
                workdir,
                max_packet_bytes,
                tracker,
                custom_addr,
            })
            .map_err(|e| e.to_string())?;
            // Scripts read this line to learn the port.
            println!("kiln rpc server listening on {}", server.addr());
            server.wait();
            Ok(())
        }
        RpcCommand::Tracker {
            host,
            port,
            port_end,
        } => {
            let tracker =
                kiln_rpc::Tracker::start(&host, port, port_end).map_err(|e| e.to_string())?;
            println!("kiln rpc tracker listening on {host}:{}", tracker.port());
            tracker.wait();
            Ok(())
        }
        RpcCommand::Summary { tracker, json } => {
            let v = kiln_rpc::tracker::summary(&tracker).map_err(|e| e.to_string())?;
            if json {
                println!("{v}");
            } else {
                print!("{}", kiln_rpc::tracker::text_summary(&v));
            }
            Ok(())
        }
    }
}
