//! Switches the `sched_switch` tracepoint did not report.
//!
//! The kernel reports a tracepoint (and any perf record) in the context of the task
//! that is running, and some kernels keep quiet for some tasks: on the machines this
//! project runs on, nothing is ever reported while a task of the sandbox's own
//! supervisor runs, so a switch *from* such a task to one of ours never shows up as
//! `sched_switch`, and our thread would seem to run without having been switched in.
//! Lost records (a full ring) leave the same hole.
//!
//! A `context_switch` perf event gives a second witness: a switch-in record written in
//! the context of the task that arrives (ours, so it is reported) naming the task that
//! left. Per CPU, in ring order, a `sched_switch` to X is followed by X's switch-in
//! record; a switch-in record of X with no `sched_switch` to X since the previous one
//! stands for a switch the tracepoint missed, and becomes an [`Event::Switch`] from the
//! task it names, at its time, with `prev_state` 0 (that task's state is unknown; it was
//! not one of ours, or its own records would have been reported).
//!
//! perf names a task that already gave up its pid (an exiting thread, switched in again
//! to finish dying) as -1: such a switch-in says nothing about which switch it stands
//! for and is not used.

use sonda_trace::{Cpu, Event, Record, Tid, Time};

/// How perf names a task whose pid is gone.
const UNNAMED: u32 = u32::MAX;

/// One CPU's view.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuSwitches {
    /// The task the last `sched_switch` switched to, until its switch-in record comes.
    expect_in: Option<u32>,
    /// Whether what came before is known: not at the start, nor after lost records,
    /// where a switch-in may belong to a `sched_switch` that came before or was lost.
    known: bool,
}

impl CpuSwitches {
    /// A `sched_switch` to `next` was read from this CPU's ring.
    pub fn saw_switch(&mut self, next: u32) {
        self.expect_in = Some(next);
        self.known = true;
    }

    /// A switch-in record of `tid` (after `prev`) was read from this CPU's ring. Returns
    /// the switch to add when no tracepoint reported it.
    pub fn saw_switch_in(&mut self, cpu: u16, tid: u32, prev: u32, time: u64) -> Option<Record> {
        let unnamed = tid == UNNAMED;
        if !std::mem::replace(&mut self.known, true)
            || self.expect_in.take() == Some(tid)
            || unnamed
        {
            self.expect_in = None;
            return None;
        }
        Some(Record {
            time: Time(time),
            event: Event::Switch {
                cpu: Cpu(cpu),
                prev: Tid(prev),
                prev_state: 0,
                next: Tid(tid),
            },
        })
    }

    /// Records of this CPU were lost: what came before says nothing about what follows.
    pub fn lost(&mut self) {
        self.expect_in = None;
        self.known = false;
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
        c.saw_switch(7);
        assert_eq!(c.saw_switch_in(0, 7, 5, 100), None);
        // Switches to the idle task have switch-in records too, or not: either way the
        // next reported switch decides.
        c.saw_switch(0);
        c.saw_switch(8);
        assert_eq!(c.saw_switch_in(0, 8, 0, 200), None);
    }

    #[test]
    fn a_switch_in_of_a_task_without_pid_is_not_used() {
        let mut c = CpuSwitches::default();
        // 5 → 7 reported, 7 is exiting: perf names it -1 in its switch-in record.
        c.saw_switch(7);
        assert_eq!(c.saw_switch_in(0, UNNAMED, 5, 100), None);
        // It does not make the next switch-in look unreported.
        c.saw_switch(8);
        assert_eq!(c.saw_switch_in(0, 8, 7, 200), None);
    }

    #[test]
    fn a_switch_from_a_silent_task_is_recovered() {
        let mut c = CpuSwitches::default();
        // 7 → 75 reported; 75 → 9 not (75 is silent); 9's switch-in names 75.
        c.saw_switch(75);
        assert_eq!(
            c.saw_switch_in(1, 9, 75, 300),
            Some(Record {
                time: Time(300),
                event: Event::Switch {
                    cpu: Cpu(1),
                    prev: Tid(75),
                    prev_state: 0,
                    next: Tid(9)
                }
            })
        );
        // Then 9 → 10 is reported as usual.
        c.saw_switch(10);
        assert_eq!(c.saw_switch_in(1, 10, 9, 400), None);
    }

    #[test]
    fn after_a_loss_only_switch_ins_known_to_be_unreported_are_recovered() {
        let mut c = CpuSwitches::default();
        c.saw_switch(3);
        c.lost();
        // The switch to 3 may have been among the lost records, or not: no guess.
        assert_eq!(c.saw_switch_in(0, 3, 2, 10), None);
        // A second switch-in with no switch since is a hole.
        assert!(c.saw_switch_in(0, 4, 3, 20).is_some());
    }
}
