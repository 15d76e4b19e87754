//! One CPU's two streams in one time order: tracepoint events from the ftrace buffer
//! and switch-in records from the perf ring, merged by timestamp (both are
//! CLOCK_MONOTONIC) and passed through the switch repair in that order.
//!
//! ```text
//!  ftrace  ──  switch A→X ─── waking ──────── switch X→0 ─────────────────────
//!  perf    ───────────── in X (after A) ──────────────────── in Y (after 0) ──
//!  merged      switch A→X, in X (reported: nothing added), waking, switch X→0,
//!              in Y: no switch to Y since X's switch-in → recovered switch 0→Y
//! ```
//!
//! The two streams are read at different moments, so a record may show up in one
//! stream before the records of the other that precede it. Items are therefore held
//! until a *horizon*, a time before which both streams are taken to be complete, and
//! released in time order up to it; a sched_switch comes before a switch-in record of
//! the same nanosecond (the tracepoint fires before the switch, the perf record after
//! it).

use sonda_trace::{Cpu, Event, Record, Time};

use super::switch_repair::CpuSwitches;
use super::KernelStats;

/// What is held.
#[derive(Clone, Debug, PartialEq)]
enum Item {
    /// A decoded tracepoint event.
    Event(Record),
    /// Records were lost from one of the streams (the record says how many).
    Lost(Record),
    /// A perf switch-in record: `tid` arrived after `prev`.
    SwitchIn { tid: u32, prev: u32 },
}

impl Item {
    /// Order among items of the same time: tracepoints first.
    fn rank(&self) -> u8 {
        match self {
            Item::Event(_) | Item::Lost(_) => 0,
            Item::SwitchIn { .. } => 1,
        }
    }
}

/// One CPU.
#[derive(Default)]
pub struct CpuMerge {
    cpu: u16,
    /// `(time, item)`, in arrival order until sorted on release.
    pending: Vec<(u64, Item)>,
    switches: CpuSwitches,
}

impl CpuMerge {
    /// An empty merge for `cpu`.
    pub fn new(cpu: u16) -> CpuMerge {
        CpuMerge {
            cpu,
            ..CpuMerge::default()
        }
    }

    /// A tracepoint event of this CPU.
    pub fn event(&mut self, r: Record) {
        self.pending.push((r.time.0, Item::Event(r)));
    }

    /// `count` records of this CPU lost, noticed at `time` (0 when the count is not
    /// known; the loss still breaks the switch repair's chain).
    pub fn lost(&mut self, time: u64, count: u64) {
        let r = Record {
            time: Time(time),
            event: Event::KernelLost {
                cpu: Cpu(self.cpu),
                count,
            },
        };
        self.pending.push((time, Item::Lost(r)));
    }

    /// A perf switch-in record of this CPU.
    pub fn switch_in(&mut self, time: u64, tid: u32, prev: u32) {
        self.pending.push((time, Item::SwitchIn { tid, prev }));
    }

    /// Appends to `out`, in time order, everything held up to `horizon` (inclusive),
    /// with the switches the repair recovers; counts into `stats`.
    pub fn release(&mut self, horizon: u64, out: &mut Vec<Record>, stats: &mut KernelStats) {
        // Mostly three sorted runs (what was held, then each stream's new records): the
        // stable sort merges them in about linear time.
        self.pending.sort_by_key(|(t, item)| (*t, item.rank()));
        let upto = self.pending.partition_point(|(t, _)| *t <= horizon);
        for (time, item) in self.pending.drain(..upto) {
            match item {
                Item::Event(r) => {
                    match r.event {
                        Event::Switch { next, .. } => self.switches.saw_switch(next.0, time),
                        _ => self.switches.saw_record(time),
                    }
                    stats.samples += 1;
                    out.push(r);
                }
                Item::Lost(r) => {
                    if let Event::KernelLost { count, .. } = r.event {
                        stats.lost += count;
                    }
                    self.switches.lost();
                    self.switches.saw_record(time);
                    out.push(r);
                }
                Item::SwitchIn { tid, prev } => {
                    if let Some(r) = self.switches.saw_switch_in(self.cpu, tid, prev, time) {
                        stats.repaired += 1;
                        out.push(r);
                    }
                }
            }
        }
    }

    /// The median delay from a reported switch to its switch-in record (see
    /// [`CpuSwitches::delay`]).
    pub fn switch_delay(&self) -> Option<u64> {
        self.switches.delay()
    }

    /// How many items are held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::Tid;

    fn switch(time: u64, prev: u32, next: u32) -> Record {
        Record {
            time: Time(time),
            event: Event::Switch {
                cpu: Cpu(1),
                prev: Tid(prev),
                prev_state: 1,
                next: Tid(next),
            },
        }
    }

    fn recovered(time: u64, prev: u32, next: u32) -> Record {
        Record {
            time: Time(time),
            event: Event::Switch {
                cpu: Cpu(1),
                prev: Tid(prev),
                prev_state: 0,
                next: Tid(next),
            },
        }
    }

    #[test]
    fn streams_read_apart_are_repaired_in_time_order() {
        let mut m = CpuMerge::new(1);
        let mut out = Vec::new();
        let mut stats = KernelStats::default();
        // First read: perf had X's switch-in already, ftrace still had the switch to X
        // and, later, X's switch to the idle task.
        m.switch_in(100, 7, 5); // the first switch-in says nothing
        m.switch_in(205, 8, 5);
        m.event(switch(200, 5, 8));
        m.event(switch(300, 8, 0));
        m.release(250, &mut out, &mut stats);
        assert_eq!(out, vec![switch(200, 5, 8)]);
        assert_eq!(m.held(), 1);
        // Second read: 9 came in after the idle task, which nobody reported; the switch
        // is dated by the delays measured on the reported ones (5 and 0 ns).
        m.switch_in(400, 9, 0);
        m.switch_in(300, 0, 8); // the same nanosecond as the tracepoint: after it
        m.release(u64::MAX, &mut out, &mut stats);
        assert_eq!(
            out,
            vec![switch(200, 5, 8), switch(300, 8, 0), recovered(395, 0, 9)]
        );
        assert_eq!((stats.samples, stats.repaired, stats.lost), (2, 1, 0));
    }

    #[test]
    fn a_loss_is_passed_on_and_breaks_the_chain() {
        let mut m = CpuMerge::new(1);
        let mut out = Vec::new();
        let mut stats = KernelStats::default();
        m.event(switch(10, 1, 2));
        m.switch_in(11, 2, 1);
        m.lost(20, 5);
        // After the loss, a switch-in cannot tell a reported switch from a lost one.
        m.switch_in(30, 3, 2);
        m.switch_in(40, 4, 3); // but a second one without a switch is a hole
        m.release(u64::MAX, &mut out, &mut stats);
        let lost = Record {
            time: Time(20),
            event: Event::KernelLost {
                cpu: Cpu(1),
                count: 5,
            },
        };
        assert_eq!(out, vec![switch(10, 1, 2), lost, recovered(39, 3, 4)]);
        assert_eq!((stats.lost, stats.repaired), (5, 1));
    }
}
