//! The C API and the compiler's function hooks in a native process: a C program from
//! `tests/native/` built with gcc (`-finstrument-functions`, linked with `-lsonda`), run
//! with `SONDA_SHM` naming a real buffer file, and everything it wrote drained and
//! checked against what the program counted itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{libsonda, text, Recording};
use sonda_shm::records::{func_addr, ENTER, FUNC_ENTER, FUNC_LEAVE, LEAVE, USER, VM_INIT};
use sonda_shm::{Clock, Geometry};
use sonda_trace::Meta;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Builds `tests/native/<name>.c` with `flags` into `dir`, against this build's
/// libsonda.so.
fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let lib_dir = libsonda().parent().unwrap().to_path_buf();
    let exe = dir.join(name);
    let out = Command::new("gcc")
        .args(flags)
        .args(["-g", "-O1", "-pthread", "-Wall", "-Werror"])
        .arg("-I")
        .arg(repo().join("agent/include"))
        .arg(repo().join(format!("tests/native/{name}.c")))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib_dir.display()))
        .arg("-lsonda")
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .output()
        .expect("gcc runs");
    assert!(out.status.success(), "gcc: {}", text(&out.stderr));
    exe
}

/// The program's own counts: `calls <function> <n>` and `region batch <n>` lines.
fn counts(stdout: &str) -> (BTreeMap<String, u64>, u64) {
    let mut calls = BTreeMap::new();
    let mut regions = 0;
    for line in stdout.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["calls", f, n] => {
                calls.insert(f.to_string(), n.parse().unwrap());
            }
            ["region", "batch", n] => regions = n.parse().unwrap(),
            _ => {}
        }
    }
    (calls, regions)
}

#[test]
fn every_instrumented_call_region_and_event_is_recorded() {
    let rec = Recording::with_geometry(
        "mode=launch\n",
        Clock::Tsc,
        Geometry {
            slots: 64,
            ring_len: 8 << 20,
            meta_len: 1 << 20,
        },
    );
    let exe = build(rec.dir.path(), "calls", &["-finstrument-functions"]);
    let out = Command::new(&exe)
        .args(["3", "100"])
        .env("SONDA_SHM", &rec.path)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("recording 1"), "{stdout}");
    let (calls, regions) = counts(&stdout);
    let d = rec.drain();
    assert_eq!((d.no_slot_drops, d.meta_drops), (0, 0));

    // One slot per thread (main + 3 workers), nothing dropped, enters and exits nest.
    let pid = d.slots[0].pid;
    assert_eq!(
        d.slots.len(),
        4,
        "{:?}",
        d.slots.iter().map(|s| s.tid).collect::<Vec<_>>()
    );
    let mut per_addr: BTreeMap<u64, u64> = BTreeMap::new();
    for s in &d.slots {
        assert_eq!((s.pid, s.dropped), (pid, 0));
        let mut stack = Vec::new();
        let mut last_time = 0;
        for r in &s.records {
            assert!(r.time >= last_time, "time goes back on thread {}", s.tid);
            last_time = r.time;
            match r.kind {
                FUNC_ENTER => {
                    *per_addr.entry(func_addr(r)).or_default() += 1;
                    stack.push(func_addr(r));
                }
                FUNC_LEAVE => {
                    assert_eq!(
                        stack.pop(),
                        Some(func_addr(r)),
                        "exit of the innermost call"
                    )
                }
                _ => {}
            }
        }
        assert!(
            stack.is_empty(),
            "thread {} left calls open: {stack:x?}",
            s.tid
        );
    }
    // The multiset of per-function counts is the program's own.
    let mut recorded: Vec<u64> = per_addr.values().copied().collect();
    let mut counted: Vec<u64> = calls.values().copied().collect();
    recorded.sort_unstable();
    counted.sort_unstable();
    assert_eq!(recorded, counted, "recorded per function vs counted");

    // Regions: named once, entered and left as often as the program says; events typed.
    let batch = d
        .metas
        .iter()
        .find_map(|m| match m {
            Meta::Method {
                id, class, name, ..
            } if class.is_empty() && name == "batch" => Some(*id),
            _ => None,
        })
        .expect("region batch named");
    let enters = d.all_of(ENTER);
    assert_eq!(enters.len() as u64, regions);
    assert!(enters.iter().all(|(_, r)| r.arg == batch));
    assert_eq!(d.all_of(LEAVE).len() as u64, regions);
    let events = d.all_of(USER);
    assert_eq!(events.len() as u64, regions);
    assert!(events.iter().all(|(_, r)| r.arg == 1 && r.extra < 3));
    assert_eq!(d.all_of(VM_INIT).len(), 1);
    for name in ["phase", "zero", "one", "two"] {
        assert!(
            d.metas
                .iter()
                .any(|m| matches!(m, Meta::UserType { kind: 1, name: n, .. } if n == name)),
            "type name {name}"
        );
    }
    // Thread names, on the threads that gave them.
    let names = d.java_threads();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names
        .values()
        .any(|(n, daemon)| n == "calls-main" && !daemon));
    for i in 0..3 {
        assert!(names
            .values()
            .any(|(n, _)| *n == format!("calls-worker-{i}")));
    }
    // The executable's code is among the mappings, and holds every function address.
    let exe_path = exe.canonicalize().unwrap().to_string_lossy().into_owned();
    let exe_maps: Vec<(u64, u64)> = d
        .metas
        .iter()
        .filter_map(|m| match m {
            Meta::Mapping {
                start, end, path, ..
            } if *path == exe_path => Some((*start, *end)),
            _ => None,
        })
        .collect();
    assert!(
        !exe_maps.is_empty(),
        "no mapping of {exe_path}: {:?}",
        d.metas
    );
    for addr in per_addr.keys() {
        assert!(exe_maps.iter().any(|(s, e)| (s..e).contains(&addr)));
    }
}

#[test]
fn without_a_buffer_file_nothing_happens() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "calls", &["-finstrument-functions"]);
    let out = Command::new(&exe)
        .args(["2", "20"])
        .env_remove("SONDA_SHM")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(stdout.contains("recording 0"), "{stdout}");
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    // A file that is not a buffer: one line, and the program runs unrecorded.
    let bogus = dir.path().join("bogus.buf");
    std::fs::write(&bogus, b"not a buffer").unwrap();
    let out = Command::new(&exe)
        .args(["1", "5"])
        .env("SONDA_SHM", &bogus)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("recording 0"));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("sonda: cannot use buffer file"), "{err}");
}

#[test]
fn a_full_ring_drops_and_counts_without_blocking() {
    let rec = Recording::with_geometry(
        "mode=launch\n",
        Clock::Tsc,
        Geometry {
            slots: 64,
            ring_len: 4096,
            meta_len: 1 << 20,
        },
    );
    let exe = build(rec.dir.path(), "calls", &["-finstrument-functions"]);
    let out = Command::new(&exe)
        .args(["2", "50"])
        .env("SONDA_SHM", &rec.path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (calls, _) = counts(&text(&out.stdout));
    let d = rec.drain();
    let recorded: u64 = d
        .slots
        .iter()
        .map(|s| s.records.iter().filter(|r| r.kind == FUNC_ENTER).count() as u64)
        .sum();
    let dropped_enters: u64 = (0..rec.region.slots())
        .map(|i| rec.region.slot_info(i))
        .filter(|i| i.generation > 0)
        .map(|i| i.dropped_enters)
        .sum();
    let dropped: u64 = d.slots.iter().map(|s| s.dropped).sum();
    assert!(dropped > 0);
    // Recorded plus dropped entries (functions and regions) are the calls made.
    let regions = d.all_of(ENTER).len() as u64;
    let (_, region_count) = counts(&text(&out.stdout));
    assert_eq!(
        recorded + regions + dropped_enters,
        calls.values().sum::<u64>() + region_count
    );
}

#[test]
fn a_forked_child_records_into_its_own_slots() {
    let rec = Recording::new("mode=launch\n", Clock::Tsc);
    let exe = build(rec.dir.path(), "forks", &["-finstrument-functions"]);
    let out = Command::new(&exe)
        .env("SONDA_SHM", &rec.path)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let before: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("before "))
        .unwrap()
        .parse()
        .unwrap();
    let per_pid: BTreeMap<u32, u64> = stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (w.first() == Some(&"pid")).then(|| (w[1].parse().unwrap(), w[3].parse().unwrap()))
        })
        .collect();
    assert_eq!(per_pid.len(), 2, "{stdout}");
    let parent = *per_pid.keys().min().unwrap();
    let d = rec.drain();
    let child = d
        .slots
        .iter()
        .map(|s| s.pid)
        .find(|&p| p != parent)
        .expect("a slot of the child");
    assert!(per_pid.contains_key(&child));
    let work = |pid: u32| -> (u64, u64) {
        let recs: Vec<_> = d
            .slots
            .iter()
            .filter(|s| s.pid == pid)
            .flat_map(|s| s.records.iter())
            .collect();
        let enters = recs.iter().filter(|r| r.kind == FUNC_ENTER).count() as u64;
        let leaves = recs.iter().filter(|r| r.kind == FUNC_LEAVE).count() as u64;
        (enters, leaves)
    };
    // The parent: main and every work() call; the child: its own calls after the fork
    // (its main was entered by the parent, and it leaves it in its own slot).
    assert_eq!(work(parent), (per_pid[&parent] + 1, per_pid[&parent] + 1));
    let (enters, leaves) = work(child);
    assert_eq!(enters, per_pid[&child] - before);
    assert_eq!(leaves, enters + 1);
    // Each process's mappings under its own pid.
    for pid in [parent, child] {
        assert!(
            d.metas
                .iter()
                .any(|m| matches!(m, Meta::Mapping { pid: p, .. } if p.0 == pid)),
            "no mapping of {pid}"
        );
    }
}
