//! The overhead budget end to end (`--budget`): a real JVM runs requests (a method of a
//! few milliseconds, once per request) that each call a tiny method thousands of times;
//! with a budget of 1% the agent removes the tiny one's probes while requests are in
//! flight, says so in the trace and in `sonda report`, and every request stays traced,
//! as many as the program counted, each with its leave.

use std::collections::HashMap;
use std::process::Command;

use sonda_tests::*;
use sonda_trace::{Event, Events, TraceMeta};

/// The program's own counts: `CALLS <method> <calls> 0` lines.
fn counted(stdout: &str) -> HashMap<String, u64> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("CALLS "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].to_string(), f[1].parse().unwrap())
        })
        .collect()
}

#[test]
fn budget_removes_the_hot_method_and_keeps_the_request() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("budget.trace");
    let out = Workload::java("Budget")
        .args(["2", "4"])
        .options(["--agent-buffer", "64M", "--budget", "1"])
        .methods(["Budget::hot", "Budget::request"])
        .record(&trace);
    let counts = counted(&out.stdout);
    let meta = TraceMeta::scan(&trace).unwrap();
    let id_of = |name: &str| {
        meta.methods
            .iter()
            .find(|(_, m)| m.class == "Budget" && m.name == name)
            .map(|(&id, _)| id)
            .unwrap_or_else(|| panic!("Budget::{name} not instrumented"))
    };
    let (hot, request) = (id_of("hot"), id_of("request"));
    assert_eq!(meta.counters["agent.dropped"], 0, "nothing may be dropped");
    assert_eq!(meta.counters["agent.budget_removed"], 1);
    assert_eq!(meta.counters["agent.retransform_failures"], 0);

    // The hot method is removed, once, with what the agent measured of it.
    assert_eq!(meta.removals.len(), 1, "{:?}", meta.removals);
    let removal = meta.removals[0];
    eprintln!(
        "removed Budget::hot at {} ms: {} calls/s, mean {} ns, {:.1}% of the CPU; pair {} ns; {}",
        removal.time.since(meta.info.as_ref().unwrap().start) / 1_000_000,
        removal.rate,
        removal.mean_ns,
        removal.overhead_ppm as f64 / 1e4,
        meta.counters["agent.budget_pair_ns"],
        out.stdout.lines().last().unwrap_or_default(),
    );
    assert_eq!(removal.id, hot);
    assert!(removal.rate > 100_000, "{removal:?}");
    assert!(removal.mean_ns < 10_000, "{removal:?}");
    assert!(
        removal.overhead_ppm > 10_000,
        "over the 1% budget: {removal:?}"
    );

    // Every request is there with its leave, as many as the program made; the hot
    // method's calls stop at the removal, each recorded one closed.
    let (mut enters, mut leaves) = (HashMap::new(), HashMap::new());
    // Per thread, hot calls entered more than 1 ms after the removal: at most the one in
    // flight in the old code when the class was replaced, its probe's clock read late
    // (a fresh-clone CI run, the machine busy, found one such call; a thread still
    // calling the old code would make thousands).
    let mut hot_after: HashMap<u32, u64> = HashMap::new();
    for r in Events::open(&trace).unwrap() {
        let r = r.unwrap();
        match r.event {
            Event::Enter { method, tid } => {
                *enters.entry(method).or_insert(0u64) += 1;
                if method == hot && r.time.0 > removal.time.0 + 1_000_000 {
                    *hot_after.entry(tid.0).or_default() += 1;
                }
            }
            Event::Leave {
                method, exception, ..
            } => {
                assert!(!exception);
                *leaves.entry(method).or_insert(0u64) += 1;
            }
            _ => {}
        }
    }
    assert_eq!(enters[&request], counts["Budget::request"]);
    assert_eq!(leaves[&request], counts["Budget::request"]);
    assert_eq!(enters[&hot], leaves[&hot], "every recorded hot call closed");
    assert!(enters[&hot] > 0 && enters[&hot] < counts["Budget::hot"]);
    assert!(
        hot_after.values().all(|&n| n <= 1),
        "hot calls recorded after its removal, by thread: {hot_after:?}"
    );

    // The report lists the removal; nothing needed repairing.
    let report = run(Command::new(sonda()).arg("report").arg(&trace));
    assert!(report.status.success(), "{}", text(&report.stderr));
    let report = text(&report.stdout);
    let section = report
        .split("Methods removed by the overhead budget")
        .nth(1)
        .unwrap_or_else(|| panic!("no removals in the report:\n{report}"));
    assert!(
        section.lines().nth(2).unwrap().contains("Budget::hot"),
        "{report}"
    );
    assert!(!section.contains("Budget::request"), "{report}");
    assert!(!report.contains("Timeline repairs"), "{report}");
}

#[test]
fn a_budget_needs_methods_and_a_percentage() {
    // Short, but it starts the collector: never beside a test that times the machine.
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let out = run(&mut Workload::java("Budget")
        .options(["--budget", "5"])
        .record_command(&trace));
    assert_clean_error(&out, "--budget");
    for bad in ["0", "101", "x", "0.001"] {
        let out = run(&mut Workload::java("Budget")
            .options(["--budget", bad])
            .methods(["Budget::hot"])
            .record_command(&trace));
        assert_clean_error(&out, "percentage");
    }
    assert!(!trace.exists());
}
