//! Writes a sonda trace as a Paraver trace: `STEM.prv` (header and records),
//! `STEM.pcf` (state and event labels, colours) and `STEM.row` (CPU, node, process and
//! thread names).
//!
//! [`export`] is the stable entry point for the `sonda paraver` command. The thread
//! states, calls and spans come from `sonda_timeline`; this crate lays them out in
//! Paraver's model (one application per process, one task, its threads: module
//! `layout`), numbers them ([`conventions`], the one place for Paraver numbers), and
//! writes them in the order Paraver needs with bounded memory (module `reorder`).
//!
//! What the output guarantees (checked by `prvcheck` in the tests): every thread's
//! states cover `[0, END]` exactly (Not created before its creation and after its end),
//! records in ascending time, each thread's states in begin order without overlap,
//! times in ns from the trace's origin, each record's CPU the one its thread is on
//! (1-based, 0 for none), every event value labelled in the `.pcf` and below 2^31.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod conventions;
mod export;
mod header;
pub mod layout;
mod pcf;
mod records;
mod reorder;
mod translate;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sonda_timeline::Repairs;
use sonda_trace::ReadError;

/// Records the reorder buffer holds by default before it splits long states (about
/// 16 MiB of records; see [`ExportOptions::reorder_limit`]).
pub const DEFAULT_REORDER_LIMIT: usize = 1 << 19;

/// How to export. Build with `ExportOptions::default()` and the `with_` methods:
/// fields will be added (a time window, a thread filter, JVM-internal threads on or
/// off, `.cfg` views).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ExportOptions {
    /// Write wakeups as Paraver communications from the waker (at its
    /// `sched_waking`) to the wakee (when it next runs). Only between followed threads.
    pub wakeups: bool,
    /// The date in the `.prv` header (UTC); `None`: now.
    pub date: Option<SystemTime>,
    /// Most records held back for reordering: more, and states still open are written
    /// in pieces (Paraver shows consecutive pieces as one state). Bounds memory at
    /// about 32 bytes per record.
    pub reorder_limit: usize,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions {
            wakeups: false,
            date: None,
            reorder_limit: DEFAULT_REORDER_LIMIT,
        }
    }
}

impl ExportOptions {
    /// Writes wakeups as communications (or not).
    pub fn with_wakeups(mut self, on: bool) -> ExportOptions {
        self.wakeups = on;
        self
    }

    /// Sets the header's date.
    pub fn with_date(mut self, date: SystemTime) -> ExportOptions {
        self.date = Some(date);
        self
    }

    /// Sets the reorder limit (at least 1).
    pub fn with_reorder_limit(mut self, records: usize) -> ExportOptions {
        self.reorder_limit = records.max(1);
        self
    }
}

/// What an export wrote.
#[derive(Debug)]
#[non_exhaustive]
pub struct ExportSummary {
    /// The `.prv` written.
    pub prv: PathBuf,
    /// The `.pcf` written.
    pub pcf: PathBuf,
    /// The `.row` written.
    pub row: PathBuf,
    /// Paraver applications (processes).
    pub applications: usize,
    /// Paraver threads.
    pub threads: usize,
    /// CPUs in the header.
    pub cpus: u16,
    /// The trace's end, ns from its origin (the header's end time).
    pub end_ns: u64,
    /// Timed records read from the trace.
    pub trace_records: u64,
    /// State records written.
    pub states: u64,
    /// Event records written.
    pub events: u64,
    /// Communication records written.
    pub communications: u64,
    /// State records that are pieces of a longer state, split to bound memory.
    pub state_pieces: u64,
    /// Values not written because Paraver cannot hold them (ids of 2^31 or more, CPUs
    /// beyond the trace's CPU count, events of threads the trace does not follow).
    pub skipped: u64,
    /// What the timeline repaired.
    pub repairs: Repairs,
    /// Whether the recording finished cleanly.
    pub complete: bool,
    /// Where the trace stops being readable, when it is cut short or damaged: the
    /// files hold everything before it. The command should print this and fail.
    pub damage: Option<ReadError>,
}

/// Why an export failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ExportError {
    /// The trace cannot be opened or is not a trace.
    Read {
        /// The trace.
        path: PathBuf,
        /// Why.
        source: ReadError,
    },
    /// The trace holds no thread or no timed record: nothing was recorded.
    Empty {
        /// The trace.
        path: PathBuf,
        /// Where the trace stops being readable, if it was cut short or is damaged
        /// (why it may hold nothing).
        damage: Option<ReadError>,
    },
    /// An output file could not be written.
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            ExportError::Empty { path, damage } => {
                write!(
                    f,
                    "{}: nothing to export: the trace holds no threads or no records",
                    path.display()
                )?;
                match damage {
                    Some(d) => write!(f, " ({d})"),
                    None => Ok(()),
                }
            }
            ExportError::Write { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for ExportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExportError::Read { source, .. } => Some(source),
            ExportError::Write { source, .. } => Some(source),
            ExportError::Empty { damage, .. } => damage.as_ref().map(|d| d as _),
        }
    }
}

/// Exports the trace at `trace` to `STEM.prv`, `STEM.pcf` and `STEM.row` (`stem` plus
/// the extension: `out/app` gives `out/app.prv`). A cut or damaged trace is exported
/// up to where it stops, and [`ExportSummary::damage`] says where.
pub fn export(
    trace: &Path,
    stem: &Path,
    opts: &ExportOptions,
) -> Result<ExportSummary, ExportError> {
    export::export(trace, stem, opts)
}
