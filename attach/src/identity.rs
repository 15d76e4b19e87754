//! Who we act as towards the JVM.
//!
//! HotSpot (JDK 17) accepts a connection from root or from a peer with its own euid
//! *and* egid, and trusts a trigger file owned by root or by its euid. "Root" means uid
//! 0 in the JVM's user namespace: in a container with a user namespace, host root
//! appears as the overflow uid and is refused. So root takes the JVM's effective
//! uid/gid (as seen from our namespace, which the kernel maps back to the JVM's own)
//! while it creates the trigger file and connects, on the current thread only.

use std::io;

use crate::error::AttachError;
use crate::sys::{self, ThreadCredentials};
use crate::target::Target;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Identity {
    /// Act as we are: we are the JVM's user, or root attaching to a root JVM.
    Ours,
    /// We are root and act as the JVM's effective uid/gid.
    Target { uid: u32, gid: u32 },
}

impl Identity {
    /// Decides how to act towards `target`; refuses a JVM of another user unless we are
    /// root.
    pub(crate) fn for_target(target: &Target) -> Result<Identity, AttachError> {
        let our_uid = sys::effective_uid();
        let (uid, gid) = (target.uid(), target.gid());
        if our_uid == 0 {
            if (uid, gid) == (0, sys::effective_gid()) {
                Ok(Identity::Ours)
            } else {
                Ok(Identity::Target { uid, gid })
            }
        } else if our_uid == uid {
            Ok(Identity::Ours)
        } else {
            Err(AttachError::PermissionDenied {
                pid: target.pid(),
                target_uid: uid,
                our_uid,
            })
        }
    }

    /// Takes this identity on the current thread until the returned guard drops.
    pub(crate) fn assume(&self) -> io::Result<Option<ThreadCredentials>> {
        match *self {
            Identity::Ours => Ok(None),
            Identity::Target { uid, gid } => ThreadCredentials::assume(uid, gid).map(Some),
        }
    }

    /// Runs `f` on this thread with this identity.
    pub(crate) fn run<T>(&self, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let _switched = self.assume()?;
        f()
    }

    /// The owner a file created under this identity must have.
    pub(crate) fn file_owner(&self) -> u32 {
        match *self {
            Identity::Ours => sys::effective_uid(),
            Identity::Target { uid, .. } => uid,
        }
    }
}
