//! The probe natives, called directly by a Java program (no rewriting involved): every
//! call becomes exactly one record, or one counted drop when the ring is full.

use crate::common::*;
use sonda_shm::records::{ENTER, LEAVE, LEAVE_EXCEPTION, THREAD_START, VM_INIT};
use sonda_shm::{Clock, Geometry};

/// A method filter, matching nothing here: the agent defines the probe class only when
/// methods are to be traced.
const PROBED: &str = "methods=ProbeCalls::none\n";

fn probe_calls(clock: Clock, jvm_args: &[&str]) {
    let classes = java_classes("ProbeCalls", true);
    let rec = Recording::new(PROBED, clock);
    let n = 5000u64;
    let before = now(clock);
    let out = rec.run_java(
        &classes,
        &[&["-Xverify:all"], jvm_args].concat(),
        "ProbeCalls",
        &[&n.to_string()],
    );
    let after = now(clock);
    assert_ok(&out);
    assert_eq!(tagged_lines(&out, "calls"), vec![vec![n.to_string()]]);
    let d = rec.drain();
    // Two threads called the probes: main and "second", each 4n records, in order.
    let callers: Vec<_> = d
        .slots
        .iter()
        .filter(|s| s.records.iter().any(|r| r.kind == ENTER))
        .collect();
    assert_eq!(
        callers.len(),
        2,
        "two threads called the probes: {:?}",
        d.slots.iter().map(|s| s.tid).collect::<Vec<_>>()
    );
    for s in callers {
        assert_eq!(s.dropped, 0);
        let probes: Vec<_> = s
            .records
            .iter()
            .filter(|r| matches!(r.kind, ENTER | LEAVE | LEAVE_EXCEPTION))
            .collect();
        assert_eq!(probes.len() as u64, 4 * n);
        for (i, r) in probes.iter().enumerate() {
            let i = i as u64;
            let (kind, arg) = match (i < 2 * n, i % 2) {
                (true, 0) => (ENTER, 7),
                (true, _) => (LEAVE, 7),
                (false, 0) => (ENTER, 9),
                (false, _) => (LEAVE_EXCEPTION, 9),
            };
            assert_eq!((r.kind, r.arg), (kind, arg), "record {i}");
        }
        // Time is on the header's clock: within the run and non-decreasing per thread.
        assert!(
            probes.windows(2).all(|w| w[0].time <= w[1].time),
            "time goes backwards"
        );
        assert!(
            probes[0].time >= before && probes[probes.len() - 1].time <= after,
            "time outside the run ({clock:?})"
        );
    }
    assert_eq!(d.no_slot_drops, 0);
}

#[test]
fn probe_calls_monotonic_clock() {
    probe_calls(Clock::Monotonic, &[]);
}

#[test]
fn probe_calls_tsc_clock() {
    probe_calls(Clock::Tsc, &[]);
}

/// JDK 17 critical natives: compiled callers use the `JavaCritical_` entry points,
/// interpreted ones the JNI ones; together still exactly one record per call.
#[test]
fn probe_calls_critical_natives() {
    probe_calls(
        Clock::Tsc,
        &["-XX:-PrintWarnings", "-XX:+CriticalJNINatives"],
    );
}

/// A ring of 64 records per thread: every push is a record or a counted drop. On the
/// thread "second" the pushes are exactly THREAD_START, 4n probes, THREAD_END.
#[test]
fn full_ring_drops_and_counts() {
    let classes = java_classes("ProbeCalls", true);
    let geo = Geometry {
        slots: 64,
        ring_len: 1024,
        meta_len: 1 << 20,
    };
    let rec = Recording::with_geometry(PROBED, Clock::Monotonic, geo);
    let n = 1000u64;
    let out = rec.run_java(&classes, &[], "ProbeCalls", &[&n.to_string()]);
    assert_ok(&out);
    let d = rec.drain();
    let second_tid = d.tid_of("second").expect("thread 'second' named");
    let second = d
        .slots
        .iter()
        .find(|s| s.tid == second_tid)
        .expect("slot of thread 'second'");
    assert_eq!(
        second.records.len(),
        64,
        "the ring holds exactly 1024/16 records"
    );
    assert_eq!(second.records[0].kind, THREAD_START);
    assert!(second.records[1..]
        .iter()
        .all(|r| r.kind == ENTER || r.kind == LEAVE));
    assert_eq!(second.records.len() as u64 + second.dropped, 4 * n + 2);
    // Main: VM_INIT, then its calls, then whatever it records at exit, all counted.
    let main_tid = d.tid_of("main").expect("main named");
    let main = d
        .slots
        .iter()
        .find(|s| s.tid == main_tid)
        .expect("slot of main");
    assert_eq!(main.records[0].kind, VM_INIT);
    assert_eq!(main.records.len(), 64);
    assert!(
        main.records.len() as u64 + main.dropped > 4 * n,
        "main: {} + {}",
        main.records.len(),
        main.dropped
    );
}

fn now(clock: Clock) -> u64 {
    match clock {
        // SAFETY: rdtsc has no preconditions on x86_64.
        Clock::Tsc => unsafe { core::arch::x86_64::_rdtsc() },
        Clock::Monotonic => {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: valid clock id and out-pointer.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        }
    }
}

/// One slot for the whole JVM: whichever thread records first owns it, every other
/// thread's events are counted as no-slot drops. Nothing is lost silently: the probe
/// calls are all either a record, a ring drop or a no-slot drop (plus a few thread and
/// VM events that compete for the same slot).
#[test]
fn threads_without_a_slot_count_their_events() {
    let classes = java_classes("ProbeCalls", true);
    let geo = Geometry {
        slots: 1,
        ring_len: 1 << 20,
        meta_len: 1 << 20,
    };
    let rec = Recording::with_geometry(
        &format!("{PROBED}gc=0\nmonitors=0\n"),
        Clock::Monotonic,
        geo,
    );
    let n = 3000u64;
    let out = rec.run_java(&classes, &[], "ProbeCalls", &[&n.to_string()]);
    assert_ok(&out);
    let d = rec.drain();
    assert_eq!(d.slots.len(), 1);
    let probes = d.slots[0]
        .records
        .iter()
        .filter(|r| matches!(r.kind, ENTER | LEAVE | LEAVE_EXCEPTION))
        .count() as u64;
    let accounted = probes + d.slots[0].dropped + d.no_slot_drops;
    assert!(d.no_slot_drops > 0);
    assert!(
        (8 * n..8 * n + 100).contains(&accounted),
        "{probes} records + {} dropped + {} no-slot for {} calls",
        d.slots[0].dropped,
        d.no_slot_drops,
        8 * n
    );
}
