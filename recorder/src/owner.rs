//! Who made a file or directory that sonda leaves in a shared place (a buffer file in
//! `/dev/shm`, an ftrace instance), so that a later sonda can tell a live recording's
//! from the leftover of a killed one at once.
//!
//! Names are `<prefix><pid>-<start>-<random><suffix>`: the creating process's pid and
//! start time (clock ticks after boot, `/proc/<pid>/stat` field 22: with the pid, it
//! names one process, however pids are reused), and 64 random bits, so that nobody can
//! plant anything at a name sonda will use. The owner also holds a lock on what it made
//! ([`sonda_shm::lock`]) for as long as it lives.
//!
//! A leftover is stale when both say its owner is gone: no process with that pid and
//! start time ([`Owner::is_alive`]), and nobody holds its lock. The pid test covers
//! the moment between creating and locking; the lock covers owners in another pid
//! namespace (a sonda in a container sharing the file system), whose pid means nothing
//! here.

use std::sync::OnceLock;

use sonda_trace::Pid;

use crate::procfs;

/// A process, named so that a reused pid is not mistaken for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Its pid (in the pid namespace of whoever made the name).
    pub pid: u32,
    /// Its start time (clock ticks after boot).
    pub start: u64,
}

impl Owner {
    /// This process.
    pub fn me() -> Owner {
        static ME: OnceLock<Owner> = OnceLock::new();
        *ME.get_or_init(|| {
            let pid = std::process::id();
            Owner {
                pid,
                // Our own stat is always readable; 0 would only make our names look
                // stale to others while our lock still protects them.
                start: procfs::start_time(Pid(pid)).unwrap_or(0),
            }
        })
    }

    /// Whether this process still runs (a zombie does not).
    pub fn is_alive(&self) -> bool {
        procfs::start_time(Pid(self.pid)) == Some(self.start)
    }

    /// A fresh name owned by this process: `<prefix><pid>-<start>-<16 hex
    /// digits><suffix>`.
    pub fn fresh_name(prefix: &str, suffix: &str) -> String {
        let me = Owner::me();
        format!(
            "{prefix}{}-{}-{:016x}{suffix}",
            me.pid,
            me.start,
            random_u64()
        )
    }

    /// The owner in a name made by [`Owner::fresh_name`] with these prefix and suffix.
    pub fn of_name(name: &str, prefix: &str, suffix: &str) -> Option<Owner> {
        let rest = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
        let mut parts = rest.split('-');
        let (pid, start, random) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some()
            || random.len() != 16
            || !random.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return None;
        }
        Some(Owner {
            pid: pid.parse().ok()?,
            start: start.parse().ok()?,
        })
    }
}

/// 64 bits from the kernel's random source.
fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            // No getrandom (kernel < 3.17): the clock and our pid still give a name
            // nobody can have planted in advance with certainty; the create itself
            // never follows nor reuses a name (O_EXCL), which is what stops a plant.
            Err(_) => {
                return crate::sys::monotonic_ns().rotate_left(17) ^ u64::from(std::process::id())
            }
        }
    }
    u64::from_ne_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_owner_and_differ_every_time() {
        let a = Owner::fresh_name("sonda-", ".buf");
        let b = Owner::fresh_name("sonda-", ".buf");
        assert_ne!(a, b);
        assert_eq!(Owner::of_name(&a, "sonda-", ".buf"), Some(Owner::me()));
        assert!(Owner::me().is_alive());
        assert!(Owner::me().start > 0);
        for other in [
            "sonda-1-0.buf",
            "sonda-1-2-3.buf",
            "sonda-1-2-0123456789abcdef-x.buf",
            "sonda-x-2-0123456789abcdef.buf",
            "sonda-1-2-0123456789abcdeg.buf",
            "other-1-2-0123456789abcdef.buf",
        ] {
            assert_eq!(Owner::of_name(other, "sonda-", ".buf"), None, "{other}");
        }
        assert_eq!(
            Owner::of_name("sonda-12-34-0123456789abcdef.buf", "sonda-", ".buf"),
            Some(Owner { pid: 12, start: 34 })
        );
    }

    #[test]
    fn a_reused_pid_is_not_the_owner() {
        let me = Owner::me();
        assert!(!Owner {
            start: me.start + 1,
            ..me
        }
        .is_alive());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!Owner { pid, start: 0 }.is_alive());
        assert!(!Owner {
            pid: u32::MAX,
            start: me.start
        }
        .is_alive());
    }
}
