//! `export` on synthetic traces: every output checked by prvcheck (the strict Paraver
//! checker, no `--allow-gaps`) and by pertalde, exact records where the
//! trace makes them certain, and the `.prv`'s per-thread state totals read back
//! independently and compared with the report's figures.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{self, Cursor, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

use sonda_paraver::conventions::{event, state, state_value};
use sonda_paraver::{ExportError, ExportOptions, Output, Outputs};
use sonda_testdata::{showcase, Busy, TraceBuilder};
use sonda_tests::check_paraver;
use sonda_timeline::{ThreadState, Trace};
use sonda_trace::{ReadError, Source};

use crate::files::{export, Exported};

/// The report's figures of the trace at `path`.
fn summarize(
    path: &Path,
) -> Result<sonda_timeline::report::ReportSummary, sonda_timeline::report::ReportError> {
    sonda_timeline::report::summarize(sonda_timeline::Trace::open(path)?)
}

fn opts() -> ExportOptions {
    ExportOptions::default().with_date(UNIX_EPOCH + Duration::from_secs(1_795_957_559))
}

fn exported(b: &TraceBuilder, dir: &Path, name: &str, opts: &ExportOptions) -> (PathBuf, Exported) {
    let trace = dir.join(format!("{name}.trace"));
    b.write(&trace).unwrap();
    let summary = export(&trace, &dir.join(name), opts).unwrap();
    check_paraver(&summary.prv);
    (trace, summary)
}

/// A `.prv` read back on its own terms.
struct Prv {
    header: String,
    /// Row names from the `.row`, in header order.
    names: Vec<String>,
    /// ns per (row, Paraver state).
    states: BTreeMap<(usize, u32), u64>,
    /// (row, time, type, value, cpu) of every event.
    events: Vec<(usize, u64, u32, i64, u32)>,
    comms: Vec<String>,
    lines: Vec<String>,
}

impl Prv {
    fn load(s: &Exported) -> Prv {
        let text = std::fs::read_to_string(&s.prv).unwrap();
        let mut lines = text.lines();
        let header = lines.next().unwrap().to_string();
        let row = std::fs::read_to_string(&s.row).unwrap();
        let names: Vec<String> = row
            .lines()
            .skip_while(|l| !l.starts_with("LEVEL THREAD SIZE"))
            .skip(1)
            .map(str::to_string)
            .collect();
        // Rows are appl-major: appl and thread index map to a row by counting.
        // After `END_ns:NODES:NAPPL:` come the applications, `1(NTHREADS:NODE)` each.
        let apps_text = header
            .split_once("):")
            .unwrap()
            .1
            .splitn(4, ':')
            .nth(3)
            .unwrap();
        let apps: Vec<usize> = apps_text
            .split(')')
            .filter_map(|g| g.split_once('('))
            .map(|(_, inside)| inside.split(':').next().unwrap().parse().unwrap())
            .collect();
        let row_of =
            |appl: usize, thread: usize| apps[..appl - 1].iter().sum::<usize>() + thread - 1;
        let mut p = Prv {
            header,
            names,
            states: BTreeMap::new(),
            events: Vec::new(),
            comms: Vec::new(),
            lines: Vec::new(),
        };
        for l in lines {
            p.lines.push(l.to_string());
            let f: Vec<i64> = l.split(':').map(|x| x.parse().unwrap()).collect();
            let row = row_of(f[2] as usize, f[4] as usize);
            match f[0] {
                1 => *p.states.entry((row, f[7] as u32)).or_default() += (f[6] - f[5]) as u64,
                2 => p
                    .events
                    .push((row, f[5] as u64, f[6] as u32, f[7], f[1] as u32)),
                3 => p.comms.push(l.to_string()),
                _ => panic!("unknown record {l}"),
            }
        }
        p
    }

    fn row(&self, tid: u32) -> usize {
        self.names
            .iter()
            .position(|n| n.ends_with(&format!("({tid})")))
            .unwrap()
    }

    fn state(&self, tid: u32, s: u32) -> u64 {
        self.states.get(&(self.row(tid), s)).copied().unwrap_or(0)
    }
}

/// The report's state totals, thread by thread, must be the `.prv`'s.
fn states_agree_with_the_report(trace: &Path, prv: &Prv) {
    let report = summarize(trace).unwrap();
    let mut threads = 0;
    for t in report.processes.iter().flat_map(|p| &p.threads) {
        for s in ThreadState::ALL {
            assert_eq!(
                prv.state(t.tid.0, state_value(s)),
                t.stats.states.get(s),
                "thread {} {:?}",
                t.tid,
                s
            );
        }
        threads += 1;
    }
    assert_eq!(threads, prv.names.len());
}

#[test]
fn showcase_exports_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, s) = exported(&showcase(), dir.path(), "show", &opts());
    assert_eq!(
        (s.applications, s.threads, s.cpus, s.end_ns),
        (2, 7, 2, 1000)
    );
    assert!(s.damage.is_none() && s.complete);
    assert_eq!(s.state_pieces, 0);
    let prv = Prv::load(&s);
    assert_eq!(
        prv.header,
        "#Paraver (29/11/2026 at 13:05):1000_ns:1(2):2:1(6:1):1(1:1),0"
    );
    assert_eq!(
        prv.names,
        vec![
            "main (101)",
            "worker-1 (102)",
            "VM Periodic (103)",
            "worker-2 (104)",
            "Signal Dispatcher (105)",
            "lossy (106)",
            "dd (201)"
        ]
    );
    states_agree_with_the_report(&trace, &prv);
    // Hand-checked records: main ran on CPU 1 (Paraver 2) from the origin (a Running
    // state names its CPU, other states CPU 0); worker-2
    // does not exist before 400 nor after 490; method 1 entered on CPU 0 at 160; the GC
    // on the VM thread; the monitor wait; the exit by exception.
    for line in [
        "1:2:1:1:1:0:100:1",
        "1:0:1:1:4:0:400:2",
        "1:2:1:1:4:460:490:1",
        "1:0:1:1:4:490:1000:2",
        "1:0:2:1:1:140:260:12",
        "1:0:2:1:1:310:590:15",
        "1:0:1:1:5:0:1000:9",
        "2:1:1:1:1:160:60000019:1",
        "2:1:1:1:1:250:49000001:3",
        "2:1:1:1:3:300:48000001:1",
        "2:1:1:1:3:350:48000001:0",
        "2:2:1:1:4:420:49000002:5",
        "2:2:1:1:4:465:49000002:0",
        "2:2:1:1:1:800:70000004:42",
    ] {
        assert!(prv.lines.iter().any(|l| l == line), "{line} missing");
    }
    // Every call opens and closes on the user-function type: 8 enters, 8 exits
    // (main 3, lossy 3, worker-2 1, dd 1).
    let calls: Vec<_> = prv
        .events
        .iter()
        .filter(|e| e.2 == event::USER_FUNCTION)
        .collect();
    assert_eq!(
        (
            calls.iter().filter(|e| e.3 != 0).count(),
            calls.iter().filter(|e| e.3 == 0).count()
        ),
        (8, 8)
    );
    // The native function got a value after the methods' and a label from its mapping.
    assert!(calls.iter().any(|e| e.3 == 5 && e.1 == 105));
    let pcf = std::fs::read_to_string(&s.pcf).unwrap();
    for label in [
        "5      0x401000 (dd+0x1000)",
        "3      demo.Service::parse([B)I",
        "5      demo.Store",
        "42     steady",
        "40   Waiting for a CPU",
    ] {
        assert!(pcf.contains(label), "{label:?} not in the .pcf");
    }
    assert_eq!(prv.state(101, state::RUNNING), 715);
    // Wakeups are on by default. Only Running states carry a CPU; the CPU view is made
    // of events:
    // main (row 1) starts on CPU 1 at 150; at 270 worker-1 (row 2) hands CPU 2 over to
    // dd (row 7, not of the trace's rows before it), so its stop has no CPU.
    assert_eq!(prv.comms.len(), 3);
    assert!(prv
        .lines
        .iter()
        .filter(|l| l.starts_with("1:"))
        .all(|l| l.starts_with("1:0:") != l.ends_with(":1")));
    for line in [
        "2:1:1:1:1:150:49000003:1",
        "2:0:1:1:2:270:49000003:0",
        "2:2:2:1:1:270:49000003:7",
        "2:1:1:1:3:360:49000003:0",
    ] {
        assert!(prv.lines.iter().any(|l| l == line), "{line} missing");
    }
}

#[test]
fn wakeups_become_communications() {
    let dir = tempfile::tempdir().unwrap();
    let (_, s) = exported(&showcase(), dir.path(), "wake", &opts());
    let prv = Prv::load(&s);
    assert_eq!(
        prv.comms,
        vec![
            // dd (appl 2) on CPU 1 woke the VM thread at 280; it ran at 295 on CPU 0.
            "3:2:2:1:1:280:280:1:1:1:3:295:295:0:1",
            "3:1:1:1:6:450:450:2:1:1:4:460:460:0:1",
            "3:1:1:1:6:500:500:2:1:1:1:510:510:0:1",
        ]
    );
    assert_eq!(s.communications, 3);
}

#[test]
fn a_small_reorder_window_splits_states_but_keeps_totals() {
    let dir = tempfile::tempdir().unwrap();
    let b = Busy {
        threads: 12,
        idle: 2,
        cpus: 3,
        methods: 40,
        records: 60_000,
        seed: 7,
        start_samples: false,
    };
    let trace = dir.path().join("busy.trace");
    b.write(&trace).unwrap();
    let whole = export(&trace, &dir.path().join("whole"), &opts()).unwrap();
    let split = export(
        &trace,
        &dir.path().join("split"),
        &opts().with_reorder_limit(500),
    )
    .unwrap();
    for s in [&whole, &split] {
        check_paraver(&s.prv);
    }
    assert_eq!(whole.state_pieces, 0);
    assert!(
        split.state_pieces > 0 && split.states == whole.states + split.state_pieces,
        "{split:?}"
    );
    assert_eq!(split.events, whole.events);
    let (a, b) = (Prv::load(&whole), Prv::load(&split));
    assert_eq!(a.states, b.states);
    states_agree_with_the_report(&trace, &a);
}

#[test]
fn a_procfs_trace_exports() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = TraceBuilder::new(Source::Procfs, 2);
    b.process(7, "app", sonda_trace::Runtime::Native)
        .thread(7, 8, "app")
        .thread(7, 9, "helper");
    let sample = |tid, cpu, state: u8, run, wait| sonda_trace::Event::ProcSample {
        tid: sonda_trace::Tid(tid),
        cpu: sonda_trace::Cpu(cpu),
        state,
        run_ns: run,
        wait_ns: wait,
    };
    b.at(0, sample(8, 0, b'R', 0, 0))
        .at(0, sample(9, 1, b'S', 0, 0));
    b.at(10_000, sample(8, 1, b'S', 6_000, 1_000))
        .at(10_000, sample(9, 1, b'D', 2_000, 0));
    b.at(20_000, sample(8, 1, b'R', 7_000, 4_000))
        .at(20_000, sample(9, 0, b'Z', 2_000, 0));
    let (trace, s) = exported(&b, dir.path(), "procfs", &opts());
    let prv = Prv::load(&s);
    states_agree_with_the_report(&trace, &prv);
    assert_eq!(prv.state(8, state::RUNNING), 7_000);
    assert_eq!(prv.state(8, state::WAITING_CPU), 4_000);
    assert_eq!(prv.state(9, state::NOT_CREATED), 0);
}

#[test]
fn a_cut_trace_exports_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let b = showcase();
    let trace = dir.path().join("cut.trace");
    let offset = b.write_cut(&trace, 40).unwrap();
    let s = export(&trace, &dir.path().join("cut"), &opts()).unwrap();
    check_paraver(&s.prv);
    assert!(
        matches!(s.damage, Some(ReadError::Truncated { offset: o }) if o == offset),
        "{:?}",
        s.damage
    );
    assert!(s.damage.as_ref().unwrap().to_string().contains("cut short"));
    assert_eq!(s.end_ns, b.records()[39].time.0 - sonda_testdata::START.0);
    assert_eq!(s.trace_records, 40);
    states_agree_with_the_report(&trace, &Prv::load(&s));
}

/// Writes the showcase trace to `trace` with the payload of one of its events blocks
/// damaged (`nth`, counted from 1; `None`: the last one). The metadata scan seeks over
/// it and sees the trace's true end; the records skip it.
fn write_damaged_showcase(trace: &Path, nth: Option<usize>) {
    showcase().write(trace).unwrap();
    let mut bytes = std::fs::read(trace).unwrap();
    let mut events_blocks = Vec::new();
    let mut at = 16;
    while at + 40 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if bytes[at + 4] == 2 {
            events_blocks.push((at, len));
        }
        at += 40 + len;
    }
    let (at, len) = match nth {
        Some(n) => events_blocks[n - 1],
        None => *events_blocks.last().unwrap(),
    };
    bytes[at + 40 + len / 2] ^= 0xff;
    std::fs::write(trace, &bytes).unwrap();
}

#[test]
fn a_damaged_block_is_skipped_and_the_rest_exported() {
    let dir = tempfile::tempdir().unwrap();
    let whole = export_showcase(dir.path());
    let trace = dir.path().join("bad.trace");
    write_damaged_showcase(&trace, Some(3));
    let s = export(&trace, &dir.path().join("bad"), &opts()).unwrap();
    check_paraver(&s.prv);
    assert!(
        s.damage.as_ref().unwrap().to_string().contains("damaged"),
        "{:?}",
        s.damage
    );
    // One stretch skipped, its records counted; everything after it exported, up to
    // the trace's true end.
    assert_eq!(s.unread.regions.len(), 1, "{:?}", s.unread);
    let (lost, known) = s.unread.records();
    assert!(known && lost > 0, "{:?}", s.unread);
    assert_eq!(s.trace_records + lost, whole.trace_records);
    assert_eq!(s.end_ns, whole.end_ns);
    states_agree_with_the_report(&trace, &Prv::load(&s));
}

#[test]
fn a_damaged_last_block_ends_the_export_where_its_records_stop() {
    let dir = tempfile::tempdir().unwrap();
    let whole = export_showcase(dir.path());
    let trace = dir.path().join("bad.trace");
    write_damaged_showcase(&trace, None);
    let s = export(&trace, &dir.path().join("bad"), &opts()).unwrap();
    check_paraver(&s.prv);
    assert!(s.damage.is_some());
    assert!(s.end_ns < whole.end_ns, "{} {}", s.end_ns, whole.end_ns);
    // The header was rewritten in place with the end where the records stop.
    let prv = Prv::load(&s);
    let written: u64 = prv
        .header
        .split("):")
        .nth(1)
        .and_then(|h| h.split("_ns").next())
        .and_then(|n| n.trim_start_matches('0').parse().ok())
        .unwrap_or_else(|| panic!("{}", prv.header));
    assert_eq!(written, s.end_ns, "{}", prv.header);
    states_agree_with_the_report(&trace, &prv);
}

/// The showcase trace, undamaged, exported under `dir/whole`.
fn export_showcase(dir: &Path) -> Exported {
    let trace = dir.join("whole.trace");
    showcase().write(&trace).unwrap();
    export(&trace, &dir.join("whole"), &opts()).unwrap()
}

#[test]
fn bad_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.trace");
    TraceBuilder::new(Source::Tracepoints, 2)
        .write(&empty)
        .unwrap();
    let err = export(&empty, &dir.path().join("e"), &opts()).unwrap_err();
    assert!(matches!(err, ExportError::Empty { damage: None, .. }));
    assert!(err.to_string().contains("no threads"), "{err}");
    assert!(!dir.path().join("e.prv").exists());

    // Threads but not one record: a recording killed at once.
    let mut b = TraceBuilder::new(Source::Tracepoints, 2);
    b.process(1, "p", sonda_trace::Runtime::Native)
        .thread(1, 1, "p");
    let silent = dir.path().join("silent.trace");
    b.write(&silent).unwrap();
    let err = export(&silent, &dir.path().join("s"), &opts()).unwrap_err();
    assert!(matches!(err, ExportError::Empty { .. }), "{err}");

    let bogus = dir.path().join("bogus.trace");
    std::fs::write(&bogus, b"hello").unwrap();
    let err = export(&bogus, &dir.path().join("b"), &opts())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bogus.trace") && err.contains("not a sonda trace"),
        "{err}"
    );

    let trace = dir.path().join("s.trace");
    showcase().write(&trace).unwrap();
    let err = export(&trace, Path::new("/nonexistent-dir/x"), &opts())
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent-dir/x.prv"), "{err}");
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn a_trace_of_one_instant_still_covers_every_thread() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = TraceBuilder::new(Source::Tracepoints, 1);
    b.process(1, "p", sonda_trace::Runtime::Native)
        .thread(1, 1, "p")
        .thread(1, 2, "q");
    b.at(
        0,
        sonda_trace::Event::VmInit {
            pid: sonda_trace::Pid(1),
        },
    );
    let (_, s) = exported(&b, dir.path(), "instant", &opts());
    assert_eq!(s.end_ns, 1);
    assert_eq!(s.states, 2);
}

#[test]
fn a_dotted_stem_keeps_its_dots() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("s.trace");
    showcase().write(&trace).unwrap();
    let s = export(&trace, &dir.path().join("app.v1"), &opts()).unwrap();
    assert_eq!(s.prv, dir.path().join("app.v1.prv"));
    assert!(dir.path().join("app.v1.pcf").exists() && dir.path().join("app.v1.row").exists());
}

/// An output kept in memory, shared with the test once the exporter dropped it.
#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Cursor<Vec<u8>>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for Shared {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.0.borrow_mut().seek(pos)
    }
}

/// Every output in memory, by extension.
#[derive(Default)]
struct Memory(BTreeMap<String, Shared>);

impl Outputs for Memory {
    type Writer = Shared;

    fn create(&mut self, output: Output) -> io::Result<Shared> {
        let shared = Shared::default();
        assert!(
            self.0.insert(output.extension(), shared.clone()).is_none(),
            "{output} created twice"
        );
        Ok(shared)
    }
}

#[test]
fn outputs_go_to_the_writers_the_caller_creates() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.trace");
    // Its last block damaged, so that the .prv header is rewritten through the
    // writer's Seek.
    write_damaged_showcase(&trace, None);
    let on_disk = export(&trace, &dir.path().join("bad"), &opts()).unwrap();
    let mut memory = Memory::default();
    let s = sonda_paraver::export(Trace::open(&trace).unwrap(), &mut memory, &opts()).unwrap();
    assert!(s.damage.is_some());
    assert_eq!(s.end_ns, on_disk.end_ns);
    let mut expected: Vec<String> = ["prv", "pcf", "row"].map(String::from).to_vec();
    expected.extend(s.cfgs.iter().map(|c| c.extension()));
    expected.sort();
    assert_eq!(memory.0.keys().cloned().collect::<Vec<_>>(), expected);
    for (ext, shared) in &memory.0 {
        let file = std::fs::read(dir.path().join(format!("bad.{ext}"))).unwrap();
        assert_eq!(shared.0.borrow().get_ref(), &file, "the .{ext} differs");
    }
    assert_eq!(on_disk.cfgs.len(), s.cfgs.len());
}

#[test]
fn a_write_error_names_the_output() {
    struct Full;
    impl Outputs for Full {
        type Writer = Cursor<Vec<u8>>;
        fn create(&mut self, output: Output) -> io::Result<Cursor<Vec<u8>>> {
            match output {
                Output::Row => Err(io::Error::other("disk full")),
                _ => Ok(Cursor::new(Vec::new())),
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("s.trace");
    showcase().write(&trace).unwrap();
    let err = sonda_paraver::export(Trace::open(&trace).unwrap(), &mut Full, &opts()).unwrap_err();
    assert!(
        matches!(
            err,
            ExportError::Write {
                output: Output::Row,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "cannot write the .row: disk full");
}
