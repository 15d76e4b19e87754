//! The one error type of the crate.

use std::fmt;
use std::io;
use std::time::Duration;

/// Why an attach failed. Every variant displays as one line a user can act on.
#[derive(Debug)]
#[non_exhaustive]
pub enum AttachError {
    /// No process has this pid (or it exited before it could be inspected).
    NoSuchProcess(u32),
    /// The process does not map HotSpot's `libjvm.so` (or is an OpenJ9 JVM, which
    /// speaks another protocol). It was not signalled: SIGQUIT kills most processes.
    NotAJvm(u32),
    /// The JVM runs as another user and we are not root. HotSpot only accepts peers with
    /// its own euid/egid, or root; refused before any signal is sent.
    PermissionDenied {
        /// The JVM's pid.
        pid: u32,
        /// The JVM's effective uid.
        target_uid: u32,
        /// Our effective uid.
        our_uid: u32,
    },
    /// The JVM has no SIGQUIT handler (still starting, or started with `-Xrs`): the signal
    /// that starts the attach listener would kill it, so it was not sent.
    SignalsDisabled(u32),
    /// The JVM did not open its attach socket, or did not answer, before the deadline.
    Timeout {
        /// The JVM's pid.
        pid: u32,
        /// How long we waited.
        waited: Duration,
    },
    /// The JVM exited while we were attaching.
    ProcessExited(u32),
    /// The JVM answered a `load` command with an error: it could not open the library,
    /// or found no `Agent_OnAttach` in it.
    AgentLoadFailed {
        /// The status the JVM reported (`-1` when JDK 21+ reports failure with status 0).
        code: i32,
        /// The JVM's own message (for example `dlopen`'s error).
        message: String,
    },
    /// The request cannot be sent: too many arguments, an argument too long for
    /// HotSpot's limits, a NUL byte, a relative agent path.
    InvalidRequest(String),
    /// The JVM's answer does not follow the protocol.
    Protocol(String),
    /// A system call failed; `what` says what we were doing.
    Io {
        /// What we were doing, with the path involved.
        what: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl AttachError {
    /// Wraps an I/O error with what we were doing.
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> AttachError {
        AttachError::Io {
            what: what.into(),
            source,
        }
    }
}

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttachError::NoSuchProcess(pid) => write!(f, "no process with pid {pid}"),
            AttachError::NotAJvm(pid) => write!(
                f,
                "process {pid} is not a HotSpot JVM (no libjvm.so mapped); it was not signalled"
            ),
            AttachError::PermissionDenied {
                pid,
                target_uid,
                our_uid,
            } => write!(
                f,
                "process {pid} runs as user {target_uid} and we run as user {our_uid}; \
                 attach as that user or as root"
            ),
            AttachError::SignalsDisabled(pid) => write!(
                f,
                "JVM {pid} does not handle SIGQUIT (still starting, or run with -Xrs); \
                 it was not signalled"
            ),
            AttachError::Timeout { pid, waited } => write!(
                f,
                "JVM {pid} did not answer the attach request within {:.1} s \
                 (stopped, hung, or started with -XX:+DisableAttachMechanism?)",
                waited.as_secs_f64()
            ),
            AttachError::ProcessExited(pid) => write!(f, "JVM {pid} exited during the attach"),
            AttachError::AgentLoadFailed { code, message } => write!(
                f,
                "the JVM could not load the agent (status {code}): {}",
                one_line(message)
            ),
            AttachError::InvalidRequest(why) => write!(f, "invalid attach request: {why}"),
            AttachError::Protocol(why) => write!(f, "attach protocol error: {why}"),
            AttachError::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for AttachError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AttachError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The JVM's messages span lines ("x was not loaded.\n<dlerror>"); Display is one line.
fn one_line(message: &str) -> String {
    let parts: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if parts.is_empty() {
        "no message".to_string()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_displays_on_one_line() {
        let all = [
            AttachError::NoSuchProcess(1),
            AttachError::NotAJvm(2),
            AttachError::PermissionDenied {
                pid: 3,
                target_uid: 0,
                our_uid: 65534,
            },
            AttachError::SignalsDisabled(4),
            AttachError::Timeout {
                pid: 5,
                waited: Duration::from_millis(10_040),
            },
            AttachError::ProcessExited(6),
            AttachError::AgentLoadFailed {
                code: -1,
                message: "/x.so was not loaded.\n/x.so: cannot open shared object file\n"
                    .to_string(),
            },
            AttachError::InvalidRequest("a\nb".replace('\n', " ")),
            AttachError::Protocol("empty reply".to_string()),
            AttachError::io("reading /proc/1/maps", io::Error::other("boom")),
        ];
        for e in &all {
            let text = e.to_string();
            assert!(!text.contains('\n'), "{text:?}");
            assert!(!text.is_empty());
        }
        assert_eq!(
            all[2].to_string(),
            "process 3 runs as user 0 and we run as user 65534; attach as that user or as root"
        );
        assert_eq!(
            all[4].to_string(),
            "JVM 5 did not answer the attach request within 10.0 s \
             (stopped, hung, or started with -XX:+DisableAttachMechanism?)"
        );
        assert_eq!(
            all[6].to_string(),
            "the JVM could not load the agent (status -1): /x.so was not loaded.; \
             /x.so: cannot open shared object file"
        );
    }
}
