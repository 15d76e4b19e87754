//! Measures what sonda's method probes add to a call: runs `scripts/bench-probe/Bench.java`
//! in a JVM with the agent, the collector's filter selecting `Bench::traced`, while this
//! process drains the rings as the collector would (so pushes never hit a full ring).
//!
//! `cargo run --release -p sonda-agent --example bench_probe -- <tsc|monotonic> <jni|critical> [calls] [rounds]`
//! (or `scripts/bench-probe.sh`, which runs all four). `critical` runs the JVM with
//! `-XX:+CriticalJNINatives` (JDK 17), so compiled code calls the probes' critical-native
//! entry points. Prints the per-round ns/call of the plain and the traced method, and
//! the median difference: the cost of one enter+exit probe pair.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod common;
use common::libsonda;
use sonda_shm::config::AgentConfig;
use sonda_shm::records::{self, ENTER, LEAVE};
use sonda_shm::{Clock, Geometry, Region};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let clock = match args.get(1).map(String::as_str) {
        Some("tsc") => Clock::Tsc,
        Some("monotonic") => Clock::Monotonic,
        _ => {
            eprintln!(
                "usage: bench_probe <tsc|monotonic> <jni|critical> [calls per round] [rounds]"
            );
            std::process::exit(2);
        }
    };
    let critical = match args.get(2).map(String::as_str) {
        Some("jni") => false,
        Some("critical") => true,
        _ => {
            eprintln!(
                "usage: bench_probe <tsc|monotonic> <jni|critical> [calls per round] [rounds]"
            );
            std::process::exit(2);
        }
    };
    let calls: u64 = args
        .get(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000_000);
    let rounds: u64 = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(9);

    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf();
    let lib = libsonda();
    let dir = tempfile::tempdir().expect("temp dir");
    let javac = Command::new("javac")
        .arg("-d")
        .arg(dir.path())
        .arg(repo.join("scripts/bench-probe/Bench.java"))
        .status()
        .expect("javac runs");
    assert!(javac.success(), "javac failed");

    // In /dev/shm like the collector's file (tmpfs: no write-back of dirty pages).
    let shm = tempfile::Builder::new()
        .prefix("sonda-bench-")
        .tempdir_in("/dev/shm")
        .expect("dir in /dev/shm");
    let path = shm.path().join("bench.buf");
    // Four slots: the benchmark's Java thread and the JVM's own that enter the agent.
    // The whole file is reserved (fallocate) before the JVM maps it; 64 slots reserved
    // 8 GiB of tmpfs, whose reclaim of the page cache slowed this process's drain
    // enough to drop 2-16% of the events in 4 of 7 runs (0 of 5 with 4 slots).
    let geo = Geometry {
        slots: 4,
        ring_len: 128 << 20,
        meta_len: 1 << 20,
    };
    let config = AgentConfig {
        methods: vec!["Bench::traced".into()],
        ..AgentConfig::default()
    };
    let region = Region::create(&path, geo, clock, &config).expect("buffer file");
    let mut java = Command::new("java");
    if critical {
        // The flag is deprecated in JDK 17: silence the VM's warning about it.
        java.args(["-XX:-PrintWarnings", "-XX:+CriticalJNINatives"]);
    }
    let mut child = java
        .arg("-XX:CompileCommand=quiet")
        .arg("-XX:CompileCommand=dontinline,Bench::*")
        .arg(format!(
            "-agentpath:{}=shm={}",
            lib.display(),
            path.display()
        ))
        .arg("-cp")
        .arg(dir.path())
        .args(["Bench", &calls.to_string(), &rounds.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("java runs");

    // Drain like the collector, so that the probes always find room in the ring.
    let done = AtomicBool::new(false);
    let (mut enters, mut leaves) = (0u64, 0u64);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut buf = Vec::with_capacity(64 << 20);
            loop {
                let last = done.load(Ordering::Acquire);
                for i in 0..region.slots() {
                    buf.clear();
                    region.drain(i, &mut buf);
                    for r in records::decode(&buf) {
                        match r.kind {
                            ENTER => enters += 1,
                            LEAVE => leaves += 1,
                            _ => {}
                        }
                    }
                }
                if last {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let status = child.wait().expect("java exits");
        done.store(true, Ordering::Release);
        assert!(status.success(), "java failed: {status:?}");
    });
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read stdout");
    let dropped: u64 = (0..region.slots())
        .map(|i| region.slot_info(i).dropped)
        .sum();

    let mut diffs = Vec::new();
    let natives = if critical {
        "critical natives"
    } else {
        "JNI natives"
    };
    println!("clock {clock:?}, {natives}: {calls} calls per round, {rounds} rounds (ns per call)");
    println!("round   plain  traced  added");
    for (i, line) in out
        .lines()
        .filter_map(|l| l.strip_prefix("round\t"))
        .enumerate()
    {
        let v: Vec<f64> = line.split('\t').filter_map(|x| x.parse().ok()).collect();
        if v.len() == 2 {
            println!("{i:5} {:7.2} {:7.2} {:6.2}", v[0], v[1], v[1] - v[0]);
            if i > 0 {
                diffs.push(v[1] - v[0]);
            }
        }
    }
    diffs.sort_by(|a, b| a.total_cmp(b));
    let median = diffs.get(diffs.len() / 2).copied().unwrap_or(f64::NAN);
    let best = diffs.first().copied().unwrap_or(f64::NAN);
    println!(
        "added cost per enter+exit pair (round 0 = warm-up, excluded): median {median:.2} ns, best {best:.2} ns"
    );
    println!(
        "records: {enters} ENTER, {leaves} LEAVE, {dropped} dropped (expected {} each)",
        calls * rounds
    );
}
