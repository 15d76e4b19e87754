//! The kernel source's private ftrace instance, on the real kernel: made for the
//! recording with the monotonic clock, removed at its end, instances of dead collectors
//! removed, others' instances and the top-level buffer left alone; the clocks of ftrace
//! and perf agree; and without write access to tracefs the recording reads the
//! tracepoints through perf, saying so in one line. Asked for with `SONDA_KERNEL=ftrace`
//! (BPF programs are the default where they load). Needs root.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use sonda_tests::require_tracepoints;
use sonda_trace::Source;

const TRACEFS: &str = "/sys/kernel/tracing";

fn instances() -> PathBuf {
    Path::new(TRACEFS).join("instances")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(TRACEFS).join(rel)).unwrap_or_default()
}

/// An instance made by the test, removed when dropped.
struct TestInstance(PathBuf);

impl TestInstance {
    fn new(name: &str) -> TestInstance {
        let dir = instances().join(name);
        std::fs::create_dir(&dir).unwrap();
        TestInstance(dir)
    }
}

impl Drop for TestInstance {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A pid no process has (one that just ended).
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn a_private_instance_lives_as_long_as_the_recording() {
    if !require_tracepoints() {
        return;
    }
    let clock_before = read("trace_clock");
    let on_before = read("tracing_on");
    // One left by a collector that died, one of another tool.
    let stale_name = format!("sonda-{}-7", dead_pid());
    let stale = TestInstance::new(&stale_name);
    let foreign_name = format!("sondatest-{}", std::process::id());
    let _foreign = TestInstance::new(&foreign_name);

    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.sonda");
    let seen = dir.path().join("seen.txt");
    // The command looks at the instances while it is being recorded.
    let script = format!(
        "for d in {i}/*; do echo \"$(basename $d) $(cat $d/trace_clock) $(cat $d/tracing_on)\"; done > {s}; sleep 0.2",
        i = instances().display(),
        s = seen.display()
    );
    let child = sonda()
        .env("SONDA_KERNEL", "ftrace")
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ours_prefix = format!("sonda-{}-", child.id());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The summary, and the notice that `sh` (not linked with libsonda.so) records
    // kernel states only: nothing about the kernel source.
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("sonda:") && !l.contains("did not load libsonda.so"))
            .count(),
        1,
        "only the summary line is expected: {stderr}"
    );

    let seen = std::fs::read_to_string(&seen).unwrap();
    let names: Vec<&str> = seen.lines().filter_map(|l| l.split(' ').next()).collect();
    assert!(
        !names.contains(&stale_name.as_str()),
        "stale instance kept: {seen}"
    );
    assert!(
        names.contains(&foreign_name.as_str()),
        "foreign instance removed: {seen}"
    );
    let ours: Vec<&str> = seen
        .lines()
        .filter(|l| l.starts_with(&ours_prefix))
        .collect();
    // Two: the main one, and the unfiltered one for migrations and CPU-time charges.
    assert_eq!(ours.len(), 2, "{seen}");
    for line in &ours {
        assert!(
            line.contains("[mono]") && line.ends_with(" 1"),
            "an instance is not recording with the mono clock: {seen}"
        );
    }
    assert!(!stale.0.exists(), "the stale instance is still there");
    drop(stale);

    // After the recording: ours is gone, the foreign one and the top level untouched.
    let left: Vec<String> = std::fs::read_dir(instances())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.contains(&foreign_name), "{left:?}");
    assert!(
        !left.iter().any(|n| n.starts_with(&ours_prefix)),
        "the instance was not removed: {left:?}"
    );
    assert_eq!(read("trace_clock"), clock_before);
    assert_eq!(read("tracing_on"), on_before);

    let (meta, records) = read_trace(&trace);
    assert_eq!(meta.info.as_ref().unwrap().source, Source::Tracepoints);
    assert_eq!(meta.counters.get("kernel.ftrace"), Some(&1));
    assert_eq!(meta.counters.get("kernel.lost"), Some(&0));
    assert_eq!(meta.counters.get("kernel.undecodable"), Some(&0));
    assert!(!records.is_empty());
    // The ftrace path opens no perf context-switch events (they cost the traced
    // machine as much as the tracepoints): their delay counter belongs to the perf path.
    assert_eq!(meta.counters.get("kernel.switch_record_delay_ns"), None);
}

#[test]
fn without_write_access_to_tracefs_perf_reads_the_tracepoints() {
    if !require_tracepoints() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.sonda");
    // A mount namespace of its own where tracefs is read-only: the instance cannot be
    // made, tracepoints can still be opened.
    let out = Command::new("unshare")
        .env("SONDA_KERNEL", "ftrace")
        .args(["-m", "sh", "-c"])
        .arg(format!(
            "mount -o remount,bind,ro {TRACEFS} && exec \"$0\" record -o \"$1\" -- sh -c 'sleep 0.1; ls / >/dev/null'"
        ))
        .arg(env!("CARGO_BIN_EXE_sonda"))
        .arg(&trace)
        .output()
        .expect("unshare runs (util-linux)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let notices: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.starts_with("sonda:")
                && !l.starts_with("sonda: recorded")
                && !l.contains("did not load libsonda.so")
        })
        .collect();
    assert_eq!(notices.len(), 1, "{stderr}");
    assert!(
        notices[0].starts_with("sonda: no permission for a tracefs instance")
            && notices[0].ends_with(
                "reading scheduler tracepoints through perf instead (wakeups on idle CPUs may be missed on some kernels)"
            ),
        "{}",
        notices[0]
    );
    let (meta, records) = read_trace(&trace);
    assert_eq!(meta.info.as_ref().unwrap().source, Source::Tracepoints);
    assert_eq!(meta.counters.get("kernel.ftrace"), Some(&0));
    assert_eq!(meta.counters.get("kernel.lost"), Some(&0));
    assert!(
        records
            .iter()
            .any(|r| matches!(r.event, sonda_trace::Event::Switch { .. })),
        "no switches recorded through perf"
    );
    let names: Vec<&str> = meta.processes.values().map(|p| p.name.as_str()).collect();
    assert!(names.contains(&"ls"), "processes: {names:?}");
}
