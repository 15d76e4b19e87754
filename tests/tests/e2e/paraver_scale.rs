//! Paraver export at scale, end to end with the real `sonda`: several processes in one
//! recording (two JVMs and a native program) and in a merge of two recordings made at
//! the same time, each a Paraver application; the report's totals against the totals
//! read back from the `.prv` (time per state per thread, calls and time per method);
//! and bad input on the command line (a cut trace, a window outside the trace, a thread
//! filter that selects nothing, traces that cannot be merged).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use sonda_testdata::{showcase, TraceBuilder};
use sonda_tests::paraver::Prv;
use sonda_tests::*;
use sonda_timeline::{Frame, ThreadState};

/// The report's figures of the trace at `path`.
fn summarize(
    path: &Path,
) -> Result<sonda_timeline::report::ReportSummary, sonda_timeline::report::ReportError> {
    sonda_timeline::report::summarize(sonda_timeline::Trace::open(path)?)
}

const USER_FUNCTION: u64 = 60000019;

/// Paraver's number for each state (docs/architecture.md).
fn paraver_state(s: ThreadState) -> u32 {
    match s {
        ThreadState::Idle => 0,
        ThreadState::Running => 1,
        ThreadState::NotCreated => 2,
        ThreadState::Sleeping => 9,
        ThreadState::Uninterruptible => 12,
        ThreadState::Stopped => 15,
        ThreadState::Runnable => 40,
        ThreadState::Stolen => 41,
    }
}

/// `sonda paraver TRACE -o STEM ARGS`: its output.
fn paraver(trace: &Path, stem: &Path, args: &[&str]) -> std::process::Output {
    run(Command::new(sonda())
        .arg("paraver")
        .arg(trace)
        .arg("-o")
        .arg(stem)
        .args(args))
}

/// Exports, checks with prvcheck and pertalde ([`check_paraver`]), loads.
fn exported(trace: &Path, stem: &Path) -> Prv {
    let out = paraver(trace, stem, &[]);
    assert!(out.status.success(), "sonda paraver: {}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("sonda: wrote ") && err.lines().count() == 1,
        "one summary line: {err}"
    );
    let prv = stem.with_extension("prv");
    check_paraver(&prv);
    for view in ["states", "state_profile", "cpus"] {
        assert!(
            stem.with_extension(format!("{view}.cfg")).exists(),
            "{view}.cfg missing"
        );
    }
    Prv::load(stem)
}

/// Per user-function value: (calls, inclusive ns, exclusive ns) replayed from the
/// `.prv`'s enter and exit events, thread by thread.
fn methods_of(prv: &Prv) -> BTreeMap<i64, (u64, u64, u64)> {
    let mut out: BTreeMap<i64, (u64, u64, u64)> = BTreeMap::new();
    let mut stacks: BTreeMap<usize, Vec<(i64, u64, u64)>> = BTreeMap::new();
    for &(t, time, ty, value) in &prv.events {
        if ty != USER_FUNCTION {
            continue;
        }
        let stack = stacks.entry(t).or_default();
        if value != 0 {
            stack.push((value, time, 0));
            continue;
        }
        let (v, begin, children) = stack.pop().expect("exits nest (prvcheck checked)");
        let m = out.entry(v).or_default();
        m.0 += 1;
        m.1 += time - begin;
        m.2 += time - begin - children;
        if let Some(parent) = stack.last_mut() {
            parent.2 += time - begin;
        }
    }
    out
}

/// `sonda report`'s figures equal the `.prv`'s: every thread's time in every state,
/// every method's calls, inclusive and exclusive time. Returns the methods checked.
fn report_agrees(trace: &Path, prv: &Prv) -> usize {
    let report = summarize(trace).expect("the report reads the trace");
    let mut threads = 0;
    for t in report.processes.iter().flat_map(|p| &p.threads) {
        let row = prv
            .thread_by_tid(t.tid.0)
            .unwrap_or_else(|| panic!("thread {} not in the .row", t.tid));
        for s in ThreadState::ALL {
            assert_eq!(
                prv.state_total(row, paraver_state(s)),
                t.stats.states.get(s),
                "thread {} ({}) {s:?}",
                t.name,
                t.tid
            );
        }
        threads += 1;
    }
    assert_eq!(
        threads,
        prv.names.len(),
        "every thread of the report is in the .prv and back"
    );
    let from_prv = methods_of(prv);
    let mut checked = 0;
    for m in &report.methods {
        if let Frame::Method(id) = m.frame {
            let got = from_prv.get(&i64::from(id)).copied().unwrap_or_default();
            assert_eq!(
                got,
                (m.calls, m.inclusive_ns, m.exclusive_ns),
                "{}: (calls, inclusive, exclusive)",
                m.label
            );
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        from_prv.len(),
        "the .prv has no method the report lacks"
    );
    checked
}

/// The `.row`'s application labels.
fn applications(stem: &Path) -> Vec<String> {
    let row = std::fs::read_to_string(stem.with_extension("row")).unwrap();
    let mut lines = row
        .lines()
        .skip_while(|l| !l.starts_with("LEVEL APPL SIZE"));
    let n: usize = lines
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    lines.take(n).map(str::to_string).collect()
}

#[test]
fn two_jvms_and_a_native_child_are_applications_of_one_trace() {
    let _machine = shared();
    if !require_tracepoints() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cp = java_classes("CallCount");
    let cp = cp.to_str().unwrap();
    let trace = dir.path().join("three.trace");
    let script = format!(
        "java -cp {cp} CallCount 2 3000 & java -cp {cp} CallCount 3 2000 & \
         dd if=/dev/zero of=/dev/null bs=4k count=20000 2>/dev/null; wait"
    );
    let out = run(Command::new(sonda())
        .args([
            "record",
            "--agent-buffer",
            "16M",
            "--methods",
            "CallCount",
            "-o",
        ])
        .arg(&trace)
        .args(["--", "sh", "-c", &script]));
    assert!(out.status.success(), "sonda record: {}", text(&out.stderr));
    let stem = dir.path().join("three");
    let prv = exported(&trace, &stem);
    let apps = applications(&stem);
    let jvms = apps
        .iter()
        .filter(|a| a.starts_with("CallCount (pid "))
        .count();
    assert_eq!(jvms, 2, "two JVMs, named after their main class: {apps:?}");
    assert!(
        apps.iter().any(|a| a.starts_with("dd (pid ")),
        "the native child: {apps:?}"
    );
    assert!(
        apps.iter().any(|a| a.starts_with("sh (pid ")),
        "the shell: {apps:?}"
    );
    assert!(report_agrees(&trace, &prv) >= 5);
    // The JVMs' calls add up to what both programs counted.
    let labels = sonda_tests::pcf::values(&stem, USER_FUNCTION);
    let leaf = methods_of(&prv)
        .iter()
        .filter(|(v, _)| {
            labels
                .get(v)
                .is_some_and(|l| l.starts_with("CallCount::leaf"))
        })
        .map(|(_, m)| m.0)
        .sum::<u64>();
    let counted: u64 = text(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("CALLS CallCount::leaf "))
        .map(|l| l.split(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(leaf, counted);
}

#[test]
fn recordings_made_at_the_same_time_merge_into_one_trace() {
    let _machine = shared();
    if !require_tracepoints() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cp = java_classes("CallCount");
    let record = |name: &str, threads: &str| {
        Command::new(sonda())
            .args([
                "record",
                "--agent-buffer",
                "16M",
                "--methods",
                "CallCount",
                "-o",
            ])
            .arg(dir.path().join(name))
            .args(["--", "java", "-cp"])
            .arg(&cp)
            .args(["CallCount", threads, "3000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sonda starts")
    };
    let (a, b) = (record("a.trace", "2"), record("b.trace", "3"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(
        a.status.success() && b.status.success(),
        "{}{}",
        text(&a.stderr),
        text(&b.stderr)
    );
    let merged = dir.path().join("ab.trace");
    let out = run(Command::new(sonda())
        .arg("merge")
        .arg(dir.path().join("a.trace"))
        .arg(dir.path().join("b.trace"))
        .arg("-o")
        .arg(&merged));
    assert!(out.status.success(), "sonda merge: {}", text(&out.stderr));
    let stem = dir.path().join("ab");
    let prv = exported(&merged, &stem);
    let apps = applications(&stem);
    assert_eq!(
        apps.iter()
            .filter(|a| a.starts_with("CallCount (pid "))
            .count(),
        2,
        "{apps:?}"
    );
    // Method ids of both recordings stay apart: each method once per recording (with
    // its descriptor, as the name is no longer unique).
    let labels = sonda_tests::pcf::values(&stem, USER_FUNCTION);
    assert_eq!(
        labels
            .values()
            .filter(|l| l.as_str() == "CallCount::leaf(I)I")
            .count(),
        2,
        "{labels:?}"
    );
    report_agrees(&merged, &prv);
    // Every thread of both inputs, and each input's leaf calls.
    let a_meta = sonda_trace::TraceMeta::scan(&dir.path().join("a.trace")).unwrap();
    let b_meta = sonda_trace::TraceMeta::scan(&dir.path().join("b.trace")).unwrap();
    assert_eq!(prv.names.len(), a_meta.threads.len() + b_meta.threads.len());
    let leaf: u64 = methods_of(&prv)
        .iter()
        .filter(|(v, _)| {
            labels
                .get(v)
                .is_some_and(|l| l.starts_with("CallCount::leaf"))
        })
        .map(|(_, m)| m.0)
        .sum();
    let counted: u64 = [&a, &b]
        .iter()
        .flat_map(|o| {
            text(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter_map(|l| {
            l.strip_prefix("CALLS CallCount::leaf ")
                .map(|r| r.split(' ').next().unwrap().parse::<u64>().unwrap())
        })
        .sum();
    assert_eq!(leaf, counted);
}

#[test]
fn bad_input_gives_clear_errors() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("show.trace");
    showcase().write(&trace).unwrap();
    let stem = dir.path().join("out");

    let out = paraver(&trace, &stem, &["--from", "2ms"]);
    assert_clean_error(
        &out,
        "the time window starts at 2.000 ms, after the trace's end (1.000 us)",
    );
    let out = paraver(&trace, &stem, &["--threads", "nobody"]);
    assert_clean_error(&out, "no thread matches --threads nobody");
    let out = paraver(&trace, &stem, &["--from", "1.5h"]);
    assert_clean_error(&out, "unknown time unit");
    assert!(!stem.with_extension("prv").exists());

    // A window and a filter that fit: a valid trace of what they select.
    let out = paraver(
        &trace,
        &stem,
        &[
            "--from",
            "100",
            "--to",
            "0.0000008s",
            "--threads",
            "main",
            "--threads",
            "worker-?",
            "--threads",
            "201",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    check_paraver(&stem);
    let p = Prv::load(&stem);
    assert_eq!(p.end, 700);
    assert_eq!(
        p.names,
        ["main (101)", "worker-1 (102)", "worker-2 (104)", "dd (201)"]
    );

    // A cut trace: what it holds is exported, and the error says where it stopped.
    let cut = dir.path().join("cut.trace");
    let offset = showcase().write_cut(&cut, 30).unwrap();
    let out = paraver(&cut, &dir.path().join("cut"), &[]);
    let err = text(&out.stderr);
    assert!(!out.status.success() && !err.contains("panicked"), "{err}");
    assert!(
        err.contains(&format!("cut short at byte {offset}"))
            && err.contains("exported every intact block"),
        "{err}"
    );
    check_paraver(&dir.path().join("cut.prv"));

    // Merges that cannot be: another host; the same threads twice.
    let mut other = TraceBuilder::new(sonda_trace::Source::Tracepoints, 2);
    other.meta(sonda_trace::Meta::TraceInfo {
        source: sonda_trace::Source::Tracepoints,
        start: sonda_testdata::START,
        host: "elsewhere".into(),
        cpus: 2,
        command: vec!["x".into()],
        tool: "t".into(),
    });
    other
        .process(900, "x", sonda_trace::Runtime::Native)
        .thread(900, 900, "x");
    let elsewhere = dir.path().join("elsewhere.trace");
    other.write(&elsewhere).unwrap();
    let merged = dir.path().join("m.trace");
    let out = run(Command::new(sonda())
        .arg("merge")
        .arg(&trace)
        .arg(&elsewhere)
        .arg("-o")
        .arg(&merged));
    assert_clean_error(&out, "only traces of one host share a clock");
    let out = run(Command::new(sonda())
        .arg("merge")
        .arg(&trace)
        .arg(&cut)
        .arg("-o")
        .arg(&merged));
    assert_clean_error(&out, "is in both");
    let out = run(Command::new(sonda())
        .arg("merge")
        .arg(&trace)
        .arg("-o")
        .arg(&merged));
    assert!(
        !out.status.success() && text(&out.stderr).contains("TRACE"),
        "{}",
        text(&out.stderr)
    );
}
