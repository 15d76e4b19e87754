//! A handle on the inspected JVM process: signal it and watch it exit without ever
//! hitting another process that reused its pid.
//!
//! With a pidfd (Linux 5.3+), the handle names the process itself; it is opened after
//! inspection, so we check that the start time still matches once, and from then on the
//! kernel guarantees identity. Without pidfds, each action re-checks the start time
//! first (a small window remains).

use std::time::Duration;

use crate::error::AttachError;
use crate::sys::{self, Pidfd};
use crate::target::{self, Target};

pub(crate) struct LiveProcess {
    pid: u32,
    start_time: u64,
    pidfd: Option<Pidfd>,
}

impl LiveProcess {
    /// Opens a handle on `target`, failing with `ProcessExited` if it is gone.
    pub(crate) fn open(target: &Target) -> Result<LiveProcess, AttachError> {
        let pid = target.pid();
        let pidfd = match Pidfd::open(pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                return Err(AttachError::ProcessExited(pid))
            }
            Err(e) => return Err(AttachError::io(format!("opening a pidfd for {pid}"), e)),
        };
        let process = LiveProcess {
            pid,
            start_time: target.start_time(),
            pidfd,
        };
        process.check_same()?;
        Ok(process)
    }

    fn check_same(&self) -> Result<(), AttachError> {
        if target::read_start_time(self.pid)? == Some(self.start_time) {
            Ok(())
        } else {
            Err(AttachError::ProcessExited(self.pid))
        }
    }

    /// Sends SIGQUIT, after checking that the JVM handles it: without a handler the
    /// signal would kill the process (a JVM still starting, or run with `-Xrs`).
    pub(crate) fn send_sigquit(&self) -> Result<(), AttachError> {
        if !target::read_status(self.pid)?.catches_sigquit() {
            return Err(AttachError::SignalsDisabled(self.pid));
        }
        let sent = match &self.pidfd {
            Some(fd) => fd.send_sigquit(),
            None => {
                self.check_same()?;
                sys::kill_sigquit(self.pid)
            }
        };
        sent.map_err(|e| match e.raw_os_error() {
            Some(libc::ESRCH) => AttachError::ProcessExited(self.pid),
            _ => AttachError::io(format!("sending SIGQUIT to {}", self.pid), e),
        })
    }

    /// Sleeps `nap`; fails with `ProcessExited` as soon as the process exits.
    pub(crate) fn sleep_unless_exited(&self, nap: Duration) -> Result<(), AttachError> {
        let exited = match &self.pidfd {
            Some(fd) => fd
                .wait_exit(nap)
                .map_err(|e| AttachError::io(format!("watching process {}", self.pid), e))?,
            None => {
                std::thread::sleep(nap);
                target::read_start_time(self.pid)? != Some(self.start_time)
            }
        };
        if exited {
            Err(AttachError::ProcessExited(self.pid))
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn handles(pid: u32, start_time: u64) -> [LiveProcess; 2] {
        [
            LiveProcess {
                pid,
                start_time,
                pidfd: Pidfd::open(pid).unwrap(),
            },
            LiveProcess {
                pid,
                start_time,
                pidfd: None,
            },
        ]
    }

    #[test]
    fn never_signals_a_process_without_a_sigquit_handler() {
        let mut sleep = Command::new("sleep").arg("30").spawn().unwrap();
        let start = target::read_start_time(sleep.id()).unwrap().unwrap();
        for process in handles(sleep.id(), start) {
            process
                .sleep_unless_exited(Duration::from_millis(10))
                .unwrap();
            let e = process.send_sigquit().unwrap_err();
            assert!(matches!(e, AttachError::SignalsDisabled(_)), "{e:?}");
        }
        assert!(sleep.try_wait().unwrap().is_none(), "sleep was signalled");
        sleep.kill().unwrap();
        sleep.wait().unwrap();
    }

    #[test]
    fn notices_exit_and_pid_reuse() {
        let mut sleep = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = sleep.id();
        let start = target::read_start_time(pid).unwrap().unwrap();
        // Another start time at this pid: the process we inspected is gone.
        let [_, reused] = handles(pid, start + 1);
        assert!(matches!(
            reused.sleep_unless_exited(Duration::from_millis(1)),
            Err(AttachError::ProcessExited(_))
        ));
        let both = handles(pid, start);
        sleep.kill().unwrap();
        // A zombie (not yet reaped) counts as exited, for both kinds of handle.
        for process in &both {
            assert!(matches!(
                process.sleep_unless_exited(Duration::from_millis(500)),
                Err(AttachError::ProcessExited(_))
            ));
        }
        sleep.wait().unwrap();
    }
}
