//! `kiln`: Kiln's command line.

mod bench;
mod compile;
mod demo;
mod inspect;
mod npy;
mod rpc;
mod run;
mod tune;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
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
    /// Runs the bundled example end to end: compiles examples/model/model.onnx, runs it, checks
    /// the output against onnxruntime's and prints the latency.
    Demo {
        /// The directory of model.onnx, input.npy and expected.npy (default: the bundled one).
        #[arg(long)]
        model_dir: Option<PathBuf>,
    },
    /// Lists the registered global functions (optionally those starting with a prefix).
    Globals {
        /// Only names starting with this prefix.
        prefix: Option<String>,
    },
    /// Compiles an ONNX model into a deployable shared library.
    Compile {
        /// The ONNX model.
        model: PathBuf,
        /// The library to write (.so, .dylib, .dll or .tar).
        #[arg(short, long)]
        output: PathBuf,
        /// The target (`llvm`, `llvm -mcpu=native`, `llvm -mcpu=x86-64-v3`, ...; `opencl` for
        /// kernels on an OpenCL device launched by host code for this CPU). Repeat it for one
        /// library with code for each CPU, the loader running the best one the host can
        /// (`--target "llvm -mcpu=x86-64-v3" --target "llvm -mcpu=x86-64-v4"`).
        #[arg(long, default_values_t = ["llvm -mcpu=native".to_string()])]
        target: Vec<String>,
        /// Static input shapes, `name=1,3,224,224` (repeatable; `a=1,3;b=2` also works).
        #[arg(long = "input-shape")]
        input_shape: Vec<String>,
        /// Values of a symbolic dimension of the inputs, `seq=16,64,128` (repeatable): one
        /// library with code for every combination, run on the virtual machine, which picks
        /// the code for the shapes given at run time; `seq=any` leaves it to run time
        /// (kernels compiled with run-time extents).
        #[arg(long = "dim")]
        dim: Vec<String>,
        /// Optimization level, 0 to 3.
        #[arg(short = 'O', default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=3))]
        opt_level: u8,
        /// Schedule choices measured by `kiln tune` on this CPU (layers it does not hold, and
        /// records of another CPU, take the heuristics).
        #[arg(long = "tuning-records")]
        tuning_records: Option<PathBuf>,
    },
    /// Measures schedule choices for each distinct convolution and matrix product of a model
    /// on this machine and writes the best to a tuning-records file (resumable: layers already
    /// in it are kept). Time it at the thread count you deploy with (`KILN_NUM_THREADS`).
    Tune {
        /// The ONNX model.
        model: PathBuf,
        /// The tuning-records file to extend.
        #[arg(short, long)]
        records: PathBuf,
        /// The target (an LLVM CPU target).
        #[arg(long, default_value = "llvm -mcpu=native")]
        target: String,
        /// Static input shapes, `name=1,3,224,224` (repeatable).
        #[arg(long = "input-shape")]
        input_shape: Vec<String>,
        /// Values of a symbolic dimension, as for `compile` (the layers of every shape).
        #[arg(long = "dim")]
        dim: Vec<String>,
        /// Timed runs per candidate (their median counts).
        #[arg(long, default_value_t = 7)]
        runs: u32,
        /// Time candidates on an RPC server, `host:port` (its CPU is `--target`'s).
        #[arg(long = "rpc-server", conflicts_with = "rpc_tracker")]
        rpc_server: Option<String>,
        /// Time candidates on a server the RPC tracker `host:port` gives for `--rpc-key`.
        #[arg(long = "rpc-tracker", requires = "rpc_key")]
        rpc_tracker: Option<String>,
        /// The key of the RPC server (or of the tracker's queue).
        #[arg(long = "rpc-key", default_value = "")]
        rpc_key: String,
    },
    /// Runs a compiled library once (on the CPU, or the OpenCL device for an `opencl` library) and writes its outputs as `output_K.npy`.
    Run {
        /// The compiled library.
        library: PathBuf,
        /// An input from a file, `name=file.npy` (repeatable; the others are random).
        #[arg(long)]
        input: Vec<String>,
        /// Where to write the outputs.
        #[arg(long, default_value = ".")]
        output_dir: PathBuf,
        /// The seed of random inputs (default: from the clock; printed).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Times a compiled library (threads: KILN_NUM_THREADS).
    Bench {
        /// The compiled library.
        library: PathBuf,
        /// Measurements (median, min and max are over these).
        #[arg(long, default_value_t = 10)]
        repeat: u32,
        /// Runs per measurement.
        #[arg(long, default_value_t = 10)]
        number: u32,
        /// Also print the per-node time table.
        #[arg(long)]
        profile: bool,
        /// An input from a file, `name=file.npy` (repeatable; the others are random, which
        /// needs their shapes fixed).
        #[arg(long)]
        input: Vec<String>,
    },
    /// Describes a compiled library or an ONNX model.
    Inspect {
        /// A compiled library or an `.onnx` model.
        path: PathBuf,
        /// Static input shapes for converting an ONNX model, as for `compile`.
        #[arg(long = "input-shape")]
        input_shape: Vec<String>,
        /// Optimization level of the printed graph, 0 to 3.
        #[arg(short = 'O', default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=3))]
        opt_level: u8,
    },
    /// RPC server, tracker and tracker summary (wire-compatible with Apache TVM 0.27).
    Rpc {
        #[command(subcommand)]
        command: rpc::RpcCommand,
    },
    /// Prints a .npy file's dtype, shape and first values; `--copy OUT` rewrites it with Kiln's
    /// writer.
    Npy {
        /// The .npy file.
        file: PathBuf,
        /// Write the array (as read) to this file.
        #[arg(long)]
        copy: Option<PathBuf>,
    },
}

/// `kiln npy`: prints a .npy file's summary and optionally rewrites it.
fn npy_command(file: &std::path::Path, copy: Option<&std::path::Path>) -> Result<(), String> {
    let t = npy::read(file)?;
    let values = t.to_f64_vec().map_err(|e| e.to_string())?;
    let head: Vec<String> = values.iter().take(8).map(|v| v.to_string()).collect();
    let more = if values.len() > 8 { ", ..." } else { "" };
    println!(
        "{}: {} {:?} [{}{more}]",
        file.display(),
        t.dtype(),
        t.shape(),
        head.join(", ")
    );
    if let Some(out) = copy {
        npy::write(out, &t)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    // Output piped into a reader that stops early (`kiln inspect ... | head`) ends the process
    // quietly, as for other command-line tools, instead of failing a print.
    // SAFETY: restores the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    kiln::link_all();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo { model_dir } => demo::run(model_dir.as_deref()).map_err(|e| e.to_string()),
        Command::Compile {
            model,
            output,
            target,
            input_shape,
            dim,
            opt_level,
            tuning_records,
        } => compile::run(&compile::CompileArgs {
            model,
            output,
            targets: target,
            input_shapes: input_shape,
            dims: dim,
            opt_level,
            tuning_records,
        }),
        Command::Tune {
            model,
            records,
            target,
            input_shape,
            dim,
            runs,
            rpc_server,
            rpc_tracker,
            rpc_key,
        } => tune::runner(rpc_server.as_deref(), rpc_tracker.as_deref(), &rpc_key).and_then(
            |runner| {
                tune::run(tune::TuneArgs {
                    model,
                    input_shapes: input_shape,
                    dims: dim,
                    options: kiln::tune::TuneOptions {
                        records,
                        target,
                        input_shapes: Default::default(),
                        dims: Default::default(),
                        runs,
                        runner,
                    },
                })
            },
        ),
        Command::Run {
            library,
            input,
            output_dir,
            seed,
        } => run::run(&run::RunArgs {
            library,
            inputs: input,
            output_dir,
            seed,
        }),
        Command::Bench {
            library,
            repeat,
            number,
            profile,
            input,
        } => bench::run(&bench::BenchArgs {
            library,
            repeat,
            number,
            profile,
            inputs: input,
        }),
        Command::Inspect {
            path,
            input_shape,
            opt_level,
        } => inspect::run(&path, &input_shape, opt_level),
        Command::Rpc { command } => rpc::run(command),
        Command::Npy { file, copy } => npy_command(&file, copy.as_deref()),
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

/// The message for a library that failed to load: the runtime's own, which names the file,
/// or that message prefixed with the path when it does not.
pub(crate) fn load_error(path: &std::path::Path, e: &kiln_ffi::Error) -> String {
    let msg = e.to_string();
    let shown = path.display().to_string();
    if msg.contains(&shown) {
        msg
    } else {
        format!("cannot load {shown}: {msg}")
    }
}
