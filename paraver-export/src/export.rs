//! The export driver: two passes over the trace, as the `.prv` header needs every
//! thread before the first record.
//!
//! 1. `TraceMeta::scan` (seeks over the records): threads, processes, methods, classes,
//!    CPUs, where the data ends. The thread selection and the time window are checked
//!    against it.
//! 2. A look-ahead over the records until every selected thread's first record is seen
//!    (often only the start of the trace: a recording samples every thread when it
//!    starts), so that states written before a thread's first record are right
//!    (`Timeline::presume_from`).
//! 3. The records through the timeline into the reorder buffer, written as they become
//!    final; at the window's start what is open (calls, monitor waits, collections) is
//!    opened in the `.prv`, and the records stop at its end, where the timeline closes
//!    everything. Then the `.pcf`, `.row` and `.cfg` files, which need names and values
//!    seen on the way.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sonda_timeline::names::method_labels;
use sonda_timeline::{CallEnter, Edge, Feed, GcSpan, MonitorWait, Sink, ThreadIx, Timeline};
use sonda_trace::{Source, Time, TraceMeta};

use crate::cfg::{cfg_files, CfgFacts};
use crate::header::header;
use crate::layout::Layout;
use crate::pcf::write_pcf;
use crate::records::PrvWriter;
use crate::select::selected;
use crate::translate::Translate;
use crate::{ExportError, ExportOptions, ExportSummary};

/// Records between two attempts to write out the reorder buffer (and progress calls).
const FLUSH_EVERY: u64 = 4096;

/// `stem` + `.ext` (not `Path::with_extension`, which would replace a dotted stem's end).
fn with_ext(stem: &Path, ext: &str) -> PathBuf {
    let mut s = OsString::from(stem.as_os_str());
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

pub(crate) fn export(
    trace: &Path,
    stem: &Path,
    opts: &ExportOptions,
) -> Result<ExportSummary, ExportError> {
    let read_error = |source| ExportError::Read {
        path: trace.to_path_buf(),
        source,
    };
    let mut meta = TraceMeta::scan(trace).map_err(read_error)?;
    if meta.threads.is_empty() || meta.records == 0 {
        return Err(ExportError::Empty {
            path: trace.to_path_buf(),
            damage: meta.damage.take(),
        });
    }
    let layout = Layout::of(&meta, |t| {
        selected(&meta, t, &opts.threads, opts.jvm_internal)
    });
    if layout.threads.is_empty() {
        return Err(ExportError::NoThreads {
            path: trace.to_path_buf(),
            patterns: opts.threads.iter().map(|p| format!("{p}")).collect(),
            jvm_internal_out: !opts.jvm_internal,
        });
    }
    let source = meta.info.as_ref().map_or(Source::Tracepoints, |i| i.source);

    let mut feed = Feed::open(trace, &meta).map_err(read_error)?;
    let origin = feed.origin();
    let (from, to) = opts
        .window
        .resolve(paraver_end(&feed).since(origin))
        .map_err(|reason| ExportError::Window {
            path: trace.to_path_buf(),
            reason,
        })?;
    let (zero, stop) = (Time(origin.0 + from), Time(origin.0 + to));
    let mut timeline = Timeline::new(origin, source, layout.threads.iter().map(|t| t.0));
    for record in Feed::open(trace, &meta).map_err(read_error)? {
        timeline.presume_from(&record);
        if timeline.all_presumed() {
            break;
        }
    }

    let prv = with_ext(stem, "prv");
    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ExportError::Write { path, source }
    };
    let file = File::create(&prv).map_err(write_error(&prv))?;
    let places: Vec<_> = layout.threads.iter().map(|t| t.1).collect();
    let mut writer = PrvWriter::new(file, &places, layout.cpus);
    let date = opts.date.unwrap_or_else(SystemTime::now);
    let planned_end = to - from;
    writer
        .raw(header(date, planned_end, 0, &layout).as_bytes())
        .map_err(write_error(&prv))?;

    let mut sink = Translate::new(&meta, zero, layout.threads.len(), layout.cpus, opts.wakeups);
    let total = meta.records;
    let mut opened = from == 0;
    let mut pushed: u64 = 0;
    for record in feed.by_ref() {
        if record.time > stop {
            break;
        }
        if !opened && record.time >= zero {
            open_spans(&timeline, zero, &mut sink);
            opened = true;
        }
        timeline.push(&record, &mut sink);
        pushed += 1;
        if pushed.is_multiple_of(FLUSH_EVERY) {
            drain(
                &mut timeline,
                &mut sink,
                &mut writer,
                record.time,
                zero,
                opts.reorder_limit,
            )
            .map_err(write_error(&prv))?;
            if let Some(p) = &opts.progress {
                p.tell(pushed, total);
            }
        }
    }
    let end = paraver_end(&feed).min(stop);
    if !opened {
        open_spans(&timeline, zero, &mut sink);
    }
    timeline.finish(end, &mut sink);
    sink.reorder
        .flush_upto(u64::MAX, &mut writer)
        .map_err(write_error(&prv))?;
    if let Some(p) = &opts.progress {
        p.tell(pushed, total);
    }
    let written = writer.written;
    let file = writer.finish().map_err(write_error(&prv))?;
    let end_ns = end.since(zero).max(1);
    if end_ns != planned_end {
        // The records stopped before the scan's end (a damaged block): the header must
        // say where the data ends. Same length, so it is rewritten in place.
        let width = planned_end.to_string().len();
        rewrite_header(file, &header(date, end_ns, width, &layout)).map_err(write_error(&prv))?;
    }

    let pcf = with_ext(stem, "pcf");
    let mut labels = sink.labels(&meta, &method_labels(&meta));
    labels.threads = layout.thread_labels(&meta, &timeline);
    write_file(&pcf, |out| write_pcf(out, &labels)).map_err(write_error(&pcf))?;
    let row = with_ext(stem, "row");
    write_file(&row, |out| layout.write_row(&meta, &timeline, out)).map_err(write_error(&row))?;
    let mut cfgs = Vec::new();
    if opts.cfgs {
        let facts = CfgFacts {
            max_function: sink.wrote.max_function,
            max_monitor: sink.wrote.max_monitor,
            threads: layout.threads.len() as u32,
            cpu_view: sink.wrote.cpu_view,
            gc: sink.wrote.gc,
            monitors: sink.wrote.monitors,
            functions: sink.wrote.functions,
        };
        for file in cfg_files(&facts) {
            let path = with_ext(stem, &format!("{}.cfg", file.suffix));
            write_file(&path, |out| out.write_all(file.text.as_bytes()))
                .map_err(write_error(&path))?;
            cfgs.push(path);
        }
    }

    Ok(ExportSummary {
        prv,
        pcf,
        row,
        cfgs,
        from_ns: from,
        applications: layout.applications.len(),
        threads: layout.threads.len(),
        cpus: layout.cpus,
        end_ns,
        trace_records: feed.records(),
        states: written.states,
        events: written.events,
        communications: written.comms,
        state_pieces: sink.pieces,
        skipped: sink.skipped,
        repairs: timeline.repairs(),
        complete: meta.complete,
        damage: feed.into_damage().or(meta.damage.take()),
    })
}

/// Where the Paraver trace ends: the trace's end, but at least 1 ns after the origin,
/// as every thread needs a state and a state is never empty.
fn paraver_end(feed: &Feed) -> Time {
    feed.end().max(Time(feed.origin().0 + 1))
}

/// At the window's start `zero`, opens in the `.prv` what began before it: the CPU
/// view's entry of each running thread, each thread's calls (outermost first), the
/// monitor it waits for, and the collections in progress.
fn open_spans(timeline: &Timeline, zero: Time, sink: &mut Translate) {
    for i in 0..timeline.len() {
        let ix = ThreadIx(i as u32);
        let at = timeline.at(ix, zero);
        sink.running_at(&at);
        let (frames, monitor) = timeline.open_spans(ix);
        for (depth, frame) in frames.enumerate() {
            sink.enter(&CallEnter {
                at,
                frame,
                depth: depth + 1,
            });
        }
        if let Some(class) = monitor {
            sink.monitor(&MonitorWait {
                at,
                class,
                edge: Edge::Begin,
            });
        }
    }
    for (pid, _, thread) in timeline.open_gcs() {
        let at = thread.map(|ix| timeline.at(ix, zero));
        sink.gc(&GcSpan {
            pid,
            at,
            time: zero,
            edge: Edge::Begin,
        });
    }
}

/// Writes out what the reorder buffer may; when it holds more than `limit` records,
/// first cuts the open states at a time between the low water and `now`, halving the
/// span until enough can go.
fn drain<W: Write>(
    timeline: &mut Timeline,
    sink: &mut Translate,
    writer: &mut PrvWriter<W>,
    now: Time,
    zero: Time,
    limit: usize,
) -> io::Result<()> {
    loop {
        let low = timeline.low_water();
        sink.reorder.flush_upto(low.since(zero), writer)?;
        if sink.reorder.len() <= limit || low >= now {
            return Ok(());
        }
        let mid = Time(low.0 + (now.0 - low.0) / 2);
        let cut = if mid > low { mid } else { now };
        sink.cutting = true;
        timeline.cut(cut, sink);
        sink.cutting = false;
    }
}

fn rewrite_header(mut file: File, header: &str) -> io::Result<()> {
    file.seek(SeekFrom::Start(0))?;
    file.write_all(header.as_bytes())?;
    file.flush()
}

fn write_file(path: &Path, body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let mut out = BufWriter::new(
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?,
    );
    body(&mut out)?;
    out.flush()
}
