//! `sonda report`: a terminal summary of a trace.
//!
//! [`render`] is the stable entry point for the `sonda` command. It takes the trace
//! opened by [`Trace::open`] (the metadata scan: names, counters, where the data
//! ends) and drives one streaming pass of its records through a
//! [`crate::Timeline`] into the report's sink. It prints the
//! recording (command, state source, duration, CPUs, complete or cut short and where),
//! per process and thread the time in each state and the scheduling counts, garbage
//! collections, monitor contention per class, instrumented methods, and what was
//! dropped or lost, and returns the same figures as a [`ReportSummary`].
//!
//! A damaged block is skipped and the report goes on with the next intact one; a
//! trace cut short is reported up to where it stops. [`ReportSummary::damage`] says
//! where the first damage is ([`ReportSummary::unread`]: every stretch skipped), and the command should print it as its error
//! and exit non-zero.

mod summary;
mod table;
mod text;

use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;

use sonda_trace::ReadError;

pub use summary::{
    MethodSummary, MonitorSummary, ProcessSummary, Recording, RemovalSummary, ReportSummary,
    SpanStats, ThreadSummary,
};

use crate::drive::{Driven, Trace, TraceError};
use crate::names::{method_labels, one_line, thread_name};
use crate::output::{Frame, ThreadIx};
use summary::Collector;

/// What the report shows. Build with `ReportOptions::default()` and the `with_`
/// methods: fields will be added.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ReportOptions {
    /// List at most this many methods (the ones with most inclusive time); `None`: all.
    pub max_methods: Option<usize>,
}

impl ReportOptions {
    /// Lists at most `n` methods.
    pub fn with_max_methods(mut self, n: usize) -> ReportOptions {
        self.max_methods = Some(n);
        self
    }
}

/// Why no report could be made.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReportError {
    /// The trace cannot be opened or is not a trace.
    Read {
        /// The trace.
        path: PathBuf,
        /// Why.
        source: ReadError,
    },
    /// The report could not be written.
    Write(io::Error),
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            ReportError::Write(e) => write!(f, "cannot write the report: {e}"),
        }
    }
}

impl From<TraceError> for ReportError {
    fn from(e: TraceError) -> ReportError {
        ReportError::Read {
            path: e.path,
            source: e.source,
        }
    }
}

impl std::error::Error for ReportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReportError::Read { source, .. } => Some(source),
            ReportError::Write(e) => Some(e),
        }
    }
}

/// Reads `trace`, prints its summary to `out`, and returns the figures.
pub fn render(
    trace: Trace,
    out: &mut dyn Write,
    opts: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    let summary = summarize(trace)?;
    text::write(&summary, out, opts.max_methods).map_err(ReportError::Write)?;
    Ok(summary)
}

/// Computes the report's figures without printing them.
pub fn summarize(trace: Trace) -> Result<ReportSummary, ReportError> {
    let path = trace.path().to_path_buf();
    let labels = method_labels(trace.meta());
    let mut collector = Collector::new(labels.clone());
    let Driven {
        mut meta,
        timeline,
        origin,
        end,
        records,
        damage,
        ..
    } = trace
        .drive(&mut collector)
        .map_err(|source| ReportError::Read { path, source })?;
    let source = meta.info.as_ref().map(|i| i.source);
    let info = meta.info.clone();
    let recording = Recording {
        command: info.as_ref().map(|i| i.command.clone()).unwrap_or_default(),
        source,
        host: info.as_ref().map(|i| i.host.clone()).unwrap_or_default(),
        cpus: info.as_ref().map_or(0, |i| i.cpus),
        origin,
        end,
        records,
        complete: meta.complete,
    };

    // Processes by pid, threads by tid (the timeline's order); a thread whose process
    // has no metadata of its own still gets one.
    let mut processes: Vec<ProcessSummary> = Vec::new();
    for (i, info) in meta.threads.values().enumerate() {
        let ix = ThreadIx(i as u32);
        let thread = ThreadSummary {
            tid: info.tid,
            name: one_line(thread_name(info, timeline.renamed(ix))),
            stats: timeline.stats(ix).clone(),
        };
        match processes.iter_mut().find(|p| p.pid == info.pid) {
            Some(p) => p.threads.push(thread),
            None => {
                let p = meta.processes.get(&info.pid);
                processes.push(ProcessSummary {
                    pid: info.pid,
                    name: p.map(|p| one_line(&p.name)).unwrap_or_default(),
                    runtime: p.map(|p| p.runtime),
                    threads: vec![thread],
                    gc: Default::default(),
                });
            }
        }
    }
    for (pid, gc) in &collector.gc {
        if let Some(p) = processes.iter_mut().find(|p| p.pid == *pid) {
            p.gc = *gc;
        }
    }
    processes.sort_by_key(|p| p.pid);

    let mut monitors: Vec<MonitorSummary> = collector
        .monitors
        .iter()
        .map(|(&class, &waits)| MonitorSummary {
            class,
            name: meta
                .monitor_classes
                .get(&class)
                .map(|n| one_line(n))
                .unwrap_or_else(|| format!("class {class}")),
            waits,
        })
        .collect();
    monitors.sort_by(|a, b| {
        b.waits
            .total_ns
            .cmp(&a.waits.total_ns)
            .then(a.class.cmp(&b.class))
    });
    let mut methods: Vec<MethodSummary> = collector.methods.into_values().collect();
    methods.sort_by(|a, b| {
        b.inclusive_ns
            .cmp(&a.inclusive_ns)
            .then(a.label.cmp(&b.label))
    });

    let removals = meta
        .removals
        .iter()
        .map(|r| RemovalSummary {
            id: r.id,
            label: labels
                .get(&r.id)
                .cloned()
                .unwrap_or_else(|| format!("method {}", r.id)),
            at_ns: r.time.since(origin),
            rate: r.rate,
            mean_ns: r.mean_ns,
            overhead_ppm: r.overhead_ppm,
            calls: methods
                .iter()
                .find(|m| m.frame == Frame::Method(r.id))
                .map_or(0, |m| m.calls),
        })
        .collect();

    Ok(ReportSummary {
        removals,
        recording,
        processes,
        monitors,
        methods,
        counters: std::mem::take(&mut meta.counters),
        repairs: timeline.repairs(),
        warnings: std::mem::take(&mut meta.warnings),
        damage,
        unread: std::mem::take(&mut meta.skipped),
    })
}
