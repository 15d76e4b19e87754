//! Shared helpers of the `sonda` integration tests: running the real binary, building C
//! workloads, reading traces, and recomputing per-thread scheduling totals from them.
#![allow(dead_code)] // each test binary uses a different part

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sonda_trace::{Event, Record, SwitchOut, Tid, TraceMeta};

/// The `sonda` binary under test.
pub fn sonda() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sonda"))
}

/// Runs `sonda` with `args` and returns its output.
pub fn run_sonda(args: &[&str]) -> Output {
    sonda().args(args).output().expect("sonda runs")
}

/// Whether this machine lets the tests open kernel tracepoints (root and tracefs). When
/// it does not, the test is skipped with a message, except under CI (`CI=true`), where
/// a missing capability is a failure.
pub fn tracepoints_available(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tracefs = Path::new("/sys/kernel/tracing").exists()
        || Path::new("/sys/kernel/debug/tracing").exists();
    if root && tracefs {
        return true;
    }
    let why = if root { "no tracefs" } else { "not root" };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: kernel tracepoints are required under CI ({why})");
    }
    eprintln!("{test}: skipped: needs root and tracefs ({why})");
    false
}

/// Builds `tests/workloads/<name>.c` into `dir` with gcc.
pub fn build_c(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workloads")
        .join(format!("{name}.c"));
    let exe = dir.join(name);
    let out = Command::new("gcc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("gcc runs (apt-get install gcc)");
    assert!(
        out.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Every timed record of a trace (panics on damage), and its metadata.
pub fn read_trace(path: &Path) -> (TraceMeta, Vec<Record>) {
    let meta = TraceMeta::scan(path).expect("trace opens");
    assert!(meta.damage.is_none(), "damaged trace: {:?}", meta.damage);
    let records: Vec<Record> = sonda_trace::Events::open(path)
        .expect("trace opens")
        .map(|r| r.expect("record reads"))
        .collect();
    (meta, records)
}

/// What the scheduler did with one thread, per the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Unknown,
    Running(u64),
    Runnable(u64),
    /// Asleep since then, no wakeup seen yet.
    Off(u64),
}

/// Totals of one thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// ns on a CPU.
    pub run: u64,
    /// ns runnable, waiting for a CPU.
    pub wait: u64,
    /// Switch-outs in uninterruptible sleep (`D`).
    pub io_blocks: u64,
    /// Switch-ins (schedstat's timeslices).
    pub slices: u64,
    /// Switch-ins from sleep with no wakeup reported (see `kernel.unseen_wakeups`).
    pub unseen_wakeups: u64,
    /// The time asleep before those switch-ins: the runnable wait the trace cannot
    /// place (it is somewhere in there).
    pub wait_unknown: u64,
}

/// Recomputes run and runnable-wait totals per thread from `Switch` and `Wakeup` events,
/// the way the kernel's schedstat counts them: running from switch-in to switch-out,
/// waiting from a wakeup (or a switch-out while still runnable) to the next switch-in.
/// A thread with a cut time stops being counted at that time. A switch-in from sleep
/// without a reported wakeup counts no wait, and its sleep goes to `wait_unknown`.
pub fn totals(records: &[Record], cuts: &HashMap<u32, u64>) -> HashMap<u32, Totals> {
    let mut state: HashMap<u32, State> = HashMap::new();
    let mut totals: HashMap<u32, Totals> = HashMap::new();
    let mut closed: HashMap<u32, ()> = HashMap::new();
    fn close(t: &mut Totals, s: State, at: u64) {
        match s {
            State::Running(since) => t.run += at.saturating_sub(since),
            State::Runnable(since) => t.wait += at.saturating_sub(since),
            _ => {}
        }
    }
    for r in records {
        let now = r.time.0;
        // Close threads whose cut time has passed.
        for (&tid, &cut) in cuts {
            if cut <= now && !closed.contains_key(&tid) {
                closed.insert(tid, ());
                let s = state.get(&tid).copied().unwrap_or(State::Unknown);
                close(totals.entry(tid).or_default(), s, cut);
            }
        }
        let live = |tid: Tid| tid.0 != 0 && !closed.contains_key(&tid.0);
        match &r.event {
            Event::Switch {
                prev,
                prev_state,
                next,
                ..
            } => {
                if live(*prev) {
                    let t = totals.entry(prev.0).or_default();
                    let s = state.get(&prev.0).copied().unwrap_or(State::Unknown);
                    if let State::Running(since) = s {
                        t.run += now - since;
                    }
                    let out = SwitchOut::from_prev_state(*prev_state);
                    if out == SwitchOut::Uninterruptible {
                        t.io_blocks += 1;
                    }
                    let next_state = if out == SwitchOut::Runnable {
                        State::Runnable(now)
                    } else {
                        State::Off(now)
                    };
                    state.insert(prev.0, next_state);
                }
                if live(*next) {
                    let t = totals.entry(next.0).or_default();
                    match state.get(&next.0) {
                        Some(State::Runnable(since)) => t.wait += now - since,
                        Some(State::Off(since)) => {
                            t.unseen_wakeups += 1;
                            t.wait_unknown += now - since;
                        }
                        _ => {}
                    }
                    t.slices += 1;
                    state.insert(next.0, State::Running(now));
                }
            }
            Event::Wakeup { wakee, .. } if live(*wakee) => {
                let s = state.entry(wakee.0).or_insert(State::Unknown);
                if matches!(s, State::Off(_) | State::Unknown) {
                    *s = State::Runnable(now);
                }
            }
            _ => {}
        }
    }
    for (&tid, &cut) in cuts {
        if !closed.contains_key(&tid) {
            let s = state.get(&tid).copied().unwrap_or(State::Unknown);
            close(totals.entry(tid).or_default(), s, cut);
        }
    }
    totals
}

/// One line of the `threads` workload's report.
#[derive(Clone, Copy, Debug)]
pub struct Oracle {
    pub pid: u32,
    pub tid: u32,
    pub cut: u64,
    pub run: u64,
    pub wait: u64,
    pub slices: u64,
}

/// Parses `schedstat.txt` written by `tests/workloads/threads.c`.
pub fn read_oracle(path: &Path) -> Vec<Oracle> {
    let text = std::fs::read_to_string(path).expect("the workload wrote its report");
    text.lines()
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            Oracle {
                pid: v[0] as u32,
                tid: v[1] as u32,
                cut: v[2],
                run: v[3],
                wait: v[4],
                slices: v[5],
            }
        })
        .collect()
}

/// Whether `got` is within 1% or 1 ms (whichever is larger) of `want`, or further off
/// only in the direction `got > want` by at most `over`, or `got < want` by at most
/// `under`: the amounts by which the trace may rightly differ from schedstat.
pub fn close_enough(got: u64, want: u64, over: u64, under: u64) -> bool {
    let tolerance = (want / 100).max(1_000_000);
    if got >= want {
        got - want <= tolerance + over
    } else {
        want - got <= tolerance + under
    }
}

/// CPU time stolen by the hypervisor, summed over all CPUs, in ns (from /proc/stat, in
/// clock ticks). A kernel with paravirtual steal accounting leaves it out of the task
/// clock, hence out of schedstat's running time.
pub fn stolen_cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu = stat.lines().next().unwrap_or_default();
    // cpu user nice system idle iowait irq softirq steal
    let steal: u64 = cpu
        .split_whitespace()
        .nth(8)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    steal * 1_000_000_000 / hz
}

/// Buffer files of collector `pid` left in /dev/shm.
pub fn buffer_files_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("sonda-{pid}-");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&prefix))
                })
                .collect()
        })
        .unwrap_or_default()
}
