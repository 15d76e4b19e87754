//! sonda's timeline: turns a trace's records into what every view of it needs.
//!
//! - Per-thread state intervals from kernel records ([`sched`]: running, waiting for a
//!   CPU, sleeping, in I/O, ...; or from `/proc` samples, module `procfs`), each with the
//!   CPU it concerns, covering every thread's whole life.
//! - Per-thread call stacks of instrumented Java methods and native functions, repaired
//!   where the agent dropped events ([`stack`]).
//! - Garbage collections and contended monitor waits (module `jvm`), wake edges (who woke
//!   whom), CPU migrations.
//!
//! [`Timeline`] runs all of these as one streaming state machine over the trace's
//! records, with memory bounded by the number of threads and their stack depths; it
//! does no I/O and hands its output to a [`Sink`]. The Paraver exporter
//! (`sonda-paraver`), the terminal [`report`] and the service-time model are sinks.
//!
//! Around it: [`Trace`] is the one driver every view uses (module `drive`): it scans
//! a trace's metadata ([`Trace::open`]), then streams its records through a
//! [`Timeline`] into a [`Sink`] ([`Trace::drive`]; a pair of sinks is a sink) or a
//! [`Consumer`] with hooks around each record ([`Trace::drive_with`]). [`Feed`] streams
//! a trace file's records with the rules about where a trace begins and ends (and
//! where a damaged one stops); [`names`] holds the one rule for naming methods, native
//! functions (from the symbols of the binaries their processes mapped, through
//! `sonda-symbols`: the one place this crate reads files other than the trace) and
//! threads. Synthetic traces for tests and benchmarks are in the unshipped
//! `sonda-testdata` crate.
//!
//! Stable entry points for the `sonda` command: [`Trace::open`], then
//! [`report::render`] (`sonda report`) here, `sonda_paraver::export` (`sonda
//! paraver`) and `sonda_model::analyze::analyze` (`sonda services`, `sonda model`).
//! They return their figures as data, with the place a damaged trace stops, for the
//! command to print and fail on.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod drive;
mod feed;
mod jvm;
pub mod names;
mod output;
mod procfs;
pub mod report;
pub mod sched;
pub mod stack;
mod state;
mod timeline;

pub use drive::{Consumer, DriveError, DriveOptions, Driven, Progress, Trace, TraceError};
pub use feed::{damage_line, origin, Feed};
pub use output::{
    At, CallEnter, CallExit, Edge, ExitKind, Frame, GcSpan, Interval, Migration, MonitorWait,
    OnCpu, QueuedAsleep, Sink, ThreadIx, UserValue, WakeEdge,
};
pub use sched::ThreadStats;
pub use state::{StateTotals, ThreadState};
pub use timeline::{Repairs, Timeline};
