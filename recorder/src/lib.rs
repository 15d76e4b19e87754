//! sonda's recording engine: everything `sonda record` and `sonda attach` do between
//! parsing the command line and printing the summary.
//!
//! A recording gathers events from sources that know nothing of each other and writes
//! them into one time-ordered trace ([`sonda_trace`]):
//!
//! ```text
//!  kernel (tracepoints on every CPU) ─┐
//!  agents (one ring per Java thread) ─┼─▶ watermark (in time order, `lag` behind)
//!  /proc samples (fallback)          ─┘        ─▶ process-tree follower ─▶ trace file
//! ```
//!
//! The parts, one module each:
//! - the recording itself ([`record`]): opens the sources, starts the command or
//!   attaches to a JVM, runs the drain cycle and finishes the trace;
//! - [`kernel`]: scheduler tracepoints read from a private ftrace instance or from perf
//!   rings, decoded from raw bytes by pure decoders (public, so that they can be fuzzed
//!   and benchmarked without a kernel);
//! - the agent source: the shared buffer file agents write into and its drain;
//! - the /proc sampler, used when tracepoints are not allowed;
//! - the watermark, which releases records of every source in time order once they are
//!   older than `lag`;
//! - the follower, which keeps the events of the recorded process tree only;
//! - the TSC calibration that converts agent time stamps to the trace's clock
//!   ([`clock`]);
//! - [`launch`]: finding the command and the agent library, and giving JVMs the agent;
//! - [`tap`]: an optional copy of what is written, for live views (`--metrics`);
//! - [`leftovers`]: what killed collectors left (buffer files, ftrace instances still
//!   tracing), recognised by their owner and removed by any later sonda command.
//!
//! The engine is a library so that the command stays a thin layer of argument handling
//! and messages, and so that its decoders can be reused, fuzzed and benchmarked. The
//! attach protocol itself is not here: the caller passes it in as a closure
//! ([`Attach::load`]), so the engine depends on nothing JVM-specific beyond the agent's
//! buffer file.

#![deny(missing_docs)]

/// Writes one line to stderr, ignoring failure (a closed stderr must not make the
/// recording fail: the trace and the command's exit status matter more).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub(crate) mod agent;
pub(crate) mod child;
pub mod clock;
pub(crate) mod follow;
pub(crate) mod host;
pub mod kernel;
pub mod launch;
pub mod leftovers;
pub(crate) mod liveness;
pub(crate) mod owner;
pub(crate) mod procfs;
pub(crate) mod recorder;
pub(crate) mod sys;
pub mod tap;
pub(crate) mod tsc;
pub(crate) mod wake_audit;
pub(crate) mod watermark;

pub use agent::buffer_file::{BufferPlace, SHM_DIR};
pub use agent::sizing::Wanted as AgentSizes;
pub use launch::{AGENT_ENV, AGENT_LIB};
pub use recorder::{record, Attach, LoadAgent, Outcome, Settings, Subject};
pub use tap::{LiveStats, Tap};
