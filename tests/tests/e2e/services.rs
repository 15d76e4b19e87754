//! `sonda services` and `sonda model` end to end, on the bundled workload of known
//! demands (scripts/demo/demo/ServiceDemo.java): a pool of three workers per CPU
//! serving three request classes, each call measuring itself with the JVM's clocks
//! (thread CPU time, System.nanoTime) and the kernel's run-queue wait of its thread
//! (/proc/thread-self/schedstat). Those per-call measurements are the truth the
//! trace's figures are held to (how they differ and why: docs/services-schema.md,
//! "Measurement notes"); LINE (an independent reader of JMT models) solves the
//! exported model.

use std::collections::BTreeMap;
use std::path::Path;
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
    /// The window of `wait`, holding those of `wall` and `cpu`, and its CPU time.
    span: u64,
    span_cpu: u64,
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
    stolen: u64,
    sleeping: u64,
    uninterruptible: u64,
    other: u64,
    monitor: u64,
    gc: u64,
    blocked_phases: u64,
    first_visit: u64,
}

impl TraceCall {
    /// What the JVM's side counts as neither CPU nor run-queue wait: sleeping, D state,
    /// and the steal time of a virtual CPU (the kernel charges a thread's CPU time from
    /// the task clock, which leaves steal out, and counts run-queue wait only while the
    /// thread is not on a CPU, so stolen time is in neither of the JVM's clocks).
    fn blocked(&self) -> u64 {
        self.asleep() + self.stolen
    }

    /// Sleeping and D state: the model's blocked time (its CPU service holds the
    /// steal, as the virtual CPU was held).
    fn asleep(&self) -> u64 {
        self.sleeping + self.uninterruptible
    }
}

fn read_jvm_calls(path: &Path) -> Vec<JvmCall> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("class,thread,start_ns,wall_ns,cpu_ns,wait_ns,span_ns,span_cpu_ns")
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
                span: f[6].parse().unwrap(),
                span_cpu: f[7].parse().unwrap(),
            }
        })
        .collect()
}

fn read_trace_calls(csv: &str) -> Vec<TraceCall> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (m, th, b, w, c, r, st, s, d, o, mo, g) = (
        col("method"),
        col("thread"),
        col("begin_ns"),
        col("wall_ns"),
        col("cpu_ns"),
        col("runnable_ns"),
        col("stolen_ns"),
        col("sleeping_ns"),
        col("uninterruptible_ns"),
        col("other_ns"),
        col("monitor_ns"),
        col("gc_ns"),
    );
    let (bp, fv) = (col("blocked_phases"), col("first_visit_ns"));
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
                stolen: n(st),
                sleeping: n(s),
                uninterruptible: n(d),
                other: n(o),
                monitor: n(mo),
                gc: n(g),
                blocked_phases: n(bp),
                first_visit: n(fv),
            }
        })
        .collect()
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    s / n.max(1) as f64
}

fn services(args: &[&str]) -> std::process::Output {
    run(Command::new(sonda()).arg("services").args(args))
}

#[test]
fn services_match_the_jvm_and_line_solves_the_model() {
    // Per-call CPU and wall times held to the JVM's within 1-2%, throughput to
    // LINE's within 5%: no other test on the CPUs meanwhile.
    let _machine = exclusive();
    if !require_tracepoints() {
        return;
    }
    // Kept when the test fails: it once failed under heavy steal (a call's states 16 µs
    // over its wall) with nothing left to read.
    let dir = sonda_tests::KeptOnFailure::new();
    let classes = sonda_tests::service_demo_classes(dir.path());
    let trace = dir.path().join("demo.trace");
    let jvm_csv = dir.path().join("calls.csv");
    let mut cmd = Command::new(sonda());
    cmd.arg("record").arg("-o").arg(&trace);
    for c in CLASSES {
        cmd.arg("--methods").arg(format!("demo.ServiceDemo::{c}"));
    }
    // Three workers per CPU (6 on 2 CPUs), about one CPU of demand (1.8 ms a request at
    // 550 requests/s): busy, with queueing for the CPUs, and stable (the pool keeps up
    // with the arrivals). The same settings as scripts/demo.sh.
    let workers = 3 * std::thread::available_parallelism().map_or(2, |n| n.get());
    cmd.arg("--")
        .arg("java")
        .arg("-cp")
        .arg(&classes)
        .args(["demo.ServiceDemo", "--workers", &workers.to_string()])
        .args(["--rate", "550", "--seconds", "6", "--out"])
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

    // Every call: the six states add up to its wall time (exactly: within 1 us is
    // the requirement); monitor and GC time are parts of them.
    for c in &calls {
        let sum = c.cpu + c.runnable + c.stolen + c.sleeping + c.uninterruptible + c.other;
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

    eprintln!("class     calls  cpu trace/jvm (err, jvm-trace)     wall trace/jvm (err)      blocked trace/jvm (err)   waiting trace/jvm  stolen (in blocked)");
    for class in CLASSES {
        let j: Vec<&JvmCall> = jvm.iter().filter(|c| c.class == class).collect();
        let t: Vec<&TraceCall> = calls.iter().filter(|c| c.class == class).collect();
        assert_eq!(t.len(), j.len(), "{class}: call counts");
        assert!(j.len() > 300, "{class}: too few calls ({})", j.len());
        assert!(
            j.iter().all(|c| c.wait >= 0),
            "{class}: the JVM could not read /proc/thread-self/schedstat"
        );
        let cpu = (
            mean(t.iter().map(|c| c.cpu as f64)),
            mean(j.iter().map(|c| c.cpu as f64)),
        );
        let wall = (
            mean(t.iter().map(|c| c.wall as f64)),
            mean(j.iter().map(|c| c.wall as f64)),
        );
        // The JVM's blocked time, over every call: span - span CPU - run-queue wait, all
        // three over one span that holds the call and starts and ends at instants whose
        // wait is exact (ServiceDemo.measured). The kernel's stale-clock charge
        // (docs/services-schema.md, measurement notes) moves time from the JVM's wait
        // to its CPU time and leaves their sum, and so this difference, unbiased.
        let blocked = (
            mean(t.iter().map(|c| c.blocked() as f64)),
            mean(
                j.iter()
                    .map(|c| c.span as f64 - c.span_cpu as f64 - c.wait as f64),
            ),
        );
        let waiting = (
            mean(t.iter().map(|c| c.runnable as f64)),
            mean(j.iter().map(|c| c.wait as f64)),
        );
        let err = |(a, b): (f64, f64)| (a - b) / b;
        eprintln!(
            "{class:9} {:5}  {:.4}/{:.4} ms ({:+.2}%, {:+5.1} us)  {:.4}/{:.4} ms ({:+.2}%)  {:.4}/{:.4} ms ({:+.2}%)  {:.4}/{:.4} ms  {:.4} ms",
            t.len(),
            cpu.0 / 1e6, cpu.1 / 1e6, err(cpu) * 100.0, (cpu.1 - cpu.0) / 1e3,
            wall.0 / 1e6, wall.1 / 1e6, err(wall) * 100.0,
            blocked.0 / 1e6, blocked.1 / 1e6, if blocked.1 > 0.0 { err(blocked) * 100.0 } else { 0.0 },
            waiting.0 / 1e6, waiting.1 / 1e6,
            mean(t.iter().map(|c| c.stolen as f64)) / 1e6,
        );
        // The JVM's thread CPU clock runs ahead of the switch records by the kernel's
        // stale-clock charge at switch-ins (a few microseconds a switch-in, ~20 us a
        // checkout call): each class's CPU demand is large enough that this stays well
        // inside 2%.
        assert!(err(cpu).abs() < 0.02, "{class}: cpu {cpu:?}");
        // The first CPU visit: all of a call's CPU when it never blocked; else at
        // least the work ServiceDemo does before its first block (burnCpu runs until
        // the JVM's thread CPU clock has advanced 1 ms in search, 2 ms in checkout;
        // within the 2% the clocks differ by), and less than all of it.
        for c in t.iter().filter(|c| c.blocked_phases == 0) {
            assert_eq!(c.first_visit, c.cpu + c.stolen, "{c:?}");
        }
        let burn_ns = match class {
            "search" => 1e6,
            "checkout" => 2e6,
            _ => 0.0,
        };
        if burn_ns > 0.0 {
            let blocked: Vec<&&TraceCall> = t.iter().filter(|c| c.blocked_phases > 0).collect();
            assert!(
                blocked.len() * 10 > t.len() * 9,
                "{class}: few calls blocked"
            );
            let first = mean(blocked.iter().map(|c| c.first_visit as f64));
            let all = mean(blocked.iter().map(|c| (c.cpu + c.stolen) as f64));
            eprintln!(
                "{class:9} first CPU visit {:.4} ms of {:.4} ms (work before the first block {:.1} ms)",
                first / 1e6,
                all / 1e6,
                burn_ns / 1e6
            );
            assert!(
                first >= 0.98 * burn_ns && first < all,
                "{class}: first visit {first} of {all}"
            );
        }
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
    period_counts_the_calls_that_enter_in_it(&trace, &jvm, dir.path());
    // Windows.
    let win = services(&[trace.to_str().unwrap(), "--window", "1"]);
    assert!(win.status.success(), "{}", text(&win.stderr));
    assert!(text(&win.stdout).contains("Per window:"));
    // Units of work: one class per request type, nothing nested in ServiceDemo's.
    let table = text(&win.stdout);
    let units = table
        .split_once("Units of work")
        .map(|(_, u)| u)
        .expect("no units of work in the table");
    for c in CLASSES {
        let label = format!("demo.ServiceDemo::{c}");
        let line = units
            .lines()
            .find(|l| l.split_whitespace().next() == Some(label.as_str()))
            .unwrap_or_else(|| panic!("no unit class {label}: {units}"));
        let n: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(n > 100, "{line}");
    }
    // The pictures of the three classes' demands.
    let labels: Vec<String> = CLASSES
        .iter()
        .map(|c| format!("demo.ServiceDemo::{c}"))
        .collect();
    crate::plots::check_plots(&trace, &dir.path().join("plots"), &labels);

    // JSON, checked against the documented schema; and the model, solved by LINE.
    let Some(venv) = python_env() else {
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
            "import json,math,sys,jsonschema\n\
             s=json.load(open(sys.argv[1])); d=json.load(open(sys.argv[2]))\n\
             jsonschema.Draft202012Validator.check_schema(s)\n\
             jsonschema.Draft202012Validator(s).validate(d)\n\
             print(len(d['whole']['methods']), len(d['windows']), d['trace']['cpus'],\n\
                   math.ceil(d['whole']['duration_s'] / 2 - 1e-9))",
        ])
        .arg(&schema)
        .arg(&json));
    assert!(
        check.status.success(),
        "JSON output does not follow {}: {}",
        schema.display(),
        text(&check.stderr)
    );
    let checked: Vec<usize> = text(&check.stdout)
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(checked[0], 3, "methods in the JSON");
    assert_eq!(checked[1], checked[3], "2 s windows in the JSON");
    // The model's CPU station has the trace's CPUs as servers.
    let cpus = checked[2] as f64;

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
            // (utilisation, residence time per class arrival, throughput)
            predicted.insert((f[0].to_string(), class), (n(3), n(5), n(7)));
        }
    }
    assert!(!predicted.is_empty(), "LINE printed no table: {table}");
    let duration = {
        let first = calls.iter().map(|c| c.begin).min().unwrap();
        let last = calls.iter().map(|c| c.begin + c.wall).max().unwrap();
        (last - first) as f64 / 1e9
    };
    // LINE's response times are printed beside the measured ones, not checked: the
    // model has the JVM alone on the machine's CPUs (no other load, no bounded pool).
    eprintln!("class     X trace/LINE (err)      CPU util trace/LINE (err)   R trace/LINE        at the CPU: cpu+waiting trace/LINE   blocked trace/LINE");
    for class in CLASSES {
        let t: Vec<&TraceCall> = calls.iter().filter(|c| c.class == class).collect();
        let x = t.len() as f64 / duration;
        // The model's CPU service is the CPU time charged to the call; what the
        // hypervisor stole meanwhile is background load.
        let util = t.iter().map(|c| c.cpu as f64).sum::<f64>() / 1e9 / duration / cpus;
        let ms = |f: &dyn Fn(&TraceCall) -> u64| mean(t.iter().map(|c| f(c) as f64)) / 1e6;
        // The CPU's throughput counts visits: a class's own is its source's.
        let (u_line, r_cpu, _) = predicted[&("CPU".to_string(), class.to_string())];
        let x_line = predicted[&("Source".to_string(), class.to_string())].2;
        let r_blocked = predicted
            .get(&("Blocked".to_string(), class.to_string()))
            .map_or(0.0, |p| p.1);
        eprintln!(
            "{class:9} {x:.1}/{x_line:.1} ({:+.2}%)  {util:.4}/{u_line:.4} ({:+.2}%)  {:.3}/{:.3} ms    {:.3}/{:.3} ms                   {:.3}/{:.3} ms",
            (x_line - x) / x * 100.0,
            (u_line - util) / util * 100.0,
            ms(&|c| c.wall),
            (r_cpu + r_blocked) * 1e3,
            ms(&|c| c.cpu + c.stolen + c.runnable),
            r_cpu * 1e3,
            ms(&|c| c.asleep()),
            r_blocked * 1e3,
        );
        assert!(
            (x_line - x).abs() / x < 0.05,
            "{class}: throughput {x} vs LINE {x_line}"
        );
        assert!(
            (u_line - util).abs() / util < 0.05,
            "{class}: CPU utilisation {util} vs LINE {u_line}"
        );
        // The model keeps each class's measured mean blocked time per call.
        let blocked = ms(&|c| c.asleep()) / 1e3;
        assert!(
            (r_blocked - blocked).abs() <= 0.02 * blocked,
            "{class}: blocked {blocked} s vs LINE {r_blocked} s"
        );
    }
}

/// `--from`/`--to` (from the trace's start) keep exactly the calls that enter between
/// them, in `sonda services` and `sonda model`: the JVM's own list of calls, cut at
/// the same instants, is the truth. Each cut lies in a gap of 200 us or more between
/// two calls' starts, so the trace's enter reading up to 20 us early cannot move a
/// call across it.
fn period_counts_the_calls_that_enter_in_it(trace: &Path, jvm: &[JvmCall], dir: &Path) {
    let t = trace.to_str().unwrap();
    let all = services(&[t, "--format", "json"]);
    assert!(all.status.success(), "{}", text(&all.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    let first_s = doc["whole"]["begin_s"].as_f64().unwrap();
    let first = jvm.iter().map(|c| c.start).min().unwrap();
    let mut starts: Vec<u64> = jvm.iter().map(|c| c.start).collect();
    starts.sort_unstable();
    let cut_after = |from: usize| {
        let i = (from..starts.len() - 1)
            .find(|&i| starts[i + 1] - starts[i] >= 200_000)
            .expect("no gap of 200 us between two calls");
        (starts[i] + starts[i + 1]) / 2
    };
    let (from, to) = (cut_after(starts.len() / 3), cut_after(starts.len() * 2 / 3));
    // The trace's time of a JVM instant: the first call's start is the first enter.
    let at = |ns: u64| format!("{}ns", (first_s * 1e9).round() as u64 + (ns - first));
    let (from_arg, to_arg) = (at(from), at(to));
    let expected = |class: &str| {
        jvm.iter()
            .filter(|c| c.class == class && (from..to).contains(&c.start))
            .count()
    };
    let cut = services(&[t, "--calls", "--from", &from_arg, "--to", &to_arg]);
    assert!(cut.status.success(), "{}", text(&cut.stderr));
    let calls = read_trace_calls(&text(&cut.stdout));
    let model = dir.join("period.jsimg");
    let made = run(Command::new(sonda())
        .arg("model")
        .arg(trace)
        .args(["--from", &from_arg, "--to", &to_arg, "-o"])
        .arg(&model));
    assert!(made.status.success(), "{}", text(&made.stderr));
    let said = text(&made.stderr);
    for class in CLASSES {
        let n = expected(class);
        assert!(n > 50, "{class}: {n} calls in the period");
        assert_eq!(
            calls.iter().filter(|c| c.class == class).count(),
            n,
            "{class}: calls in [{from_arg}, {to_arg})"
        );
        let line = said
            .lines()
            .find(|l| l.contains(&format!("demo.ServiceDemo::{class}:")))
            .unwrap_or_else(|| panic!("sonda model said nothing of {class}: {said}"));
        assert!(line.contains(&format!(": {n} calls,")), "{line}");
        // The first visit as `--calls` gives it, averaged over the same calls.
        let first = mean(
            calls
                .iter()
                .filter(|c| c.class == class)
                .map(|c| c.first_visit as f64),
        );
        assert!(
            line.contains(&format!("(the first {:.3} ms)", first / 1e6)),
            "{line}: first visit {first} ns"
        );
    }
}

#[test]
fn a_trace_without_method_events_says_how_to_trace_some() {
    let _machine = shared();
    if !require_tracepoints() {
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
