//! `sonda attach` end to end: a Java program runs its own loop, sonda attaches to it,
//! records, detaches, attaches again. The program's own counts judge the traces (every
//! call between the first recorded entry and the last recorded exit is in the trace,
//! once), its own CPU-time measurements judge the restoration (the instrumented method
//! costs what it cost before the attach), prvcheck judges the Paraver export, and the
//! error paths are each one line and a non-zero exit.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use sonda_tests::*;
use sonda_trace::codec::Item;
use sonda_trace::{Event, Meta, Record, TraceReader};

const WAIT: Duration = Duration::from_secs(60);
/// The JVM options of every AttachLoop run: tiny() and reference() stay calls (never
/// inlined), and the CompileCommand itself prints nothing.
const JVM_OPTIONS: [&str; 3] = [
    "-XX:CompileCommand=quiet",
    "-XX:CompileCommand=dontinline,AttachLoop::tiny",
    "-XX:CompileCommand=dontinline,AttachLoop::reference",
];

/// Lines of a child's stream, read on a thread of their own.
fn line_reader(stream: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits for a line of `rx` containing `needle`; returns it and the lines before it.
fn wait_line(rx: &Receiver<String>, needle: &str, what: &str) -> (String, Vec<String>) {
    let deadline = Instant::now() + WAIT;
    let mut before = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return (line, before),
            Ok(line) => before.push(line),
            Err(_) => panic!("no {needle:?} from {what}; got {before:?}"),
        }
    }
}

/// The AttachLoop program, driven through stdin.
struct Program {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
    pid: u32,
    threads: BTreeMap<String, u32>,
    stamps: PathBuf,
    _dir: tempfile::TempDir,
}

/// One "cost" line: medians over the windows.
#[derive(Debug, Clone, Copy)]
struct Cost {
    /// CPU ns per tiny() call.
    tiny: f64,
    /// CPU ns per reference() call (the same code, never instrumented).
    reference: f64,
    /// tiny() / reference(), window by window: tiny()'s cost with the machine's speed
    /// at the moment (frequency, the other core's load) taken out.
    ratio: f64,
    /// tiny() calls made, warm-up included.
    calls: usize,
}

/// What the program said at the end.
struct Ended {
    calls: u64,
    check: i64,
    stamps: Vec<u64>,
    stdout_tail: Vec<String>,
    stderr: String,
    success: bool,
}

impl Program {
    fn start() -> Program {
        let dir = tempfile::tempdir().unwrap();
        let classes = java_classes("AttachLoop");
        let stamps = dir.path().join("stamps.bin");
        Program::start_in(&[], &classes, stamps, dir)
    }

    /// Runs AttachLoop under `prefix` (a command that runs the rest of its arguments,
    /// perhaps in other namespaces). Thread ids are translated to ours.
    fn start_in(
        prefix: &[&str],
        classes: &Path,
        stamps: PathBuf,
        dir: tempfile::TempDir,
    ) -> Program {
        let (program, prefix_args) = match prefix.split_first() {
            Some((p, rest)) => (*p, rest),
            None => ("java", &[][..]),
        };
        let mut command = Command::new(program);
        command.args(prefix_args);
        if !prefix.is_empty() {
            command.arg("java");
        }
        // Its own working directory: HotSpot looks for the attach trigger file there
        // first, and two JVMs that are both pid 1 of their namespaces (containers) must
        // not see each other's.
        let mut child = command
            .current_dir(dir.path())
            .args(JVM_OPTIONS)
            .arg("-cp")
            .arg(classes)
            .arg("AttachLoop")
            .arg(&stamps)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("java runs");
        let lines = line_reader(child.stdout.take().unwrap());
        let stderr = line_reader(child.stderr.take().unwrap());
        let stdin = child.stdin.take();
        let (ready, before) = wait_line(&lines, "ready\t", "AttachLoop");
        let own_pid: u32 = ready.split('\t').nth(1).unwrap().parse().unwrap();
        let pid = if prefix.is_empty() {
            own_pid
        } else {
            find_java(child.id()).expect("java under the prefix command")
        };
        let ours = ns_tids(pid);
        let mut threads = BTreeMap::new();
        for l in before {
            let f: Vec<&str> = l.split('\t').collect();
            if f[0] == "thread" {
                let own: u32 = f[2].parse().unwrap();
                threads.insert(f[1].to_string(), *ours.get(&own).unwrap_or(&own));
            }
        }
        assert!(["main", "counter", "napper"]
            .iter()
            .all(|t| threads.contains_key(*t)));
        Program {
            pid,
            child,
            stdin,
            lines,
            stderr,
            threads,
            stamps,
            _dir: dir,
        }
    }

    fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
    }

    fn measure(&mut self, label: &str, calls: u32, windows: u32) -> Cost {
        self.send(&format!("measure {label} {calls} {windows}"));
        let (line, _) = wait_line(&self.lines, &format!("cost\t{label}\t"), "AttachLoop");
        let f: Vec<&str> = line.split('\t').collect();
        Cost {
            tiny: f[2].parse().unwrap(),
            reference: f[3].parse().unwrap(),
            ratio: f[4].parse().unwrap(),
            calls: f[7].parse().unwrap(),
        }
    }

    fn command(&mut self, command: &str, answer: &str) {
        self.send(command);
        wait_line(&self.lines, answer, "AttachLoop");
    }

    fn end(mut self) -> Ended {
        self.send("end");
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        let tail: Vec<String> = self.lines.try_iter().collect();
        let stderr: Vec<String> = self.stderr.try_iter().collect();
        let value = |key: &str| -> String {
            tail.iter()
                .find_map(|l| l.strip_prefix(&format!("{key}\t")).map(str::to_string))
                .unwrap_or_else(|| panic!("no {key} line in {tail:?}"))
        };
        let bytes = std::fs::read(&self.stamps).unwrap();
        Ended {
            calls: value("calls").parse().unwrap(),
            check: value("check").parse().unwrap(),
            stamps: bytes
                .chunks_exact(8)
                .map(|c| u64::from_be_bytes(c.try_into().unwrap()))
                .collect(),
            stdout_tail: tail,
            stderr: stderr.join("\n"),
            success: status.success(),
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The process named `java` at or under `pid` (launchers like unshare fork it).
fn find_java(pid: u32) -> Option<u32> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    if comm.trim() == "java" {
        return Some(pid);
    }
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .find_map(find_java)
}

/// Thread ids of process `pid` in its own pid namespace → ours (empty when the same).
fn ns_tids(pid: u32) -> BTreeMap<u32, u32> {
    let mut map = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        if let Some(line) = status.lines().find(|l| l.starts_with("NSpid:")) {
            let ids: Vec<u32> = line[6..]
                .split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect();
            if ids.len() > 1 {
                map.insert(*ids.last().unwrap(), ids[0]);
            }
        }
    }
    map
}

/// What `work(i)` returns, summed over the first `n` calls, as Java computes it.
fn expected_check(n: u64) -> i64 {
    (0..n as i32).fold(0i64, |sum, i| {
        sum.wrapping_add(i64::from(i.wrapping_mul(3).wrapping_add(1)))
    })
}

/// A running `sonda attach`.
struct Attached {
    child: Child,
    stderr: Receiver<String>,
}

impl Attached {
    /// Starts `sonda attach PID -o TRACE ...` and waits until it records.
    fn start(attach: Attach, trace: &Path) -> Attached {
        let mut child = attach
            .command(trace)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sonda runs");
        let stderr = line_reader(child.stderr.take().unwrap());
        wait_line(&stderr, "; recording ", "sonda attach");
        Attached { child, stderr }
    }

    /// Sends `signal` (unless None) and waits for the exit; returns stderr.
    fn finish(mut self, signal: Option<i32>) -> String {
        if let Some(sig) = signal {
            // SAFETY: kill on our own, unreaped child.
            unsafe { libc::kill(self.child.id() as i32, sig) };
        }
        let status = self.child.wait().unwrap();
        let err: Vec<String> = self.stderr.iter().collect();
        let err = err.join("\n");
        assert!(status.success(), "sonda attach failed: {err}");
        assert!(!err.contains("panicked"), "{err}");
        err
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A trace read back: its timed records and metadata.
struct Trace {
    records: Vec<Record>,
    metas: Vec<Meta>,
}

impl Trace {
    fn read(path: &Path) -> Trace {
        let mut reader = TraceReader::open(path).expect("trace opens");
        let mut t = Trace {
            records: Vec::new(),
            metas: Vec::new(),
        };
        while let Some(block) = reader.next_block().expect("block reads") {
            for item in block.items() {
                match item.expect("item decodes") {
                    Item::Record(r) => t.records.push(r),
                    Item::Meta(m) => t.metas.push(m),
                    Item::Unknown(k) => panic!("unknown record kind {k}"),
                }
            }
        }
        assert!(reader.complete(), "{} has no end block", path.display());
        t
    }

    fn method(&self, name: &str) -> u32 {
        self.metas
            .iter()
            .find_map(|m| match m {
                Meta::Method {
                    id, class, name: n, ..
                } if class == "AttachLoop" && n == name => Some(*id),
                _ => None,
            })
            .unwrap_or_else(|| panic!("AttachLoop::{name} not described"))
    }

    /// Times of `tid`'s entries and exits of `method`.
    fn calls(&self, tid: u32, method: u32) -> (Vec<u64>, Vec<u64>) {
        let mut enters = Vec::new();
        let mut leaves = Vec::new();
        for r in &self.records {
            match r.event {
                Event::Enter { tid: t, method: m } if t.0 == tid && m == method => {
                    enters.push(r.time.0)
                }
                Event::Leave {
                    tid: t, method: m, ..
                } if t.0 == tid && m == method => leaves.push(r.time.0),
                _ => {}
            }
        }
        (enters, leaves)
    }

    fn counter(&self, name: &str) -> Option<u64> {
        self.metas.iter().rev().find_map(|m| match m {
            Meta::Counter { name: n, value } if n == name => Some(*value),
            _ => None,
        })
    }

    fn java_tid(&self, name: &str) -> Option<u32> {
        self.metas.iter().find_map(|m| match m {
            Meta::JavaThread { tid, name: n, .. } if n == name => Some(tid.0),
            _ => None,
        })
    }

    fn warnings(&self) -> Vec<&str> {
        self.metas
            .iter()
            .filter_map(|m| match m {
                Meta::Warning { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    fn java_name(&self, tid: u32) -> Option<&str> {
        self.metas.iter().find_map(|m| match m {
            Meta::JavaThread { tid: t, name, .. } if t.0 == tid => Some(name.as_str()),
            _ => None,
        })
    }

    fn dropped(&self) -> u64 {
        self.records
            .iter()
            .map(|r| match r.event {
                Event::Dropped { count, .. } => count,
                _ => 0,
            })
            .sum()
    }
}

/// Checks a trace of a recording of AttachLoop: work() recorded exactly for every call
/// inside the recording, every thread named and sampled from the start, time order.
/// Returns the number of work() calls recorded.
fn check_trace(
    trace: &Trace,
    threads: &BTreeMap<String, u32>,
    stamps: &[u64],
    kernel: bool,
) -> usize {
    let counter = threads["counter"];
    let main = threads["main"];
    assert_eq!(trace.dropped(), 0, "events dropped");
    assert!(
        trace.records.windows(2).all(|w| w[0].time <= w[1].time),
        "records out of time order"
    );
    let work = trace.method("work");
    let (enters, leaves) = trace.calls(counter, work);
    assert!(enters.len() > 1000, "only {} work() calls", enters.len());
    assert_eq!(enters.len(), leaves.len());
    let (first, last) = (enters[0], *leaves.last().unwrap());
    let made = stamps.iter().filter(|&&t| t > first && t < last).count();
    assert_eq!(
        enters.len(),
        made,
        "recorded work() calls vs calls the program made between the first recorded entry and the last recorded exit"
    );
    // Threads started before the attach: their Java names and kernel tids.
    assert_eq!(trace.java_name(counter), Some("counter"));
    assert_eq!(trace.java_name(main), Some("main"));
    if kernel {
        // Each thread's first record is its /proc sample, taken before the kernel events.
        for tid in [counter, main] {
            let first = trace
                .records
                .iter()
                .find(|r| r.event.tid().is_some_and(|t| t.0 == tid));
            assert!(
                matches!(first.map(|r| &r.event), Some(Event::ProcSample { .. })),
                "thread {tid} starts with {first:?}"
            );
        }
        assert!(trace.records.iter().any(
            |r| matches!(r.event, Event::Switch { prev, next, .. } if prev.0 == counter || next.0 == counter)
        ));
    }
    enters.len()
}

fn export_and_check(trace: &Path) {
    let stem = trace.with_extension("");
    let out = run(Command::new(sonda())
        .arg("paraver")
        .arg(trace)
        .arg("-o")
        .arg(&stem));
    assert!(out.status.success(), "sonda paraver: {}", text(&out.stderr));
    check_paraver(&stem);
}

/// No buffer file of sonda pid `sonda` left in /dev/shm.
fn no_buffer_left(sonda: u32) {
    let prefix = format!("sonda-{sonda}-");
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "buffer files left: {left:?}");
}

#[test]
fn attach_record_detach_reattach_with_exact_counts_and_restored_cost() {
    // Measures tiny()'s cost before and after within 5%: no other test on the CPUs
    // meanwhile.
    let _machine = exclusive();
    let kernel = require(
        "kernel tracepoints (for the scheduling checks)",
        tracepoints_available(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (t1, t2) = (dir.path().join("one.trace"), dir.path().join("two.trace"));

    let mut program = Program::start();
    let attach = Attach::to(program.pid)
        .methods([
            "AttachLoop::work",
            "AttachLoop::tiny",
            "AttachLoop::nap",
            "AttachLoop::linger",
        ])
        .options(["--agent-buffer", "64M"]);
    let before = program.measure("before", 2_000_000, 9);

    // First recording: until SIGINT, as Ctrl-C.
    let sonda1 = Attached::start(attach.clone(), &t1);
    let during = program.measure("during", 50_000, 5);
    program.command("linger", "lingering");
    std::thread::sleep(Duration::from_millis(1500));
    let said1 = sonda1.finish(Some(libc::SIGINT));
    assert!(said1.contains("original classes restored"), "{said1}");
    let after = program.measure("after", 2_000_000, 9);

    // Second recording of the same JVM, for a fixed duration.
    let sonda2 = Attached::start(attach.options(["--duration", "2"]), &t2);
    let said2 = sonda2.finish(None);
    assert!(said2.contains("original classes restored"), "{said2}");
    let after2 = program.measure("after-again", 2_000_000, 9);

    // Nobody attached to this one: the same output, the same kind of end.
    let mut alone = Program::start();
    alone.measure("before", 1_000_000, 3);
    let alone = alone.end();
    assert!(alone.success && alone.stderr.is_empty(), "{}", alone.stderr);
    assert_eq!(alone.check, expected_check(alone.calls));

    let threads = program.threads.clone();
    let ended = program.end();
    assert!(ended.success, "AttachLoop failed: {}", ended.stderr);
    assert!(
        ended.stderr.is_empty(),
        "the JVM printed on stderr: {}",
        ended.stderr
    );
    assert_eq!(ended.calls, ended.stamps.len() as u64);
    assert_eq!(
        ended.check,
        expected_check(ended.calls),
        "work() returned something else under the agent"
    );
    let shape = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect()
    };
    assert_eq!(shape(&ended.stdout_tail), shape(&alone.stdout_tail));
    assert_eq!(shape(&ended.stdout_tail), ["calls", "check"]);

    let one = Trace::read(&t1);
    let two = Trace::read(&t2);
    let calls1 = check_trace(&one, &threads, &ended.stamps, kernel);
    let calls2 = check_trace(&two, &threads, &ended.stamps, kernel);
    // nap(): one is nearly always in flight, parked, when a recording stops; the stop
    // waits for the calls still running instrumented code, so its exit is recorded too.
    let napper = threads["napper"];
    for (label, t) in [("first", &one), ("second", &two)] {
        let (enters, leaves) = t.calls(napper, t.method("nap"));
        assert!(
            enters.len() >= 20,
            "{label}: only {} nap() calls",
            enters.len()
        );
        assert_eq!(
            enters.len(),
            leaves.len(),
            "{label} recording: nap() entries and exits (a call in flight at the detach lost its exit?)"
        );
    }
    // linger(): entered during the first recording, it never returns; the first stop
    // waited its grace out and said so, and the call stays open. The second stop does
    // not wait for that frame (the first recording's code) and says nothing.
    let still = |t: &Trace| -> Vec<String> {
        t.warnings()
            .into_iter()
            .filter(|w| w.contains("still inside instrumented methods"))
            .map(str::to_string)
            .collect()
    };
    let lingerer = one.java_tid("lingerer").expect("the lingerer is named");
    let (enters, leaves) = one.calls(lingerer, one.method("linger"));
    assert_eq!((enters.len(), leaves.len()), (1, 0), "linger() calls");
    let warned = still(&one);
    assert!(
        warned.len() == 1 && warned[0].starts_with("1 thread(s) "),
        "first recording's warnings: {warned:?}"
    );
    assert!(still(&two).is_empty(), "second: {:?}", still(&two));
    // tiny(): every call of the measurement made during the first recording (warm-up
    // included), none in the second.
    let main = threads["main"];
    let (tiny1, _) = one.calls(main, one.method("tiny"));
    assert_eq!(tiny1.len(), during.calls);
    assert!(two.calls(main, two.method("tiny")).0.is_empty());
    for t in [&one, &two] {
        assert_eq!(t.counter("agent.classes_restored"), Some(1));
        assert_eq!(t.counter("agent.classes_retransformed"), Some(1));
    }
    // Ids of the second recording lie above the first's.
    assert!(two.method("work") > one.method("tiny").max(one.method("work")));
    export_and_check(&t1);
    export_and_check(&t2);

    let change = |c: Cost| (c.ratio / before.ratio - 1.0) * 100.0;
    eprintln!(
        "CPU ns per tiny() call / per reference() call / ratio (medians of windows): before {:.2} / {:.2} / {:.3}; during {:.1} / {:.2} / {:.2}; after {:.2} / {:.2} / {:.3} ({:+.1}%); after the second detach {:.2} / {:.2} / {:.3} ({:+.1}%). work() calls recorded: {calls1}, {calls2}",
        before.tiny, before.reference, before.ratio,
        during.tiny, during.reference, during.ratio,
        after.tiny, after.reference, after.ratio, change(after),
        after2.tiny, after2.reference, after2.ratio, change(after2)
    );
    assert!(
        during.ratio > 2.0 * before.ratio,
        "the probes do not show during the recording: {during:?} vs {before:?}"
    );
    for (label, c) in [("after", after), ("after the second detach", after2)] {
        assert!(
            change(c).abs() <= 5.0,
            "tiny() {label}: {c:?}, before: {before:?} ({:+.1}%)",
            change(c)
        );
    }
}

#[test]
fn attach_without_methods_records_threads_gc_monitors_and_scheduling() {
    let _machine = shared();
    let kernel = require(
        "kernel tracepoints (for the scheduling checks)",
        tracepoints_available(),
    );
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("plain.trace");
    let mut program = Program::start();
    let sonda = Attached::start(Attach::to(program.pid).options(["--duration", "3"]), &trace);
    program.command("gc 3", "gcs\t3");
    program.command("contend 300", "contended");
    let said = sonda.finish(None);
    assert!(said.contains("original classes restored"), "{said}");
    let threads = program.threads.clone();
    let ended = program.end();
    assert!(ended.success && ended.stderr.is_empty(), "{}", ended.stderr);
    assert_eq!(ended.check, expected_check(ended.calls));

    let t = Trace::read(&trace);
    let pid = t
        .metas
        .iter()
        .find_map(|m| match m {
            Meta::Process { pid, runtime, .. } if *runtime == sonda_trace::Runtime::Java => {
                Some(pid.0)
            }
            _ => None,
        })
        .expect("the agent described its process");
    assert!(
        !t.records
            .iter()
            .any(|r| matches!(r.event, Event::Enter { .. } | Event::Leave { .. })),
        "method events without --methods"
    );
    let gcs = t
        .records
        .iter()
        .filter(|r| matches!(r.event, Event::GcStart { pid: p, .. } if p.0 == pid))
        .count();
    assert!(gcs >= 3, "{gcs} collections recorded, 3 made");
    // The contenders started during the recording: named by their ThreadStart; they
    // waited for the lock, on a class the trace names.
    let contenders = [t.java_tid("contender-1"), t.java_tid("contender-2")];
    assert!(contenders.iter().all(Option::is_some), "{:?}", t.metas);
    let classes: Vec<u32> = t
        .records
        .iter()
        .filter_map(|r| match r.event {
            Event::MonitorContended { tid, class } if contenders.contains(&Some(tid.0)) => {
                Some(class)
            }
            _ => None,
        })
        .collect();
    assert!(!classes.is_empty(), "no contention recorded");
    assert!(t.metas.iter().any(|m| matches!(
        m,
        Meta::MonitorClass { id, name } if *id == classes[0] && name == "java.lang.Object"
    )));
    assert_eq!(t.java_name(threads["counter"]), Some("counter"));
    assert_eq!(t.java_name(threads["main"]), Some("main"));
    if kernel {
        for tid in contenders.iter().flatten() {
            assert!(t
                .records
                .iter()
                .any(|r| matches!(r.event, Event::NewTask { child, .. } if child.0 == *tid)));
        }
        assert!(t.records.iter().any(
            |r| matches!(r.event, Event::Switch { next, .. } if next.0 == threads["counter"])
        ));
    }
    assert_eq!(t.counter("agent.classes_restored"), Some(0));
    export_and_check(&trace);
}

#[test]
fn a_second_sonda_is_refused_while_one_records_and_a_killed_one_lets_go_at_once() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let mut program = Program::start();
    let work = Attach::to(program.pid).methods(["AttachLoop::work"]);
    let first = Attached::start(work.clone(), &dir.path().join("first.trace"));
    let busy = dir.path().join("busy.trace");
    work.record_unchecked(&busy)
        .assert_clean_error("another sonda is recording this JVM");
    assert!(!busy.exists(), "a refused attach left its trace file");

    // Killed: the agent sees at once that its collector is gone (the collector's lock
    // on the buffer file went with it), so the next attach ends the orphaned recording
    // (classes restored) and takes its place at the first try. Before, the JVM stayed
    // "busy" until the agent noticed 10 s of silence.
    let killed = first.child.id();
    let mut first = first;
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let started = Instant::now();
    let again = dir.path().join("again.trace");
    let out = work
        .clone()
        .options(["--duration", "1"])
        .record_unchecked(&again);
    let waited = started.elapsed();
    assert!(
        out.status.success(),
        "attaching again failed: {}",
        out.stderr
    );
    assert!(
        waited < Duration::from_secs(8),
        "attached again after {waited:?}: not at once"
    );
    assert!(out.stderr.contains("original classes restored"));
    no_buffer_left(killed);
    let t = Trace::read(&again);
    let (enters, leaves) = t.calls(program.threads["counter"], t.method("work"));
    assert!(!enters.is_empty() && enters.len() == leaves.len());
    program.command("gc 1", "gcs\t1");
    let ended = program.end();
    assert!(ended.success && ended.stderr.is_empty(), "{}", ended.stderr);
}

/// A JVM killed while sonda records it ends the recording within a tick or two, with
/// what was recorded kept: also while the dead JVM is a zombie its parent has not
/// reaped (the case a pidfd tells and `kill(pid, 0)` would not), and with its agent's
/// slots never retired (the drain frees them, asking the same question).
#[test]
fn a_jvm_killed_during_an_attach_ends_the_recording_at_once_keeping_its_records() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("killed.trace");
    let mut program = Program::start();
    let (pid, counter) = (program.pid, program.threads["counter"]);
    let mut sonda = Attached::start(Attach::to(pid).methods(["AttachLoop::work"]), &trace);
    std::thread::sleep(Duration::from_millis(500));
    program.child.kill().unwrap();
    // Not reaped: a zombie until `program` goes.
    let killed = Instant::now();
    let status = loop {
        if let Some(status) = sonda.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "sonda attach still recording a JVM killed 10 s ago"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = killed.elapsed();
    let said: Vec<String> = sonda.stderr.iter().collect();
    let said = said.join("\n");
    assert!(status.success(), "sonda attach failed: {said}");
    assert!(!said.contains("panicked"), "{said}");
    assert!(
        said.contains(&format!("JVM {pid} exited during the recording")),
        "{said}"
    );
    assert!(
        took < Duration::from_secs(5),
        "ended {took:?} after the kill"
    );
    let t = Trace::read(&trace);
    let (enters, _) = t.calls(counter, t.method("work"));
    assert!(!enters.is_empty(), "the calls before the kill are gone");
    export_and_check(&trace);
    drop(program);
}

#[test]
fn another_builds_agent_in_the_jvm_refuses_methods_and_lets_kernel_recording_run() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let mut program = Program::start();
    // This build's agent, with methods: it defines the probe class for good.
    Attach::to(program.pid)
        .methods(["AttachLoop::work"])
        .options(["--duration", "1"])
        .record(&dir.path().join("first.trace"));
    // Another build: to the JVM any other copy of the library is another library.
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let other = other_dir.join("libsonda.so");
    std::fs::copy(sonda_tests::agent(), &other).unwrap();
    let refused = dir.path().join("refused.trace");
    let out = Attach::to(program.pid)
        .methods(["AttachLoop::work"])
        .env("SONDA_AGENT", &other)
        .record_unchecked(&refused);
    out.assert_clean_error(&format!(
        "JVM {} holds the agent of another sonda build ({}",
        program.pid,
        std::fs::canonicalize(sonda_tests::agent())
            .unwrap()
            .display()
    ));
    assert!(!refused.exists(), "a trace was left by the refused attach");
    // Without methods the other copy records, and has nothing to warn about.
    let kernel = dir.path().join("kernel.trace");
    Attach::to(program.pid)
        .env("SONDA_AGENT", &other)
        .options(["--duration", "1"])
        .record(&kernel);
    let t = Trace::read(&kernel);
    assert!(t.warnings().is_empty(), "{:?}", t.warnings());
    assert_eq!(t.java_name(program.threads["counter"]), Some("counter"));
    // This build again: its copy is loaded, with the probe class it defined.
    let again = Attach::to(program.pid)
        .methods(["AttachLoop::work"])
        .options(["--duration", "1"])
        .record(&dir.path().join("again.trace"));
    assert!(again.stderr.contains("original classes restored"));
    let t = Trace::read(&again.trace);
    let (enters, leaves) = t.calls(program.threads["counter"], t.method("work"));
    assert!(!enters.is_empty() && enters.len() == leaves.len());
    program.command("gc 1", "gcs\t1");
    let ended = program.end();
    assert!(ended.success && ended.stderr.is_empty(), "{}", ended.stderr);
}

#[test]
fn error_paths_are_one_line_and_leave_nothing_behind() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let check = |out: &Recorded, expect: &str| {
        out.assert_clean_error(expect);
        assert!(!trace.exists(), "trace file left behind ({expect})");
    };

    // No such process.
    let out = Attach::to(999_999_999).record_unchecked(&trace);
    check(&out, "no process with pid 999999999");

    // Not a JVM: never signalled (SIGQUIT would kill it).
    let mut sleep = Command::new("sleep").arg("60").spawn().unwrap();
    let out = Attach::to(sleep.id())
        .methods(["a.B::c"])
        .record_unchecked(&trace);
    check(&out, "is not a HotSpot JVM");
    std::thread::sleep(Duration::from_millis(200));
    assert!(sleep.try_wait().unwrap().is_none(), "sleep was killed");
    sleep.kill().unwrap();
    sleep.wait().unwrap();

    // A JVM of root, attached by nobody: refused before any signal.
    let program = Program::start();
    if require("root (to run sonda as nobody)", is_root()) {
        let out = run(Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(sonda())
            .arg("attach")
            .arg(program.pid.to_string())
            .arg("-o")
            .arg("/nonexistent/t.trace"));
        assert_clean_error(&out, "runs as user 0 and we run as user 65534");
    }

    // A JVM that does not answer: stopped, before its attach listener runs (sonda
    // creates the trigger file and sends SIGQUIT, which stays pending) ...
    let pid = program.pid;
    let triggers = [
        PathBuf::from(format!("/proc/{pid}/cwd/.attach_pid{pid}")),
        PathBuf::from(format!("/tmp/.attach_pid{pid}")),
    ];
    let signal = |sig: i32| {
        // SAFETY: kill on the test's own JVM.
        assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
        if sig == libc::SIGSTOP {
            wait_until_stopped(pid);
        }
    };
    signal(libc::SIGSTOP);
    let started = Instant::now();
    let out = Attach::to(pid)
        .options(["--attach-timeout", "2"])
        .record_unchecked(&trace);
    let took = started.elapsed();
    check(&out, "did not answer the attach request within 2.");
    assert!(took < Duration::from_secs(6), "{took:?}");
    for t in &triggers {
        assert!(!t.exists(), "trigger file {} left behind", t.display());
    }
    signal(libc::SIGCONT);
    // ... and after an attach, when its listener runs: the request is never answered.
    Attach::to(pid)
        .options(["--duration", "0.5"])
        .record(&trace);
    std::fs::remove_file(&trace).unwrap();
    signal(libc::SIGSTOP);
    let out = Attach::to(pid)
        .methods(["AttachLoop::work"])
        .options(["--attach-timeout", "1"])
        .record_unchecked(&trace);
    signal(libc::SIGCONT);
    check(&out, "did not answer the attach request within 1.");
    for t in &triggers {
        assert!(!t.exists(), "trigger file {} left behind", t.display());
    }
    // The JVM lives on, unharmed (the pending SIGQUIT printed a thread dump) and can be
    // recorded.
    Attach::to(pid)
        .methods(["AttachLoop::work"])
        .options(["--duration", "0.5"])
        .record(&trace);
    let ended = program.end();
    assert!(ended.success, "{}", ended.stderr);
    assert_eq!(ended.check, expected_check(ended.calls));
}

#[test]
fn a_jvm_in_its_own_pid_and_mount_namespaces() {
    let _machine = shared();
    container_case(false);
}

#[test]
fn a_jvm_in_a_user_namespace_container() {
    let _machine = shared();
    // Its root is uid 100000 outside: the buffer file and the staged agent must be
    // that user's.
    container_case(true);
}

fn container_case(user_namespace: bool) {
    if !require(
        "root, unshare and setpriv (a JVM in a container)",
        is_root() && have("unshare") && have("setpriv"),
    ) {
        return;
    }
    // The container gets its own /tmp: the classes and stamps live elsewhere, where
    // the container's user may read and write.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let classes = dir.path().join("classes");
    std::fs::create_dir_all(&classes).unwrap();
    for f in std::fs::read_dir(java_classes("AttachLoop"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(f.path(), classes.join(f.file_name())).unwrap();
    }
    let uid = if user_namespace { 100_000 } else { 0 };
    for p in [dir.path(), classes.as_path()] {
        std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
    }
    let stamps = dir.path().join("stamps.bin");
    let out_dir = tempfile::tempdir().unwrap();
    let trace = out_dir.path().join("container.trace");
    let mut prefix: Vec<&str> = Vec::new();
    if user_namespace {
        prefix.extend([
            "setpriv",
            "--reuid=100000",
            "--regid=100000",
            "--clear-groups",
            "unshare",
            "--user",
            "--map-root-user",
        ]);
    } else {
        prefix.push("unshare");
    }
    prefix.extend([
        "--pid",
        "--mount",
        "--fork",
        "--mount-proc",
        "sh",
        "-c",
        CONTAINER_OWN_TMP,
        "sh",
        env!("CARGO_TARGET_TMPDIR"),
    ]);
    let program = Program::start_in(&prefix, &classes, stamps, dir);
    let host = program.pid;
    assert_eq!(
        ns_tids(host).get(&1),
        Some(&host),
        "the JVM is pid 1 of its namespace"
    );
    Attach::to(host)
        .methods(["AttachLoop::work"])
        .options(["--duration", "2"])
        .record(&trace);
    // The agent library was copied into the container's /tmp, as its user.
    let staged: Vec<_> = std::fs::read_dir(format!("/proc/{host}/root/tmp"))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("sonda-{uid}-"))
        })
        .collect();
    assert_eq!(staged.len(), 1, "{staged:?}");
    let threads = program.threads.clone();
    let ended = program.end();
    assert!(ended.success && ended.stderr.is_empty(), "{}", ended.stderr);
    let t = Trace::read(&trace);
    assert_eq!(t.counter("agent.unmapped_ids"), None);
    // Our ids everywhere: the agent's threads are the kernel's threads.
    check_trace(&t, &threads, &ended.stamps, tracepoints_available());
    assert!(t.metas.iter().any(|m| matches!(
        m,
        Meta::Process { pid, runtime: sonda_trace::Runtime::Java, .. } if pid.0 == host
    )));
    export_and_check(&trace);
}
