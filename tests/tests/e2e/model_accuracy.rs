//! The model's predictions against the workload's own measurement (issue 14): the
//! bundled ServiceDemo (scripts/demo/demo/ServiceDemo.java: 6 workers, three request
//! classes of known demand, each call timing itself with `System.nanoTime` and the
//! JVM's thread CPU clock) at three loads, alone and with one untraced CPU-bound
//! process beside it. `sonda model --run-queues` exports the model of each
//! recording; LINE's simulator (LDES, with the worker pool's finite capacity region:
//! tests/python/ldes_with_regions.py) solves it; the predicted mean response time, throughput and CPU utilisation of
//! every class are held to what ServiceDemo measured: within 5%, 2% and 2% alone,
//! 10% with the CPU-bound process.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use sonda_tests::*;

const CLASSES: [&str; 3] = ["browse", "search", "checkout"];

/// About 30%, 50% and 70% of 2 CPUs: 1.8 ms of CPU a request.
const RATES: [f64; 3] = [330.0, 550.0, 770.0];

/// A CPU-bound process the trace does not follow, killed when dropped.
struct Hog(Child);

impl Hog {
    fn start() -> Hog {
        Hog(Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .expect("sh"))
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What ServiceDemo measured of one class: mean wall time (s), throughput (1/s), CPU
/// utilisation (fraction of the machine, from the JVM's thread CPU clock).
#[derive(Clone, Copy, Debug, Default)]
struct Measured {
    r: f64,
    x: f64,
    u: f64,
}

/// Seconds of load, from the first call, left out of both sides: the JVM's warm-up
/// (class loading, JIT compilation: the first half second of a run waits two to
/// three times as long as the rest, 2026-12-07) is not the steady state a queueing
/// model predicts.
const WARMUP_S: f64 = 1.0;

/// Seconds ServiceDemo runs: the warm-up, then 3 s measured.
const SECONDS: &str = "4";

fn measured(csv: &Path, cpus: f64) -> BTreeMap<String, Measured> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("class,thread,start_ns,wall_ns,cpu_ns,wait_ns,span_ns,span_cpu_ns")
    );
    let rows: Vec<(String, u64, u64, u64)> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].to_string(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
                f[4].parse().unwrap(),
            )
        })
        .collect();
    let warm = rows.iter().map(|r| r.1).min().unwrap() + (WARMUP_S * 1e9) as u64;
    let rows: Vec<_> = rows.into_iter().filter(|r| r.1 >= warm).collect();
    let first = rows.iter().map(|r| r.1).min().unwrap();
    let last = rows.iter().map(|r| r.1 + r.2).max().unwrap();
    let span = (last - first) as f64 / 1e9;
    let mut out = BTreeMap::new();
    for class in CLASSES {
        let c: Vec<_> = rows.iter().filter(|r| r.0 == class).collect();
        assert!(c.len() > 100, "{class}: {} calls", c.len());
        let n = c.len() as f64;
        out.insert(
            class.to_string(),
            Measured {
                r: c.iter().map(|r| r.2 as f64).sum::<f64>() / n / 1e9,
                x: n / span,
                u: c.iter().map(|r| r.3 as f64).sum::<f64>() / 1e9 / span / cpus,
            },
        );
    }
    out
}

/// Events LINE's simulator runs per model: its figures vary by about 1% from one
/// seed to another at this length.
const LDES_SAMPLES: &str = "1000000";

/// LINE's figures of the model (`sonda model --run-queues`, solved by LINE's
/// simulator with the worker pool's region, tests/python/ldes_with_regions.py): per
/// class, X at the source; R by Little's law from the jobs inside the region (the CPU
/// run queues and the blocked delay: a station's response time at the region's
/// entrance includes the wait outside it, which ServiceDemo's does not); U summed
/// over the CPUs, as a share of the machine.
fn predicted(venv: &Path, jsimg: &Path, cpus: f64) -> BTreeMap<String, Measured> {
    let solved = run(Command::new(venv.join("bin/python"))
        .arg(repo_root().join("tests/python/ldes_with_regions.py"))
        .arg(jsimg)
        .args(["1", LDES_SAMPLES]));
    let table = text(&solved.stdout);
    assert!(
        solved.status.success(),
        "LINE: {table}{}",
        text(&solved.stderr)
    );
    let mut out: BTreeMap<String, Measured> = BTreeMap::new();
    let mut jobs: BTreeMap<String, f64> = BTreeMap::new();
    let mut rows = table
        .lines()
        .skip_while(|l| !l.starts_with("Station,JobClass"));
    rows.next();
    for l in rows {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() != 8 {
            continue;
        }
        let class = f[1].rsplit("::").next().unwrap().to_string();
        let n = |i: usize| f[i].parse::<f64>().unwrap();
        let e = out.entry(class.clone()).or_default();
        match f[0] {
            "Source" => e.x = n(7),
            "Blocked" => *jobs.entry(class).or_default() += n(2),
            cpu if cpu.starts_with("CPU") => {
                e.u += n(3) / cpus;
                *jobs.entry(class).or_default() += n(2);
            }
            _ => {}
        }
    }
    for (class, e) in out.iter_mut() {
        if e.x > 0.0 {
            e.r = jobs.get(class).copied().unwrap_or(0.0) / e.x;
        }
    }
    out
}

/// Ignored until the acceptance holds. The run-queue model (per-CPU round robin with
/// the measured slice, wake-up placement on the shortest queue, the 6 workers as a
/// finite capacity region; beside a CPU-bound task, its slice twice the measured wait
/// behind it and the traced classes placed on its CPU with the measured share of
/// wakeups; see docs/services-schema.md), on a shared 2-CPU guest, three clean runs
/// (2026-12-05): throughput within 0.1%, utilisation within 1.2% alone and 8.6%
/// beside the hog. Response times alone: browse -5.2% to +7.1% (over 5% only at
/// 770/s, 2 runs of 3), search +1.1% to +4.5%, checkout -3.8% to -7.8% (over 5% in 7 of
/// 9); beside the hog: -13.1% (checkout at 330/s) to +16.7% (checkout at 770/s), 10 of
/// 27 figures within 10% (with the hog's mean stretch as its slice and shortest-queue
/// placement, on two of these runs' recordings: -5% to +69%). What is left: alone,
/// checkout's short wake-up visits wait more than the model's (the measured first
/// visit 2.2 ms, the later ones 6-30 us: the model's mean visit is 0.43 ms; a model
/// with the two apart, tried, gave the short visits a whole slice's residual and was
/// worse); beside the hog at 50-70%, every class 10-16% high. A CPU-bound task that
/// comes and goes during a run (another session's job) is still predicted badly:
/// +50% to +85% in a disturbed run. With the kernel task filter on (the default since
/// these runs), one run: browse -6.1% to +4.7%, search +1.3% to +4.0%, checkout -9.0%
/// to -7.1% alone; -7.2% to +14.4% beside the hog, found CPU-bound; X within 0.1%, U
/// within 3%. Both sides leave out the first second of load since 2026-12-07
/// ([`WARMUP_S`]); one run: alone browse -6.5% to +6.7%, search +3.8% to +9.4%,
/// checkout -8.9% to -5.1% (7 of 9 over 5%, against -6.5%..+22.5% on the same
/// machine with the warm-up in), U within 1.7% (was 5.5%); beside the hog browse
/// -7.2% to +7.2%, search +12.4% to +26.1%, checkout -9.2% to +12.7%. What is left alone
/// is one bias per class: search predicted slow and checkout fast at every load. The
/// model splits a call's CPU evenly over its visits; the trace shows one long visit
/// (search 1.0 ms, checkout 2.2 ms) and short ones (20-45 us) whose waits after a
/// short block are long (checkout's second visit: 311 us mean, median 6 us). Run it
/// with `--ignored` to see the figures.
#[test]
#[ignore = "issue 14: response-time accuracy not reached yet (run with --ignored)"]
fn the_model_predicts_servicedemo_at_three_loads_alone_and_beside_a_cpu_hog() {
    let _machine = exclusive();
    if !require_tracepoints() {
        return;
    }
    let Some(venv) = python_env() else {
        return;
    };
    // SONDA_MODEL_ACCURACY_KEEP=DIR keeps the recordings, models and CSVs there, to
    // study a model offline against the same runs.
    let tmp = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("SONDA_MODEL_ACCURACY_KEEP").map(std::path::PathBuf::from);
    if let Some(k) = &kept {
        std::fs::create_dir_all(k).unwrap();
    }
    let dir = kept.as_deref().unwrap_or(tmp.path());
    let classes = sonda_tests::service_demo_classes(dir);
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get()) as f64;
    let workers = (3.0 * cpus) as usize;

    let mut failures = Vec::new();
    eprintln!("load       class     R measured/predicted (err)   X measured/predicted (err)   U measured/predicted (err)");
    for hog in [false, true] {
        for rate in RATES {
            // Rates are for 2 CPUs; scale to the machine.
            let rate = rate * cpus / 2.0;
            let tag = format!("{}{rate:.0}", if hog { "hog-" } else { "" });
            let trace = dir.join(format!("{tag}.trace"));
            let csv = dir.join(format!("{tag}.csv"));
            let hog_task = hog.then(Hog::start);
            let mut cmd = Command::new(sonda());
            cmd.arg("record").arg("-o").arg(&trace);
            for c in CLASSES {
                cmd.arg("--methods").arg(format!("demo.ServiceDemo::{c}"));
            }
            cmd.arg("--")
                .arg("java")
                .arg("-cp")
                .arg(&classes)
                .args(["demo.ServiceDemo", "--workers", &workers.to_string()])
                .args(["--rate", &rate.to_string(), "--seconds", SECONDS, "--out"])
                .arg(&csv)
                .arg("--dir")
                .arg(dir.join("data"));
            // How disturbed the run was (stop 38 saw a run with 40% of a call's CPU time
            // stolen and every figure off).
            let ticks_before = sonda_tests::cpu_ticks();
            let rec = run(&mut cmd);
            let stolen = match (ticks_before, sonda_tests::cpu_ticks()) {
                (Some((t0, s0)), Some((t1, s1))) if t1 > t0 => {
                    format!(
                        ", the host stole {:.1}% of the CPUs",
                        100.0 * (s1 - s0) as f64 / (t1 - t0) as f64
                    )
                }
                _ => String::new(),
            };
            eprintln!("{tag}: recorded{stolen}");
            let hog_pid = hog_task.as_ref().map(|h| h.0.id());
            drop(hog_task);
            assert!(rec.status.success(), "sonda record: {}", text(&rec.stderr));

            // The hog is found CPU-bound and modelled as such.
            let json = run(Command::new(sonda())
                .arg("services")
                .arg(&trace)
                .args(["--format", "json"]));
            assert!(json.status.success(), "{}", text(&json.stderr));
            let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
            let bound: Vec<u64> = doc["background"]["cpu_bound_tasks"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t.as_u64())
                .collect();
            if let Some(pid) = hog_pid {
                assert!(
                    bound.contains(&u64::from(pid)),
                    "{tag}: the hog {pid} is not among the CPU-bound tasks {bound:?}"
                );
            }

            let jsimg = dir.join(format!("{tag}.jsimg"));
            let first_s = doc["whole"]["begin_s"].as_f64().unwrap();
            let model = run(Command::new(sonda())
                .arg("model")
                .arg(&trace)
                .arg("--run-queues")
                .arg("--from")
                .arg(format!("{:.0}ns", (first_s + WARMUP_S) * 1e9))
                .arg("-o")
                .arg(&jsimg));
            assert!(model.status.success(), "{}", text(&model.stderr));
            eprint!("{}", text(&model.stderr));
            let m = measured(&csv, cpus);
            let p = predicted(&venv, &jsimg, cpus);
            let tol_r = if hog { 0.10 } else { 0.05 };
            let tol_xu = if hog { 0.10 } else { 0.02 };
            for class in CLASSES {
                let (m, p) = (m[class], p[class]);
                let err = |a: f64, b: f64| (b - a) / a;
                eprintln!(
                    "{tag:10} {class:9} {:.3}/{:.3} ms ({:+.1}%)   {:.1}/{:.1} ({:+.1}%)   {:.4}/{:.4} ({:+.1}%)",
                    m.r * 1e3,
                    p.r * 1e3,
                    err(m.r, p.r) * 100.0,
                    m.x,
                    p.x,
                    err(m.x, p.x) * 100.0,
                    m.u,
                    p.u,
                    err(m.u, p.u) * 100.0
                );
                for (what, e, tol) in [
                    ("R", err(m.r, p.r), tol_r),
                    ("X", err(m.x, p.x), tol_xu),
                    ("U", err(m.u, p.u), tol_xu),
                ] {
                    if e.abs() > tol {
                        failures.push(format!(
                            "{tag} {class}: {what} off by {:+.1}% (allowed {:.0}%{stolen})",
                            e * 100.0,
                            tol * 100.0
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
