//! The system toolchain that loading `.o`/`.tar` files and `export_library` need: the C compiler
//! as a linker (`cc -shared -fPIC`), `tar`, and scratch directories.

use kiln_ffi::{Error, Result};
use std::path::{Path, PathBuf};
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

/// Running a program and collecting what it prints: `std::process::Command::output` cut down to
/// what [`run`] needs, on `posix_spawnp`. std's process support (environment capture into a
/// B-tree, pidfds, `Stdio` plumbing, status formatting) would cost about 35 KB of the deployable
/// library; this costs a few.
mod spawn {
    use std::ffi::{c_char, c_int, CString};
    use std::io::{self, Read};
    use std::os::fd::{FromRawFd, OwnedFd};

    extern "C" {
        /// The process environment (POSIX); children inherit it as it is at the call.
        static environ: *const *mut c_char;
    }

    /// A finished child: its wait status and everything it wrote to stdout and stderr (one pipe,
    /// so the two come in the order they were written).
    pub(super) struct Output {
        status: c_int,
        pub(super) text: Vec<u8>,
    }

    impl Output {
        /// True when the child exited with status 0.
        pub(super) fn success(&self) -> bool {
            libc::WIFEXITED(self.status) && libc::WEXITSTATUS(self.status) == 0
        }

        /// How the child ended, as `std::process::ExitStatus` prints it.
        pub(super) fn describe_status(&self) -> String {
            if libc::WIFEXITED(self.status) {
                format!("exit status: {}", libc::WEXITSTATUS(self.status))
            } else if libc::WIFSIGNALED(self.status) {
                format!("signal: {}", libc::WTERMSIG(self.status))
            } else {
                format!("wait status: {}", self.status)
            }
        }
    }

    fn check(rc: c_int) -> io::Result<()> {
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(rc))
        }
    }

    /// Spawn file actions, destroyed on drop.
    struct Actions(libc::posix_spawn_file_actions_t);

    impl Drop for Actions {
        fn drop(&mut self) {
            // SAFETY: initialised in `output` before this value was made.
            unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
        }
    }

    /// Spawn attributes, destroyed on drop.
    struct Attrs(libc::posix_spawnattr_t);

    impl Drop for Attrs {
        fn drop(&mut self) {
            // SAFETY: initialised in `output` before this value was made.
            unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
        }
    }

    /// Runs `program` (searched in `PATH`) with `args` and waits for it: stdin is `/dev/null`,
    /// stdout and stderr go to one pipe that is read to the end; signals are unblocked and
    /// `SIGPIPE` has its default action in the child (as with `std::process::Command`).
    pub(super) fn output(program: &str, args: &[String]) -> io::Result<Output> {
        let nul = |_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "nul byte in a command argument",
            )
        };
        let program = CString::new(program).map_err(nul)?;
        let args = args
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(nul)?;
        let mut argv: Vec<*mut c_char> = Vec::with_capacity(args.len() + 2);
        argv.push(program.as_ptr() as *mut c_char);
        argv.extend(args.iter().map(|a| a.as_ptr() as *mut c_char));
        argv.push(std::ptr::null_mut());

        let mut fds = [0 as c_int; 2];
        // SAFETY: `fds` has room for the two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 just opened both descriptors; each is owned once.
        let (reader, writer) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let writer_fd = fds[1];

        // SAFETY: the spawn objects are initialised before use and destroyed once (by their
        // wrappers); every pointer handed to posix_spawnp lives until it returns.
        let pid = unsafe {
            let mut actions = Actions(std::mem::zeroed());
            check(libc::posix_spawn_file_actions_init(&mut actions.0))?;
            check(libc::posix_spawn_file_actions_addopen(
                &mut actions.0,
                0,
                c"/dev/null".as_ptr(),
                libc::O_RDONLY,
                0,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                &mut actions.0,
                writer_fd,
                1,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                &mut actions.0,
                writer_fd,
                2,
            ))?;

            let mut attrs = Attrs(std::mem::zeroed());
            check(libc::posix_spawnattr_init(&mut attrs.0))?;
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            check(libc::posix_spawnattr_setsigmask(&mut attrs.0, &set))?;
            libc::sigaddset(&mut set, libc::SIGPIPE);
            check(libc::posix_spawnattr_setsigdefault(&mut attrs.0, &set))?;
            check(libc::posix_spawnattr_setflags(
                &mut attrs.0,
                (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as _,
            ))?;

            let mut pid: libc::pid_t = 0;
            check(libc::posix_spawnp(
                &mut pid,
                program.as_ptr(),
                &actions.0,
                &attrs.0,
                argv.as_ptr(),
                environ,
            ))?;
            pid
        };
        // Only the child may hold the write end now, so the read below ends when it exits.
        drop(writer);
        let mut text = Vec::new();
        let read = std::fs::File::from(reader).read_to_end(&mut text);
        let mut status: c_int = 0;
        loop {
            // SAFETY: `pid` is our child, not yet waited for.
            if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        read?;
        Ok(Output { status, text })
    }
}

/// Links `inputs` (objects, C sources) into the shared library `output` with
/// `cc -shared -fPIC`, plus `options`, then `-lm`.
pub(crate) fn link_shared(output: &Path, inputs: &[PathBuf], options: &[String]) -> Result<()> {
    let mut args: Vec<String> = vec!["-shared".into(), "-fPIC".into(), "-o".into()];
    args.push(output.display().to_string());
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(options.iter().cloned());
    // Generated kernels call `expf` and friends: the library must record libm as NEEDED (after
    // the inputs, so `--as-needed` keeps it), or a program that links only the runtime fails
    // with "undefined symbol: expf" when it loads the library.
    args.push("-lm".into());
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
    // Distinct paths, so an unstable sort gives the same order (with less code).
    files.sort_unstable();
    Ok(files)
}

/// Packs `files` into a tar archive at `output` (names without directories).
#[cfg(feature = "compiler")]
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
