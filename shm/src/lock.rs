//! The owner's lock: how anyone can tell, at once, a live recording from one whose
//! collector was killed.
//!
//! The collector holds an exclusive `flock` on its buffer file from the moment it
//! creates it until it exits (and on its ftrace instance's directory, see the
//! recorder). The kernel drops the lock when the last descriptor of that open file
//! closes, which the owner's death does however it dies, SIGKILL included. So a test
//! of the lock is exact where a pid is not: it needs no pid (a JVM in a container
//! cannot see its collector's), and a reused pid cannot fool it.
//!
//! A tester opens the file itself and asks for a shared lock without waiting: refused,
//! the owner lives; granted, it is gone (the tester gives the lock back at once).
//! Descriptors are opened `O_CLOEXEC` everywhere, so a program the collector starts
//! never inherits the lock and keeps it alive.

use std::io;
use std::os::fd::AsFd;

use rustix::fs::{flock, FlockOperation};

/// Takes the owner's exclusive lock on `fd`'s file (a file just created, that nobody
/// else can hold yet). Held until every descriptor of this open file is closed.
pub fn hold(fd: impl AsFd) -> io::Result<()> {
    flock(fd, FlockOperation::NonBlockingLockExclusive).map_err(io::Error::from)
}

/// Whether someone holds the owner's lock on the file `fd` was opened on: true while
/// its owner lives. `fd` must be a descriptor of the tester's own opening, never the
/// owner's (on the owner's own open file the request would turn its exclusive lock
/// into a shared one). When the kernel cannot say (a file system without `flock`),
/// the owner is taken to be alive: nothing of a live recording is ever removed.
pub fn is_held(fd: impl AsFd) -> bool {
    let fd = fd.as_fd();
    match flock(fd, FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            let _ = flock(fd, FlockOperation::Unlock);
            false
        }
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn held_while_the_owners_open_file_lives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let owner = File::create(&path).unwrap();
        let tester = File::open(&path).unwrap();
        assert!(!is_held(&tester), "nobody holds it yet");
        hold(&owner).unwrap();
        assert!(is_held(&tester));
        // Testing twice changes nothing, and two testers do not see each other.
        let other = File::open(&path).unwrap();
        assert!(is_held(&other) && is_held(&tester));
        drop(owner);
        assert!(!is_held(&tester), "released when the owner's file closed");
        assert!(!is_held(&other));
    }
}
