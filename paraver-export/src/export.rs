//! The export: two passes over the trace, as the `.prv` header needs every thread
//! before the first record; both run by the timeline's driver (`Trace`).
//!
//! 1. `Trace::open`, the metadata scan (seeks over the records): threads, processes,
//!    methods, classes, CPUs, where the data ends. The thread selection and the time
//!    window are checked against it, and the `.prv` header written from it.
//! 2. The driver's look-ahead over the records until every selected thread's first
//!    record is seen (often only the start of the trace: a recording samples every
//!    thread when it starts), so that states written before a thread's first record
//!    are right (`Timeline::presume_from`).
//! 3. The records through the timeline into the reorder buffer (the [`Stream`]
//!    consumer), written as they become final; at the window's start what is open (calls, monitor waits, collections) is
//!    opened in the `.prv`, and the records stop at its end, where the timeline closes
//!    everything. Then the `.pcf`, `.row` and `.cfg` files, which need names and values
//!    seen on the way.

use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::ops::ControlFlow;
use std::time::SystemTime;

use sonda_timeline::names::method_labels;
use sonda_timeline::{
    CallEnter, Consumer, DriveError, DriveOptions, Driven, Edge, GcSpan, MonitorWait, Sink,
    ThreadIx, Timeline, Trace,
};
use sonda_trace::{Record, Time};

use crate::cfg::{cfg_files, CfgFacts};
use crate::header::header;
use crate::layout::Layout;
use crate::pcf::write_pcf;
use crate::records::PrvWriter;
use crate::select::selected;
use crate::translate::Translate;
use crate::{ExportError, ExportOptions, ExportSummary, Output, Outputs};

/// Records between two attempts to write out the reorder buffer.
const FLUSH_EVERY: u64 = 4096;

pub(crate) fn export<O: Outputs>(
    mut trace: Trace,
    outputs: &mut O,
    opts: &ExportOptions,
) -> Result<ExportSummary, ExportError> {
    let path = trace.path().to_path_buf();
    if trace.meta().threads.is_empty() || trace.meta().records == 0 {
        return Err(ExportError::Empty {
            path,
            damage: trace.meta_mut().damage.take(),
        });
    }
    let meta = trace.meta();
    let layout = Layout::of(meta, |t| {
        selected(meta, t, &opts.threads, opts.jvm_internal)
    });
    if layout.threads.is_empty() {
        return Err(ExportError::NoThreads {
            path,
            patterns: opts.threads.iter().map(|p| format!("{p}")).collect(),
            jvm_internal_out: !opts.jvm_internal,
        });
    }

    let origin = trace.origin();
    let (from, to) = opts
        .window
        .resolve(paraver_end(origin, trace.end()).since(origin))
        .map_err(|reason| ExportError::Window {
            path: path.clone(),
            reason,
        })?;
    let (zero, stop) = (Time(origin.0 + from), Time(origin.0 + to));

    let prv_name = outputs.name(Output::Prv);
    let write_error = |source| ExportError::Write {
        output: Output::Prv,
        name: prv_name.clone(),
        source,
    };
    let file = outputs.create(Output::Prv).map_err(write_error)?;
    let places: Vec<_> = layout.threads.iter().map(|t| t.1).collect();
    let mut writer = PrvWriter::new(file, &places, layout.cpus);
    let date = opts.date.unwrap_or_else(SystemTime::now);
    let planned_end = to - from;
    writer
        .raw(header(date, planned_end, 0, &layout).as_bytes())
        .map_err(write_error)?;

    let mut stream = Stream {
        sink: Translate::new(meta, zero, layout.threads.len(), layout.cpus, opts.wakeups),
        writer,
        origin,
        zero,
        stop,
        opened: from == 0,
        pushed: 0,
        limit: opts.reorder_limit,
    };
    let drive = DriveOptions::default()
        .with_threads(layout.threads.iter().map(|t| t.0))
        .with_look_ahead(true)
        .with_progress(opts.progress.clone());
    let Driven {
        meta,
        timeline,
        end,
        records,
        damage,
        ..
    } = trace.drive_with(&drive, &mut stream).map_err(|e| match e {
        DriveError::Read(source) => ExportError::Read { path, source },
        DriveError::Consumer(source) => write_error(source),
    })?;
    let Stream { sink, writer, .. } = stream;
    let written = writer.written;
    let file = writer.finish().map_err(write_error)?;
    let end_ns = end.since(zero).max(1);
    if end_ns != planned_end {
        // The records stopped before the scan's end (a damaged block): the header must
        // say where the data ends. Same length, so it is rewritten in place.
        let width = planned_end.to_string().len();
        rewrite_header(file, &header(date, end_ns, width, &layout)).map_err(write_error)?;
    }

    let mut labels = sink.labels(&meta, &method_labels(&meta));
    labels.threads = layout.thread_labels(&meta, &timeline);
    write_output(outputs, Output::Pcf, |out| write_pcf(out, &labels))?;
    write_output(outputs, Output::Row, |out| {
        layout.write_row(&meta, &timeline, out)
    })?;
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
            let output = Output::Cfg(file.suffix);
            write_output(outputs, output, |out| out.write_all(file.text.as_bytes()))?;
            cfgs.push(output);
        }
    }

    Ok(ExportSummary {
        cfgs,
        from_ns: from,
        applications: layout.applications.len(),
        threads: layout.threads.len(),
        cpus: layout.cpus,
        end_ns,
        trace_records: records,
        states: written.states,
        events: written.events,
        communications: written.comms,
        state_pieces: sink.pieces,
        skipped: sink.skipped,
        repairs: timeline.repairs(),
        complete: meta.complete,
        damage,
        unread: meta.skipped,
    })
}

/// The pass's consumer: the translation into Paraver records, the reorder buffer
/// written out as it becomes final, and the time window.
struct Stream<W: Write> {
    sink: Translate,
    writer: PrvWriter<W>,
    origin: Time,
    /// Paraver's 0 (the window's start) and the window's end, absolute.
    zero: Time,
    stop: Time,
    /// Whether what is open at the window's start was opened in the `.prv`.
    opened: bool,
    pushed: u64,
    limit: usize,
}

impl<W: Write> Consumer for Stream<W> {
    type Sink = Translate;
    type Error = io::Error;

    fn sink(&mut self) -> &mut Translate {
        &mut self.sink
    }

    /// Stops at the window's end; at its start, opens what began before.
    fn before(&mut self, timeline: &Timeline, record: &Record) -> ControlFlow<()> {
        if record.time > self.stop {
            return ControlFlow::Break(());
        }
        if !self.opened && record.time >= self.zero {
            open_spans(timeline, self.zero, &mut self.sink);
            self.opened = true;
        }
        ControlFlow::Continue(())
    }

    fn after(&mut self, timeline: &mut Timeline, record: &Record) -> io::Result<()> {
        self.pushed += 1;
        if self.pushed.is_multiple_of(FLUSH_EVERY) {
            drain(
                timeline,
                &mut self.sink,
                &mut self.writer,
                record.time,
                self.zero,
                self.limit,
            )?;
        }
        Ok(())
    }

    fn closing(&mut self, timeline: &Timeline, end: Time) -> Time {
        if !self.opened {
            open_spans(timeline, self.zero, &mut self.sink);
        }
        paraver_end(self.origin, end).min(self.stop)
    }

    fn finished(&mut self, _: &mut Timeline) -> io::Result<()> {
        self.sink.reorder.flush_upto(u64::MAX, &mut self.writer)
    }
}

/// Where the Paraver trace ends: the trace's `end`, but at least 1 ns after the
/// `origin`, as every thread needs a state and a state is never empty.
fn paraver_end(origin: Time, end: Time) -> Time {
    end.max(Time(origin.0 + 1))
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

fn rewrite_header(mut out: impl Write + Seek, header: &str) -> io::Result<()> {
    out.seek(SeekFrom::Start(0))?;
    out.write_all(header.as_bytes())?;
    out.flush()
}

/// Creates `output` and writes it through a buffer.
fn write_output<O: Outputs>(
    outputs: &mut O,
    output: Output,
    body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), ExportError> {
    let write = || {
        let mut out = BufWriter::new(outputs.create(output)?);
        body(&mut out)?;
        out.flush()
    };
    write().map_err(|source| ExportError::Write {
        output,
        name: outputs.name(output),
        source,
    })
}
