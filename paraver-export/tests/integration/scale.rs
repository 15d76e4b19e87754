//! Export options and the cross-checks of the figures: a time window, thread filters,
//! several processes, the report's totals against the `.prv`'s (states per thread,
//! calls and times per method, read back from the records independently), bounded
//! memory on a long trace, and the `.cfg` views computed by Paraver's own analyser
//! `paramedir` when it is installed (`$PARAMEDIR` or on the `PATH`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use sonda_paraver::conventions::{event, state_value};
use sonda_paraver::{ExportError, ExportOptions, ThreadPattern, TimeWindow};
use sonda_testdata::{showcase, Busy, TraceBuilder};
use sonda_tests::check_paraver;
use sonda_timeline::{Frame, ThreadState};
use sonda_trace::{Event, Pid, Runtime, Source, Tid};

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

/// The records of a `.prv` read back: per row, state totals, states, and events.
#[derive(Default)]
struct Prv {
    end: u64,
    names: Vec<String>,
    states: Vec<(usize, u64, u64, u32)>,
    events: Vec<(usize, u64, u32, i64, u32)>,
    comms: usize,
    /// Applications: threads each.
    apps: Vec<usize>,
}

impl Prv {
    fn load(s: &Exported) -> Prv {
        let text = std::fs::read_to_string(&s.prv).unwrap();
        let mut lines = text.lines();
        let header = lines.next().unwrap();
        let after = header.split_once("):").unwrap().1;
        let mut p = Prv {
            end: after.split('_').next().unwrap().parse().unwrap(),
            ..Prv::default()
        };
        p.apps = after
            .splitn(4, ':')
            .nth(3)
            .unwrap()
            .split(')')
            .filter_map(|g| g.split_once('('))
            .map(|(_, inside)| inside.split(':').next().unwrap().parse().unwrap())
            .collect();
        let row = std::fs::read_to_string(&s.row).unwrap();
        p.names = row
            .lines()
            .skip_while(|l| !l.starts_with("LEVEL THREAD"))
            .skip(1)
            .map(str::to_string)
            .collect();
        let apps = p.apps.clone();
        let row_of =
            |appl: usize, thread: usize| apps[..appl - 1].iter().sum::<usize>() + thread - 1;
        for l in lines {
            let f: Vec<i64> = l.split(':').map(|x| x.parse().unwrap()).collect();
            let row = row_of(f[2] as usize, f[4] as usize);
            match f[0] {
                1 => p.states.push((row, f[5] as u64, f[6] as u64, f[7] as u32)),
                2 => p
                    .events
                    .push((row, f[5] as u64, f[6] as u32, f[7], f[1] as u32)),
                3 => p.comms += 1,
                _ => panic!("unknown record {l}"),
            }
        }
        p
    }

    fn row(&self, tid: u32) -> Option<usize> {
        self.names
            .iter()
            .position(|n| n.ends_with(&format!("({tid})")))
    }

    fn state_total(&self, row: usize, state: u32) -> u64 {
        self.states
            .iter()
            .filter(|s| s.0 == row && s.3 == state)
            .map(|s| s.2 - s.1)
            .sum()
    }

    /// Per user-function value: (calls, inclusive ns, exclusive ns), from the enter and
    /// exit events of each thread, replayed on a stack.
    fn methods(&self) -> BTreeMap<i64, (u64, u64, u64)> {
        let mut out: BTreeMap<i64, (u64, u64, u64)> = BTreeMap::new();
        // Per row: open (value, begin, time in children).
        let mut stacks: BTreeMap<usize, Vec<(i64, u64, u64)>> = BTreeMap::new();
        for &(row, time, ty, value, _) in &self.events {
            if ty != event::USER_FUNCTION {
                continue;
            }
            let stack = stacks.entry(row).or_default();
            if value != 0 {
                stack.push((value, time, 0));
                continue;
            }
            let (v, begin, children) = stack
                .pop()
                .expect("an exit has its enter (prvcheck checks nesting)");
            let inclusive = time - begin;
            let m = out.entry(v).or_default();
            m.0 += 1;
            m.1 += inclusive;
            m.2 += inclusive - children;
            if let Some(parent) = stack.last_mut() {
                parent.2 += inclusive;
            }
        }
        assert!(
            stacks.values().all(Vec::is_empty),
            "every call is closed by the end"
        );
        out
    }
}

/// The report's figures must be the `.prv`'s: time per state per thread, and per method
/// calls, inclusive and exclusive time.
fn report_agrees_with_prv(trace: &Path, prv: &Prv) {
    let report = summarize(trace).unwrap();
    let mut threads = 0;
    for t in report.processes.iter().flat_map(|p| &p.threads) {
        let row = prv
            .row(t.tid.0)
            .unwrap_or_else(|| panic!("thread {} not in the .row", t.tid));
        for s in ThreadState::ALL {
            assert_eq!(
                prv.state_total(row, state_value(s)),
                t.stats.states.get(s),
                "thread {} {s:?}",
                t.tid
            );
        }
        threads += 1;
    }
    assert_eq!(threads, prv.names.len());
    let from_prv = prv.methods();
    let mut methods = 0;
    for m in &report.methods {
        let Frame::Method(id) = m.frame else { continue };
        let (calls, inclusive, exclusive) = from_prv[&i64::from(id)];
        assert_eq!(
            (calls, inclusive, exclusive),
            (m.calls, m.inclusive_ns, m.exclusive_ns),
            "{}",
            m.label
        );
        methods += 1;
    }
    let native = report
        .methods
        .iter()
        .filter(|m| matches!(m.frame, Frame::Func(_)))
        .count();
    assert_eq!(
        methods + native,
        from_prv.len(),
        "every method of the .prv is in the report"
    );
    assert!(methods > 0);
}

#[test]
fn busy_trace_totals_agree_with_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("busy.trace");
    Busy {
        threads: 16,
        idle: 3,
        cpus: 3,
        methods: 60,
        records: 80_000,
        seed: 11,
        start_samples: true,
    }
    .write(&trace)
    .unwrap();
    let s = export(&trace, &dir.path().join("busy"), &opts()).unwrap();
    check_paraver(&s.prv);
    assert!(s.communications > 0, "wakeups are on by default");
    let prv = Prv::load(&s);
    report_agrees_with_prv(&trace, &prv);
    // The CPU view: per thread, the time between its start and stop events equals its
    // running time.
    let mut running: BTreeMap<usize, (u64, Option<u64>)> = BTreeMap::new();
    for &(row, time, ty, value, _) in &prv.events {
        if ty == event::CPU_THREAD {
            let r = running.entry(row).or_default();
            match (value, r.1) {
                (0, Some(begin)) => {
                    r.0 += time - begin;
                    r.1 = None;
                }
                (0, None) => panic!("a stop without a start"),
                (v, None) => {
                    assert_eq!(v as usize, row + 1);
                    r.1 = Some(time);
                }
                (_, Some(_)) => panic!("a start while running"),
            }
        }
    }
    for (row, (ns, open)) in running {
        let ns = ns + open.map_or(0, |b| prv.end - b);
        assert_eq!(ns, prv.state_total(row, 1), "row {row}");
    }
}

#[test]
fn several_processes_are_several_applications() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = TraceBuilder::new(Source::Tracepoints, 2);
    b.process(10, "ServerA", Runtime::Java)
        .process(20, "ServerB", Runtime::Java)
        .process(30, "dd", Runtime::Native)
        .thread(10, 11, "java")
        .java_name(10, 11, "main")
        .thread(20, 21, "java")
        .java_name(20, 21, "main")
        .thread(30, 31, "dd")
        .method(1, "a.A", "run", "()V")
        .method(2, "b.B", "run", "()V");
    let sw = |cpu, prev, next| Event::Switch {
        cpu: sonda_trace::Cpu(cpu),
        prev: Tid(prev),
        prev_state: 0x100,
        next: Tid(next),
        charge: None,
    };
    b.at(0, sw(0, 0, 11))
        .at(0, sw(1, 0, 21))
        .at(
            10,
            Event::Enter {
                tid: Tid(11),
                method: 1,
            },
        )
        .at(
            12,
            Event::Enter {
                tid: Tid(21),
                method: 2,
            },
        )
        .at(40, sw(1, 21, 31))
        .at(
            50,
            Event::Leave {
                tid: Tid(11),
                method: 1,
                exception: false,
            },
        )
        .at(60, sw(1, 31, 21))
        .at(
            70,
            Event::Leave {
                tid: Tid(21),
                method: 2,
                exception: false,
            },
        )
        .at(100, Event::VmDeath { pid: Pid(10) });
    let trace = dir.path().join("three.trace");
    b.write(&trace).unwrap();
    let s = export(&trace, &dir.path().join("three"), &opts()).unwrap();
    check_paraver(&s.prv);
    assert_eq!(s.applications, 3);
    let prv = Prv::load(&s);
    assert_eq!(prv.apps, vec![1, 1, 1]);
    let row = std::fs::read_to_string(&s.row).unwrap();
    assert!(
        row.contains("LEVEL APPL SIZE 3\nServerA (pid 10)\nServerB (pid 20)\ndd (pid 30)\n"),
        "{row}"
    );
    report_agrees_with_prv(&trace, &prv);
}

#[test]
fn a_window_clips_states_and_opens_calls_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("show.trace");
    showcase().write(&trace).unwrap();
    let whole = export(&trace, &dir.path().join("whole"), &opts()).unwrap();
    // 180..=600: main is inside method 1 (entered at 160) and method 2 (170); worker-2
    // is born inside the window; the GC (300-350) is inside.
    let window = TimeWindow {
        from: Some(180),
        to: Some(600),
    };
    let s = export(&trace, &dir.path().join("win"), &opts().with_window(window)).unwrap();
    check_paraver(&s.prv);
    assert_eq!((s.from_ns, s.end_ns), (180, 420));
    let (w, p) = (Prv::load(&whole), Prv::load(&s));
    // Every state total is the whole export's, clipped to the window.
    for row in 0..w.names.len() {
        for st in [0, 1, 2, 9, 12, 15, 40] {
            let clipped: u64 = w
                .states
                .iter()
                .filter(|x| x.0 == row && x.3 == st)
                .map(|x| x.2.min(600).saturating_sub(x.1.max(180)))
                .sum();
            assert_eq!(p.state_total(row, st), clipped, "row {row} state {st}");
        }
    }
    // main's open calls begin at 0, outermost first, and close inside the window.
    let main = p.row(101).unwrap();
    let calls: Vec<_> = p
        .events
        .iter()
        .filter(|e| e.0 == main && e.2 == event::USER_FUNCTION)
        .map(|e| (e.1, e.3))
        .collect();
    assert_eq!(calls[..2], [(0, 1), (0, 2)]);
    assert_eq!(
        calls.iter().filter(|c| c.1 == 0).count(),
        calls.iter().filter(|c| c.1 != 0).count()
    );
    assert!(p
        .events
        .iter()
        .any(|e| e.2 == event::GC && e.1 == 120 && e.3 == 1));
    // main runs at 180 (on CPU 1 since 150): its CPU view entry opens at 0.
    assert!(p.events.iter().any(|e| e.0 == main
        && e.2 == event::CPU_THREAD
        && e.1 == 0
        && e.3 == main as i64 + 1
        && e.4 == 1));
    // A call still open at the window's end is closed there.
    let lossy = p.row(106).unwrap();
    assert!(p
        .events
        .iter()
        .any(|e| e.0 == lossy && e.2 == event::USER_FUNCTION && e.3 == 0 && e.1 == 420));
}

#[test]
fn windows_outside_the_trace_and_empty_filters_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("show.trace");
    showcase().write(&trace).unwrap();
    let late = TimeWindow {
        from: Some(5_000),
        to: None,
    };
    let err = export(&trace, &dir.path().join("late"), &opts().with_window(late)).unwrap_err();
    assert!(matches!(err, ExportError::Window { .. }), "{err}");
    assert!(
        err.to_string().contains("after the trace's end (1.000 us)"),
        "{err}"
    );
    assert!(!dir.path().join("late.prv").exists());
    let empty = TimeWindow {
        from: Some(500),
        to: Some(400),
    };
    let err = export(&trace, &dir.path().join("e"), &opts().with_window(empty)).unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");

    let nobody = opts().with_threads(vec![ThreadPattern::parse("nobody-*")]);
    let err = export(&trace, &dir.path().join("n"), &nobody).unwrap_err();
    assert!(matches!(err, ExportError::NoThreads { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("no thread matches --threads nobody-*"),
        "{err}"
    );
    assert_eq!(err.to_string().lines().count(), 1);
}

#[test]
fn thread_filters_and_jvm_internal_threads() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("show.trace");
    showcase().write(&trace).unwrap();
    let picked = opts().with_threads(vec![
        ThreadPattern::parse("worker-*"),
        ThreadPattern::parse("201"),
    ]);
    let s = export(&trace, &dir.path().join("picked"), &picked).unwrap();
    check_paraver(&s.prv);
    let p = Prv::load(&s);
    assert_eq!(p.names, ["worker-1 (102)", "worker-2 (104)", "dd (201)"]);
    assert_eq!(s.applications, 2);
    // Wakeups only between exported threads: 106 woke 104 and 101, 201 woke 103.
    assert_eq!(s.communications, 0);

    let java_only = opts().with_jvm_internal(false);
    let s = export(&trace, &dir.path().join("app"), &java_only).unwrap();
    check_paraver(&s.prv);
    let p = Prv::load(&s);
    // The VM thread (no Java name) goes; "Signal Dispatcher" is a Java thread but the
    // showcase does not mark it daemon, so it stays; dd is native and stays.
    assert_eq!(
        p.names,
        [
            "main (101)",
            "worker-1 (102)",
            "worker-2 (104)",
            "Signal Dispatcher (105)",
            "lossy (106)",
            "dd (201)"
        ]
    );
    // Its GC events went with it.
    assert!(!p.events.iter().any(|e| e.2 == event::GC));
}

#[test]
fn memory_stays_bounded_on_a_long_trace() {
    // A trace many times the reorder limit: the buffer never holds more than the limit
    // plus a flush interval's records (pieces show the cuts), and totals are kept.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("long.trace");
    Busy {
        threads: 30,
        idle: 2,
        cpus: 2,
        methods: 40,
        records: 300_000,
        seed: 5,
        start_samples: true,
    }
    .write(&trace)
    .unwrap();
    let s = export(
        &trace,
        &dir.path().join("long"),
        &opts().with_reorder_limit(2_000),
    )
    .unwrap();
    check_paraver(&s.prv);
    assert!(s.state_pieces > 0);
    report_agrees_with_prv(&trace, &Prv::load(&s));
}

/// `paramedir` (Paraver's command-line analyser), if installed.
fn paramedir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PARAMEDIR") {
        return Some(PathBuf::from(p));
    }
    let found = Command::new("sh")
        .arg("-c")
        .arg("command -v paramedir")
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// A paramedir histogram's rows: thread label -> column label -> value.
fn histogram(path: &Path) -> BTreeMap<String, BTreeMap<String, f64>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let columns: Vec<String> = lines
        .next()
        .unwrap()
        .split('\t')
        .skip(1)
        .map(str::to_string)
        .collect();
    let mut rows = BTreeMap::new();
    for l in lines {
        let mut f = l.split('\t');
        let name = f.next().unwrap().to_string();
        if [
            "Total", "Average", "Maximum", "Minimum", "StDev", "Avg/Max", "",
        ]
        .contains(&name.as_str())
        {
            continue;
        }
        let values = columns
            .iter()
            .cloned()
            .zip(f.map(|v| v.parse::<f64>().unwrap_or(0.0)))
            .collect();
        rows.insert(name, values);
    }
    rows
}

#[test]
fn paraver_computes_the_views() {
    // Paraver is not installed by scripts/test.sh: skipped without it, CI included.
    let found = paramedir();
    if !sonda_tests::optional("paramedir (Paraver's analyser)", found.is_some()) {
        return;
    }
    let paramedir = found.expect("found, as optional() said");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("busy.trace");
    Busy {
        threads: 8,
        idle: 2,
        cpus: 2,
        methods: 12,
        records: 30_000,
        seed: 3,
        start_samples: true,
    }
    .write(&trace)
    .unwrap();
    let s = export(&trace, &dir.path().join("busy"), &opts()).unwrap();
    let names: Vec<String> = s
        .cfgs
        .iter()
        .map(|c| c.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for view in [
        "states",
        "state_profile",
        "cpus",
        "methods",
        "method_time",
        "method_calls",
        "gc",
        "monitors",
    ] {
        assert!(
            names.contains(&format!("busy.{view}.cfg")),
            "{view} not in {names:?}"
        );
    }
    for cfg in &s.cfgs {
        let out_file = dir.path().join(format!(
            "{}.out",
            cfg.file_name().unwrap().to_string_lossy()
        ));
        let out = Command::new(&paramedir)
            .arg(&s.prv)
            .arg(cfg)
            .arg(&out_file)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "paramedir on {}: {text}",
            cfg.display()
        );
        for line in text.lines() {
            assert!(
                line.ends_with("file written."),
                "paramedir on {}: {line}",
                cfg.display()
            );
        }
    }
    let report = summarize(&trace).unwrap();
    let threads: Vec<_> = report.processes.iter().flat_map(|p| &p.threads).collect();
    let profile = histogram(&dir.path().join("busy.state_profile.cfg.out"));
    for t in &threads {
        let row = &profile[&format!("{} ({})", t.name, t.tid)];
        for (label, s) in [
            ("Running", ThreadState::Running),
            ("Waiting for a CPU", ThreadState::Runnable),
        ] {
            assert_eq!(
                row.get(label).copied().unwrap_or(0.0) as u64,
                t.stats.states.get(s),
                "{} {label}",
                t.name
            );
        }
    }
    let labels =
        sonda_timeline::names::method_labels(&sonda_trace::TraceMeta::scan(&trace).unwrap());
    let time = histogram(&dir.path().join("busy.method_time.cfg.out"));
    let calls = histogram(&dir.path().join("busy.method_calls.cfg.out"));
    for m in &report.methods {
        let Frame::Method(id) = m.frame else { continue };
        let label = &labels[&id];
        let sum = |h: &BTreeMap<String, BTreeMap<String, f64>>| -> u64 {
            h.values()
                .map(|r| r.get(label).copied().unwrap_or(0.0) as u64)
                .sum()
        };
        assert_eq!(sum(&time), m.exclusive_ns, "{label} exclusive time");
        assert_eq!(sum(&calls), m.calls, "{label} calls");
    }
}
