//! `sonda record --kernel-cost`: the kernel counts what sonda's BPF programs cost, the
//! trace keeps it and the end of the recording says it; the kernel's setting is left as
//! it was. Needs root (skipped otherwise, failed under CI).

use crate::common::*;
use sonda_tests::require_tracepoints;
use sonda_trace::Event;

/// `kernel.bpf_stats_enabled` as the kernel shows it now.
fn stats_setting() -> String {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Records a shell that sleeps 100 times (each sleep a process, switches, wakeups).
fn record(trace: &std::path::Path, kernel_cost: bool) -> String {
    let mut cmd = sonda();
    cmd.args(["record", "-o"]).arg(trace);
    if kernel_cost {
        cmd.arg("--kernel-cost");
    }
    let out = cmd
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 100 ]; do sleep 0.001; i=$((i+1)); done",
        ])
        .env("SONDA_KERNEL", "bpf")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sonda record failed: {stderr}");
    stderr
}

#[test]
fn kernel_cost_counts_the_programs_runs_and_leaves_the_kernel_setting_as_it_was() {
    if !require_tracepoints() {
        return;
    }
    let before = stats_setting();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("cost.sonda");
    let stderr = record(&trace, true);
    assert_eq!(stats_setting(), before, "the kernel's setting was changed");
    let (meta, records) = read_trace(&trace);
    assert_eq!(meta.counters.get("kernel.bpf"), Some(&1), "{stderr}");
    let runs = meta.counters.get("kernel.bpf_runs").copied().unwrap_or(0);
    let run_ns = meta.counters.get("kernel.bpf_run_ns").copied().unwrap_or(0);
    // Every switch in the trace (none is made up here but a few recovered ones) was a
    // run of the switch program; runs of the others come on top.
    let switches = records
        .iter()
        .filter(|r| matches!(r.event, Event::Switch { .. }))
        .count() as u64;
    let recovered = meta
        .counters
        .get("kernel.switches_recovered")
        .copied()
        .unwrap_or(0);
    assert!(
        switches > 200,
        "{switches} switches: the workload did not run"
    );
    assert!(
        runs >= switches - recovered,
        "{runs} program runs for {switches} switches ({recovered} recovered)"
    );
    // A program run costs tens to hundreds of ns; the bounds are wide, the figure the
    // kernel's own.
    let per_run = run_ns / runs.max(1);
    assert!((10..100_000).contains(&per_run), "{per_run} ns a run");
    let said = stderr
        .lines()
        .find(|l| l.starts_with("sonda: kernel programs ran "))
        .unwrap_or_else(|| panic!("no cost line: {stderr}"));
    assert!(said.contains(&format!("ran {runs} times")), "{said}");
    // Without the option the kernel counts nothing (unless someone turned its
    // statistics on for the whole machine), and the trace says nothing.
    if before == "0" {
        let trace = dir.path().join("plain.sonda");
        let stderr = record(&trace, false);
        let (meta, _) = read_trace(&trace);
        assert_eq!(meta.counters.get("kernel.bpf_runs"), None, "{stderr}");
        assert!(!stderr.contains("kernel programs ran"), "{stderr}");
    }
}
