//! A thread's drained ring bytes kept as they came, and read one record at a time when
//! the watermark releases them.
//!
//! At ten million events a second, turning every drained ring record into a
//! [`Record`] at drain time (32 bytes each, written, sorted with the others, moved
//! into a run, read back) cost more than the rest of the collector put together. A
//! thread's ring records are already in time order, 16 bytes each: kept in the bytes
//! the drain copied, they need no sort, and each is decoded once, at the moment it is
//! written to the trace. Only the time is touched before: converted in place to trace
//! time once the drain's calibration point is taken.
//!
//! Bytes that cannot be kept this way (a function record that needs the collector's
//! address-to-id table, a kind this collector does not know, records out of time order)
//! are decoded at drain time as before ([`scan`] says which).

use sonda_shm::records::{self, decode_at};
use sonda_trace::{Pid, Record, Tid, Time};

use super::ring_map;

/// What [`scan`] found in drained bytes that can be kept packed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scan {
    /// Records in the bytes.
    pub records: u64,
    /// Raw time of the last record.
    pub last_raw: u64,
}

/// Whether drained ring bytes can be kept packed: every record whole, of a kind that
/// converts without the collector's state, in time order. `None` if not, or if empty.
pub fn scan(bytes: &[u8]) -> Option<Scan> {
    let mut pos = 0;
    let mut records = 0;
    let mut last = 0;
    while pos < bytes.len() {
        let (rec, next) = decode_at(bytes, pos)?;
        if rec.time < last || !packable(rec.kind) {
            return None;
        }
        last = rec.time;
        records += 1;
        pos = next;
    }
    (records > 0).then_some(Scan {
        records,
        last_raw: last,
    })
}

/// Kinds whose event is a function of the record alone (see [`ring_map::event`]).
fn packable(kind: u8) -> bool {
    matches!(
        kind,
        records::ENTER
            | records::LEAVE
            | records::LEAVE_EXCEPTION
            | records::THREAD_START
            | records::THREAD_END
            | records::VM_INIT
            | records::VM_DEATH
            | records::GC_START
            | records::GC_END
            | records::MONITOR_CONTENDED
            | records::MONITOR_ENTERED
            | records::USER
    )
}

/// One drain of one thread's ring, whole records that passed [`scan`], read from the
/// front.
#[derive(Debug)]
pub struct PackedRun {
    bytes: Vec<u8>,
    pos: usize,
    pid: Pid,
    tid: Tid,
}

impl PackedRun {
    /// Bytes that passed [`scan`], of thread `tid` of process `pid`.
    pub fn new(bytes: Vec<u8>, pid: Pid, tid: Tid) -> PackedRun {
        PackedRun {
            bytes,
            pos: 0,
            pid,
            tid,
        }
    }

    /// Rewrites every record's time with `convert(raw)` (a non-decreasing function,
    /// so the run stays in order).
    pub fn convert_times(&mut self, mut convert: impl FnMut(u64) -> u64) {
        let mut pos = self.pos;
        while let Some((rec, next)) = decode_at(&self.bytes, pos) {
            self.bytes[pos..pos + 8].copy_from_slice(&convert(rec.time).to_le_bytes());
            pos = next;
        }
    }

    /// The time of the next record.
    #[inline]
    pub fn front_time(&self) -> Option<Time> {
        let b = self.bytes.get(self.pos..self.pos + 8)?;
        Some(Time(u64::from_le_bytes(b.try_into().unwrap())))
    }

    /// Takes the next record.
    #[inline]
    pub fn pop(&mut self) -> Option<Record> {
        loop {
            let Some((rec, next)) = decode_at(&self.bytes, self.pos) else {
                // Only whole records pass scan(); should a cut one be left, the run
                // ends here (so that front_time() agrees).
                self.pos = self.bytes.len();
                return None;
            };
            self.pos = next;
            // scan() let through only kinds that map; any other is skipped.
            if let Some(event) = ring_map::event(&rec, self.pid, self.tid) {
                return Some(Record {
                    time: Time(rec.time),
                    event,
                });
            }
        }
    }

    /// Records left.
    #[cfg(test)]
    pub fn remaining(&self) -> usize {
        let mut pos = self.pos;
        let mut n = 0;
        while let Some((_, next)) = decode_at(&self.bytes, pos) {
            n += 1;
            pos = next;
        }
        n
    }

    /// The buffer, emptied, for reuse.
    pub fn into_buffer(self) -> Vec<u8> {
        let mut b = self.bytes;
        b.clear();
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_shm::records::head;
    use sonda_trace::Event;

    fn unit(bytes: &mut Vec<u8>, time: u64, kind: u8, extra_units: u8, arg: u32) {
        bytes.extend_from_slice(&time.to_le_bytes());
        bytes.extend_from_slice(&head(kind, extra_units, 0).to_le_bytes());
        bytes.extend_from_slice(&arg.to_le_bytes());
        for _ in 0..extra_units {
            bytes.extend_from_slice(&[7u8; 16]);
        }
    }

    #[test]
    fn keeps_ordered_java_records_and_reads_them_back_converted() {
        let mut b = Vec::new();
        unit(&mut b, 10, records::ENTER, 0, 3);
        unit(&mut b, 12, records::USER, 1, 9);
        unit(&mut b, 12, records::LEAVE, 0, 3);
        assert_eq!(
            scan(&b),
            Some(Scan {
                records: 3,
                last_raw: 12
            })
        );
        let mut run = PackedRun::new(b, Pid(1), Tid(2));
        run.convert_times(|t| t * 100);
        assert_eq!(run.remaining(), 3);
        assert_eq!(run.front_time(), Some(Time(1000)));
        let all: Vec<Record> = std::iter::from_fn(|| run.pop()).collect();
        assert_eq!(
            all[0],
            Record {
                time: Time(1000),
                event: Event::Enter {
                    tid: Tid(2),
                    method: 3
                }
            }
        );
        assert_eq!(
            all[1].event,
            Event::User {
                tid: Tid(2),
                kind: 9,
                value: u64::from_le_bytes([7; 8])
            }
        );
        assert_eq!(all[2].time, Time(1200));
        assert_eq!(run.front_time(), None);
        assert!(run.into_buffer().is_empty());
    }

    #[test]
    fn refuses_what_needs_decoding_at_drain() {
        let mut b = Vec::new();
        assert_eq!(scan(&b), None, "empty");
        unit(&mut b, 10, records::ENTER, 0, 3);
        unit(&mut b, 9, records::LEAVE, 0, 3);
        assert_eq!(scan(&b), None, "out of order");
        let mut b = Vec::new();
        unit(&mut b, 10, records::FUNC_ENTER, 0, 3);
        assert_eq!(scan(&b), None, "function address: the collector's table");
        let mut b = Vec::new();
        unit(&mut b, 10, 200, 0, 3);
        assert_eq!(scan(&b), None, "unknown kind");
        let mut b = Vec::new();
        unit(&mut b, 10, records::USER, 1, 3);
        b.truncate(20);
        assert_eq!(scan(&b), None, "cut record");
    }
}
