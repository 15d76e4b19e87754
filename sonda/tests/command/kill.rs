//! A collector killed with SIGKILL: the recorded command runs on to completion (nothing
//! ties it to sonda's life, and its output does not go through sonda), and the trace,
//! left at its partial name `TRACE.XXXXXX.partial` (sonda had no chance to rename it),
//! reads up to the last block sonda flushed.

use std::time::{Duration, Instant};

use crate::common::*;
use sonda_trace::{Event, Events, TraceMeta};

#[test]
fn sigkill_of_the_collector_leaves_a_readable_trace_and_the_command_completes() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.sonda");
    // An older trace of that name stays what it was: the killed recording never got to
    // replace it.
    std::fs::write(&trace, "an older trace").unwrap();
    let output = dir.path().join("output.txt");
    let done = dir.path().join("done");
    // About 2 s of work in steps, printing as it goes (to a file, as a terminal would
    // take it: not through sonda), then a marker.
    let script = format!(
        "for step in 1 2 3 4 5 6 7 8 9 10; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; echo step $step; sleep 0.15; done; echo finished > {}",
        done.display()
    );
    let mut child = sonda()
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", &script])
        .stdout(std::fs::File::create(&output).unwrap())
        .spawn()
        .unwrap();
    let sonda_pid = child.id();
    // Kill it once it has flushed events (the file holds more than its header and the
    // first metadata), well before the command ends.
    let deadline = Instant::now() + Duration::from_secs(10);
    let size = || {
        partial_of(&trace)
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len())
    };
    while size() < 2048 {
        assert!(Instant::now() < deadline, "sonda flushed nothing in 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !done.exists(),
        "the command finished before the kill: make it longer"
    );
    // Its buffer file, seen while it lives: after the kill any sonda command (another
    // test's, running beside this one) may remove it at once.
    let stale = buffer_files_of(sonda_pid);
    assert_eq!(stale.len(), 1, "expected the collector's buffer file");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let deadline = Instant::now() + Duration::from_secs(30);
    while !done.exists() {
        assert!(
            Instant::now() < deadline,
            "the command did not complete after sonda was killed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let printed = std::fs::read_to_string(&output).unwrap();
    assert_eq!(
        printed.lines().count(),
        10,
        "the command's output was cut: {printed:?}"
    );

    assert_eq!(
        std::fs::read_to_string(&trace).unwrap(),
        "an older trace",
        "a killed recording cannot have renamed its trace"
    );
    let trace = partial_of(&trace).expect("the partial trace stays");
    let meta = TraceMeta::scan(&trace).expect("the trace opens");
    assert!(
        !meta.complete,
        "a killed recording cannot have its end block"
    );
    assert!(meta.info.is_some(), "the trace info was not flushed");
    assert!(meta.records > 0, "no events were flushed before the kill");
    // Every event before the cut reads, in time order, then at most one error.
    let mut last = 0;
    let mut read = 0u64;
    let mut switches = 0;
    for r in Events::open(&trace).unwrap() {
        let Ok(r) = r else { break };
        assert!(r.time.0 >= last);
        last = r.time.0;
        read += 1;
        switches += u64::from(matches!(
            r.event,
            Event::Switch { .. } | Event::ProcSample { .. }
        ));
    }
    assert_eq!(read, meta.records, "the scan and the stream disagree");
    assert!(switches > 0);

    // The killed collector's buffer file is gone once the next collector has started
    // (it, or any sonda command since the kill, removed it).
    let out = run_sonda(&[
        "record",
        "-o",
        dir.path().join("t2.sonda").to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(out.status.success());
    assert!(
        !stale[0].exists(),
        "the stale buffer file of a dead collector was not removed"
    );
    // A killed recording says, without its end block, what its readers need to know
    // before the first switch: whether the switches are dated by the scheduler's clock
    // (BPF, as the complete recording just made tells).
    let complete = TraceMeta::scan(&dir.path().join("t2.sonda")).unwrap();
    assert_eq!(
        meta.switches_dated_by_clock(),
        complete.counters.get("kernel.bpf") == Some(&1),
        "switches dated by the clock in the killed recording, against kernel.bpf of a complete one: {:?}",
        complete.counters
    );
}
