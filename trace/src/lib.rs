//! sonda's trace file format.
//!
//! A trace is a file header followed by a stream of checksummed blocks (see
//! `docs/trace-format.md`). Timed records ([`Record`]) come in one time order across
//! the whole file, JVM and kernel records merged; metadata ([`Meta`]) names the threads,
//! methods and classes they refer to. A recording killed mid-way leaves a file that reads
//! up to its last complete block; a damaged block is skipped, and reading goes on at the
//! next intact one ([`Damage`] lists what was skipped).
//!
//! This crate does no I/O beyond reading and writing the given file or stream and has no
//! `unsafe`: the collector, the exporters and the tests all go through it.
#![forbid(unsafe_code)]

pub mod block;
pub mod codec;
mod damage;
mod finder;
mod le;
pub mod merge;
pub mod reader;
mod record;
pub mod scan;
mod types;
pub mod writer;

pub use damage::{Damage, SkippedRegion};
pub use reader::{ReadError, TraceReader};
pub use record::{
    CarriedWaking, ChargedBy, Event, Meta, Record, Runtime, Source, SwitchCharge,
    SWITCHES_CLOCK_DATED,
};
pub use scan::{
    Events, MethodInfo, NativeFunctionInfo, ProcessInfo, Removal, ThreadInfo, TraceInfo, TraceMeta,
};
pub use types::{Cpu, Pid, SwitchOut, Tid, Time};
pub use writer::TraceWriter;
