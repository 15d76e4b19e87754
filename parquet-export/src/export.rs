//! The export: the metadata scan (`Trace::open`, done by the caller) names methods and
//! threads and fills the dimension tables; one pass of the records, run by the
//! timeline's driver, feeds the timeline's outputs and the per-call join into the
//! fact tables as they come ([`Rows`]); the counters and the trace's own row come
//! last, when the end and the damage are known.

use std::collections::HashMap;

use parquet::file::metadata::KeyValue;
use sonda_model::join::{CallJoin, CallRecord, CallSink};
use sonda_timeline::names::{method_labels, name_native_functions};
use sonda_timeline::{
    damage_line, CallEnter, Consumer, DriveError, DriveOptions, Driven, Edge, ExitKind, Frame,
    GcSpan, Interval, MonitorWait, Sink, ThreadState, Timeline, Trace, WakeEdge,
};
use sonda_trace::{Pid, Record, Runtime, Source, Time};

use crate::partition::Partition;
use crate::schema::{exit_name, state_name, Table, PARTS};
use crate::writer::{Limits, Names, TableWriter};
use crate::{ExportError, ExportOptions, ExportSummary, Outputs, SCHEMA_VERSION};

/// Nanoseconds as the tables' `INT64` (a `u64` beyond `i64::MAX`, 292 years, is
/// clamped: no trace gets there).
fn ns(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// An id as `INT32` (method ids are below 2^31, kernel thread ids below 2^22).
fn int32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// Every way a call ends.
const EXITS: [ExitKind; 4] = [
    ExitKind::Normal,
    ExitKind::Exception,
    ExitKind::Unwound,
    ExitKind::Unfinished,
];

/// What a method frame's rows say about it: its label's and class's names.
#[derive(Clone, Copy, Debug)]
struct MethodNames {
    label: u32,
    class: Option<u32>,
}

/// The fact tables' rows, written as the timeline and the join deliver them: the
/// timeline's sink for spans and wake edges, the join's sink for calls and state
/// intervals.
struct Rows<'o, O: Outputs> {
    outputs: &'o mut O,
    /// One writer per table, in [`Table::ALL`]'s order.
    tables: Vec<TableWriter<O::Writer>>,
    names: Names,
    origin: Time,
    /// Each thread's name, by [`sonda_timeline::ThreadIx`].
    threads: Vec<u32>,
    /// Each thread's process id, by [`sonda_timeline::ThreadIx`].
    pids: Vec<i32>,
    methods: HashMap<u32, MethodNames>,
    monitor_classes: HashMap<u32, u32>,
    states: [u32; ThreadState::COUNT],
    /// The `exit` names, in [`EXITS`]' order.
    exits: [u32; 4],
    /// Each thread's open calls: (call id, parent's id).
    stacks: Vec<Vec<(i64, Option<i64>)>>,
    next_call: i64,
    buffer_bytes: usize,
    peak_buffered: usize,
    /// The first write error; the pass stops at the next record.
    error: Option<ExportError>,
}

impl<O: Outputs> Rows<'_, O> {
    /// Adds one row to `table` (`fill` gives its values in column order), and writes
    /// the table's row group when it is full.
    fn row(&mut self, table: Table, fill: impl FnOnce(&mut TableWriter<O::Writer>)) {
        if self.error.is_some() {
            return;
        }
        let w = &mut self.tables[table as usize];
        fill(w);
        if w.end_row() {
            if let Err(e) = w.flush(self.outputs, &self.names) {
                self.error = Some(e);
            }
        }
    }

    /// Past the total buffer, writes the row group of the table holding the most.
    fn bound(&mut self) {
        let total: usize = self.tables.iter().map(TableWriter::buffered).sum();
        self.peak_buffered = self.peak_buffered.max(total);
        if total <= self.buffer_bytes || self.error.is_some() {
            return;
        }
        if let Some(w) = self.tables.iter_mut().max_by_key(|w| w.buffered()) {
            if let Err(e) = w.flush(self.outputs, &self.names) {
                self.error = Some(e);
            }
        }
    }

    fn since(&self, t: Time) -> i64 {
        ns(t.since(self.origin))
    }

    fn thread_name(&self, ix: sonda_timeline::ThreadIx) -> u32 {
        self.threads.get(ix.get()).copied().unwrap_or(0)
    }
}

impl<O: Outputs> Sink for Rows<'_, O> {
    fn gc(&mut self, gc: &GcSpan) {
        let Edge::End { begin, unfinished } = gc.edge else {
            return;
        };
        let (start, end) = (self.since(begin), self.since(gc.time));
        let tid = gc.at.map(|at| int32(at.tid.0));
        self.row(Table::Gcs, |w| {
            w.i32(int32(gc.pid.0))
                .opt_i32(tid)
                .i64(start)
                .i64(end)
                .bool(unfinished);
        });
    }

    fn monitor(&mut self, wait: &MonitorWait) {
        let Edge::End { begin, unfinished } = wait.edge else {
            return;
        };
        let class = match self.monitor_classes.get(&wait.class) {
            Some(&c) => c,
            None => {
                let name = format!("class {}", wait.class);
                self.names.intern(&name)
            }
        };
        let (start, end) = (self.since(begin), self.since(wait.at.time));
        let thread = self.thread_name(wait.at.thread);
        let pid = self.pid_of(wait.at.thread);
        self.row(Table::MonitorWaits, |w| {
            w.i32(pid)
                .i32(int32(wait.at.tid.0))
                .text(thread)
                .text(class)
                .i64(start)
                .i64(end)
                .bool(unfinished);
        });
    }

    fn wake(&mut self, edge: &WakeEdge) {
        let waker = edge.waker_thread.map(|ix| self.thread_name(ix));
        let thread = self.thread_name(edge.received.thread);
        let pid = self.pid_of(edge.received.thread);
        let (sent, received) = (self.since(edge.sent), self.since(edge.received.time));
        self.row(Table::Wakeups, |w| {
            w.i32(int32(edge.waker.0))
                .opt_text(waker)
                .i32(i32::from(edge.waker_cpu.0))
                .i32(pid)
                .i32(int32(edge.received.tid.0))
                .text(thread)
                .opt_i32(edge.received.cpu.map(|c| i32::from(c.0)))
                .i64(sent)
                .i64(received);
        });
    }
}

impl<O: Outputs> CallSink for Rows<'_, O> {
    fn enter(&mut self, enter: &CallEnter, _pid: Pid) {
        let id = self.next_call;
        self.next_call += 1;
        if let Some(stack) = self.stacks.get_mut(enter.at.thread.get()) {
            let parent = stack.last().map(|&(id, _)| id);
            stack.push((id, parent));
        }
    }

    fn call(&mut self, c: &CallRecord) {
        // The join closes what it opened, in the same order (its own stack).
        let popped = self
            .stacks
            .get_mut(c.thread.get())
            .and_then(|stack| stack.pop());
        let (id, parent) = popped.unwrap_or_else(|| {
            self.next_call += 1;
            (self.next_call - 1, None)
        });
        let (method_id, method, address) = match c.frame {
            Frame::Method(m) => (Some(int32(m)), self.methods.get(&m).copied(), None),
            Frame::Func(addr) => (None, None, Some(addr as i64)),
        };
        let thread = self.thread_name(c.thread);
        let exit = self.exits[EXITS.iter().position(|&k| k == c.kind).unwrap_or(0)];
        let (start, end) = (self.since(c.begin), self.since(c.end));
        self.row(Table::Calls, |w| {
            w.i64(id)
                .opt_i64(parent)
                .i32(int32(c.pid.0))
                .i32(int32(c.tid.0))
                .text(thread)
                .opt_i32(method_id)
                .opt_text(method.map(|m| m.label))
                .opt_text(method.and_then(|m| m.class))
                .opt_i64(address)
                .i32(i32::try_from(c.depth).unwrap_or(i32::MAX))
                .text(exit)
                .i64(start)
                .i64(end);
            for p in PARTS {
                w.i64(ns((p.get)(&c.inclusive)));
            }
            for p in PARTS {
                w.i64(ns((p.get)(&c.exclusive)));
            }
        });
    }

    fn interval(&mut self, iv: &Interval, pid: Pid) {
        let thread = self.thread_name(iv.thread);
        let state = self.states[iv.state.index()];
        let (start, end) = (self.since(iv.begin), self.since(iv.end));
        self.row(Table::States, |w| {
            w.i32(int32(pid.0))
                .i32(int32(iv.tid.0))
                .text(thread)
                .text(state)
                .opt_i32(iv.cpu.map(|c| i32::from(c.0)))
                .i64(start)
                .i64(end);
        });
    }
}

impl<O: Outputs> Rows<'_, O> {
    /// The process of thread `ix`, from the `pids` given at the start.
    fn pid_of(&self, ix: sonda_timeline::ThreadIx) -> i32 {
        self.pids.get(ix.get()).copied().unwrap_or(0)
    }
}

/// The pass's consumer: the join and the rows, as the timeline's sink; after each
/// record the join's settled calls and intervals go to the rows.
struct Pass<'o, O: Outputs> {
    sink: (CallJoin, Rows<'o, O>),
}

impl<'o, O: Outputs> Consumer for Pass<'o, O> {
    type Sink = (CallJoin, Rows<'o, O>);
    type Error = ExportError;

    fn sink(&mut self) -> &mut Self::Sink {
        &mut self.sink
    }

    fn after(&mut self, timeline: &mut Timeline, _: &Record) -> Result<(), ExportError> {
        let (join, rows) = &mut self.sink;
        join.settle(timeline, rows);
        rows.bound();
        rows.error.take().map_or(Ok(()), Err)
    }

    fn finished(&mut self, timeline: &mut Timeline) -> Result<(), ExportError> {
        self.after_all(timeline)
    }
}

impl<O: Outputs> Pass<'_, O> {
    fn after_all(&mut self, timeline: &mut Timeline) -> Result<(), ExportError> {
        let (join, rows) = &mut self.sink;
        join.settle(timeline, rows);
        rows.error.take().map_or(Ok(()), Err)
    }
}

/// Every file's key-value metadata: what it is, for a reader of one file alone.
fn file_meta(table: Table, partition: &Partition) -> Vec<KeyValue> {
    vec![
        KeyValue::new("sonda.schema".into(), SCHEMA_VERSION.to_string()),
        KeyValue::new("sonda.table".into(), table.name().to_string()),
        KeyValue::new("sonda.host".into(), partition.host.clone()),
        KeyValue::new("sonda.trace".into(), partition.trace.clone()),
    ]
}

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
    let partition = Partition::of(&path, trace.meta());
    // Native functions by their symbols' names, as `sonda services` names them.
    name_native_functions(trace.meta_mut());
    let meta = trace.meta();
    let labels = method_labels(meta);
    let origin = trace.origin();

    let limits = Limits {
        row_group_bytes: opts.row_group_bytes.max(1),
        row_groups_per_file: opts.row_groups_per_file.max(1),
        buffer_bytes: opts.buffer_bytes.max(1),
    };
    let mut tables: Vec<TableWriter<O::Writer>> = Table::ALL
        .iter()
        .map(|&t| TableWriter::new(t, limits, file_meta(t, &partition)))
        .collect();
    for t in &mut tables {
        t.open(outputs)?;
    }
    let mut names = Names::default();
    let threads: Vec<u32> = meta
        .threads
        .values()
        .map(|t| names.intern(t.name()))
        .collect();
    let pids: Vec<i32> = meta.threads.values().map(|t| int32(t.pid.0)).collect();
    let mut methods = HashMap::new();
    let mut ids: Vec<u32> = meta.methods.keys().copied().collect();
    ids.sort_unstable();
    for id in &ids {
        let m = &meta.methods[id];
        let label = labels
            .get(id)
            .cloned()
            .unwrap_or_else(|| format!("method {id}"));
        let class = (!m.class.is_empty()).then(|| names.intern(&m.class));
        methods.insert(
            *id,
            MethodNames {
                label: names.intern(&label),
                class,
            },
        );
    }
    let monitor_classes = meta
        .monitor_classes
        .iter()
        .map(|(&id, name)| (id, names.intern(name)))
        .collect();
    let states = ThreadState::ALL.map(|s| names.intern(state_name(s)));
    let exits = EXITS.map(|k| names.intern(exit_name(k)));

    let mut rows = Rows {
        outputs,
        tables,
        names,
        origin,
        threads,
        pids,
        methods,
        monitor_classes,
        states,
        exits,
        stacks: vec![Vec::new(); meta.threads.len()],
        next_call: 0,
        buffer_bytes: opts.buffer_bytes.max(1),
        peak_buffered: 0,
        error: None,
    };
    dimensions(&mut rows, meta, &ids);
    if let Some(e) = rows.error.take() {
        return Err(e);
    }

    let join = CallJoin::new(origin, meta.threads.values().map(|t| t.pid));
    let mut pass = Pass { sink: (join, rows) };
    let drive = DriveOptions::default().with_progress(opts.progress.clone());
    let Driven {
        meta,
        timeline,
        end,
        records,
        damage,
        ..
    } = trace.drive_with(&drive, &mut pass).map_err(|e| match e {
        DriveError::Read(source) => ExportError::Read {
            path: path.clone(),
            source,
        },
        DriveError::Consumer(e) => e,
    })?;
    let (join, mut rows) = pass.sink;

    for (name, value) in &meta.counters {
        let name = rows.names.intern(name);
        rows.row(Table::Counters, |w| {
            w.text(name).i64(ns(*value));
        });
    }
    let info = meta.info.as_ref();
    let text = |rows: &mut Rows<O>, s: &str| rows.names.intern(s);
    let trace_path = text(&mut rows, &path.display().to_string());
    let command = text(
        &mut rows,
        &info.map(|i| i.command.join(" ")).unwrap_or_default(),
    );
    let tool = text(&mut rows, info.map_or("", |i| i.tool.as_str()));
    let source = text(
        &mut rows,
        match info.map_or(Source::Tracepoints, |i| i.source) {
            Source::Tracepoints => "tracepoints",
            Source::Procfs => "procfs",
        },
    );
    let damage_text = damage
        .as_ref()
        .map(|d| text(&mut rows, &damage_line(d, &meta.skipped)));
    let duration = end.since(origin);
    rows.row(Table::Traces, |w| {
        w.text(trace_path)
            .text(command)
            .text(tool)
            .text(source)
            .i32(info.map_or(0, |i| i32::from(i.cpus)))
            .i64(ns(origin.0))
            .i64(ns(duration))
            .i64(ns(records))
            .bool(meta.complete)
            .opt_text(damage_text);
    });
    if let Some(e) = rows.error.take() {
        return Err(e);
    }
    let mut tables = Vec::new();
    for w in &mut rows.tables {
        tables.push((w.table, w.finish(rows.outputs, &rows.names)?));
    }
    Ok(ExportSummary {
        partition,
        tables,
        trace_records: records,
        duration_ns: duration,
        peak_buffered: rows.peak_buffered,
        repairs: timeline.repairs(),
        join: join.stats(),
        complete: meta.complete,
        damage,
        unread: meta.skipped,
    })
}

/// The `methods` and `threads` tables, from the metadata.
fn dimensions<O: Outputs>(rows: &mut Rows<O>, meta: &sonda_trace::TraceMeta, ids: &[u32]) {
    for id in ids {
        let m = &meta.methods[id];
        let Some(&names) = rows.methods.get(id) else {
            continue;
        };
        let name = rows.names.intern(&m.name);
        let descriptor = (!m.descriptor.is_empty()).then(|| rows.names.intern(&m.descriptor));
        let native = meta.native_functions.contains_key(id);
        rows.row(Table::Methods, |w| {
            w.i32(int32(*id))
                .text(names.label)
                .opt_text(names.class)
                .text(name)
                .opt_text(descriptor)
                .bool(native);
        });
    }
    for (i, t) in meta.threads.values().enumerate() {
        let comm = rows.names.intern(&t.comm);
        let java = t.java_name.as_deref().map(|n| rows.names.intern(n));
        let process = meta.processes.get(&t.pid);
        let process_name = process.map(|p| rows.names.intern(&p.name));
        let runtime = process.map(|p| {
            rows.names.intern(match p.runtime {
                Runtime::Java => "java",
                Runtime::Native => "native",
            })
        });
        let thread = rows.threads[i];
        rows.row(Table::Threads, |w| {
            w.i32(int32(t.pid.0))
                .i32(int32(t.tid.0))
                .text(thread)
                .text(comm)
                .opt_text(java)
                .bool(t.daemon)
                .opt_text(process_name)
                .opt_text(runtime);
        });
    }
}
