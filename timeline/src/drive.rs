//! The driver: the one loop that reads a trace through a [`Timeline`] into a consumer,
//! shared by every view of a trace (the terminal report, the Paraver export, the
//! service-time model).
//!
//! Two steps, because every consumer needs the trace's metadata before the records:
//!
//! 1. [`Trace::open`] scans the metadata (`TraceMeta::scan`: names, counters, where
//!    the data ends, damage found on the way). The caller looks at
//!    [`Trace::meta`] to lay out its output, pick threads, label methods.
//! 2. [`Trace::drive`] (a plain [`Sink`]) or [`Trace::drive_with`] (a
//!    [`Consumer`] with hooks around each record) streams the records: opens a
//!    [`Feed`], builds the timeline over the chosen threads, optionally runs the
//!    look-ahead that presumes each thread's state before its first record, pushes
//!    every record, finishes the timeline at the trace's end, and hands back a
//!    [`Driven`]: the metadata, the finished timeline (for its statistics, repairs and
//!    renames), origin, end, records read and where the records stopped being
//!    readable.
//!
//! Several sinks can be fed in one pass: a pair of sinks is a sink (`(a, b)`, nested
//! for more), as is `&mut S` for any sink `S`.

use std::convert::Infallible;
use std::fmt;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sonda_trace::{ReadError, Record, Source, Tid, Time, TraceMeta};

use crate::feed::{origin, Feed};
use crate::output::Sink;
use crate::timeline::Timeline;

/// Records pushed between two progress reports.
const PROGRESS_EVERY: u64 = 4096;

/// Told how far a pass got: `(records pushed, records in the trace)`, every few
/// thousand records and once at the end.
#[derive(Clone)]
pub struct Progress(Arc<dyn Fn(u64, u64) + Send + Sync>);

impl Progress {
    /// A progress callback.
    pub fn new(f: impl Fn(u64, u64) + Send + Sync + 'static) -> Progress {
        Progress(Arc::new(f))
    }

    fn tell(&self, done: u64, total: u64) {
        (self.0)(done, total)
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Progress(..)")
    }
}

/// A trace that cannot be opened or is not a trace, with its path (displayed as
/// `PATH: why`).
#[derive(Debug)]
pub struct TraceError {
    /// The trace.
    pub path: PathBuf,
    /// Why.
    pub source: ReadError,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for TraceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Why a pass stopped before its end.
#[derive(Debug)]
pub enum DriveError<E> {
    /// The records could not be opened.
    Read(ReadError),
    /// The consumer failed (e.g. could not write its output).
    Consumer(E),
}

impl<E: fmt::Display> fmt::Display for DriveError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriveError::Read(e) => write!(f, "{e}"),
            DriveError::Consumer(e) => write!(f, "{e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for DriveError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DriveError::Read(e) => Some(e),
            DriveError::Consumer(e) => Some(e),
        }
    }
}

/// How to run a pass. Build with `DriveOptions::default()` and the `with_` methods:
/// fields may be added.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct DriveOptions {
    /// The threads the timeline follows, in [`crate::ThreadIx`] order; `None`: every
    /// thread of the trace's metadata, in its order (by tid).
    pub threads: Option<Vec<Tid>>,
    /// Run the look-ahead first ([`Timeline::presume_from`]): reads the records until
    /// every followed thread has been named once, so that the state of each thread
    /// before its first record is exact even when a consumer writes it out early
    /// ([`Timeline::cut`]). Off by default: a consumer that never cuts gets the same
    /// states without it.
    pub look_ahead: bool,
    /// Told as the pass progresses.
    pub progress: Option<Progress>,
}

impl DriveOptions {
    /// Follows only `threads` (in this order).
    pub fn with_threads(mut self, threads: impl IntoIterator<Item = Tid>) -> DriveOptions {
        self.threads = Some(threads.into_iter().collect());
        self
    }

    /// Runs the look-ahead (or not).
    pub fn with_look_ahead(mut self, on: bool) -> DriveOptions {
        self.look_ahead = on;
        self
    }

    /// Reports progress to `progress`.
    pub fn with_progress(mut self, progress: Option<Progress>) -> DriveOptions {
        self.progress = progress;
        self
    }
}

/// What a pass feeds: a [`Sink`] for the timeline's outputs, and hooks around each
/// record for consumers that must act between records (write out what became final,
/// stop at the end of a time window, read the timeline's current state).
///
/// Every hook has a default that does nothing.
pub trait Consumer {
    /// Where the timeline's outputs go.
    type Sink: Sink;
    /// What a hook can fail with ([`Infallible`] if nothing).
    type Error;

    /// The sink, borrowed for each push.
    fn sink(&mut self) -> &mut Self::Sink;

    /// Before `record` is pushed. `Break` ends the records there: `record` is not
    /// pushed (it is counted as read) and the timeline is finished.
    fn before(&mut self, _timeline: &Timeline, _record: &Record) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    /// After `record` was pushed; an error ends the pass at once.
    fn after(&mut self, _timeline: &mut Timeline, _record: &Record) -> Result<(), Self::Error> {
        Ok(())
    }

    /// After the last record: returns where to finish the timeline, given `end`, the
    /// trace's end (its last record's time, or the last readable one's).
    fn closing(&mut self, _timeline: &Timeline, end: Time) -> Time {
        end
    }

    /// After the timeline was finished.
    fn finished(&mut self, _timeline: &mut Timeline) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// A plain sink as a consumer without hooks.
struct Plain<'a, S>(&'a mut S);

impl<S: Sink> Consumer for Plain<'_, S> {
    type Sink = S;
    type Error = Infallible;

    fn sink(&mut self) -> &mut S {
        self.0
    }
}

/// A trace whose metadata is scanned, ready for one pass over its records.
#[derive(Debug)]
pub struct Trace {
    path: PathBuf,
    meta: TraceMeta,
}

/// A finished pass.
#[derive(Debug)]
#[non_exhaustive]
pub struct Driven {
    /// The trace's metadata (its `damage` moved to [`Driven::damage`]).
    pub meta: TraceMeta,
    /// The finished timeline: per-thread statistics, repairs, renames.
    pub timeline: Timeline,
    /// The time origin.
    pub origin: Time,
    /// Where the timeline was finished (see [`Consumer::closing`]).
    pub end: Time,
    /// Records read (those pushed, and the one a consumer stopped at).
    pub records: u64,
    /// Records pushed through the timeline.
    pub pushed: u64,
    /// Where the trace stops being readable, when it is cut short or damaged: the
    /// records before it were delivered. From the records, else from the scan.
    pub damage: Option<ReadError>,
}

impl Trace {
    /// Scans the metadata of the trace at `path`.
    pub fn open(path: &Path) -> Result<Trace, TraceError> {
        let meta = TraceMeta::scan(path).map_err(|source| TraceError {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Trace {
            path: path.to_path_buf(),
            meta,
        })
    }

    /// The trace's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The metadata.
    pub fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    /// The metadata, to complete it before the pass (e.g. name native functions).
    pub fn meta_mut(&mut self) -> &mut TraceMeta {
        &mut self.meta
    }

    /// Where the thread states come from (tracepoints when the trace does not say).
    pub fn source(&self) -> Source {
        self.meta
            .info
            .as_ref()
            .map_or(Source::Tracepoints, |i| i.source)
    }

    /// The time origin (see [`crate::origin`]).
    pub fn origin(&self) -> Time {
        origin(&self.meta)
    }

    /// The trace's end if its records are readable up to the last one the scan saw:
    /// what a pass ends at unless the records are damaged before.
    pub fn end(&self) -> Time {
        let origin = self.origin();
        self.meta.last_time.unwrap_or(origin).max(origin)
    }

    /// Streams every record of every thread into `sink`, without look-ahead.
    pub fn drive<S: Sink>(self, sink: &mut S) -> Result<Driven, ReadError> {
        self.drive_with(&DriveOptions::default(), &mut Plain(sink))
            .map_err(|e| match e {
                DriveError::Read(e) => e,
                DriveError::Consumer(never) => match never {},
            })
    }

    /// Streams the records into `consumer` as `opts` says: the look-ahead if asked,
    /// then each record through [`Consumer::before`], the timeline and
    /// [`Consumer::after`], until the records end (or are damaged) or `before` stops
    /// them; then finishes the timeline where [`Consumer::closing`] says.
    pub fn drive_with<C: Consumer>(
        mut self,
        opts: &DriveOptions,
        consumer: &mut C,
    ) -> Result<Driven, DriveError<C::Error>> {
        let mut feed = Feed::open(&self.path, &self.meta).map_err(DriveError::Read)?;
        let origin = feed.origin();
        let source = self.source();
        let mut timeline = match &opts.threads {
            Some(threads) => Timeline::new(origin, source, threads.iter().copied()),
            None => Timeline::new(origin, source, self.meta.threads.keys().copied()),
        };
        if self.meta.switches_dated_by_clock() {
            timeline.switches_dated_by_clock();
        }
        timeline.removed_methods(self.meta.removals.iter().map(|r| (r.id, r.time)));
        if opts.look_ahead {
            for record in Feed::open(&self.path, &self.meta).map_err(DriveError::Read)? {
                timeline.presume_from(&record);
                if timeline.all_presumed() {
                    break;
                }
            }
        }
        let total = self.meta.records;
        let mut pushed: u64 = 0;
        for record in feed.by_ref() {
            if consumer.before(&timeline, &record).is_break() {
                break;
            }
            timeline.push(&record, consumer.sink());
            consumer
                .after(&mut timeline, &record)
                .map_err(DriveError::Consumer)?;
            pushed += 1;
            if pushed.is_multiple_of(PROGRESS_EVERY) {
                if let Some(p) = &opts.progress {
                    p.tell(pushed, total);
                }
            }
        }
        let end = consumer.closing(&timeline, feed.end());
        timeline.finish(end, consumer.sink());
        consumer
            .finished(&mut timeline)
            .map_err(DriveError::Consumer)?;
        if let Some(p) = &opts.progress {
            p.tell(pushed, total);
        }
        let records = feed.records();
        let damage = feed.into_damage().or(self.meta.damage.take());
        Ok(Driven {
            meta: self.meta,
            timeline,
            origin,
            end,
            records,
            pushed,
            damage,
        })
    }
}
