//! Decoding of the records the BPF scheduler programs write (`bpf/sched.bpf.c`) from
//! byte slices (no I/O, no `unsafe`).
//!
//! Every record is 48 bytes, in the machine's byte order; an exec adds its file name:
//!
//! ```text
//!  0 time u64 (CLOCK_MONOTONIC)   8 current u32 (running tid)   12 kind u16   14 cpu u16
//! 16 a u32                        20 b u32                      24 c u64      32 text [16]
//! 48 filename [256]  (exec only)
//! ```
//!
//! A switch's text holds the run-queue wait ending with its switch-in as the kernel
//! measures it (`u64` at 32, all ones when not known), flags (`u8` at 40: 1 the task
//! leaving is traced, 2 the one arriving is, 4 the clock was read) and its time less
//! the run queue's clock, low 32 bits (`u32` at 44, as a charge's `b`). A charge's text
//! holds the task's `sched_info.run_delay` (`u64` at 32) and its wall time on its CPU
//! since its switch-in by its run queue's clock (`u64` at 40), each all ones when the
//! task is not traced. A migration's text holds the task's `sched_info.run_delay` as
//! the move left it (`u64` at 32: a queued task is dequeued first, its wait so far
//! added).
//!
//! The layout is this crate's own, fixed by the C file beside it: unlike a tracepoint's
//! payload it does not change with the kernel (the programs read the kernel's
//! structures through BTF relocations), so no format file is read.

use sonda_trace::{ChargedBy, Cpu, Event, Pid, Record, Tid, Time};

use super::bytes::{u16_at, u32_at, u64_at};

/// Bytes of a record.
pub const RECORD_BYTES: usize = 48;
/// Bytes of an exec's file name after its record.
pub const FILENAME_BYTES: usize = 256;

const K_SWITCH: u16 = 1;
const K_WAKING: u16 = 2;
const K_WAKEUP: u16 = 3;
const K_WAKEUP_NEW: u16 = 4;
const K_NEWTASK: u16 = 5;
const K_EXIT: u16 = 6;
const K_EXEC: u16 = 7;
const K_RENAME: u16 = 8;
const K_MIGRATE: u16 = 9;
const K_CHARGE: u16 = 10;

/// One decoded record.
#[derive(Clone, Debug, PartialEq)]
pub struct BpfHit {
    /// The event at its time.
    pub record: Record,
    /// The task running when it was written (0: idle).
    pub current: u32,
    /// The CPU whose program wrote it.
    pub cpu: u16,
    /// A migration or a CPU-time charge: events the kernel writes about a task from any
    /// task's context, which the ftrace source reads from its unfiltered instance and
    /// which take part in the per-CPU queue only to date recovered switches
    /// (`CpuQueue::unfiltered_event`).
    pub side: bool,
    /// A switch: the kernel's run-queue wait of the task arriving, ending now (`None`
    /// when not known or not traced).
    pub wait_ns: Option<u64>,
    /// A switch: whether the task leaving is traced.
    pub prev_traced: bool,
    /// A switch: whether the task arriving is traced.
    pub next_traced: bool,
    /// A CPU-time charge of a traced task: its `sched_info.run_delay` (schedstat's
    /// waiting up to its last switch-in); a migration: the same as the move left it
    /// (a queued task's wait until the move included).
    pub run_delay: Option<u64>,
    /// A CPU-time charge of a traced task: the wall time it has been on its CPU since
    /// its switch-in, by its run queue's clock (`sched_info.last_arrival`), which
    /// counts what the charges leave out (steal).
    pub on_cpu_ns: Option<u64>,
    /// A charge with `on_cpu_ns`, and a switch: the record's time less the run queue's
    /// clock it was measured (a switch: dated) by, low 32 bits (differences of two are
    /// what matter: see `ClockLag`, `switch_clock`).
    pub clock_lag: Option<u32>,
}

#[cfg(test)]
impl BpfHit {
    /// A record as the programs would give it, with nothing beside it known.
    pub(crate) fn plain(record: Record, current: u32) -> BpfHit {
        BpfHit {
            record,
            current,
            cpu: 0,
            side: false,
            wait_ns: None,
            prev_traced: false,
            next_traced: false,
            run_delay: None,
            on_cpu_ns: None,
            clock_lag: None,
        }
    }
}

const PREV_TRACED: u8 = 1;
const NEXT_TRACED: u8 = 2;
/// A switch: the program read its run queue's clock.
const CLOCK_KNOWN: u8 = 4;

/// The `u64` at `at`, `None` inside when it is all ones (the programs' "not known").
fn known_u64_at(b: &[u8], at: usize) -> Option<Option<u64>> {
    Some(Some(u64_at(b, at)?).filter(|&v| v != u64::MAX))
}

/// A NUL-terminated string in `b[at..at + len]` (all of it when there is no NUL).
fn str_at(b: &[u8], at: usize, len: usize) -> Option<String> {
    let bytes = b.get(at..at + len)?;
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(len);
    Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

/// Decodes one record; `None` for an unknown kind or a record too short for it.
pub fn decode(b: &[u8]) -> Option<BpfHit> {
    let time = u64_at(b, 0)?;
    let current = u32_at(b, 8)?;
    let kind = u16_at(b, 12)?;
    let cpu = u16_at(b, 14)?;
    let (a, bb, c) = (u32_at(b, 16)?, u32_at(b, 20)?, u64_at(b, 24)?);
    let text = || str_at(b, 32, 16);
    let mut side = false;
    let (mut wait_ns, mut prev_traced, mut next_traced) = (None, false, false);
    let (mut run_delay, mut on_cpu_ns) = (None, None);
    let mut clock_lag = None;
    let event = match kind {
        K_SWITCH => {
            wait_ns = known_u64_at(b, 32)?;
            let flags = *b.get(40)?;
            prev_traced = flags & PREV_TRACED != 0;
            next_traced = flags & NEXT_TRACED != 0;
            clock_lag = (flags & CLOCK_KNOWN != 0).then_some(u32_at(b, 44)?);
            Event::Switch {
                cpu: Cpu(cpu),
                prev: Tid(a),
                prev_state: c,
                next: Tid(bb),
                charge: None,
            }
        }
        K_WAKING => Event::Waking {
            cpu: Cpu(cpu),
            waker: Tid(current),
            wakee: Tid(a),
        },
        K_WAKEUP | K_WAKEUP_NEW => Event::Wakeup {
            target: Cpu(bb as u16),
            wakee: Tid(a),
            new_task: kind == K_WAKEUP_NEW,
            waking: None,
        },
        // The program gives the new task's process (its tgid) itself.
        K_NEWTASK => Event::NewTask {
            parent: Tid(current),
            child: Tid(a),
            pid: Pid(bb),
            comm: text()?,
        },
        K_EXIT => Event::TaskExit { tid: Tid(a) },
        K_EXEC => Event::Exec {
            pid: Pid(a),
            tid: Tid(current),
            filename: str_at(b, RECORD_BYTES, FILENAME_BYTES)?,
        },
        K_RENAME => Event::Rename {
            tid: Tid(a),
            comm: text()?,
        },
        K_MIGRATE => {
            side = true;
            run_delay = known_u64_at(b, 32)?;
            Event::Migrate {
                tid: Tid(a),
                from: Cpu(bb as u16),
                to: Cpu(c as u16),
            }
        }
        K_CHARGE => {
            side = true;
            clock_lag = Some(bb);
            run_delay = known_u64_at(b, 32)?;
            on_cpu_ns = known_u64_at(b, 40)?;
            Event::CpuTime {
                tid: Tid(a),
                ns: c,
                by: ChargedBy::of(Tid(a), Tid(current)),
            }
        }
        _ => return None,
    };
    b.get(..RECORD_BYTES)?;
    Some(BpfHit {
        record: Record {
            time: Time(time),
            event,
        },
        current,
        cpu,
        side,
        wait_ns,
        prev_traced,
        next_traced,
        run_delay,
        on_cpu_ns,
        clock_lag,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A record as the C program lays it out.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn raw(
        time: u64,
        current: u32,
        kind: u16,
        cpu: u16,
        a: u32,
        b: u32,
        c: u64,
        text: &str,
    ) -> Vec<u8> {
        let mut r = Vec::with_capacity(RECORD_BYTES);
        r.extend_from_slice(&time.to_ne_bytes());
        r.extend_from_slice(&current.to_ne_bytes());
        r.extend_from_slice(&kind.to_ne_bytes());
        r.extend_from_slice(&cpu.to_ne_bytes());
        r.extend_from_slice(&a.to_ne_bytes());
        r.extend_from_slice(&b.to_ne_bytes());
        r.extend_from_slice(&c.to_ne_bytes());
        let mut t = [0u8; 16];
        t[..text.len()].copy_from_slice(text.as_bytes());
        r.extend_from_slice(&t);
        r
    }

    #[test]
    fn each_kind_decodes_to_its_event() {
        let mut switch = raw(5, 10, K_SWITCH, 1, 10, 11, 0x1, "");
        switch[32..40].copy_from_slice(&1234u64.to_ne_bytes());
        switch[40] = PREV_TRACED | CLOCK_KNOWN;
        switch[44..48].copy_from_slice(&0x89ab_cdefu32.to_ne_bytes());
        let hit = decode(&switch).unwrap();
        assert_eq!(
            (hit.wait_ns, hit.prev_traced, hit.next_traced, hit.clock_lag),
            (Some(1234), true, false, Some(0x89ab_cdef))
        );
        switch[40] = NEXT_TRACED;
        let next = decode(&switch).unwrap();
        assert_eq!(
            (next.prev_traced, next.next_traced, next.clock_lag),
            (false, true, None)
        );
        switch[32..40].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(decode(&switch).unwrap().wait_ns, None);
        assert_eq!(
            hit.record.event,
            Event::Switch {
                cpu: Cpu(1),
                prev: Tid(10),
                prev_state: 1,
                next: Tid(11),
                charge: None,
            }
        );
        assert_eq!(
            (hit.record.time, hit.current, hit.cpu, hit.side),
            (Time(5), 10, 1, false)
        );
        let hit = decode(&raw(6, 7, K_NEWTASK, 0, 12, 7, 0x10000, "java")).unwrap();
        assert_eq!(
            hit.record.event,
            Event::NewTask {
                parent: Tid(7),
                child: Tid(12),
                pid: Pid(7),
                comm: "java".into()
            }
        );
        let mut charge = raw(7, 3, K_CHARGE, 1, 12, 0, 4000, "");
        charge[32..48].copy_from_slice(&[0xff; 16]);
        let unknown = decode(&charge).unwrap();
        assert_eq!((unknown.run_delay, unknown.on_cpu_ns), (None, None));
        charge[40..48].copy_from_slice(&4321u64.to_ne_bytes());
        assert_eq!(decode(&charge).unwrap().on_cpu_ns, Some(4321));
        // The clock's lag in the second task's word.
        charge[20..24].copy_from_slice(&0xfedc_ba98u32.to_ne_bytes());
        assert_eq!(decode(&charge).unwrap().clock_lag, Some(0xfedc_ba98));
        charge[32..40].copy_from_slice(&5678u64.to_ne_bytes());
        let hit = decode(&charge).unwrap();
        assert_eq!(hit.run_delay, Some(5678));
        assert!(hit.side);
        assert_eq!(
            hit.record.event,
            Event::CpuTime {
                tid: Tid(12),
                ns: 4000,
                by: ChargedBy::Other,
            }
        );
        // Written by the thread itself (its tick, its switch).
        let own = decode(&raw(7, 12, K_CHARGE, 1, 12, 0, 4000, "")).unwrap();
        assert!(matches!(
            own.record.event,
            Event::CpuTime {
                by: ChargedBy::Itself,
                ..
            }
        ));
        let mut bytes = raw(8, 3, K_MIGRATE, 1, 12, 0, 1, "");
        bytes[32..40].copy_from_slice(&8_500_000u64.to_ne_bytes());
        let hit = decode(&bytes).unwrap();
        assert!(hit.side);
        assert_eq!(hit.run_delay, Some(8_500_000));
        assert_eq!(
            hit.record.event,
            Event::Migrate {
                tid: Tid(12),
                from: Cpu(0),
                to: Cpu(1)
            }
        );
        let hit = decode(&raw(9, 3, K_WAKING, 0, 12, 0, 0, "")).unwrap();
        assert_eq!(
            hit.record.event,
            Event::Waking {
                cpu: Cpu(0),
                waker: Tid(3),
                wakee: Tid(12)
            }
        );
        let hit = decode(&raw(9, 3, K_WAKEUP_NEW, 0, 12, 1, 0, "")).unwrap();
        assert_eq!(
            hit.record.event,
            Event::Wakeup {
                target: Cpu(1),
                wakee: Tid(12),
                new_task: true,
                waking: None,
            }
        );
        let hit = decode(&raw(9, 3, K_RENAME, 0, 12, 0, 0, "0123456789abcdef")).unwrap();
        assert_eq!(
            hit.record.event,
            Event::Rename {
                tid: Tid(12),
                comm: "0123456789abcdef".into()
            }
        );
        let mut exec = raw(9, 3, K_EXEC, 0, 3, 0, 0, "");
        let mut name = [0u8; FILENAME_BYTES];
        name[..8].copy_from_slice(b"/bin/sh\0");
        exec.extend_from_slice(&name);
        assert_eq!(
            decode(&exec).unwrap().record.event,
            Event::Exec {
                pid: Pid(3),
                tid: Tid(3),
                filename: "/bin/sh".into()
            }
        );
    }

    #[test]
    fn short_records_and_unknown_kinds_do_not_decode() {
        let r = raw(5, 10, K_SWITCH, 1, 10, 11, 0x1, "");
        assert!(decode(&r[..40]).is_none());
        assert!(decode(&raw(5, 10, 99, 1, 10, 11, 0x1, "")).is_none());
        // An exec without its file name.
        assert!(decode(&raw(9, 3, K_EXEC, 0, 3, 0, 0, "")).is_none());
    }
}
