//! Linking a shared library with the system C compiler (seed 000's `create_shared`):
//! `cc -shared -fPIC -o out.so <objects> <C sources> [blob object] <options>`.
//!
//! The library blob (`__tvm_ffi__library_bin`) is turned into an object by LLVM
//! ([`library_bin_object`]) rather than into a C array, so linking a large device blob costs no
//! C compilation.

use crate::llvm::abi::FfiAbi;
use crate::llvm::{symbols, LlvmTarget};
use inkwell::context::Context;
use kiln_ffi::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// What [`link_shared`] adds to the objects.
#[derive(Clone, Debug, Default)]
pub struct LinkOptions {
    /// C (or assembly) sources compiled and linked in the same command.
    pub sources: Vec<PathBuf>,
    /// The serialized module tree to embed as `__tvm_ffi__library_bin` (bytes as the runtime's
    /// blob writer produces them, length prefix included).
    pub library_bin: Option<Vec<u8>>,
    /// The target the blob object is generated for (default: the host).
    pub blob_target: Option<crate::target::Target>,
    /// Extra compiler arguments (`-O2`, `-lm`, ...), after the inputs.
    pub cc_options: Vec<String>,
    /// The compiler to run (default: `$CC`, else `cc`).
    pub cc: Option<String>,
}

/// The C compiler: `$CC`, else `cc`.
pub fn c_compiler() -> String {
    std::env::var("CC")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "cc".to_string())
}

fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=+:,@".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// An object file holding only `__tvm_ffi__library_bin` with `blob`, for `target` (an `llvm`
/// target; the host when `None`).
pub fn library_bin_object(blob: &[u8], target: Option<&crate::target::Target>) -> Result<Vec<u8>> {
    let machine = match target {
        Some(t) => LlvmTarget::new(t)?,
        None => LlvmTarget::host()?,
    };
    let ctx = Context::create();
    let module = machine.create_module(&ctx, "kiln_library_bin");
    let abi = FfiAbi::new(&ctx);
    symbols::add_library_bin(&module, &abi, blob)?;
    crate::llvm::verify(&module)?;
    machine.emit_object(&module)
}

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kiln-link-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| {
            Error::runtime_error(format!(
                "cannot create scratch directory {}: {e}",
                dir.display()
            ))
        })?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Links `objects` (and `options.sources`, and the blob) into the shared library `out` with
/// `cc -shared -fPIC`. A compiler that cannot start or fails is an error showing the command
/// line and everything the compiler printed.
pub fn link_shared(objects: &[PathBuf], out: &Path, options: &LinkOptions) -> Result<()> {
    for input in objects.iter().chain(&options.sources) {
        if !input.is_file() {
            return Err(Error::value_error(format!(
                "cannot link {}: input {} does not exist",
                out.display(),
                input.display()
            )));
        }
    }
    let scratch;
    let mut inputs: Vec<PathBuf> = objects.iter().chain(&options.sources).cloned().collect();
    if let Some(blob) = &options.library_bin {
        scratch = Scratch::new()?;
        let path = scratch.0.join("library_bin.o");
        let bytes = library_bin_object(blob, options.blob_target.as_ref())?;
        std::fs::write(&path, bytes)
            .map_err(|e| Error::runtime_error(format!("cannot write {}: {e}", path.display())))?;
        inputs.push(path);
    }
    let cc = options.cc.clone().unwrap_or_else(c_compiler);
    let mut args: Vec<String> = vec!["-shared".into(), "-fPIC".into(), "-o".into()];
    args.push(out.display().to_string());
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(options.cc_options.iter().cloned());
    run_compiler(&cc, &args, out)
}

/// Links the object files `objects` into ONE relocatable object `out` (`cc -r -nostdlib`): what
/// a module holding several compiled objects writes as its `o` format.
pub fn link_relocatable(objects: &[PathBuf], out: &Path) -> Result<()> {
    let mut args: Vec<String> = vec!["-r".into(), "-nostdlib".into(), "-o".into()];
    args.push(out.display().to_string());
    args.extend(objects.iter().map(|p| p.display().to_string()));
    run_compiler(&c_compiler(), &args, out)
}

/// Runs the compiler `cc` with `args` to make `out`; a compiler that cannot start or fails is
/// an error showing the command line and everything the compiler printed.
fn run_compiler(cc: &str, args: &[String], out: &Path) -> Result<()> {
    let line = std::iter::once(cc)
        .chain(args.iter().map(String::as_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ");
    let output = Command::new(cc).args(args).output().map_err(|e| {
        Error::runtime_error(format!(
            "linking {} failed: cannot run `{line}`: {e}",
            out.display()
        ))
    })?;
    if output.status.success() {
        return Ok(());
    }
    Err(Error::runtime_error(format!(
        "linking {} failed ({}): `{line}`\n{}{}",
        out.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_shows_command_and_compiler_output() {
        let scratch = Scratch::new().unwrap();
        let src = scratch.0.join("bad.c");
        std::fs::write(&src, "int f( { return 0; }\n").unwrap();
        let out = scratch.0.join("libbad.so");
        let opts = LinkOptions {
            sources: vec![src],
            ..Default::default()
        };
        let e = link_shared(&[], &out, &opts).unwrap_err();
        let m = e.message();
        assert!(m.contains("-shared -fPIC -o"), "{m}");
        assert!(m.contains("bad.c"), "{m}");
        assert!(m.contains("error"), "compiler output is shown: {m}");

        let missing = link_shared(&[scratch.0.join("nope.o")], &out, &LinkOptions::default());
        assert!(missing.unwrap_err().message().contains("nope.o"));

        let no_cc = LinkOptions {
            cc: Some("kiln-no-such-compiler".into()),
            ..Default::default()
        };
        let e = link_shared(&[], &out, &no_cc).unwrap_err();
        assert!(e.message().contains("cannot run `kiln-no-such-compiler"));
    }

    #[test]
    fn blob_prefix_is_checked() {
        let e = library_bin_object(&[1, 0, 0, 0, 0, 0, 0, 0], None).unwrap_err();
        assert!(e.message().contains("length"), "{}", e.message());
    }
}
