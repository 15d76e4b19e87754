//! Reading a trace into [`Services`] figures: the one entry point of `sonda services`
//! and `sonda model`.
//!
//! Two passes, as every view of a trace does: the metadata scan of
//! [`Trace::open`] (names, counters, where the data ends), then one streaming
//! pass of the records, driven by [`Trace::drive_with`], through the timeline,
//! the per-call join and the collector.

use std::convert::Infallible;
use std::fmt;
use std::ops::ControlFlow;
use std::path::PathBuf;

use rustc_hash::FxHashMap;
use sonda_filter::{FilterError, MethodFilter, MethodRef};
use sonda_timeline::names::method_labels;
use sonda_timeline::{
    Consumer, DriveError, DriveOptions, Driven, Frame, Timeline, Trace, TraceError,
};
use sonda_trace::{ReadError, Record, Source, Time, TraceMeta};

use crate::collect::{Collector, Period};
use crate::figures::{
    self, Checks, DamageFacts, MethodName, Services, SkippedFacts, TraceFacts, SCHEMA, VERSION,
};
use crate::join::{CallJoin, CallRecord, JoinStats};

/// What to analyse. Build with `Options::default()` and the `with_` methods.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Options {
    /// `--methods` patterns selecting among the traced methods (empty: all).
    pub methods: Vec<String>,
    /// Window length (ns), for per-window figures.
    pub window_ns: Option<u64>,
    /// Only the calls that enter at or after this time (ns from the trace's origin).
    pub from_ns: Option<u64>,
    /// Only the calls that enter before this time (ns from the trace's origin).
    pub to_ns: Option<u64>,
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

    /// Restricts the observation period to the calls that enter in `[from, to)` (ns
    /// from the trace's origin, as `sonda paraver --from/--to`): a run's warm-up (class
    /// loading, JIT compilation) is not the steady state a queueing model predicts,
    /// and its waits inflate every mean measured over the whole run.
    pub fn with_period_ns(mut self, from: Option<u64>, to: Option<u64>) -> Options {
        self.from_ns = from;
        self.to_ns = to;
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
        /// Where the records stopped being readable, if they did: the calls may lie
        /// beyond.
        damage: Option<ReadError>,
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
        /// Where the records stopped being readable, if they did.
        damage: Option<ReadError>,
    },
    /// The window is zero.
    BadWindow,
    /// `--from` is not before `--to`.
    BadPeriod {
        /// From (ns from the origin).
        from_ns: u64,
        /// To (ns from the origin).
        to_ns: u64,
    },
    /// No call of the selected methods enters within `--from`/`--to`.
    EmptyPeriod {
        /// The trace.
        path: PathBuf,
        /// From (ns from the origin).
        from_ns: u64,
        /// To (ns from the origin), if given.
        to_ns: Option<u64>,
        /// The trace's span, origin to end (ns).
        span_ns: u64,
    },
    /// The window would cut the trace into more than [`MAX_WINDOWS`] windows.
    TooManyWindows {
        /// The trace.
        path: PathBuf,
        /// The window (ns).
        window_ns: u64,
        /// The trace's span, origin to end (ns).
        span_ns: u64,
    },
}

/// Most windows `--window` may cut a trace into: each costs figures for every method
/// (and memory while the trace is read), so a window far below the trace's length
/// would run for minutes and exhaust memory.
pub const MAX_WINDOWS: u64 = 10_000;

impl fmt::Display for ServicesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServicesError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            ServicesError::NoMethods {
                path,
                instrumented,
                damage: Some(damage),
            } => write!(
                f,
                "{}: no traced method was called in the intact blocks of the damaged trace ({damage}; {instrumented} method{} instrumented)",
                path.display(),
                if *instrumented == 1 { "" } else { "s" }
            ),
            ServicesError::NoMethods {
                path,
                instrumented,
                damage: None,
            } => {
                if *instrumented > 0 {
                    write!(f, "{}: no traced method was called ({instrumented} methods were instrumented, but the trace has no calls of them)", path.display())
                } else {
                    write!(f, "{}: no methods were traced (the trace has no method events); record with --methods to trace some, e.g. `sonda record -o TRACE --methods 'com.example.Service::handle' -- java ...` (see docs/filters.md)", path.display())
                }
            }
            ServicesError::Filter(e) => write!(f, "{e}"),
            ServicesError::AnnotationFilter(p) => write!(f, "--methods {p}: a trace does not record annotations; select traced methods by class and name"),
            ServicesError::NoMatch {
                patterns,
                traced,
                damage,
            } => {
                write!(
                    f,
                    "--methods {} matches no traced method (the trace has calls of: {})",
                    patterns.join(" "),
                    traced.join(", ")
                )?;
                match damage {
                    Some(d) => write!(f, "; the damaged stretches were skipped ({d})"),
                    None => Ok(()),
                }
            }
            ServicesError::BadWindow => write!(f, "--window must be longer than 0 s"),
            ServicesError::BadPeriod { from_ns, to_ns } => write!(
                f,
                "--from {} s is not before --to {} s",
                *from_ns as f64 / 1e9,
                *to_ns as f64 / 1e9
            ),
            ServicesError::EmptyPeriod {
                path,
                from_ns,
                to_ns,
                span_ns,
            } => write!(
                f,
                "{}: no call of the selected methods enters between {} s and {} (the trace spans {:.3} s)",
                path.display(),
                *from_ns as f64 / 1e9,
                to_ns.map_or("its end".to_string(), |t| format!("{} s", t as f64 / 1e9)),
                *span_ns as f64 / 1e9
            ),
            ServicesError::TooManyWindows {
                path,
                window_ns,
                span_ns,
            } => write!(
                f,
                "--window {} s cuts the {:.3} s of {} into {} windows, more than {MAX_WINDOWS}: use --window {} or more",
                *window_ns as f64 / 1e9,
                *span_ns as f64 / 1e9,
                path.display(),
                span_ns / window_ns + 1,
                round_up_2_digits(span_ns.div_ceil(MAX_WINDOWS - 1)) as f64 / 1e9
            ),
        }
    }
}

/// `ns` rounded up to two significant digits (19813 to 20000): a window to suggest.
fn round_up_2_digits(ns: u64) -> u64 {
    let mut unit = 1u64;
    while ns / unit >= 100 {
        unit *= 10;
    }
    ns.div_ceil(unit) * unit
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

impl Options {
    /// Checks the options without a trace: the window is not zero, the patterns are
    /// in the filter grammar and select by name, not annotation. [`analyze`] checks
    /// them first too; a command calls this before opening the trace, so that a bad
    /// option is reported as such even when the trace is missing.
    pub fn check(&self) -> Result<(), ServicesError> {
        self.filter().map(drop)
    }

    fn filter(&self) -> Result<MethodFilter, ServicesError> {
        if self.window_ns == Some(0) {
            return Err(ServicesError::BadWindow);
        }
        if let (Some(from_ns), Some(to_ns)) = (self.from_ns, self.to_ns) {
            if from_ns >= to_ns {
                return Err(ServicesError::BadPeriod { from_ns, to_ns });
            }
        }
        let filter = MethodFilter::parse(&self.methods).map_err(ServicesError::Filter)?;
        if filter.uses_annotations() {
            let p = filter
                .patterns()
                .iter()
                .find(|p| p.contains('@'))
                .cloned()
                .unwrap_or_default();
            return Err(ServicesError::AnnotationFilter(p));
        }
        Ok(filter)
    }
}

impl From<TraceError> for ServicesError {
    fn from(e: TraceError) -> ServicesError {
        ServicesError::Read {
            path: e.path,
            source: e.source,
        }
    }
}

/// The consumer of the pass: the join, its collector, and which methods were called.
struct Analyzer<'a> {
    join: CallJoin,
    col: Collector,
    ids: &'a [u32],
    called: Vec<bool>,
    any_call: bool,
}

impl Consumer for Analyzer<'_> {
    type Sink = CallJoin;
    type Error = Infallible;

    fn sink(&mut self) -> &mut CallJoin {
        &mut self.join
    }

    fn before(&mut self, _: &Timeline, record: &Record) -> ControlFlow<()> {
        self.col.record(record);
        if let sonda_trace::Event::Enter { method, .. } = record.event {
            self.any_call = true;
            if let Ok(i) = self.ids.binary_search(&method) {
                self.called[i] = true;
            }
        }
        ControlFlow::Continue(())
    }

    fn after(&mut self, timeline: &mut Timeline, _: &Record) -> Result<(), Infallible> {
        self.join.settle(timeline, &mut self.col);
        Ok(())
    }

    fn finished(&mut self, timeline: &mut Timeline) -> Result<(), Infallible> {
        self.join.settle(timeline, &mut self.col);
        Ok(())
    }
}

/// What the figures leave out of a damaged trace: the first damage, where the pass
/// stopped after `read` records, and everything the scan found skipped.
fn damage_facts(first: &ReadError, read: u64, meta: &TraceMeta) -> DamageFacts {
    DamageFacts {
        first: first.to_string(),
        first_at_byte: match first {
            ReadError::Corrupt { offset, .. } | ReadError::Truncated { offset } => Some(*offset),
            _ => None,
        },
        records_read: read,
        records_intact: meta.records,
        skipped: meta
            .skipped
            .regions
            .iter()
            .map(|r| SkippedFacts {
                offset: r.offset,
                bytes: r.bytes,
                blocks: r.blocks,
                records: r.records,
                reason: r.reason.clone(),
            })
            .collect(),
        truncated_at_byte: meta.skipped.truncated,
    }
}

/// Reads `trace` (opened with [`Trace::open`]) and computes its service figures.
pub fn analyze(mut trace: Trace, opts: &Options) -> Result<Analysis, ServicesError> {
    let filter = opts.filter()?;
    let path = trace.path().to_path_buf();
    // Native functions are stored by address: give them their symbol names, so that a
    // filter such as `::c_inner` selects them like Java methods.
    sonda_timeline::names::name_native_functions(trace.meta_mut());
    if let Some(window_ns) = opts.window_ns {
        let span_ns = trace.end().since(trace.origin());
        if span_ns / window_ns + 1 > MAX_WINDOWS {
            return Err(ServicesError::TooManyWindows {
                path,
                window_ns,
                span_ns,
            });
        }
    }
    let meta = trace.meta();
    let labels = method_labels(meta);
    let source = trace.source();
    let cpus = meta.info.as_ref().map_or(1, |i| i.cpus.max(1));

    // Every instrumented method is followed; the filter picks what is reported.
    let mut ids: Vec<u32> = meta.methods.keys().copied().collect();
    ids.sort_unstable();
    let selected_ids: Vec<u32> = ids
        .iter()
        .copied()
        .filter(|id| filter.is_empty() || selects(&filter, meta, *id))
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

    let mut analyzer = Analyzer {
        join: CallJoin::new(trace.origin(), meta.threads.values().map(|t| t.pid)),
        col: Collector::new(
            selected,
            opts.window_ns.unwrap_or(u64::MAX),
            Period {
                from: Time(trace.origin().0.saturating_add(opts.from_ns.unwrap_or(0))),
                to: opts
                    .to_ns
                    .map_or(Time(u64::MAX), |t| Time(trace.origin().0.saturating_add(t))),
            },
            meta.threads.keys().copied(),
        ),
        ids: &ids,
        called: vec![false; ids.len()],
        any_call: false,
    };
    let driven = trace
        .drive_with(&DriveOptions::default(), &mut analyzer)
        .map_err(|e| match e {
            DriveError::Read(source) => ServicesError::Read {
                path: path.clone(),
                source,
            },
            DriveError::Consumer(never) => match never {},
        })?;
    let Analyzer {
        join,
        mut col,
        called,
        any_call,
        ..
    } = analyzer;
    let Driven {
        meta,
        timeline,
        origin,
        end,
        damage,
        records,
        ..
    } = driven;
    col.close();

    if !any_call {
        return Err(ServicesError::NoMethods {
            path,
            instrumented: meta.methods.len(),
            damage,
        });
    }
    let has_calls = col.methods.iter().any(|m| !m.calls.is_empty());
    let (Some(grid), true) = (col.grid, has_calls) else {
        if col.outside_period > 0 {
            return Err(ServicesError::EmptyPeriod {
                path,
                from_ns: opts.from_ns.unwrap_or(0),
                to_ns: opts.to_ns,
                span_ns: end.since(origin),
            });
        }
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
            damage,
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
    let whole = figures::window(&col, &names, origin, cpus, grid, None, last);
    let background = figures::background(&col, &whole);
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
            damage: damage
                .as_ref()
                .map(|first| damage_facts(first, records, &meta)),
        },
        whole,
        windows,
        background,
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
