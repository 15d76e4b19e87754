//! Whether a test may run here, and the one rule for when it may not: a test that
//! needs something this machine may lack (root, kernel tracepoints, a JDK, a C
//! compiler, a tool) skips with a message naming what is missing, except under
//! `CI=true`, where a missing capability fails the test. CI provides all of them
//! (scripts/test.sh installs them, .ci/run runs as root), so a run there cannot pass
//! by skipping. Every crate's tests decide it here, so the rule is written once.
//!
//! The message names the test from its thread: the test harness runs each test on a
//! thread named after it.

use std::path::Path;
use std::process::{Command, Stdio};

/// Whether the tests run in CI, where a missing capability is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether the test may go on: true when `what` is `available`. Otherwise, outside CI,
/// says that the test is skipped for want of `what` and returns false (the caller
/// returns); under `CI=true`, fails the test.
pub fn require(what: &str, available: bool) -> bool {
    if available {
        return true;
    }
    let test = test_name();
    if in_ci() {
        panic!("{test} needs {what}, and CI=true forbids skipping");
    }
    eprintln!("SKIPPED {test}: needs {what}, which this machine lacks");
    false
}

/// Like [`require`], but skips even under CI: for what CI does not provide on
/// purpose — an optional tool scripts/test.sh does not install (Paraver's paramedir),
/// or a property of the hardware (an invariant TSC) that no setup can grant.
pub fn optional(what: &str, available: bool) -> bool {
    if !available {
        eprintln!(
            "SKIPPED {}: needs {what}, which this machine lacks",
            test_name()
        );
    }
    available
}

/// [`require`] root.
pub fn require_root() -> bool {
    require("root", is_root())
}

/// [`require`] kernel tracepoints (root and tracefs).
pub fn require_tracepoints() -> bool {
    require(
        "kernel tracepoints (root, tracefs)",
        tracepoints_available(),
    )
}

/// [`require`] `tool` on the PATH.
pub fn require_tool(tool: &str) -> bool {
    require(tool, have(tool))
}

/// Whether we are root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether kernel tracepoints can be used: root, and tracefs mounted (mounting it if
/// it is empty, as sonda itself does).
pub fn tracepoints_available() -> bool {
    if !is_root() {
        return false;
    }
    let id = Path::new("/sys/kernel/tracing/events/sched/sched_switch/id");
    if !id.exists() && Path::new("/sys/kernel/tracing").exists() {
        let _ = Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status();
    }
    id.exists()
}

/// Whether `tool` is a command on the PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", "command -v \"$1\"", "sh", tool])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The running test's name: the harness names each test's thread after it.
fn test_name() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_string(),
        _ => "this test".to_string(),
    }
}
