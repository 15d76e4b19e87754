//! One thread's scheduling state machine: kernel records in, state [`Interval`]s out.
//!
//! ```text
//!                 NewTask / wakeup_new                 switch-in (next)
//!   NotCreated ───────────────────────▶ Runnable ─────────────────────────▶ Running
//!                                        ▲   ▲  ◀───────────────────────────  │  │
//!                                        │   │   switch-out, still runnable   │  │
//!                               wakeup   │   │   (preempted, yielded)         │  │
//!                                        │   │                                │  │
//!            Sleeping / Uninterruptible / Stopped / Idle ◀────────────────────┘  │
//!                           switch-out with prev_state S, D, T/t, I/P            │
//!                                                                                │
//!   NotCreated ◀─── the last switch-out after TaskExit (or with prev_state X/Z) ─┘
//! ```
//!
//! - A wakeup of a thread that is running or already runnable changes nothing.
//! - A migration (`sched_migrate_task`) never changes a thread's state: a runnable
//!   thread now waits on the new CPU (the interval splits there); a thread asleep stays
//!   asleep. A thread asleep that the kernel moves with no `sched_waking` for it pending
//!   was still on its run queue (EEVDF's delayed dequeue: a thread that blocks with
//!   negative lag stays queued until it is picked or woken), and the kernel's own
//!   accounting (`schedstat`) counts it as waiting for a CPU from that move until it
//!   runs. The trace keeps it asleep until its wakeup, and counts that span apart
//!   ([`ThreadStats::queued_asleep_ns`]), so that a reader can compare with the kernel.
//!   (A migration right after `sched_waking` is the wakeup choosing a CPU.)
//! - Every interval carries a CPU: the one the thread runs on (Running), waits on
//!   (Runnable: the CPU it was preempted on, or the wakeup's target), or last ran on
//!   (asleep). An interval opened without one (a newborn thread before its first
//!   wakeup) takes the first CPU a record names for it.
//! - An interval ends only when the state or the CPU changes: records that change
//!   nothing (a conflicting switch-in of a running thread) do not split it.
//! - Threads that existed before the trace: until the first record that names a thread,
//!   its state is unknown. That record says what it was doing since the origin
//!   ([`evidence`]): a switch-out means it was running there, a switch-in that it was
//!   waiting for that CPU, a wakeup that it was asleep, a `NewTask` that it did not
//!   exist yet; an agent event (tracepoint traces only) means it was running; a `/proc`
//!   sample gives its state (in a tracepoint trace too, where a sample taken when the
//!   recording starts is exactly this evidence, and nothing more). A thread no record
//!   ever names is presumed asleep for the whole trace (`ThreadStats::unseen`).
//!   A caller that can look ahead (the Paraver exporter) may set the presumed state
//!   beforehand (`Timeline::presume_from`), so that a state written out early
//!   (`Timeline::cut`) is already right.
//! - Records that contradict the state (a switch-out of a thread that was not running:
//!   kernel records were lost) are applied anyway and counted as conflicts.
//! - `/proc` samples replace switches in traces without tracepoints: see
//!   `procfs` for that approximation.
//! - Steal time: while a thread runs, the kernel charges it CPU time
//!   (`Event::CpuTime`, `sched_stat_runtime`) from its task clock, which leaves out
//!   what the hypervisor took from the virtual CPU. The machine keeps the wall time of
//!   the thread's Running stretches minus its charges (`debt`); when a charge leaves
//!   more than [`STEAL_FLOOR_NS`] owed, that much of the stretch just before the charge
//!   becomes [`ThreadState::Stolen`]. The amount is the kernel's to within the floor;
//!   where it lies inside the stretch between two charges (a tick, 4 ms at 250 Hz) is
//!   not known, and is put at its end, but never before the latest call edge (a method's
//!   enter or leave) in the stretch: the call took the time before it as running
//!   (`Sched::running_ns`). What does not fit after the edge goes there in proportion
//!   to the time after the edge, and the rest is left unplaced
//!   (`ThreadStats::steal_unplaced_ns`: the thread's Running time is over the kernel's
//!   by that much). Below the floor the difference is the few µs
//!   between the scheduler's clock update and the tracepoints, which cancel over
//!   switches (a charge starts a little before the switch-in record and ends a little
//!   before the switch-out record), so the debt carries over from one stretch to the
//!   next instead of being forgotten.
//! - A switch dated by the scheduler's clock: a thread whose last charge was written
//!   by another task (a wakeup from another CPU; in traces that do not say, one that
//!   came more than [`STALE_CLOCK_NS`] before its switch-out), or by itself shortly
//!   before the switch (the switch's own charge), left its CPU at that charge as far as
//!   the kernel's clock goes: the kernel counts it queued (or asleep) from there, and
//!   the thread switched in running (`Sched::switch_clock`); so does the machine, for
//!   both (and that tail owes nothing). The `sched_switch` record comes 15-20 µs later
//!   through the ftrace instances. See [`stale_clock`].

use sonda_trace::{ChargedBy, Cpu, Event, Source, SwitchOut, Tid, Time};

use crate::output::{At, Interval, QueuedAsleep, Sink, ThreadIx};
use crate::procfs::{split, Sample};
use crate::state::{StateTotals, ThreadState};

/// The least steal time put into a [`ThreadState::Stolen`] interval, ns: below it, the
/// difference of a stretch's wall time and its CPU-time charges is the jitter between
/// the scheduler's clock and the tracepoints' (measured: within ±20 µs between two
/// charges, cancelling over a thread's stretches).
pub const STEAL_FLOOR_NS: i64 = 20_000;

/// The longest a preempted thread's last CPU-time charge comes before its switch-out
/// record when the scheduler updated its clock for that switch, ns. The scheduler
/// charges the thread leaving (`sched_stat_runtime`) a few µs before `sched_switch`;
/// but a wakeup that preempts the running thread asks the next switch not to update the
/// clock again (`rq_clock_skip_update`), and when that wakeup came from another CPU the
/// switch waits for the interrupt telling this one to reschedule (10-80 µs in a
/// virtual machine): the thread runs on, uncharged, and the kernel counts it queued
/// from the clock's last update, the charge the wakeup made (`sched_info.last_queued`,
/// what schedstat's run_delay adds up). Measured on this project's machines (the
/// schedstat test beside a busy program, the JVM main thread): the gap from the last
/// charge to a preempting switch-out is 0-8 µs or 10-80 µs, nothing between; the second
/// kind added up to the 1.2-2.7 ms of waiting that schedstat counted and the trace
/// showed as stolen. Below this bound the gap is the jitter the steal debt absorbs;
/// above [`STALE_CLOCK_MAX_NS`] it is not told apart from steal (next). Only for traces
/// that do not say who wrote each charge (before format 2.1): see [`stale_clock`].
pub const STALE_CLOCK_NS: u64 = 10_000;

/// The longest gap taken for a stale clock, ns. A virtual CPU the hypervisor stops
/// between the thread's last charge and its switch-out leaves the same gap, with the
/// clock updated at the switch: its task clock did not advance, so no charge, and the
/// kernel counts that time neither running nor waiting (steal). Measured with a heavy
/// steal (140-160 ms a second on two CPUs), the unbounded rule put a short-lived
/// thread's waiting 2.7-3.5 ms over schedstat; the rescheduling interrupt's own delay
/// was 10-100 µs. Longer gaps stay the steal debt's, as before (a stale gap that long,
/// the CPU itself stopped with the interrupt pending, is then shown stolen). Only for
/// traces that do not say who wrote each charge: see [`stale_clock`].
pub const STALE_CLOCK_MAX_NS: u64 = 250_000;

/// Whether a thread whose last charge in its stretch was written `by` that writer,
/// `gap_ns` before its switch-out record, left its CPU at that charge by the kernel's
/// clock: the kernel counts it queued (or asleep) from there, and the thread switched in
/// running. A charge written by another task is the preempting wakeup's (the switch
/// after it does not update the clock), whatever the gap. The thread's own last charge
/// is the switch's own (`put_prev_task` charges the thread leaving at the clock's update
/// for the switch), which the `sched_switch` record follows by the tracepoints' delay:
/// through the ftrace instances 15-20 µs on this project's machines (median 19 µs, 99th
/// percentile 60 µs, at most 117 µs; the JVM main thread's 179 preemptions in a run of
/// the schedstat test: 3.95 ms, the 3.96 ms its waiting fell short of schedstat by);
/// up to [`STALE_CLOCK_MAX_NS`]. A longer gap is the hypervisor's, steal before a switch
/// that charged nothing (the task clock did not advance), which the kernel counts
/// neither running nor waiting. Without the writer (traces before format 2.1) the gap's
/// length decides, wrong now and then either way (see [`STALE_CLOCK_NS`] and
/// [`STALE_CLOCK_MAX_NS`]).
pub fn stale_clock(by: ChargedBy, gap_ns: u64) -> bool {
    match by {
        ChargedBy::Other => true,
        ChargedBy::Itself => gap_ns <= STALE_CLOCK_MAX_NS,
        ChargedBy::Unknown => (STALE_CLOCK_NS + 1..=STALE_CLOCK_MAX_NS).contains(&gap_ns),
    }
}

/// What the timeline counted for one thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadStats {
    /// Time in each state.
    pub states: StateTotals,
    /// Times it was switched in (the kernel's timeslice count in `schedstat`).
    pub switches: u64,
    /// Times it was switched out while still runnable (preempted or yielded).
    pub preemptions: u64,
    /// Times the kernel moved it to another CPU (`Event::Migrate`: every move, also
    /// while it waited for a CPU or slept, as `se.nr_migrations` in
    /// `/proc/<pid>/task/<tid>/sched` counts them). In a trace without migration
    /// records (format minor below 2, or `/proc` samples) the timeline sets it to
    /// [`ThreadStats::cpu_changes`] when it finishes.
    pub migrations: u64,
    /// Times it was switched in on a CPU other than the one it last ran on (what
    /// migrations look like to a view of switches only; fewer than `migrations`: a
    /// thread moved and moved back before it ran counts 0 here).
    pub cpu_changes: u64,
    /// Times it was woken from a sleep.
    pub wakeups: u64,
    /// Sleeps during which the kernel moved it to another CPU with no wakeup under way:
    /// it was asleep on a run queue (EEVDF's delayed dequeue, see the module doc).
    pub queued_asleep: u64,
    /// Time from such a move to the wakeup that ended the sleep (or to its switch-in
    /// if that wakeup was not reported), ns. The thread was asleep (its state says so);
    /// the kernel's `schedstat` counts this time as waiting for a CPU.
    pub queued_asleep_ns: u64,
    /// When it was created, if that happened during the trace.
    pub born: Option<Time>,
    /// When it ended, if that happened during the trace.
    pub ended: Option<Time>,
    /// No record named it: its state for the whole trace is presumed, not seen.
    pub unseen: bool,
    /// Records that contradicted its state (lost kernel records).
    pub conflicts: u64,
    /// Agent records of this thread the agent dropped (`Event::Dropped`).
    pub dropped: u64,
    /// Steal its charges showed that could not be placed, ns: it lay before a call edge
    /// of the same stretch on a CPU, whose time had already been counted running (see
    /// [`Sched::running_ns`]). Its Running time is over the kernel's by this much.
    pub steal_unplaced_ns: u64,
}

/// What the thread's state was before `event`, when `event` is the first record that
/// names `tid`: the state to assume from the trace origin, and its CPU if known.
pub fn evidence(event: &Event, tid: Tid, source: Source) -> Option<(ThreadState, Option<Cpu>)> {
    use ThreadState::*;
    let agent = source == Source::Tracepoints;
    Some(match *event {
        Event::Switch { cpu, prev, .. } if prev == tid => (Running, Some(cpu)),
        Event::Switch { cpu, next, .. } if next == tid => (Runnable, Some(cpu)),
        Event::Waking { cpu, waker, .. } if waker == tid => (Running, Some(cpu)),
        Event::Waking { wakee, .. } if wakee == tid => (Sleeping, None),
        Event::Wakeup {
            wakee, new_task, ..
        } if wakee == tid => (if new_task { NotCreated } else { Sleeping }, None),
        Event::CpuTime { tid: t, .. } if t == tid => (Running, None),
        Event::NewTask { child, .. } if child == tid => (NotCreated, None),
        Event::NewTask { parent, .. } if parent == tid => (Running, None),
        Event::TaskExit { tid: t } if t == tid => (Running, None),
        Event::ProcSample {
            tid: t, cpu, state, ..
        } if t == tid => {
            let s = SwitchOut::from_proc_letter(state)?;
            (
                Sample {
                    time: Time(0),
                    state: s,
                    cpu,
                    run_ns: 0,
                    wait_ns: 0,
                }
                .presumed()
                .unwrap_or(Running),
                Some(cpu),
            )
        }
        Event::ThreadStart { tid: t }
        | Event::ThreadEnd { tid: t }
        | Event::Enter { tid: t, .. }
        | Event::Leave { tid: t, .. }
        | Event::FuncEnter { tid: t, .. }
        | Event::FuncLeave { tid: t, .. }
        | Event::MonitorContended { tid: t, .. }
        | Event::MonitorEntered { tid: t, .. }
        | Event::User { tid: t, .. }
        | Event::GcStart { tid: t, .. }
        | Event::GcEnd { tid: t, .. }
            if t == tid && agent =>
        {
            (Running, None)
        }
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Life {
    /// No record has named the thread yet: the open interval's state is presumed.
    Unseen,
    Alive,
    Ended,
}

/// The scheduling state machine of one thread.
#[derive(Debug)]
pub(crate) struct Sched {
    ix: ThreadIx,
    tid: Tid,
    life: Life,
    state: ThreadState,
    since: Time,
    cpu: Option<Cpu>,
    last_ran: Option<Cpu>,
    sample: Option<Sample>,
    /// A `sched_waking` for it came and its `sched_wakeup` did not yet: a wakeup is
    /// under way. Kept across a switch-out: a thread can be woken while it is still
    /// on its CPU about to block, and its wakeup then waits for it to leave.
    waking: bool,
    /// Asleep, and moved since this time with no wakeup under way: still on a run
    /// queue as far as the kernel's accounting goes.
    queued_since: Option<Time>,
    /// Running, and the wall time up to here is weighed against CPU-time charges: its
    /// switch-in or its last charge. `None` when not running, or running since before
    /// the trace (the first charge then sets it).
    charge_mark: Option<Time>,
    /// Who wrote the charge `charge_mark` is; `None` when it is the switch-in.
    charged: Option<ChargedBy>,
    /// Wall time on a CPU minus the CPU time charged for it and minus what was already
    /// made [`ThreadState::Stolen`], ns (see the module doc).
    debt: i64,
    /// The trace dates switches by the scheduler's clock itself (BPF recordings): the
    /// stale-clock rules below are not applied.
    clock_dated: bool,
    /// The latest instant its open interval's state was read for a call edge
    /// ([`Sched::running_ns`]): what was handed out as running up to there stays so
    /// (see [`Sched::charge`]).
    observed: Time,
    pub stats: ThreadStats,
}

impl Sched {
    /// A thread not yet named by any record, presumed asleep from `origin`.
    pub fn new(ix: ThreadIx, tid: Tid, origin: Time) -> Sched {
        Sched {
            ix,
            tid,
            life: Life::Unseen,
            state: ThreadState::Sleeping,
            since: origin,
            cpu: None,
            last_ran: None,
            sample: None,
            waking: false,
            queued_since: None,
            charge_mark: None,
            charged: None,
            debt: 0,
            clock_dated: false,
            observed: origin,
            stats: ThreadStats::default(),
        }
    }

    /// The trace's switches are dated by the scheduler's clock already (see
    /// [`Timeline::switches_dated_by_clock`](crate::Timeline::switches_dated_by_clock)):
    /// the thread's charges say nothing more about when a switch happened.
    pub fn set_clock_dated(&mut self) {
        self.clock_dated = true;
    }

    pub fn tid(&self) -> Tid {
        self.tid
    }
    pub fn state(&self) -> ThreadState {
        self.state
    }
    pub fn cpu(&self) -> Option<Cpu> {
        self.cpu
    }
    pub fn since(&self) -> Time {
        self.since
    }
    pub fn is_unseen(&self) -> bool {
        self.life == Life::Unseen
    }
    pub fn is_ended(&self) -> bool {
        self.life == Life::Ended
    }

    /// Sets what an unseen thread is presumed to do until its first record.
    pub fn presume(&mut self, state: ThreadState, cpu: Option<Cpu>) {
        if self.life == Life::Unseen {
            self.state = state;
            self.cpu = cpu;
        }
    }

    /// Applies the first record's evidence (see [`evidence`]); no-op once seen.
    pub fn seed(&mut self, state: ThreadState, cpu: Option<Cpu>) {
        if self.life == Life::Unseen {
            self.presume(state, cpu);
            self.life = Life::Alive;
        }
    }

    /// Cumulative time on a CPU up to `at`, read at a call edge: the call's CPU time,
    /// and its consumers' (the per-call join), take the open interval's state as it is
    /// up to `at`, so no steal is placed before `at` from now on ([`Sched::charge`]).
    pub fn running_ns(&mut self, at: Time) -> u64 {
        self.observed = self.observed.max(at);
        let open = if self.state == ThreadState::Running {
            at.since(self.since)
        } else {
            0
        };
        self.stats.states.get(ThreadState::Running) + open
    }

    /// Ends the open interval at `at` (if it is not empty), keeping its state.
    fn close(&mut self, at: Time, out: &mut impl Sink) {
        if at <= self.since {
            return;
        }
        out.interval(&Interval {
            thread: self.ix,
            tid: self.tid,
            begin: self.since,
            end: at,
            state: self.state,
            cpu: self.cpu,
        });
        self.stats.states.add(self.state, at.0 - self.since.0);
        self.since = at;
    }

    /// From `at` on, the thread is in `state` on `cpu`.
    fn become_(&mut self, at: Time, state: ThreadState, cpu: Option<Cpu>, out: &mut impl Sink) {
        if state == self.state && cpu == self.cpu {
            return;
        }
        self.close(at, out);
        self.state = state;
        self.cpu = cpu;
    }

    /// Writes out the open interval up to `at` and continues it from there.
    pub fn cut(&mut self, at: Time, out: &mut impl Sink) {
        self.close(at, out);
    }

    /// The thread left `cpu` at `at` with `prev_state`.
    pub fn switch_out(&mut self, at: Time, cpu: Cpu, prev_state: u64, out: &mut impl Sink) {
        if self.life == Life::Ended {
            return;
        }
        if self.state != ThreadState::Running {
            self.stats.conflicts += 1;
        } else if self.cpu.is_none() {
            self.cpu = Some(cpu);
        }
        let after = ThreadState::after_switch_out(SwitchOut::from_prev_state(prev_state));
        if let Some(mark) = self.charge_mark.take() {
            let tail = at.since(mark);
            let stale = !self.clock_dated && self.charged.is_some_and(|by| stale_clock(by, tail));
            if let Some(next) = after.filter(|_| stale && mark >= self.since) {
                // Switched out with the scheduler's clock last updated at that charge
                // (see `stale_clock`): the kernel counts the thread queued (preempted)
                // or off its books (asleep) from there. What it was charged beyond its
                // wall time (a negative debt: the clock had it running from a little
                // before its switch-in record) it runs on first, so that Running and
                // waiting stay the kernel's as for any other switch.
                let kept = tail.min(self.debt.min(0).unsigned_abs());
                self.debt += kept as i64;
                // Never before a call edge that took it as running (`running_ns`).
                let left = Time(mark.0 + kept).max(self.observed.min(at));
                self.become_(left, next, Some(cpu), out);
            } else {
                self.debt += tail as i64;
            }
        }
        self.last_ran = Some(cpu);
        self.queued_since = None;
        match after {
            None => self.end(at, out),
            Some(next) => {
                if next == ThreadState::Runnable {
                    self.stats.preemptions += 1;
                }
                self.become_(at, next, Some(cpu), out);
            }
        }
    }

    /// The thread starts running on `cpu` at `at`. Returns the CPU it migrated from.
    #[cfg(test)]
    pub fn switch_in(&mut self, at: Time, cpu: Cpu, out: &mut impl Sink) -> Option<Cpu> {
        self.switch_in_on_clock(at, None, cpu, out)
    }

    /// The thread starts running on `cpu` at `at`, a switch the kernel dated `clock`
    /// (the scheduler's clock update for it, shown by the thread leaving: see
    /// [`Sched::switch_clock`]). A thread that was waiting runs from that clock, never
    /// before its wait began: the kernel ends its wait (`sched_info.last_queued`, what
    /// schedstat's run_delay adds up) and starts charging it there, and the
    /// `sched_switch` record comes later (15-20 µs with the ftrace instances, more after
    /// a wakeup that asked the switch not to update the clock). Returns the CPU it
    /// migrated from.
    pub fn switch_in_on_clock(
        &mut self,
        at: Time,
        clock: Option<Time>,
        cpu: Cpu,
        out: &mut impl Sink,
    ) -> Option<Cpu> {
        if self.life == Life::Ended {
            return None;
        }
        if self.state == ThreadState::Running {
            self.stats.conflicts += 1;
        }
        let from = self.last_ran.filter(|&c| c != cpu);
        self.last_ran = Some(cpu);
        self.stats.switches += 1;
        if from.is_some() {
            self.stats.cpu_changes += 1;
        }
        self.waking = false;
        let at = match clock {
            // Never before a call edge that took it as waiting (`running_ns`).
            Some(c) if self.state == ThreadState::Runnable && c < at => {
                c.max(self.since).max(self.observed.min(at))
            }
            _ => at,
        };
        self.become_(at, ThreadState::Running, Some(cpu), out);
        self.charge_mark = Some(at);
        self.charged = None;
        // A wakeup the kernel did not report: the kernel counted it waiting up to now.
        self.end_queued_asleep(at, out);
        from
    }

    /// When the kernel's clock says the thread, running and about to be switched out by
    /// a record at `at`, left its CPU: its last charge, when [`stale_clock`] says the
    /// switch did not update the clock after it; `None` when not known (no charge since
    /// its switch-in, or the gap is steal). The thread switched in runs from there.
    pub fn switch_clock(&self, at: Time) -> Option<Time> {
        if self.clock_dated || self.life == Life::Ended || self.state != ThreadState::Running {
            return None;
        }
        let mark = self.charge_mark?;
        let by = self.charged?;
        (mark >= self.since && mark <= at && stale_clock(by, at.since(mark))).then_some(mark)
    }

    /// The kernel charged the running thread `ns` of CPU time at `at`, written `by`
    /// (`Event::CpuTime`): weighs the wall time since the last charge against it, and
    /// makes what is owed beyond [`STEAL_FLOOR_NS`] stolen (see the module doc).
    pub fn charge(&mut self, at: Time, ns: u64, by: ChargedBy, out: &mut impl Sink) {
        if self.life == Life::Ended || self.state != ThreadState::Running {
            // Not running as far as the trace knows (a record was lost): nothing to
            // weigh the charge against.
            return;
        }
        self.charged = Some(by);
        let Some(mark) = self.charge_mark.replace(at) else {
            // Running since before the trace: the stretch's start is not known.
            return;
        };
        let segment = at.since(mark);
        self.debt += segment as i64 - ns as i64;
        self.debt = self.debt.max(-STEAL_FLOOR_NS);
        if self.debt > STEAL_FLOOR_NS {
            let owed = self.debt as u64;
            // After the latest call edge of the stretch: the time before it was counted
            // running for the calls already (`running_ns`), and a steal put there would
            // make a call's states add up to more than its wall time (seen: a call
            // 1.36 ms over, with one charge per stretch, a design since withdrawn; with a
            // charge every tick the same, smaller: 16 µs over). What does not fit is taken to
            // be spread over the segment as evenly as anything (its share after the edge
            // goes there) and the rest is left unplaced.
            let edge = self.observed.max(self.since);
            let after_edge = at.since(edge);
            let stolen = if self.observed > self.since && owed > after_edge {
                let share =
                    (u128::from(owed) * u128::from(after_edge) / u128::from(segment.max(1))) as u64;
                let share = share.min(after_edge);
                self.stats.steal_unplaced_ns += owed - share;
                self.debt = 0;
                share
            } else {
                // Never before the open interval (written out already by a `cut`).
                let stolen = owed.min(at.since(self.since));
                self.debt -= stolen as i64;
                stolen
            };
            if stolen > 0 {
                self.close(Time(at.0 - stolen), out);
                self.state = ThreadState::Stolen;
                self.close(at, out);
                self.state = ThreadState::Running;
            }
        }
    }

    /// The thread was put on `target`'s run queue.
    pub fn wakeup(&mut self, at: Time, target: Cpu, out: &mut impl Sink) {
        if self.life == Life::Ended {
            return;
        }
        self.waking = false;
        match self.state {
            ThreadState::NotCreated => {
                self.stats.born = Some(at);
                self.become_(at, ThreadState::Runnable, Some(target), out);
            }
            s if s.is_asleep() => {
                self.stats.wakeups += 1;
                self.become_(at, ThreadState::Runnable, Some(target), out);
                self.end_queued_asleep(at, out);
            }
            ThreadState::Runnable if self.cpu.is_none() => self.cpu = Some(target),
            _ => {}
        }
    }

    /// A `sched_waking` for the thread: its wakeup is under way (a migration from now
    /// to the wakeup is the wakeup choosing a CPU).
    pub fn waking(&mut self) {
        if self.life != Life::Ended {
            self.waking = true;
        }
    }

    /// The kernel moved the thread to CPU `to` at `at`. Its state does not change; see
    /// the module doc.
    pub fn migrate(&mut self, at: Time, to: Cpu, out: &mut impl Sink) {
        if self.life == Life::Ended {
            return;
        }
        self.stats.migrations += 1;
        match self.state {
            ThreadState::Runnable => self.become_(at, ThreadState::Runnable, Some(to), out),
            // Only a thread that is not running can be moved: a record was lost.
            ThreadState::Running => self.stats.conflicts += 1,
            // Still on its run queue: from here the kernel counts it as waiting.
            s if s.is_asleep() && !self.waking && self.queued_since.is_none() => {
                self.queued_since = Some(at);
            }
            _ => {}
        }
    }

    /// Ends a span asleep on a run queue, if one is open, at `at`.
    fn end_queued_asleep(&mut self, at: Time, out: &mut impl Sink) {
        if let Some(begin) = self.queued_since.take() {
            self.stats.queued_asleep += 1;
            self.stats.queued_asleep_ns += at.since(begin);
            out.queued_asleep(&QueuedAsleep {
                at: At {
                    thread: self.ix,
                    tid: self.tid,
                    time: at,
                    cpu: self.cpu,
                },
                begin,
            });
        }
    }

    /// The thread was created at `at` (`task_newtask`).
    pub fn new_task(&mut self, at: Time, out: &mut impl Sink) {
        if self.life == Life::Ended || self.state != ThreadState::NotCreated {
            self.stats.conflicts += 1;
            return;
        }
        self.stats.born = Some(at);
        // Its cumulative /proc counters start from zero here.
        self.sample = Some(Sample {
            time: at,
            state: SwitchOut::Runnable,
            cpu: Cpu(0),
            run_ns: 0,
            wait_ns: 0,
        });
        self.become_(at, ThreadState::Runnable, None, out);
    }

    /// The thread began exiting (`sched_process_exit`, at the start of `do_exit`).
    /// With tracepoints its switch-out as dead (`X`/`Z`) ends it, not its first
    /// switch-out from here: a thread can be preempted or sleep in `D` while it
    /// exits and run again (7 of 26 threads of a ServiceDemo run, back up to 0.9 ms
    /// later; the JVM's main thread 5 ms later in another), so nothing changes here
    /// but that a record has named it. From `/proc` samples nothing more will come, so
    /// it ends here.
    pub fn task_exit(&mut self, at: Time, source: Source, out: &mut impl Sink) {
        match self.life {
            Life::Ended => {}
            _ if source == Source::Procfs => self.end(at, out),
            Life::Unseen => self.life = Life::Alive,
            Life::Alive => {}
        }
    }

    /// A `/proc` sample (see the `procfs` module).
    /// `round_before` is the time of the sampling round before this one, if any: a
    /// sampler that writes only samples that changed leaves the thread unchanged until
    /// then.
    pub fn sample(&mut self, now: Sample, round_before: Option<Time>, out: &mut impl Sink) {
        if self.life == Life::Ended {
            return;
        }
        let cpu = Some(now.cpu);
        if let Some(prev) = self.sample.replace(now) {
            // Up to the previous sample (or to where the span was already written out),
            // and on through the rounds that saw no change, the open state holds; the
            // rest, since the last round, is split.
            let from = self.since.max(prev.time);
            let window = round_before.map_or(from, |r| r.max(from)).min(now.time);
            let mut t = window;
            for (state, len) in split(window, &prev, &now) {
                if len > 0 {
                    self.become_(t, state, cpu, out);
                    t = Time(t.0 + len);
                }
            }
        }
        match now.presumed() {
            Some(state) => self.become_(now.time, state, cpu, out),
            None => self.end(now.time, out),
        }
    }

    /// The thread ended at `at`: it does not exist from then on.
    pub fn end(&mut self, at: Time, out: &mut impl Sink) {
        self.queued_since = None;
        self.charge_mark = None;
        self.waking = false;
        self.become_(at, ThreadState::NotCreated, None, out);
        self.life = Life::Ended;
        self.stats.ended = Some(at);
    }

    /// Closes the open interval at the trace's `end`.
    pub fn finish(&mut self, end: Time, out: &mut impl Sink) {
        if self.life == Life::Unseen {
            self.stats.unseen = true;
        }
        self.close(end, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ThreadState::*;

    /// Intervals, and spans asleep on a run queue (begin, end, CPU).
    #[derive(Default)]
    struct Intervals(
        Vec<(u64, u64, ThreadState, Option<u16>)>,
        Vec<(u64, u64, Option<u16>)>,
    );
    impl Sink for Intervals {
        fn interval(&mut self, iv: &Interval) {
            self.0
                .push((iv.begin.0, iv.end.0, iv.state, iv.cpu.map(|c| c.0)));
        }
        fn queued_asleep(&mut self, q: &QueuedAsleep) {
            self.1.push((q.begin.0, q.at.time.0, q.at.cpu.map(|c| c.0)));
        }
    }

    fn fresh() -> Sched {
        Sched::new(ThreadIx(0), Tid(7), Time(0))
    }

    #[test]
    fn preemption_wait_and_sleep() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Running, Some(Cpu(1)));
        s.switch_out(Time(100), Cpu(1), 0x100, &mut out); // preempted
        s.switch_in(Time(150), Cpu(1), &mut out);
        s.switch_out(Time(200), Cpu(1), 0x1, &mut out); // sleeps
        s.wakeup(Time(300), Cpu(0), &mut out);
        assert_eq!(s.switch_in(Time(320), Cpu(0), &mut out), Some(Cpu(1)));
        s.switch_out(Time(400), Cpu(0), 0x2, &mut out); // D
        s.finish(Time(500), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 100, Running, Some(1)),
                (100, 150, Runnable, Some(1)),
                (150, 200, Running, Some(1)),
                (200, 300, Sleeping, Some(1)),
                (300, 320, Runnable, Some(0)),
                (320, 400, Running, Some(0)),
                (400, 500, Uninterruptible, Some(0)),
            ]
        );
        let st = &s.stats;
        assert_eq!(
            (st.switches, st.preemptions, st.cpu_changes, st.wakeups),
            (2, 1, 1, 1)
        );
        // No migration record: the timeline fills `migrations` in when it finishes.
        assert_eq!(st.migrations, 0);
        assert_eq!(st.states.get(Running), 230);
        assert_eq!(s.running_ns(Time(500)), 230);
    }

    #[test]
    fn a_migration_moves_a_runnable_thread_and_leaves_a_sleeper_asleep() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Running, Some(Cpu(0)));
        s.switch_out(Time(10), Cpu(0), 0x100, &mut out); // preempted
        s.migrate(Time(20), Cpu(1), &mut out); // the load balancer pulls it
        s.switch_in(Time(30), Cpu(1), &mut out);
        s.switch_out(Time(40), Cpu(1), 0x1, &mut out); // blocks, stays queued
        s.migrate(Time(50), Cpu(0), &mut out); // moved asleep, no wakeup under way
        s.migrate(Time(55), Cpu(1), &mut out); // and back: the span began at 50
        s.wakeup(Time(70), Cpu(1), &mut out); // its timer
        s.switch_in(Time(75), Cpu(1), &mut out);
        s.switch_out(Time(80), Cpu(1), 0x1, &mut out);
        s.waking();
        s.migrate(Time(90), Cpu(0), &mut out); // the wakeup choosing a CPU
        s.wakeup(Time(91), Cpu(0), &mut out);
        s.finish(Time(100), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 10, Running, Some(0)),
                (10, 20, Runnable, Some(0)),
                (20, 30, Runnable, Some(1)),
                (30, 40, Running, Some(1)),
                (40, 70, Sleeping, Some(1)),
                (70, 75, Runnable, Some(1)),
                (75, 80, Running, Some(1)),
                (80, 91, Sleeping, Some(1)),
                (91, 100, Runnable, Some(0)),
            ]
        );
        let st = &s.stats;
        assert_eq!((st.migrations, st.cpu_changes), (4, 1));
        assert_eq!((st.queued_asleep, st.queued_asleep_ns), (1, 20));
        assert_eq!(out.1, vec![(50, 70, Some(1))]);
        assert_eq!(st.states.get(Sleeping), 41);
        assert_eq!(st.conflicts, 0);
    }

    #[test]
    fn a_wakeup_under_way_when_the_thread_blocks_is_no_queued_sleep() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Running, Some(Cpu(0)));
        s.waking(); // woken while still on its CPU, about to block
        s.switch_out(Time(10), Cpu(0), 0x1, &mut out);
        s.migrate(Time(12), Cpu(1), &mut out);
        s.wakeup(Time(13), Cpu(1), &mut out);
        // A move while asleep whose wakeup was not reported ends at the switch-in.
        s.switch_in(Time(20), Cpu(1), &mut out);
        s.switch_out(Time(30), Cpu(1), 0x2, &mut out);
        s.migrate(Time(40), Cpu(0), &mut out);
        s.switch_in(Time(60), Cpu(0), &mut out);
        s.finish(Time(70), &mut out);
        let st = &s.stats;
        assert_eq!((st.queued_asleep, st.queued_asleep_ns), (1, 20));
        assert_eq!(out.1, vec![(40, 60, Some(0))]);
        assert_eq!(st.conflicts, 0);
    }

    /// A preempted thread whose last charge comes well before its switch-out was
    /// switched out on a clock the scheduler did not update: queued from that charge, as
    /// the kernel counts it, and nothing owed. A short gap stays the steal debt's.
    #[test]
    fn a_preemption_on_a_stale_clock_is_queued_from_the_last_charge() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Sleeping, Some(Cpu(1)));
        s.wakeup(Time(0), Cpu(1), &mut out);
        s.switch_in(Time(1_000), Cpu(1), &mut out);
        // A wakeup from the other CPU charges it at 101 µs; the switch comes 35 µs later.
        s.charge(Time(101_000), 100_000, ChargedBy::Unknown, &mut out);
        s.switch_out(Time(136_000), Cpu(1), 0, &mut out);
        s.switch_in(Time(200_000), Cpu(1), &mut out);
        // Its own switch charged 3 µs before the record: the debt's, as before.
        s.charge(Time(297_000), 97_000, ChargedBy::Unknown, &mut out);
        s.switch_out(Time(300_000), Cpu(1), 0x100, &mut out);
        s.switch_in(Time(400_000), Cpu(1), &mut out);
        // A stretch with no charge at all: nothing tells when the clock was last
        // updated (a wakeup from another CPU charges the thread it preempts), so it ran
        // up to the record and owes that.
        s.switch_out(Time(450_000), Cpu(1), 0, &mut out);
        s.finish(Time(500_000), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 1_000, Runnable, Some(1)),
                (1_000, 101_000, Running, Some(1)),
                (101_000, 200_000, Runnable, Some(1)),
                (200_000, 300_000, Running, Some(1)),
                (300_000, 400_000, Runnable, Some(1)),
                (400_000, 450_000, Running, Some(1)),
                (450_000, 500_000, Runnable, Some(1)),
            ]
        );
        assert_eq!(s.debt, 53_000);
        assert_eq!(s.stats.preemptions, 3);
        // Charged 4 µs beyond its wall time (its switch-in recorded after the clock's
        // update): it runs those 4 µs on after the charge, then waits.
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Runnable, Some(Cpu(0)));
        s.switch_in(Time(10_000), Cpu(0), &mut out);
        s.charge(Time(60_000), 54_000, ChargedBy::Unknown, &mut out);
        s.switch_out(Time(90_000), Cpu(0), 0, &mut out);
        s.finish(Time(100_000), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 10_000, Runnable, Some(0)),
                (10_000, 64_000, Running, Some(0)),
                (64_000, 100_000, Runnable, Some(0)),
            ]
        );
        assert_eq!(s.debt, 0);
        // Too long a gap for the rescheduling interrupt: steal, the debt's.
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Runnable, Some(Cpu(0)));
        s.switch_in(Time(0), Cpu(0), &mut out);
        s.charge(Time(50_000), 50_000, ChargedBy::Unknown, &mut out);
        s.switch_out(Time(1_050_000), Cpu(0), 0, &mut out);
        assert_eq!(s.debt, 1_000_000);
        // Asleep: the kernel stopped its clock at the charge and counts no wait; the
        // thread sleeps from there and owes nothing.
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Running, Some(Cpu(0)));
        s.switch_in(Time(0), Cpu(0), &mut out);
        s.charge(Time(50_000), 50_000, ChargedBy::Unknown, &mut out);
        s.switch_out(Time(80_000), Cpu(0), 0x1, &mut out);
        assert_eq!(s.debt, 0);
        assert_eq!(s.since(), Time(50_000));
    }

    /// With the charges' writers in the trace (format 2.1), the writer decides, not the
    /// gap: a preempted thread last charged by another task (the preempting wakeup) is
    /// queued from that charge however short or long the gap (the rescheduling interrupt
    /// on a stopped virtual CPU); last charged by itself, the gap is steal.
    #[test]
    fn a_charge_by_another_task_is_where_a_preempted_thread_starts_waiting() {
        let run = |by, charge_at: u64, out_at: u64| {
            let mut s = fresh();
            let mut out = Intervals::default();
            s.seed(Runnable, Some(Cpu(0)));
            s.switch_in(Time(0), Cpu(0), &mut out);
            s.charge(Time(charge_at), charge_at, by, &mut out);
            s.switch_out(Time(out_at), Cpu(0), 0, &mut out);
            s.finish(Time(out_at + 1_000), &mut out);
            (out.0, s.debt)
        };
        for gap in [5_000, 35_000, 1_000_000] {
            let (states, debt) = run(ChargedBy::Other, 50_000, 50_000 + gap);
            assert_eq!(
                states,
                vec![
                    (0, 50_000, Running, Some(0)),
                    (50_000, 51_000 + gap, Runnable, Some(0)),
                ],
                "gap {gap}"
            );
            assert_eq!(debt, 0);
            let (states, debt) = run(ChargedBy::Itself, 50_000, 50_000 + gap);
            if gap <= STALE_CLOCK_MAX_NS {
                // The switch's own charge, the tracepoints' delay after it: queued from
                // the charge, as the kernel counts it.
                assert_eq!(states[0], (0, 50_000, Running, Some(0)), "gap {gap}");
                assert_eq!(debt, 0);
            } else {
                // Steal before a switch that charged nothing.
                assert_eq!(states[0], (0, 50_000 + gap, Running, Some(0)), "gap {gap}");
                assert_eq!(debt, gap as i64);
            }
        }
        // Asleep after another task's charge: off the kernel's books from that charge.
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Runnable, Some(Cpu(0)));
        s.switch_in(Time(0), Cpu(0), &mut out);
        s.charge(Time(50_000), 50_000, ChargedBy::Other, &mut out);
        s.switch_out(Time(80_000), Cpu(0), 0x1, &mut out);
        assert_eq!(s.debt, 0);
        assert_eq!((s.since(), s.state()), (Time(50_000), Sleeping));
    }

    /// Steal is never put before a call edge of its stretch (`running_ns` read there):
    /// the calls took that time as running. The recording that found it: a worker
    /// switched in at 1878.587 ms, its vCPU stopped, a call entered at 1882.130 ms, and
    /// the switch-out's one charge (231 µs for 3.925 ms) put 3.69 ms of steal across the
    /// enter; the call's states added up to 1.36 ms more than its wall time.
    #[test]
    fn steal_stays_after_the_latest_call_edge_of_its_stretch() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Sleeping, Some(Cpu(0)));
        s.wakeup(Time(0), Cpu(0), &mut out);
        s.switch_in(Time(0), Cpu(0), &mut out);
        // A call enters at 3.5 ms: 3.5 ms running as far as it knows.
        assert_eq!(s.running_ns(Time(3_500_000)), 3_500_000);
        // One charge for the stretch: 0.3 ms of CPU in 4 ms. 3.7 ms owed, 0.5 ms of
        // room after the edge: its share of the segment (3.7 * 0.5 / 4) goes there.
        s.charge(Time(4_000_000), 300_000, ChargedBy::Itself, &mut out);
        s.switch_out(Time(4_000_001), Cpu(0), 0x1, &mut out);
        s.finish(Time(5_000_000), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 3_537_500, Running, Some(0)),
                (3_537_500, 4_000_000, Stolen, Some(0)),
                // The switch's own charge: the thread left at it (`stale_clock`).
                (4_000_000, 5_000_000, Sleeping, Some(0)),
            ]
        );
        assert_eq!(s.stats.steal_unplaced_ns, 3_700_000 - 462_500);
        // Nothing carried to the next stretch.
        assert_eq!(s.debt, 0);
        // What fits after the edge goes at the end, as without one.
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Sleeping, Some(Cpu(0)));
        s.wakeup(Time(0), Cpu(0), &mut out);
        s.switch_in(Time(0), Cpu(0), &mut out);
        s.running_ns(Time(1_000_000));
        s.charge(Time(4_000_000), 3_700_000, ChargedBy::Itself, &mut out);
        s.finish(Time(5_000_000), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 3_700_000, Running, Some(0)),
                (3_700_000, 4_000_000, Stolen, Some(0)),
                (4_000_000, 5_000_000, Running, Some(0)),
            ]
        );
        assert_eq!(s.stats.steal_unplaced_ns, 0);
    }

    /// A switch-in dated by the scheduler's clock before a call edge read while the
    /// thread waited runs from that edge: the call took the time before it as waiting.
    #[test]
    fn a_clock_dated_switch_in_stays_after_a_call_edge_read_while_waiting() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Sleeping, Some(Cpu(0)));
        s.wakeup(Time(0), Cpu(0), &mut out);
        assert_eq!(s.running_ns(Time(50)), 0);
        s.switch_in_on_clock(Time(100), Some(Time(30)), Cpu(0), &mut out);
        s.finish(Time(200), &mut out);
        assert_eq!(
            out.0,
            vec![(0, 50, Runnable, Some(0)), (50, 200, Running, Some(0))]
        );
    }

    /// What the kernel's charges leave out of a Running stretch is stolen, at the end
    /// of the stretch between the two charges; jitter below the floor is not, and is
    /// carried over (here it adds up to a steal the next stretch pays).
    #[test]
    fn charges_short_of_the_wall_time_are_stolen() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Sleeping, Some(Cpu(1)));
        s.wakeup(Time(0), Cpu(1), &mut out);
        s.switch_in(Time(1_000), Cpu(1), &mut out);
        // A tick, all of it charged.
        s.charge(Time(4_001_000), 4_000_000, ChargedBy::Itself, &mut out);
        // The hypervisor took 1 ms of the next tick.
        s.charge(Time(8_001_000), 3_000_000, ChargedBy::Itself, &mut out);
        // The charge at the switch-out comes a few µs before its record, where the
        // kernel's clock stopped: 5 ns owed.
        s.charge(Time(9_000_995), 999_990, ChargedBy::Itself, &mut out);
        s.switch_out(Time(9_001_000), Cpu(1), 0x1, &mut out);
        // Jitter, 10 µs: with the 5 ns before, owed less than the floor.
        s.wakeup(Time(10_000_000), Cpu(0), &mut out);
        s.switch_in(Time(10_000_000), Cpu(0), &mut out);
        s.charge(Time(10_100_000), 90_000, ChargedBy::Itself, &mut out);
        // 11 µs more owed: 21.005 µs are stolen, at the end of that stretch.
        s.charge(Time(10_200_000), 89_000, ChargedBy::Itself, &mut out);
        s.finish(Time(10_300_000), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 1_000, Runnable, Some(1)),
                (1_000, 7_001_000, Running, Some(1)),
                (7_001_000, 8_001_000, Stolen, Some(1)),
                (8_001_000, 9_000_995, Running, Some(1)),
                (9_000_995, 10_000_000, Sleeping, Some(1)),
                (10_000_000, 10_178_995, Running, Some(0)),
                (10_178_995, 10_200_000, Stolen, Some(0)),
                (10_200_000, 10_300_000, Running, Some(0)),
            ]
        );
        assert_eq!(s.stats.states.get(Stolen), 1_021_005);
        // A thread running since before the trace: its first charge only sets the mark.
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Running, Some(Cpu(0)));
        s.charge(Time(500_000), 4_000_000, ChargedBy::Itself, &mut out);
        s.charge(Time(4_500_000), 3_000_000, ChargedBy::Itself, &mut out);
        s.finish(Time(5_000_000), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 3_500_000, Running, Some(0)),
                (3_500_000, 4_500_000, Stolen, Some(0)),
                (4_500_000, 5_000_000, Running, Some(0)),
            ]
        );
        // A charge of a thread the trace does not see running changes nothing.
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Sleeping, None);
        s.charge(Time(500_000), 1, ChargedBy::Itself, &mut out);
        s.finish(Time(1_000_000), &mut out);
        assert_eq!(out.0, vec![(0, 1_000_000, Sleeping, None)]);
    }

    #[test]
    fn a_yield_waits_for_the_cpu() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Running, Some(Cpu(0)));
        s.switch_out(Time(10), Cpu(0), 0, &mut out);
        s.finish(Time(20), &mut out);
        assert_eq!(
            out.0,
            vec![(0, 10, Running, Some(0)), (10, 20, Runnable, Some(0))]
        );
        assert_eq!(s.stats.preemptions, 1);
    }

    #[test]
    fn wakeup_of_a_running_thread_changes_nothing() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Running, Some(Cpu(0)));
        s.wakeup(Time(5), Cpu(1), &mut out);
        s.finish(Time(9), &mut out);
        assert_eq!(out.0, vec![(0, 9, Running, Some(0))]);
        assert_eq!(s.stats.wakeups, 0);
    }

    #[test]
    fn birth_and_death() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(NotCreated, None);
        s.new_task(Time(10), &mut out);
        s.wakeup(Time(12), Cpu(1), &mut out); // wakeup_new names the CPU, no split
        s.switch_in(Time(20), Cpu(1), &mut out);
        s.task_exit(Time(30), Source::Tracepoints, &mut out);
        s.switch_out(Time(35), Cpu(1), 0x10, &mut out); // dead (X)
        s.switch_in(Time(40), Cpu(1), &mut out); // tid reuse or noise: ignored
        s.finish(Time(50), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 10, NotCreated, None),
                (10, 20, Runnable, Some(1)),
                (20, 35, Running, Some(1)),
                (35, 50, NotCreated, None)
            ]
        );
        assert_eq!(
            (s.stats.born, s.stats.ended),
            (Some(Time(10)), Some(Time(35)))
        );
        assert_eq!(s.stats.migrations, 0);
    }

    #[test]
    fn an_exiting_thread_preempted_or_asleep_runs_again_until_its_dead_switch_out() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Running, Some(Cpu(0)));
        s.task_exit(Time(10), Source::Tracepoints, &mut out);
        s.switch_out(Time(12), Cpu(0), 0x100, &mut out); // preempted (R+)
        s.switch_in(Time(20), Cpu(1), &mut out);
        s.switch_out(Time(22), Cpu(1), 0x2, &mut out); // D, in do_exit
        s.wakeup(Time(30), Cpu(1), &mut out);
        s.switch_in(Time(31), Cpu(1), &mut out);
        s.switch_out(Time(33), Cpu(1), 0x20, &mut out); // zombie (Z): the end
        s.finish(Time(40), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 12, Running, Some(0)),
                (12, 20, Runnable, Some(0)),
                (20, 22, Running, Some(1)),
                (22, 30, Uninterruptible, Some(1)),
                (30, 31, Runnable, Some(1)),
                (31, 33, Running, Some(1)),
                (33, 40, NotCreated, None)
            ]
        );
        assert_eq!(s.stats.ended, Some(Time(33)));
    }

    #[test]
    fn a_dead_prev_state_ends_the_thread() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Running, Some(Cpu(0)));
        s.switch_out(Time(10), Cpu(0), 0x10, &mut out);
        s.finish(Time(20), &mut out);
        assert_eq!(
            out.0,
            vec![(0, 10, Running, Some(0)), (10, 20, NotCreated, None)]
        );
    }

    #[test]
    fn conflicts_are_counted_and_applied() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.seed(Sleeping, None);
        s.switch_out(Time(10), Cpu(0), 0x1, &mut out); // was not running: a lost switch-in
        s.switch_in(Time(20), Cpu(0), &mut out);
        s.switch_in(Time(30), Cpu(0), &mut out); // already running: a lost switch-out
        s.finish(Time(40), &mut out);
        assert_eq!(s.stats.conflicts, 2);
        assert_eq!(
            out.0,
            vec![
                (0, 10, Sleeping, None),
                (10, 20, Sleeping, Some(0)),
                (20, 40, Running, Some(0))
            ]
        );
    }

    #[test]
    fn cut_splits_without_changing_totals() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.presume(Sleeping, None);
        s.cut(Time(50), &mut out);
        s.seed(Sleeping, None);
        s.wakeup(Time(80), Cpu(0), &mut out);
        s.finish(Time(100), &mut out);
        assert_eq!(
            out.0,
            vec![
                (0, 50, Sleeping, None),
                (50, 80, Sleeping, None),
                (80, 100, Runnable, Some(0))
            ]
        );
        assert_eq!(s.stats.states.get(Sleeping), 80);
    }

    #[test]
    fn an_unseen_thread_is_presumed_asleep() {
        let mut s = fresh();
        let mut out = Intervals::default();
        s.finish(Time(100), &mut out);
        assert_eq!(out.0, vec![(0, 100, Sleeping, None)]);
        assert!(s.stats.unseen);
    }

    #[test]
    fn proc_samples_split_by_schedstat() {
        let mut s = fresh();
        let mut out = Intervals::default();
        let sample = |t: u64, l: u8, run: u64, wait: u64| Sample {
            time: Time(t),
            state: SwitchOut::from_proc_letter(l).unwrap(),
            cpu: Cpu(1),
            run_ns: run,
            wait_ns: wait,
        };
        s.seed(Sleeping, Some(Cpu(1)));
        s.sample(sample(100, b'S', 1000, 500), None, &mut out);
        s.sample(sample(200, b'R', 1030, 510), Some(Time(100)), &mut out);
        s.sample(sample(300, b'S', 1050, 510), Some(Time(200)), &mut out);
        s.sample(sample(400, b'Z', 1050, 510), Some(Time(300)), &mut out);
        s.finish(Time(500), &mut out);
        assert_eq!(
            out.0,
            vec![
                // Before the first sample its state holds; then 60 asleep, 10 waiting,
                // 30 running up to the sample seen R.
                (0, 160, Sleeping, Some(1)),
                (160, 170, Runnable, Some(1)),
                // Seen R: running holds into the next span, which ran 20 more.
                (170, 220, Running, Some(1)),
                (220, 400, Sleeping, Some(1)),
                (400, 500, NotCreated, None),
            ]
        );
        assert_eq!(s.stats.states.get(Running), 50);
        assert_eq!(s.stats.states.get(Runnable), 10);
    }

    #[test]
    fn evidence_of_first_records() {
        let tid = Tid(7);
        let sw = |prev, next| Event::Switch {
            cpu: Cpu(3),
            prev: Tid(prev),
            prev_state: 1,
            next: Tid(next),
            charge: None,
        };
        assert_eq!(
            evidence(&sw(7, 0), tid, Source::Tracepoints),
            Some((Running, Some(Cpu(3))))
        );
        assert_eq!(
            evidence(&sw(0, 7), tid, Source::Tracepoints),
            Some((Runnable, Some(Cpu(3))))
        );
        assert_eq!(evidence(&sw(1, 2), tid, Source::Tracepoints), None);
        let wake = Event::Wakeup {
            target: Cpu(0),
            wakee: tid,
            new_task: false,
            waking: None,
        };
        assert_eq!(
            evidence(&wake, tid, Source::Tracepoints),
            Some((Sleeping, None))
        );
        let enter = Event::Enter { tid, method: 1 };
        assert_eq!(
            evidence(&enter, tid, Source::Tracepoints),
            Some((Running, None))
        );
        assert_eq!(evidence(&enter, tid, Source::Procfs), None);
        let sample = Event::ProcSample {
            tid,
            cpu: Cpu(1),
            state: b'D',
            run_ns: 0,
            wait_ns: 0,
        };
        assert_eq!(
            evidence(&sample, tid, Source::Procfs),
            Some((Uninterruptible, Some(Cpu(1))))
        );
        assert_eq!(
            evidence(&sample, tid, Source::Tracepoints),
            Some((Uninterruptible, Some(Cpu(1))))
        );
        let born = Event::NewTask {
            parent: Tid(1),
            child: tid,
            pid: sonda_trace::Pid(1),
            comm: String::new(),
        };
        assert_eq!(
            evidence(&born, tid, Source::Tracepoints),
            Some((NotCreated, None))
        );
        assert_eq!(
            evidence(&born, Tid(1), Source::Tracepoints),
            Some((Running, None))
        );
    }
}
