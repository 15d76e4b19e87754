//! Several recordings in one JVM: attach, stop (classes restored, the header says
//! `Stopped`), attach again with a new buffer file and another filter. The second
//! recording names every live thread again, gets method ids above the first one's, its
//! own counters, and no exit of a method entered in the first recording; an attach
//! while it runs is refused with `attach_codes::BUSY`. Loads go through sonda-attach,
//! as `sonda attach` does.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use crate::common::*;
use sonda_attach::{load_agent, Target, DEFAULT_TIMEOUT};
use sonda_shm::records::{ENTER, LEAVE, VM_INIT};
use sonda_shm::{attach_codes, AgentState, Clock};
use sonda_trace::Meta;

const WAIT: Duration = Duration::from_secs(30);

/// The Reattach program, driven line by line.
struct Jvm {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    pid: u32,
    /// (name, tid) of the threads the program reported.
    threads: Vec<(String, u32)>,
}

impl Jvm {
    fn start() -> Jvm {
        let classes = java_classes("Reattach", false);
        let mut child = Command::new("java")
            .arg("-cp")
            .arg(&classes)
            .arg("Reattach")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("java runs");
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut jvm = Jvm {
            child,
            stdin,
            lines,
            pid: 0,
            threads: Vec::new(),
        };
        let ready = jvm.expect("ready");
        jvm.pid = ready[1].parse().unwrap();
        jvm
    }

    /// Waits for a line starting with `tag` (recording `thread` lines on the way).
    fn expect(&mut self, tag: &str) -> Vec<String> {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {tag:?} line from the JVM"));
            let f: Vec<String> = line.split('\t').map(str::to_string).collect();
            if f[0] == "thread" {
                self.threads.push((f[1].clone(), f[2].parse().unwrap()));
            }
            if f[0] == tag {
                return f;
            }
        }
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn tid(&self, name: &str) -> u32 {
        self.threads.iter().find(|t| t.0 == name).unwrap().1
    }

    /// Loads the agent on `rec`'s buffer file; returns Agent_OnAttach's code.
    fn attach(&self, rec: &Recording) -> i32 {
        let target = Target::inspect(self.pid).expect("the JVM can be attached to");
        load_agent(
            &target,
            &libsonda(),
            &format!("shm={}", rec.path.display()),
            DEFAULT_TIMEOUT,
        )
        .expect("the JVM answers the load")
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn method_id(d: &Drained, key: &str) -> u32 {
    *d.methods()
        .get(key)
        .unwrap_or_else(|| panic!("{key} not described: {:?}", d.metas))
}

fn calls(d: &Drained, tid: u32, kind: u8, id: u32) -> usize {
    d.records_of(tid, kind)
        .iter()
        .filter(|r| r.arg == id)
        .count()
}

#[test]
fn a_second_attach_records_afresh_and_a_third_while_busy_is_refused() {
    let mut jvm = Jvm::start();
    jvm.send("spawn before-1");
    jvm.expect("thread");
    jvm.send("load");
    jvm.expect("loaded");

    // First recording: work only; holder enters held() and stays there.
    let a = Recording::new(
        "mode=attach\nmethods=Reattach::work\nmethods=Reattach::held\nmethods=Reattach$Lazy::compute\n",
        Clock::Monotonic,
    );
    assert_eq!(jvm.attach(&a), attach_codes::OK);
    a.wait_state(AgentState::Recording, WAIT);
    jvm.send("hold");
    jvm.send("work 1000");
    jvm.expect("worked");
    jvm.send("lazy 300");
    jvm.expect("computed");
    // The holder prints its tid, then enters held() (instrumented) and stays there.
    while !jvm.threads.iter().any(|t| t.0 == "holder") {
        jvm.expect("thread");
    }
    std::thread::sleep(Duration::from_millis(200));
    a.region.request_stop();
    a.wait_state(AgentState::Stopped, WAIT);
    jvm.send("work 500"); // after the stop: recorded nowhere
    jvm.expect("worked");
    let da = a.drain();
    let main = jvm.tid("main");
    let holder = jvm.tid("holder");
    let work_a = method_id(&da, "Reattach.work(I)I");
    let held_a = method_id(&da, "Reattach.held()I");
    assert_eq!(calls(&da, main, ENTER, work_a), 1000);
    assert_eq!(calls(&da, main, LEAVE, work_a), 1000);
    assert_eq!(calls(&da, holder, ENTER, held_a), 1);
    assert_eq!(calls(&da, holder, LEAVE, held_a), 0);
    assert!(
        da.has_java_thread(main, "main") && da.has_java_thread(jvm.tid("before-1"), "before-1")
    );
    // Lazy was loaded, not linked, at the attach: found through its constant pool.
    let lazy = method_id(&da, "Reattach$Lazy.compute(I)I");
    assert_eq!(calls(&da, main, ENTER, lazy), 300);
    assert_eq!(da.counter("agent.classes_retransformed"), Some(2));
    assert_eq!(da.counter("agent.classes_restored"), Some(2));
    // The stop waited for the holder's held() to return, in vain, and said so.
    let warnings = da.warnings();
    assert!(
        warnings.len() == 1
            && warnings[0].starts_with("1 thread(s) were still inside instrumented methods"),
        "{warnings:?}"
    );
    let a_max = da.methods().values().copied().max().unwrap();

    // Second recording, another filter; the holder leaves held() during it.
    let b = Recording::new(
        "mode=attach\nmethods=Reattach::work\nmethods=Reattach::other\nmethods=Reattach::held\n",
        Clock::Monotonic,
    );
    assert_eq!(jvm.attach(&b), attach_codes::OK);
    b.wait_state(AgentState::Recording, WAIT);
    // A third attach while the second records is refused, and leaves it running.
    let c = Recording::new("mode=attach\n", Clock::Monotonic);
    assert_eq!(jvm.attach(&c), attach_codes::BUSY);
    assert_eq!(c.region.attached(), 0, "the refused agent mapped the file");
    jvm.send("spawn during-b");
    jvm.send("work 700");
    jvm.expect("worked");
    jvm.send("release");
    jvm.expect("held");
    b.region.request_stop();
    b.wait_state(AgentState::Stopped, WAIT);
    jvm.send("work 100");
    jvm.expect("worked");

    let db = b.drain();
    let work_b = method_id(&db, "Reattach.work(I)I");
    assert!(
        db.methods().values().all(|&id| id > a_max),
        "ids of the second recording must lie above the first's ({a_max}): {:?}",
        db.methods()
    );
    assert_eq!(calls(&db, main, ENTER, work_b), 700);
    assert_eq!(calls(&db, main, LEAVE, work_b), 700);
    // held() was entered in the first recording: its exit belongs to nobody.
    assert!(
        db.records_of(holder, LEAVE).is_empty() && db.records_of(holder, ENTER).is_empty(),
        "{:?}",
        db.records_of(holder, LEAVE)
    );
    for (name, tid) in &jvm.threads {
        assert!(
            db.has_java_thread(*tid, name),
            "{name} ({tid}) not named again: {:?}",
            db.java_threads()
        );
    }
    assert_eq!(db.all_of(VM_INIT).len(), 1);
    assert_eq!(db.counter("agent.classes_retransformed"), Some(1));
    assert_eq!(db.counter("agent.classes_restored"), Some(1));
    assert!(db
        .metas
        .iter()
        .any(|m| matches!(m, Meta::Process { pid, .. } if pid.0 == jvm.pid)));
    assert!(db.warnings().is_empty(), "{:?}", db.warnings());
    // Nothing was written to the first file since its stop.
    assert!(a.drain().slots.iter().all(|s| s.records.is_empty()));

    jvm.send("quit");
    jvm.expect("bye");
    assert!(jvm.child.wait().unwrap().success());
}
