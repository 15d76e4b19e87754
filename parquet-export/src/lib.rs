//! Writes a sonda trace as Parquet tables, for the engines people already run over
//! columnar files (DuckDB on a laptop, Spark or Trino on a cluster): one table per
//! kind of record ([`Table`]: calls with the parts of their time, thread state
//! intervals, wakeups, garbage collections, monitor waits) and the names and facts
//! they refer to (methods, threads, counters, the trace). The schema is `docs/parquet.md`;
//! module `schema` is its one definition here.
//!
//! [`export`] is the entry point of `sonda export --parquet`: it takes a trace opened
//! with `sonda_timeline::Trace::open` and writes each file to a writer the caller
//! creates ([`Outputs`]; the library never opens a path), so that the command decides
//! how files are created, named while incomplete and put in place. The records stream
//! once through the timeline's driver, the per-call join of `sonda-model` (the same
//! figures `sonda services` reports) and the tables' writers (module `writer`), which
//! buffer at most a row group per table and a bounded total ([`ExportOptions`]):
//! memory does not grow with the trace's length.
//!
//! Where the files go ([`Partition`], module `partition`): `ROOT/<table>/host=H/
//! trace=T/part-NNNNN.parquet`, Hive-style, so that the exports of many traces sit in
//! one dataset and each table of all of them reads as one.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod export;
mod partition;
pub mod schema;
mod writer;

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use sonda_model::join::JoinStats;
use sonda_timeline::{Repairs, Trace, TraceError};
use sonda_trace::{Damage, ReadError};

pub use partition::Partition;
pub use schema::Table;
/// Told how far an export got: `(records read, records in the trace)` (the timeline
/// driver's progress).
pub use sonda_timeline::Progress;
pub use writer::TableCounts;

/// The version of the tables' schema, in every file's key-value metadata
/// (`sonda.schema`): a change that can break a reader increments it.
pub const SCHEMA_VERSION: u32 = 1;

/// How to export. Build with `ExportOptions::default()` and the `with_` methods:
/// fields may be added.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ExportOptions {
    /// A table's buffered rows are written as a row group when they reach this many
    /// bytes (8 MiB by default: about 45,000 calls or 300,000 states).
    pub row_group_bytes: usize,
    /// The most bytes of rows all tables buffer together: past it, the table holding
    /// the most writes its row group early (32 MiB by default).
    pub buffer_bytes: usize,
    /// A file is closed after this many row groups, and the table goes on in its next
    /// part file (64 by default): bounds the footer each writer keeps in memory.
    pub row_groups_per_file: usize,
    /// Called as the export progresses.
    pub progress: Option<Progress>,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions {
            row_group_bytes: 8 << 20,
            buffer_bytes: 32 << 20,
            row_groups_per_file: 64,
            progress: None,
        }
    }
}

impl ExportOptions {
    /// Sets the row groups' size (at least 1 byte: one row a group).
    pub fn with_row_group_bytes(mut self, bytes: usize) -> ExportOptions {
        self.row_group_bytes = bytes.max(1);
        self
    }

    /// Sets the total buffer (at least 1 byte).
    pub fn with_buffer_bytes(mut self, bytes: usize) -> ExportOptions {
        self.buffer_bytes = bytes.max(1);
        self
    }

    /// Sets the row groups per file (at least 1).
    pub fn with_row_groups_per_file(mut self, groups: usize) -> ExportOptions {
        self.row_groups_per_file = groups.max(1);
        self
    }

    /// Reports progress to `progress`.
    pub fn with_progress(mut self, progress: Progress) -> ExportOptions {
        self.progress = Some(progress);
        self
    }
}

/// One file of an export: a part of one table of the trace's partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OutputFile {
    /// The table.
    pub table: Table,
    /// Its part, from 0: a table is written in one or more files.
    pub part: u32,
}

impl OutputFile {
    /// Its file name: `part-NNNNN.parquet`.
    pub fn file_name(&self) -> String {
        format!("part-{:05}.parquet", self.part)
    }

    /// Its usual path in the dataset at `root`: `root/<table>/host=H/trace=T/
    /// part-NNNNN.parquet`. Computes the path only: creating it is the caller's
    /// ([`Outputs`]).
    pub fn path(&self, root: &Path, partition: &Partition) -> PathBuf {
        partition.table_dir(root, self.table).join(self.file_name())
    }
}

/// Where an export's files go. The exporter never opens a path itself: the caller
/// creates each file (as a file under a temporary name, renamed into place once the
/// export succeeded; in memory), so that the command controls every file it writes.
/// Every table gets at least one file (an empty table a file without rows, so that
/// each trace of a dataset has every table); each file is created once, written in
/// full and dropped before [`export`] returns `Ok`.
pub trait Outputs {
    /// A writer of one file.
    type Writer: Write + Send;

    /// Creates `file`. Called only after the trace was checked, so an export that
    /// fails on its input creates nothing.
    fn create(&mut self, file: &OutputFile) -> io::Result<Self::Writer>;

    /// How error messages name `file`: its path, for files. By default `the calls
    /// table's part 0` and so on.
    fn name(&self, file: &OutputFile) -> String {
        format!("the {} table's part {}", file.table.name(), file.part)
    }
}

/// What an export wrote.
#[derive(Debug)]
#[non_exhaustive]
pub struct ExportSummary {
    /// The trace's partition.
    pub partition: Partition,
    /// What each table wrote, in [`Table::ALL`]'s order.
    pub tables: Vec<(Table, TableCounts)>,
    /// Timed records read from the trace.
    pub trace_records: u64,
    /// From the trace's origin to its end (ns).
    pub duration_ns: u64,
    /// The most bytes of rows the tables buffered at once.
    pub peak_buffered: usize,
    /// What the timeline repaired.
    pub repairs: Repairs,
    /// The per-call join's self-checks.
    pub join: JoinStats,
    /// Whether the recording finished cleanly.
    pub complete: bool,
    /// The first damage, when the trace is cut short or damaged: the tables hold
    /// every intact block ([`ExportSummary::unread`] lists what was skipped). The
    /// command should print this and fail.
    pub damage: Option<ReadError>,
    /// Every stretch of the file skipped as damaged.
    pub unread: Damage,
}

impl ExportSummary {
    /// What `table` wrote.
    pub fn counts(&self, table: Table) -> TableCounts {
        self.tables
            .iter()
            .find(|(t, _)| *t == table)
            .map_or_else(TableCounts::default, |(_, c)| *c)
    }

    /// Rows written, all tables together.
    pub fn rows(&self) -> u64 {
        self.tables.iter().map(|(_, c)| c.rows).sum()
    }
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
    /// A file could not be created or written.
    Write {
        /// Its name in messages ([`Outputs::name`]: its path, for a file).
        name: String,
        /// Why.
        source: io::Error,
    },
    /// A table's rows do not match its columns: a bug of this crate.
    Internal(String),
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
            ExportError::Write { name, source } => write!(f, "cannot write {name}: {source}"),
            ExportError::Internal(what) => write!(f, "internal error: {what}"),
        }
    }
}

impl std::error::Error for ExportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExportError::Read { source, .. } => Some(source),
            ExportError::Write { source, .. } => Some(source),
            ExportError::Empty { damage, .. } => damage.as_ref().map(|d| d as _),
            ExportError::Internal(_) => None,
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

/// Exports `trace` (opened with [`Trace::open`]) to every table's files, each created
/// through `outputs`. A damaged block is skipped (every intact block is
/// exported), a cut trace is exported up to where it stops, and
/// [`ExportSummary::damage`] says where (so does the `traces` table's `damage`).
pub fn export<O: Outputs>(
    trace: Trace,
    outputs: &mut O,
    opts: &ExportOptions,
) -> Result<ExportSummary, ExportError> {
    export::export(trace, outputs, opts)
}
