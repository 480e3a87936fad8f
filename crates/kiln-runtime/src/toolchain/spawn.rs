//! Running a program and collecting what it prints: `std::process::Command::output` cut down to
//! what [`super::run`] needs, on `posix_spawnp`. std's process support (environment capture into a
//! B-tree, pidfds, `Stdio` plumbing, status formatting) would cost about 35 KB of the deployable
//! library; this costs a few.

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
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
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
