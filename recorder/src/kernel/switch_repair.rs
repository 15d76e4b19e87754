//! Switches the `sched_switch` tracepoint did not report.
//!
//! The kernel reports a tracepoint (and any perf record) in the context of the task
//! that is running, and some kernels keep quiet for some tasks: on the machines this
//! project runs on, nothing is ever reported while a task of the sandbox's own
//! supervisor runs, and most switches from the idle task are missing too, so a switch
//! *from* such a task to one of ours never shows up as `sched_switch`, and our thread
//! would seem to run without having been switched in. Lost records (a full buffer)
//! leave the same hole.
//!
//! A `context_switch` perf event gives a second witness: a switch-in record written in
//! the context of the task that arrives (ours, so it is reported) naming the task that
//! left. Per CPU, in time order, a `sched_switch` to X is followed by X's switch-in
//! record; a switch-in record of X with no `sched_switch` to X since the previous one
//! stands for a switch the tracepoint missed, and becomes an [`Event::Switch`] from the
//! task it names, with `prev_state` 0 (that task's state is unknown; it was not one of
//! ours, or its own records would have been reported).
//!
//! The record is written once the switch is done, about a microsecond after the
//! tracepoint would have fired. That delay is measured on every switch both report
//! (the median of the CPU's last [`WINDOW`]), and the recovered switch is dated that
//! much before its record, never before the CPU's previous event. The same measure
//! checks that the two sources share a clock: it is a few microseconds when they do.
//!
//! perf names a task that already gave up its pid (an exiting thread, switched in again
//! to finish dying) as -1: such a switch-in says nothing about which switch it stands
//! for and is not used.

use sonda_trace::{Cpu, Event, Record, Tid, Time};

/// How perf names a task whose pid is gone.
const UNNAMED: u32 = u32::MAX;
/// Switch-to-record delays kept per CPU.
pub const WINDOW: usize = 32;
/// Longer delays are not switch costs (an interrupt came in between) and are not kept.
const MAX_DELAY: u64 = 100_000;

/// One CPU's view.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuSwitches {
    /// The task the last `sched_switch` switched to, and when, until its switch-in
    /// record comes.
    expect_in: Option<(u32, u64)>,
    /// Whether what came before is known: not at the start, nor after lost records,
    /// where a switch-in may belong to a `sched_switch` that came before or was lost.
    known: bool,
    /// Time of the CPU's latest record.
    last: u64,
    /// The last delays from a reported switch to its switch-in record (ns), a ring.
    delays: [u32; WINDOW],
    /// How many delays were measured.
    measured: u64,
}

impl CpuSwitches {
    /// A record of this CPU at `time` (any kind: a recovered switch is never dated
    /// before it).
    pub fn saw_record(&mut self, time: u64) {
        self.last = self.last.max(time);
    }

    /// A `sched_switch` to `next` at `time` was read from this CPU.
    pub fn saw_switch(&mut self, next: u32, time: u64) {
        self.saw_record(time);
        self.expect_in = Some((next, time));
        self.known = true;
    }

    /// A switch-in record of `tid` (after `prev`) at `time` was read from this CPU.
    /// Returns the switch to add when no tracepoint reported it.
    pub fn saw_switch_in(&mut self, cpu: u16, tid: u32, prev: u32, time: u64) -> Option<Record> {
        let was_known = std::mem::replace(&mut self.known, true);
        let expected = self.expect_in.take();
        if let Some((next, at)) = expected {
            if next == tid && time >= at && time - at <= MAX_DELAY {
                self.delays[(self.measured % WINDOW as u64) as usize] = (time - at) as u32;
                self.measured += 1;
            }
        }
        let floor = self.last;
        // The task named has arrived by the record's time, whatever happens next.
        self.saw_record(time);
        if !was_known || expected.map(|(next, _)| next) == Some(tid) || tid == UNNAMED {
            return None;
        }
        let at = time.saturating_sub(self.delay().unwrap_or(0)).max(floor);
        Some(Record {
            time: Time(at),
            event: Event::Switch {
                cpu: Cpu(cpu),
                prev: Tid(prev),
                prev_state: 0,
                next: Tid(tid),
                charge: None,
            },
        })
    }

    /// Records of this CPU were lost: what came before says nothing about what follows.
    pub fn lost(&mut self) {
        self.expect_in = None;
        self.known = false;
    }

    /// The median delay from a reported switch to its switch-in record, over the last
    /// [`WINDOW`] measured (none yet: `None`).
    pub fn delay(&self) -> Option<u64> {
        let n = self.measured.min(WINDOW as u64) as usize;
        if n == 0 {
            return None;
        }
        let mut d = self.delays;
        let d = &mut d[..n];
        d.sort_unstable();
        Some(u64::from(d[n / 2]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_switch_is_not_added_twice() {
        let mut c = CpuSwitches::default();
        // The first switch-in of a recording may belong to a switch before it.
        assert_eq!(c.saw_switch_in(0, 4, 3, 50), None);
        c.saw_switch(7, 99);
        assert_eq!(c.saw_switch_in(0, 7, 5, 100), None);
        // Switches to the idle task have switch-in records too, or not: either way the
        // next reported switch decides.
        c.saw_switch(0, 150);
        c.saw_switch(8, 199);
        assert_eq!(c.saw_switch_in(0, 8, 0, 200), None);
    }

    #[test]
    fn a_switch_in_of_a_task_without_pid_is_not_used() {
        let mut c = CpuSwitches::default();
        // 5 → 7 reported, 7 is exiting: perf names it -1 in its switch-in record.
        c.saw_switch(7, 99);
        assert_eq!(c.saw_switch_in(0, UNNAMED, 5, 100), None);
        // It does not make the next switch-in look unreported.
        c.saw_switch(8, 199);
        assert_eq!(c.saw_switch_in(0, 8, 7, 200), None);
    }

    #[test]
    fn a_switch_from_a_silent_task_is_recovered() {
        let mut c = CpuSwitches::default();
        // 7 → 75 reported; 75 → 9 not (75 is silent); 9's switch-in names 75.
        c.saw_switch(75, 200);
        assert_eq!(
            c.saw_switch_in(1, 9, 75, 300),
            Some(Record {
                time: Time(300),
                event: Event::Switch {
                    cpu: Cpu(1),
                    prev: Tid(75),
                    prev_state: 0,
                    next: Tid(9),
                    charge: None,
                }
            })
        );
        // Then 9 → 10 is reported as usual.
        c.saw_switch(10, 399);
        assert_eq!(c.saw_switch_in(1, 10, 9, 400), None);
    }

    #[test]
    fn after_a_loss_only_switch_ins_known_to_be_unreported_are_recovered() {
        let mut c = CpuSwitches::default();
        c.saw_switch(3, 5);
        c.lost();
        // The switch to 3 may have been among the lost records, or not: no guess.
        assert_eq!(c.saw_switch_in(0, 3, 2, 10), None);
        // A second switch-in with no switch since is a hole.
        assert!(c.saw_switch_in(0, 4, 3, 20).is_some());
    }

    #[test]
    fn a_recovered_switch_is_dated_by_the_delay_measured_on_reported_ones() {
        let mut c = CpuSwitches::default();
        assert_eq!(c.delay(), None);
        // Reported switches, each followed by its record 700..900 ns later.
        for (i, d) in [700u64, 900, 800, 750, 850].into_iter().enumerate() {
            let t = 10_000 * (i as u64 + 1);
            c.saw_switch(i as u32 + 1, t);
            assert_eq!(c.saw_switch_in(0, i as u32 + 1, i as u32, t + d), None);
        }
        assert_eq!(c.delay(), Some(800));
        // A record 1 ms late (an interrupt in between) is not a switch's cost.
        c.saw_switch(20, 60_000);
        assert_eq!(c.saw_switch_in(0, 20, 5, 1_060_000), None);
        assert_eq!(c.delay(), Some(800));
        // 20 → 0 reported, 0 → 21 not: dated 800 ns before 21's record...
        c.saw_switch(0, 2_000_000);
        let r = c.saw_switch_in(0, 21, 0, 2_010_000).unwrap();
        assert_eq!(r.time, Time(2_009_200));
        // ...but never before the CPU's previous record (a wakeup of 22, say).
        c.saw_record(2_019_900);
        let r = c.saw_switch_in(0, 22, 21, 2_020_000).unwrap();
        assert_eq!(r.time, Time(2_019_900));
        // The window keeps the last ones.
        for i in 0..WINDOW as u64 {
            let t = 3_000_000 + 10_000 * i;
            c.saw_switch(30, t);
            c.saw_switch_in(0, 30, 0, t + 2_000);
        }
        assert_eq!(c.delay(), Some(2_000));
    }
}
