//! JVM events recorded by the agent in a real JVM, checked against what the Java
//! program and the kernel say (tids from /proc/thread-self/stat, /proc/self/task comm).

use std::collections::BTreeMap;

use crate::common::*;
use sonda_shm::records::{
    GC_END, GC_START, MONITOR_CONTENDED, MONITOR_ENTERED, THREAD_END, THREAD_START, VM_DEATH,
    VM_INIT,
};
use sonda_shm::{Clock, SlotState};
use sonda_trace::{Meta, Runtime};

const NAMES: [&str; 7] = [
    "worker-1",
    "Ünïcödé ☃ thread",
    "emoji 😀 thread",
    "quote \"#7\" odd prio=1 nid=0x1",
    "a-very-long-thread-name-beyond-15-bytes",
    "dup",
    "dup",
];

#[test]
fn threads_are_named_with_their_kernel_tid() {
    let classes = java_classes("ThreadNames", false);
    let rec = Recording::new("", Clock::Monotonic);
    let out = rec.run_java(&classes, &[], "ThreadNames", &[]);
    assert_ok(&out);
    let d = rec.drain();
    let pid = match d.metas.first() {
        Some(Meta::Process {
            pid,
            name,
            runtime: Runtime::Java,
            ..
        }) => {
            assert_eq!(name, "ThreadNames");
            pid.0
        }
        other => panic!("first metadata should be the process: {other:?}"),
    };
    assert!(d.slots.iter().all(|s| s.pid == pid));
    let named: Vec<(u32, String, bool)> = d
        .metas
        .iter()
        .filter_map(|m| match m {
            Meta::JavaThread {
                pid: p,
                tid,
                name,
                daemon,
            } => {
                assert_eq!(p.0, pid);
                Some((tid.0, name.clone(), *daemon))
            }
            _ => None,
        })
        .collect();
    // Each thread printed its index, its tid (from /proc/thread-self/stat) and daemon.
    let truth = tagged_lines(&out, "thread");
    assert_eq!(truth.len(), NAMES.len() + 1);
    for t in &truth {
        let index: i32 = t[0].parse().unwrap();
        let tid: u32 = t[1].parse().unwrap();
        let daemon = t[2] == "true";
        let name = if index < 0 {
            "main"
        } else {
            NAMES[index as usize]
        };
        assert!(
            named.contains(&(tid, name.to_string(), daemon)),
            "thread {name:?} (tid {tid}, daemon {daemon}) not named right; named: {named:?}"
        );
        if index >= 0 {
            // Started while recording: THREAD_START first and THREAD_END last in its own
            // slot, which it gave back.
            let slot = d
                .slots
                .iter()
                .find(|s| s.tid == tid)
                .expect("worker has a slot");
            assert_eq!(slot.records.first().map(|r| r.kind), Some(THREAD_START));
            assert_eq!(slot.records.last().map(|r| r.kind), Some(THREAD_END));
            assert_eq!(slot.state, SlotState::Retired);
        }
    }
    // The launcher's main thread re-attaches as "DestroyJavaVM" at exit: still "main".
    assert!(!named.iter().any(|n| n.1 == "DestroyJavaVM"), "{named:?}");
    // Threads alive before VMInit: named with the tid whose kernel name matches.
    let comms: BTreeMap<u32, String> = tagged_lines(&out, "task")
        .into_iter()
        .map(|t| (t[0].parse().unwrap(), t[1].clone()))
        .collect();
    for system in [
        "Reference Handler",
        "Finalizer",
        "Signal Dispatcher",
        "C2 CompilerThread0",
        "C1 CompilerThread0",
    ] {
        let (tid, _, daemon) = named
            .iter()
            .find(|n| n.1 == system)
            .unwrap_or_else(|| panic!("{system} not named: {named:?}"));
        assert!(daemon, "{system} is a daemon");
        let cut: String = system.chars().take(15).collect();
        assert_eq!(
            comms.get(tid),
            Some(&cut),
            "{system}: tid {tid} has another kernel name"
        );
    }
    // The main thread recorded VM_INIT; VM_DEATH came last.
    let main_tid: u32 = truth.iter().find(|t| t[0] == "-1").unwrap()[1]
        .parse()
        .unwrap();
    assert_eq!(d.records_of(main_tid, VM_INIT).len(), 1);
    assert_eq!(d.all_of(VM_DEATH).len(), 1);
    assert_eq!(d.counter("agent.threads_unnamed"), Some(0));
    assert!(d.warnings().is_empty(), "warnings: {:?}", d.warnings());
}

#[test]
fn garbage_collections_are_recorded_on_the_vm_thread() {
    let classes = java_classes("Gc", false);
    for (gc, flag) in [
        ("G1", "-XX:+UseG1GC"),
        ("Serial", "-XX:+UseSerialGC"),
        ("Parallel", "-XX:+UseParallelGC"),
    ] {
        let rec = Recording::new("", Clock::Tsc);
        let out = rec.run_java(&classes, &[flag], "Gc", &[]);
        assert_ok(&out);
        let d = rec.drain();
        let starts = d.all_of(GC_START);
        let ends = d.all_of(GC_END);
        assert!(
            starts.len() >= 3,
            "{gc}: 3 System.gc() but {} GC_START",
            starts.len()
        );
        assert_eq!(starts.len(), ends.len(), "{gc}: starts and ends pair up");
        // Not on a Java thread: the VM thread runs collections.
        let java = d.java_threads();
        for (tid, _) in starts.iter().chain(&ends) {
            assert!(
                !java.contains_key(tid),
                "{gc}: GC recorded on Java thread {tid}"
            );
        }
        for (s, e) in starts.iter().zip(&ends) {
            assert!(s.1.time <= e.1.time);
        }
    }
}

#[test]
fn gc_events_can_be_turned_off() {
    let classes = java_classes("Gc", false);
    let rec = Recording::new("gc=0\n", Clock::Monotonic);
    let out = rec.run_java(&classes, &[], "Gc", &[]);
    assert_ok(&out);
    assert!(rec.drain().all_of(GC_START).is_empty());
}

#[test]
fn contended_monitors_name_their_class() {
    let classes = java_classes("Contention", false);
    let rec = Recording::new("monitors=1\n", Clock::Monotonic);
    let rounds = 3;
    let out = rec.run_java(&classes, &[], "Contention", &[&rounds.to_string()]);
    assert_ok(&out);
    let d = rec.drain();
    let lock_id = d
        .metas
        .iter()
        .find_map(|m| match m {
            Meta::MonitorClass { id, name } if name == "Contention$Lock" => Some(*id),
            _ => None,
        })
        .expect("MonitorClass Contention$Lock");
    let waiters: Vec<u32> = tagged_lines(&out, "waiter")
        .iter()
        .map(|t| t[0].parse().unwrap())
        .collect();
    assert_eq!(waiters.len(), rounds);
    for tid in waiters {
        let contended = d.records_of(tid, MONITOR_CONTENDED);
        let entered = d.records_of(tid, MONITOR_ENTERED);
        let on_lock: Vec<_> = contended.iter().filter(|r| r.arg == lock_id).collect();
        assert_eq!(
            on_lock.len(),
            1,
            "waiter {tid} blocked once on the lock: {contended:?}"
        );
        let got = entered
            .iter()
            .find(|r| r.arg == lock_id)
            .expect("entered record");
        // The holder sleeps 200 ms with the lock.
        assert!(
            got.time - on_lock[0].time > 50_000_000,
            "waited {} ns",
            got.time - on_lock[0].time
        );
    }
    // One class, interned once.
    let lock_classes = d
        .metas
        .iter()
        .filter(|m| matches!(m, Meta::MonitorClass { name, .. } if name == "Contention$Lock"))
        .count();
    assert_eq!(lock_classes, 1);
}

#[test]
fn monitor_events_can_be_turned_off() {
    let classes = java_classes("Contention", false);
    let rec = Recording::new("monitors=0\n", Clock::Monotonic);
    let out = rec.run_java(&classes, &[], "Contention", &["1"]);
    assert_ok(&out);
    assert!(rec.drain().all_of(MONITOR_CONTENDED).is_empty());
}

/// Without a usable buffer file the JVM runs as if the agent were absent: same stdout,
/// same exit code, and one `sonda:` line on stderr.
#[test]
fn bad_shm_path_leaves_the_jvm_unharmed() {
    let classes = java_classes("Gc", false);
    let plain = run_java(&classes, &[], "Gc", &[]);
    assert!(plain.status.success());
    let dir = tempfile::tempdir().unwrap();
    let not_sonda = dir.path().join("not-a-buffer");
    std::fs::write(&not_sonda, vec![7u8; 1 << 17]).unwrap();
    let lib = libsonda();
    for options in [
        "shm=/nonexistent/sonda.buf".to_string(),
        format!("shm={}", not_sonda.display()),
        String::new(),
        "shm=/x,bogus=1".to_string(),
        "shm".to_string(),
    ] {
        let agent = format!("-agentpath:{}={options}", lib.display());
        let out = run_java(&classes, &[&agent], "Gc", &[]);
        assert_eq!(
            out.status.code(),
            plain.status.code(),
            "options {options:?}"
        );
        assert_eq!(out.stdout, plain.stdout, "options {options:?}");
        let err = text(&out.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "options {options:?}: stderr {err:?}");
        assert!(lines[0].starts_with("sonda: "), "{err}");
    }
}

/// A bad configuration in the buffer file: the JVM runs unrecorded, and says why both on
/// stderr and in the metadata log.
#[test]
fn bad_configuration_is_reported() {
    let classes = java_classes("Gc", false);
    let plain = run_java(&classes, &[], "Gc", &[]);
    let rec = Recording::with_config_text("gc=maybe\n", Clock::Monotonic);
    let out = rec.run_java(&classes, &[], "Gc", &[]);
    assert!(out.status.success());
    assert_eq!(out.stdout, plain.stdout);
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1);
    assert!(
        err.starts_with("sonda: ") && err.contains("gc=maybe"),
        "{err}"
    );
    let d = rec.drain();
    assert!(d.warnings().iter().any(|w| w.contains("gc=maybe")));
    assert!(d.slots.is_empty(), "nothing recorded");
}
