//! `report::render` and `report::summarize` on trace files: the figures of the
//! showcase trace, the printed text, and traces that are cut, damaged, empty or not
//! traces at all.

use std::path::Path;

use sonda_testdata::{showcase, TraceBuilder};
use sonda_timeline::report::{self, ReportError, ReportOptions, ReportSummary};
use sonda_timeline::{Frame, ThreadState, Trace};
use sonda_trace::{ReadError, Runtime, Source, Tid};

/// Opens the trace at `path` and summarizes it.
fn summarize(path: &Path) -> Result<ReportSummary, ReportError> {
    report::summarize(Trace::open(path)?)
}

/// Opens the trace at `path` and renders it to `out`.
fn render(
    path: &Path,
    out: &mut dyn std::io::Write,
    opts: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    report::render(Trace::open(path)?, out, opts)
}

fn write(b: &TraceBuilder, dir: &Path, name: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    b.write(&path).unwrap();
    path
}

#[test]
fn showcase_figures() {
    let dir = tempfile::tempdir().unwrap();
    let s = summarize(&write(&showcase(), dir.path(), "s.trace")).unwrap();
    assert!(s.damage.is_none() && s.recording.complete);
    assert_eq!(s.recording.duration_ns(), 1000);
    assert_eq!(s.recording.records, showcase().records().len() as u64);
    assert_eq!(
        (s.recording.cpus, s.recording.source),
        (2, Some(Source::Tracepoints))
    );

    let pids: Vec<_> = s
        .processes
        .iter()
        .map(|p| (p.pid.0, p.name.as_str(), p.runtime, p.threads.len()))
        .collect();
    assert_eq!(
        pids,
        vec![
            (100, "java", Some(Runtime::Java), 6),
            (200, "dd", Some(Runtime::Native), 1)
        ]
    );
    let names: Vec<_> = s
        .processes
        .iter()
        .flat_map(|p| &p.threads)
        .map(|t| (t.tid.0, t.name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            (101, "main"),
            (102, "worker-1"),
            (103, "VM Periodic"), // no Java name: the kernel's, after its rename
            (104, "worker-2"),
            (105, "Signal Dispatcher"),
            (106, "lossy"),
            (201, "dd"),
        ]
    );
    let main = &s.processes[0].threads[0].stats;
    assert_eq!(main.states.get(ThreadState::Running), 715);
    assert_eq!((main.switches, main.migrations, main.wakeups), (3, 2, 1));
    assert_eq!(s.processes[0].gc.count, 1);
    assert_eq!(
        (s.processes[0].gc.total_ns, s.processes[0].gc.max_ns),
        (50, 50)
    );
    assert_eq!(s.processes[1].gc.count, 0);

    assert_eq!(s.monitors.len(), 1);
    assert_eq!(
        (
            s.monitors[0].name.as_str(),
            s.monitors[0].waits.count,
            s.monitors[0].waits.total_ns
        ),
        ("demo.Store", 1, 45)
    );

    let methods: Vec<_> = s
        .methods
        .iter()
        .map(|m| {
            (
                m.label.as_str(),
                m.calls,
                m.exceptions,
                m.incomplete,
                m.inclusive_ns,
            )
        })
        .collect();
    assert_eq!(
        methods,
        vec![
            ("demo.Store::save", 2, 0, 2, 581 + 8),
            ("demo.Service::handle", 2, 0, 0, 125 + 25),
            ("demo.Service::parse(Ljava/lang/String;)I", 2, 0, 1, 30 + 20),
            ("demo.Service::parse([B)I", 1, 1, 0, 40),
            ("0x401000", 1, 0, 0, 25),
        ]
    );
    let handle = &s.methods[1];
    assert_eq!(
        (
            handle.frame,
            handle.exclusive_ns,
            handle.cpu_ns,
            handle.mean_inclusive_ns()
        ),
        (Frame::Method(1), 55 + 5, 150, 75)
    );

    assert_eq!(s.counters.get("kernel.lost"), Some(&2));
    assert_eq!(s.counters.get("agent.dropped"), Some(&3));
    assert_eq!(
        (
            s.repairs.unwound_calls,
            s.repairs.unmatched_leaves,
            s.repairs.unseen_threads
        ),
        (1, 1, 1)
    );
    assert_eq!(
        s.warnings,
        vec!["class demo.Legacy left unchanged".to_string()]
    );
}

#[test]
fn printed_report_is_aligned_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(&showcase(), dir.path(), "s.trace");
    let mut out = Vec::new();
    render(&trace, &mut out, &ReportOptions::default()).unwrap();
    let text = String::from_utf8(out).unwrap();
    for needle in [
        "command        java Synthetic",
        "kernel scheduler tracepoints",
        "status         complete",
        "Process java (pid 100, Java): 6 threads",
        "Process dd (pid 200, native): 1 thread\n",
        "Timeline repairs",
        "Signal Dispatcher (no record)",
        "GC (garbage collections)",
        "demo.Store",
        "demo.Service::parse([B)I",
        "kernel.lost",
        "agent.no_slot",
        "collector.late_retimed",
        "class demo.Legacy left unchanged",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    // Every line of a table is as wide as its header (the last column is right-aligned).
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("thread  "))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), 7, "{text}");
    let width = table[0].chars().count();
    assert!(
        table.iter().all(|l| l.chars().count() == width),
        "{table:#?}"
    );
    let tid_end = table[0].find("tid").unwrap() + 3;
    assert!(
        table
            .iter()
            .skip(1)
            .all(|l| l.as_bytes()[tid_end - 1].is_ascii_digit()),
        "{table:#?}"
    );

    let mut out = Vec::new();
    render(
        &trace,
        &mut out,
        &ReportOptions::default().with_max_methods(2),
    )
    .unwrap();
    assert!(String::from_utf8(out)
        .unwrap()
        .contains("... 3 more methods"));
}

#[test]
fn a_cut_trace_is_reported_up_to_where_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let b = showcase();
    let path = dir.path().join("cut.trace");
    let kept = 30;
    let offset = b.write_cut(&path, kept).unwrap();
    let s = summarize(&path).unwrap();
    match &s.damage {
        Some(ReadError::Truncated { offset: o }) => assert_eq!(*o, offset),
        other => panic!("expected truncation, got {other:?}"),
    }
    assert!(!s.recording.complete);
    assert_eq!(s.recording.records, kept as u64);
    assert_eq!(s.recording.end, b.records()[kept - 1].time);
    // Every thread's states add up to the part that was kept.
    let span = s.recording.duration_ns();
    for t in s.processes.iter().flat_map(|p| &p.threads) {
        let total: u64 = ThreadState::ALL
            .iter()
            .map(|&st| t.stats.states.get(st))
            .sum();
        assert_eq!(total, span, "{}", t.name);
    }
    let mut out = Vec::new();
    render(&path, &mut out, &ReportOptions::default()).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(&format!("CUT SHORT: trace is cut short at byte {offset}")),
        "{text}"
    );
}

#[test]
fn a_damaged_block_is_skipped_and_the_report_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let whole = summarize(&write(&showcase(), dir.path(), "whole.trace")).unwrap();
    let path = write(&showcase(), dir.path(), "bad.trace");
    let mut bytes = std::fs::read(&path).unwrap();
    // One byte flipped in the middle of the payload of the block that holds the middle
    // of the file (blocks: a 40-byte header, its payload length at bytes 8..12).
    let mut at = 16;
    loop {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if at + 40 + len > bytes.len() / 2 {
            bytes[at + 40 + len / 2] ^= 0xff;
            break;
        }
        at += 40 + len;
    }
    std::fs::write(&path, &bytes).unwrap();
    let s = summarize(&path).unwrap();
    let damage = s.damage.as_ref().expect("damage found").to_string();
    assert!(damage.contains("damaged"), "{damage}");
    assert_eq!(s.unread.regions.len(), 1, "{:?}", s.unread);
    // The damaged block's records are missing and counted; the blocks after it are read
    // to the trace's end.
    let (lost, known) = s.unread.records();
    assert!(known && lost > 0, "{:?}", s.unread);
    assert_eq!(s.recording.records + lost, whole.recording.records);
    assert_eq!(s.recording.end, whole.recording.end);
}

#[test]
fn not_a_trace_and_missing_files_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("bogus.trace");
    std::fs::write(&bogus, b"this is not a trace\n").unwrap();
    let err = summarize(&bogus).unwrap_err();
    assert!(matches!(
        err,
        ReportError::Read {
            source: ReadError::NotATrace,
            ..
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("bogus.trace") && msg.contains("not a sonda trace"),
        "{msg}"
    );
    let missing = dir.path().join("missing.trace");
    let msg = summarize(&missing).unwrap_err().to_string();
    assert!(msg.contains("missing.trace"), "{msg}");
    assert_eq!(msg.lines().count(), 1);
}

#[test]
fn a_trace_without_threads_reports_nothing_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &TraceBuilder::new(Source::Tracepoints, 4),
        dir.path(),
        "empty.trace",
    );
    let mut out = Vec::new();
    let s = render(&path, &mut out, &ReportOptions::default()).unwrap();
    assert!(s.processes.is_empty() && s.methods.is_empty());
    assert_eq!(s.recording.duration_ns(), 0);
    assert!(String::from_utf8(out)
        .unwrap()
        .contains("no calls recorded"));
}

#[test]
fn a_procfs_trace_reports_states_without_switch_counts() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = TraceBuilder::new(Source::Procfs, 1);
    b.process(7, "app", Runtime::Native).thread(7, 8, "app").at(
        0,
        sonda_trace::Event::ProcSample {
            tid: Tid(8),
            cpu: sonda_trace::Cpu(0),
            state: b'R',
            run_ns: 0,
            wait_ns: 0,
        },
    );
    b.at(
        1_000_000,
        sonda_trace::Event::ProcSample {
            tid: Tid(8),
            cpu: sonda_trace::Cpu(0),
            state: b'S',
            run_ns: 600_000,
            wait_ns: 100_000,
        },
    );
    let path = write(&b, dir.path(), "p.trace");
    let mut out = Vec::new();
    let s = render(&path, &mut out, &ReportOptions::default()).unwrap();
    let st = &s.processes[0].threads[0].stats.states;
    assert_eq!(
        (
            st.get(ThreadState::Running),
            st.get(ThreadState::Runnable),
            st.get(ThreadState::Sleeping)
        ),
        (600_000, 100_000, 300_000)
    );
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("/proc sampling"), "{text}");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("app "))
        .unwrap();
    assert!(row.trim_end().ends_with('-'), "{row}");
}
