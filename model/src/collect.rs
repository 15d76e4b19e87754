//! Gathers what the statistics need while the trace streams: the finished calls of the
//! selected methods (the per-call samples), their arrival times, the calls in flight
//! integrated over time, and the CPU time of the processes that run them; per whole
//! run and per time window.
//!
//! ## The observation period
//!
//! Figures cover the traced methods' busy period: from the first call's enter to the
//! last call's exit, not the whole recording (which includes the JVM's start and
//! end, with no requests). `--window W` cuts that period into windows of `W` from the
//! first enter; the last window ends at the last exit. Calls belong to the window in
//! which they end (throughput, demands), arrivals to the window in which they enter.
//!
//! `--from`/`--to` narrow the period to the calls that enter within them ([`Period`]):
//! the period then runs from the first such enter to the last such call's exit, and
//! calls that enter outside it are left out whole (a call that entered during a
//! warm-up is not counted even if it ends after it).
//!
//! State intervals arrive late (when they end) and the last exit is known only at the
//! end, so CPU time is added to its windows as it comes and the intervals that reach
//! past the latest exit are kept until a later exit passes them: at the end, their
//! part after the last exit is taken off. That list stays short (the intervals of a
//! few milliseconds after the latest exit).

use rustc_hash::FxHashMap;
use sonda_timeline::{CallEnter, Frame, Interval, ThreadState};
use sonda_trace::{Pid, Time};

use crate::foreign::Foreign;
use crate::join::{CallRecord, CallSink};

/// Per-window sums, indexed by window.
#[derive(Clone, Debug, Default)]
pub(crate) struct Bins(pub Vec<f64>);

impl Bins {
    pub fn add(&mut self, i: usize, v: f64) {
        if self.0.len() <= i {
            self.0.resize(i + 1, 0.0);
        }
        self.0[i] += v;
    }

    pub fn get(&self, i: usize) -> f64 {
        self.0.get(i).copied().unwrap_or(0.0)
    }
}

/// What is gathered about one selected method.
#[derive(Debug, Default)]
pub(crate) struct MethodCalls {
    /// Finished calls, in exit order.
    pub calls: Vec<CallRecord>,
    /// Enter times, in order.
    pub arrivals: Vec<Time>,
    /// Calls in flight integrated over time (ns), per window.
    pub in_flight: Bins,
    open: u64,
    last: Option<Time>,
}

/// The windows: `width` ns from `start` (the first enter).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grid {
    pub start: Time,
    pub width: u64,
}

impl Grid {
    pub fn index(&self, t: Time) -> usize {
        (t.since(self.start) / self.width) as usize
    }

    /// Where window `i` begins (saturating: a one-window grid has `width` = `u64::MAX`).
    pub fn begin(&self, i: usize) -> Time {
        Time(
            self.start
                .0
                .saturating_add((i as u64).saturating_mul(self.width)),
        )
    }

    /// Splits `[a, b)` at window boundaries: (window, ns) pieces.
    pub fn split(&self, a: Time, b: Time, mut f: impl FnMut(usize, u64)) {
        let mut t = a.max(self.start);
        while t < b {
            let i = self.index(t);
            let end = self.begin(i + 1).min(b);
            f(i, end.since(t));
            t = end;
        }
    }
}

/// The calls that count: those that enter in `[from, to)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Period {
    pub from: Time,
    pub to: Time,
}

impl Period {
    fn holds(&self, enter: Time) -> bool {
        self.from <= enter && enter < self.to
    }
}

/// The sink that gathers everything (see the module docs).
#[derive(Debug)]
pub(crate) struct Collector {
    /// Which frames are selected, and their index in `methods`.
    selected: FxHashMap<Frame, usize>,
    pub methods: Vec<MethodCalls>,
    width: u64,
    period: Period,
    /// Calls of selected methods left out because they entered outside the period.
    pub outside_period: u64,
    pub grid: Option<Grid>,
    pub last_exit: Option<Time>,
    /// Running time per process, per window, from the first enter on.
    pub cpu: FxHashMap<Pid, Bins>,
    /// Running intervals (clipped to the grid) that end after the latest exit.
    tail: Vec<(Pid, Time, Time)>,
    /// Processes that ran a selected method.
    pub pids: Vec<Pid>,
    /// The CPU time of tasks the trace does not follow.
    pub foreign: Foreign,
}

impl Collector {
    /// Gathers the calls of `selected` frames (index = position in the output), in
    /// windows of `width` ns (`u64::MAX`: one window).
    /// `followed` are the threads the trace follows (the rest is foreign).
    pub fn new(
        selected: FxHashMap<Frame, usize>,
        width: u64,
        period: Period,
        followed: impl IntoIterator<Item = sonda_trace::Tid>,
    ) -> Collector {
        let n = selected.len();
        Collector {
            selected,
            methods: (0..n).map(|_| MethodCalls::default()).collect(),
            width,
            period,
            outside_period: 0,
            grid: None,
            last_exit: None,
            cpu: FxHashMap::default(),
            tail: Vec::new(),
            pids: Vec::new(),
            foreign: Foreign::new(followed),
        }
    }

    /// A record, before the timeline has it: kept switches feed the foreign-task
    /// accounting.
    pub fn record(&mut self, record: &sonda_trace::Record) {
        use sonda_trace::Event;
        match record.event {
            Event::Switch {
                cpu,
                prev,
                prev_state,
                next,
                ..
            } => self.foreign.switch(
                self.grid,
                self.last_exit,
                record.time,
                cpu,
                prev,
                prev_state,
                next,
            ),
            Event::Wakeup { target, wakee, .. } => {
                self.foreign
                    .runnable_on(self.grid, record.time, wakee, target, false)
            }
            Event::Migrate { tid, to, .. } => {
                self.foreign
                    .runnable_on(self.grid, record.time, tid, to, true)
            }
            _ => {}
        }
    }

    fn flight(&mut self, m: usize, t: Time, delta: i64) {
        let Some(grid) = self.grid else { return };
        let mc = &mut self.methods[m];
        if let Some(last) = mc.last {
            let open = mc.open;
            if open > 0 {
                let bins = &mut mc.in_flight;
                grid.split(last, t, |i, ns| bins.add(i, (open * ns) as f64));
            }
        }
        mc.last = Some(t);
        mc.open = mc.open.saturating_add_signed(delta);
    }

    /// Takes off the CPU time after the last exit; call once at the end.
    pub fn close(&mut self) {
        let (Some(grid), Some(last)) = (self.grid, self.last_exit) else {
            return;
        };
        self.foreign.close(grid, last);
        for (pid, a, b) in std::mem::take(&mut self.tail) {
            let from = a.max(last);
            if let Some(bins) = self.cpu.get_mut(&pid) {
                grid.split(from, b, |i, ns| bins.add(i, -(ns as f64)));
            }
        }
    }
}

impl CallSink for Collector {
    fn call(&mut self, call: &CallRecord) {
        let Some(&m) = self.selected.get(&call.frame) else {
            return;
        };
        if !self.period.holds(call.begin) {
            self.outside_period += 1;
            return;
        }
        self.flight(m, call.end, -1);
        self.methods[m].calls.push(*call);
        if !self.pids.contains(&call.pid) {
            self.pids.push(call.pid);
        }
        self.last_exit = Some(call.end);
        self.tail.retain(|&(_, _, b)| b > call.end);
        self.foreign.exit(call.end);
    }

    fn enter(&mut self, enter: &CallEnter, _pid: sonda_trace::Pid) {
        let Some(&m) = self.selected.get(&enter.frame) else {
            return;
        };
        if !self.period.holds(enter.at.time) {
            return;
        }
        if self.grid.is_none() {
            self.grid = Some(Grid {
                start: enter.at.time,
                width: self.width.max(1),
            });
        }
        self.methods[m].arrivals.push(enter.at.time);
        self.flight(m, enter.at.time, 1);
    }

    fn interval(&mut self, iv: &Interval, pid: Pid) {
        if iv.state != ThreadState::Running {
            return;
        }
        let Some(grid) = self.grid else { return };
        if iv.end <= grid.start {
            return;
        }
        let bins = self.cpu.entry(pid).or_default();
        grid.split(iv.begin, iv.end, |i, ns| bins.add(i, ns as f64));
        if self.last_exit.is_none_or(|l| iv.end > l) {
            self.tail.push((pid, iv.begin.max(grid.start), iv.end));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_splits_at_boundaries() {
        let g = Grid {
            start: Time(100),
            width: 10,
        };
        let mut v = Vec::new();
        g.split(Time(95), Time(123), |i, ns| v.push((i, ns)));
        assert_eq!(v, vec![(0, 10), (1, 10), (2, 3)]);
        assert_eq!(g.index(Time(119)), 1);
        let whole = Grid {
            start: Time(100),
            width: u64::MAX,
        };
        let mut v = Vec::new();
        whole.split(Time(50), Time(500), |i, ns| v.push((i, ns)));
        assert_eq!(v, vec![(0, 400)]);
    }
}
