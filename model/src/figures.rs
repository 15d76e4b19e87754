//! The figures `sonda services` reports, as data: what the JSON output serialises
//! (its schema is `docs/services.schema.json`, described in `docs/services-schema.md`)
//! and what the table and CSV writers print.
//!
//! Units: durations in nanoseconds, rates per second, times since the trace's origin
//! in seconds; fitted distributions' parameters in seconds (see [`crate::fit`]).

use serde::Serialize;
use sonda_timeline::{ExitKind, Frame};

use crate::collect::{Collector, Grid};
use crate::fit::{fit, Family, Fit, Fits};
use crate::join::CallRecord;
use crate::parts::{Component, Parts};
use crate::summary::{sorted, Summary};

/// The name of the JSON document type.
pub const SCHEMA: &str = "sonda-services";
/// The JSON schema's version: a change that can break a reader increments it.
pub const VERSION: u32 = 1;

/// Everything `sonda services` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Services {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// [`VERSION`].
    pub version: u32,
    /// What was recorded.
    pub trace: TraceFacts,
    /// The figures over the whole observation period.
    pub whole: Window,
    /// The same figures per time window (empty without `--window`).
    pub windows: Vec<Window>,
    /// The CPU load beside the selected methods, over the whole period: what a model
    /// puts on the CPUs besides their calls.
    pub background: Background,
    /// Self-checks and losses that bear on the figures.
    pub checks: Checks,
}

/// What was recorded.
#[derive(Clone, Debug, Serialize)]
pub struct TraceFacts {
    /// The trace file.
    pub path: String,
    /// The recorded command line.
    pub command: Vec<String>,
    /// CPUs of the machine.
    pub cpus: u16,
    /// Where thread states come from: `tracepoints` or `procfs`.
    pub source: String,
    /// Whether the recording finished cleanly.
    pub complete: bool,
    /// From the trace's origin to its end (s).
    pub duration_s: f64,
    /// What could not be read, when the trace is damaged or cut short (`null` when
    /// whole): the figures skip the damaged stretches and cover every intact block.
    pub damage: Option<DamageFacts>,
}

/// What of a trace could not be read, and what the figures therefore leave out.
#[derive(Clone, Debug, Serialize)]
pub struct DamageFacts {
    /// The first damage (the reader's message). The figures go on after it, at the
    /// next intact block.
    pub first: String,
    /// Its byte offset in the file (`null` for a read error).
    pub first_at_byte: Option<u64>,
    /// Timed records the figures read: those of every intact block.
    pub records_read: u64,
    /// Timed records in the trace's intact blocks, after the damage too.
    pub records_intact: u64,
    /// Every damaged stretch the reader skipped, in file order.
    pub skipped: Vec<SkippedFacts>,
    /// Where the file ends inside a block (a recording cut short), if it does.
    pub truncated_at_byte: Option<u64>,
}

/// One damaged stretch of a trace (`sonda_trace::SkippedRegion`).
#[derive(Clone, Debug, Serialize)]
pub struct SkippedFacts {
    /// Byte offset of its first byte.
    pub offset: u64,
    /// Bytes skipped.
    pub bytes: u64,
    /// Blocks skipped, when their headers still say.
    pub blocks: Option<u64>,
    /// Timed records lost, when the skipped headers say.
    pub records: Option<u64>,
    /// What was wrong.
    pub reason: String,
}

/// Self-checks and losses.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Checks {
    /// Calls whose CPU part disagrees with the timeline's own (0 expected).
    pub cpu_disagreements: u64,
    /// Exits that did not match the join's stack (0 expected).
    pub unmatched_exits: u64,
    /// Kernel records lost.
    pub kernel_lost: u64,
    /// Agent records dropped.
    pub agent_dropped: u64,
    /// Wakeups the kernel recording did not see (`kernel.unseen_wakeups`): each may
    /// move time from waiting for a CPU to sleeping. `null` when not counted.
    pub unseen_wakeups: Option<u64>,
    /// Kernel records that contradicted a thread's state.
    pub sched_conflicts: u64,
    /// Selected calls still open at the end of the trace (not in the figures).
    pub unfinished_calls: u64,
}

/// Figures over one period.
#[derive(Clone, Debug, Serialize)]
pub struct Window {
    /// Start, since the trace's origin (s).
    pub begin_s: f64,
    /// End, since the trace's origin (s).
    pub end_s: f64,
    /// Length (s).
    pub duration_s: f64,
    /// The utilisation law's figures.
    pub utilisation: UtilisationLaw,
    /// One entry per selected method that was called, by label.
    pub methods: Vec<MethodFigures>,
}

/// The utilisation law: the processes' CPU busy time against the sum of the measured
/// demands.
#[derive(Clone, Debug, Serialize)]
pub struct UtilisationLaw {
    /// CPU time of the processes that ran the selected methods (ns).
    pub process_cpu_ns: f64,
    /// Their utilisation, in CPUs (`process_cpu / duration`).
    pub process_cpus: f64,
    /// The same as a fraction of the machine (`process_cpus / cpus`).
    pub machine_fraction: f64,
    /// Sum over methods of throughput x mean CPU demand of their outermost calls, in
    /// CPUs (`sum X_c D_c`).
    pub demand_cpus: f64,
    /// `demand_cpus / process_cpus`: the share of the processes' CPU time the measured
    /// demands explain (the rest is GC, JIT, other threads, untraced code).
    pub explained_fraction: f64,
    /// CPU time of the tasks the trace does not follow (other processes, the
    /// collector, kernel threads), in CPUs, from the kernel's switch records.
    pub other_cpus: f64,
}

/// The background load of the whole period, in CPUs (see `crate::foreign`).
#[derive(Clone, Debug, Serialize)]
pub struct Background {
    /// CPU time of the traced processes outside the selected methods' outermost calls
    /// (GC, JIT, other threads, untraced code): `process_cpus - demand_cpus`, at least 0.
    pub untraced_cpus: f64,
    /// CPU time of tasks the trace does not follow, CPU-bound ones excluded.
    pub other_cpus: f64,
    /// The mean length of a stretch of CPU time of a task not followed (ns): the
    /// service time of the model's background arrivals.
    pub other_stretch_ns: f64,
    /// Tasks not followed that were CPU-bound (always runnable, never seen asleep,
    /// running a tenth of the period or more), by kernel thread id.
    pub cpu_bound_tasks: Vec<u32>,
    /// Their CPU time.
    pub cpu_bound_cpus: f64,
    /// How many of them were there on average: each one's time from its first stretch
    /// on a CPU to its last, over the period. Below their count when some came or went
    /// during the period (another user's compiler); a model that kept them all there
    /// throughout predicted up to twice the measured response times.
    pub cpu_bound_present: f64,
    /// The mean stretch on a CPU of the traced processes' threads that ended in a
    /// preemption (ns; 0 when none was preempted): the time slice the scheduler gave
    /// them when others waited, a round-robin model's quantum.
    pub preempted_stretch_ns: f64,
    /// The mean stretch on a CPU of the CPU-bound tasks (ns; 0 when there are none):
    /// how long one holds a CPU before the scheduler gives it to another.
    pub cpu_bound_stretch_ns: f64,
    /// The mean time a followed thread waited on a CPU while a CPU-bound task held
    /// it, from when the thread became runnable there (or the task got the CPU) to
    /// the task's switch-out for it (ns; 0 when none waited so). Linux 6.18 (EEVDF)
    /// preempts a CPU-bound task at once for most woken threads (median 6 us beside
    /// ServiceDemo): 0.37-0.42 ms on average at every load, where its stretches were
    /// 1.2-7.3 ms long (long when nobody wanted the CPU).
    pub cpu_bound_held_wait_ns: f64,
    /// The share of the followed threads' wakeups that the kernel placed on a CPU a
    /// CPU-bound task was on (0 when there are none). Linux looks for an idle CPU and
    /// else keeps a woken thread near its waker or its last CPU: beside ServiceDemo
    /// one task on one of two CPUs got 4-10% of them, not the half or so a
    /// shortest-queue placement gives it.
    pub cpu_bound_wakeup_share: f64,
}

/// Little's law for one method: calls in flight against throughput x response time.
#[derive(Clone, Debug, Serialize)]
pub struct LittleLaw {
    /// Time-average of the calls in flight.
    pub in_flight: f64,
    /// Throughput (1/s) x mean wall time (s).
    pub throughput_times_response: f64,
    /// `(throughput_times_response - in_flight) / in_flight` (0 when none in flight).
    pub relative_difference: f64,
}

/// One component's statistics (durations in ns) and fits.
#[derive(Clone, Debug, Serialize)]
pub struct ComponentFigures {
    /// Summary statistics.
    #[serde(flatten)]
    pub summary: Summary,
    /// Fitted distributions (inclusive wall, cpu, runnable, blocked, sleeping,
    /// uninterruptible only).
    pub fits: Option<FitFigures>,
}

/// Fitted distributions and the choice among them.
#[derive(Clone, Debug, Serialize)]
pub struct FitFigures {
    /// Values fitted (the positive ones).
    pub samples: u64,
    /// Fraction of the values that are 0 (not fitted).
    pub zero_fraction: f64,
    /// The family with the lowest KS distance, if any could be fitted.
    pub best: Option<Family>,
    /// Every fit.
    pub candidates: Vec<Fit>,
    /// The empirical distribution: quantiles 0, 0.1, ..., 1 of the positive values (s).
    pub empirical_deciles_s: Vec<f64>,
}

impl FitFigures {
    fn new(fits: Fits, sorted_s: &[f64]) -> FitFigures {
        let pos: Vec<f64> = sorted_s.iter().copied().filter(|&x| x > 0.0).collect();
        FitFigures {
            samples: fits.samples,
            zero_fraction: fits.zero_fraction,
            best: fits.best().map(|f| f.family),
            empirical_deciles_s: if pos.is_empty() {
                Vec::new()
            } else {
                (0..=10)
                    .map(|i| crate::summary::percentile(&pos, i as f64 / 10.0))
                    .collect()
            },
            candidates: fits.candidates,
        }
    }

    /// The fits again, for choosing among families.
    pub fn fits(&self) -> Fits {
        Fits {
            samples: self.samples,
            zero_fraction: self.zero_fraction,
            candidates: self.candidates.clone(),
        }
    }
}

/// Every component of one scope (inclusive or exclusive).
#[derive(Clone, Debug, Serialize)]
pub struct Components {
    /// Wall time.
    pub wall: ComponentFigures,
    /// On a CPU.
    pub cpu: ComponentFigures,
    /// Runnable, waiting for a CPU.
    pub runnable: ComponentFigures,
    /// On a CPU taken by the hypervisor (steal time).
    pub stolen: ComponentFigures,
    /// Blocked: sleeping + uninterruptible.
    pub blocked: ComponentFigures,
    /// Interruptible sleep (S).
    pub sleeping: ComponentFigures,
    /// Uninterruptible sleep (D).
    pub uninterruptible: ComponentFigures,
    /// Other states.
    pub other: ComponentFigures,
    /// Monitor contention (part of the states).
    pub monitor: ComponentFigures,
    /// GC overlap (part of the states).
    pub gc: ComponentFigures,
}

impl Components {
    /// The figures of `c`.
    pub fn get(&self, c: Component) -> &ComponentFigures {
        match c {
            Component::Wall => &self.wall,
            Component::Cpu => &self.cpu,
            Component::Runnable => &self.runnable,
            Component::Stolen => &self.stolen,
            Component::Blocked => &self.blocked,
            Component::Sleeping => &self.sleeping,
            Component::Uninterruptible => &self.uninterruptible,
            Component::Other => &self.other,
            Component::Monitor => &self.monitor,
            Component::Gc => &self.gc,
        }
    }

    fn of(calls: &[&CallRecord], scope: fn(&CallRecord) -> &Parts, with_fits: bool) -> Components {
        let one = |c: Component| {
            let ns = sorted(calls.iter().map(|r| scope(r).get(c) as f64));
            let fits = (with_fits && c.fitted()).then(|| {
                let s: Vec<f64> = ns.iter().map(|x| x / 1e9).collect();
                FitFigures::new(fit(&s), &s)
            });
            ComponentFigures {
                summary: Summary::of_sorted(&ns),
                fits,
            }
        };
        Components {
            wall: one(Component::Wall),
            cpu: one(Component::Cpu),
            runnable: one(Component::Runnable),
            stolen: one(Component::Stolen),
            blocked: one(Component::Blocked),
            sleeping: one(Component::Sleeping),
            uninterruptible: one(Component::Uninterruptible),
            other: one(Component::Other),
            monitor: one(Component::Monitor),
            gc: one(Component::Gc),
        }
    }
}

/// One method's figures over one period.
#[derive(Clone, Debug, Serialize)]
pub struct MethodFigures {
    /// Its label (`Class::method`, descriptor added for overloads).
    pub method: String,
    /// Its method id in the trace (`null` for a native function).
    pub id: Option<u32>,
    /// Calls that ended in the period.
    pub calls: u64,
    /// Of those, the outermost instrumented calls of their thread (depth 1): the
    /// requests a model counts.
    pub top_level_calls: u64,
    /// Of those, calls that ended by an exception.
    pub exceptions: u64,
    /// Of those, calls closed by a repair (lost events).
    pub repaired: u64,
    /// Calls ended per second.
    pub throughput_per_s: f64,
    /// Calls that began in the period.
    pub arrivals: u64,
    /// Calls begun per second.
    pub arrival_rate_per_s: f64,
    /// Times between consecutive arrivals (ns), with fits.
    pub interarrival: ComponentFigures,
    /// Little's law.
    pub little: LittleLaw,
    /// Parts of the calls, nested instrumented calls included.
    pub inclusive: Components,
    /// Parts of the calls, nested instrumented calls excluded (no fits).
    pub exclusive: Components,
}

/// A method's label and id, in output order.
#[derive(Clone, Debug)]
pub(crate) struct MethodName {
    pub frame: Frame,
    pub label: String,
}

/// Computes the figures of period `[begin, end)` (ns since origin `origin`), for the
/// calls ending in it; `window` is the collector's window index, or `None` for the
/// whole period.
pub(crate) fn window(
    col: &Collector,
    names: &[MethodName],
    origin: sonda_trace::Time,
    cpus: u16,
    grid: Grid,
    window: Option<usize>,
    end: sonda_trace::Time,
) -> Window {
    let (begin, stop) = match window {
        Some(i) => (grid.begin(i), grid.begin(i + 1).min(end)),
        None => (grid.start, end),
    };
    let duration_s = (stop.since(begin) as f64 / 1e9).max(1e-9);
    let in_window = |t: sonda_trace::Time| match window {
        Some(i) => grid.index(t) == i && t <= end,
        None => t >= begin && t <= end,
    };
    let sum_bins = |bins: &crate::collect::Bins| match window {
        Some(i) => bins.get(i),
        None => bins.0.iter().sum(),
    };
    let mut methods = Vec::new();
    let mut demand_ns = 0.0;
    for (m, name) in col.methods.iter().zip(names) {
        let calls: Vec<&CallRecord> = m.calls.iter().filter(|c| in_window(c.end)).collect();
        let arrivals: Vec<sonda_trace::Time> = m
            .arrivals
            .iter()
            .copied()
            .filter(|&t| in_window(t))
            .collect();
        if calls.is_empty() && arrivals.is_empty() {
            continue;
        }
        let top: Vec<&CallRecord> = calls.iter().copied().filter(|c| c.depth == 1).collect();
        demand_ns += top.iter().map(|c| c.inclusive.cpu as f64).sum::<f64>();
        let gaps = sorted(arrivals.windows(2).map(|w| w[1].since(w[0]) as f64));
        let gaps_s: Vec<f64> = gaps.iter().map(|x| x / 1e9).collect();
        let interarrival = ComponentFigures {
            summary: Summary::of_sorted(&gaps),
            fits: Some(FitFigures::new(fit(&gaps_s), &gaps_s)),
        };
        let throughput = calls.len() as f64 / duration_s;
        let inclusive = Components::of(&calls, |c| &c.inclusive, true);
        let in_flight = sum_bins(&m.in_flight) / 1e9 / duration_s;
        let xr = throughput * inclusive.wall.summary.mean / 1e9;
        methods.push(MethodFigures {
            method: name.label.clone(),
            id: match name.frame {
                Frame::Method(id) => Some(id),
                Frame::Func(_) => None,
            },
            calls: calls.len() as u64,
            top_level_calls: top.len() as u64,
            exceptions: calls
                .iter()
                .filter(|c| c.kind == ExitKind::Exception)
                .count() as u64,
            repaired: calls.iter().filter(|c| c.kind == ExitKind::Unwound).count() as u64,
            throughput_per_s: throughput,
            arrivals: arrivals.len() as u64,
            arrival_rate_per_s: arrivals.len() as f64 / duration_s,
            interarrival,
            little: LittleLaw {
                in_flight,
                throughput_times_response: xr,
                relative_difference: if in_flight > 0.0 {
                    (xr - in_flight) / in_flight
                } else {
                    0.0
                },
            },
            exclusive: Components::of(&calls, |c| &c.exclusive, false),
            inclusive,
        });
    }
    let process_cpu_ns: f64 = col
        .pids
        .iter()
        .filter_map(|p| col.cpu.get(p))
        .map(sum_bins)
        .sum();
    let process_cpus = process_cpu_ns / 1e9 / duration_s;
    let demand_cpus = demand_ns / 1e9 / duration_s;
    Window {
        begin_s: begin.since(origin) as f64 / 1e9,
        end_s: stop.since(origin) as f64 / 1e9,
        duration_s,
        utilisation: UtilisationLaw {
            process_cpu_ns,
            process_cpus,
            machine_fraction: process_cpus / f64::from(cpus.max(1)),
            demand_cpus,
            explained_fraction: if process_cpus > 0.0 {
                demand_cpus / process_cpus
            } else {
                0.0
            },
            other_cpus: sum_bins(&col.foreign.busy) / 1e9 / duration_s,
        },
        methods,
    }
}

/// The background load of the whole period `whole` (its figures already made).
pub(crate) fn background(col: &Collector, whole: &Window) -> Background {
    let period_ns = whole.duration_s * 1e9;
    let bound = col.foreign.cpu_bound(period_ns);
    let bound_ns: f64 = bound
        .iter()
        .map(|t| col.foreign.tasks[t].run_ns.max(0.0))
        .sum();
    let bound_cpus = bound_ns / period_ns;
    let u = &whole.utilisation;
    let other_ns = (col.foreign.busy.0.iter().sum::<f64>() - bound_ns).max(0.0);
    let stretches = col.foreign.stretches
        - bound
            .iter()
            .map(|t| {
                let task = col.foreign.tasks[t];
                (task.preempted + task.slept) as f64
            })
            .sum::<f64>();
    Background {
        untraced_cpus: (u.process_cpus - u.demand_cpus).max(0.0),
        other_cpus: other_ns / period_ns,
        other_stretch_ns: if stretches >= 1.0 {
            other_ns / stretches
        } else {
            0.0
        },
        cpu_bound_present: bound
            .iter()
            .map(|t| col.foreign.tasks[t].present_ns().min(period_ns))
            .sum::<f64>()
            / period_ns.max(1.0),
        cpu_bound_tasks: bound.iter().map(|t| t.0).collect(),
        cpu_bound_cpus: bound_cpus,
        cpu_bound_stretch_ns: {
            let outs: u64 = bound
                .iter()
                .map(|t| {
                    let task = col.foreign.tasks[t];
                    task.preempted + task.slept
                })
                .sum();
            per(bound_ns, outs)
        },
        cpu_bound_wakeup_share: per(
            bound
                .iter()
                .map(|t| col.foreign.tasks[t].woken_onto)
                .sum::<u64>() as f64,
            col.foreign.wakeups,
        ),
        cpu_bound_held_wait_ns: {
            let (n, ns) = bound.iter().fold((0u64, 0u64), |(n, ns), t| {
                let task = col.foreign.tasks[t];
                (n + task.held_waits, ns + task.held_wait_ns)
            });
            per(ns as f64, n)
        },
        preempted_stretch_ns: per(
            col.foreign.preempted_ns as f64,
            col.foreign.preempted_stretches,
        ),
    }
}

/// `total` per one of `count`, 0 when there are none (a background figure with
/// nothing to measure is no load).
fn per(total: f64, count: u64) -> f64 {
    if count > 0 {
        total / count as f64
    } else {
        0.0
    }
}

/// The best fit for a model among the families a model can use.
pub fn model_fit(f: &FitFigures, families: &[Family]) -> Option<Fit> {
    f.fits().best_of(families).copied()
}
