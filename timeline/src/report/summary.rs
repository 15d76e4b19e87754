//! The report's figures as data: what [`super::render`] prints, for tests and other
//! tools to compare with their own truths. Built by a [`Sink`] over the timeline.

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxHashMap;
use sonda_trace::{Damage, Pid, ReadError, Runtime, Source, Tid, Time};

use crate::output::{CallExit, Edge, ExitKind, Frame, GcSpan, MonitorWait, Sink};
use crate::sched::ThreadStats;
use crate::timeline::Repairs;

/// Everything the report shows.
#[derive(Debug)]
#[non_exhaustive]
pub struct ReportSummary {
    /// What was recorded.
    pub recording: Recording,
    /// Processes by pid, each with its threads and garbage collections.
    pub processes: Vec<ProcessSummary>,
    /// Contended monitors, by class, most waited-for first.
    pub monitors: Vec<MonitorSummary>,
    /// Instrumented methods and native functions that were called, most inclusive
    /// time first.
    pub methods: Vec<MethodSummary>,
    /// Every counter of the trace (`kernel.lost`, `agent.dropped`, ...).
    pub counters: BTreeMap<String, u64>,
    /// What the timeline repaired, and the losses that made it necessary.
    pub repairs: Repairs,
    /// Methods the agent's overhead budget removed (`--budget`), in the order removed.
    pub removals: Vec<RemovalSummary>,
    /// The recording's warnings.
    pub warnings: Vec<String>,
    /// The first damage, when the trace is cut short or damaged (the report covers
    /// every intact block; [`ReportSummary::unread`] lists what was skipped).
    pub damage: Option<ReadError>,
    /// Every stretch of the file skipped as damaged.
    pub unread: Damage,
}

/// What was recorded, how and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    /// The recorded command line, or `attach <pid>`.
    pub command: Vec<String>,
    /// Where thread states come from (`None`: the trace does not say).
    pub source: Option<Source>,
    /// Host name.
    pub host: String,
    /// Number of CPUs.
    pub cpus: u16,
    /// Time origin.
    pub origin: Time,
    /// Last instant covered (see [`crate::Feed::end`]).
    pub end: Time,
    /// Timed records read.
    pub records: u64,
    /// Whether the recording finished cleanly (the trace has its end block).
    pub complete: bool,
}

impl Recording {
    /// Nanoseconds from origin to end.
    pub fn duration_ns(&self) -> u64 {
        self.end.since(self.origin)
    }
}

/// One process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessSummary {
    /// Its pid.
    pub pid: Pid,
    /// Its name (empty when the trace names only its threads).
    pub name: String,
    /// What it runs, when the trace says.
    pub runtime: Option<Runtime>,
    /// Its threads, by tid.
    pub threads: Vec<ThreadSummary>,
    /// Its garbage collections.
    pub gc: SpanStats,
}

/// One thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadSummary {
    /// Its tid.
    pub tid: Tid,
    /// Java name, else kernel name.
    pub name: String,
    /// Time per state and scheduling counts.
    pub stats: ThreadStats,
}

/// Count and durations of a kind of span (collections, monitor waits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpanStats {
    /// How many.
    pub count: u64,
    /// Their total duration (ns).
    pub total_ns: u64,
    /// The longest (ns).
    pub max_ns: u64,
    /// How many were still open at the end (closed there).
    pub unfinished: u64,
}

impl SpanStats {
    fn add(&mut self, ns: u64, unfinished: bool) {
        self.count += 1;
        self.total_ns += ns;
        self.max_ns = self.max_ns.max(ns);
        self.unfinished += u64::from(unfinished);
    }

    /// Mean duration (ns), 0 when there were none.
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// Waits for the monitors of one class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorSummary {
    /// The class id.
    pub class: u32,
    /// The class name (or `class <id>` when the trace does not name it).
    pub name: String,
    /// The waits.
    pub waits: SpanStats,
}

/// A method whose probes the agent's overhead budget removed (`Meta::MethodRemoved`):
/// what it cost and when it went, so that a reader knows its calls after that are
/// missing rather than absent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovalSummary {
    /// The method id.
    pub id: u32,
    /// Its label, as in [`MethodSummary::label`].
    pub label: String,
    /// When its probes were gone, ns after the recording's start.
    pub at_ns: u64,
    /// Its call rate the agent measured (calls a second).
    pub rate: u64,
    /// Its mean duration the agent measured (ns).
    pub mean_ns: u64,
    /// The share of the process's CPU its probes were estimated to cost (millionths).
    pub overhead_ppm: u64,
    /// Calls of it in the trace (recorded before the removal).
    pub calls: u64,
}

/// Calls of one method or native function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodSummary {
    /// The method (or function).
    pub frame: Frame,
    /// Its label (`Class::method`, with the descriptor when overloaded; a native
    /// function's address).
    pub label: String,
    /// Calls that ended (every kind of exit).
    pub calls: u64,
    /// Calls that ended by an exception.
    pub exceptions: u64,
    /// Calls closed by a repair or at the end rather than by their own exit.
    pub incomplete: u64,
    /// Total wall time inside, nested calls included (ns).
    pub inclusive_ns: u64,
    /// Total wall time inside, nested calls excluded (ns).
    pub exclusive_ns: u64,
    /// Total time the thread was running inside, nested calls included (ns).
    pub cpu_ns: u64,
    /// Total time the thread was running inside, nested calls excluded (ns).
    pub exclusive_cpu_ns: u64,
    /// The longest call, inclusive (ns).
    pub max_ns: u64,
}

impl MethodSummary {
    fn new(frame: Frame, label: String) -> MethodSummary {
        MethodSummary {
            frame,
            label,
            calls: 0,
            exceptions: 0,
            incomplete: 0,
            inclusive_ns: 0,
            exclusive_ns: 0,
            cpu_ns: 0,
            exclusive_cpu_ns: 0,
            max_ns: 0,
        }
    }

    /// Mean inclusive time per call (ns).
    pub fn mean_inclusive_ns(&self) -> u64 {
        self.inclusive_ns.checked_div(self.calls).unwrap_or(0)
    }

    /// Mean exclusive time per call (ns).
    pub fn mean_exclusive_ns(&self) -> u64 {
        self.exclusive_ns.checked_div(self.calls).unwrap_or(0)
    }
}

/// The sink that adds up calls, collections and monitor waits.
#[derive(Default)]
pub(crate) struct Collector {
    pub methods: FxHashMap<Frame, MethodSummary>,
    pub monitors: FxHashMap<u32, SpanStats>,
    pub gc: HashMap<Pid, SpanStats>,
    labels: HashMap<u32, String>,
}

impl Collector {
    pub fn new(labels: HashMap<u32, String>) -> Collector {
        Collector {
            labels,
            ..Default::default()
        }
    }
}

impl Sink for Collector {
    fn exit(&mut self, c: &CallExit) {
        let labels = &self.labels;
        let m = self.methods.entry(c.frame).or_insert_with(|| {
            let label = match c.frame {
                Frame::Method(id) => labels
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| format!("method {id}")),
                Frame::Func(addr) => format!("0x{addr:x}"),
            };
            MethodSummary::new(c.frame, label)
        });
        let inclusive = c.inclusive_ns();
        m.calls += 1;
        m.exceptions += u64::from(c.kind == ExitKind::Exception);
        m.incomplete += u64::from(matches!(c.kind, ExitKind::Unwound | ExitKind::Unfinished));
        m.inclusive_ns += inclusive;
        m.exclusive_ns += c.exclusive_ns;
        m.cpu_ns += c.cpu_ns;
        m.exclusive_cpu_ns += c.exclusive_cpu_ns;
        m.max_ns = m.max_ns.max(inclusive);
    }

    fn gc(&mut self, g: &GcSpan) {
        if let Edge::End { begin, unfinished } = g.edge {
            self.gc
                .entry(g.pid)
                .or_default()
                .add(g.time.since(begin), unfinished);
        }
    }

    fn monitor(&mut self, w: &MonitorWait) {
        if let Edge::End { begin, unfinished } = w.edge {
            self.monitors
                .entry(w.class)
                .or_default()
                .add(w.at.time.since(begin), unfinished);
        }
    }
}
