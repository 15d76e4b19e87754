//! Shared helpers of the `sonda` integration tests: running the real binary, building C
//! workloads, reading traces, and recomputing per-thread scheduling totals from them.
#![allow(dead_code)] // each test binary uses a different part

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sonda_trace::{ChargedBy, Event, Record, SwitchOut, Tid, TraceMeta};

/// The `sonda` binary under test.
pub fn sonda() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sonda"))
}

/// Runs `sonda` with `args` and returns its output (printing what it said when
/// `SONDA_TEST_VERBOSE` is set).
pub fn run_sonda(args: &[&str]) -> Output {
    let out = sonda().args(args).output().expect("sonda runs");
    if std::env::var_os("SONDA_TEST_VERBOSE").is_some() {
        eprintln!("sonda {args:?}\n{}", String::from_utf8_lossy(&out.stderr));
    }
    out
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
/// waiting from a wakeup (or a switch-out while still runnable) to the next switch-in;
/// but a thread preempted with its last CPU-time charge written by another task (see
/// [`sonda_timeline::sched::stale_clock`]) left on a clock the scheduler had not updated
/// since, and schedstat counts it waiting from that charge.
/// A thread asleep that the load balancer moves to another CPU with no wakeup under way
/// (one that blocked with negative lag stays on its run queue under EEVDF's
/// `DELAY_DEQUEUE`, docs/trace-format.md) is enqueued there, and schedstat counts it
/// waiting from that move to its next switch-in, as the timeline's `queued_asleep` does.
/// A thread with a cut time stops being counted at that time. A switch-in from sleep
/// without a reported wakeup counts no wait, and its sleep goes to `wait_unknown`.
pub fn totals(records: &[Record], cuts: &HashMap<u32, u64>) -> HashMap<u32, Totals> {
    let mut state: HashMap<u32, State> = HashMap::new();
    let mut totals: HashMap<u32, Totals> = HashMap::new();
    let mut closed: HashMap<u32, ()> = HashMap::new();
    // Per running thread: its last charge in the stretch, and who wrote it.
    let mut charged: HashMap<u32, (u64, ChargedBy)> = HashMap::new();
    // Threads with a `Waking` and no `Wakeup` since (a wakeup under way, whose own
    // migration comes between the two; kept across a switch-out, as a thread can be
    // woken while still on its CPU about to block).
    let mut waking: HashSet<u32> = HashSet::new();
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
                    let out = SwitchOut::from_prev_state(*prev_state);
                    let last = charged.remove(&prev.0);
                    let left = match (s, last) {
                        (State::Running(since), Some((c, by)))
                            if out == SwitchOut::Runnable
                                && c >= since
                                && sonda_timeline::sched::stale_clock(by, now - c) =>
                        {
                            c
                        }
                        _ => now,
                    };
                    if let State::Running(since) = s {
                        t.run += left - since;
                    }
                    if out == SwitchOut::Uninterruptible {
                        t.io_blocks += 1;
                    }
                    let next_state = if out == SwitchOut::Runnable {
                        State::Runnable(left)
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
                    charged.remove(&next.0);
                    waking.remove(&next.0);
                    state.insert(next.0, State::Running(now));
                }
            }
            Event::CpuTime { tid, by, .. }
                if matches!(state.get(&tid.0), Some(State::Running(_))) =>
            {
                charged.insert(tid.0, (now, *by));
            }
            Event::Waking { wakee, .. } if live(*wakee) => {
                waking.insert(wakee.0);
            }
            Event::Migrate { tid, .. } if live(*tid) && !waking.contains(&tid.0) => {
                if let Some(s @ State::Off(_)) = state.get_mut(&tid.0) {
                    *s = State::Runnable(now);
                }
            }
            Event::Wakeup { wakee, .. } if live(*wakee) => {
                waking.remove(&wakee.0);
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
    let steal = sonda_tests::cpu_ticks().map_or(0, |(_, steal)| steal);
    steal * 1_000_000_000 / clock_ticks_per_s()
}

/// The unit of /proc/stat's times, per second.
pub fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64
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

/// Where a recording into `trace` writes until it ends: `TRACE.XXXXXX.partial` beside
/// it (what a killed sonda leaves), if there is one.
pub fn partial_of(trace: &Path) -> Option<PathBuf> {
    sonda_tests::partial_outputs(trace).into_iter().next()
}

/// A synthetic trace of a JVM (`pid`, one thread `pid + 1` named `main`) serving
/// `calls` requests of `demo.S::handle`, 1 ms on a CPU and 1 ms asleep each, one every
/// 5 ms; an events block every `flush_every` records.
pub fn calls_trace(pid: u32, calls: u64, flush_every: usize) -> sonda_testdata::TraceBuilder {
    use sonda_trace::{Cpu, Runtime, Source};
    let tid = pid + 1;
    let sw = |prev: u32, prev_state: u64, next: u32| Event::Switch {
        cpu: Cpu(0),
        prev: Tid(prev),
        prev_state,
        next: Tid(next),
        charge: None,
    };
    let mut t = sonda_testdata::TraceBuilder::new(Source::Tracepoints, 2);
    t.process(pid, "java", Runtime::Java)
        .thread(pid, tid, "java")
        .java_name(pid, tid, "main")
        .method(1, "demo.S", "handle", "()V")
        .flush_every(flush_every);
    for i in 0..calls {
        let b = 1_000_000 + i * 5_000_000;
        t.at(b, sw(0, 0, tid))
            .at(
                b,
                Event::Enter {
                    tid: Tid(tid),
                    method: 1,
                },
            )
            .at(b + 1_000_000, sw(tid, 0x1, 0))
            .at(
                b + 2_000_000,
                Event::Wakeup {
                    target: Cpu(0),
                    wakee: Tid(tid),
                    new_task: false,
                    waking: None,
                },
            )
            .at(b + 2_000_000, sw(0, 0, tid))
            .at(
                b + 2_000_000,
                Event::Leave {
                    tid: Tid(tid),
                    method: 1,
                    exception: false,
                },
            )
            .at(b + 2_100_000, sw(tid, 0x1, 0));
    }
    t
}

/// A long, busy synthetic trace of about `records` timed records (20 Java threads, 50
/// methods; about 20 bytes a record) at `path`.
pub fn busy_trace(path: &Path, records: u64) {
    sonda_testdata::Busy {
        threads: 20,
        idle: 2,
        cpus: 2,
        methods: 50,
        records,
        seed: 7,
        start_samples: true,
    }
    .write(path)
    .expect("the busy trace is written");
}

/// The names in `dir`, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A failure must be one line `sonda: <what>` and a non-zero exit.
pub fn assert_one_line_error(out: &Output, expect: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "expected a failure, got {}: {err}",
        out.status
    );
    assert_eq!(err.lines().count(), 1, "not one line: {err:?}");
    assert!(err.starts_with("sonda: "), "{err:?}");
    assert!(err.contains(expect), "{err:?} lacks {expect:?}");
}
