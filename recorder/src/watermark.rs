//! The in-order release of a recording's records: records of every source wait here
//! until they are older than the watermark (now − `--lag`), then go out in time order.
//! Not a merge of trace files (that is `sonda_trace::merge`): the sources' records
//! arrive interleaved and slightly out of order within one recording, and this holds
//! them back just long enough to put them in order.
//!
//! ```text
//!  CPU 0 ring ─┐  (each CPU's records nearly in order)
//!  CPU 1 ring ─┼─▶ runs (each batch sorted once) ─▶ records at or before the watermark
//!  agent slots ┘  (each slot's records in order)       = now − lag ──▶ follow ──▶ trace
//! ```
//!
//! Sources are read in turns, so a record may arrive up to one cycle after a later
//! record of another source; records are therefore held until they are `lag` old (the
//! watermark), by which time every record older than the watermark has arrived, except
//! one from a thread preempted between reading its clock and committing its record for
//! longer than the lag. Such a *late* record is older than what was already written: it
//! is written at the time of the last written record (re-timed, moving it later by at
//! most the preemption delay) and counted as `collector.late_retimed`, so the file keeps
//! its time order. Records of equal time keep their arrival order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use sonda_trace::{Record, Time};

use crate::agent::packed::PackedRun;

/// Spare run buffers kept for reuse, so that a steady recording allocates nothing.
const SPARE_RUNS: usize = 16;
/// Spare byte buffers of packed runs kept for the agents' drain (one per thread
/// drained in a cycle is what a steady recording needs).
const SPARE_BYTES: usize = 256;

/// Records waiting for the watermark, released in time order.
///
/// Each batch added is sorted once into a *run*; a release merges the runs' heads
/// (a heap of one entry per run) up to the watermark. So a record is sorted once and
/// moved twice whatever the lag, where sorting every pending record each cycle cost a
/// pass over all of them per cycle: at 10 million agent events a second and a 200 ms
/// lag, two million records four times a cycle. A run's records go out in a streak
/// while they come before every other run's head, so one busy thread costs no heap
/// operation per record.
#[derive(Default)]
pub struct Watermark {
    /// Runs by index; `None` is a free index (in `free`).
    runs: Vec<Option<Run>>,
    free: Vec<usize>,
    /// One entry per non-empty run: its head's time, its order of arrival, its index.
    heads: BinaryHeap<Reverse<(Time, u64, usize)>>,
    /// Arrival order of the next run (equal times go out in arrival order).
    next_seq: u64,
    /// Emptied run buffers, kept with their capacity.
    spare: Vec<Vec<Record>>,
    /// Emptied buffers of packed runs, for [`Watermark::byte_buffers`].
    spare_bytes: Vec<Vec<u8>>,
    /// Time of the last record handed out.
    last: Time,
    late: u64,
}

/// One batch, sorted (its arrival order is in its heap entry).
enum Run {
    /// Records of any sources, sorted when added.
    Records(VecDeque<Record>),
    /// One thread's drained ring, in order as it came, decoded as it goes out.
    Packed(PackedRun),
}

impl Run {
    #[inline]
    fn front_time(&self) -> Option<Time> {
        match self {
            Run::Records(r) => r.front().map(|r| r.time),
            Run::Packed(p) => p.front_time(),
        }
    }

    #[inline]
    fn pop(&mut self) -> Option<Record> {
        match self {
            Run::Records(r) => r.pop_front(),
            Run::Packed(p) => p.pop(),
        }
    }
}

impl Watermark {
    /// Nothing pending.
    pub fn new() -> Watermark {
        Watermark::default()
    }

    /// Adds records (of any source, in any order); the recorder hands over whole
    /// buffers instead ([`Watermark::extend_from`]).
    #[cfg(test)]
    pub fn extend(&mut self, records: impl IntoIterator<Item = Record>) {
        let mut run = self.spare.pop().unwrap_or_default();
        run.extend(records);
        self.add_run(run);
    }

    /// Adds the records of `batch` (of any source, in any order), leaving it empty: its
    /// buffer becomes the run, without copying, and `batch` gets a spare one.
    pub fn extend_from(&mut self, batch: &mut Vec<Record>) {
        let spare = self.spare.pop().unwrap_or_default();
        let run = std::mem::replace(batch, spare);
        self.add_run(run);
    }

    /// Adds one thread's drained ring, whose times are trace times in order.
    pub fn extend_packed(&mut self, run: PackedRun) {
        match run.front_time() {
            Some(head) => self.push_run(head, Run::Packed(run)),
            None => self.recycle_bytes(run),
        }
    }

    /// Empty buffers for the agents' drain to fill (packed runs give theirs back here
    /// once released); take what is needed and leave the rest.
    pub fn byte_buffers(&mut self) -> &mut Vec<Vec<u8>> {
        &mut self.spare_bytes
    }

    fn recycle_bytes(&mut self, run: PackedRun) {
        if self.spare_bytes.len() < SPARE_BYTES {
            self.spare_bytes.push(run.into_buffer());
        }
    }

    fn add_run(&mut self, mut run: Vec<Record>) {
        if run.is_empty() {
            self.spare.push(run);
            return;
        }
        // Stable: equal times keep their arrival order. A batch is a few sorted runs
        // (one per CPU or thread), which this sort finds and merges.
        run.sort_by_key(|r| r.time);
        let head = run[0].time;
        // O(1): a deque made from a vector keeps its buffer.
        self.push_run(head, Run::Records(VecDeque::from(run)));
    }

    fn push_run(&mut self, head: Time, run: Run) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let idx = match self.free.pop() {
            Some(i) => {
                self.runs[i] = Some(run);
                i
            }
            None => {
                self.runs.push(Some(run));
                self.runs.len() - 1
            }
        };
        self.heads.push(Reverse((head, seq, idx)));
    }

    /// Hands out, in time order, the records at or before `watermark`, at most `limit`
    /// of them; returns whether it stopped at the limit (records at or before the
    /// watermark remain, and a next call goes on from there). The limit lets the caller
    /// release a large backlog in pieces and drain the agents' rings between them, so
    /// that a busy thread's ring does not fill while a whole backlog is written.
    pub fn release(&mut self, watermark: Time, limit: usize, mut out: impl FnMut(Record)) -> bool {
        let mut left = limit;
        while let Some(&Reverse((head, seq, idx))) = self.heads.peek() {
            if head > watermark {
                break;
            }
            if left == 0 {
                return true;
            }
            self.heads.pop();
            // The next-best run's head bounds this run's streak.
            let bound = self.heads.peek().map(|Reverse((t, s, _))| (*t, *s));
            let run = self.runs[idx].as_mut().expect("a run in the heap exists");
            while let Some(time) = run.front_time() {
                let before_bound = bound.is_none_or(|b| (time, seq) < b);
                if time > watermark || !before_bound || left == 0 {
                    break;
                }
                left -= 1;
                let Some(mut r) = run.pop() else {
                    break;
                };
                if r.time < self.last {
                    r.time = self.last;
                    self.late += 1;
                }
                self.last = r.time;
                out(r);
            }
            match run.front_time() {
                Some(next) => self.heads.push(Reverse((next, seq, idx))),
                None => {
                    let done = self.runs[idx].take().expect("the run exists");
                    self.free.push(idx);
                    match done {
                        Run::Records(records) if self.spare.len() < SPARE_RUNS => {
                            // O(1) for an empty deque: the buffer is kept.
                            let mut buffer = Vec::from(records);
                            buffer.clear();
                            self.spare.push(buffer);
                        }
                        Run::Records(_) => {}
                        Run::Packed(p) => self.recycle_bytes(p),
                    }
                }
            }
        }
        false
    }

    /// Hands out everything pending, in time order (as a release at the end of time).
    #[cfg(test)]
    pub fn release_all(&mut self, out: impl FnMut(Record)) {
        self.release(Time(u64::MAX), usize::MAX, out);
    }

    /// Records re-timed because they arrived after later ones had been handed out.
    pub fn late_retimed(&self) -> u64 {
        self.late
    }

    /// Records waiting.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        let len = |r: &Run| match r {
            Run::Records(r) => r.len(),
            Run::Packed(p) => p.remaining(),
        };
        self.runs.iter().flatten().map(len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{Event, Tid};

    fn rec(time: u64, tid: u32) -> Record {
        Record {
            time: Time(time),
            event: Event::ThreadStart { tid: Tid(tid) },
        }
    }

    fn release(m: &mut Watermark, watermark: u64) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        // In pieces of 3, as the cycle releases a backlog: the pieces join up exactly.
        while m.release(Time(watermark), 3, |r| {
            out.push((r.time.0, r.event.tid().unwrap().0))
        }) {}
        out
    }

    #[test]
    fn interleaves_sources_and_holds_records_past_the_watermark() {
        let mut m = Watermark::new();
        m.extend([rec(10, 0), rec(30, 0), rec(50, 0)]); // CPU 0
        m.extend([rec(20, 1), rec(40, 1), rec(60, 1)]); // CPU 1
        assert_eq!(release(&mut m, 45), [(10, 0), (20, 1), (30, 0), (40, 1)]);
        assert_eq!(m.pending(), 2);
        m.extend([rec(55, 2)]);
        assert_eq!(release(&mut m, 100), [(50, 0), (55, 2), (60, 1)]);
        assert_eq!(m.late_retimed(), 0);
    }

    #[test]
    fn a_limited_release_stops_at_the_limit_and_goes_on_from_there() {
        let mut m = Watermark::new();
        m.extend((0..8).map(|t| rec(t, 0)));
        m.extend([rec(50, 1)]);
        let mut got = Vec::new();
        assert!(m.release(Time(10), 4, |r| got.push(r.time.0)));
        assert_eq!(got, [0, 1, 2, 3]);
        // The last four before the watermark: nothing left to release after them.
        assert!(!m.release(Time(10), 4, |r| got.push(r.time.0)));
        assert_eq!(got, [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(m.pending(), 1);
    }

    #[test]
    fn equal_times_keep_arrival_order() {
        let mut m = Watermark::new();
        m.extend([rec(10, 3), rec(10, 1), rec(10, 2)]);
        assert_eq!(release(&mut m, 10), [(10, 3), (10, 1), (10, 2)]);
    }

    #[test]
    fn a_late_record_is_retimed_to_the_last_written_time_and_counted() {
        let mut m = Watermark::new();
        m.extend([rec(100, 0), rec(200, 0)]);
        assert_eq!(release(&mut m, 150), [(100, 0)]);
        // A thread stamped 120 before the watermark passed but committed after; and one
        // stamped before everything written.
        m.extend([rec(120, 1), rec(90, 2), rec(160, 3)]);
        assert_eq!(release(&mut m, 170), [(100, 2), (120, 1), (160, 3)]);
        assert_eq!(m.late_retimed(), 1);
        let mut all = Vec::new();
        m.release_all(|r| all.push(r.time.0));
        assert_eq!(all, [200]);
    }

    #[test]
    fn output_is_never_out_of_order_whatever_the_input() {
        // A deterministic pseudo-random stream of records with jitter, released in steps.
        let mut m = Watermark::new();
        let mut x: u64 = 12345;
        let mut last = 0;
        let mut count = 0;
        for step in 0..50u64 {
            let batch: Vec<Record> = (0..100)
                .map(|i| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    rec(step * 1000 + (x >> 54), i)
                })
                .collect();
            m.extend(batch);
            while m.release(Time(step * 1000), 7, |r| {
                assert!(r.time.0 >= last);
                last = r.time.0;
                count += 1;
            }) {}
        }
        m.release_all(|r| {
            assert!(r.time.0 >= last);
            last = r.time.0;
            count += 1;
        });
        assert_eq!(count, 5000);
    }

    /// The merge of runs hands out exactly what sorting everything pending each cycle
    /// did (the previous implementation, kept here as the reference): same records, same
    /// order, equal times in arrival order.
    #[test]
    fn the_merge_equals_a_stable_sort_of_everything_pending() {
        let mut m = Watermark::new();
        let mut reference: Vec<Record> = Vec::new();
        let mut x: u64 = 99;
        let mut tid = 0;
        for step in 0..40u64 {
            for _source in 0..(1 + step % 4) {
                let mut t = step * 1000;
                let batch: Vec<Record> = (0..(step % 7) * 20)
                    .map(|_| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        t += x >> 60; // sorted within the source, coarse: many ties
                        tid += 1;
                        rec(t + 500, tid)
                    })
                    .collect();
                reference.extend(batch.iter().cloned());
                m.extend(batch);
            }
            let w = Time(step * 1000);
            let mut got = Vec::new();
            while m.release(w, 5, |r| got.push(r)) {}
            reference.sort_by_key(|r| r.time);
            let n = reference.partition_point(|r| r.time <= w);
            let want: Vec<Record> = reference.drain(..n).collect();
            assert_eq!(got, want, "step {step}");
        }
        let mut got = Vec::new();
        m.release_all(|r| got.push(r));
        reference.sort_by_key(|r| r.time);
        assert_eq!(got, reference);
        assert_eq!(m.late_retimed(), 0);
        assert_eq!(m.pending(), 0);
    }
}
