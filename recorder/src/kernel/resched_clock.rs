//! A preempting switch dated by the run-queue clock it was made by, from the records
//! around it (ftrace source).
//!
//! The kernel accounts a switch at its run queue's clock: the wait (schedstat's
//! `run_delay`) of the thread leaving, when preempted, starts there, that of the thread
//! arriving ends there, and the CPU time of both counts from there. `__schedule`
//! normally updates the clock a µs before `sched_switch`, but a wakeup that finds a
//! reschedule pending on its target (`TIF_NEED_RESCHED`, set by it or before it) asks
//! the coming switch not to update it again (`rq_clock_skip_update`). The switch
//! follows within µs (a local wakeup: at the interrupt's or the system call's exit; a
//! remote one: at the rescheduling interrupt, 10-80 µs in a virtual machine), unless
//! the hypervisor stops the virtual CPU in between: then the switch comes milliseconds
//! later, dated by the clock of the last update before it, and the kernel counts the
//! thread leaving queued from there while the trace showed it running with its time
//! stolen. The BPF programs read that clock (`switch_clock`); an ftrace record carries
//! no clock, but the records tell enough:
//!
//! - A clock update of a CPU: a wakeup onto it (`sched_wakeup`, written a µs after the
//!   update, on any CPU); a charge of its running task (`sched_stat_runtime`) by any
//!   task (a tick, a preemption check from another CPU), except the charge the switch
//!   makes as the task leaves (`put_prev_task`'s, written by the switch's clock just
//!   before the switch); and where no record shows an update, that last charge says how
//!   far the clock went: the task's previous charge plus what it charged.
//! - A skip asked: a wakeup written on its target CPU (locally, or by the interrupt that
//!   queues a remote wakeup) with a reschedule pending, the `common_flags` bit the
//!   kernel's text rendering shows as `N`. A wakeup written on another CPU says nothing
//!   of the target's flags: its preemption check charged the target's task, but whether
//!   it preempted is not in the records (the timeline takes it so for a traced thread,
//!   `stale_clock`; a loop of the schedstat test with it taken so here too, for every
//!   thread, moved switches the kernel had dated on an updated clock: checks that did
//!   not preempt, and the thread ran on).
//!
//! A preempting switch on a CPU with a skip asked since its previous switch is dated
//! by that CPU's latest clock update, never before its previous switch, the latest
//! record about the thread arriving (its wakeup), or what the source already passed on;
//! the charge of the thread leaving written just before it moves with it, a ns before.
//! A move of [`STALE_NS`] or less is left alone, and so is a switch from a task none of
//! whose charges since its switch-in was recorded (the collector's own threads are not
//! recorded, `set_event_notrace_pid`: their ticks move the clock unseen).
//!
//! Measured (the schedstat test beside a busy program read through ftrace, which failed
//! about one run in 15; bpftrace reading `sched_info.run_delay` at each switch of the
//! JVM as the truth; the raw records from a second ftrace instance): the JVM main
//! thread charged by a tick at 199.154 ms, a kworker woken onto its CPU at 199.264 ms
//! with the reschedule pending (`dN.4.`), then nothing on that CPU until main's own
//! charge (108 µs: to 199.262 ms by the task clock) and its switch to the kworker at
//! 201.368 ms; schedstat counted main waiting from 199.26 ms, the trace showed 2.06 ms
//! stolen instead. Five of 30 such runs had a step of 0.4-2.6 ms of this kind.

use rustc_hash::FxHashMap;
use sonda_trace::{ChargedBy, Event, Record, SwitchOut, Time};

use super::sched_events::flags;
use super::switch_clock::STALE_NS;

/// What one CPU's records say about the run-queue clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockNote {
    /// The clock of `cpu` updated at `time`.
    Update { time: u64, cpu: u16 },
    /// A wakeup at `time` asked the next switch on `cpu` not to update the clock.
    Skip { time: u64, cpu: u16 },
    /// `tid`, running, charged `ns` at `time`: its CPU's clock updated there, unless
    /// `own_switch` (the charge its switch-out makes, by the switch's clock, which
    /// stood `ns` after its previous charge's).
    Charge {
        time: u64,
        tid: u32,
        ns: u64,
        own_switch: bool,
    },
    /// What `cpu`'s clock did from `time` on is not known (records lost, a switch
    /// recovered).
    Unknown { time: u64, cpu: u16 },
}

impl ClockNote {
    fn time(&self) -> u64 {
        match *self {
            ClockNote::Update { time, .. }
            | ClockNote::Skip { time, .. }
            | ClockNote::Charge { time, .. }
            | ClockNote::Unknown { time, .. } => time,
        }
    }
}

/// The notes of one CPU's records, taken in that CPU's order (both instances merged),
/// before any is left out as another program's. What concerns this CPU's own clock is
/// noted only while a skip is pending on it (a skip is asked on the CPU it is written
/// on), so that the usual records cost a few comparisons: under Tomcat the ftrace path
/// took about 20% more of the collector's CPU when every charge was noted.
#[derive(Default)]
pub struct CpuNotes {
    /// A charge by the running task itself from task context, not yet known to be its
    /// switch-out's own: (time, task, ns). The record after it says.
    own_charge: Option<(u64, u32, u64)>,
    /// A skip asked on this CPU since its last switch.
    skip: bool,
    /// The latest charge of the running task that updated the clock: (time, task, ns).
    last_charge: Option<(u64, u32, u64)>,
}

impl CpuNotes {
    /// Notes on `record`, written on `cpu` in the context `flags` says.
    pub fn see(&mut self, cpu: u16, record: &Record, flags: u8, notes: &mut Vec<ClockNote>) {
        let time = record.time.0;
        if let Some((t, task, ns)) = self.own_charge.take() {
            let own_switch = matches!(record.event, Event::Switch { prev, .. } if prev.0 == task);
            if own_switch {
                if self.skip {
                    notes.push(ClockNote::Charge {
                        time: t,
                        tid: task,
                        ns,
                        own_switch,
                    });
                }
            } else {
                self.updated_by(cpu, (t, task, ns), notes);
            }
        }
        match record.event {
            Event::CpuTime {
                tid,
                ns,
                by: ChargedBy::Itself,
            } => {
                if flags & (flags::HARDIRQ | flags::SOFTIRQ) != 0 {
                    self.updated_by(cpu, (time, tid.0, ns), notes);
                } else {
                    self.own_charge = Some((time, tid.0, ns));
                }
            }
            // Another CPU's task: whether a skip is pending there is not known here.
            Event::CpuTime {
                tid,
                ns,
                by: ChargedBy::Other,
            } => notes.push(ClockNote::Charge {
                time,
                tid: tid.0,
                ns,
                own_switch: false,
            }),
            Event::Wakeup { target, .. } if target.0 != cpu => {
                notes.push(ClockNote::Update {
                    time,
                    cpu: target.0,
                });
            }
            Event::Wakeup { .. } => {
                if flags & flags::NEED_RESCHED != 0 && !self.skip {
                    self.skip = true;
                    // The running task's latest charge bounds the clock from below.
                    if let Some((t, tid, ns)) = self.last_charge {
                        notes.push(ClockNote::Charge {
                            time: t,
                            tid,
                            ns,
                            own_switch: false,
                        });
                    }
                    notes.push(ClockNote::Skip { time, cpu });
                }
                if self.skip {
                    notes.push(ClockNote::Update { time, cpu });
                }
            }
            Event::Switch { .. } => {
                self.skip = false;
                self.last_charge = None;
            }
            Event::KernelLost { .. } => {
                *self = CpuNotes::default();
                notes.push(ClockNote::Unknown { time, cpu });
            }
            _ => {}
        }
    }

    /// A charge of this CPU's running task that updated its clock.
    fn updated_by(
        &mut self,
        cpu: u16,
        (time, tid, ns): (u64, u32, u64),
        notes: &mut Vec<ClockNote>,
    ) {
        self.last_charge = Some((time, tid, ns));
        if self.skip {
            notes.push(ClockNote::Update { time, cpu });
            notes.push(ClockNote::Charge {
                time,
                tid,
                ns,
                own_switch: false,
            });
        }
    }
}

/// One CPU's clock as the notes and switches so far tell it.
#[derive(Clone, Copy, Default)]
struct CpuClock {
    /// The latest update.
    updated: u64,
    /// A skip asked since the last switch.
    skip: bool,
    /// The time of the last switch.
    switched: u64,
}

/// A thread's charges as its CPU's clock bounds: the latest that updated it, and its
/// switch-out's own (time, ns).
#[derive(Clone, Copy, Default)]
struct Charges {
    latest: u64,
    own_switch: Option<(u64, u64)>,
}

/// Entries of [`ReschedClock::charges`] kept before old ones are dropped.
const KEEP: usize = 4096;

/// How long a thread's charges are kept beyond that, ns.
const KEEP_NS: u64 = 1_000_000_000;

/// Dates preempting switches by the clock they were made by, across reads.
#[derive(Default)]
pub struct ReschedClock {
    cpus: Vec<CpuClock>,
    /// Per thread, traced or not: its latest charges.
    charges: FxHashMap<u32, Charges>,
    /// Per thread: the time of the latest record about it (a wakeup, a migration).
    about: FxHashMap<u32, u64>,
    dated: u64,
}

impl ReschedClock {
    /// Dates the preempting switches of `released` (one read's records, in time order)
    /// made on a clock a skip kept, by `notes` (the same read's, any order; emptied).
    /// `floor`: the time the source passed on before this read. Returns whether a
    /// record moved: `released` then needs sorting again.
    pub fn date(
        &mut self,
        released: &mut [Record],
        notes: &mut Vec<ClockNote>,
        floor: u64,
    ) -> bool {
        notes.sort_by_key(ClockNote::time);
        let mut next_note = 0;
        let mut moved = false;
        for i in 0..released.len() {
            let time = released[i].time.0;
            while let Some(&n) = notes.get(next_note).filter(|n| n.time() <= time) {
                self.note(n);
                next_note += 1;
            }
            match released[i].event {
                Event::Switch {
                    cpu,
                    prev,
                    prev_state,
                    next,
                    ..
                } => {
                    let c = *self.cpu(cpu.0);
                    let preempted = SwitchOut::from_prev_state(prev_state) == SwitchOut::Runnable;
                    let mut at = time;
                    if let Some(clock) = self.clock(c, prev.0).filter(|_| preempted && c.skip) {
                        let after = self.about.get(&next.0).copied().unwrap_or(0);
                        // Room for the leaving thread's charge a ns before.
                        let earliest = clock.max(after + 1).max(c.switched + 1).max(floor + 2);
                        if earliest < time && time - earliest > STALE_NS {
                            at = earliest;
                            move_switch(released, i, prev.0, at);
                            self.dated += 1;
                            moved = true;
                        }
                    }
                    self.charges.remove(&prev.0);
                    let c = self.cpu(cpu.0);
                    c.skip = false;
                    c.updated = at;
                    c.switched = at;
                }
                Event::Waking { wakee: tid, .. }
                | Event::Wakeup { wakee: tid, .. }
                | Event::Migrate { tid, .. } => {
                    self.about.insert(tid.0, time);
                }
                Event::TaskExit { tid } => {
                    self.about.remove(&tid.0);
                    self.charges.remove(&tid.0);
                }
                _ => {}
            }
        }
        for &n in &notes[next_note..] {
            self.note(n);
        }
        notes.clear();
        if self.charges.len() > KEEP {
            let since = floor.saturating_sub(KEEP_NS);
            self.charges
                .retain(|_, c| c.latest.max(c.own_switch.map_or(0, |o| o.0)) >= since);
        }
        moved
    }

    /// The latest clock update of a CPU (`c`) running `prev` since its last switch that
    /// the records show: a wakeup onto it, a charge of `prev` by any task, and the
    /// clock `prev`'s switch-out charge was made by (its previous charge's, or its
    /// switch-in's, plus what it charged: the clock moved that much without a record,
    /// by a wakeup the records do not show). `None` when no charge of `prev` since its
    /// switch-in was recorded: a task the instances are told not to record (the
    /// collector's own threads, `set_event_notrace_pid`), whose ticks update the clock
    /// unseen (a CI loop found the JVM main thread switched in 2.7 ms early from the
    /// collector's reader thread).
    fn clock(&self, c: CpuClock, prev: u32) -> Option<u64> {
        let ch = self.charges.get(&prev)?;
        let latest = Some(ch.latest).filter(|&t| t >= c.switched);
        let own = ch
            .own_switch
            .filter(|o| o.0 >= c.switched)
            .map(|(_, ns)| latest.unwrap_or(c.switched) + ns);
        if latest.is_none() && own.is_none() {
            return None;
        }
        Some(c.updated.max(latest.unwrap_or(0)).max(own.unwrap_or(0)))
    }

    fn cpu(&mut self, cpu: u16) -> &mut CpuClock {
        let i = usize::from(cpu);
        if self.cpus.len() <= i {
            self.cpus.resize(i + 1, CpuClock::default());
        }
        &mut self.cpus[i]
    }

    fn note(&mut self, n: ClockNote) {
        match n {
            ClockNote::Update { time, cpu } => {
                let c = self.cpu(cpu);
                // A note read after a later switch of its CPU is of an earlier stretch.
                if time >= c.switched {
                    c.updated = c.updated.max(time);
                }
            }
            ClockNote::Skip { time, cpu } => {
                let c = self.cpu(cpu);
                if time >= c.switched {
                    c.skip = true;
                }
            }
            ClockNote::Charge {
                time,
                tid,
                ns,
                own_switch,
            } => {
                let ch = self.charges.entry(tid).or_default();
                if own_switch {
                    ch.own_switch = Some((time, ns));
                } else {
                    ch.latest = ch.latest.max(time);
                }
            }
            ClockNote::Unknown { cpu, .. } => self.cpu(cpu).skip = false,
        }
    }

    /// Switches dated by the clock of the update a skip kept.
    pub fn dated(&self) -> u64 {
        self.dated
    }
}

/// Moves the switch `released[i]` to `at` and the charge of `prev` written just before
/// it (the switch's own, made by the same clock) to a ns before.
fn move_switch(released: &mut [Record], i: usize, prev: u32, at: u64) {
    if let Event::Switch {
        charge: Some(c), ..
    } = &mut released[i].event
    {
        c.before_ns = 1;
    }
    released[i].time = Time(at);
    for r in released[..i].iter_mut().rev() {
        if r.time.0 < at {
            break;
        }
        if let Event::CpuTime {
            tid,
            by: ChargedBy::Itself,
            ..
        } = r.event
        {
            if tid.0 == prev {
                r.time = Time(at - 1);
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_records::{self, wakeup};
    use super::*;
    use sonda_trace::{Cpu, SwitchCharge, Tid};

    const MAIN: u32 = 10;
    const KWORKER: u32 = 46;

    fn r(time: u64, event: Event) -> Record {
        Record {
            time: Time(time),
            event,
        }
    }

    /// A switch on CPU 0.
    fn switch(time: u64, prev: u32, prev_state: u64, next: u32) -> Record {
        test_records::switch(time, 0, prev, prev_state, next)
    }

    fn charge(time: u64, tid: u32, ns: u64, by: ChargedBy) -> Record {
        r(
            time,
            Event::CpuTime {
                tid: Tid(tid),
                ns,
                by,
            },
        )
    }

    /// Notes of `records` (with their flags) written on CPU 0, in order.
    fn notes_of(records: &[(Record, u8)]) -> Vec<ClockNote> {
        let mut notes = Vec::new();
        let mut cpu = CpuNotes::default();
        for (rec, f) in records {
            cpu.see(0, rec, *f, &mut notes);
        }
        notes
    }

    /// The failing run's records on CPU 0 (µs from its start, the raw instance's flags
    /// in the comments): main charged by a tick (`dnh1.`), a kworker woken onto its CPU
    /// with a reschedule pending (`dN.4.`), 2 ms with nothing, main's own charge made
    /// by the clock of the wakeup (`dN.2.`, 108 µs) and its switch to the kworker.
    fn stale_preemption() -> Vec<(Record, u8)> {
        vec![
            (
                charge(199_154_000, MAIN, 3_139_261, ChargedBy::Itself),
                flags::NEED_RESCHED | flags::HARDIRQ,
            ),
            (wakeup(199_264_000, KWORKER, 0), flags::NEED_RESCHED),
            (
                charge(201_324_000, MAIN, 108_372, ChargedBy::Itself),
                flags::NEED_RESCHED,
            ),
            (switch(201_368_000, MAIN, 0, KWORKER), 0),
        ]
    }

    #[test]
    fn the_records_of_a_cpu_say_where_its_clock_was_updated_and_a_skip_asked() {
        let notes = notes_of(&stale_preemption());
        assert_eq!(
            notes,
            [
                // The wakeup found a reschedule pending: the latest charge of the
                // task running (a tick's, in an interrupt) from before, then the skip
                // and the wakeup's own update.
                ClockNote::Charge {
                    time: 199_154_000,
                    tid: MAIN,
                    ns: 3_139_261,
                    own_switch: false
                },
                ClockNote::Skip {
                    time: 199_264_000,
                    cpu: 0
                },
                ClockNote::Update {
                    time: 199_264_000,
                    cpu: 0
                },
                // The charge just before the switch is the switch's own: no update.
                ClockNote::Charge {
                    time: 201_324_000,
                    tid: MAIN,
                    ns: 108_372,
                    own_switch: true
                },
            ]
        );
        // Without a skip pending, the CPU's own records say nothing; once one is, a
        // charge by the task itself followed by anything but its switch is an update
        // (the preemption check of a wakeup it makes).
        let notes = notes_of(&[
            (charge(1_000, MAIN, 500, ChargedBy::Itself), 0),
            (wakeup(1_002, 77, 0), 0),
        ]);
        assert_eq!(notes, []);
        let notes = notes_of(&[
            (wakeup(900, 78, 0), flags::NEED_RESCHED),
            (charge(1_000, MAIN, 500, ChargedBy::Itself), 0),
            (wakeup(1_002, 77, 0), 0),
        ]);
        assert_eq!(
            notes,
            [
                ClockNote::Skip { time: 900, cpu: 0 },
                ClockNote::Update { time: 900, cpu: 0 },
                ClockNote::Update {
                    time: 1_000,
                    cpu: 0
                },
                ClockNote::Charge {
                    time: 1_000,
                    tid: MAIN,
                    ns: 500,
                    own_switch: false
                },
                ClockNote::Update {
                    time: 1_002,
                    cpu: 0
                },
            ]
        );
        // A wakeup from this CPU onto another that charged the task running there:
        // that CPU's clock updated at the wakeup; the skip is not known.
        let notes = notes_of(&[
            (charge(5_000, 33, 500, ChargedBy::Other), 0),
            (wakeup(5_012, MAIN, 1), 0),
        ]);
        assert_eq!(
            notes,
            [
                ClockNote::Charge {
                    time: 5_000,
                    tid: 33,
                    ns: 500,
                    own_switch: false
                },
                ClockNote::Update {
                    time: 5_012,
                    cpu: 1
                },
            ]
        );
    }

    /// Dates `records` as the source does: notes from them, then the switches.
    fn dated(records: &[(Record, u8)], floor: u64) -> (Vec<Record>, u64) {
        let mut notes = notes_of(records);
        let mut released: Vec<Record> = records.iter().map(|(rec, _)| rec.clone()).collect();
        let mut clock = ReschedClock::default();
        if clock.date(&mut released, &mut notes, floor) {
            released.sort_by_key(|r| r.time);
        }
        assert!(notes.is_empty());
        (released, clock.dated())
    }

    #[test]
    fn a_preemption_after_a_skip_is_dated_by_the_clock_update_it_kept() {
        let (released, n) = dated(&stale_preemption(), 0);
        assert_eq!(n, 1);
        // Schedstat counted main queued from the wakeup; its own charge goes with the
        // switch (after the kworker's wakeup, written a µs after the update).
        assert_eq!(
            released[2],
            charge(199_264_000, MAIN, 108_372, ChargedBy::Itself)
        );
        assert_eq!(released[3], switch(199_264_001, MAIN, 0, KWORKER));
        // A carried charge too.
        let mut records = stale_preemption();
        records.remove(2);
        if let Event::Switch { charge, .. } = &mut records[2].0.event {
            *charge = Some(SwitchCharge {
                ns: 108_372,
                before_ns: 5_000,
            });
        }
        let (released, _) = dated(&records, 0);
        assert_eq!(released[2].time, Time(199_264_001));
        assert!(matches!(
            released[2].event,
            Event::Switch {
                charge: Some(SwitchCharge { before_ns: 1, .. }),
                ..
            }
        ));
    }

    #[test]
    fn a_switch_is_dated_by_the_latest_update_never_before_its_bounds() {
        // A second wakeup onto the CPU updated the clock again (a remote one, from CPU
        // 1's records): the switch is dated by it.
        let mut records = stale_preemption();
        records.insert(2, (wakeup(199_500_000, 77, 0), 0));
        let (released, _) = dated(&records, 0);
        assert_eq!(released.last().unwrap().time, Time(199_500_000));
        // Never before the thread arriving was woken.
        let mut records = stale_preemption();
        records.insert(2, (wakeup(200_000_000, KWORKER, 1), 0));
        let (released, _) = dated(&records, 0);
        assert_eq!(released.last().unwrap().time, Time(200_000_001));
        // Nor before what an earlier read passed on.
        let (released, _) = dated(&stale_preemption(), 201_000_000);
        assert_eq!(released.last().unwrap().time, Time(201_000_002));
        assert_eq!(released[2].time, Time(201_000_001));
    }

    #[test]
    fn switches_without_a_skip_or_not_preempting_are_left_alone() {
        for (records, what) in [
            // No reschedule pending at the wakeup: the switch updated the clock.
            (
                {
                    let mut r = stale_preemption();
                    r[1].1 = 0;
                    r
                },
                "no skip",
            ),
            // Main went to sleep: a skip matters only to a preemption.
            (
                {
                    let mut r = stale_preemption();
                    r[3].0 = switch(201_368_000, MAIN, 1, KWORKER);
                    r
                },
                "asleep",
            ),
            // The switch came within STALE_NS of the update.
            (
                vec![
                    (
                        charge(999_000, MAIN, 5_000, ChargedBy::Itself),
                        flags::HARDIRQ,
                    ),
                    (wakeup(1_000_000, KWORKER, 0), flags::NEED_RESCHED),
                    (switch(1_009_000, MAIN, 0, KWORKER), 0),
                ],
                "close",
            ),
            // No charge of the thread leaving recorded (the collector's own threads are
            // not): its clock updates are not known.
            (
                vec![
                    (wakeup(1_000_000, KWORKER, 0), flags::NEED_RESCHED),
                    (switch(3_000_000, MAIN, 0, KWORKER), 0),
                ],
                "no charge",
            ),
            // A skip of an earlier stretch: a switch came between.
            (
                vec![
                    (wakeup(1_000_000, KWORKER, 0), flags::NEED_RESCHED),
                    (switch(1_002_000, MAIN, 0, KWORKER), 0),
                    (switch(1_500_000, KWORKER, 1, MAIN), 0),
                    (switch(3_000_000, MAIN, 0, 5), 0),
                ],
                "earlier stretch",
            ),
        ] {
            let before: Vec<Record> = records.iter().map(|(rec, _)| rec.clone()).collect();
            let (released, n) = dated(&records, 0);
            assert_eq!(released, before, "{what}");
            assert_eq!(n, 0, "{what}");
        }
    }

    #[test]
    fn a_loss_forgets_the_skip() {
        let mut records = stale_preemption();
        records.insert(
            2,
            (
                r(
                    200_000_000,
                    Event::KernelLost {
                        cpu: Cpu(0),
                        count: 3,
                    },
                ),
                0,
            ),
        );
        let (_, n) = dated(&records, 0);
        assert_eq!(n, 0);
    }

    /// A burner's clock updated by a check from another CPU (a charge by another task)
    /// 1.44 ms after the skip was asked (a remote wakeup the kernel's filter did not
    /// keep, of another program's task); its switch came 39 µs after that (a loop of the
    /// schedstat test found the burner's running 1.4% short of schedstat before charges
    /// of the thread leaving bounded the clock).
    #[test]
    fn a_later_charge_of_the_thread_leaving_by_any_task_updates_the_clock() {
        // (record, flags, the CPU that wrote it)
        let records = vec![
            (switch(2_087_240_865, 357, 2, MAIN), 0, 0),
            (charge(2_087_469_547, MAIN, 241_757, ChargedBy::Other), 0, 1),
            (wakeup(2_087_474_196, 357, 0), 0, 1),
            (charge(2_087_876_150, MAIN, 34_615, ChargedBy::Itself), 0, 0),
            // A kworker woken from an interrupt with a reschedule pending: a skip.
            (wakeup(2_087_880_000, KWORKER, 0), flags::NEED_RESCHED, 0),
            (
                charge(2_089_318_289, MAIN, 1_440_624, ChargedBy::Other),
                0,
                1,
            ),
            (charge(2_089_350_000, MAIN, 32_967, ChargedBy::Itself), 0, 0),
            (switch(2_089_357_000, MAIN, 0, 354), 0, 0),
        ];
        let mut notes = Vec::new();
        let mut cpus = [CpuNotes::default(), CpuNotes::default()];
        for (rec, f, cpu) in &records {
            cpus[usize::from(*cpu)].see(*cpu, rec, *f, &mut notes);
        }
        let mut released: Vec<Record> = records.iter().map(|r| r.0.clone()).collect();
        let mut clock = ReschedClock::default();
        clock.date(&mut released, &mut notes, 0);
        // Dated by the later check (39 µs before the record): left alone.
        assert_eq!(released.last().unwrap().time, Time(2_089_357_000));
        assert_eq!(clock.dated(), 0);
        // Without that charge, by the wakeup's update.
        let mut notes = Vec::new();
        let mut cpus = [CpuNotes::default(), CpuNotes::default()];
        let records: Vec<_> = records
            .into_iter()
            .filter(|r| r.0.time.0 != 2_089_318_289)
            .collect();
        for (rec, f, cpu) in &records {
            cpus[usize::from(*cpu)].see(*cpu, rec, *f, &mut notes);
        }
        let mut released: Vec<Record> = records.iter().map(|r| r.0.clone()).collect();
        clock.date(&mut released, &mut notes, 0);
        assert_eq!(clock.dated(), 1);
    }

    /// Without any record of the update, the switch's own charge says how far the clock
    /// went: its previous charge's time plus what it charged.
    #[test]
    fn the_switch_charge_bounds_a_clock_update_no_record_shows() {
        let mut records = stale_preemption();
        // The skip asked at 199.264 ms; a wakeup the records do not show moved the clock
        // on 300 µs: main's own charge at the switch says 410 µs since its tick.
        records[2].0 = charge(201_324_000, MAIN, 410_000, ChargedBy::Itself);
        let (released, n) = dated(&records, 0);
        assert_eq!(n, 1);
        assert_eq!(released.last().unwrap().time, Time(199_564_000));
    }
}
