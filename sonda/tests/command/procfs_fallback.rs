//! Without permission for kernel tracepoints, `sonda record` says so in one line and
//! samples /proc instead. Run as `nobody` (setpriv), so this needs root to start.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::common::*;
use sonda_tests::require_root;
use sonda_trace::{Event, Source, Tid};

const MESSAGE: &str =
    "sonda: no permission for kernel tracepoints (run as root or grant CAP_PERFMON); sampling /proc every 10 ms instead";

#[test]
fn as_nobody_sonda_samples_proc_and_says_so_once() {
    // Root, to switch to nobody.
    if !require_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // Copies nobody can run whatever the permissions of the build directory.
    let sonda = dir.path().join("sonda");
    std::fs::copy(env!("CARGO_BIN_EXE_sonda"), &sonda).unwrap();
    let threads = build_c("threads", dir.path());
    for f in [&sonda, &threads] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let trace = dir.path().join("t.sonda");
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            "nobody",
            "--regid",
            "nogroup",
            "--clear-groups",
            "--",
        ])
        .arg(&sonda)
        .args(["record", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&threads)
        .args(["1", "3", "40"])
        .arg(dir.path())
        .env_remove("SONDA_AGENT")
        .output()
        .expect("setpriv runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Besides the notice that the workload (not linked with libsonda.so) records
    // kernel states only: the fallback line once, and the summary.
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.contains("did not load libsonda.so"))
        .collect();
    assert_eq!(lines.iter().filter(|l| **l == MESSAGE).count(), 1, "{err}");
    assert_eq!(
        lines.len(),
        2,
        "expected the fallback line and the summary: {err}"
    );

    let (meta, records) = read_trace(&trace);
    assert!(meta.complete);
    assert_eq!(meta.info.as_ref().unwrap().source, Source::Procfs);
    assert!(meta.counters.get("procfs.samples").is_some_and(|&n| n > 0));
    let oracle = read_oracle(&dir.path().join("schedstat.txt"));
    assert_eq!(oracle.len(), 4);
    let cuts: HashMap<u32, u64> = oracle.iter().map(|o| (o.tid, o.cut)).collect();
    // The last sample of each thread before it read its schedstat.
    let mut last_sample: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut exits = Vec::new();
    for r in &records {
        match r.event {
            Event::ProcSample {
                tid,
                run_ns,
                wait_ns,
                ..
            } if cuts.get(&tid.0).is_some_and(|&cut| r.time.0 <= cut) => {
                last_sample.insert(tid.0, (run_ns, wait_ns));
            }
            Event::TaskExit { tid } => exits.push(tid.0),
            Event::Switch { .. } | Event::Wakeup { .. } => {
                panic!("kernel events without permission: {r:?}")
            }
            _ => {}
        }
    }
    for o in &oracle {
        assert!(
            meta.threads.contains_key(&Tid(o.tid)),
            "thread {} not named",
            o.tid
        );
        let (run, _wait) = *last_sample
            .get(&o.tid)
            .unwrap_or_else(|| panic!("thread {} never sampled", o.tid));
        // Samples are cumulative and taken every 10 ms: the last one is at most what the
        // thread reported at its end, and not far below.
        let slack = (o.run / 4).max(60_000_000);
        assert!(
            run <= o.run && run + slack >= o.run,
            "thread {}: last sample run {run} ns, schedstat {} ns",
            o.tid,
            o.run
        );
        if o.tid != o.pid {
            assert!(exits.contains(&o.tid), "no exit seen for thread {}", o.tid);
        }
    }
}
