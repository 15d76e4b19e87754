//! One attach exchange: reach the JVM's socket (starting its listener if needed), send
//! one request, read the whole reply, all within one deadline.
//!
//! ```text
//!  connect <tmp>/.java_pid<nspid>
//!    ├─ connected ─────────────────────────────────────────────┐
//!    ├─ no socket / refused (stale): trigger file + SIGQUIT ─┐  │
//!    └─ backlog full (JVM not accepting) ────────────────────┤  │
//!                       poll: sleep 20, 40, 60 ms ... (≤ 500) │  │
//!                       (wake at once if the JVM exits), retry│  │
//!                       connect until the deadline ───────────┴─▶ write request,
//!                                                                 read reply to EOF
//! ```
//! The trigger file is removed on every path out (see [`TriggerFile`]).

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::AttachError;
use crate::identity::Identity;
use crate::process::LiveProcess;
use crate::protocol::{self, Reply};
use crate::sys;
use crate::target::Target;
use crate::trigger::TriggerFile;

/// First sleep between connection attempts, and its growth per attempt.
const POLL_STEP: Duration = Duration::from_millis(20);
/// Longest sleep between connection attempts.
const POLL_MAX: Duration = Duration::from_millis(500);
/// A reply larger than this is not an attach reply: a guard against reading forever
/// from something that is not HotSpot.
const MAX_REPLY: usize = 256 << 20;

/// Sends `command` with up to three `args` to the JVM and returns its reply.
///
/// Starts the JVM's attach listener first if it is not running (trigger file and
/// SIGQUIT), then waits for it with growing sleeps. `timeout` bounds the whole exchange,
/// including reading the reply. A reply with a non-zero status is returned as is: what
/// it means depends on the command.
pub fn execute(
    target: &Target,
    command: &str,
    args: &[&str],
    timeout: Duration,
) -> Result<Reply, AttachError> {
    let request = protocol::encode_request(command, args)?;
    let identity = Identity::for_target(target)?;
    let started = Instant::now();
    let deadline = started + timeout;
    let timed_out = || AttachError::Timeout {
        pid: target.pid(),
        waited: started.elapsed(),
    };
    let mut stream = connect(target, &identity, deadline).map_err(|e| match e {
        Wait::Deadline => timed_out(),
        Wait::Failed(e) => e,
    })?;
    exchange(&mut stream, &request, deadline).map_err(|e| match e {
        Wait::Deadline => timed_out(),
        Wait::Failed(e) => e,
    })
}

/// Why a wait ended without success.
enum Wait {
    Deadline,
    Failed(AttachError),
}

impl From<AttachError> for Wait {
    fn from(e: AttachError) -> Wait {
        Wait::Failed(e)
    }
}

/// What one connection attempt found.
enum Attempt {
    Connected(UnixStream),
    /// No socket, or a stale one nobody listens on: the listener must be started.
    NotListening,
    /// The listener exists but does not accept (backlog full): wait.
    Busy,
}

/// Connects to the JVM's socket at `path`. A socket there that is not the JVM's (made
/// before the JVM made its own, which the JVM would then fail to do) gets no request:
/// another process listens on it, or we may not even connect to it as the JVM's user.
/// Root removes it (a name in the JVM's `/tmp`, never followed), so that the JVM can
/// start its listener; anyone else stops there, naming it.
fn try_connect(path: &Path, identity: &Identity, jvm: u32) -> Result<Attempt, AttachError> {
    let not_the_jvms = |whose: String| -> Result<Attempt, AttachError> {
        if sys::effective_uid() != 0 {
            return Err(AttachError::Protocol(format!(
                "{} is {whose}, not JVM {jvm}'s: refusing to use it",
                path.display()
            )));
        }
        std::fs::remove_file(path)
            .map_err(|e| AttachError::io(format!("removing {} ({whose})", path.display()), e))?;
        Ok(Attempt::NotListening)
    };
    match identity.run(|| sys::connect_unix(path)) {
        Ok(stream) => match sys::peer_pid(&stream) {
            Ok(peer) if peer == jvm => Ok(Attempt::Connected(stream)),
            Ok(peer) => not_the_jvms(format!("process {peer}'s socket")),
            Err(e) => Err(AttachError::io(
                format!("asking who listens on {}", path.display()),
                e,
            )),
        },
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            not_the_jvms("a socket the JVM's user may not use".to_string())
        }
        Err(e) => match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => Ok(Attempt::NotListening),
            io::ErrorKind::WouldBlock => Ok(Attempt::Busy),
            _ => Err(AttachError::io(
                format!("connecting to {}", path.display()),
                e,
            )),
        },
    }
}

fn connect(target: &Target, identity: &Identity, deadline: Instant) -> Result<UnixStream, Wait> {
    let socket = target.socket_path();
    let first = match try_connect(&socket, identity, target.pid())? {
        Attempt::Connected(stream) => return Ok(stream),
        other => other,
    };
    let process = LiveProcess::open(target)?;
    // Held until we return: dropping it removes the file.
    let _trigger = match first {
        Attempt::Connected(_) | Attempt::Busy => None,
        Attempt::NotListening => {
            let trigger = TriggerFile::create(target, identity)?;
            process.send_sigquit()?;
            Some(trigger)
        }
    };
    let mut step = POLL_STEP;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Wait::Deadline);
        }
        process.sleep_unless_exited(step.min(left))?;
        if let Attempt::Connected(stream) = try_connect(&socket, identity, target.pid())? {
            return Ok(stream);
        }
        step = (step + POLL_STEP).min(POLL_MAX);
    }
}

/// Writes the request and reads the reply until the JVM closes the connection.
fn exchange(stream: &mut UnixStream, request: &[u8], deadline: Instant) -> Result<Reply, Wait> {
    let left = |deadline: Instant| -> Result<Duration, Wait> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(Wait::Deadline)
        } else {
            Ok(left)
        }
    };
    let io_error = |what: &str, e: io::Error| -> Wait {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Wait::Deadline,
            _ => Wait::Failed(AttachError::io(what, e)),
        }
    };
    stream
        .set_write_timeout(Some(left(deadline)?))
        .and_then(|()| stream.write_all(request))
        .map_err(|e| io_error("sending the attach request", e))?;
    let mut reply = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        stream
            .set_read_timeout(Some(left(deadline)?))
            .map_err(|e| io_error("reading the attach reply", e))?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                reply.extend_from_slice(&chunk[..n]);
                if reply.len() > MAX_REPLY {
                    return Err(Wait::Failed(AttachError::Protocol(format!(
                        "reply larger than {} MiB",
                        MAX_REPLY >> 20
                    ))));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error("reading the attach reply", e)),
        }
    }
    Ok(protocol::parse_reply(&reply)?)
}
