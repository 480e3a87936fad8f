//! Running the system C compiler and `tar`: linking shared libraries and relocatable objects,
//! packing and unpacking archives. A tool that cannot start or fails is an error showing the
//! command line and everything the tool printed.

use super::spawn;
use kiln_ffi::{Error, Result};
use std::path::{Path, PathBuf};

/// The C compiler: `$CC`, else `cc`.
pub fn c_compiler() -> String {
    std::env::var("CC")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "cc".to_string())
}

fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=+:,@".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// Runs a command; a failure to start or a non-zero exit is an error that shows the command line
/// and everything it printed.
pub fn run(what: &str, program: &str, args: &[String]) -> Result<()> {
    let line = std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ");
    let out = spawn::output(program, args)
        .map_err(|e| Error::runtime_error(format!("{what} failed: cannot run `{line}`: {e}")))?;
    if out.success() {
        return Ok(());
    }
    Err(Error::runtime_error(format!(
        "{what} failed ({}): `{line}`\n{}",
        out.describe_status(),
        String::from_utf8_lossy(&out.text)
    )))
}

/// Links `inputs` (objects, C or assembly sources) into the shared library `output` with
/// `$CC -shared -fPIC` (see [`c_compiler`]), plus `options`, then `-lm`.
pub fn link_shared(output: &Path, inputs: &[PathBuf], options: &[String]) -> Result<()> {
    link_shared_with(&c_compiler(), output, inputs, options)
}

/// [`link_shared`] with the compiler `compiler` instead of `$CC`. An input that does not exist
/// is an error naming it, before the compiler runs.
pub fn link_shared_with(
    compiler: &str,
    output: &Path,
    inputs: &[PathBuf],
    options: &[String],
) -> Result<()> {
    for input in inputs {
        if !input.is_file() {
            return Err(Error::value_error(format!(
                "cannot link {}: input {} does not exist",
                output.display(),
                input.display()
            )));
        }
    }
    let mut args: Vec<String> = vec!["-shared".into(), "-fPIC".into(), "-o".into()];
    args.push(output.display().to_string());
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(options.iter().cloned());
    // Generated kernels call `expf` and friends: the library must record libm as NEEDED (after
    // the inputs, so `--as-needed` keeps it), or a program that links only the runtime fails
    // with "undefined symbol: expf" when it loads the library.
    args.push("-lm".into());
    run(&format!("linking {}", output.display()), compiler, &args)
}

/// Links the object files `objects` into ONE relocatable object `output` (`$CC -r -nostdlib`):
/// what a module holding several compiled objects writes as its `o` format.
pub fn link_relocatable(objects: &[PathBuf], output: &Path) -> Result<()> {
    let mut args: Vec<String> = vec!["-r".into(), "-nostdlib".into(), "-o".into()];
    args.push(output.display().to_string());
    args.extend(objects.iter().map(|p| p.display().to_string()));
    run(
        &format!("linking {}", output.display()),
        &c_compiler(),
        &args,
    )
}

/// Unpacks a tar archive into `dir` with the system `tar`, returning the regular files that
/// came out (sorted).
pub fn untar(archive: &Path, dir: &Path) -> Result<Vec<PathBuf>> {
    run(
        &format!("unpacking {}", archive.display()),
        "tar",
        &[
            "-xf".into(),
            archive.display().to_string(),
            "-C".into(),
            dir.display().to_string(),
        ],
    )?;
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .map_err(|e| Error::runtime_error(format!("reading {}: {e}", d.display())))?;
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => files.push(path),
                _ => {}
            }
        }
    }
    // Distinct paths, so an unstable sort gives the same order (with less code).
    files.sort_unstable();
    Ok(files)
}

/// Packs `files` into a tar archive at `output` (names without directories).
pub fn tar(output: &Path, files: &[PathBuf]) -> Result<()> {
    let mut args = vec!["-cf".to_string(), output.display().to_string()];
    for f in files {
        let dir = f.parent().unwrap_or(Path::new("."));
        let name = f.file_name().unwrap_or_default();
        args.extend([
            "-C".to_string(),
            dir.display().to_string(),
            name.to_string_lossy().into_owned(),
        ]);
    }
    run(&format!("writing {}", output.display()), "tar", &args)
}
