//! The agent's totals, written at the end as `Meta::Counter { name: "agent.<name>" }`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::meta;

/// One total.
pub struct Counter {
    name: &'static str,
    value: AtomicU64,
}

impl Counter {
    const fn new(name: &'static str) -> Counter {
        Counter {
            name,
            value: AtomicU64::new(0),
        }
    }

    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.value.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one.
    pub fn incr(&self) {
        self.add(1);
    }

    /// Back to zero (a new recording starts).
    fn reset(&self) {
        self.value.store(0, Ordering::Relaxed);
    }

    /// Sets the value.
    pub fn set(&self, v: u64) {
        self.value.store(v, Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }
}

/// Classes rewritten with probes (a retransformed class counts again).
pub static CLASSES_INSTRUMENTED: Counter = Counter::new("classes_instrumented");
/// Distinct methods given an id and a `Meta::Method`.
pub static METHODS_INSTRUMENTED: Counter = Counter::new("methods_instrumented");
/// Classes the rewriter refused (left unchanged, with a warning).
pub static CLASSES_REFUSED: Counter = Counter::new("classes_refused");
/// Classes the filter may match that were loaded before the probe class existed (found
/// at VMInit or attach, then retransformed).
pub static CLASSES_BEFORE_PROBES: Counter = Counter::new("classes_before_probes");
/// Already-loaded classes retransformed at VMInit or attach.
pub static CLASSES_RETRANSFORMED: Counter = Counter::new("classes_retransformed");
/// Classes given back their original bytes when recording stopped.
pub static CLASSES_RESTORED: Counter = Counter::new("classes_restored");
/// Classes that could not be retransformed.
pub static RETRANSFORM_FAILURES: Counter = Counter::new("retransform_failures");
/// Java threads named (`Meta::JavaThread` written).
pub static THREADS_NAMED: Counter = Counter::new("threads_named");
/// Live Java threads whose kernel id could not be found.
pub static THREADS_UNNAMED: Counter = Counter::new("threads_unnamed");
/// Monitor classes interned (`Meta::MonitorClass` written).
pub static MONITOR_CLASSES: Counter = Counter::new("monitor_classes");
/// Warnings written (including internal errors caught).
pub static WARNINGS: Counter = Counter::new("warnings");
/// ns the live start (VMInit, or attach) took to name the live threads.
pub static NAMING_NS: Counter = Counter::new("naming_ns");
/// ns from the live start to the instrumentation in place (`AgentState::Recording`):
/// naming, linking the probes, retransforming the loaded classes.
pub static READY_NS: Counter = Counter::new("ready_ns");

/// ns to find the loaded classes to retransform at the live start.
pub static SCAN_NS: Counter = Counter::new("scan_ns");

/// Methods whose probes the overhead budget removed (`Meta::MethodRemoved` written).
pub static BUDGET_REMOVED: Counter = Counter::new("budget_removed");
/// Times the overhead budget looked (one a second while recording with a budget).
pub static BUDGET_CHECKS: Counter = Counter::new("budget_checks");
/// The probe pair's cost the budget calibrated, ns.
pub static BUDGET_PAIR_NS: Counter = Counter::new("budget_pair_ns");
/// The probes' estimated share of the process's CPU time at the budget's last look
/// (with enough CPU time to judge), millionths, before that look's removals.
pub static BUDGET_OVERHEAD_PPM: Counter = Counter::new("budget_overhead_ppm");

/// The collector's CPU ns per agent event the budget measured (0: not visible).
pub static BUDGET_COLLECTOR_EVENT_NS: Counter = Counter::new("budget_collector_event_ns");
/// Looks of the budget that found events dropped (full rings) since the previous.
pub static BUDGET_DROPPED_LOOKS: Counter = Counter::new("budget_dropped_looks");

static ALL: [&Counter; 20] = [
    &CLASSES_INSTRUMENTED,
    &CLASSES_RESTORED,
    &METHODS_INSTRUMENTED,
    &CLASSES_REFUSED,
    &CLASSES_BEFORE_PROBES,
    &CLASSES_RETRANSFORMED,
    &RETRANSFORM_FAILURES,
    &THREADS_NAMED,
    &THREADS_UNNAMED,
    &MONITOR_CLASSES,
    &WARNINGS,
    &NAMING_NS,
    &READY_NS,
    &SCAN_NS,
    &BUDGET_REMOVED,
    &BUDGET_CHECKS,
    &BUDGET_PAIR_NS,
    &BUDGET_OVERHEAD_PPM,
    &BUDGET_COLLECTOR_EVENT_NS,
    &BUDGET_DROPPED_LOOKS,
];

/// Sets every counter back to zero: each recording reports its own totals.
pub fn reset() {
    for c in ALL {
        c.reset();
    }
}

/// Writes every counter to the metadata log.
pub fn publish() {
    for c in ALL {
        meta::counter(c.name, c.get());
    }
}
