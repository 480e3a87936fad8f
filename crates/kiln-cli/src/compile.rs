//! `kiln compile`: ONNX model → deployable shared library (load, convert, optimize, codegen,
//! link), with a progress bar over the steps and a summary line at the end.

use indicatif::{ProgressBar, ProgressStyle};
use kiln_graph::transform::PassContext;
use kiln_runtime::module::{export_library, ExportOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The options of `kiln compile`.
pub struct CompileArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// The library to write (`.so`, `.dylib`, `.dll` or `.tar`).
    pub output: PathBuf,
    /// The target strings (`llvm`, `llvm -mcpu=native`, ...): one, or several for one library
    /// with a code variant per target.
    pub targets: Vec<String>,
    /// `--input-shape` flags (`name=1,3,224,224`).
    pub input_shapes: Vec<String>,
    /// `--dim` flags (`seq=16,64,128`).
    pub dims: Vec<String>,
    /// The optimization level, 0 to 3.
    pub opt_level: u8,
    /// A tuning-records file of `kiln tune`.
    pub tuning_records: Option<PathBuf>,
}

/// The step names, in order.
const STEPS: [&str; 5] = ["load", "convert", "optimize", "codegen", "link"];

/// A progress bar over [`STEPS`] (hidden when stderr is not a terminal).
fn progress() -> ProgressBar {
    let pb = ProgressBar::new(STEPS.len() as u64);
    pb.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:20} {pos}/{len} {msg}")
            .expect("a valid progress template"),
    );
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// Runs `f` as step `i` of the bar; a failing step's error names the step.
fn step<T>(pb: &ProgressBar, i: usize, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    pb.set_message(format!("{}...", STEPS[i]));
    let out = f().map_err(|e| format!("{} failed: {e}", STEPS[i]));
    pb.inc(1);
    out
}

/// Runs `kiln compile`.
pub fn run(args: &CompileArgs) -> Result<(), String> {
    if args.opt_level > 3 {
        return Err(format!(
            "-O{} is not an optimization level (0 to 3)",
            args.opt_level
        ));
    }
    check_output(&args.output)?;
    let shapes = kiln_onnx::parse_input_shape_flags(&args.input_shapes)
        .map_err(|e| format!("bad --input-shape: {e}"))?;
    let start = Instant::now();
    let pb = progress();
    let result = build_library(args, &shapes, &pb);
    pb.finish_and_clear();
    result?;
    let size = std::fs::metadata(&args.output)
        .map_err(|e| format!("cannot stat {}: {e}", args.output.display()))?
        .len();
    let targets: Vec<String> = args.targets.iter().map(|t| format!("{t:?}")).collect();
    println!(
        "{} ({}, target {}, -O{}) compiled in {:.2} s",
        args.output.display(),
        human_size(size),
        targets.join(" + "),
        args.opt_level,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The pipeline of `kiln compile` (load, convert, optimize, codegen, link) with `args` and the
/// parsed `shapes`, each step advancing `pb` (`ProgressBar::hidden()` for none). Writes
/// `args.output`; prints nothing.
pub fn build_library(
    args: &CompileArgs,
    shapes: &kiln_onnx::InputShapes,
    pb: &ProgressBar,
) -> Result<(), String> {
    let model = step(pb, 0, || {
        kiln_onnx::load_model(&args.model).map_err(|e| e.to_string())
    })?;
    let targets: Vec<&str> = args.targets.iter().map(String::as_str).collect();
    let dims = kiln_onnx::parse_dim_flags(&args.dims).map_err(|e| format!("bad --dim: {e}"))?;
    let converted = step(pb, 1, || {
        kiln_onnx::convert(&model, shapes, &dims, &Default::default()).map_err(|e| e.to_string())
    })?;
    // Tuning records answer the schedules' knobs for the whole build (one CPU target).
    let _tuned = match &args.tuning_records {
        Some(path) => {
            let [target] = targets.as_slice() else {
                return Err("--tuning-records needs exactly one --target".into());
            };
            let records = crate::tune::load_records(path, target)?;
            Some(
                kiln_topi::tuning::Scope {
                    records,
                    ..Default::default()
                }
                .enter(),
            )
        }
        None => None,
    };
    let (module, params) = match converted {
        kiln_onnx::Converted::Graph(m, params) => (m, params),
        kiln_onnx::Converted::Program(program) => {
            // Control flow decided at run time, or several shapes: a program for the virtual
            // machine (its segments optimized as they are built).
            let ctx = PassContext::with_opt_level(args.opt_level as i64);
            let factory = step(pb, 3, || {
                kiln_graph::build::build_program(&program, &targets, &ctx)
                    .map_err(|e| e.to_string())
            })?;
            return step(pb, 4, || {
                write_atomically(&args.output, |tmp| {
                    export_library(&factory, tmp, &ExportOptions::default())
                        .map_err(|e| e.to_string())
                })
            });
        }
    };
    let ctx = kiln_graph::build::target_pass_context(
        &PassContext::with_opt_level(args.opt_level as i64),
        &targets,
    )
    .map_err(|e| e.to_string())?;
    let (module, params) = step(pb, 2, || {
        kiln_graph::build::optimize_with(&module, params, &ctx).map_err(|e| e.to_string())
    })?;
    let factory = step(pb, 3, || {
        kiln_graph::build::build_targets(&module, &targets, params, &ctx).map_err(|e| e.to_string())
    })?;
    step(pb, 4, || {
        write_atomically(&args.output, |tmp| {
            export_library(&factory, tmp, &ExportOptions::default()).map_err(|e| e.to_string())
        })
    })
}

/// Calls `write` with a temporary path beside `output` (same suffix, so the library format is
/// the same) and renames the result onto `output` only when it succeeds: a failed compile never
/// destroys a file already at `output`.
fn write_atomically(
    output: &Path,
    write: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<(), String> {
    if output.is_dir() {
        return Err(format!("the output {} is a directory", output.display()));
    }
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let ext = output
        .extension()
        .map(|e| e.to_string_lossy())
        .unwrap_or_default();
    let tmp = output.with_file_name(format!(".{name}.{}.tmp.{ext}", std::process::id()));
    let result = write(&tmp).and_then(|()| {
        std::fs::rename(&tmp, output)
            .map_err(|e| format!("cannot move {} to {}: {e}", tmp.display(), output.display()))
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Checks the output name early (before a long compile): a known library suffix and an
/// existing directory.
fn check_output(path: &Path) -> Result<(), String> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !matches!(ext, "so" | "dylib" | "dll" | "tar") {
        return Err(format!(
            "the output {} must end in .so, .dylib, .dll or .tar",
            path.display()
        ));
    }
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() && !d.is_dir() => Err(format!(
            "the output directory {} does not exist",
            d.display()
        )),
        _ => Ok(()),
    }
}

/// `1234567` → `1.2 MiB`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_outputs() {
        assert_eq!(human_size(10), "10 B");
        assert_eq!(human_size(2048), "2.0 KiB");
        assert!(check_output(Path::new("x.onnx")).is_err());
        assert!(check_output(Path::new("/no/such/dir/x.so")).is_err());
        assert!(check_output(Path::new("x.so")).is_ok());
    }

    #[test]
    fn failed_writes_keep_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("lib.so");
        std::fs::write(&out, b"precious").unwrap();
        let err = write_atomically(&out, |tmp| {
            std::fs::write(tmp, b"half a lib").unwrap();
            Err("link failed".into())
        });
        assert_eq!(err.unwrap_err(), "link failed");
        assert_eq!(std::fs::read(&out).unwrap(), b"precious");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_atomically(&out, |tmp| {
            std::fs::write(tmp, b"new").map_err(|e| e.to_string())
        })
        .unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(write_atomically(dir.path(), |_| Ok(()))
            .unwrap_err()
            .contains("is a directory"));
    }
}
