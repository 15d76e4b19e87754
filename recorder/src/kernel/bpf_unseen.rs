//! Wakeups and migrations the BPF programs did not see, recovered from the switch records.
//!
//! On some machines the kernel does not run the programs for some events (on this
//! project's platform: those done from interrupts while the sandbox supervisor's threads
//! run, which ftrace's probe on the same tracepoints records, nearly always: see
//! `missed_moves`): a wakeup, and with it the move to another CPU that the wakeup chose.
//!
//! **Wakeups.** The woken thread switches in with no wakeup before it, and its runnable
//! wait would be lost (`kernel.unseen_wakeups`). But every switch record carries the wait
//! the kernel itself measured for the task arriving (its run queue's clock less
//! `sched_info.last_queued`, what schedstat adds up): a wakeup at the switch-in less
//! that wait is the one the kernel made, as schedstat dates it.
//!
//! Records are looked at in the ring buffer's order, the order the programs reserved
//! them in: a thread's switch-out, then its wakeup (the scheduler activates it only
//! once it is off its CPU), then its switch-in. A wakeup is made up only for a traced
//! thread that switched out asleep and switched in again with neither a `sched_waking`
//! nor a `sched_wakeup` of it stamped after the switch-out. The times decide, not the
//! ring order alone: a `sched_waking` is written before the waker waits for the thread
//! to leave its CPU, so it can be stamped before the switch-out yet reserved after it
//! (or, a virtual CPU stalled between reserving and stamping, the other way round);
//! the recorder's own check (`wake_audit`) sees the records in time order.
//!
//! A wakeup from an interrupt that came while a silent task ran (one whose records the
//! kernel never reports, see `cpu_queue`) is often followed by a switch from that task
//! to the woken thread, unreported as well: the thread's first record is then a charge.
//! Charges of traced threads carry their `sched_info.run_delay`; what it grew by since
//! the thread went to sleep (less the waits of switch-ins seen since) is the wait before
//! that switch-in, which the charge dates (its time less the wall time on the CPU the
//! charge carries, else less the CPU time it charges, as `CpuQueue` dates the recovered
//! switch).
//!
//! A wakeup from an interrupt is also missed when the thread then waits on its run
//! queue until the load balancer moves it to another CPU: the switch-in's wait there
//! counts only from the move. A migration record carries the thread's `run_delay` as
//! the move left it (the kernel dequeues a queued task first, adding its wait so far):
//! what it grew by since the sleep is how long the thread waited before the move,
//! which dates the wakeup. (Measured: the BPF schedstat test's one failure in 46 runs,
//! a sleeper's waiting 8.8 ms short, was this: asleep at 1379.97 ms, its timer's
//! wakeup unseen, moved at 1398.47 ms, switched in 4.7 µs later.)
//!
//! **Migrations.** A traced thread's CPU is known from its own switch and migration
//! records; the kernel moves a thread only through `set_task_cpu`, whose tracepoint is
//! reserved before the thread is queued on the new CPU, so before its switch-in there.
//! A switch record (or a migration *from* a CPU) that puts a thread on another CPU than
//! its records left it on, with no migration between, is a migration missed
//! (`kernel.migrations_recovered`; without it the trace's count falls short of the
//! kernel's `se.nr_migrations`). It is dated when the thread was queued on the new CPU,
//! as the kernel's wait tells at a switch-in (the wakeup's time when the wakeup is made
//! up too), else just after the thread's last record on the old CPU: never before it
//! left that CPU.

use rustc_hash::FxHashMap;
use sonda_trace::{Cpu, Event, Record, SwitchOut, Tid, Time};

use super::bpf_record::BpfHit;
use super::cpu_queue::switch_in_of_charge;
use super::missed_moves::migration;

/// What the programs did not see: traced threads asleep with no wakeup seen since and
/// the CPU each traced thread is on, and what was made up for them.
#[derive(Default)]
pub struct Unseen {
    /// Per traced tid, all it needs in one entry: a switch looks up two threads, a
    /// charge one (about 5% of the collector's CPU on Tomcat with one table per field).
    /// (Fx hashing: tids are not chosen by an adversary.)
    threads: FxHashMap<u32, Thread>,
    /// Per tid: the latest wakeup seen in this read while it was not asleep here, for
    /// a switch-out reserved after a wakeup stamped later (cleared at each read).
    woken: FxHashMap<u32, u64>,
    wakeups: u64,
    migrations: u64,
}

/// One traced thread as its records left it.
#[derive(Clone, Copy, Default)]
struct Thread {
    /// It switched out asleep then, with no wakeup seen since; its `run_delay` then if
    /// known.
    asleep: Option<(u64, Option<u64>)>,
    /// Its `sched_info.run_delay` as its latest charge gave it, plus the waits of the
    /// switch-ins seen since (what the kernel adds at each).
    run_delay: Option<u64>,
    /// The CPU its latest switch or migration record put it on, and that record's time.
    on_cpu: Option<(Cpu, u64)>,
    /// Its latest wakeup since it last went to sleep, seen or made up: a migration
    /// missed while it slept was its wakeup's (never dated before it, or the timeline
    /// takes the thread for one moved asleep on a run queue).
    woken_at: Option<u64>,
    /// The time of its latest record written by another task (a wakeup, a migration, a
    /// charge from another CPU): a switch dated by a stale clock stays after it
    /// (`switch_clock`).
    by_others: u64,
}

impl Unseen {
    /// Looks at the next record in ring order; appends to `made` what the kernel did
    /// before it that the programs did not see (a wakeup, then a migration at the same
    /// instant: the timeline takes a thread moved with no wakeup before it for one moved
    /// asleep on a run queue).
    pub fn see(&mut self, hit: &BpfHit, made: &mut Vec<Record>) {
        let time = hit.record.time.0;
        match hit.record.event {
            Event::Switch {
                cpu,
                prev,
                prev_state,
                next,
                ..
            } => {
                let arriving = match hit.next_traced && next.0 != 0 {
                    true => Some(self.threads.entry(next.0).or_default()),
                    false => self.threads.get_mut(&next.0),
                };
                if let Some(t) = arriving {
                    let asleep = t.asleep.take();
                    let wakeup = asleep.zip(hit.wait_ns).map(|((out, _), wait)| {
                        woken_unseen(t, next, cpu, out, time, wait, &mut self.wakeups, made)
                    });
                    if hit.next_traced {
                        if let (Some(wait), Some(delay)) = (hit.wait_ns, t.run_delay.as_mut()) {
                            *delay += wait;
                        }
                        // Queued on this CPU when its wait began.
                        let queued = wakeup.or(hit.wait_ns.map(|w| time.saturating_sub(w)));
                        self.migrations += u64::from(arrive(t, next, cpu, time, queued, made));
                    }
                }
                let asleep = SwitchOut::from_prev_state(prev_state).needs_wakeup();
                let woken_since = self.woken.remove(&prev.0).is_some_and(|w| w > time);
                if prev.0 != 0 && hit.prev_traced {
                    let t = self.threads.entry(prev.0).or_default();
                    self.migrations += u64::from(arrive(t, prev, cpu, time, None, made));
                    t.asleep = (asleep && !woken_since).then_some((time, t.run_delay));
                    if t.asleep.is_some() {
                        t.woken_at = None;
                    }
                } else if let Some(t) = self.threads.get_mut(&prev.0) {
                    t.asleep = None;
                }
            }
            Event::CpuTime { tid, ns, .. } => {
                let Some(delay) = hit.run_delay else {
                    return;
                };
                let t = self.threads.entry(tid.0).or_default();
                if hit.current != tid.0 {
                    t.by_others = time;
                }
                // Charged while asleep by the records: woken and switched in unseen,
                // both (a wakeup from an interrupt on a CPU where a silent task runs,
                // which then switches to it). The switch-in is where this first charge
                // of its stretch starts (`CpuQueue` dates it so); the kernel's wait
                // before it is what run_delay grew by since it went to sleep.
                if let Some((out, Some(before))) = t.asleep {
                    if let Some(wait) = delay.checked_sub(before) {
                        t.asleep = None;
                        let switch_in = switch_in_of_charge(time, ns, hit.on_cpu_ns);
                        // Its CPU: the charge's when written by the thread itself.
                        let target = if hit.current == tid.0 {
                            Some(Cpu(hit.cpu))
                        } else {
                            t.on_cpu.map(|(cpu, _)| cpu)
                        };
                        if let Some(target) = target {
                            let wakeups = &mut self.wakeups;
                            woken_unseen(t, tid, target, out, switch_in, wait, wakeups, made);
                        }
                    }
                }
                t.run_delay = Some(delay);
            }
            Event::Migrate { tid, from, to } => {
                let t = self.threads.entry(tid.0).or_default();
                t.by_others = time;
                self.migrations += u64::from(arrive(t, tid, from, time, None, made));
                // Asleep by the records, yet waiting before the move by the kernel's
                // count: woken unseen and queued on `from` that long (the switch-in's
                // wait on `to` will only count from the move). A thread moved while
                // truly asleep on its queue (the kernel's delayed dequeue) waited
                // nothing and stays asleep.
                if let (Some((out, Some(before))), Some(delay)) = (t.asleep, hit.run_delay) {
                    if let Some(wait) = delay.checked_sub(before).filter(|&w| w > 0) {
                        woken_unseen(t, tid, from, out, time, wait, &mut self.wakeups, made);
                    }
                }
                if hit.run_delay.is_some() {
                    t.run_delay = hit.run_delay;
                }
                t.on_cpu = Some((to, time));
            }
            Event::Waking { wakee, .. } | Event::Wakeup { wakee, .. } => {
                match self.threads.get_mut(&wakee.0) {
                    Some(t) if t.asleep.is_some() => {
                        t.by_others = time;
                        // Stamped before the switch-out: the wakeup that raced with it.
                        if t.asleep.is_some_and(|(out, _)| time > out) {
                            t.asleep = None;
                            t.woken_at = Some(time);
                        }
                    }
                    thread => {
                        if let Some(t) = thread {
                            t.by_others = time;
                        }
                        self.woken.insert(wakee.0, time);
                    }
                }
            }
            Event::TaskExit { tid } => {
                self.threads.remove(&tid.0);
            }
            _ => {}
        }
    }

    /// Ends one read's records: wakeups of threads not asleep here are forgotten.
    pub fn end_of_read(&mut self) {
        self.woken.clear();
    }

    /// The time of the latest record about `tid` written by another task (its
    /// wakeups, its migrations, its charges from another CPU) seen so far, 0 if none.
    pub fn by_others(&self, tid: u32) -> u64 {
        let woken = self.woken.get(&tid).copied().unwrap_or(0);
        self.threads
            .get(&tid)
            .map_or(woken, |t| t.by_others.max(woken))
    }

    /// Wakeups made up so far.
    pub fn wakeups(&self) -> u64 {
        self.wakeups
    }

    /// Migrations made up so far.
    pub fn migrations(&self) -> u64 {
        self.migrations
    }
}

/// A record at `time` puts traced `tid` (as `t`) on `cpu`; when its records left it on
/// another, appends the migration missed to `made`, at `queued` (when it was queued on
/// `cpu`, if known) but after its last record on the other CPU and not before its
/// latest wakeup. Says whether it did.
fn arrive(
    t: &mut Thread,
    tid: Tid,
    cpu: Cpu,
    time: u64,
    queued: Option<u64>,
    made: &mut Vec<Record>,
) -> bool {
    let Some((was, seen)) = t.on_cpu.replace((cpu, time)) else {
        return false;
    };
    if was == cpu {
        return false;
    }
    let floor = (seen + 1).max(t.woken_at.unwrap_or(0));
    let at = queued.map_or(floor, |q| q.max(floor)).min(time);
    made.push(migration(at, tid, was, cpu));
    true
}

/// Traced `tid` (as `t`), asleep by its records since its switch-out at `out`, was
/// woken unseen onto `target`'s run queue and waited `wait` ns there until `until`, by
/// the kernel's count (a switch-in's wait, run_delay's growth before a charge or a
/// move): appends that wakeup to `made`, counted in `wakeups`, and returns its time.
/// Never at or before the switch-out (records of equal time keep their arrival order,
/// and the switch-out may arrive later): the run queue's clock is not the trace's.
#[allow(clippy::too_many_arguments)]
fn woken_unseen(
    t: &mut Thread,
    tid: Tid,
    target: Cpu,
    out: u64,
    until: u64,
    wait: u64,
    wakeups: &mut u64,
    made: &mut Vec<Record>,
) -> u64 {
    let at = until.saturating_sub(wait).max(out + 1);
    t.asleep = None;
    t.woken_at = Some(at);
    *wakeups += 1;
    made.push(Record {
        time: Time(at),
        event: Event::Wakeup {
            target,
            wakee: tid,
            new_task: false,
            waking: None,
        },
    });
    at
}

#[cfg(test)]
mod tests {
    use super::super::test_records::{migrate, wakeup};
    use super::*;
    use sonda_trace::ChargedBy;

    fn hit(time: u64, event: Event, wait_ns: Option<u64>, prev_traced: bool) -> BpfHit {
        BpfHit {
            wait_ns,
            prev_traced,
            next_traced: true,
            ..BpfHit::plain(
                Record {
                    time: Time(time),
                    event,
                },
                0,
            )
        }
    }

    /// A charge of traced `tid` written by `current` on `cpu`, with its run_delay.
    fn charge(time: u64, tid: u32, ns: u64, delay: u64, current: u32, cpu: u16) -> BpfHit {
        let by = ChargedBy::of(Tid(tid), Tid(current));
        let mut h = hit(
            time,
            Event::CpuTime {
                tid: Tid(tid),
                ns,
                by,
            },
            None,
            false,
        );
        h.run_delay = Some(delay);
        h.current = current;
        h.cpu = cpu;
        h
    }

    /// What `w` makes up before `h`, all of it.
    fn made(w: &mut Unseen, h: &BpfHit) -> Vec<Record> {
        let mut made = Vec::new();
        w.see(h, &mut made);
        made
    }

    /// The one record `w` makes up before `h`, if any.
    fn see(w: &mut Unseen, h: &BpfHit) -> Option<Record> {
        let mut made = made(w, h);
        assert!(made.len() <= 1, "{made:?}");
        made.pop()
    }

    fn switch(time: u64, prev: u32, prev_state: u64, next: u32, wait: Option<u64>) -> BpfHit {
        switch_on(1, time, prev, prev_state, next, wait)
    }

    fn switch_on(
        cpu: u16,
        time: u64,
        prev: u32,
        prev_state: u64,
        next: u32,
        wait: Option<u64>,
    ) -> BpfHit {
        let event = Event::Switch {
            cpu: Cpu(cpu),
            prev: Tid(prev),
            prev_state,
            next: Tid(next),
            charge: None,
        };
        hit(time, event, wait, true)
    }

    #[test]
    fn a_switch_in_with_no_wakeup_seen_gets_one_at_the_kernels_wait() {
        let mut w = Unseen::default();
        assert_eq!(see(&mut w, &switch(100, 7, 1, 8, Some(0))), None);
        // Back 900 ns later, after 300 ns waiting by the kernel's count.
        let made = see(&mut w, &switch(1000, 8, 0, 7, Some(300)));
        assert_eq!(made, Some(wakeup(700, 7, 1)));
        assert_eq!(w.wakeups(), 1);
        // Never before the switch-out.
        see(&mut w, &switch(2000, 7, 2, 8, Some(0)));
        assert_eq!(
            see(&mut w, &switch(2100, 8, 0, 7, Some(5000)))
                .unwrap()
                .time,
            Time(2001)
        );
    }

    /// A migration record of `tid` from CPU `from` to `to` with its run_delay.
    fn moved(time: u64, tid: u32, from: u16, to: u16, delay: u64) -> BpfHit {
        let mut h = hit(
            time,
            Event::Migrate {
                tid: Tid(tid),
                from: Cpu(from),
                to: Cpu(to),
            },
            None,
            false,
        );
        h.side = true;
        h.run_delay = Some(delay);
        h
    }

    /// The BPF schedstat test's failure (1 in 46): a sleeper asleep on CPU 1, its
    /// timer's wakeup unseen, waiting there until the load balancer moved it to CPU 0,
    /// switched in there 4.7 µs later with the kernel's wait counting from the move.
    /// The move's run_delay says how long it waited before: the wakeup is dated by it,
    /// on the CPU it waited on, and the switch-in makes none of its own.
    #[test]
    fn a_thread_moved_while_waiting_after_an_unseen_wakeup_is_woken_by_its_run_delay() {
        let mut w = Unseen::default();
        // Running on CPU 1 with run_delay 40 ms, then asleep.
        see(&mut w, &switch_on(1, 1_000, 8, 0, 7, Some(0)));
        see(&mut w, &charge(1_500_000, 7, 30_000, 40_000_000, 7, 1));
        see(&mut w, &switch_on(1, 1_600_000, 7, 1, 8, Some(0)));
        // Woken (unseen) at 11.6 ms, moved at 20.1 ms: 8.5 ms of waiting before it.
        let made = see(&mut w, &moved(20_100_000, 7, 1, 0, 48_500_000));
        assert_eq!(made, Some(wakeup(11_600_000, 7, 1)));
        assert_eq!(
            see(&mut w, &switch_on(0, 20_104_700, 9, 0, 7, Some(4_700))),
            None
        );
        assert_eq!((w.wakeups(), w.migrations()), (1, 0));
        // Asleep again; moved while truly asleep on its queue (delayed dequeue: no wait
        // added): no wakeup, the switch-in's own wait dates it as before.
        see(&mut w, &charge(21_000_000, 7, 30_000, 48_504_700, 7, 0));
        see(&mut w, &switch_on(0, 21_100_000, 7, 1, 9, Some(0)));
        assert_eq!(see(&mut w, &moved(25_000_000, 7, 0, 1, 48_504_700)), None);
        let made = see(&mut w, &switch_on(1, 32_000_000, 8, 0, 7, Some(300_000))).unwrap();
        assert_eq!(made.time, Time(31_700_000));
        assert_eq!(w.wakeups(), 2);
    }

    #[test]
    fn a_seen_wakeup_or_a_preemption_makes_none() {
        let mut w = Unseen::default();
        see(&mut w, &switch(100, 7, 1, 8, Some(0)));
        let waking = Event::Waking {
            cpu: Cpu(0),
            waker: Tid(3),
            wakee: Tid(7),
        };
        see(&mut w, &hit(500, waking, None, false));
        assert_eq!(see(&mut w, &switch(1000, 8, 0, 7, Some(300))), None);
        // Preempted (runnable): its wait is the switch records' own.
        see(&mut w, &switch(1100, 7, 0x100, 8, Some(0)));
        assert_eq!(see(&mut w, &switch(1200, 8, 0, 7, Some(100))), None);
        // An untraced task leaving asleep is not followed.
        let mut untraced = switch(1300, 9, 1, 7, Some(0));
        untraced.prev_traced = false;
        see(&mut w, &untraced);
        assert_eq!(see(&mut w, &switch(1400, 7, 0, 9, Some(100))), None);
        // A waking stamped before the switch-out it raced with does not count ...
        see(&mut w, &switch(1700, 7, 1, 8, Some(0)));
        let early = Event::Waking {
            cpu: Cpu(0),
            waker: Tid(3),
            wakee: Tid(7),
        };
        see(&mut w, &hit(1650, early.clone(), None, false));
        assert!(see(&mut w, &switch(1800, 8, 0, 7, Some(50))).is_some());
        // ... and one reserved before the switch-out but stamped after it does.
        see(&mut w, &hit(1950, early, None, false));
        see(&mut w, &switch(1900, 7, 1, 8, Some(0)));
        assert_eq!(see(&mut w, &switch(2000, 8, 0, 7, Some(30))), None);
        assert_eq!(w.wakeups(), 1);
        // Asleep, back with the wait not known: none either.
        see(&mut w, &switch(1500, 7, 1, 8, None));
        assert_eq!(see(&mut w, &switch(1600, 8, 0, 7, None)), None);
    }

    #[test]
    fn a_switch_in_on_another_cpu_with_no_migration_seen_gets_one_when_queued_there() {
        let mut w = Unseen::default();
        // 7 leaves CPU 1 preempted at 100, comes back on CPU 0 at 1000 after 300 ns
        // queued there: moved at 700.
        assert_eq!(made(&mut w, &switch_on(1, 100, 7, 0x100, 8, Some(0))), []);
        let back = switch_on(0, 1000, 9, 1, 7, Some(300));
        assert_eq!(made(&mut w, &back), [migrate(700, 7, 1, 0)]);
        // Seen moving, then switched in there: nothing made.
        made(&mut w, &switch_on(0, 1100, 7, 0x100, 9, Some(0)));
        let moved = hit(1200, migrate(1200, 7, 0, 1).event, None, false);
        assert_eq!(made(&mut w, &moved), []);
        assert_eq!(made(&mut w, &switch_on(1, 1300, 8, 1, 7, Some(100))), []);
        // The kernel's wait reaching back before it left the other CPU: just after.
        made(&mut w, &switch_on(1, 1400, 7, 0x100, 8, Some(0)));
        let back = switch_on(0, 1500, 9, 1, 7, Some(5000));
        assert_eq!(made(&mut w, &back), [migrate(1401, 7, 1, 0)]);
        assert_eq!(w.migrations(), 2);
    }

    #[test]
    fn an_unseen_wakeup_that_moved_the_thread_makes_both_at_the_same_time() {
        let mut w = Unseen::default();
        made(&mut w, &switch_on(1, 100, 7, 1, 8, Some(0)));
        let back = switch_on(0, 1000, 9, 1, 7, Some(300));
        assert_eq!(
            made(&mut w, &back),
            [wakeup(700, 7, 0), migrate(700, 7, 1, 0)]
        );
        assert_eq!((w.migrations(), w.wakeups()), (1, 1));
    }

    #[test]
    fn a_migration_from_another_cpu_or_a_switch_out_there_reveals_one_missed() {
        let mut w = Unseen::default();
        made(&mut w, &switch_on(1, 100, 7, 1, 8, Some(0)));
        // Moved 1 → 0 unseen, then 0 → 1 seen: the first is made just after 100.
        let moved = hit(500, migrate(500, 7, 0, 1).event, None, false);
        assert_eq!(made(&mut w, &moved), [migrate(101, 7, 1, 0)]);
        // Moved 1 → 0 unseen and its switch-in there not written either: the
        // switch-out on 0 tells.
        made(&mut w, &switch_on(1, 600, 8, 1, 7, Some(10)));
        made(&mut w, &switch_on(1, 700, 7, 0x100, 8, Some(0)));
        let out = switch_on(0, 900, 7, 1, 9, None);
        assert_eq!(made(&mut w, &out), [migrate(701, 7, 1, 0)]);
        assert_eq!(w.migrations(), 2);
    }

    #[test]
    fn untraced_threads_and_the_idle_task_are_not_followed() {
        let mut w = Unseen::default();
        let mut a = switch_on(1, 100, 0, 0, 9, Some(0));
        a.next_traced = false;
        let mut b = switch_on(0, 200, 0, 0, 9, Some(0));
        b.next_traced = false;
        b.prev_traced = false;
        assert_eq!(made(&mut w, &a), []);
        assert_eq!(made(&mut w, &b), []);
        // Idle (0) leaves CPU 1 then CPU 0: not one task moving.
        made(&mut w, &switch_on(1, 300, 0, 0, 7, Some(0)));
        assert_eq!(made(&mut w, &switch_on(0, 400, 0, 0, 8, Some(0))), []);
        assert_eq!(w.migrations(), 0);
    }

    #[test]
    fn a_charge_of_a_thread_asleep_by_the_records_makes_its_wakeup_from_run_delay() {
        let mut w = Unseen::default();
        // 7: charged (run_delay 1000), preempted, back after 50 ns queued (1050).
        made(&mut w, &charge(50, 7, 40, 1000, 7, 1));
        made(&mut w, &switch_on(1, 60, 7, 0x100, 8, Some(0)));
        made(&mut w, &switch_on(1, 110, 8, 0x100, 7, Some(50)));
        // Asleep at 200; woken and switched in on CPU 0 unseen, first charged at 2000
        // for 100 ns, run_delay 1150: switched in at 1900 after 100 ns queued.
        made(&mut w, &switch_on(1, 200, 7, 1, 8, Some(0)));
        let first = charge(2000, 7, 100, 1150, 7, 0);
        assert_eq!(made(&mut w, &first), [wakeup(1800, 7, 0)]);
        // Its next charge makes nothing.
        assert_eq!(made(&mut w, &charge(2500, 7, 500, 1150, 7, 0)), []);
        assert_eq!(w.wakeups(), 1);
        // Never before it went to sleep.
        made(&mut w, &switch_on(0, 2600, 7, 1, 9, Some(0)));
        let first = charge(2700, 7, 50, 9150, 7, 0);
        assert_eq!(made(&mut w, &first), [wakeup(2601, 7, 0)]);
        // Asleep with its run_delay not known (never charged before): nothing made.
        made(&mut w, &switch_on(1, 3000, 5, 1, 8, Some(0)));
        assert_eq!(made(&mut w, &charge(4000, 5, 100, 700, 5, 1)), []);
        // Charged remotely: the CPU its records left it on.
        made(&mut w, &switch_on(1, 4100, 5, 1, 8, Some(0)));
        let remote = charge(5000, 5, 100, 900, 3, 0);
        assert_eq!(made(&mut w, &remote), [wakeup(4700, 5, 1)]);
        assert_eq!(w.wakeups(), 3);
    }

    #[test]
    fn a_migration_found_after_an_unseen_wakeup_is_dated_no_earlier_than_it() {
        let mut w = Unseen::default();
        // 7 charged on CPU 1 (run_delay 100), asleep at 200; woken at 900 and switched in
        // on CPU 0 unseen (its charge at 1000 for 50 ns, run_delay 150); its switch-out
        // there shows the move: made at its wakeup, not just after 200.
        made(&mut w, &charge(150, 7, 40, 100, 7, 1));
        made(&mut w, &switch_on(1, 200, 7, 1, 8, Some(0)));
        assert_eq!(
            made(&mut w, &charge(1000, 7, 50, 150, 7, 0)),
            [wakeup(900, 7, 0)]
        );
        let out = switch_on(0, 1100, 7, 1, 9, Some(0));
        assert_eq!(made(&mut w, &out), [migrate(900, 7, 1, 0)]);
    }
}
