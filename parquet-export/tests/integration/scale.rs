//! Longer traces: the tables against the timeline's own report and `sonda services`'
//! figures, the call tree, and bounded buffers with many row groups and part files.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};
use sonda_model::analyze::{analyze, Options};
use sonda_parquet::{ExportOptions, Table};
use sonda_testdata::{showcase, Busy};
use sonda_timeline::{Frame, ThreadState, Trace};

use crate::files::{export, int, long, opt_long, text, Exported};

fn busy(path: &Path, records: u64) {
    Busy {
        threads: 30,
        idle: 2,
        cpus: 2,
        methods: 40,
        records,
        seed: 5,
        start_samples: true,
    }
    .write(path)
    .unwrap();
}

/// The tables against the timeline's report (computed apart from the join: the
/// timeline's own per-thread state totals and per-method call totals) and against
/// `sonda services`' figures (counts exactly, means to the nanosecond).
fn agrees_with_the_report_and_services(trace: &Path, e: &Exported) {
    let report = sonda_timeline::report::summarize(Trace::open(trace).unwrap()).unwrap();

    // States: per thread and state, the same nanoseconds.
    let mut states: BTreeMap<(i32, String), i64> = BTreeMap::new();
    for r in e.rows(Table::States) {
        let d = long(&r, "end_ns") - long(&r, "start_ns");
        assert!(d > 0, "{r:?}");
        *states
            .entry((
                int(&r, "tid").unwrap(),
                text(&r, "state").unwrap().to_string(),
            ))
            .or_default() += d;
    }
    let mut threads = 0;
    for p in &report.processes {
        for t in &p.threads {
            threads += 1;
            for s in ThreadState::ALL {
                let name = sonda_parquet::schema::state_name(s).to_string();
                let ours = states.get(&(t.tid.0 as i32, name)).copied().unwrap_or(0);
                assert_eq!(
                    ours as u64,
                    t.stats.states.get(s),
                    "thread {} {s:?}",
                    t.tid.0
                );
            }
        }
    }
    assert!(threads > 0);

    // Calls: per method, the report's totals of every call (each kind of exit).
    let calls = e.rows(Table::Calls);
    let mut by_method: BTreeMap<i32, [i64; 5]> = BTreeMap::new();
    for c in &calls {
        let Some(id) = int(c, "method_id") else {
            continue;
        };
        let t = by_method.entry(id).or_default();
        t[0] += 1;
        t[1] += long(c, "wall_ns");
        t[2] += long(c, "excl_wall_ns");
        t[3] += long(c, "cpu_ns");
        t[4] += long(c, "excl_cpu_ns");
        // The five states add up to the wall time, inclusive and exclusive.
        for p in ["", "excl_"] {
            let sum: i64 = ["cpu", "runnable", "sleeping", "uninterruptible", "other"]
                .iter()
                .map(|s| long(c, &format!("{p}{s}_ns")))
                .sum();
            assert_eq!(sum, long(c, &format!("{p}wall_ns")), "{c:?}");
        }
    }
    let mut methods = 0;
    for m in &report.methods {
        let Frame::Method(id) = m.frame else { continue };
        methods += 1;
        let ours = by_method.get(&(id as i32)).copied().unwrap_or_default();
        assert_eq!(
            ours.map(|v| v as u64),
            [
                m.calls,
                m.inclusive_ns,
                m.exclusive_ns,
                m.cpu_ns,
                m.exclusive_cpu_ns
            ],
            "{}",
            m.label
        );
    }
    assert_eq!(methods, by_method.len());

    // The call tree: a parent began before and ended after its child, one level up,
    // on the same thread; ids are unique.
    let by_id: BTreeMap<i64, &crate::files::Row> =
        calls.iter().map(|c| (long(c, "call_id"), c)).collect();
    assert_eq!(by_id.len(), calls.len());
    for c in &calls {
        match opt_long(c, "parent_id") {
            None => assert_eq!(int(c, "depth"), Some(1), "{c:?}"),
            Some(p) => {
                let p = by_id[&p];
                assert_eq!(int(p, "depth").unwrap() + 1, int(c, "depth").unwrap());
                assert_eq!(int(p, "tid"), int(c, "tid"));
                assert!(long(p, "start_ns") <= long(c, "start_ns"));
                assert!(long(c, "end_ns") <= long(p, "end_ns"));
            }
        }
    }

    // `sonda services`: calls that did not end unfinished, per method.
    let services = analyze(Trace::open(trace).unwrap(), &Options::default()).unwrap();
    for m in &services.services.whole.methods {
        let ours: Vec<_> = calls
            .iter()
            .filter(|c| text(c, "method") == Some(m.method.as_str()))
            .filter(|c| text(c, "exit") != Some("unfinished"))
            .collect();
        assert_eq!(ours.len() as u64, m.calls, "{}", m.method);
        if ours.is_empty() {
            // Only arrivals (calls still open at the end): no means.
            assert_eq!(m.inclusive.wall.summary.mean, 0.0);
            continue;
        }
        let mean = |f: &dyn Fn(&crate::files::Row) -> i64| {
            ours.iter().map(|c| f(c) as f64).sum::<f64>() / ours.len() as f64
        };
        let inc = &m.inclusive;
        for (col, want) in [
            ("wall", inc.wall.summary.mean),
            ("cpu", inc.cpu.summary.mean),
            ("runnable", inc.runnable.summary.mean),
        ] {
            let got = mean(&|c| long(c, &format!("{col}_ns")));
            assert!(
                (got - want).abs() < 1.0,
                "{} {col}: {got} vs {want}",
                m.method
            );
        }
        let blocked = mean(&|c| long(c, "sleeping_ns") + long(c, "uninterruptible_ns"));
        assert!((blocked - inc.blocked.summary.mean).abs() < 1.0);
    }
    assert!(!services.services.whole.methods.is_empty());
}

#[test]
fn the_showcase_agrees_with_the_report_and_services() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("showcase.trace");
    showcase().write(&trace).unwrap();
    let e = export(&trace, &dir.path().join("ds"), &ExportOptions::default()).unwrap();
    agrees_with_the_report_and_services(&trace, &e);
    let calls = e.rows(Table::Calls);
    let exits: Vec<&str> = calls.iter().map(|c| text(c, "exit").unwrap()).collect();
    for kind in ["normal", "exception", "repaired", "unfinished"] {
        assert!(exits.contains(&kind), "{kind} in {exits:?}");
    }
    // Overloads keep their descriptors apart; the native process's function is named.
    let methods: Vec<String> = e
        .rows(Table::Methods)
        .iter()
        .map(|r| text(r, "method").unwrap().to_string())
        .collect();
    assert!(methods.contains(&"demo.Service::parse(Ljava/lang/String;)I".to_string()));
    assert!(methods.contains(&"demo.Service::parse([B)I".to_string()));
    assert!(!e.rows(Table::Gcs).is_empty() && !e.rows(Table::MonitorWaits).is_empty());
    assert!(!e.rows(Table::Wakeups).is_empty());
    let threads = e.rows(Table::Threads);
    assert_eq!(threads.len(), 7);
}

#[test]
fn a_long_trace_is_written_in_row_groups_and_parts_with_bounded_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("long.trace");
    busy(&trace, 300_000);
    // Row groups larger than the total buffer: the bound writes them.
    let buffer = 128 << 10;
    let opts = ExportOptions::default()
        .with_row_group_bytes(1 << 20)
        .with_buffer_bytes(buffer)
        .with_row_groups_per_file(4);
    let e = export(&trace, &dir.path().join("ds"), &opts).unwrap();
    let s = &e.summary;
    // Checked after each record: a record's rows (a few intervals, a call) at most
    // beyond the bound.
    assert!(s.peak_buffered <= buffer + 4096, "{}", s.peak_buffered);
    assert!(s.peak_buffered > buffer / 2, "{}", s.peak_buffered);
    for table in [Table::Calls, Table::States] {
        let counts = s.counts(table);
        assert!(counts.files > 2, "{}: {counts:?}", table.name());
        let files = e.files(table);
        assert_eq!(files.len() as u32, counts.files);
        let mut rows = 0;
        let mut groups = 0;
        for f in &files {
            let reader = SerializedFileReader::new(File::open(f).unwrap()).unwrap();
            assert!(reader.num_row_groups() <= 4, "{}", f.display());
            groups += reader.num_row_groups() as u64;
            rows += reader.metadata().file_metadata().num_rows() as u64;
        }
        assert_eq!((rows, groups), (counts.rows, counts.row_groups));
        assert!(counts.row_groups >= 8);
    }
    agrees_with_the_report_and_services(&trace, &e);
    // The same trace with the default sizes holds the same rows.
    let whole = export(&trace, &dir.path().join("ds2"), &ExportOptions::default()).unwrap();
    for table in Table::ALL {
        assert_eq!(
            whole.summary.counts(table).rows,
            s.counts(table).rows,
            "{}",
            table.name()
        );
    }
    assert_eq!(whole.rows(Table::Calls), e.rows(Table::Calls));
}
