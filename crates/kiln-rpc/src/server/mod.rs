//! The RPC server: listens on a port of a range, checks each client's handshake key, and
//! serves every connection in its own thread with its own temporary folder, removed when the
//! client goes. Optionally registers with a tracker.

mod env;
mod session;

pub use env::checked_name;
pub(crate) use session::to_wire_pod;
pub use session::{held_device_bytes, ServerSession, SessionEnd};

use crate::protocol::{DEFAULT_MAX_PACKET_BYTES, RPC_CODE_MISMATCH, RPC_CODE_SUCCESS, RPC_MAGIC};
use crate::transport::{bind, key_bytes, read_i32, read_key, AcceptThread};
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Error, Result};
use kiln_runtime::toolchain::TempDir;
use std::collections::VecDeque;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a server is set up.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address to bind (127.0.0.1 unless told otherwise).
    pub host: String,
    /// First port to try (0: any free port).
    pub port: u16,
    /// One past the last port to try (ignored when `port` is 0).
    pub port_end: u16,
    /// The key clients must present (`client:<key>`); empty accepts clients without a key.
    pub key: String,
    /// Where session folders are made (default: the system's temporary folder).
    pub workdir: Option<PathBuf>,
    /// Largest packet accepted, in bytes.
    pub max_packet_bytes: u64,
    /// A tracker to register with, `host:port`.
    pub tracker: Option<String>,
    /// The address the tracker gives clients (default: the tracker sees it).
    pub custom_addr: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            host: "127.0.0.1".into(),
            port: 9090,
            port_end: 9199,
            key: String::new(),
            workdir: None,
            max_packet_bytes: DEFAULT_MAX_PACKET_BYTES,
            tracker: None,
            custom_addr: None,
        }
    }
}

/// State shared by the accept loop, the sessions and the tracker link.
pub(crate) struct Shared {
    pub(crate) config: ServerConfig,
    pub(crate) port: u16,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) active: AtomicUsize,
    pub(crate) served: AtomicU64,
    /// Match keys handed out through the tracker (newest last).
    pub(crate) match_keys: Mutex<VecDeque<String>>,
}

/// A running server; [`Server::stop`] (or dropping it) stops accepting and joins the loop.
pub struct Server {
    shared: Arc<Shared>,
    accept: AcceptThread,
}

impl Server {
    /// Binds the first free port of `[port, port_end)` and starts serving.
    pub fn start(config: ServerConfig) -> Result<Server> {
        let listener = bind(&config.host, config.port, config.port_end)?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::runtime_error(format!("RPC server address: {e}")))?;
        let shared = Arc::new(Shared {
            port: addr.port(),
            config,
            stop: Arc::new(AtomicBool::new(false)),
            active: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            match_keys: Mutex::new(VecDeque::new()),
        });
        if let Some(t) = shared.config.tracker.clone() {
            crate::tracker::register_server(shared.clone(), t);
        }
        let s = shared.clone();
        let accept =
            AcceptThread::spawn("kiln-rpc-accept", addr, shared.stop.clone(), move || {
                accept_loop(listener, s)
            })?;
        Ok(Server { shared, accept })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.accept.addr()
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr().port()
    }

    /// Sessions being served now.
    pub fn active_sessions(&self) -> usize {
        self.shared.active.load(Ordering::SeqCst)
    }

    /// Sessions served since the start (finished ones).
    pub fn served_sessions(&self) -> u64 {
        self.shared.served.load(Ordering::SeqCst)
    }

    /// Stops accepting connections (sessions in progress run to their end).
    pub fn stop(&mut self) {
        self.accept.stop();
    }

    /// Blocks until the server stops (for the command line).
    pub fn wait(mut self) {
        self.accept.wait();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = conn else { continue };
        let s = shared.clone();
        s.active.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name("kiln-rpc-session".into())
            .spawn(move || {
                let peer = stream
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                if let Err(e) = serve_connection(stream, &s) {
                    eprintln!("kiln rpc: session from {peer} ended: {}", e.message());
                }
                s.active.fetch_sub(1, Ordering::SeqCst);
                s.served.fetch_add(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The session time limit a client asks for with `-timeout=S` (seconds) in its key, if any.
pub fn session_timeout(client_key: &str) -> Option<Duration> {
    client_key
        .split_whitespace()
        .find_map(|w| w.strip_prefix("-timeout="))
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Duration::from_secs_f64(s.min(1e9)))
}

/// Whether a client's key (first word of what it sent) is acceptable.
fn key_matches(shared: &Shared, client_key: &str) -> bool {
    let word = client_key.split_whitespace().next().unwrap_or("");
    let Some(k) = word.strip_prefix("client:") else {
        return false;
    };
    if k == shared.config.key {
        return true;
    }
    let keys = shared.match_keys.lock().recover();
    keys.iter().any(|m| m == k)
}

fn serve_connection(mut stream: TcpStream, shared: &Shared) -> Result<()> {
    let io = |e: std::io::Error| Error::runtime_error(format!("RPC I/O: {e}"));
    stream.set_nodelay(true).map_err(io)?;
    // A client gets a few seconds for the handshake; a session itself has no time limit.
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(io)?;
    if read_i32(&mut stream, "magic")? != RPC_MAGIC {
        return Err(Error::value_error("not an RPC client (bad magic)"));
    }
    let key = read_key(&mut stream)?;
    if !key_matches(shared, &key) {
        let _ = stream.write_all(&RPC_CODE_MISMATCH.to_le_bytes());
        return Err(Error::value_error("refused a client with a wrong key"));
    }
    let mut reply = RPC_CODE_SUCCESS.to_le_bytes().to_vec();
    reply.extend(key_bytes(&format!("server:{}", shared.config.key)));
    stream.write_all(&reply).map_err(io)?;
    stream.set_read_timeout(None).map_err(io)?;
    let dir = make_session_dir(shared)?;
    // `-timeout=S` in the client's key (TVM's `session_timeout`): the connection is shut down
    // after S seconds, which ends the session at its next read.
    let watchdog = session_timeout(&key)
        .map(|limit| {
            let (done, wait) = std::sync::mpsc::channel::<()>();
            let socket = stream.try_clone().map_err(io)?;
            let thread = std::thread::Builder::new()
                .name("kiln-rpc-timeout".into())
                .spawn(move || {
                    if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                        wait.recv_timeout(limit)
                    {
                        let _ = socket.shutdown(std::net::Shutdown::Both);
                    }
                })
                .map_err(|e| Error::runtime_error(format!("RPC timeout thread: {e}")))?;
            Ok::<_, Error>((done, thread))
        })
        .transpose()?;
    let end = {
        let mut session = ServerSession::new(dir.path(), shared.config.max_packet_bytes);
        let mut buffered = BufStream::new(&stream);
        session.serve(&mut buffered)
        // The session (handles, modules, memory) is released here, before its folder goes.
    };
    if let Some((done, thread)) = watchdog {
        drop(done);
        let _ = thread.join();
    }
    drop(dir);
    match end {
        SessionEnd::Clean => Ok(()),
        SessionEnd::Failed(e) => Err(e),
    }
}

/// The session's scratch folder, in the configured work directory (default: the system's
/// temporary directory); removed when dropped.
fn make_session_dir(shared: &Shared) -> Result<TempDir> {
    let base = shared
        .config
        .workdir
        .clone()
        .unwrap_or_else(std::env::temp_dir);
    TempDir::new_in(&base, "rpc")
}

/// A socket with buffered reads and writes (writes are flushed after each reply).
struct BufStream<'a> {
    reader: std::io::BufReader<&'a TcpStream>,
    writer: std::io::BufWriter<&'a TcpStream>,
}

impl<'a> BufStream<'a> {
    fn new(s: &'a TcpStream) -> Self {
        BufStream {
            reader: std::io::BufReader::with_capacity(1 << 16, s),
            writer: std::io::BufWriter::with_capacity(1 << 16, s),
        }
    }
}

impl std::io::Read for BufStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reader.read(buf)
    }
}

impl Write for BufStream<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}

/// Serves one session over an in-memory stream (for tests and fuzzing of the dispatch).
pub fn serve_bytes(input: &[u8], dir: &std::path::Path) -> Vec<u8> {
    struct Duplex<'a> {
        input: &'a [u8],
        output: Vec<u8>,
    }
    impl std::io::Read for Duplex<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.input.read(buf)
        }
    }
    impl Write for Duplex<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut d = Duplex {
        input,
        output: Vec::new(),
    };
    let mut s = ServerSession::new(dir, crate::protocol::DEFAULT_MAX_PACKET_BYTES);
    let _ = s.serve(&mut d);
    d.output
}
