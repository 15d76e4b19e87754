//! Ctrl-C and SIGTERM: like `perf record`, sonda survives them, passes them on to the
//! command exactly once, records until the command exits and finishes the trace.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::common::*;
use sonda_tests::require;

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Give the program time to finish writing it.
    std::thread::sleep(Duration::from_millis(50));
}

/// `sonda record` of the `sigcount` workload, ready to receive signals.
fn record_sigcount(dir: &Path) -> (Child, PathBuf, PathBuf) {
    let sigcount = build_c("sigcount", dir);
    let counts = dir.join("counts");
    let trace = dir.join("t.sonda");
    let child = sonda()
        .args(["record", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&sigcount)
        .arg(&counts)
        .spawn()
        .unwrap();
    wait_for(&counts.with_extension("ready"));
    (child, counts, trace)
}

fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: sending a signal to a child process of this test.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

#[test]
fn sigint_to_sonda_reaches_the_command_once_and_the_trace_is_finished() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, counts, trace) = record_sigcount(dir.path());
    kill(child.id(), libc::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "sonda must exit with the command's status"
    );
    assert_eq!(
        std::fs::read_to_string(&counts).unwrap().trim(),
        "INT 1 TERM 0"
    );
    let (meta, _) = read_trace(&trace);
    assert!(meta.complete, "the trace was not finished");
}

#[test]
fn sigterm_to_sonda_reaches_the_command_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, counts, trace) = record_sigcount(dir.path());
    kill(child.id(), libc::SIGTERM);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&counts).unwrap().trim(),
        "INT 0 TERM 1"
    );
    assert!(read_trace(&trace).0.complete);
}

#[test]
fn a_command_killed_by_the_passed_signal_gives_128_plus_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.sonda");
    let ready = dir.path().join("ready");
    let script = format!("touch {}; exec sleep 30", ready.display());
    let mut child = sonda()
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    wait_for(&ready);
    let start = Instant::now();
    kill(child.id(), libc::SIGTERM);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "sonda took {:?} to finish",
        start.elapsed()
    );
    assert!(read_trace(&trace).0.complete);
}

/// Ctrl-C typed on a terminal: the kernel sends SIGINT to the whole foreground group,
/// so sonda must not send it again. Drives sonda in a pseudo-terminal with python3.
#[test]
fn ctrl_c_on_a_terminal_reaches_the_command_once() {
    let pty = Command::new("python3")
        .arg("-c")
        .arg("import pty")
        .output()
        .is_ok_and(|o| o.status.success());
    if !require("python3 (to drive a pseudo-terminal)", pty) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sigcount = build_c("sigcount", dir.path());
    let counts = dir.path().join("counts");
    let trace = dir.path().join("t.sonda");
    let driver = r#"
import os, pty, sys, time
sonda, trace, sigcount, counts = sys.argv[1:5]
pid, fd = pty.fork()
if pid == 0:
    os.execv(sonda, [sonda, "record", "-o", trace, "--", sigcount, counts])
deadline = time.time() + 20
while not os.path.exists(counts + ".ready") and time.time() < deadline:
    time.sleep(0.02)
time.sleep(0.1)
os.write(fd, b"\x03")
out = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(driver)
        .arg(env!("CARGO_BIN_EXE_sonda"))
        .arg(&trace)
        .arg(&sigcount)
        .arg(&counts)
        .output()
        .unwrap();
    let terminal = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "terminal output: {terminal}");
    assert_eq!(
        std::fs::read_to_string(&counts).unwrap().trim(),
        "INT 1 TERM 0",
        "terminal output: {terminal}"
    );
    assert!(
        terminal.contains("sonda: recorded"),
        "no summary: {terminal}"
    );
    assert!(read_trace(&trace).0.complete);
}
