//! Kiln's one toolchain: scratch directories ([`TempDir`]) and, with the `compiler` feature, the
//! system C compiler as a linker ([`c_compiler`], [`link_shared`], [`link_relocatable`]), `tar`
//! ([`tar`], [`untar`]) and the library-blob embedder ([`write_blob_source`]). Loading `.o`/`.tar`
//! files, `export_library`, the code generators' modules, the CLI and the RPC server all use it.
//!
//! [`TempDir`] is always there (it costs nothing a deployed model does not already link); the
//! rest needs `compiler`, so the deployable runtime (`--no-default-features`) does not spawn
//! processes.

use kiln_ffi::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A scratch directory removed (with its contents) when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates a fresh directory named after `purpose` under the system temporary directory.
    pub fn new(purpose: &str) -> Result<TempDir> {
        TempDir::new_in(&std::env::temp_dir(), purpose)
    }

    /// Creates a fresh directory named after `purpose` in `base` (created if missing).
    pub fn new_in(base: &Path, purpose: &str) -> Result<TempDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let _ = std::fs::create_dir_all(base);
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
        Err(Error::runtime_error(format!(
            "cannot create a unique temporary directory in {}",
            base.display()
        )))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(feature = "compiler")]
mod blob_source;
#[cfg(feature = "compiler")]
mod link;
#[cfg(feature = "compiler")]
mod spawn;

#[cfg(feature = "compiler")]
pub use blob_source::{blob_asm_source, blob_c_source, write_blob_source};
#[cfg(feature = "compiler")]
pub use link::{c_compiler, link_relocatable, link_shared, link_shared_with, run, tar, untar};
