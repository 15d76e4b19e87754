//! `sonda record` end to end: a real JVM under the real agent, the real kernel
//! tracepoints, the Paraver export checked by prvcheck, and the thread states checked
//! against the kernel's own accounting in /proc/<pid>/task/<tid>/schedstat.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sonda_tests::paraver::Prv;
use sonda_tests::*;

/// Paraver states and event types sonda writes (docs/architecture.md).
const RUNNING: u32 = 1;
const WAITING_CPU: u32 = 40;
const GC_TYPE: u64 = 48000001;
const MONITOR_TYPE: u64 = 49000002;

struct SchedStat {
    tid: u32,
    run: u64,
    wait: u64,
    /// CLOCK_MONOTONIC ns when the thread read it.
    when: u64,
}

fn schedstat_lines(stdout: &str) -> BTreeMap<String, SchedStat> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("SCHEDSTAT "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (
                f[0].to_string(),
                SchedStat {
                    tid: f[1].parse().unwrap(),
                    run: f[2].parse().unwrap(),
                    wait: f[3].parse().unwrap(),
                    when: f[4].parse().unwrap(),
                },
            )
        })
        .collect()
}

fn within(measured: u64, truth: u64) -> bool {
    let tolerance = (truth / 100).max(1_000_000);
    measured.abs_diff(truth) <= tolerance
}

#[test]
fn thread_states_agree_with_the_kernels_schedstat() {
    if !require("kernel tracepoints (root)", tracepoints_available()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("mix.trace");
    let classes = java_classes("SchedMix");
    let out = run(Command::new(sonda())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg("java")
        .arg("-cp")
        .arg(&classes)
        .arg("SchedMix")
        .arg(dir.path())
        .arg("3"));
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "sonda record failed: {}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("DONE 8 threads"),
        "workload output: {stdout}"
    );
    let truth = schedstat_lines(&stdout);
    assert_eq!(
        truth.len(),
        9,
        "every thread reports its schedstat: {stdout}"
    );

    let stem = dir.path().join("mix");
    let out = run(Command::new(sonda())
        .arg("paraver")
        .arg(&trace)
        .arg("-o")
        .arg(&stem));
    assert!(
        out.status.success(),
        "sonda paraver failed: {}",
        text(&out.stderr)
    );
    prvcheck(&stem.with_extension("prv"));
    let prv = Prv::load(&stem);
    // Paraver times count from the trace's origin; the workload's from boot.
    let origin = sonda_trace::TraceMeta::scan(&trace).unwrap().origin().0;

    let mut failures = Vec::new();
    for (name, s) in &truth {
        // By tid: the main thread is renamed DestroyJavaVM when main() returns.
        let t = prv.thread_by_tid(s.tid).unwrap_or_else(|| {
            panic!("thread {name} ({}) not in the .row: {:?}", s.tid, prv.names)
        });
        // Compare up to the instant the thread read its schedstat, at the end of its life.
        let until = s.when - origin;
        let run_ns = prv.state_total_until(t, RUNNING, until);
        let wait_ns = prv.state_total_until(t, WAITING_CPU, until);
        eprintln!(
            "{name:>14} tid {:>7}: running {:>11} vs schedstat {:>11} ({:+.3}%), waiting {:>11} vs {:>11} ({:+.3}%)",
            s.tid,
            run_ns,
            s.run,
            (run_ns as f64 - s.run as f64) * 100.0 / s.run.max(1) as f64,
            wait_ns,
            s.wait,
            (wait_ns as f64 - s.wait as f64) * 100.0 / s.wait.max(1) as f64
        );
        if !within(run_ns, s.run) {
            failures.push(format!(
                "{name}: running {run_ns} ns in the trace, {} ns in schedstat",
                s.run
            ));
        }
        if !within(wait_ns, s.wait) {
            failures.push(format!(
                "{name}: waiting for a CPU {wait_ns} ns in the trace, {} ns in schedstat",
                s.wait
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "trace disagrees with the kernel:\n{}",
        failures.join("\n")
    );
    // The CPU burners outnumber the CPUs: they must have waited.
    assert!(truth["cpu-burner-0"].wait > 10_000_000);

    // GC and monitor contention appear in the Paraver trace...
    assert!(
        prv.events.iter().any(|e| e.2 == GC_TYPE && e.3 == 1),
        "no GC event in the .prv"
    );
    assert!(
        prv.events.iter().any(|e| e.2 == MONITOR_TYPE && e.3 != 0),
        "no monitor contention in the .prv"
    );
    let pcf = std::fs::read_to_string(stem.with_extension("pcf")).unwrap();
    assert!(
        pcf.contains("SchedMix$ContendedLock"),
        "monitor class not labelled in the .pcf"
    );
    // ... and in the report.
    let out = run(Command::new(sonda()).arg("report").arg(&trace));
    assert!(
        out.status.success(),
        "sonda report failed: {}",
        text(&out.stderr)
    );
    let report = text(&out.stdout);
    for name in truth.keys() {
        assert!(
            report.contains(name.as_str()),
            "report lacks thread {name}:\n{report}"
        );
    }
    assert!(
        report.contains("SchedMix$ContendedLock"),
        "report lacks the monitor class:\n{report}"
    );
    assert!(
        report.to_lowercase().contains("gc"),
        "report lacks GC:\n{report}"
    );
}

#[test]
fn the_exit_status_is_the_childs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let out = run(Command::new(sonda())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--", "sh", "-c", "exit 3"]));
    assert_eq!(out.status.code(), Some(3), "stderr: {}", text(&out.stderr));
    let out = run(Command::new(sonda())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--", "sh", "-c", "kill -TERM $$"]));
    assert_eq!(
        out.status.code(),
        Some(128 + 15),
        "stderr: {}",
        text(&out.stderr)
    );
}

#[test]
fn a_killed_collector_leaves_the_jvm_running_and_a_readable_trace() {
    if !require("kernel tracepoints (root)", tracepoints_available()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("killed.trace");
    let classes = java_classes("SchedMix");
    let child = Command::new(sonda())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg("java")
        .arg("-cp")
        .arg(&classes)
        .arg("SchedMix")
        .arg(dir.path())
        .arg("4")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let started = Instant::now();
    // The JVM shares the stdout pipe: reading to the end waits for the JVM too.
    let output = child.wait_with_output().unwrap();
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("DONE 8 threads"),
        "the JVM did not run to completion after the collector died: {stdout}"
    );
    assert!(
        started.elapsed() > Duration::from_millis(500),
        "the JVM ended with the collector"
    );

    let stem = dir.path().join("killed");
    let out = run(Command::new(sonda())
        .arg("paraver")
        .arg(&trace)
        .arg("-o")
        .arg(&stem));
    assert!(
        !text(&out.stderr).contains("panicked"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        stem.with_extension("prv").exists(),
        "no Paraver trace from the partial recording: {}",
        text(&out.stderr)
    );
    prvcheck(&stem.with_extension("prv"));
    let prv = Prv::load(&stem);
    assert!(
        prv.names.iter().any(|n| n.contains("cpu-burner-0")),
        "threads of the partial trace: {:?}",
        prv.names
    );
    assert!(
        prv.end > 1_000_000_000,
        "the partial trace covers {} ns",
        prv.end
    );
}
