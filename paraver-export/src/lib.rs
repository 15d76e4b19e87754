//! Writes a sonda trace as a Paraver trace: `STEM.prv` (header and records),
//! `STEM.pcf` (state and event labels, colours), `STEM.row` (CPU, node, process and
//! thread names) and ready-made views `STEM.<view>.cfg` (module `cfg`).
//!
//! [`export`] is the stable entry point for the `sonda paraver` command: it takes a
//! trace opened with `sonda_timeline::Trace::open` and writes each output to a writer
//! the caller creates ([`Outputs`]; the library never opens an output path). The thread
//! states, calls and spans come from `sonda_timeline`; this crate lays them out in
//! Paraver's model (one application per process, one task, its threads: module
//! `layout`), numbers them ([`conventions`], the one place for Paraver numbers), and
//! writes them in the order Paraver needs with bounded memory (module `reorder`).
//!
//! Options ([`ExportOptions`]) choose a time window ([`TimeWindow`]), the threads shown
//! ([`ThreadPattern`], JVM-internal threads in or out: module `select`), wakeups as
//! communications, and a progress callback; memory stays bounded by the reorder
//! limit and the number of threads, whatever the trace's length.
//!
//! What the output guarantees (checked by `prvcheck` in the tests): every thread's
//! states cover `[0, END]` exactly (Not created before its creation and after its end),
//! records in ascending time, each thread's states in begin order without overlap,
//! times in ns from the trace's origin, each record's CPU the one its thread is on
//! (1-based, 0 for none), every event value labelled in the `.pcf` and below 2^31.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cfg;
pub mod conventions;
mod export;
mod header;
pub mod layout;
mod pcf;
mod records;
mod reorder;
pub mod select;
mod translate;
mod window;

use std::ffi::OsString;
use std::fmt;
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sonda_timeline::{Repairs, Trace, TraceError};
use sonda_trace::{Damage, ReadError};

pub use select::ThreadPattern;
/// Told how far an export got: `(records read, records in the trace)`, every few
/// thousand records and once at the end (the timeline driver's progress).
pub use sonda_timeline::Progress;
pub use window::{parse_time, TimeWindow};

/// Records the reorder buffer holds by default before it splits long states (about
/// 16 MiB of records; see [`ExportOptions::reorder_limit`]).
pub const DEFAULT_REORDER_LIMIT: usize = 1 << 19;

/// How to export. Build with `ExportOptions::default()` and the `with_` methods:
/// fields may be added.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ExportOptions {
    /// Write wakeups as Paraver communications (record type 3) from the waker (when
    /// it woke the thread, `sched_waking`) to the wakee (when it next runs). Only
    /// between threads the Paraver trace holds: a wakeup by a thread the trace does not
    /// follow (an interrupt, another program) is left out. On by default.
    pub wakeups: bool,
    /// The date in the `.prv` header (UTC); `None`: now.
    pub date: Option<SystemTime>,
    /// Most records held back for reordering: more, and states still open are written
    /// in pieces (Paraver shows consecutive pieces as one state). Bounds memory at
    /// about 32 bytes per record.
    pub reorder_limit: usize,
    /// The part of the trace to export (default: all of it).
    pub window: TimeWindow,
    /// Threads to export: those matching any pattern (none: every thread).
    pub threads: Vec<ThreadPattern>,
    /// Whether JVM-internal threads are exported (see [`select`]). On by default.
    pub jvm_internal: bool,
    /// Whether to write the ready-made `.cfg` views. On by default.
    pub cfgs: bool,
    /// Called as the export progresses.
    pub progress: Option<Progress>,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions {
            wakeups: true,
            date: None,
            reorder_limit: DEFAULT_REORDER_LIMIT,
            window: TimeWindow::default(),
            threads: Vec::new(),
            jvm_internal: true,
            cfgs: true,
            progress: None,
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

    /// Exports only `window`.
    pub fn with_window(mut self, window: TimeWindow) -> ExportOptions {
        self.window = window;
        self
    }

    /// Exports only the threads matching one of `patterns`.
    pub fn with_threads(mut self, patterns: Vec<ThreadPattern>) -> ExportOptions {
        self.threads = patterns;
        self
    }

    /// Includes JVM-internal threads (or not).
    pub fn with_jvm_internal(mut self, on: bool) -> ExportOptions {
        self.jvm_internal = on;
        self
    }

    /// Writes the `.cfg` views (or not).
    pub fn with_cfgs(mut self, on: bool) -> ExportOptions {
        self.cfgs = on;
        self
    }

    /// Reports progress to `progress`.
    pub fn with_progress(mut self, progress: Progress) -> ExportOptions {
        self.progress = Some(progress);
        self
    }
}

/// One output of an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Output {
    /// The `.prv`: header and records.
    Prv,
    /// The `.pcf`: state and event labels, colours.
    Pcf,
    /// The `.row`: CPU, node, process and thread names.
    Row,
    /// A ready-made view, `.NAME.cfg` (module `cfg`).
    Cfg(&'static str),
}

impl Output {
    /// Its file name's extension: `prv`, `pcf`, `row`, `NAME.cfg`.
    pub fn extension(&self) -> String {
        match self {
            Output::Prv => "prv".into(),
            Output::Pcf => "pcf".into(),
            Output::Row => "row".into(),
            Output::Cfg(name) => format!("{name}.cfg"),
        }
    }

    /// Its usual path: `stem` plus `.` and the extension (`out/app` gives
    /// `out/app.prv`; not `Path::with_extension`, which would replace a dotted stem's
    /// end). Computes the path only: opening it is the caller's ([`Outputs`]).
    pub fn path(&self, stem: &Path) -> PathBuf {
        let mut s = OsString::from(stem.as_os_str());
        s.push(".");
        s.push(self.extension());
        PathBuf::from(s)
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, ".{}", self.extension())
    }
}

/// Where an export's outputs go. The exporter never opens a path itself: the caller
/// decides where each output is written (a file, a temporary file renamed into place
/// once the export succeeded, memory), so that the command controls every file it
/// writes. Each output is created once, written in full, then dropped; every output
/// is complete when [`export`] returns `Ok`.
pub trait Outputs {
    /// A writer of one output. Seekable because of the `.prv` (the others are written
    /// front to back): its header, written first, holds the trace's end as the
    /// metadata scan announced it, and when the records stop before that end (a
    /// damaged trace), the header is rewritten in place, at offset 0 and of the same
    /// length (the end is zero-padded). `File` and `io::Cursor<Vec<u8>>` do.
    type Writer: Write + Seek;

    /// Creates (truncates) `output`. Called only after the trace, the thread selection
    /// and the window were checked, so an export that fails on its input creates
    /// nothing.
    fn create(&mut self, output: Output) -> io::Result<Self::Writer>;

    /// How error messages name `output`: its path, for files. By default `the .prv`
    /// and so on.
    fn name(&self, output: Output) -> String {
        format!("the {output}")
    }
}

/// What an export wrote.
#[derive(Debug)]
#[non_exhaustive]
pub struct ExportSummary {
    /// The `.cfg` views written (besides the `.prv`, `.pcf` and `.row`).
    pub cfgs: Vec<Output>,
    /// Where the exported window begins in the trace (ns from its origin): Paraver's
    /// time 0.
    pub from_ns: u64,
    /// Paraver applications (processes).
    pub applications: usize,
    /// Paraver threads.
    pub threads: usize,
    /// CPUs in the header.
    pub cpus: u16,
    /// The Paraver trace's end (the header's end time): ns from the window's start.
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
    /// The first damage, when the trace is cut short or damaged: the files hold
    /// every intact block ([`ExportSummary::unread`] lists what was skipped). The
    /// command should print this and fail.
    pub damage: Option<ReadError>,
    /// Every stretch of the file skipped as damaged.
    pub unread: Damage,
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
    /// The time window does not overlap the trace.
    Window {
        /// The trace.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The thread filter (and the JVM-internal rule) left no thread.
    NoThreads {
        /// The trace.
        path: PathBuf,
        /// The patterns given.
        patterns: Vec<String>,
        /// Whether JVM-internal threads were left out.
        jvm_internal_out: bool,
    },
    /// An output could not be created or written.
    Write {
        /// The output.
        output: Output,
        /// Its name in messages ([`Outputs::name`]: its path, for a file).
        name: String,
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
            ExportError::Window { path, reason } => write!(f, "{}: {reason}", path.display()),
            ExportError::NoThreads {
                path,
                patterns,
                jvm_internal_out,
            } => {
                write!(f, "{}: no thread ", path.display())?;
                if !patterns.is_empty() {
                    write!(f, "matches --threads {}", patterns.join(", "))?;
                    if *jvm_internal_out {
                        write!(f, " once ")?;
                    }
                }
                if *jvm_internal_out {
                    write!(f, "JVM-internal threads are left out")?;
                }
                Ok(())
            }
            ExportError::Write { name, source, .. } => write!(f, "cannot write {name}: {source}"),
        }
    }
}

impl std::error::Error for ExportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExportError::Read { source, .. } => Some(source),
            ExportError::Write { source, .. } => Some(source),
            ExportError::Empty { damage, .. } => damage.as_ref().map(|d| d as _),
            ExportError::Window { .. } | ExportError::NoThreads { .. } => None,
        }
    }
}

impl From<TraceError> for ExportError {
    fn from(e: TraceError) -> ExportError {
        ExportError::Read {
            path: e.path,
            source: e.source,
        }
    }
}

/// Exports `trace` (opened with [`Trace::open`]) to the `.prv`, `.pcf`, `.row` and,
/// if asked, the `.cfg` views, each created through `outputs` (see [`Outputs`] for why
/// the `.prv`'s writer must seek). A damaged block is skipped (every intact block is
/// exported), a cut trace is exported up to where it stops, and
/// [`ExportSummary::damage`] says where.
pub fn export<O: Outputs>(
    trace: Trace,
    outputs: &mut O,
    opts: &ExportOptions,
) -> Result<ExportSummary, ExportError> {
    export::export(trace, outputs, opts)
}
