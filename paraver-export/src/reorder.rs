//! Puts records in the order Paraver needs with bounded memory.
//!
//! Paraver wants records in ascending time, a state at its begin. The timeline delivers
//! events at their own time (already in order) but a state only when it ends, and a
//! wake edge only when it is received: both are late. So:
//!
//! ```text
//!   events ───────────────▶ in-order queue ─┐
//!                                            ├─ merge, up to the watermark ─▶ .prv
//!   states, communications ▶ min-heap ──────┘
//! ```
//!
//! The watermark is the timeline's low water: nothing delivered later begins before it,
//! so everything up to it can be written. A state that stays open long (a thread asleep
//! for seconds) holds the watermark back; when more than the limit of records wait,
//! the exporter asks the timeline to write out its open states up to a cut time
//! (`Timeline::cut`), which lets everything before it go. A state longer than the
//! window then appears as consecutive records of the same state: Paraver draws them
//! as one, and totals are unchanged; only the count of state records grows.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Write};

use crate::records::{Line, PrvWriter};

/// A late record in the heap, ordered by (time, row, arrival) for a deterministic file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Late {
    key: u64,
    obj: u32,
    seq: u32,
    line: Line,
}

impl Ord for Late {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.key, self.obj, self.seq).cmp(&(other.key, other.obj, other.seq))
    }
}

impl PartialOrd for Late {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The reorder buffer.
#[derive(Default)]
pub(crate) struct Reorder {
    ordered: VecDeque<Line>,
    late: BinaryHeap<Reverse<Late>>,
    seq: u32,
}

impl Reorder {
    /// Queues a record delivered at its own time (no earlier than any queued before).
    pub fn in_order(&mut self, line: Line) {
        debug_assert!(self.ordered.back().is_none_or(|b| b.key() <= line.key()));
        self.ordered.push_back(line);
    }

    /// Queues a record delivered after its time.
    pub fn late(&mut self, line: Line) {
        self.seq = self.seq.wrapping_add(1);
        self.late.push(Reverse(Late {
            key: line.key(),
            obj: line.obj(),
            seq: self.seq,
            line,
        }));
    }

    /// Records waiting.
    pub fn len(&self) -> usize {
        self.ordered.len() + self.late.len()
    }

    /// Writes every waiting record with time at most `watermark`, in time order (at
    /// equal times, late records first: a state that begins at `t` before an event at `t`).
    pub fn flush_upto<W: Write>(
        &mut self,
        watermark: u64,
        out: &mut PrvWriter<W>,
    ) -> io::Result<()> {
        loop {
            let late = self
                .late
                .peek()
                .map(|l| l.0.key)
                .filter(|&k| k <= watermark);
            let ordered = self
                .ordered
                .front()
                .map(Line::key)
                .filter(|&k| k <= watermark);
            let line = match (late, ordered) {
                (Some(l), Some(o)) if l <= o => self.late.pop().map(|l| l.0.line),
                (Some(_), None) => self.late.pop().map(|l| l.0.line),
                (_, Some(_)) => self.ordered.pop_front(),
                (None, None) => return Ok(()),
            };
            out.line(&line.expect("peeked"))?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Place;

    fn state(begin: u64, end: u64, obj: u32) -> Line {
        Line::State {
            begin,
            end,
            obj,
            cpu: 0,
            state: 1,
        }
    }
    fn event(time: u64, obj: u32) -> Line {
        Line::Event {
            time,
            value: 1,
            obj,
            cpu: 0,
            ty: 1,
        }
    }

    #[test]
    fn merges_late_states_with_events_up_to_the_watermark() {
        let places = [
            Place {
                appl: 1,
                task: 1,
                thread: 1,
            },
            Place {
                appl: 1,
                task: 1,
                thread: 2,
            },
        ];
        let mut w = PrvWriter::new(Vec::new(), &places, 1);
        let mut r = Reorder::default();
        r.in_order(event(5, 0));
        r.in_order(event(10, 1));
        r.late(state(0, 10, 0));
        r.late(state(10, 20, 1));
        r.late(state(3, 12, 1));
        r.in_order(event(15, 0));
        r.flush_upto(10, &mut w).unwrap();
        assert_eq!(r.len(), 1);
        r.flush_upto(u64::MAX, &mut w).unwrap();
        assert_eq!(r.len(), 0);
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        let keys: Vec<&str> = text.lines().map(|l| l.split(':').nth(5).unwrap()).collect();
        assert_eq!(keys, vec!["0", "3", "5", "10", "10", "15"]);
        // At time 10 the state (late) comes before the event.
        assert!(text.lines().nth(3).unwrap().starts_with("1:"));
    }
}
