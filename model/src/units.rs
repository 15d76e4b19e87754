//! Units of work: the traced calls that make up one request, summed into one unit by
//! the thread and the outermost call, and classes of units by what they contain.
//!
//! A unit is an outermost traced call (depth 1) with every traced call nested in it on
//! its thread: its parts are the outermost call's inclusive ones (which hold the nested
//! calls' time already), and what it contains is the set of the other traced methods
//! called inside it. Two units are of one class when their outermost method and that
//! set are the same: a `checkout` that called `pay` and one that did not are different
//! work and get a class each, which per-method figures would mix. Nested calls whose
//! outermost call was not selected (a filter that named only inner methods) belong to
//! no unit.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use sonda_trace::Tid;

use crate::join::CallRecord;

/// One class of units.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitClass {
    /// The outermost call's method.
    pub outer: String,
    /// The other traced methods called inside, sorted (empty: none).
    pub contains: Vec<String>,
    /// Units of this class.
    pub units: u64,
    /// Mean wall time of a unit (s).
    pub wall_mean_s: f64,
    /// Mean time on a CPU (steal included, s).
    pub cpu_mean_s: f64,
    /// Mean time waiting for a CPU (s).
    pub runnable_mean_s: f64,
    /// Mean blocked time (`S + D`, s).
    pub blocked_mean_s: f64,
    /// Mean CPU visits (blocked phases + 1).
    pub visits_mean: f64,
}

impl UnitClass {
    /// Its name: the outermost method, with what it contains in brackets.
    pub fn name(&self) -> String {
        if self.contains.is_empty() {
            self.outer.clone()
        } else {
            format!("{} [{}]", self.outer, self.contains.join(", "))
        }
    }
}

/// The classes of units in `calls` (label, calls of that method), the most frequent
/// first (ties by name).
pub fn unit_classes(calls: &[(&str, &[CallRecord])]) -> Vec<UnitClass> {
    // Outermost calls per thread, by their start: (begin, end, label index, call).
    let mut outer: FxHashMap<Tid, Vec<(u64, u64, usize, &CallRecord)>> = FxHashMap::default();
    for (i, (_, list)) in calls.iter().enumerate() {
        for c in list.iter().filter(|c| c.depth == 1) {
            outer
                .entry(c.tid)
                .or_default()
                .push((c.begin.0, c.end.0, i, c));
        }
    }
    for v in outer.values_mut() {
        v.sort_unstable_by_key(|o| o.0);
    }
    // What each unit contains, by (thread, index in its thread's list).
    let mut contains: FxHashMap<(Tid, usize), Vec<usize>> = FxHashMap::default();
    for (i, (_, list)) in calls.iter().enumerate() {
        for c in list.iter().filter(|c| c.depth > 1) {
            let Some(units) = outer.get(&c.tid) else {
                continue;
            };
            // The last unit that began at or before this call, if it holds it.
            let k = units.partition_point(|o| o.0 <= c.begin.0);
            if k == 0 {
                continue;
            }
            let (_, end, outer_ix, _) = units[k - 1];
            if c.end.0 <= end && outer_ix != i {
                let set = contains.entry((c.tid, k - 1)).or_default();
                if !set.contains(&i) {
                    set.push(i);
                }
            }
        }
    }
    #[derive(Default)]
    struct Sum {
        units: u64,
        wall: f64,
        cpu: f64,
        runnable: f64,
        blocked: f64,
        visits: f64,
    }
    let mut classes: BTreeMap<(usize, Vec<usize>), Sum> = BTreeMap::new();
    for (tid, units) in &outer {
        for (k, &(_, _, outer_ix, c)) in units.iter().enumerate() {
            let mut inside = contains.get(&(*tid, k)).cloned().unwrap_or_default();
            inside.sort_unstable();
            let s = classes.entry((outer_ix, inside)).or_default();
            let p = &c.inclusive;
            s.units += 1;
            s.wall += p.wall as f64;
            s.cpu += p.on_cpu() as f64;
            s.runnable += p.runnable as f64;
            s.blocked += p.blocked() as f64;
            s.visits += f64::from(c.blocked_phases) + 1.0;
        }
    }
    let mut out: Vec<UnitClass> = classes
        .into_iter()
        .map(|((o, inside), s)| {
            let n = s.units as f64;
            let mut names: Vec<String> = inside.iter().map(|&i| calls[i].0.to_string()).collect();
            names.sort();
            UnitClass {
                outer: calls[o].0.to_string(),
                contains: names,
                units: s.units,
                wall_mean_s: s.wall / n / 1e9,
                cpu_mean_s: s.cpu / n / 1e9,
                runnable_mean_s: s.runnable / n / 1e9,
                blocked_mean_s: s.blocked / n / 1e9,
                visits_mean: s.visits / n,
            }
        })
        .collect();
    out.sort_by(|a, b| b.units.cmp(&a.units).then_with(|| a.name().cmp(&b.name())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parts::Parts;
    use sonda_timeline::{ExitKind, Frame, ThreadIx};
    use sonda_trace::{Pid, Time};

    fn call(tid: u32, depth: usize, begin: u64, end: u64, cpu: u64, phases: u32) -> CallRecord {
        let parts = Parts {
            wall: end - begin,
            cpu,
            sleeping: end - begin - cpu,
            ..Parts::default()
        };
        CallRecord {
            frame: Frame::Method(0),
            thread: ThreadIx(0),
            tid: Tid(tid),
            pid: Pid(1),
            begin: Time(begin),
            end: Time(end),
            depth,
            kind: ExitKind::Normal,
            inclusive: parts,
            exclusive: parts,
            blocked_phases: phases,
        }
    }

    /// Two checkouts on thread 1, one of which paid; a browse on thread 2 at the same
    /// time as the paying one (a call of another thread is not inside it); a `pay`
    /// outside any selected outermost call.
    #[test]
    fn units_are_classed_by_what_they_contain() {
        let checkout = [call(1, 1, 100, 200, 40, 1), call(1, 1, 300, 500, 80, 2)];
        let pay = [
            call(1, 2, 320, 400, 20, 0),
            call(1, 2, 410, 420, 5, 0),
            call(3, 2, 0, 10, 5, 0),
        ];
        let browse = [call(2, 1, 330, 390, 60, 0)];
        let calls: Vec<(&str, &[CallRecord])> = vec![
            ("Shop::checkout", &checkout),
            ("Shop::pay", &pay),
            ("Shop::browse", &browse),
        ];
        let u = unit_classes(&calls);
        let names: Vec<String> = u.iter().map(UnitClass::name).collect();
        assert_eq!(
            names,
            [
                "Shop::browse",
                "Shop::checkout",
                "Shop::checkout [Shop::pay]"
            ]
        );
        let paid = &u[2];
        assert_eq!(paid.units, 1);
        assert_eq!(paid.wall_mean_s, 200e-9);
        assert_eq!(paid.cpu_mean_s, 80e-9);
        assert_eq!(paid.blocked_mean_s, 120e-9);
        assert_eq!(paid.visits_mean, 3.0);
        assert_eq!(u[1].visits_mean, 2.0);
        assert!(unit_classes(&[]).is_empty());
    }
}
