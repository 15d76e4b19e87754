//! Reading a trace into [`Services`] figures: the one entry point of `sonda services`
//! and `sonda model`.
//!
//! Two passes, as every exporter does: a metadata scan (names, counters, where the
//! data ends), then one streaming pass of the records through the timeline, the
//! per-call join and the collector.

use std::fmt;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use sonda_filter::{FilterError, MethodFilter, MethodRef};
use sonda_timeline::names::method_labels;
use sonda_timeline::{Feed, Frame, Timeline};
use sonda_trace::{ReadError, Source, TraceMeta};

use crate::collect::Collector;
use crate::figures::{self, Checks, MethodName, Services, TraceFacts, SCHEMA, VERSION};
use crate::join::{CallJoin, CallRecord, JoinStats};

/// What to analyse. Build with `Options::default()` and the `with_` methods.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Options {
    /// `--methods` patterns selecting among the traced methods (empty: all).
    pub methods: Vec<String>,
    /// Window length (ns), for per-window figures.
    pub window_ns: Option<u64>,
}

impl Options {
    /// Selects methods with `sonda-filter` patterns.
    pub fn with_methods(mut self, patterns: Vec<String>) -> Options {
        self.methods = patterns;
        self
    }

    /// Adds per-window figures, windows of `ns`.
    pub fn with_window_ns(mut self, ns: u64) -> Options {
        self.window_ns = Some(ns);
        self
    }
}

/// Why the trace could not be analysed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServicesError {
    /// The trace cannot be opened or is not a trace.
    Read {
        /// The trace.
        path: PathBuf,
        /// Why.
        source: ReadError,
    },
    /// The trace has no method events: nothing was instrumented, or nothing called.
    NoMethods {
        /// The trace.
        path: PathBuf,
        /// Whether methods were instrumented (but never called).
        instrumented: usize,
    },
    /// A `--methods` pattern is not in the filter grammar.
    Filter(FilterError),
    /// A pattern selects by annotation, which a trace does not record.
    AnnotationFilter(String),
    /// The patterns match no traced method.
    NoMatch {
        /// The patterns.
        patterns: Vec<String>,
        /// The methods the trace has calls of (first few).
        traced: Vec<String>,
    },
    /// The window is zero.
    BadWindow,
}

impl fmt::Display for ServicesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServicesError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            ServicesError::NoMethods { path, instrumented } => {
                if *instrumented > 0 {
                    write!(f, "{}: no traced method was called ({instrumented} methods were instrumented, but the trace has no calls of them)", path.display())
                } else {
                    write!(f, "{}: no methods were traced (the trace has no method events); record with --methods to trace some, e.g. `sonda record -o TRACE --methods 'com.example.Service::handle' -- java ...` (see docs/filters.md)", path.display())
                }
            }
            ServicesError::Filter(e) => write!(f, "{e}"),
            ServicesError::AnnotationFilter(p) => write!(f, "--methods {p}: a trace does not record annotations; select traced methods by class and name"),
            ServicesError::NoMatch { patterns, traced } => write!(
                f,
                "--methods {} matches no traced method (the trace has calls of: {})",
                patterns.join(" "),
                traced.join(", ")
            ),
            ServicesError::BadWindow => write!(f, "--window must be longer than 0 s"),
        }
    }
}

impl std::error::Error for ServicesError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServicesError::Read { source, .. } => Some(source),
            ServicesError::Filter(e) => Some(e),
            _ => None,
        }
    }
}

/// A trace analysed: the figures, and the calls behind them.
#[derive(Debug)]
pub struct Analysis {
    /// The figures.
    pub services: Services,
    /// The calls of each selected method, in the order of
    /// `services.whole.methods`' labels; see [`Analysis::calls_of`].
    calls: Vec<(String, Vec<CallRecord>)>,
    /// Thread names by tid, for per-call output.
    pub thread_names: FxHashMap<sonda_trace::Tid, String>,
    /// Where the trace stops being readable, when it was cut short or is damaged:
    /// the figures cover what comes before.
    pub damage: Option<ReadError>,
    /// The join's self-checks.
    pub join: JoinStats,
}

impl Analysis {
    /// Every selected method's finished calls (label, calls in exit order).
    pub fn calls(&self) -> impl Iterator<Item = (&str, &[CallRecord])> {
        self.calls.iter().map(|(l, c)| (l.as_str(), c.as_slice()))
    }

    /// The finished calls of the method labelled `label`.
    pub fn calls_of(&self, label: &str) -> &[CallRecord] {
        self.calls
            .iter()
            .find(|(l, _)| l == label)
            .map_or(&[], |(_, c)| c.as_slice())
    }
}

/// Reads the trace at `path` and computes its service figures.
pub fn analyze(path: &Path, opts: &Options) -> Result<Analysis, ServicesError> {
    let read_error = |source| ServicesError::Read {
        path: path.to_path_buf(),
        source,
    };
    if opts.window_ns == Some(0) {
        return Err(ServicesError::BadWindow);
    }
    let filter = MethodFilter::parse(&opts.methods).map_err(ServicesError::Filter)?;
    if filter.uses_annotations() {
        let p = filter
            .patterns()
            .iter()
            .find(|p| p.contains('@'))
            .cloned()
            .unwrap_or_default();
        return Err(ServicesError::AnnotationFilter(p));
    }
    let mut meta = TraceMeta::scan(path).map_err(read_error)?;
    // Native functions are stored by address: give them their symbol names, so that a
    // filter such as `::c_inner` selects them like Java methods.
    sonda_timeline::names::name_native_functions(&mut meta);
    let labels = method_labels(&meta);
    let source = meta.info.as_ref().map_or(Source::Tracepoints, |i| i.source);
    let cpus = meta.info.as_ref().map_or(1, |i| i.cpus.max(1));

    // Every instrumented method is followed; the filter picks what is reported.
    let mut ids: Vec<u32> = meta.methods.keys().copied().collect();
    ids.sort_unstable();
    let selected_ids: Vec<u32> = ids
        .iter()
        .copied()
        .filter(|id| filter.is_empty() || selects(&filter, &meta, *id))
        .collect();
    let mut selected: FxHashMap<Frame, usize> = FxHashMap::default();
    let mut names: Vec<MethodName> = Vec::new();
    for id in &selected_ids {
        selected.insert(Frame::Method(*id), names.len());
        names.push(MethodName {
            frame: Frame::Method(*id),
            label: labels
                .get(id)
                .cloned()
                .unwrap_or_else(|| format!("method {id}")),
        });
    }

    let mut feed = Feed::open(path, &meta).map_err(read_error)?;
    let threads: Vec<_> = meta.threads.values().cloned().collect();
    let mut timeline = Timeline::new(feed.origin(), source, threads.iter().map(|t| t.tid));
    let mut join = CallJoin::new(feed.origin(), threads.iter().map(|t| t.pid));
    let mut col = Collector::new(selected, opts.window_ns.unwrap_or(u64::MAX));
    let mut called = vec![false; ids.len()];
    let mut any_call = false;
    for record in feed.by_ref() {
        if let sonda_trace::Event::Enter { method, .. } = record.event {
            any_call = true;
            if let Ok(i) = ids.binary_search(&method) {
                called[i] = true;
            }
        }
        join.push(&mut timeline, &record, &mut col);
    }
    let end = feed.end();
    join.finish(&mut timeline, end, &mut col);
    col.close();

    if !any_call {
        return Err(ServicesError::NoMethods {
            path: path.to_path_buf(),
            instrumented: meta.methods.len(),
        });
    }
    let has_calls = col.methods.iter().any(|m| !m.calls.is_empty());
    let (Some(grid), true) = (col.grid, has_calls) else {
        let traced = ids
            .iter()
            .zip(&called)
            .filter(|(_, &c)| c)
            .map(|(id, _)| {
                labels
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| format!("method {id}"))
            })
            .take(10)
            .collect();
        return Err(ServicesError::NoMatch {
            patterns: opts.methods.clone(),
            traced,
        });
    };

    // Unfinished calls (open at the trace's end) have no true duration: counted, left out.
    let mut unfinished = 0;
    for m in &mut col.methods {
        let before = m.calls.len();
        m.calls
            .retain(|c| c.kind != sonda_timeline::ExitKind::Unfinished);
        unfinished += (before - m.calls.len()) as u64;
    }
    let last = col.last_exit.unwrap_or(end);
    let origin = feed.origin();
    let whole = figures::window(&col, &names, origin, cpus, grid, None, last);
    let windows = match opts.window_ns {
        Some(_) => (0..=grid.index(last))
            .map(|i| figures::window(&col, &names, origin, cpus, grid, Some(i), last))
            .filter(|w| w.duration_s > 1e-9)
            .collect(),
        None => Vec::new(),
    };
    let repairs = timeline.repairs();
    let js = join.stats();
    let info = meta.info.clone();
    let services = Services {
        schema: SCHEMA,
        version: VERSION,
        trace: TraceFacts {
            path: path.display().to_string(),
            command: info.as_ref().map(|i| i.command.clone()).unwrap_or_default(),
            cpus,
            source: match source {
                Source::Tracepoints => "tracepoints",
                Source::Procfs => "procfs",
            }
            .to_string(),
            complete: meta.complete,
            duration_s: end.since(origin) as f64 / 1e9,
        },
        whole,
        windows,
        checks: Checks {
            cpu_disagreements: js.cpu_disagreements,
            unmatched_exits: js.unmatched_exits,
            kernel_lost: repairs.kernel_lost,
            agent_dropped: repairs.agent_dropped,
            unseen_wakeups: meta.counters.get("kernel.unseen_wakeups").copied(),
            sched_conflicts: repairs.sched_conflicts,
            unfinished_calls: unfinished,
        },
    };
    let calls = names
        .iter()
        .zip(std::mem::take(&mut col.methods))
        .filter(|(_, m)| !m.calls.is_empty())
        .map(|(n, m)| (n.label.clone(), m.calls))
        .collect();
    let thread_names = meta
        .threads
        .values()
        .map(|t| (t.tid, t.name().to_string()))
        .collect();
    let damage = feed.into_damage().or(meta.damage.take());
    Ok(Analysis {
        services,
        calls,
        thread_names,
        damage,
        join: js,
    })
}

/// Whether the filter selects method `id` of the trace.
fn selects(filter: &MethodFilter, meta: &TraceMeta, id: u32) -> bool {
    let Some(m) = meta.methods.get(&id) else {
        return false;
    };
    let class = m.class.replace('.', "/");
    filter
        .matches(&MethodRef {
            class: &class,
            name: &m.name,
            descriptor: &m.descriptor,
            class_annotations: &[],
            method_annotations: &[],
        })
        .is_some()
}
