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
//! stream before the records of the other that precede it. Records are therefore held
//! until a *horizon*, a time before which both streams are taken to be complete, and
//! released in time order up to it; a sched_switch comes before a switch-in record of
//! the same nanosecond (the tracepoint fires before the switch, the perf record after
//! it).
//!
//! Each stream is held in its own queue, in its own order (a CPU's ftrace buffer is in
//! time order; its perf ring nearly so, and the few late records are put in place as
//! they come), and releasing merges the two heads: nothing is sorted, and the records
//! held back are not moved.

use std::collections::VecDeque;

use sonda_trace::{Cpu, Event, Record, Time};

use super::switch_repair::CpuSwitches;
use super::KernelStats;

/// A record of the perf stream.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PerfItem {
    /// `tid` arrived after `prev`.
    SwitchIn { tid: u32, prev: u32 },
    /// This many perf records were lost.
    Lost(u64),
}

/// One CPU.
#[derive(Default)]
pub struct CpuMerge {
    cpu: u16,
    /// Tracepoint events and their losses, in time order.
    ftrace: VecDeque<Record>,
    /// `(time, item)` of the perf ring, in time order.
    perf: VecDeque<(u64, PerfItem)>,
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

    /// The next tracepoint event of this CPU (in the order of its buffer).
    pub fn event(&mut self, r: Record) {
        self.ftrace.push_back(r);
    }

    /// `count` events of this CPU's buffer lost, noticed at `time` (0 when the count is
    /// not known; the loss still breaks the switch repair's chain).
    pub fn ftrace_lost(&mut self, time: u64, count: u64) {
        self.ftrace.push_back(self.lost_record(time, count));
    }

    /// `count` records of this CPU's perf ring lost, noticed at `time`.
    pub fn perf_lost(&mut self, time: u64, count: u64) {
        self.perf_item(time, PerfItem::Lost(count));
    }

    /// A perf switch-in record of this CPU.
    pub fn switch_in(&mut self, time: u64, tid: u32, prev: u32) {
        self.perf_item(time, PerfItem::SwitchIn { tid, prev });
    }

    fn perf_item(&mut self, time: u64, item: PerfItem) {
        // A perf ring is written in the order records are reserved, which is the order
        // of their times but for a record interrupted between the two: put it in place.
        let at = self
            .perf
            .iter()
            .rev()
            .position(|(t, _)| *t <= time)
            .map_or(0, |from_back| self.perf.len() - from_back);
        self.perf.insert(at, (time, item));
    }

    fn lost_record(&self, time: u64, count: u64) -> Record {
        Record {
            time: Time(time),
            event: Event::KernelLost {
                cpu: Cpu(self.cpu),
                count,
            },
        }
    }

    /// Appends to `out`, in time order, everything held up to `horizon` (inclusive),
    /// with the switches the repair recovers; counts into `stats`.
    pub fn release(&mut self, horizon: u64, out: &mut Vec<Record>, stats: &mut KernelStats) {
        loop {
            let ftrace = self
                .ftrace
                .front()
                .map(|r| r.time.0)
                .filter(|t| *t <= horizon);
            let perf = self.perf.front().map(|(t, _)| *t).filter(|t| *t <= horizon);
            // Ties go to the tracepoint.
            let take_ftrace = match (ftrace, perf) {
                (None, None) => return,
                (Some(f), Some(p)) => f <= p,
                (f, _) => f.is_some(),
            };
            if take_ftrace {
                let Some(r) = self.ftrace.pop_front() else {
                    return;
                };
                self.ftrace_record(r, out, stats);
            } else {
                let Some((time, item)) = self.perf.pop_front() else {
                    return;
                };
                match item {
                    PerfItem::SwitchIn { tid, prev } => {
                        if let Some(r) = self.switches.saw_switch_in(self.cpu, tid, prev, time) {
                            stats.repaired += 1;
                            out.push(r);
                        }
                    }
                    PerfItem::Lost(count) => {
                        let r = self.lost_record(time, count);
                        self.ftrace_record(r, out, stats);
                    }
                }
            }
        }
    }

    fn ftrace_record(&mut self, r: Record, out: &mut Vec<Record>, stats: &mut KernelStats) {
        let time = r.time.0;
        match r.event {
            Event::Switch { next, .. } => {
                self.switches.saw_switch(next.0, time);
                stats.samples += 1;
            }
            Event::KernelLost { count, .. } => {
                stats.lost += count;
                self.switches.lost();
                self.switches.saw_record(time);
            }
            _ => {
                self.switches.saw_record(time);
                stats.samples += 1;
            }
        }
        out.push(r);
    }

    /// The median delay from a reported switch to its switch-in record (see
    /// [`CpuSwitches::delay`]).
    pub fn switch_delay(&self) -> Option<u64> {
        self.switches.delay()
    }

    /// How many records are held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.ftrace.len() + self.perf.len()
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
        m.ftrace_lost(20, 5);
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

    #[test]
    fn late_perf_records_are_put_in_place_and_perf_losses_passed_on() {
        let mut m = CpuMerge::new(1);
        let mut out = Vec::new();
        let mut stats = KernelStats::default();
        m.event(switch(10, 1, 2));
        m.event(switch(30, 2, 3));
        // 3's record was reserved before 2's was written.
        m.switch_in(31, 3, 2);
        m.switch_in(11, 2, 1);
        m.perf_lost(40, 7);
        m.switch_in(50, 4, 3); // after a loss: not known to be a hole
        m.release(u64::MAX, &mut out, &mut stats);
        let lost = Record {
            time: Time(40),
            event: Event::KernelLost {
                cpu: Cpu(1),
                count: 7,
            },
        };
        assert_eq!(out, vec![switch(10, 1, 2), switch(30, 2, 3), lost]);
        assert_eq!((stats.samples, stats.lost, stats.repaired), (2, 7, 0));
        assert_eq!(m.held(), 0);
    }
}
