//! Every option that scales sonda's work or memory is bounded (issue 11, item 5): a
//! value out of bounds is one clear line at once, before anything starts — never
//! minutes of work or an allocation that aborts.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn a_window_far_shorter_than_the_trace_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    // 0.2 s of calls.
    calls_trace(100, 40, 64).write(&trace).unwrap();
    let t = trace.to_str().unwrap();
    let started = Instant::now();
    let mut child = sonda()
        .args(["services", t, "--window", "0.000000001"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Before the bound, this ran for minutes and aborted allocating 1 GiB.
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("sonda services --window 1ns still runs after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_one_line_error(&out, "more than 10000: use --window 0.00002");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(t) && err.contains("windows"), "{err}");
    // A window that makes 10000 windows or fewer works.
    let out = run_sonda(&["services", t, "--window", "0.00002", "--format", "csv"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_sonda(&["services", t, "--window", "0.05"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sizes_lags_timeouts_and_limits_are_bounded_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let trace = dir.path().join("t");
    calls_trace(100, 4, 4).write(&trace).unwrap();
    let t = trace.to_str().unwrap();
    let x = dir.path().join("x");
    let x = x.to_str().unwrap();
    let record = |opts: &[&str]| {
        let mut args = vec!["record", "-o", "/dev/null/never"];
        args.extend_from_slice(opts);
        args.extend_from_slice(&["--", "sh", "-c", &script]);
        run_sonda(&args)
    };
    let cases: Vec<(std::process::Output, &str)> = vec![
        (
            record(&["--buffer-size", "2G"]),
            "must be between 4K and 1G",
        ),
        (
            record(&["--buffer-size", "1K"]),
            "must be between 4K and 1G",
        ),
        (record(&["--lag", "10001"]), "from 0 to 10000"),
        (record(&["--lag", "-5"]), "from 0 to 10000"),
        (
            record(&["--agent-buffer", "4G"]),
            "must be between 4K and 2G",
        ),
        (
            run_sonda(&["attach", "1", "-o", x, "--attach-timeout", "601"]),
            "at most 600 seconds",
        ),
        (
            run_sonda(&["attach", "1", "-o", x, "--duration", "-1"]),
            "not a positive number of seconds",
        ),
        (
            run_sonda(&["attach", "1", "-o", x, "--duration", "1e10"]),
            "not a positive number of seconds",
        ),
        (
            run_sonda(&["services", t, "--window", "0"]),
            "not a positive number of seconds",
        ),
        (
            run_sonda(&["paraver", t, "-o", x, "--reorder-limit", "0"]),
            "from 1 to 33554432",
        ),
        (
            run_sonda(&["paraver", t, "-o", x, "--reorder-limit", "100000000"]),
            "from 1 to 33554432",
        ),
    ];
    for (out, expect) in cases {
        assert_one_line_error(&out, expect);
        assert_eq!(out.status.code(), Some(2));
    }
    assert!(!marker.exists(), "a command started despite a bad option");
    assert_eq!(names_in(dir.path()), ["t"]);
}

#[test]
fn patterns_are_bounded_in_number_and_length() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    calls_trace(100, 4, 4).write(&trace).unwrap();
    let t = trace.to_str().unwrap();
    let stem = dir.path().join("x");
    let x = stem.to_str().unwrap();
    let never = dir.path().join("never");
    let never = never.to_str().unwrap();
    let model = dir.path().join("m.jsimg");
    let model = model.to_str().unwrap();
    let many = |option: &'static str, n: usize| -> Vec<&'static str> {
        std::iter::repeat_n([option, "main"], n).flatten().collect()
    };
    let long = "x".repeat(1001);
    let mut paraver = vec!["paraver", t, "-o", x];
    paraver.extend(many("--threads", 1001));
    let mut services = vec!["services", t];
    services.extend(many("--methods", 1001));
    let mut record = vec!["record", "-o", never];
    record.extend(many("--methods", 1001));
    record.extend(["--", "true"]);
    for (args, expect) in [
        (paraver, "1001 --threads patterns: at most 1000"),
        (services, "1001 --methods patterns: at most 1000"),
        (record, "1001 --methods patterns: at most 1000"),
        (
            vec!["paraver", t, "-o", x, "--threads", &long],
            "--threads pattern of 1001 bytes",
        ),
        (
            vec!["model", t, "-o", model, "--methods", &long],
            "--methods pattern of 1001 bytes",
        ),
    ] {
        assert_one_line_error(&run_sonda(&args), expect);
    }
    assert_eq!(names_in(dir.path()), ["t"]);
    // A thousand are fine.
    let mut fine = vec!["paraver", t, "-o", x];
    fine.extend(many("--threads", 1000));
    let out = run_sonda(&fine);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn merge_takes_at_most_256_traces_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    calls_trace(100, 4, 4).write(&trace).unwrap();
    let t = trace.to_str().unwrap();
    let out = dir.path().join("m");
    let mut args = vec!["merge"];
    args.extend(std::iter::repeat_n(t, 257));
    args.extend(["-o", out.to_str().unwrap()]);
    assert_one_line_error(
        &run_sonda(&args),
        "257 traces to merge: at most 256 at once",
    );
    assert!(!out.exists());
}
