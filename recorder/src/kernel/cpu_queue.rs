//! One CPU's tracepoint events, held until a horizon and released in order, with the
//! switches the tracepoint did not report put back in.
//!
//! The kernel reports a tracepoint in the context of the task that is running, and
//! some kernels keep quiet while some tasks run: on the machines this project runs on,
//! nothing is ever reported while a thread of the sandbox's own supervisor runs. A
//! switch *from* such a task is then missing, and the thread it switched to would seem
//! to run without having been switched in (a lost page leaves the same hole).
//!
//! Every ftrace event names the task running when it was written (`common_pid`), so
//! the CPU's own stream says when the task on the CPU changed without a switch:
//!
//! ```text
//!  reported   switch A→S ·········· (S runs, silent; S→Y not reported) ··· Y: runtime 40 µs, t=100 µs
//!  released   switch A→S,  switch S→Y at t=60 µs (recovered),  Y: runtime …
//! ```
//!
//! The recovered switch is dated by the first CPU-time charge of the arriving task on
//! this CPU (`sched_stat_runtime`, written at the next tick or before the task leaves
//! the CPU): less its wall time on the CPU when the source gives it (the BPF programs,
//! from `sched_info.last_arrival`), else less its runtime, the stretch since the
//! switch-in in the task clock, which leaves out stolen time (the switch-in then comes
//! out late by the steal); never before the CPU's previous traced-task record; without
//! such a charge among the records read so far, at its first event. Its `prev_state` is 0:
//! the silent task's state is unknown (it is never a followed thread, whose own records
//! are reported).
//!
//! This replaces a second witness the collector used to open, perf's context-switch
//! records on every CPU: they told the same, a microsecond after each switch, but cost
//! the traced machine as much as all the tracepoints together (about 1 µs per switch
//! in the kernel on this project's machines, `docs/overhead.md`), for a few recoveries
//! a second.

use std::collections::VecDeque;

use sonda_trace::{CarriedWaking, ChargedBy, Cpu, Event, Record, SwitchCharge, Time};

use super::resched_clock::{ClockNote, CpuNotes};
use super::KernelStats;

/// A record with the task that was running when the kernel wrote it.
#[derive(Clone, Debug, PartialEq)]
struct Held {
    record: Record,
    /// `common_pid` of the event; [`LOSS`] for a loss.
    current: u32,
    /// `common_flags` of the event (see `sched_events::flags`), 0 when not known.
    flags: u8,
}

/// A record of the unfiltered stream, and for a CPU-time charge the wall time its task
/// had been on its CPU when it was written, where the source knows it (see
/// [`CpuQueue::unfiltered_event`]).
#[derive(Clone, Debug, PartialEq)]
struct Side {
    record: Record,
    on_cpu_ns: Option<u64>,
    /// As [`Held::flags`].
    flags: u8,
}

impl Side {
    /// A charge of `task`: (its time, the switch-in it implies).
    fn charge_of(&self, task: u32) -> Option<(u64, u64)> {
        charge_of(&self.record, task, self.on_cpu_ns)
    }
}

/// A CPU-time charge of `task` in `r`: (its time, the switch-in it implies, see
/// [`switch_in_of_charge`]).
fn charge_of(r: &Record, task: u32, on_cpu_ns: Option<u64>) -> Option<(u64, u64)> {
    match r.event {
        Event::CpuTime { tid, ns, .. } if tid.0 == task => {
            let t = r.time.0;
            Some((t, switch_in_of_charge(t, ns, on_cpu_ns)))
        }
        _ => None,
    }
}

/// The switch-in a charge at `time` of `ns` implies: its time less the task's wall time
/// on the CPU (`on_cpu_ns`) when known, else less the CPU time charged, which leaves
/// out steal (the switch-in then comes out late by what was stolen since). Also how
/// `bpf_unseen` dates a switch-in it did not see.
pub(super) fn switch_in_of_charge(time: u64, ns: u64, on_cpu_ns: Option<u64>) -> u64 {
    time.saturating_sub(on_cpu_ns.unwrap_or(ns))
}

/// `current` of a loss record (no task wrote it).
const LOSS: u32 = u32::MAX;

/// One CPU.
#[derive(Default)]
pub struct CpuQueue {
    cpu: u16,
    /// The filtered stream's events and their losses, in the order of the CPU's buffer
    /// (time order).
    held: VecDeque<Held>,
    /// The unfiltered stream's events, in time order (see
    /// [`CpuQueue::unfiltered_event`]).
    unfiltered: VecDeque<Side>,
    /// The task on the CPU according to the records released so far; `None` when not
    /// known (at the start and after a loss).
    running: Option<u32>,
    /// Time of the last record released from the filtered stream.
    last: u64,
    /// The CPU-time charges released from the unfiltered stream since the last
    /// filtered record, as (task, the switch-in each implies, its time). A charge goes
    /// out before a later filtered record, so when that record reveals a switch-in the
    /// kernel did not report, the charge that dates it is no longer in `unfiltered`.
    released_charges: Vec<(u32, u64, u64)>,
    /// What the records released say about the run-queue clocks (`resched_clock`).
    notes: CpuNotes,
}

impl CpuQueue {
    /// An empty queue for `cpu`.
    pub fn new(cpu: u16) -> CpuQueue {
        CpuQueue {
            cpu,
            ..CpuQueue::default()
        }
    }

    /// The next tracepoint event of this CPU (in the order of its buffer), written while
    /// `current` was running.
    pub fn event(&mut self, record: Record, current: u32) {
        self.event_in(record, current, 0);
    }

    /// [`CpuQueue::event`] with the context the kernel wrote it in (`common_flags`).
    pub fn event_in(&mut self, record: Record, current: u32, flags: u8) {
        self.held.push_back(Held {
            record,
            current,
            flags,
        });
    }

    /// The next event of this CPU from the unfiltered stream (in that stream's order,
    /// which is time order). Released in time order among the others, it takes part in
    /// nothing but the dating of a recovered switch (a CPU-time charge): its running
    /// task may be one the filtered stream leaves out. `on_cpu_ns`: for a charge, the
    /// wall time its task had been on its CPU, when the source knows it (the BPF
    /// programs read it from the kernel's `sched_info.last_arrival`): it dates the
    /// switch-in exactly, where the charge's own CPU time falls short by any steal.
    pub fn unfiltered_event(&mut self, record: Record, on_cpu_ns: Option<u64>) {
        self.unfiltered_event_in(record, on_cpu_ns, 0);
    }

    /// [`CpuQueue::unfiltered_event`] with the context the kernel wrote it in.
    pub fn unfiltered_event_in(&mut self, record: Record, on_cpu_ns: Option<u64>, flags: u8) {
        self.unfiltered.push_back(Side {
            record,
            on_cpu_ns,
            flags,
        });
    }

    /// `count` events of this CPU's buffer lost, noticed at `time` (0 when the count is
    /// not known; the loss still makes the running task unknown).
    pub fn lost(&mut self, time: u64, count: u64) {
        let record = Record {
            time: Time(time),
            event: Event::KernelLost {
                cpu: Cpu(self.cpu),
                count,
            },
        };
        self.held.push_back(Held {
            record,
            current: LOSS,
            flags: 0,
        });
    }

    /// Appends to `out`, in time order, everything held up to `horizon` (inclusive),
    /// with the switches recovered before the records that reveal them; counts into
    /// `stats`. A recovered switch dated by a charge already released comes after
    /// that charge in `out` (the recorder sorts each batch). Records that `foreign`
    /// says are another program's are left out of `out`, after they played their part
    /// (a charge still dates a recovered switch, any record still tells the running
    /// task).
    pub fn release(
        &mut self,
        horizon: u64,
        out: &mut Vec<Record>,
        stats: &mut KernelStats,
        foreign: impl FnMut(&Record) -> bool,
    ) {
        self.release_noting(horizon, out, stats, foreign, None);
    }

    /// [`CpuQueue::release`], appending to `notes` what the records say about the
    /// run-queue clocks (`resched_clock`), left-out records' too.
    pub fn release_noting(
        &mut self,
        horizon: u64,
        out: &mut Vec<Record>,
        stats: &mut KernelStats,
        mut foreign: impl FnMut(&Record) -> bool,
        mut notes: Option<&mut Vec<ClockNote>>,
    ) {
        // Records before this are other queues': never folded into this one's switches.
        let start = out.len();
        loop {
            let filtered = self.held.front().map(|h| h.record.time.0);
            let unfiltered = self.unfiltered.front().map(|s| s.record.time.0);
            // Ties go to the filtered stream.
            let take_unfiltered = match (filtered, unfiltered) {
                (_, None) => false,
                (None, Some(u)) => u <= horizon,
                (Some(f), Some(u)) => u < f && u <= horizon,
            };
            if take_unfiltered {
                let Some(side) = self.unfiltered.pop_front() else {
                    return;
                };
                if let Event::CpuTime { tid, ns, .. } = side.record.event {
                    let t = side.record.time.0;
                    let at = switch_in_of_charge(t, ns, side.on_cpu_ns);
                    self.released_charges.push((tid.0, at, t));
                }
                if let Some(notes) = notes.as_deref_mut() {
                    self.notes.see(self.cpu, &side.record, side.flags, notes);
                }
                let record = side.record;
                if pass(record, &mut foreign, out, stats) {
                    stats.samples += 1;
                }
                continue;
            }
            if filtered.is_none_or(|f| f > horizon) {
                return;
            }
            let Some(Held {
                record,
                current,
                flags,
            }) = self.held.pop_front()
            else {
                return;
            };
            let time = record.time.0;
            if current == LOSS {
                if let Event::KernelLost { count, .. } = record.event {
                    stats.lost += count;
                }
                self.running = None;
            } else {
                if let Some(running) = self.running.filter(|r| *r != current) {
                    let at = self.switch_in_time(current, &record);
                    stats.repaired += 1;
                    let recovered = Record {
                        time: Time(at),
                        event: Event::Switch {
                            cpu: Cpu(self.cpu),
                            prev: sonda_trace::Tid(running),
                            prev_state: 0,
                            next: sonda_trace::Tid(current),
                            charge: None,
                        },
                    };
                    if let Some(notes) = notes.as_deref_mut() {
                        // Dated by a charge, not by a clock: left alone.
                        notes.push(ClockNote::Unknown {
                            time: at,
                            cpu: self.cpu,
                        });
                    }
                    pass(recovered, &mut foreign, out, stats);
                }
                self.running = Some(match record.event {
                    Event::Switch { next, .. } => next.0,
                    _ => current,
                });
            }
            self.last = self.last.max(time);
            self.released_charges.clear();
            if let Some(notes) = notes.as_deref_mut() {
                self.notes.see(self.cpu, &record, flags, notes);
            }
            if current == LOSS {
                out.push(record);
                continue;
            }
            if foreign(&record) {
                stats.foreign_skipped += 1;
                continue;
            }
            let mut record = record;
            fold_charge(out, start, &mut record);
            fold_waking(out, start, &mut record);
            out.push(record);
            stats.samples += 1;
        }
    }

    /// When `task`, found running by `first` (already taken off the queue), was
    /// switched in: by its first CPU-time charge on this CPU in its stretch (up to its
    /// switch-out or the next record of another task, among the records read so far),
    /// else at `first`; never before the CPU's previous filtered record.
    fn switch_in_time(&self, task: u32, first: &Record) -> u64 {
        // The first charge of the stretch: (its time, the switch-in it implies).
        let charge = |r: &Record| charge_of(r, task, None);
        // The stretch ends at the switch-out (whose charge comes before it), or at the
        // first record of another task.
        let mut end = first.time.0;
        let mut found = charge(first);
        if !matches!(first.event, Event::Switch { .. }) {
            for h in &self.held {
                end = h.record.time.0;
                if h.current != task {
                    break;
                }
                found = found.or_else(|| charge(&h.record));
                if matches!(h.record.event, Event::Switch { .. }) {
                    break;
                }
            }
        }
        // Unfiltered records older than `first` went out before it (their charges are
        // in `released_charges`).
        let released = self
            .released_charges
            .iter()
            .find(|c| c.0 == task)
            .map(|&(_, at, time)| (time, at));
        let unfiltered = self
            .unfiltered
            .iter()
            .take_while(|s| s.record.time.0 <= end)
            .find_map(|s| s.charge_of(task));
        // The earliest; a tie goes to the filtered stream's.
        let earliest = [found, released, unfiltered]
            .into_iter()
            .flatten()
            .min_by_key(|c| c.0);
        let at = earliest.map_or(first.time.0, |(_, at)| at);
        // A record read late may be older than the CPU's previous one: never date
        // before `first` itself then.
        at.clamp(self.last.min(first.time.0), first.time.0)
    }

    /// How many records are held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.held.len() + self.unfiltered.len()
    }
}

/// The longest a switch-out's own CPU-time charge comes before its switch, or a waking
/// before its wakeup, and is still carried in it (ns): the scheduler charges the task
/// leaving a µs or so before `sched_switch`, and `sched_waking` comes a µs or so before
/// `sched_wakeup`. A charge further back (a tick's, when the switch-out had nothing
/// left to charge) stays a record of its own: the trace's writer could have to move a
/// carried charge later, up to the record written before the switch (another CPU's),
/// and the timeline weighs a charge's time against the wall time on the CPU.
const FOLD_WITHIN_NS: u64 = 10_000;

/// Takes the charge that went out just before `record` into it when `record` is the
/// switch-out of the task that charge was for, written by itself (its switch-out's own
/// charge): one record instead of two through every later stage ([`Event::Switch`]'s
/// `charge`). Only a charge this queue put last into `out` (at or after `start`).
fn fold_charge(out: &mut Vec<Record>, start: usize, record: &mut Record) {
    let Event::Switch {
        prev,
        charge: charge @ None,
        ..
    } = &mut record.event
    else {
        return;
    };
    if out.len() <= start {
        return;
    }
    let Some(
        last @ Record {
            event:
                Event::CpuTime {
                    tid,
                    ns,
                    by: ChargedBy::Itself,
                },
            ..
        },
    ) = out.last()
    else {
        return;
    };
    if *tid != *prev {
        return;
    }
    let Some(before_ns) = carried_gap(record.time, last.time) else {
        return;
    };
    *charge = Some(SwitchCharge { ns: *ns, before_ns });
    out.pop();
}

/// How long before `later` the record at `earlier` came, when it is close enough to be
/// carried in the later one ([`FOLD_WITHIN_NS`]).
fn carried_gap(later: Time, earlier: Time) -> Option<u32> {
    let before = later.0.checked_sub(earlier.0)?;
    (before <= FOLD_WITHIN_NS).then_some(before as u32)
}

/// The most CPU-time charges that may stand between a waking and its wakeup for the
/// two to be folded: a wakeup onto this CPU charges the waker as the woken thread is
/// enqueued, one onto another CPU that CPU's running task (`update_curr`), both between
/// the two tracepoints.
const CHARGES_BETWEEN: usize = 2;

/// Takes the waking of `record`'s thread into `record` when `record` is its wakeup, the
/// waking went out on this CPU at most [`FOLD_WITHIN_NS`] before, and nothing but
/// CPU-time charges ([`CHARGES_BETWEEN`] at most) went out between: a wakeup the waker
/// did itself (both tracepoints fire in `try_to_wake_up`, on the waker's CPU), one
/// record instead of two through every later stage ([`Event::Wakeup`]'s `waking`). A
/// wakeup that picks another CPU has its migration between the two, and one the kernel
/// hands to the target CPU (`ttwu_queue_wakelist`) is written there later: both stay
/// two records. With charges between, the waking reads back after them (the writer
/// keeps the time order: `Record::unfold`'s floor), up to a few µs late; nothing but the
/// wake edge's start (`PendingWake::sent` in the timeline) reads its time. Only records
/// this queue put into `out` (at or after `start`).
fn fold_waking(out: &mut Vec<Record>, start: usize, record: &mut Record) {
    let Event::Wakeup {
        wakee,
        waking: waking @ None,
        ..
    } = &mut record.event
    else {
        return;
    };
    let mut i = out.len();
    while i > start && out.len() - i <= CHARGES_BETWEEN {
        i -= 1;
        match out[i].event {
            Event::CpuTime { .. } => continue,
            Event::Waking {
                cpu,
                waker,
                wakee: woken,
            } if woken == *wakee => {
                let Some(before_ns) = carried_gap(record.time, out[i].time) else {
                    return;
                };
                *waking = Some(CarriedWaking {
                    cpu,
                    waker,
                    before_ns,
                });
                out.remove(i);
                return;
            }
            _ => return,
        }
    }
}

/// Appends `record` to `out` unless `foreign` says it is another program's (then counted
/// as left out); says whether it went out.
fn pass(
    record: Record,
    foreign: &mut impl FnMut(&Record) -> bool,
    out: &mut Vec<Record>,
    stats: &mut KernelStats,
) -> bool {
    if foreign(&record) {
        stats.foreign_skipped += 1;
        return false;
    }
    out.push(record);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::ChargedBy;
    use sonda_trace::Tid;

    fn switch(time: u64, prev: u32, next: u32) -> (Record, u32) {
        let r = Record {
            time: Time(time),
            event: Event::Switch {
                cpu: Cpu(1),
                prev: Tid(prev),
                prev_state: 1,
                next: Tid(next),
                charge: None,
            },
        };
        (r, prev)
    }

    fn runtime(time: u64, tid: u32, ns: u64) -> (Record, u32) {
        let r = Record {
            time: Time(time),
            event: Event::CpuTime {
                tid: Tid(tid),
                ns,
                by: ChargedBy::Itself,
            },
        };
        (r, tid)
    }

    fn waking(time: u64, waker: u32, wakee: u32) -> (Record, u32) {
        let r = Record {
            time: Time(time),
            event: Event::Waking {
                cpu: Cpu(1),
                waker: Tid(waker),
                wakee: Tid(wakee),
            },
        };
        (r, waker)
    }

    /// A switch recovered on CPU 1 (its `prev_state` is 0: the silent task's state is
    /// not known).
    fn recovered(time: u64, prev: u32, next: u32) -> Record {
        super::super::test_records::preemption(time, prev, next)
    }

    /// 7 → 75 reported; 75 is silent; 9 then wakes 8, is charged 40 at 100 (switched in
    /// at 60) and leaves.
    fn silent_task() -> [(Record, u32); 4] {
        [
            switch(20, 7, 75),
            waking(80, 9, 8),
            runtime(100, 9, 40),
            switch(100, 9, 0),
        ]
    }

    fn feed(q: &mut CpuQueue, items: &[(Record, u32)]) {
        for (r, current) in items {
            q.event(r.clone(), *current);
        }
    }

    fn release(q: &mut CpuQueue, horizon: u64) -> (Vec<Record>, KernelStats) {
        release_leaving_out(q, horizon, |_| false)
    }

    fn release_leaving_out(
        q: &mut CpuQueue,
        horizon: u64,
        foreign: impl Fn(&Record) -> bool,
    ) -> (Vec<Record>, KernelStats) {
        let mut out = Vec::new();
        let mut stats = KernelStats::default();
        q.release(horizon, &mut out, &mut stats, foreign);
        (as_read(out), stats)
    }

    /// The records as a trace reads them: a switch's carried charge before it.
    fn as_read(out: Vec<Record>) -> Vec<Record> {
        let mut read = Vec::new();
        for r in out {
            let (charge, switch) = r.unfold(0);
            read.extend(charge);
            read.push(switch);
        }
        read
    }

    /// Releases everything, as the queue hands it on (charges carried in switches),
    /// the charges fed as the unfiltered stream (as the BPF source does).
    fn release_folded(q: &mut CpuQueue, items: &[(Record, u32)]) -> Vec<Record> {
        for (r, current) in items {
            match r.event {
                Event::CpuTime { .. } => q.unfiltered_event(r.clone(), None),
                _ => q.event(r.clone(), *current),
            }
        }
        let mut out = Vec::new();
        q.release(u64::MAX, &mut out, &mut KernelStats::default(), |_| false);
        out
    }

    fn carrying(time: u64, prev: u32, next: u32, ns: u64, before_ns: u32) -> Record {
        let (mut r, _) = switch(time, prev, next);
        if let Event::Switch { charge, .. } = &mut r.event {
            *charge = Some(SwitchCharge { ns, before_ns });
        }
        r
    }

    /// A switch-out's own charge, just before it on its CPU, goes out inside it; a
    /// charge of another thread, or written by another task, or with a record between,
    /// or too far back (a tick's) stays a record of its own.
    #[test]
    fn a_switch_outs_own_charge_goes_out_inside_the_switch() {
        let mut q = CpuQueue::new(1);
        let out = release_folded(
            &mut q,
            &[
                switch(10, 1, 2),
                runtime(1_000, 2, 900),
                switch(1_002, 2, 3),
            ],
        );
        assert_eq!(out, vec![switch(10, 1, 2).0, carrying(1_002, 2, 3, 900, 2)]);

        // Written by another task from another CPU; as a thread never charges itself
        // while another runs, its `current` here is the thread's.
        let by_other = Record {
            time: Time(1_000),
            event: Event::CpuTime {
                tid: Tid(2),
                ns: 900,
                by: ChargedBy::Other,
            },
        };
        let not_folded = [
            vec![switch(10, 1, 2), (by_other, 2), switch(1_002, 2, 3)],
            vec![
                switch(10, 1, 2),
                runtime(1_000, 5, 900),
                switch(1_002, 2, 3),
            ],
            vec![
                switch(10, 1, 2),
                runtime(1_000, 2, 900),
                waking(1_001, 2, 7),
                switch(1_002, 2, 3),
            ],
            vec![
                switch(10, 1, 2),
                runtime(1_000, 2, 900),
                switch(1_000 + FOLD_WITHIN_NS + 1, 2, 3),
            ],
        ];
        for items in not_folded {
            let mut q = CpuQueue::new(1);
            let want: Vec<Record> = items.iter().map(|(r, _)| r.clone()).collect();
            assert_eq!(release_folded(&mut q, &items), want);
        }
    }

    fn wakeup(time: u64, waker: u32, wakee: u32) -> (Record, u32) {
        let r = Record {
            time: Time(time),
            event: Event::Wakeup {
                target: Cpu(0),
                wakee: Tid(wakee),
                new_task: false,
                waking: None,
            },
        };
        (r, waker)
    }

    fn woke(time: u64, waker: u32, wakee: u32, before_ns: u32) -> Record {
        let (mut r, _) = wakeup(time, waker, wakee);
        if let Event::Wakeup { waking, .. } = &mut r.event {
            *waking = Some(CarriedWaking {
                cpu: Cpu(1),
                waker: Tid(waker),
                before_ns,
            });
        }
        r
    }

    /// A wakeup done by the waker itself, its waking just before it on this CPU (or
    /// with the charges of the enqueue between), goes out carrying the waking; one
    /// with a migration or another record between, of another thread, or too far
    /// after its waking stays two records.
    #[test]
    fn a_wakeup_carries_its_waking_when_only_charges_come_between() {
        let mut q = CpuQueue::new(1);
        let out = release_folded(&mut q, &[waking(1_000, 2, 7), wakeup(1_800, 2, 7)]);
        assert_eq!(out, vec![woke(1_800, 2, 7, 800)]);
        assert_eq!(
            as_read(out),
            vec![waking(1_000, 2, 7).0, wakeup(1_800, 2, 7).0]
        );

        // The enqueue's charges stay where they were; the waking reads back after them
        // once written (the writer's floor), here unfolded against 0.
        let mut q = CpuQueue::new(1);
        let items = [
            waking(1_000, 2, 7),
            runtime(1_300, 2, 500),
            runtime(1_400, 5, 100),
            wakeup(1_800, 2, 7),
        ];
        let out = release_folded(&mut q, &items);
        assert_eq!(
            out,
            vec![
                runtime(1_300, 2, 500).0,
                runtime(1_400, 5, 100).0,
                woke(1_800, 2, 7, 800)
            ]
        );

        let migrate = Record {
            time: Time(1_200),
            event: Event::Migrate {
                tid: Tid(7),
                from: Cpu(0),
                to: Cpu(1),
            },
        };
        let not_folded = [
            vec![waking(1_000, 2, 7), (migrate, 2), wakeup(1_800, 2, 7)],
            vec![waking(1_000, 2, 7), wakeup(1_800, 2, 8)],
            vec![
                waking(1_000, 2, 7),
                wakeup(1_500, 2, 8),
                wakeup(1_800, 2, 7),
            ],
            vec![
                waking(1_000, 2, 7),
                runtime(1_100, 2, 50),
                runtime(1_200, 2, 50),
                runtime(1_300, 2, 50),
                wakeup(1_800, 2, 7),
            ],
            vec![
                waking(1_000, 2, 7),
                wakeup(1_000 + FOLD_WITHIN_NS + 1, 2, 7),
            ],
        ];
        for items in not_folded {
            let mut q = CpuQueue::new(1);
            let want: Vec<Record> = items.iter().map(|(r, _)| r.clone()).collect();
            assert_eq!(release_folded(&mut q, &items), want);
        }
    }

    /// A charge in the filtered stream (ftrace's instance of the traced tasks) folds the
    /// same; never into a record another queue put in `out` before.
    #[test]
    fn a_filtered_charge_folds_but_never_another_queues() {
        let mut q = CpuQueue::new(1);
        feed(
            &mut q,
            &[
                switch(10, 1, 2),
                runtime(1_000, 2, 900),
                switch(1_002, 2, 3),
            ],
        );
        let mut out = Vec::new();
        q.release(u64::MAX, &mut out, &mut KernelStats::default(), |_| false);
        assert_eq!(out, vec![switch(10, 1, 2).0, carrying(1_002, 2, 3, 900, 2)]);

        let mut q = CpuQueue::new(1);
        q.event(switch(1_002, 2, 3).0, 2);
        let mut out = vec![runtime(1_000, 2, 900).0];
        q.release(u64::MAX, &mut out, &mut KernelStats::default(), |_| false);
        assert_eq!(out, vec![runtime(1_000, 2, 900).0, switch(1_002, 2, 3).0]);
    }

    #[test]
    fn a_consistent_stream_passes_unchanged() {
        let mut q = CpuQueue::new(1);
        let items = [
            switch(10, 1, 2),
            waking(15, 2, 7),
            runtime(20, 2, 10),
            switch(20, 2, 0),
            waking(30, 0, 2),
            switch(40, 0, 2),
        ];
        feed(&mut q, &items);
        let (out, stats) = release(&mut q, 25);
        assert_eq!(out.len(), 4);
        assert_eq!(q.held(), 2);
        let (rest, _) = release(&mut q, u64::MAX);
        let all: Vec<Record> = out.into_iter().chain(rest).collect();
        let want: Vec<Record> = items.iter().map(|(r, _)| r.clone()).collect();
        assert_eq!(all, want);
        assert_eq!((stats.samples, stats.repaired), (4, 0));
    }

    #[test]
    fn a_switch_from_a_silent_task_is_recovered_and_dated_by_the_charge() {
        let mut q = CpuQueue::new(1);
        feed(&mut q, &silent_task());
        let (out, stats) = release(&mut q, u64::MAX);
        assert_eq!(out[1], recovered(60, 75, 9));
        assert_eq!(out[2].time, Time(80));
        assert_eq!(out.len(), 5);
        assert_eq!(stats.repaired, 1);
    }

    #[test]
    fn a_recovered_switch_is_never_dated_before_the_previous_record() {
        let mut q = CpuQueue::new(1);
        feed(
            &mut q,
            &[switch(50, 7, 75), runtime(100, 9, 1000), switch(100, 9, 0)],
        );
        let (out, _) = release(&mut q, u64::MAX);
        assert_eq!(out[1], recovered(50, 75, 9));
    }

    #[test]
    fn without_a_charge_the_switch_is_dated_at_the_first_event() {
        let mut q = CpuQueue::new(1);
        // The switch-out of 9 is its first record; no charge (a kernel without
        // sched_stat_runtime).
        feed(&mut q, &[switch(50, 7, 75), switch(90, 9, 0)]);
        let (out, _) = release(&mut q, u64::MAX);
        assert_eq!(out[1], recovered(90, 75, 9));
        assert_eq!(out[2], switch(90, 9, 0).0);
    }

    #[test]
    fn the_charge_is_looked_for_in_records_past_the_horizon() {
        let mut q = CpuQueue::new(1);
        feed(
            &mut q,
            &[switch(10, 7, 75), waking(50, 9, 8), runtime(200, 9, 170)],
        );
        let (out, _) = release(&mut q, 60);
        assert_eq!(out[1], recovered(30, 75, 9));
        assert_eq!(q.held(), 1);
    }

    #[test]
    fn a_charge_of_another_stretch_is_not_used() {
        let mut q = CpuQueue::new(1);
        // 9 leaves at 90 (no charge in its stretch); its later charge is of another one.
        feed(
            &mut q,
            &[
                switch(10, 7, 75),
                waking(50, 9, 8),
                switch(90, 9, 3),
                runtime(95, 3, 5),
                runtime(200, 9, 150),
            ],
        );
        let (out, _) = release(&mut q, u64::MAX);
        assert_eq!(out[1], recovered(50, 75, 9));
    }

    #[test]
    fn after_a_loss_the_running_task_is_not_guessed() {
        let mut q = CpuQueue::new(1);
        feed(&mut q, &[switch(10, 1, 2)]);
        q.lost(20, 5);
        // Whatever ran after the loss, its first record only says it runs now.
        feed(
            &mut q,
            &[waking(30, 3, 4), switch(40, 3, 5), waking(45, 6, 1)],
        );
        let (out, stats) = release(&mut q, u64::MAX);
        let lost = Record {
            time: Time(20),
            event: Event::KernelLost {
                cpu: Cpu(1),
                count: 5,
            },
        };
        assert_eq!(out[1], lost);
        // 5 was switched to, 6 wrote the next record: that one is a hole.
        assert_eq!(out[4], recovered(45, 5, 6));
        assert_eq!((stats.lost, stats.repaired, stats.samples), (5, 1, 4));
    }

    #[test]
    fn unfiltered_records_go_in_place_and_date_but_reveal_nothing() {
        let mut q = CpuQueue::new(1);
        feed(
            &mut q,
            &[switch(10, 7, 75), waking(50, 9, 8), switch(90, 9, 0)],
        );
        // The charge of 9 came through the unfiltered stream, read after the others;
        // a charge written while another task ran reveals no hole.
        q.unfiltered_event(runtime(70, 9, 40).0, None);
        q.unfiltered_event(runtime(95, 44, 5).0, None);
        let (out, stats) = release(&mut q, u64::MAX);
        assert_eq!(out[1], recovered(30, 75, 9));
        let times: Vec<u64> = out.iter().map(|r| r.time.0).collect();
        assert_eq!(times, [10, 30, 50, 70, 90, 95]);
        assert_eq!((stats.repaired, stats.samples), (1, 5));
    }

    #[test]
    fn a_charge_released_before_the_revealing_record_still_dates_the_switch_in() {
        let mut q = CpuQueue::new(1);
        // 75 ran, 9 was switched in at 60 unreported, was charged 25 ns at 85 (through
        // the unfiltered stream) and switched out at 90: the charge goes out first.
        feed(&mut q, &[switch(10, 7, 75), switch(90, 9, 0)]);
        q.unfiltered_event(runtime(85, 9, 25).0, None);
        let (out, stats) = release(&mut q, u64::MAX);
        assert!(out.contains(&recovered(60, 75, 9)), "{out:?}");
        assert_eq!(stats.repaired, 1);
        // The same when the charge went out in an earlier release.
        let mut q = CpuQueue::new(1);
        feed(&mut q, &[switch(10, 7, 75)]);
        q.unfiltered_event(runtime(85, 9, 25).0, None);
        let (first, _) = release(&mut q, 87);
        assert_eq!(first.len(), 2);
        feed(&mut q, &[switch(90, 9, 0)]);
        let (out, _) = release(&mut q, u64::MAX);
        assert_eq!(out[0], recovered(60, 75, 9));
    }

    /// A charge that carries its task's wall time on the CPU dates the switch-in by it:
    /// the CPU time charged falls short by what the hypervisor stole since (seen: agent
    /// events 80 µs before a switch-in dated by the charge alone).
    #[test]
    fn a_charge_with_its_wall_time_on_the_cpu_dates_the_switch_in_by_it() {
        let mut q = CpuQueue::new(1);
        // 9 switched in at 40 unreported; charged 25 ns at 85 for 45 ns on the CPU.
        feed(&mut q, &[switch(10, 7, 75), switch(90, 9, 0)]);
        q.unfiltered_event(runtime(85, 9, 25).0, Some(45));
        let (out, _) = release(&mut q, u64::MAX);
        assert!(out.contains(&recovered(40, 75, 9)), "{out:?}");
        // The same when the charge went out in an earlier release.
        let mut q = CpuQueue::new(1);
        feed(&mut q, &[switch(10, 7, 75)]);
        q.unfiltered_event(runtime(85, 9, 25).0, Some(45));
        release(&mut q, 87);
        feed(&mut q, &[switch(90, 9, 0)]);
        let (out, _) = release(&mut q, u64::MAX);
        assert_eq!(out[0], recovered(40, 75, 9));
        // Never before the CPU's previous record.
        let mut q = CpuQueue::new(1);
        feed(&mut q, &[switch(10, 7, 75), switch(90, 9, 0)]);
        q.unfiltered_event(runtime(85, 9, 25).0, Some(80));
        let (out, _) = release(&mut q, u64::MAX);
        assert!(out.contains(&recovered(10, 75, 9)), "{out:?}");
    }

    #[test]
    fn a_foreign_charge_is_left_out_but_still_dates_the_switch_in() {
        // As above, but 9 is another program's task: its charge is not released, and
        // the switch recovered from the filtered stream is dated by it all the same.
        let mut q = CpuQueue::new(1);
        feed(&mut q, &[switch(10, 7, 75)]);
        q.unfiltered_event(runtime(85, 9, 25).0, None);
        q.unfiltered_event(runtime(86, 75, 5).0, None);
        let foreign = |r: &Record| matches!(r.event, Event::CpuTime { tid, .. } if tid.0 == 9);
        let (out, stats) = release_leaving_out(&mut q, 87, foreign);
        assert_eq!(out, [switch(10, 7, 75).0, runtime(86, 75, 5).0]);
        assert_eq!((stats.samples, stats.foreign_skipped), (2, 1));
        feed(&mut q, &[switch(90, 9, 0)]);
        let (out, _) = release(&mut q, u64::MAX);
        assert_eq!(out[0], recovered(60, 75, 9));
    }

    #[test]
    fn a_foreign_wakeup_is_left_out_but_still_tells_the_running_task() {
        // 9 (untraced, switched in unreported) wakes 8 (untraced: left out), then 75.
        let mut q = CpuQueue::new(1);
        feed(
            &mut q,
            &[switch(10, 7, 75), waking(50, 9, 8), waking(60, 9, 75)],
        );
        let foreign = |r: &Record| matches!(r.event, Event::Waking { wakee, .. } if wakee.0 == 8);
        let (out, stats) = release_leaving_out(&mut q, u64::MAX, foreign);
        assert_eq!(
            out,
            [
                switch(10, 7, 75).0,
                recovered(50, 75, 9),
                waking(60, 9, 75).0
            ]
        );
        assert_eq!(
            (stats.samples, stats.foreign_skipped, stats.repaired),
            (2, 1, 1)
        );
    }

    #[test]
    fn the_first_record_of_a_recording_is_not_a_hole() {
        let mut q = CpuQueue::new(1);
        feed(&mut q, &[waking(5, 3, 4), switch(9, 3, 0)]);
        let (out, stats) = release(&mut q, u64::MAX);
        assert_eq!(out.len(), 2);
        assert_eq!(stats.repaired, 0);
    }

    /// What the records say about the CPU's clock goes to `resched_clock`; a recovered
    /// switch, dated by a charge and not by a clock, makes the clock unknown.
    #[test]
    fn a_recovered_switch_makes_the_clock_unknown() {
        let mut q = CpuQueue::new(1);
        feed(&mut q, &silent_task());
        let mut out = Vec::new();
        let mut notes = Vec::new();
        q.release_noting(
            u64::MAX,
            &mut out,
            &mut KernelStats::default(),
            |r| matches!(r.event, Event::CpuTime { .. }),
            Some(&mut notes),
        );
        // The charge, left out, was its task's switch-out's own, with no skip pending.
        assert_eq!(notes, [ClockNote::Unknown { time: 60, cpu: 1 }]);
    }
}
