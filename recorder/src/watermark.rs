//! The in-order release of a recording's records: records of every source wait here
//! until they are older than the watermark (now − `--lag`), then go out in time order.
//! Not a merge of trace files (that is `sonda_trace::merge`): the sources' records
//! arrive interleaved and slightly out of order within one recording, and this holds
//! them back just long enough to put them in order.
//!
//! ```text
//!  CPU 0 ring ─┐  (each CPU's records nearly in order)
//!  CPU 1 ring ─┼─▶ pending (sorted each cycle) ──▶ records at or before the watermark
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

use sonda_trace::{Record, Time};

/// Records waiting for the watermark, released in time order.
#[derive(Default)]
pub struct Watermark {
    pending: Vec<Record>,
    /// Time of the last record handed out.
    last: Time,
    late: u64,
}

impl Watermark {
    /// Nothing pending.
    pub fn new() -> Watermark {
        Watermark::default()
    }

    /// Adds records (of any source, in any order).
    pub fn extend(&mut self, records: impl IntoIterator<Item = Record>) {
        self.pending.extend(records);
    }

    /// Hands out, in time order, every pending record at or before `watermark`.
    pub fn release(&mut self, watermark: Time, out: impl FnMut(Record)) {
        // Pending records are a concatenation of sorted runs: the stable sort merges runs
        // in near-linear time and keeps arrival order among equal times.
        self.pending.sort_by_key(|r| r.time);
        let n = self.pending.partition_point(|r| r.time <= watermark);
        self.emit(n, out);
    }

    /// Hands out everything pending, in time order (the end of a recording).
    pub fn release_all(&mut self, out: impl FnMut(Record)) {
        self.pending.sort_by_key(|r| r.time);
        self.emit(self.pending.len(), out);
    }

    fn emit(&mut self, n: usize, mut out: impl FnMut(Record)) {
        for mut r in self.pending.drain(..n) {
            if r.time < self.last {
                r.time = self.last;
                self.late += 1;
            }
            self.last = r.time;
            out(r);
        }
    }

    /// Records written later than their time (see the module docs).
    pub fn late_retimed(&self) -> u64 {
        self.late
    }

    /// Number of records waiting.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.pending.len()
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
        m.release(Time(watermark), |r| {
            out.push((r.time.0, r.event.tid().unwrap().0))
        });
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
            m.release(Time(step * 1000), |r| {
                assert!(r.time.0 >= last);
                last = r.time.0;
                count += 1;
            });
        }
        m.release_all(|r| {
            assert!(r.time.0 >= last);
            last = r.time.0;
            count += 1;
        });
        assert_eq!(count, 5000);
    }
}
