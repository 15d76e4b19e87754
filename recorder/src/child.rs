//! The recorded command as a child process, and the signals sonda passes on to it.
//!
//! Like `perf record`, sonda does not die of Ctrl-C or SIGTERM: it passes the signal on
//! to the command and keeps recording until the command exits, then finishes the trace.
//! The terminal already delivers Ctrl-C (SIGINT), Ctrl-\ (SIGQUIT) and hang-ups to the
//! whole foreground process group, the command included, so a signal the kernel sent
//! on the terminal's behalf (`si_code == SI_KERNEL`) is not sent again; one sent to
//! sonda alone (`kill`, `si_code == SI_USER`) is forwarded. (A `kill` of the whole group
//! reaches the command twice; a terminal cannot tell us apart from that.)
//!
//! The command must outlive sonda if sonda is killed: it stays in sonda's process
//! group (so the terminal reaches it) but gets no parent-death signal, and its standard
//! streams are sonda's own (the terminal), not pipes to sonda that could break.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::sys::{self, c_int, SignalHandler};

/// The child's pid once started, 0 before (read by the signal handler).
static CHILD: AtomicI32 = AtomicI32::new(0);
/// A signal to forward that came before the child existed.
static PENDING: AtomicI32 = AtomicI32::new(0);

/// The signals sonda survives and passes on.
const FORWARDED: [c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Passes signals on to the child.
struct Forward;

impl SignalHandler for Forward {
    /// Runs in signal context: only async-signal-safe calls (kill, getpgid, getpgrp)
    /// and atomics.
    fn on_signal(sig: c_int, code: c_int) {
        let child = CHILD.load(Ordering::SeqCst);
        if child <= 0 {
            if code != libc::SI_KERNEL {
                PENDING.store(sig, Ordering::SeqCst);
            }
            return;
        }
        let child = child as u32;
        if code != libc::SI_KERNEL || !sys::in_our_process_group(child) {
            // `child` is our unreaped child, so the pid cannot have been reused.
            let _ = sys::send_signal(child, sig);
        }
    }
}

/// Installs the forwarding handlers (before starting the child, so that a signal in
/// between is not fatal).
pub fn install_forwarding() -> io::Result<()> {
    sys::catch_signals::<Forward>(&FORWARDED)
}

/// The running command.
pub struct Child {
    inner: std::process::Child,
}

impl Child {
    /// Starts `program` with `argv[0]` = `argv0`, `args`, `SONDA_SHM` set to the buffer
    /// file `shm` (for the C API of native programs), and `JAVA_TOOL_OPTIONS` set to
    /// `java_tool_options` if given. Signals sonda gets from now on are passed on.
    pub fn spawn(
        program: &Path,
        argv0: &OsStr,
        args: &[OsString],
        shm: &Path,
        java_tool_options: Option<&OsStr>,
    ) -> io::Result<Child> {
        let mut cmd = Command::new(program);
        cmd.arg0(argv0).args(args);
        cmd.env(crate::launch::SHM_ENV, shm);
        if let Some(jto) = java_tool_options {
            cmd.env(crate::launch::JAVA_TOOL_OPTIONS, jto);
        }
        // std restores SIGPIPE to its default in the child and resets caught signals on
        // exec; nothing else is changed (no setsid, no parent-death signal).
        let inner = cmd.spawn()?;
        let pid = inner.id() as i32;
        CHILD.store(pid, Ordering::SeqCst);
        let pending = PENDING.swap(0, Ordering::SeqCst);
        if pending != 0 {
            // Our own, just started child.
            let _ = sys::send_signal(inner.id(), pending);
        }
        Ok(Child { inner })
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.inner.id()
    }

    /// The exit code if the child has exited (reaping it).
    pub fn try_wait(&mut self) -> io::Result<Option<i32>> {
        let status = self.inner.try_wait()?;
        if status.is_some() {
            CHILD.store(0, Ordering::SeqCst);
        }
        Ok(status.map(exit_code))
    }

    /// Waits for the child to exit.
    pub fn wait(&mut self) -> io::Result<i32> {
        let status = self.inner.wait()?;
        CHILD.store(0, Ordering::SeqCst);
        Ok(exit_code(status))
    }
}

/// A shell's view of an exit status: the exit code, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 128 + 9);
        assert_eq!(
            exit_code(ExitStatus::from_raw(libc::SIGSEGV | 0x80)),
            128 + 11
        ); // core dumped
    }
}
