//! `kiln`: Kiln's command line.

mod demo;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Kiln: a deep learning compiler and runtime that speaks Apache TVM's C ABI.
#[derive(Parser)]
#[command(name = "kiln", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the bundled example end to end and checks its results.
    Demo,
    /// Lists the registered global functions (optionally those starting with a prefix).
    Globals {
        /// Only names starting with this prefix.
        prefix: Option<String>,
    },
}

fn main() -> ExitCode {
    kiln::link_all();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo => demo::run(),
        Command::Globals { prefix } => {
            for name in kiln_ffi::registry::names() {
                if prefix.as_deref().is_none_or(|p| name.starts_with(p)) {
                    println!("{name}");
                }
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kiln: {e}");
            ExitCode::FAILURE
        }
    }
}
