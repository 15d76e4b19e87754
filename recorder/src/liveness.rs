//! Whether a process still runs, asked many times a second and answered for the price
//! of one `poll`.
//!
//! The recording asks often: the attach loop at every tick (20 times a second) whether
//! the JVM is still there, and the agent drain, at every drain, whether the process of
//! an idle slot died without retiring it. Reading `/proc/<pid>/stat` for that makes the
//! kernel sum the CPU times of every thread of the process (`do_task_stat`): on an idle
//! Tomcat (38 threads) those reads were about a quarter of the collector's CPU (perf,
//! docs/overhead.md). A pidfd answers the same question without work: it polls readable
//! once the process has exited (a zombie included, as `stat`'s `Z` did), and it names
//! that one process, so a pid reused later is not mistaken for it.
//!
//! Where pidfds are refused (kernels before 5.3, a seccomp profile), the answer comes
//! from `/proc/<pid>/stat` as before.

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, PidfdFlags};
use sonda_trace::Pid;

use crate::procfs;

/// One process, watched.
#[derive(Debug)]
pub struct Watched {
    pid: Pid,
    /// `None`: pidfds are not available here, ask /proc.
    fd: Option<OwnedFd>,
}

impl Watched {
    /// Starts watching process `pid`; `None` if there is no such process (or it is a
    /// zombie already).
    pub fn open(pid: Pid) -> Option<Watched> {
        let w = Watched {
            pid,
            fd: open_pidfd(pid).ok()?,
        };
        w.alive().then_some(w)
    }

    /// Whether the process has not exited (a zombie has).
    pub fn alive(&self) -> bool {
        match &self.fd {
            Some(fd) => !exited(fd),
            None => proc_stat_alive(self.pid),
        }
    }
}

/// Opens a pidfd for `pid`: `Ok(None)` where pidfds are not available, `Err` when the
/// process does not exist.
fn open_pidfd(pid: Pid) -> Result<Option<OwnedFd>, ()> {
    let Some(raw) = i32::try_from(pid.0)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return Err(());
    };
    match pidfd_open(raw, PidfdFlags::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(rustix::io::Errno::SRCH) | Err(rustix::io::Errno::INVAL) => Err(()),
        // ENOSYS (old kernel), EPERM (seccomp), EMFILE...: the process may well exist.
        Err(_) if proc_stat_alive(pid) => Ok(None),
        Err(_) => Err(()),
    }
}

/// Whether the process behind `fd` has exited: its pidfd polls readable then.
fn exited(fd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&now)) {
        Ok(n) => n > 0 && !fds[0].revents().is_empty(),
        // EINTR and the like: no news, so not exited (asked again soon).
        Err(_) => false,
    }
}

/// Whether process `pid` exists and is not a zombie, from `/proc/<pid>/stat` (its start
/// time is there only then).
fn proc_stat_alive(pid: Pid) -> bool {
    procfs::start_time(pid).is_some()
}

/// Many processes, each watched from the first time it is asked about until a round
/// of questions ([`Watchers::forget_unasked`]) passes without it.
#[derive(Debug, Default)]
pub struct Watchers {
    /// Each with whether it was asked about in this round.
    watched: HashMap<Pid, (Watched, bool)>,
}

impl Watchers {
    /// Whether process `pid` is alive. A process found exited is forgotten, and its pid
    /// looked up afresh: if a new process has taken it, that one is alive (as /proc
    /// would have said), and watched from now on.
    pub fn alive(&mut self, pid: Pid) -> bool {
        if let Some((w, asked)) = self.watched.get_mut(&pid) {
            *asked = true;
            if w.alive() {
                return true;
            }
            self.watched.remove(&pid);
            // Found exited: asked again only below, once (a pid reused since).
        }
        match Watched::open(pid) {
            Some(w) => {
                self.watched.insert(pid, (w, true));
                true
            }
            None => false,
        }
    }

    /// Ends a round: stops watching the processes not asked about since the last one
    /// (their pidfds closed), so that a long recording of many short-lived processes
    /// does not keep one descriptor for each.
    pub fn forget_unasked(&mut self) {
        self.watched.retain(|_, (_, asked)| std::mem::take(asked));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_child_is_alive_until_it_exits_and_a_zombie_counts_as_exited() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = Pid(child.id());
        let w = Watched::open(pid).expect("a running child");
        assert!(
            w.fd.is_some(),
            "pidfds are available on the machines we test on"
        );
        assert!(w.alive());
        let mut many = Watchers::default();
        assert!(many.alive(pid));
        assert!(many.alive(pid));
        assert_eq!(many.watched.len(), 1);
        many.forget_unasked();
        assert_eq!(many.watched.len(), 1, "asked in the round that ended");
        many.forget_unasked();
        assert_eq!(many.watched.len(), 0, "not asked in the last round");
        assert!(many.alive(pid));
        child.kill().unwrap();
        // Not reaped yet: a zombie, which has exited.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while w.alive() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!w.alive());
        assert!(!proc_stat_alive(pid), "the zombie, as /proc says");
        assert!(!many.alive(pid));
        assert_eq!(many.watched.len(), 0);
        assert!(Watched::open(pid).is_none());
        child.wait().unwrap();
        assert!(!many.alive(pid));
    }

    #[test]
    fn no_such_process_is_not_alive() {
        let none = Pid(u32::MAX);
        assert!(Watched::open(none).is_none());
        assert!(!proc_stat_alive(none));
        assert!(!Watchers::default().alive(none));
        let me = Pid(std::process::id());
        assert!(Watched::open(me).is_some_and(|w| w.alive() && w.pid == me));
        assert!(proc_stat_alive(me));
    }
}
