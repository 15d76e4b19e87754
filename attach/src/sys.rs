//! The crate's only `unsafe`: the few system calls std does not offer.
//!
//! - per-thread credential switching (raw `setresuid`/`setresgid`: glibc's wrappers
//!   change every thread of the process, and the collector has many threads that must
//!   stay root);
//! - pidfds, to signal and watch exactly the process we inspected even if its pid is
//!   reused;
//! - a non-blocking `connect` on a UNIX socket: a JVM that stopped accepting leaves the
//!   listen backlog full, and a blocking `connect` would then hang past any deadline;
//! - the pid of a socket's peer (`SO_PEERCRED`), to talk to the JVM and no impostor.

use std::io;
use std::marker::PhantomData;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Our effective uid (the calling thread's, as the kernel checks it).
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Our effective gid (the calling thread's).
pub(crate) fn effective_gid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

/// Turns a raw `-1`-on-error result into `io::Result`.
fn check(result: libc::c_long) -> io::Result<libc::c_long> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SYS_SETRESUID: libc::c_long = libc::SYS_setresuid32;
#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SYS_SETRESGID: libc::c_long = libc::SYS_setresgid32;
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SYS_SETRESUID: libc::c_long = libc::SYS_setresuid;
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SYS_SETRESGID: libc::c_long = libc::SYS_setresgid;

/// `-1` for setres[ug]id: leave that id unchanged.
const UNCHANGED: libc::uid_t = libc::uid_t::MAX;

fn set_thread_euid(uid: u32) -> io::Result<()> {
    // SAFETY: the raw syscall takes three integer ids and touches no memory of ours. It
    // changes the calling thread's credentials only (the kernel keeps them per thread).
    check(unsafe { libc::syscall(SYS_SETRESUID, UNCHANGED, uid, UNCHANGED) }).map(drop)
}

fn set_thread_egid(gid: u32) -> io::Result<()> {
    // SAFETY: as in set_thread_euid, for the group ids.
    check(unsafe { libc::syscall(SYS_SETRESGID, UNCHANGED, gid, UNCHANGED) }).map(drop)
}

/// While alive, the calling thread acts with another effective uid/gid; dropping it
/// restores the previous ones. Not `Send`: the switch belongs to one thread.
///
/// Only root can switch; the real and saved ids stay root, so restoring cannot fail.
pub(crate) struct ThreadCredentials {
    saved_uid: u32,
    saved_gid: u32,
    _one_thread: PhantomData<*const ()>,
}

impl ThreadCredentials {
    /// Takes effective `uid`/`gid` on this thread (group first: after the uid change
    /// we would no longer be allowed to change it).
    pub(crate) fn assume(uid: u32, gid: u32) -> io::Result<ThreadCredentials> {
        let (saved_uid, saved_gid) = (effective_uid(), effective_gid());
        set_thread_egid(gid)?;
        if let Err(e) = set_thread_euid(uid) {
            restore_or_abort(set_thread_egid(saved_gid));
            return Err(e);
        }
        Ok(ThreadCredentials {
            saved_uid,
            saved_gid,
            _one_thread: PhantomData,
        })
    }
}

impl Drop for ThreadCredentials {
    fn drop(&mut self) {
        restore_or_abort(set_thread_euid(self.saved_uid));
        restore_or_abort(set_thread_egid(self.saved_gid));
    }
}

/// A thread left with another user's identity would act as that user from then on:
/// stopping is the only safe answer (it cannot happen while the saved ids are root).
fn restore_or_abort(result: io::Result<()>) {
    if let Err(e) = result {
        eprintln!("sonda-attach: cannot restore this thread's credentials: {e}");
        std::process::abort();
    }
}

/// A pidfd: names one process for good, unlike its pid.
pub(crate) struct Pidfd(OwnedFd);

impl Pidfd {
    /// Opens a pidfd for `pid`; `Ok(None)` when the kernel has no pidfd_open (< 5.3).
    pub(crate) fn open(pid: u32) -> io::Result<Option<Pidfd>> {
        let pid = to_pid_t(pid)?;
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        match check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) }) {
            // SAFETY: the syscall just returned this fd to us; nobody else owns it.
            Ok(fd) => Ok(Some(Pidfd(unsafe {
                OwnedFd::from_raw_fd(fd as libc::c_int)
            }))),
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends SIGQUIT to the process (not to whatever now has its pid).
    pub(crate) fn send_sigquit(&self) -> io::Result<()> {
        // SAFETY: pidfd_send_signal reads no memory when info is NULL; the fd is ours.
        check(unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                libc::SIGQUIT,
                std::ptr::null::<libc::siginfo_t>(),
                0 as libc::c_uint,
            )
        })
        .map(drop)
    }

    /// Sleeps up to `timeout`, returning early with `true` if the process exits.
    pub(crate) fn wait_exit(&self, timeout: Duration) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        loop {
            // SAFETY: pfd is a valid pollfd for the duration of the call; count is 1.
            match check(unsafe { libc::poll(&mut pfd, 1, millis) } as libc::c_long) {
                Ok(ready) => return Ok(ready > 0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Sends SIGQUIT by pid: the fallback when the kernel has no pidfds.
pub(crate) fn kill_sigquit(pid: u32) -> io::Result<()> {
    let pid = to_pid_t(pid)?;
    // SAFETY: kill takes two integers and touches no memory of ours.
    check(unsafe { libc::kill(pid, libc::SIGQUIT) } as libc::c_long).map(drop)
}

fn to_pid_t(pid: u32) -> io::Result<libc::pid_t> {
    libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
}

/// Connects to a UNIX stream socket without blocking. A full listen backlog gives
/// `WouldBlock` (EAGAIN) instead of a wait; the returned stream is blocking.
pub(crate) fn connect_unix(path: &Path) -> io::Result<UnixStream> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "socket path too long or contains NUL",
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, &src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    let len = mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;

    // SAFETY: socket takes integers and returns a new fd or -1.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    } as libc::c_long)?;
    // SAFETY: the fd was just created and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    // SAFETY: addr is a valid, NUL-terminated sockaddr_un and len is within its size.
    check(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast::<libc::sockaddr>(),
            len as libc::socklen_t,
        )
    } as libc::c_long)?;
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// The pid (in our pid namespace) of the process at the other end of `stream`: for a
/// connection we made, the process that listens.
pub(crate) fn peer_pid(stream: &UnixStream) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid and writable for the call, `len` holds the
    // buffer's size; the fd is the stream's, open for the call's duration.
    check(unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    } as libc::c_long)?;
    Ok(cred.pid as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::Command;

    #[test]
    fn credential_switch_is_per_thread_and_restored() {
        if !sonda_tests::require_root() {
            return;
        }
        // A thread that exists before the switch (new threads inherit the creator's).
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            asked.recv().unwrap();
            (effective_uid(), effective_gid())
        });
        let guard = ThreadCredentials::assume(65534, 65534).unwrap();
        assert_eq!((effective_uid(), effective_gid()), (65534, 65534));
        // The other thread keeps root: the switch must not leak process-wide.
        ask.send(()).unwrap();
        assert_eq!(other.join().unwrap(), (0, 0));
        drop(guard);
        assert_eq!((effective_uid(), effective_gid()), (0, 0));
        // And root's capabilities came back: we can switch again.
        drop(ThreadCredentials::assume(1, 1).unwrap());
    }

    #[test]
    fn pidfd_signals_and_sees_exit() {
        let mut command = Command::new("sleep");
        command.arg("30");
        // A shell runs a background job with SIGQUIT ignored, and ignored signals stay
        // ignored across exec: under `./.ci/run &` the child would not die of SIGQUIT.
        // SAFETY: signal() is async-signal-safe and touches only the child's dispositions.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGQUIT, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = command.spawn().unwrap();
        let pidfd = Pidfd::open(child.id())
            .unwrap()
            .expect("kernel has pidfd_open");
        assert!(!pidfd.wait_exit(Duration::from_millis(30)).unwrap());
        pidfd.send_sigquit().unwrap();
        assert!(pidfd.wait_exit(Duration::from_secs(5)).unwrap());
        // Independent truth: the child died of SIGQUIT.
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGQUIT));
    }

    #[test]
    fn kill_fallback_rejects_bad_pids() {
        assert!(kill_sigquit(0).is_err());
        assert!(kill_sigquit(u32::MAX).is_err());
    }

    #[test]
    fn connect_reports_missing_refused_and_full_backlog() {
        let dir = std::env::temp_dir().join(format!("sonda-attach-sys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s");
        assert_eq!(
            connect_unix(&path).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        let listener = UnixListener::bind(&path).unwrap();
        let first = connect_unix(&path).unwrap();
        assert_eq!(peer_pid(&first).unwrap(), std::process::id());
        drop(first);
        // SAFETY: listen on a socket we own; it only shrinks the backlog.
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 1) }, 0);
        // Nobody accepts: connections pile up in the backlog until connect says EAGAIN.
        let mut held = Vec::new();
        let mut saw_would_block = false;
        for _ in 0..64 {
            match connect_unix(&path) {
                Ok(s) => held.push(s),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    saw_would_block = true;
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(saw_would_block && !held.is_empty());
        drop(listener);
        // Refused once the last copy of the listener is closed. Another test of this
        // process that spawns a child holds a copy from its fork to its exec (close on
        // exec), and a connect in that window finds the full backlog: retry briefly.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match connect_unix(&path) {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => panic!("connect after the listener closed: {other:?}"),
            }
            assert!(std::time::Instant::now() < deadline, "never refused");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
