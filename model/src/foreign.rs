//! The CPU time of tasks the trace does not follow (other processes, the collector
//! itself, kernel threads): the background load a model of the traced program must
//! put beside it on the CPUs.
//!
//! The recorder keeps a switch when its `prev` or its `next` is followed, so every
//! stretch a followed thread runs is bracketed by two switches, and the stretches in
//! between on each CPU ran tasks that are not followed, or nothing (the idle task,
//! tid 0). For one CPU, the task that started at the previous kept switch (its
//! `next`) and the task that stopped at this one (its `prev`) bound such a gap:
//!
//! ```text
//!   kept switch: worker → X          (switches among foreign tasks: not kept)          kept switch: Y → worker
//!   ──────────────────────┬─────────────────────────────────────────────────────────────┬──────────
//!                         X ran here first                                    Y ran here last
//! ```
//!
//! When `X == Y` the whole gap is theirs (idle for tid 0). When they differ, other
//! switches came between, unseen: the gap is split half and half, the estimate with the
//! least bias when nothing tells where it changed hands. Gaps are clipped to the
//! observation period (first selected enter to last selected exit, as the other
//! figures); the gap still open on each CPU at the end counts for its task up to the
//! last exit.
//!
//! Each foreign task is also classified by how it leaves a CPU: a task that is only
//! ever preempted (switched out runnable, never asleep) and runs for a good share of
//! the period is CPU-bound: it is on the run queue all the time and takes its fair
//! share of the CPUs whatever the load, which a model represents as a closed customer
//! with no think time, not as arrivals. A CPU-bound task that came or went during the
//! period (a compiler run on a shared machine) is present only between the first and
//! the last stretch it was seen running: its `present_ns`, what the model needs to
//! take its share for that part of the period only.

use rustc_hash::{FxHashMap, FxHashSet};
use sonda_trace::{Cpu, SwitchOut, Tid, Time};

use crate::collect::{Bins, Grid};

/// A task is CPU-bound when it ran at least this share of the period on one CPU...
const CPU_BOUND_SHARE: f64 = 0.1;
/// ... and at most this share of its switch-outs were to sleep.
const CPU_BOUND_MAX_SLEEPS: f64 = 0.05;

/// What is known about one foreign task.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Task {
    /// CPU time attributed to it in the period (ns; halves of unseen gaps included).
    pub run_ns: f64,
    /// Kept switch-outs while runnable (preempted).
    pub preempted: u64,
    /// Kept switch-outs to sleep (or any other state).
    pub slept: u64,
    /// The start of the first stretch attributed to it in the period.
    pub first: Option<Time>,
    /// The end of the last one (clipped to the period at [`Foreign::close`]).
    pub last: Time,
    /// Followed threads it held a CPU from while they waited there: how many, and
    /// their waits from when they became runnable on that CPU (or it got the CPU, if
    /// later) to its switch-out for them (ns). What a thread queued behind it waits,
    /// which on a kernel that preempts a CPU-bound task for a woken one is far less
    /// than its stretches when nobody waits.
    pub held_waits: u64,
    pub held_wait_ns: u64,
    /// The CPU it was last seen on (running, or switched out there).
    pub cpu: Option<Cpu>,
    /// Wakeups of followed threads onto the CPU it was on.
    pub woken_onto: u64,
}

impl Task {
    /// The time from the start of its first stretch to the end of its last (ns).
    pub fn present_ns(&self) -> f64 {
        self.first.map_or(0.0, |f| self.last.since(f) as f64)
    }
}

#[derive(Clone, Copy, Debug)]
struct OnCpu {
    /// The task that started at the last kept switch (0: idle).
    runner: Tid,
    since: Time,
}

/// The foreign-task accounting (see the module docs).
#[derive(Debug)]
pub(crate) struct Foreign {
    followed: FxHashSet<Tid>,
    cpus: Vec<Option<OnCpu>>,
    /// Foreign CPU time per window (ns), from the first enter on.
    pub busy: Bins,
    /// Gaps (task, begin, end, share) counted in `busy` that end after the latest exit.
    tail: Vec<(Tid, Time, Time, f64)>,
    pub tasks: FxHashMap<Tid, Task>,
    /// Gaps with foreign time (for the mean length of a foreign stretch).
    pub stretches: f64,
    /// Stretches on a CPU of followed threads that ended in a preemption (switched
    /// out still runnable), in the period: their count and total length (ns). Their
    /// mean is the scheduler's time slice as the traced threads met it, which a model
    /// with round-robin run queues takes as its quantum.
    pub preempted_stretches: u64,
    pub preempted_ns: u64,
    /// Followed threads runnable now: when they became so, and on which CPU.
    runnable: FxHashMap<Tid, (Time, Cpu)>,
    /// Per CPU, the foreign task last seen there.
    last_foreign: Vec<Option<Tid>>,
    /// Wakeups of followed threads in the period.
    pub wakeups: u64,
}

impl Foreign {
    /// Accounting for a trace that follows `followed`.
    pub fn new(followed: impl IntoIterator<Item = Tid>) -> Foreign {
        Foreign {
            followed: followed.into_iter().collect(),
            cpus: Vec::new(),
            busy: Bins::default(),
            tail: Vec::new(),
            tasks: FxHashMap::default(),
            stretches: 0.0,
            preempted_stretches: 0,
            preempted_ns: 0,
            runnable: FxHashMap::default(),
            last_foreign: Vec::new(),
            wakeups: 0,
        }
    }

    /// A followed thread woke up onto `cpu`'s run queue at `t` (`sched_wakeup`), or
    /// was moved there while runnable (`sched_migrate_task`).
    pub fn runnable_on(&mut self, grid: Option<Grid>, t: Time, tid: Tid, cpu: Cpu, migrated: bool) {
        if !self.followed.contains(&tid) {
            return;
        }
        if !migrated && grid.is_some_and(|g| t >= g.start) {
            self.wakeups += 1;
            let there = self.last_foreign.get(usize::from(cpu.0)).copied().flatten();
            if let Some(task) = there.and_then(|f| self.tasks.get_mut(&f)) {
                if task.cpu == Some(cpu) {
                    task.woken_onto += 1;
                }
            }
        }
        match self.runnable.get_mut(&tid) {
            Some(r) if migrated => r.1 = cpu,
            // A migration of a sleeping thread (EEVDF's delayed dequeue) wakes
            // nothing.
            None if migrated => {}
            _ => {
                self.runnable.insert(tid, (t, cpu));
            }
        }
    }

    fn is_foreign(&self, tid: Tid) -> bool {
        tid.0 != 0 && !self.followed.contains(&tid)
    }

    /// A kept switch at `t`. `grid` is the period's grid once the first selected call
    /// entered (nothing is counted before), `last_exit` the latest selected exit.
    #[allow(clippy::too_many_arguments)]
    pub fn switch(
        &mut self,
        grid: Option<Grid>,
        last_exit: Option<Time>,
        t: Time,
        cpu: Cpu,
        prev: Tid,
        prev_state: u64,
        next: Tid,
    ) {
        let i = usize::from(cpu.0);
        if self.cpus.len() <= i {
            self.cpus.resize(i + 1, None);
        }
        if let (Some(seen), Some(grid)) = (self.cpus[i], grid) {
            if seen.runner == prev {
                self.gap(grid, last_exit, seen.since, t, prev, 1.0);
            } else {
                self.gap(grid, last_exit, seen.since, t, seen.runner, 0.5);
                self.gap(grid, last_exit, seen.since, t, prev, 0.5);
            }
        }
        // A followed thread's stretch is bracketed by two kept switches on this CPU.
        if let (Some(seen), Some(grid)) = (self.cpus[i], grid) {
            if seen.runner == prev
                && prev.0 != 0
                && !self.is_foreign(prev)
                && seen.since >= grid.start
                && matches!(SwitchOut::from_prev_state(prev_state), SwitchOut::Runnable)
            {
                self.preempted_stretches += 1;
                self.preempted_ns += t.since(seen.since);
            }
        }
        let waited = self.runnable.remove(&next);
        if self.last_foreign.len() <= i {
            self.last_foreign.resize(i + 1, None);
        }
        for f in [prev, next] {
            if self.is_foreign(f) {
                self.tasks.entry(f).or_default().cpu = Some(cpu);
                self.last_foreign[i] = Some(f);
            }
        }
        if self.is_foreign(prev) {
            let task = self.tasks.entry(prev).or_default();
            match SwitchOut::from_prev_state(prev_state) {
                SwitchOut::Runnable => task.preempted += 1,
                _ => task.slept += 1,
            }
            // A followed thread that waited on this CPU while `prev` ran there.
            if let (Some((since, on)), Some(seen), Some(grid)) = (waited, self.cpus[i], grid) {
                if on == cpu && seen.runner == prev && t >= grid.start {
                    task.held_waits += 1;
                    task.held_wait_ns += t.since(since.max(seen.since));
                }
            }
        }
        if self.followed.contains(&prev)
            && matches!(SwitchOut::from_prev_state(prev_state), SwitchOut::Runnable)
        {
            self.runnable.insert(prev, (t, cpu));
        }
        self.cpus[i] = Some(OnCpu {
            runner: next,
            since: t,
        });
    }

    /// `share` of `[a, b)` ran `tid`.
    fn gap(&mut self, grid: Grid, last_exit: Option<Time>, a: Time, b: Time, tid: Tid, share: f64) {
        if !self.is_foreign(tid) || b <= grid.start {
            return;
        }
        let a = a.max(grid.start);
        if a >= b {
            return;
        }
        let busy = &mut self.busy;
        grid.split(a, b, |w, ns| busy.add(w, share * ns as f64));
        let task = self.tasks.entry(tid).or_default();
        task.run_ns += share * b.since(a) as f64;
        task.first = Some(task.first.map_or(a, |f| f.min(a)));
        task.last = task.last.max(b);
        self.stretches += share;
        if last_exit.is_none_or(|l| b > l) {
            self.tail.push((tid, a, b, share));
        }
    }

    /// A selected call ended at `t`: gaps ending before it are final.
    pub fn exit(&mut self, t: Time) {
        self.tail.retain(|&(_, _, b, _)| b > t);
    }

    /// Closes the period at `last` (the last selected exit): counts the gaps still
    /// open on each CPU up to it and takes off what was counted after it.
    pub fn close(&mut self, grid: Grid, last: Time) {
        for i in 0..self.cpus.len() {
            if let Some(seen) = self.cpus[i] {
                if seen.since < last {
                    self.gap(grid, Some(last), seen.since, last, seen.runner, 1.0);
                }
            }
        }
        for (tid, a, b, share) in std::mem::take(&mut self.tail) {
            let from = a.max(last);
            if from >= b {
                continue;
            }
            let busy = &mut self.busy;
            grid.split(from, b, |w, ns| busy.add(w, -(share * ns as f64)));
            if let Some(task) = self.tasks.get_mut(&tid) {
                task.run_ns -= share * b.since(from) as f64;
            }
        }
        for task in self.tasks.values_mut() {
            task.last = task.last.min(last);
        }
    }

    /// The foreign tasks that are CPU-bound over a period of `period_ns`.
    pub fn cpu_bound(&self, period_ns: f64) -> Vec<Tid> {
        let mut v: Vec<Tid> = self
            .tasks
            .iter()
            .filter(|(_, t)| {
                let outs = (t.preempted + t.slept).max(1) as f64;
                t.run_ns >= CPU_BOUND_SHARE * period_ns
                    && t.slept as f64 <= CPU_BOUND_MAX_SLEEPS * outs
            })
            .map(|(tid, _)| *tid)
            .collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORKER: Tid = Tid(10);
    const HOG: Tid = Tid(50);
    const DAEMON: Tid = Tid(60);

    fn grid() -> Grid {
        Grid {
            start: Time(1000),
            width: u64::MAX,
        }
    }

    /// A hog shares CPU 0 with a worker; a daemon runs once on CPU 1 between idle
    /// stretches, seen only at one end.
    #[test]
    fn gaps_are_attributed_and_clipped() {
        let mut f = Foreign::new([WORKER]);
        let g = Some(grid());
        // Before the period: nothing counted, but the CPU's runner is known.
        f.switch(None, None, Time(500), Cpu(0), WORKER, 0x1, HOG);
        // The hog ran 500..1500: 500 of it in the period.
        f.switch(g, None, Time(1500), Cpu(0), HOG, 0x100, WORKER);
        f.exit(Time(1600));
        f.switch(g, Some(Time(1600)), Time(2000), Cpu(0), WORKER, 0x1, HOG);
        // CPU 1: idle from 1000, the daemon hands over to the worker at 3000: half.
        f.switch(g, Some(Time(1600)), Time(1000), Cpu(1), WORKER, 0x1, Tid(0));
        f.switch(g, Some(Time(1600)), Time(3000), Cpu(1), DAEMON, 0x1, WORKER);
        f.exit(Time(3500));
        f.close(grid(), Time(3500));
        // Hog: 500 + (2000..3500 still open at the end) 1500; daemon: 1000 of 2000.
        assert_eq!(f.tasks[&HOG].run_ns, 2000.0);
        assert_eq!(f.tasks[&DAEMON].run_ns, 1000.0);
        assert_eq!(f.busy.get(0), 3000.0);
        assert_eq!(f.cpu_bound(2500.0), vec![HOG]);
        // The hog was there from the period's start to its end; the daemon from the
        // start of its gap (1000) to 3000.
        assert_eq!(f.tasks[&HOG].present_ns(), 2500.0);
        assert_eq!(f.tasks[&DAEMON].present_ns(), 2000.0);
    }

    /// A worker woken onto the hog's CPU waits until the hog is switched out for
    /// it; one preempted by the hog waits from its preemption. A wakeup onto the
    /// other CPU counts in the wakeups only.
    #[test]
    fn waits_behind_a_task_and_wakeups_onto_its_cpu() {
        const OTHER: Tid = Tid(11);
        let mut f = Foreign::new([WORKER, OTHER]);
        let g = Some(grid());
        f.switch(g, None, Time(1000), Cpu(0), Tid(0), 0x0, HOG);
        // Woken onto CPU 0 at 1100 (the hog's), onto CPU 1 at 1150 (idle).
        f.runnable_on(g, Time(1100), WORKER, Cpu(0), false);
        f.runnable_on(g, Time(1150), OTHER, Cpu(1), false);
        f.switch(g, None, Time(1160), Cpu(1), Tid(0), 0x0, OTHER);
        f.switch(g, None, Time(1300), Cpu(0), HOG, 0x0, WORKER);
        // The hog preempts the worker at 2000 and gives the CPU back at 2500.
        f.switch(g, None, Time(2000), Cpu(0), WORKER, 0x0, HOG);
        f.switch(g, None, Time(2500), Cpu(0), HOG, 0x0, WORKER);
        let hog = f.tasks[&HOG];
        assert_eq!((hog.held_waits, hog.held_wait_ns), (2, 200 + 500));
        assert_eq!((hog.woken_onto, f.wakeups), (1, 2));
        // A migration of a sleeping thread is no wakeup.
        f.runnable_on(g, Time(2600), OTHER, Cpu(0), true);
        assert_eq!(f.wakeups, 2);
    }

    #[test]
    fn what_runs_past_the_last_exit_is_taken_off() {
        let mut f = Foreign::new([WORKER]);
        let g = Some(grid());
        f.switch(g, None, Time(1000), Cpu(0), WORKER, 0x1, HOG);
        f.exit(Time(1200));
        f.switch(g, Some(Time(1200)), Time(5000), Cpu(0), HOG, 0x0, WORKER);
        f.close(grid(), Time(1200));
        assert_eq!(f.busy.get(0), 200.0);
        assert_eq!(f.tasks[&HOG].run_ns, 200.0);
        assert_eq!(f.tasks[&HOG].present_ns(), 200.0);
    }
}
