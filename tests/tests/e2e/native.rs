//! Native code under `sonda record`, end to end: C programs from `tests/native/` built
//! here with gcc (`-finstrument-functions`, linked with `-lsonda`), a Java program with
//! a JNI library built the same way, and a C program that never loads libsonda.so.
//! Truths: the programs' own counts of their calls, their output without sonda, the
//! kernel's list of their threads; the exported Paraver trace passes prvcheck.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use sonda_tests::paraver::Prv;
use sonda_tests::*;
use sonda_timeline::{
    names::method_labels, CallEnter, CallExit, Feed, Frame, Sink, ThreadState, Timeline,
};
use sonda_trace::{Meta, Source, TraceMeta};

/// The report's figures of the trace at `path`.
fn summarize(
    path: &Path,
) -> Result<sonda_timeline::report::ReportSummary, sonda_timeline::report::ReportError> {
    sonda_timeline::report::summarize(sonda_timeline::Trace::open(path)?)
}

/// Paraver's user-function type (methods, regions and native functions).
const USER_FUNCTION: u64 = 60000019;

/// The directory of the libsonda.so the tests run.
fn lib_dir() -> PathBuf {
    agent().parent().unwrap().to_path_buf()
}

/// `gcc <flags> <tests/native/source> -o <dir>/<out> <libs>` (g++ for `.cc`) with
/// sonda's header, failing the test with the compiler's message.
fn gcc(dir: &Path, source: &str, out: &str, flags: &[&str], libs: &[String]) -> PathBuf {
    let exe = dir.join(out);
    let o = run(Command::new(if source.ends_with(".cc") {
        "g++"
    } else {
        "gcc"
    })
    .args(["-g", "-O1", "-pthread", "-Wall", "-Werror"])
    .args(flags)
    .arg("-I")
    .arg(repo_root().join("agent/include"))
    .arg(repo_root().join("tests/native").join(source))
    .arg("-o")
    .arg(&exe)
    .args(libs));
    assert!(o.status.success(), "gcc {source}: {}", text(&o.stderr));
    exe
}

/// Flags that link libsonda.so (found at run time through the rpath).
fn with_sonda() -> Vec<String> {
    vec![
        format!("-L{}", lib_dir().display()),
        "-lsonda".into(),
        format!("-Wl,-rpath,{}", lib_dir().display()),
    ]
}

/// `calls <name> <n>` lines of a program's output.
fn counted(stdout: &str) -> BTreeMap<String, u64> {
    stdout
        .lines()
        .filter_map(|l| {
            let (name, n) = l.strip_prefix("calls ")?.rsplit_once(' ')?;
            Some((name.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// `sonda record -o <trace> [extra] -- <command>`: stdout, stderr.
fn record(
    trace: &Path,
    extra: &[&str],
    command: &[&dyn AsRef<std::ffi::OsStr>],
) -> (String, String) {
    let mut cmd = Command::new(sonda());
    cmd.arg("record").arg("-o").arg(trace).args(extra).arg("--");
    for a in command {
        cmd.arg(a);
    }
    let out = run(&mut cmd);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "sonda record: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    (stdout, stderr)
}

/// `sonda paraver` into `stem`, checked by prvcheck, loaded back.
fn paraver(trace: &Path, stem: &Path) -> Prv {
    let out = run(Command::new(sonda())
        .arg("paraver")
        .arg(trace)
        .arg("-o")
        .arg(stem));
    assert!(out.status.success(), "sonda paraver: {}", text(&out.stderr));
    check_paraver(stem);
    Prv::load(stem)
}

/// Calls per label in the trace (every call that ended, by `sonda report`'s figures),
/// asserting that none was repaired or left open.
fn calls_per_label(trace: &Path) -> BTreeMap<String, u64> {
    let s = summarize(trace).expect("report");
    let r = &s.repairs;
    assert_eq!(
        (
            r.unwound_calls,
            r.unmatched_leaves,
            r.unfinished_calls,
            r.agent_dropped
        ),
        (0, 0, 0, 0),
        "entries and exits balance, nothing dropped: {r:?}"
    );
    let mut out = BTreeMap::new();
    for m in &s.methods {
        assert_eq!(m.incomplete, 0, "{}", m.label);
        *out.entry(m.label.clone()).or_default() += m.calls;
    }
    out
}

#[test]
fn c_program_calls_regions_and_events_are_recorded_by_name() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(
        dir.path(),
        "calls.c",
        "calls",
        &["-finstrument-functions"],
        &with_sonda(),
    );
    let trace = dir.path().join("calls.trace");
    let (stdout, stderr) = record(&trace, &["--agent-buffer", "64M"], &[&exe, &"4", &"150"]);
    assert!(stdout.contains("recording 1"), "{stdout}");
    assert!(!stderr.contains("did not load"), "{stderr}");
    let truth = counted(&stdout);
    assert_eq!(truth.len(), 8);

    // Every function call, by its source-level name, as often as the program counted.
    let recorded = calls_per_label(&trace);
    for (name, n) in &truth {
        assert_eq!(recorded.get(name), Some(n), "calls of {name}: {recorded:?}");
    }
    let regions: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("region batch "))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert_eq!(recorded.get("batch"), Some(&regions));
    assert_eq!(recorded.len(), truth.len() + 1, "{recorded:?}");

    // Threads: named by the program, with kernel states.
    let meta = TraceMeta::scan(&trace).unwrap();
    let named: Vec<&str> = meta
        .threads
        .values()
        .filter_map(|t| t.java_name.as_deref())
        .collect();
    for name in ["calls-main", "calls-worker-0", "calls-worker-3"] {
        assert!(named.contains(&name), "{named:?}");
    }
    assert_eq!(meta.counters.get("agent.native_functions"), Some(&8));
    assert!(meta.counters.get("agent.events").is_some_and(|&n| n > 0));

    // Paraver: functions and the region on the user-function type, labelled; the typed
    // events on their own type with their value names.
    let stem = dir.path().join("calls");
    let prv = paraver(&trace, &stem);
    let labels = pcf::values(&stem, USER_FUNCTION);
    for name in truth.keys().chain(["batch".to_string()].iter()) {
        assert!(labels.values().any(|l| l == name), "{name} in {labels:?}");
    }
    let entries: u64 = prv
        .events
        .iter()
        .filter(|e| e.2 == USER_FUNCTION && e.3 != 0)
        .count() as u64;
    assert_eq!(entries, truth.values().sum::<u64>() + regions);
    let phase = pcf::values(&stem, 70000001);
    assert_eq!(phase.get(&1).map(String::as_str), Some("one"), "{phase:?}");
    for name in ["calls-main", "calls-worker-2"] {
        assert!(
            prv.names.iter().any(|n| n.starts_with(name)),
            "{:?}",
            prv.names
        );
    }
}

#[test]
fn cpp_functions_get_demangled_names() {
    let _machine = shared();
    if !require_tool("g++") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(
        dir.path(),
        "shapes.cc",
        "shapes",
        &["-finstrument-functions"],
        &with_sonda(),
    );
    let trace = dir.path().join("shapes.trace");
    let (stdout, _) = record(&trace, &[], &[&exe]);
    let truth = counted(&stdout);
    let recorded = calls_per_label(&trace);
    assert_eq!(truth.len(), 6);
    for (name, n) in &truth {
        assert_eq!(recorded.get(name), Some(n), "calls of {name}: {recorded:?}");
    }
    // The C API from C++.
    assert_eq!(recorded.get("all rounds"), Some(&1));
    let meta = TraceMeta::scan(&trace).unwrap();
    assert!(meta
        .threads
        .values()
        .any(|t| t.java_name.as_deref() == Some("shapes-main")));
}

/// Keeps, for every call of a native function, the labels of the calls open below it on
/// its thread (outermost first).
struct Nesting {
    labels: HashMap<u32, String>,
    stacks: HashMap<u32, Vec<String>>,
    natives: Vec<(String, Vec<String>)>,
    native_ids: Vec<u32>,
}

impl Sink for Nesting {
    fn enter(&mut self, c: &CallEnter) {
        let Frame::Method(id) = c.frame else {
            panic!("a native function kept its address: {:?}", c.frame)
        };
        let label = self.labels[&id].clone();
        let stack = self.stacks.entry(c.at.thread.0).or_default();
        assert_eq!(stack.len() + 1, c.depth);
        if self.native_ids.contains(&id) {
            self.natives.push((label.clone(), stack.clone()));
        }
        stack.push(label);
    }
    fn exit(&mut self, c: &CallExit) {
        let stack = self.stacks.entry(c.at.thread.0).or_default();
        assert_eq!(stack.len(), c.depth);
        stack.pop();
    }
}

#[test]
fn jni_functions_nest_inside_the_java_methods_that_call_them() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let classes = dir.path().join("classes");
    let o = run(Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .arg(repo_root().join("tests/native/NativeNest.java")));
    assert!(o.status.success(), "javac: {}", text(&o.stderr));
    // The JNI library is linked against a copy of libsonda.so in another directory
    // (its rpath), so that it can run without sonda. Under sonda the JVM has loaded the
    // agent by path, and the loader must bind the library's `libsonda.so` to that copy by
    // its SONAME: a second copy would record nothing (it sees a JVM and leaves the
    // recording to the agent), and would show among the mappings.
    let copy_dir = dir.path().join("copy");
    std::fs::create_dir(&copy_dir).unwrap();
    let copy = copy_dir.join("libsonda.so");
    std::fs::copy(agent(), &copy).unwrap();
    let java_home = java_home();
    let lib = dir.path().join("libnativenest.so");
    let o = run(Command::new("gcc")
        .args([
            "-shared",
            "-fPIC",
            "-finstrument-functions",
            "-g",
            "-O1",
            "-Wall",
            "-Werror",
        ])
        .arg(format!("-I{}", java_home.join("include").display()))
        .arg(format!("-I{}", java_home.join("include/linux").display()))
        .arg(repo_root().join("tests/native/nativenest.c"))
        .arg("-o")
        .arg(&lib)
        .arg(format!("-L{}", copy_dir.display()))
        .arg("-lsonda")
        .arg(format!("-Wl,-rpath,{}", copy_dir.display())));
    assert!(o.status.success(), "gcc: {}", text(&o.stderr));
    let workload = Workload::java_in(&classes, "NativeNest")
        .jvm_args([format!("-Djava.library.path={}", dir.path().display())])
        .args(["60"]);

    // Without sonda: what the program prints.
    let plain = run(&mut workload.java_command());
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let expected = text(&plain.stdout);

    let trace = dir.path().join("nest.trace");
    let stdout = workload.methods(["NativeNest::*"]).record(&trace).stdout;
    assert_eq!(stdout, expected, "the program's output changed under sonda");
    let truth = counted(&stdout);
    assert_eq!(truth.len(), 3);

    // One copy of the library: the agent's.
    let meta = TraceMeta::scan(&trace).unwrap();
    let copy_path = copy.canonicalize().unwrap().to_string_lossy().into_owned();
    let mapped: Vec<&String> = meta
        .mappings
        .iter()
        .filter_map(|m| match m {
            Meta::Mapping { path, .. } => Some(path),
            _ => None,
        })
        .collect();
    assert!(
        mapped.iter().any(|p| p.ends_with("libnativenest.so")),
        "{mapped:?}"
    );
    assert!(
        !mapped.iter().any(|p| **p == copy_path),
        "second libsonda.so: {mapped:?}"
    );

    // The C functions, called as often as the library counted.
    let recorded = calls_per_label(&trace);
    for (name, n) in &truth {
        assert_eq!(recorded.get(name), Some(n), "calls of {name}: {recorded:?}");
    }

    // On each thread, every C call sits inside the Java method that called it.
    let labels = method_labels(&meta);
    let mut nesting = Nesting {
        labels,
        stacks: HashMap::new(),
        natives: Vec::new(),
        native_ids: meta.native_functions.keys().copied().collect(),
    };
    let mut feed = Feed::open(&trace, &meta).unwrap();
    let source = meta.info.as_ref().map_or(Source::Tracepoints, |i| i.source);
    let mut timeline = Timeline::new(feed.origin(), source, meta.threads.keys().copied());
    for r in feed.by_ref() {
        timeline.push(&r, &mut nesting);
    }
    timeline.finish(feed.end(), &mut nesting);
    assert_eq!(
        nesting.natives.len() as u64,
        truth.values().sum::<u64>(),
        "every C call seen"
    );
    for (label, below) in &nesting.natives {
        let tail: Vec<&str> = below.iter().rev().map(String::as_str).collect();
        let expect_parent = match label.as_str() {
            "Java_NativeNest_work" => "NativeNest::javaOuter",
            "c_outer" => "Java_NativeNest_work",
            "c_inner" => tail
                .first()
                .copied()
                .filter(|p| *p == "c_inner")
                .unwrap_or("c_outer"),
            other => panic!("unexpected native function {other}"),
        };
        assert_eq!(
            tail.first().copied(),
            Some(expect_parent),
            "{label} in {below:?}"
        );
        assert!(
            below.iter().any(|l| l == "NativeNest::javaOuter")
                && below.iter().any(|l| l == "NativeNest::loop"),
            "{label} outside its Java callers: {below:?}"
        );
    }
    // Both threads called into C.
    let threads_with_c: std::collections::BTreeSet<_> = nesting
        .natives
        .iter()
        .map(|(_, below)| below.first().cloned())
        .collect();
    assert!(threads_with_c.len() >= 2, "{threads_with_c:?}");

    // Paraver: the same nesting on the user-function type (prvcheck checks that the
    // stacked values nest); C values above the Java method ids, labelled by name.
    let stem = dir.path().join("nest");
    let prv = paraver(&trace, &stem);
    let pcf = pcf::values(&stem, USER_FUNCTION);
    let value_of = |name: &str| {
        *pcf.iter()
            .find(|(_, l)| l.as_str() == name)
            .unwrap_or_else(|| panic!("{name} not in {pcf:?}"))
            .0
    };
    let outer = value_of("NativeNest::javaOuter");
    let inner = value_of("c_inner");
    assert!(inner > outer);
    let mut stacks: HashMap<usize, Vec<i64>> = HashMap::new();
    let mut inner_calls = 0;
    for &(t, _, ty, v) in &prv.events {
        if ty != USER_FUNCTION {
            continue;
        }
        let s = stacks.entry(t).or_default();
        if v == 0 {
            s.pop();
        } else {
            if v == inner {
                inner_calls += 1;
                assert!(s.contains(&outer), "c_inner outside javaOuter: {s:?}");
            }
            s.push(v);
        }
    }
    assert_eq!(inner_calls, truth["c_inner"]);

    // sonda report lists them by name.
    let out = run(Command::new(sonda()).arg("report").arg(&trace));
    let report = text(&out.stdout);
    for name in [
        "c_inner",
        "c_outer",
        "Java_NativeNest_work",
        "NativeNest::javaOuter",
    ] {
        assert!(
            report.lines().any(|l| l.trim_start().starts_with(name)),
            "{name} in the report:\n{report}"
        );
    }
}

#[test]
fn a_program_without_libsonda_records_kernel_states_only_and_says_so() {
    let _machine = shared();
    if !require_tracepoints() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Instrumented but not linked with libsonda.so: glibc's no-op hooks.
    let exe = gcc(
        dir.path(),
        "calls.c",
        "plain",
        &["-finstrument-functions", "-DSONDA_ABSENT"],
        &[],
    );
    let trace = dir.path().join("plain.trace");
    let (stdout, stderr) = record(&trace, &[], &[&exe, &"3", &"100"]);
    assert!(stdout.contains("recording 0"), "{stdout}");
    let notices: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("did not load libsonda.so"))
        .collect();
    assert_eq!(notices.len(), 1, "{stderr}");
    assert!(
        notices[0].starts_with("sonda: ") && notices[0].contains("plain"),
        "{stderr}"
    );
    let meta = TraceMeta::scan(&trace).unwrap();
    assert_eq!(meta.counters.get("agent.events"), Some(&0));
    assert!(meta.methods.is_empty() && meta.native_functions.is_empty());
    // Kernel states of every thread: main and its 3 workers.
    let s = summarize(&trace).unwrap();
    let threads: Vec<_> = s.processes.iter().flat_map(|p| &p.threads).collect();
    assert_eq!(threads.len(), 4, "{threads:?}");
    for t in &threads {
        assert!(t.stats.states.get(ThreadState::Running) > 0, "{t:?}");
        assert!(t.stats.switches > 0, "{t:?}");
    }
    paraver(&trace, &dir.path().join("plain"));
}

/// The JDK whose `javac` is on the path.
fn java_home() -> PathBuf {
    let javac = run(Command::new("sh").args(["-c", "readlink -f \"$(command -v javac)\""]));
    let javac = PathBuf::from(text(&javac.stdout).trim());
    javac
        .parent()
        .and_then(Path::parent)
        .expect("javac lives in <jdk>/bin")
        .to_path_buf()
}
