//! Linking a shared library (seed 000's `create_shared`) through Kiln's one toolchain,
//! [`kiln_runtime::toolchain`]: `cc -shared -fPIC -o out.so <objects> <C sources> [blob] <options>
//! -lm`. The library blob (`__tvm_ffi__library_bin`) is embedded by the toolchain's
//! [`write_blob_source`](kiln_runtime::toolchain::write_blob_source) (an `.incbin` assembly
//! file on ELF targets, so a large device blob costs no C compilation).

use kiln_ffi::Result;
use kiln_runtime::toolchain::{self, TempDir};
use std::path::{Path, PathBuf};

pub use kiln_runtime::toolchain::{c_compiler, link_relocatable};

/// What [`link_shared`] adds to the objects.
#[derive(Clone, Debug, Default)]
pub struct LinkOptions {
    /// C (or assembly) sources compiled and linked in the same command.
    pub sources: Vec<PathBuf>,
    /// The serialized module tree to embed as `__tvm_ffi__library_bin` (bytes as the runtime's
    /// blob writer produces them, length prefix included).
    pub library_bin: Option<Vec<u8>>,
    /// Extra compiler arguments (`-O2`, ...), after the inputs (`-lm` always comes last).
    pub cc_options: Vec<String>,
    /// The compiler to run (default: `$CC`, else `cc`).
    pub cc: Option<String>,
}

/// Links `objects` (and `options.sources`, and the blob) into the shared library `out` with
/// `cc -shared -fPIC`. A missing input, a bad blob, and a compiler that cannot start or fails
/// are errors; a failed compiler shows the command line and everything it printed.
pub fn link_shared(objects: &[PathBuf], out: &Path, options: &LinkOptions) -> Result<()> {
    let scratch;
    let mut inputs: Vec<PathBuf> = objects.iter().chain(&options.sources).cloned().collect();
    if let Some(blob) = &options.library_bin {
        scratch = TempDir::new("link")?;
        inputs.push(toolchain::write_blob_source(scratch.path(), blob, false)?);
    }
    let cc = options.cc.clone().unwrap_or_else(c_compiler);
    toolchain::link_shared_with(&cc, out, &inputs, &options.cc_options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_shows_command_and_compiler_output() {
        let scratch = TempDir::new("link-test").unwrap();
        let src = scratch.path().join("bad.c");
        std::fs::write(&src, "int f( { return 0; }\n").unwrap();
        let out = scratch.path().join("libbad.so");
        let opts = LinkOptions {
            sources: vec![src],
            ..Default::default()
        };
        let e = link_shared(&[], &out, &opts).unwrap_err();
        let m = e.message();
        assert!(m.contains("-shared -fPIC -o"), "{m}");
        assert!(m.contains("bad.c"), "{m}");
        assert!(m.contains("error"), "compiler output is shown: {m}");

        let missing = link_shared(
            &[scratch.path().join("nope.o")],
            &out,
            &LinkOptions::default(),
        );
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
        let dir = TempDir::new("link-test").unwrap();
        let e =
            toolchain::write_blob_source(dir.path(), &[1, 0, 0, 0, 0, 0, 0, 0], false).unwrap_err();
        assert!(e.message().contains("length"), "{}", e.message());
    }
}
