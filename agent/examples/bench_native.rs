//! What the C hot path costs, without the collector: builds `tests/native/bench.c`
//! plain and with `-finstrument-functions` (linked with this build's libsonda.so), runs
//! both on a buffer file this process creates and drains every 2 ms (so that the ring
//! rarely fills), and prints the per-call medians and their difference.
//!
//! `cargo run --release -p sonda-agent --example bench_native -- [tsc|monotonic|off]
//! [ring MiB] [calls per round] [rounds]`. `off`: no buffer file at all (the hooks'
//! cost when nothing records). `scripts/bench-native.sh` measures the same under
//! `sonda record`.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod common;
use common::libsonda;
use sonda_shm::config::{AgentConfig, Mode};
use sonda_shm::{Clock, Geometry, Region};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let clock = match args.get(1).map(String::as_str).unwrap_or("tsc") {
        "tsc" => Some(Clock::Tsc),
        "monotonic" => Some(Clock::Monotonic),
        "off" => None,
        other => {
            eprintln!(
                "usage: bench_native [tsc|monotonic|off] [ring MiB] [calls] [rounds] (not {other})"
            );
            std::process::exit(2);
        }
    };
    let ring_mib: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(16);
    let calls = args.get(3).cloned().unwrap_or_else(|| "200000".into());
    let rounds = args.get(4).cloned().unwrap_or_else(|| "15".into());

    let lib = libsonda();
    let lib_dir = lib.parent().expect("lib dir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/native/bench.c");
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = dir.path().join("plain");
    let traced = dir.path().join("traced");
    gcc(&[src.as_os_str(), "-o".as_ref(), plain.as_os_str()]);
    let l = format!("-L{}", lib_dir.display());
    let rpath = format!("-Wl,-rpath,{}", lib_dir.display());
    gcc(&[
        "-finstrument-functions".as_ref(),
        src.as_os_str(),
        "-o".as_ref(),
        traced.as_os_str(),
        l.as_ref(),
        "-lsonda".as_ref(),
        rpath.as_ref(),
    ]);

    let shm = tempfile::Builder::new()
        .prefix("sonda-bench-")
        .tempdir_in("/dev/shm")
        .expect("dir in /dev/shm");
    let path = shm.path().join("bench.buf");
    let region = clock.map(|c| {
        let geo = Geometry {
            slots: 8,
            ring_len: ring_mib.next_power_of_two() << 20,
            meta_len: 1 << 20,
        };
        let config = AgentConfig {
            mode: Some(Mode::Launch),
            ..AgentConfig::default()
        };
        Region::create(&path, geo, c, &config).expect("buffer file")
    });
    let run = |exe: &Path| -> f64 {
        let mut cmd = Command::new(exe);
        cmd.args([calls.as_str(), rounds.as_str(), "20"]);
        if region.is_some() {
            cmd.env("SONDA_SHM", &path);
        } else {
            cmd.env_remove("SONDA_SHM");
        }
        let done = AtomicBool::new(false);
        let out = std::thread::scope(|s| {
            if let Some(region) = &region {
                s.spawn(|| {
                    let mut buf = Vec::with_capacity(64 << 20);
                    while !done.load(Ordering::Acquire) {
                        for i in 0..region.slots() {
                            buf.clear();
                            region.drain(i, &mut buf);
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                });
            }
            let out = cmd.output().expect("bench runs");
            done.store(true, Ordering::Release);
            out
        });
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        text.split_whitespace()
            .nth(2)
            .and_then(|v| v.parse().ok())
            .expect("ns_per_call median")
    };
    let p = run(&plain);
    let t = run(&traced);
    let dropped: u64 = region
        .as_ref()
        .map(|r| (0..r.slots()).map(|i| r.slot_info(i).dropped).sum())
        .unwrap_or(0);
    println!(
        "clock {:?}, ring {ring_mib} MiB: plain {p:.2} ns, instrumented {t:.2} ns, cost {:.2} ns per call (dropped {dropped})",
        clock,
        t - p
    );
}

fn gcc(args: &[&std::ffi::OsStr]) {
    let st = Command::new("gcc")
        .args(["-O2", "-g"])
        .args(args)
        .status()
        .expect("gcc runs");
    assert!(st.success());
}
