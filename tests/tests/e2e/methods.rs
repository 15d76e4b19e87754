//! Method tracing end to end: the real agent rewrites bytecode, the JVM's verifier
//! judges it, the program's own counts judge what was recorded, prvcheck judges the
//! Paraver nesting.

use std::collections::BTreeMap;
use std::process::Command;

use sonda_tests::paraver::Prv;
use sonda_tests::*;

const USER_FUNCTION: u64 = 60000019;
const EXIT_BY_EXCEPTION: u64 = 49000001;

fn export(trace: &std::path::Path, stem: &std::path::Path) -> Prv {
    let out = run(Command::new(sonda())
        .arg("paraver")
        .arg(trace)
        .arg("-o")
        .arg(stem));
    assert!(out.status.success(), "sonda paraver: {}", text(&out.stderr));
    check_paraver(stem);
    Prv::load(stem)
}

/// Calls (entries) and exits by exception per method label.
fn calls_per_label(prv: &Prv, stem: &std::path::Path) -> BTreeMap<String, (u64, u64)> {
    let labels = sonda_tests::pcf::values(stem, USER_FUNCTION);
    let mut calls: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for &(_, _, ty, value) in &prv.events {
        if ty == USER_FUNCTION && value != 0 {
            calls
                .entry(
                    labels
                        .get(&value)
                        .cloned()
                        .unwrap_or_else(|| format!("#{value}")),
                )
                .or_default()
                .0 += 1;
        } else if ty == EXIT_BY_EXCEPTION && value != 0 {
            calls
                .entry(
                    labels
                        .get(&value)
                        .cloned()
                        .unwrap_or_else(|| format!("#{value}")),
                )
                .or_default()
                .1 += 1;
        }
    }
    calls
}

#[test]
fn every_method_of_every_class_under_the_verifier() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let classes = dir.path().join("classes");
    std::fs::create_dir_all(&classes).unwrap();
    let workload = Workload::java("VerifyMix").jvm_args(["-Xverify:all"]);
    let plain = run(&mut workload.java_command());
    assert!(plain.status.success());
    let trace = dir.path().join("all.trace");
    // Every JDK method too: large rings, so that the workload's calls are not dropped.
    // record() fails the test when the JVM failed under the agent.
    let out = workload
        .options(["--agent-buffer", "64M"])
        .methods(["*"])
        .record(&trace);
    let err = &out.stderr;
    assert!(
        !err.contains("VerifyError") && !err.contains("hs_err"),
        "{err}"
    );
    assert_eq!(
        out.stdout,
        text(&plain.stdout),
        "the program printed something else under the agent"
    );

    let stem = dir.path().join("all");
    let prv = export(&trace, &stem);
    let calls = calls_per_label(&prv, &stem);
    let jdk = calls.keys().filter(|k| k.starts_with("java.")).count();
    let own = calls.keys().filter(|k| k.starts_with("VerifyMix")).count();
    eprintln!(
        "{} methods called: {jdk} of the JDK, {own} of the workload",
        calls.len()
    );
    assert!(jdk > 100, "JDK methods were not traced: {jdk}");
    assert!(own > 20, "workload methods were not traced: {own}");
    // Constructors that throw after super() leave by exception; recursion nests.
    assert!(
        calls
            .iter()
            .any(|(k, v)| k.starts_with("VerifyMix$Derived::<init>") && v.1 > 0),
        "{calls:?}"
    );
    assert!(calls
        .iter()
        .any(|(k, v)| k.starts_with("VerifyMix::fib") && v.0 > 10_000));
}

#[test]
fn recorded_calls_equal_the_calls_the_program_counted() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("count.trace");
    // Buffers large enough that nothing is dropped: every call must be there.
    let out = Workload::java("CallCount")
        .args(["4", "20000"])
        .options(["--agent-buffer", "64M"])
        .methods(["CallCount", "CallCount$*"])
        .record(&trace);
    let stem = dir.path().join("count");
    let prv = export(&trace, &stem);
    let calls = calls_per_label(&prv, &stem);
    let mut checked = 0;
    for line in out.stdout.lines().filter_map(|l| l.strip_prefix("CALLS ")) {
        let f: Vec<&str> = line.split(' ').collect();
        let (method, n, exc): (&str, u64, u64) =
            (f[0], f[1].parse().unwrap(), f[2].parse().unwrap());
        let got = calls
            .iter()
            .find(|(k, _)| k.as_str() == method || k.starts_with(&format!("{method}(")))
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("{method} not recorded: {calls:?}"));
        assert_eq!(
            got,
            (n, exc),
            "{method}: recorded (calls, exits by exception) vs counted by the program"
        );
        checked += 1;
    }
    assert_eq!(checked, 6);
}

#[test]
fn full_buffers_drop_and_count_every_call() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("small.trace");
    // Rings of 4 KiB (256 records) fill in microseconds: most events are dropped.
    let out = Workload::java("CallCount")
        .args(["4", "20000"])
        .options(["--agent-buffer", "4K"])
        // Only the methods the program counts.
        .methods([
            "CallCount",
            "CallCount$*",
            "!CallCount::main",
            "!CallCount::lambda$*",
            "!CallCount::<clinit>",
        ])
        .record(&trace);
    let calls: u64 = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("CALLS "))
        .map(|l| l.split(' ').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    let meta = sonda_trace::TraceMeta::scan(&trace).unwrap();
    let entries = sonda_trace::Events::open(&trace)
        .unwrap()
        .filter(|r| matches!(r.as_ref().unwrap().event, sonda_trace::Event::Enter { .. }))
        .count() as u64;
    let dropped = meta.counters["agent.dropped_enters"];
    eprintln!(
        "{calls} calls: {entries} entries recorded, {dropped} dropped ({} events dropped)",
        meta.counters["agent.dropped"]
    );
    assert!(dropped > 0, "the test should overflow the rings");
    assert_eq!(
        entries + dropped,
        calls,
        "recorded entries + dropped entries vs calls made"
    );
    // What was kept still exports to a valid, nested Paraver trace.
    export(&trace, &dir.path().join("small"));
}
