//! Decoding of perf ring-buffer records from byte slices (no I/O, no `unsafe`): the
//! ring reader hands over each record's type and body, this module says what is in it.
//!
//! sonda opens every tracepoint with `sample_type = TID | TIME | CPU | RAW` and
//! `sample_id_all`, so the layouts are (perf_event_open(2), "MMAP layout"):
//!
//! ```text
//! PERF_RECORD_SAMPLE: u32 pid, u32 tid, u64 time, u32 cpu, u32 res, u32 size, u8 raw[size]
//! PERF_RECORD_LOST:   u64 id, u64 lost, then sample_id: u32 pid, u32 tid, u64 time,
//!                     u32 cpu, u32 res
//! PERF_RECORD_SWITCH_CPU_WIDE: u32 next_prev_pid, u32 next_prev_tid, then sample_id
//! ```
//!
//! Switch records come from a `context_switch` event on every CPU: one in the context
//! of the task leaving a CPU (`misc` has `PERF_RECORD_MISC_SWITCH_OUT`; the other task is
//! the next one) and one in the context of the task arriving (the other task is the
//! previous one).
//!
//! The RAW payload of a tracepoint starts with the common fields; its first u16
//! (`common_type`) is the tracepoint id, which tells the tracepoints sharing one ring
//! apart.

use super::bytes::{u32_at, u64_at};
use super::sched_events::Hit;

/// `PERF_RECORD_LOST`: the kernel dropped records because the ring was full.
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_SAMPLE`: one tracepoint hit.
pub const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_SWITCH_CPU_WIDE`: a task left or arrived on a CPU.
pub const PERF_RECORD_SWITCH_CPU_WIDE: u32 = 15;
/// `misc` bit of a switch record: the current task is leaving.
const MISC_SWITCH_OUT: u16 = 1 << 13;

/// One tracepoint sample.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Sample<'a> {
    /// Process of the task that hit the tracepoint.
    pub pid: u32,
    /// That task's thread id.
    pub tid: u32,
    /// When, on the event's clock (CLOCK_MONOTONIC with `use_clockid`).
    pub time: u64,
    /// The CPU it happened on.
    pub cpu: u32,
    /// The tracepoint payload.
    pub raw: &'a [u8],
}

impl<'a> Sample<'a> {
    /// The hit, for [`super::sched_events::SchedDecoder`].
    pub fn hit(&self) -> Hit<'a> {
        Hit {
            tid: self.tid,
            cpu: self.cpu,
            raw: self.raw,
        }
    }
}

/// What a ring record holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PerfRecord<'a> {
    /// A tracepoint hit.
    Sample(Sample<'a>),
    /// `lost` records were dropped; `time` is when the kernel noticed.
    Lost {
        /// How many records the kernel dropped.
        lost: u64,
        /// When the kernel noticed (perf clock, ns).
        time: u64,
        /// The CPU whose ring lost them.
        cpu: u32,
    },
    /// Task `tid` arrived on `cpu` after task `prev` (switch-in records only; switch-out
    /// records come as [`PerfRecord::Other`]).
    SwitchIn {
        /// The task switched in.
        tid: u32,
        /// The task switched out before it.
        prev: u32,
        /// When (perf clock, ns).
        time: u64,
        /// The CPU.
        cpu: u32,
    },
    /// A record type sonda does not use (ignored).
    Other(u32),
}

/// A record body shorter than its layout: a kernel that does not follow the ABI, or a
/// reader bug; never expected.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Truncated {
    /// The record type.
    pub ty: u32,
    /// The body length found.
    pub len: usize,
}

impl std::fmt::Display for Truncated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "perf record of type {} is too short ({} bytes)",
            self.ty, self.len
        )
    }
}

/// Decodes the body (the bytes after the 8-byte `perf_event_header`) of a record of
/// type `ty` with header bits `misc`.
pub fn parse(ty: u32, misc: u16, body: &[u8]) -> Result<PerfRecord<'_>, Truncated> {
    let short = Truncated {
        ty,
        len: body.len(),
    };
    match ty {
        PERF_RECORD_SAMPLE => {
            let pid = u32_at(body, 0).ok_or(short)?;
            let tid = u32_at(body, 4).ok_or(short)?;
            let time = u64_at(body, 8).ok_or(short)?;
            let cpu = u32_at(body, 16).ok_or(short)?;
            let size = u32_at(body, 24).ok_or(short)? as usize;
            let raw = body.get(28..28 + size).ok_or(short)?;
            Ok(PerfRecord::Sample(Sample {
                pid,
                tid,
                time,
                cpu,
                raw,
            }))
        }
        PERF_RECORD_LOST => {
            let lost = u64_at(body, 8).ok_or(short)?;
            let time = u64_at(body, 24).ok_or(short)?;
            let cpu = u32_at(body, 32).ok_or(short)?;
            Ok(PerfRecord::Lost { lost, time, cpu })
        }
        PERF_RECORD_SWITCH_CPU_WIDE if misc & MISC_SWITCH_OUT == 0 => {
            let prev = u32_at(body, 4).ok_or(short)?;
            let tid = u32_at(body, 12).ok_or(short)?;
            let time = u64_at(body, 16).ok_or(short)?;
            let cpu = u32_at(body, 24).ok_or(short)?;
            Ok(PerfRecord::SwitchIn {
                tid,
                prev,
                time,
                cpu,
            })
        }
        other => Ok(PerfRecord::Other(other)),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a sample body the way the kernel lays it out (the raw size field is
    /// followed by the payload and padding to 8 bytes).
    pub(crate) fn sample_body(pid: u32, tid: u32, time: u64, cpu: u32, raw: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_ne_bytes());
        b.extend_from_slice(&tid.to_ne_bytes());
        b.extend_from_slice(&time.to_ne_bytes());
        b.extend_from_slice(&cpu.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        b.extend_from_slice(raw);
        while (b.len() + 8) % 8 != 0 {
            b.push(0);
        }
        b
    }

    #[test]
    fn decodes_a_sample() {
        let mut raw = vec![0u8; 68];
        raw[0..2].copy_from_slice(&372u16.to_ne_bytes());
        let body = sample_body(10, 11, 123_456_789, 1, &raw);
        match parse(PERF_RECORD_SAMPLE, 0, &body).unwrap() {
            PerfRecord::Sample(s) => {
                assert_eq!((s.pid, s.tid, s.time, s.cpu), (10, 11, 123_456_789, 1));
                assert_eq!(s.raw.len(), 68);
                assert_eq!(s.hit().raw[0..2], 372u16.to_ne_bytes());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn decodes_a_lost_record_with_its_sample_id() {
        let mut body = Vec::new();
        body.extend_from_slice(&7u64.to_ne_bytes()); // id
        body.extend_from_slice(&321u64.to_ne_bytes()); // lost
        body.extend_from_slice(&0u32.to_ne_bytes()); // pid
        body.extend_from_slice(&0u32.to_ne_bytes()); // tid
        body.extend_from_slice(&999u64.to_ne_bytes()); // time
        body.extend_from_slice(&1u32.to_ne_bytes()); // cpu
        body.extend_from_slice(&0u32.to_ne_bytes()); // res
        assert_eq!(
            parse(PERF_RECORD_LOST, 0, &body).unwrap(),
            PerfRecord::Lost {
                lost: 321,
                time: 999,
                cpu: 1
            }
        );
    }

    #[test]
    fn decodes_switch_in_records_and_skips_switch_outs() {
        let mut body = Vec::new();
        for v in [40u32, 41, 50, 51] {
            body.extend_from_slice(&v.to_ne_bytes()); // prev pid, prev tid, pid, tid
        }
        body.extend_from_slice(&1234u64.to_ne_bytes());
        body.extend_from_slice(&1u32.to_ne_bytes());
        body.extend_from_slice(&0u32.to_ne_bytes());
        assert_eq!(
            parse(PERF_RECORD_SWITCH_CPU_WIDE, 0, &body).unwrap(),
            PerfRecord::SwitchIn {
                tid: 51,
                prev: 41,
                time: 1234,
                cpu: 1
            }
        );
        assert_eq!(
            parse(PERF_RECORD_SWITCH_CPU_WIDE, MISC_SWITCH_OUT, &body).unwrap(),
            PerfRecord::Other(PERF_RECORD_SWITCH_CPU_WIDE)
        );
        assert!(parse(PERF_RECORD_SWITCH_CPU_WIDE, 0, &body[..20]).is_err());
    }

    #[test]
    fn short_bodies_are_errors_not_panics() {
        let body = sample_body(1, 2, 3, 0, &[0u8; 40]);
        for cut in 0..body.len() - 4 {
            // Any cut inside the header or the payload fails cleanly.
            if cut < 28 + 40 {
                assert!(
                    parse(PERF_RECORD_SAMPLE, 0, &body[..cut]).is_err(),
                    "cut at {cut}"
                );
            }
        }
        assert!(parse(PERF_RECORD_LOST, 0, &[0u8; 20]).is_err());
        assert_eq!(parse(3, 0, &[]).unwrap(), PerfRecord::Other(3));
    }
}
