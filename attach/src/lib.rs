//! The HotSpot dynamic-attach protocol, natively: run attach commands in a running JVM
//! and load an agent library into it, without jattach or jcmd.
//!
//! ```no_run
//! use std::{path::Path, time::Duration};
//! use sonda_attach::{execute, load_agent, stage_agent, Target, DEFAULT_TIMEOUT};
//!
//! let target = Target::inspect(4242)?;            // checks: exists, HotSpot, allowed
//! let version = execute(&target, "jcmd", &["VM.version"], DEFAULT_TIMEOUT)?;
//! println!("{}", version.output);
//! let agent = stage_agent(&target, Path::new("target/release/libsonda.so"))?;
//! let code = load_agent(&target, &agent, "shm=/dev/shm/sonda-1-0.buf", DEFAULT_TIMEOUT)?;
//! assert_eq!(code, 0, "Agent_OnAttach failed");
//! # Ok::<(), sonda_attach::AttachError>(())
//! ```
//!
//! How it works (as HotSpot implements it on Linux):
//! 1. The JVM listens on `/tmp/.java_pid<pid>` (its own `/tmp` and pid, which differ
//!    from ours in a container: we go through `/proc/<pid>/root/tmp` and the last
//!    `NStgid:` value).
//! 2. If the socket is not there, a file `.attach_pid<pid>` in the JVM's working
//!    directory (or `/tmp`) plus SIGQUIT makes it start the listener. SIGQUIT kills
//!    processes that are not JVMs, so [`Target::inspect`] first checks that `libjvm.so`
//!    is mapped, and the signal is only sent if the JVM has a SIGQUIT handler.
//! 3. Request `1\0<cmd>\0<a1>\0<a2>\0<a3>\0`, reply `<status>\n<output>`.
//!
//! Permissions: the JVM accepts peers with its euid and egid, or root. We refuse a JVM
//! of another user unless we are root; root acts as the JVM's user for the trigger file
//! and the connection, on the calling thread only (which is what makes containers with
//! user namespaces work).
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod error;
mod identity;
mod process;
mod protocol;
mod session;
mod stage;
#[allow(unsafe_code)]
mod sys;
mod target;
mod trigger;

use std::path::Path;
use std::time::Duration;

pub use error::AttachError;
pub use protocol::{Reply, ARG_COUNT, MAX_ARG_LEN, MAX_COMMAND_LEN};
pub use session::execute;
pub use stage::{other_agents, stage_agent};
pub use target::Target;

/// How long an attach may take by default, from the first connection attempt to the
/// end of the reply. A healthy JVM starts its listener in well under a second.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Loads the agent library at `agent` (an absolute path as the JVM sees it, see
/// [`stage_agent`]) with `options`, and returns what its `Agent_OnAttach` returned
/// (0 means success; anything else is the agent's own failure code).
///
/// Fails with [`AttachError::AgentLoadFailed`], carrying the JVM's message, when the
/// JVM could not load the library or found no `Agent_OnAttach` in it.
pub fn load_agent(
    target: &Target,
    agent: &Path,
    options: &str,
    timeout: Duration,
) -> Result<i32, AttachError> {
    if !agent.is_absolute() {
        return Err(AttachError::InvalidRequest(format!(
            "agent path {} must be absolute (the JVM resolves it in its own working directory)",
            agent.display()
        )));
    }
    let path = agent.to_str().ok_or_else(|| {
        AttachError::InvalidRequest(format!("agent path {} is not UTF-8", agent.display()))
    })?;
    // "true": the path is absolute, not a library name to look up.
    let reply = execute(target, "load", &[path, "true", options], timeout)?;
    protocol::parse_load_reply(&reply)
}
