//! The system toolchain that loading `.o`/`.tar` files and `export_library` need: the C compiler
//! as a linker (`cc -shared -fPIC`), `tar`, and scratch directories.

use kiln_ffi::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// A scratch directory removed (with its contents) when dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// Creates a fresh directory under the system temporary directory.
    pub(crate) fn new(purpose: &str) -> Result<TempDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let name = format!(
                "kiln-{purpose}-{}-{}-{nanos}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            );
            let dir = base.join(name);
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(TempDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(Error::runtime_error(format!(
                        "cannot create a temporary directory in {}: {e}",
                        base.display()
                    )))
                }
            }
        }
        Err(Error::runtime_error(
            "cannot create a unique temporary directory",
        ))
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The C compiler: `$CC`, else `cc`.
pub(crate) fn c_compiler() -> String {
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
pub(crate) fn run(what: &str, program: &str, args: &[String]) -> Result<()> {
    let line = std::iter::once(program.to_string())
        .chain(args.iter().cloned())
        .map(|a| shell_quote(&a))
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| Error::runtime_error(format!("{what} failed: cannot run `{line}`: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(Error::runtime_error(format!(
        "{what} failed ({}): `{line}`\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )))
}

/// Links `inputs` (objects, C sources) into the shared library `output` with
/// `cc -shared -fPIC`, plus `options`.
pub(crate) fn link_shared(output: &Path, inputs: &[PathBuf], options: &[String]) -> Result<()> {
    let mut args: Vec<String> = vec!["-shared".into(), "-fPIC".into(), "-o".into()];
    args.push(output.display().to_string());
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(options.iter().cloned());
    run(
        &format!("linking {}", output.display()),
        &c_compiler(),
        &args,
    )
}

/// Unpacks a tar archive into `dir` with the system `tar`, returning the regular files that
/// came out (sorted).
pub(crate) fn untar(archive: &Path, dir: &Path) -> Result<Vec<PathBuf>> {
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
    files.sort();
    Ok(files)
}

/// Packs `files` into a tar archive at `output` (names without directories).
pub(crate) fn tar(output: &Path, files: &[PathBuf]) -> Result<()> {
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
