//! Puts records in the order Paraver needs with bounded memory.
//!
//! Paraver wants records in ascending time, a state at its begin. The timeline delivers
//! events at their own time (already in order), a thread's states in order but each
//! only when it ends (so late against other threads' records), and a wake edge when it
//! is received (late, in any order). So:
//!
//! ```text
//!   events ─────────────────────────▶ in-order queue ───────┐
//!   states ─▶ one queue per thread ─▶ merged by a small heap ├─ merge, up to the ─▶ .prv
//!   communications ─────────────────▶ min-heap ──────────────┘  watermark
//! ```
//!
//! The heap over threads holds one entry per thread with states waiting (its first
//! state's begin), so each record costs a few comparisons in a heap that fits in cache,
//! however many records wait.
//!
//! The watermark is the timeline's low water: nothing delivered later begins before it,
//! so everything up to it can be written. A state that stays open long (a thread asleep
//! for seconds) holds the watermark back; when more than the limit of records wait,
//! the exporter asks the timeline to write out its open states up to a cut time
//! (`Timeline::cut`), which lets everything before it go. A state longer than the
//! window then appears as consecutive records of the same state: Paraver draws them
//! as one, and totals are unchanged; only the count of state records grows.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Write};

use crate::records::{Line, PrvWriter};

/// A communication in its heap, ordered by (send time, sender, arrival) for a
/// deterministic file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Late {
    key: u64,
    obj: u32,
    seq: u64,
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

/// A per-thread queue that grew this large gives its memory back once empty.
const SHRINK_ABOVE: usize = 4096;

/// The reorder buffer.
pub(crate) struct Reorder {
    events: VecDeque<Line>,
    states: Vec<VecDeque<Line>>,
    /// (first state's begin, row) of every row with states waiting.
    heads: BinaryHeap<Reverse<(u64, u32)>>,
    comms: BinaryHeap<Reverse<Late>>,
    seq: u64,
    len: usize,
}

impl Reorder {
    /// A buffer for `rows` threads.
    pub fn new(rows: usize) -> Reorder {
        Reorder {
            events: VecDeque::new(),
            states: (0..rows).map(|_| VecDeque::new()).collect(),
            heads: BinaryHeap::new(),
            comms: BinaryHeap::new(),
            seq: 0,
            len: 0,
        }
    }

    /// Queues an event (no earlier than any event queued before).
    pub fn event(&mut self, line: Line) {
        debug_assert!(self.events.back().is_none_or(|b| b.key() <= line.key()));
        self.events.push_back(line);
        self.len += 1;
    }

    /// Queues a state (no earlier than the states of its thread queued before).
    pub fn state(&mut self, line: Line) {
        let row = line.obj();
        let queue = &mut self.states[row as usize];
        debug_assert!(queue.back().is_none_or(|b| b.key() <= line.key()));
        if queue.is_empty() {
            self.heads.push(Reverse((line.key(), row)));
        }
        queue.push_back(line);
        self.len += 1;
    }

    /// Queues a communication (in any order).
    pub fn comm(&mut self, line: Line) {
        self.seq += 1;
        self.comms.push(Reverse(Late {
            key: line.key(),
            obj: line.obj(),
            seq: self.seq,
            line,
        }));
        self.len += 1;
    }

    /// Records waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The earliest late record (state or communication): its key, and whether it is a
    /// state.
    fn first_late(&self) -> Option<(u64, bool)> {
        let state = self.heads.peek().map(|h| h.0 .0);
        let comm = self.comms.peek().map(|c| c.0.key);
        match (state, comm) {
            (Some(s), Some(c)) => Some(if s <= c { (s, true) } else { (c, false) }),
            (Some(s), None) => Some((s, true)),
            (None, Some(c)) => Some((c, false)),
            (None, None) => None,
        }
    }

    fn pop_state(&mut self) -> Line {
        let mut head = self.heads.peek_mut().expect("a head was peeked");
        let row = head.0 .1;
        let queue = &mut self.states[row as usize];
        let line = queue.pop_front().expect("rows in the heap have states");
        match queue.front() {
            // The row's next state replaces it in place: one sift instead of two.
            Some(next) => head.0 .0 = next.key(),
            None => {
                PeekMut::pop(head);
                if queue.capacity() > SHRINK_ABOVE {
                    queue.shrink_to(64);
                }
            }
        }
        line
    }

    /// Writes every waiting record with time at most `watermark`, in time order (at
    /// equal times, states and communications first: a state that begins at `t` before
    /// an event at `t`).
    pub fn flush_upto<W: Write>(
        &mut self,
        watermark: u64,
        out: &mut PrvWriter<W>,
    ) -> io::Result<()> {
        loop {
            let late = self.first_late().filter(|l| l.0 <= watermark);
            // Events before the next late record go in one run: one comparison each.
            let before = late.map_or(watermark.saturating_add(1), |l| l.0);
            while let Some(e) = self.events.front() {
                if e.key() >= before || e.key() > watermark {
                    break;
                }
                let e = self.events.pop_front().expect("an event was peeked");
                self.len -= 1;
                out.line(&e)?;
            }
            let Some((_, is_state)) = late else {
                return Ok(());
            };
            let line = if is_state {
                self.pop_state()
            } else {
                self.comms.pop().expect("peeked").0.line
            };
            self.len -= 1;
            out.line(&line)?;
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
        let mut r = Reorder::new(2);
        r.event(event(5, 0));
        r.event(event(10, 1));
        r.state(state(0, 10, 0));
        r.state(state(3, 10, 1));
        r.state(state(10, 20, 1));
        r.comm(Line::Comm {
            sent: 4,
            received: 11,
            from: 1,
            to: 0,
            from_cpu: 0,
            to_cpu: 0,
        });
        r.state(state(10, 30, 0));
        r.event(event(15, 0));
        r.flush_upto(10, &mut w).unwrap();
        assert_eq!(r.len(), 1);
        r.flush_upto(u64::MAX, &mut w).unwrap();
        assert_eq!(r.len(), 0);
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        let keys: Vec<(&str, &str)> = text
            .lines()
            .map(|l| (&l[..1], l.split(':').nth(5).unwrap()))
            .collect();
        // At time 10 the states (late) come before the event.
        assert_eq!(
            keys,
            vec![
                ("1", "0"),
                ("1", "3"),
                ("3", "4"),
                ("2", "5"),
                ("1", "10"),
                ("1", "10"),
                ("2", "10"),
                ("2", "15")
            ]
        );
    }
}
