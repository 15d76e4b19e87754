//! Dynamic attach (`Agent_OnAttach`, loaded by `jcmd <pid> JVMTI.agent_load`): threads
//! alive before the agent are named with their kernel tids, a method compiled before the
//! attach is retransformed and traced from then on, and the collector's stop request
//! gives the original class back.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::*;
use sonda_shm::records::{ENTER, LEAVE, VM_INIT};
use sonda_shm::{AgentState, Clock};
use sonda_trace::Meta;
use std::time::Duration;

#[test]
fn attach_names_live_threads_and_traces_loaded_classes() {
    let classes = java_classes("AttachTarget", false);
    let rec = Recording::new(
        "methods=AttachTarget::work\nmode=attach\n",
        Clock::Monotonic,
    );
    let go = rec.dir.path().join("go");
    let again = rec.dir.path().join("again");
    let n = 1000;
    let mut child = KillOnDrop(
        Command::new("java")
            .arg("-cp")
            .arg(&classes)
            .arg("AttachTarget")
            .arg(&go)
            .arg(n.to_string())
            .arg(&again)
            .stdout(Stdio::piped())
            .spawn()
            .expect("java runs"),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut tids = Vec::new();
    let pid = loop {
        let line = lines.next().expect("target prints ready").unwrap();
        let f: Vec<&str> = line.split('\t').collect();
        match f[0] {
            "thread" => tids.push((f[1].to_string(), f[2].parse::<u32>().unwrap())),
            "ready" => break f[1].to_string(),
            _ => {}
        }
    };
    // jcmd's argument parser would split `shm=...` at the `=`: quote it.
    let jcmd = Command::new("jcmd")
        .args([
            &pid,
            "JVMTI.agent_load",
            libsonda().to_str().unwrap(),
            &format!("\"shm={}\"", rec.path.display()),
        ])
        .output()
        .expect("jcmd runs");
    let said = text(&jcmd.stdout);
    assert!(
        jcmd.status.success() && said.contains("return code: 0"),
        "jcmd: {said}{}",
        text(&jcmd.stderr)
    );
    // Linking the probes and retransforming finish on the agent's own thread once the
    // attach returned; the agent says it records once the retransformed class is in
    // place. Not the method's description: that is written inside the class file hook,
    // before the JVM installs the new class (main's 1000 calls once ran the old code in
    // between, on a busy host: 0 traced).
    rec.wait_state(AgentState::Recording, Duration::from_secs(20));
    assert!(
        rec.drain_metas()
            .iter()
            .any(|m| matches!(m, Meta::Method { name, .. } if name == "work")),
        "work not instrumented"
    );
    std::fs::write(&go, "").unwrap();
    // Sleepers may print their tid after main's "ready".
    loop {
        let line = lines.next().expect("phase1 line").unwrap();
        let f: Vec<&str> = line.split('\t').collect();
        match f[0] {
            "thread" => tids.push((f[1].to_string(), f[2].parse::<u32>().unwrap())),
            "phase1" => break,
            other => panic!("unexpected line {other:?}"),
        }
    }
    // Stop: the agent restores the class and writes its totals; later calls are not
    // traced.
    rec.region.request_stop();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !rec
        .drain_metas()
        .iter()
        .any(|m| matches!(m, Meta::Counter { name, .. } if name == "agent.classes_restored"))
    {
        assert!(std::time::Instant::now() < deadline, "stop never handled");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::write(&again, "").unwrap();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = child.0.wait().unwrap();
    assert!(status.success());
    assert!(rest.iter().any(|l| l.starts_with("sum\t")), "{rest:?}");

    let d = rec.drain();
    assert_eq!(rec.region.attached(), 1);
    let named = d.java_threads();
    for (name, tid) in &tids {
        assert!(
            d.has_java_thread(*tid, name),
            "{name} (tid {tid}) not in {named:?}"
        );
    }
    assert!(
        named.values().any(|n| n.0 == "Attach Listener"),
        "{named:?}"
    );
    assert_eq!(d.all_of(VM_INIT).len(), 1);
    let work = *d
        .methods()
        .get("AttachTarget.work(I)I")
        .unwrap_or_else(|| panic!("work not described: {:?}", d.metas));
    let main = tids.iter().find(|t| t.0 == "main").unwrap().1;
    let enters = d
        .records_of(main, ENTER)
        .iter()
        .filter(|r| r.arg == work)
        .count();
    let leaves = d
        .records_of(main, LEAVE)
        .iter()
        .filter(|r| r.arg == work)
        .count();
    assert_eq!((enters, leaves), (n, n));
    assert_eq!(d.counter("agent.classes_retransformed"), Some(1));
    assert_eq!(d.counter("agent.classes_restored"), Some(1));
    assert!(d.warnings().is_empty(), "{:?}", d.warnings());
}

/// Kills the target JVM if the test fails half-way (it would wait for its files forever).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
