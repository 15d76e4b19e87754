//! A hand-built trace whose every row is known, the files' schema, and the errors.

use std::fs::File;
use std::io::{self, Write};

use parquet::basic::{Encoding, Repetition, Type as PhysicalType};
use parquet::file::reader::{FileReader, SerializedFileReader};
use sonda_parquet::schema::Kind;
use sonda_parquet::{ExportError, ExportOptions, OutputFile, Outputs, Table, SCHEMA_VERSION};
use sonda_testdata::{TraceBuilder, START};
use sonda_timeline::Trace;
use sonda_trace::{Cpu, Event, Meta, Pid, Runtime, Source, Tid};

use crate::files::{boolean, export, int, long, opt_long, text, Row};

fn switch(prev: u32, prev_state: u64, next: u32) -> Event {
    Event::Switch {
        cpu: Cpu(0),
        prev: Tid(prev),
        prev_state,
        next: Tid(next),
        charge: None,
    }
}

/// Thread 10 ("worker") runs `run`, which calls `step` (left by an exception); in
/// `run` it is preempted, sleeps, waits for a monitor, does I/O; thread 11 takes the
/// CPU in between; the VM thread 12 collects garbage meanwhile. The same timeline as
/// sonda-model's join test `nested_calls_split_by_state`, so the parts are known.
fn worker() -> TraceBuilder {
    let mut b = TraceBuilder::new(Source::Tracepoints, 2);
    b.process(1, "java", Runtime::Java)
        .thread(1, 10, "java")
        .thread(1, 11, "java")
        .thread(1, 12, "VM Thread")
        .java_name(1, 10, "worker")
        .method(1, "demo.A", "run", "()V")
        .method(2, "demo.A", "step", "()V")
        .meta(Meta::MonitorClass {
            id: 3,
            name: "demo.Lock".into(),
        })
        .counter("agent.dropped", 0);
    let enter = |method| Event::Enter {
        tid: Tid(10),
        method,
    };
    let leave = |method, exception| Event::Leave {
        tid: Tid(10),
        method,
        exception,
    };
    let wakeup = Event::Wakeup {
        target: Cpu(0),
        wakee: Tid(10),
        new_task: false,
        waking: None,
    };
    b.at(100, enter(1))
        .at(150, enter(2))
        .at(200, switch(10, 0x100, 11))
        .at(260, switch(11, 0x1, 10))
        .at(300, leave(2, true))
        .at(
            310,
            Event::MonitorContended {
                tid: Tid(10),
                class: 3,
            },
        )
        .at(320, switch(10, 0x1, 0))
        .at(
            330,
            Event::GcStart {
                pid: Pid(1),
                tid: Tid(12),
            },
        )
        .at(
            380,
            Event::GcEnd {
                pid: Pid(1),
                tid: Tid(12),
            },
        )
        .at(
            400,
            Event::Waking {
                cpu: Cpu(1),
                waker: Tid(999),
                wakee: Tid(10),
            },
        )
        .at(400, wakeup.clone())
        .at(410, switch(0, 0, 10))
        .at(
            415,
            Event::MonitorEntered {
                tid: Tid(10),
                class: 3,
            },
        )
        .at(450, switch(10, 0x2, 0))
        .at(500, wakeup)
        .at(500, switch(0, 0, 10))
        .at(520, leave(1, false))
        .at(600, switch(10, 0x1, 0));
    b
}

fn parts(row: &Row, prefix: &str) -> [i64; 8] {
    [
        "wall",
        "cpu",
        "runnable",
        "sleeping",
        "uninterruptible",
        "other",
        "monitor",
        "gc",
    ]
    .map(|p| long(row, &format!("{prefix}{p}_ns")))
}

#[test]
fn every_row_of_a_hand_built_trace_is_as_known() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.trace");
    worker().write(&path).unwrap();
    let e = export(&path, &dir.path().join("ds"), &ExportOptions::default()).unwrap();
    assert!(e.summary.complete && e.summary.damage.is_none());
    assert_eq!(e.summary.join.cpu_disagreements, 0);

    // Calls, in exit order: step (inside run), then run.
    let calls = e.rows(Table::Calls);
    assert_eq!(calls.len(), 2);
    let (step, run) = (&calls[0], &calls[1]);
    assert_eq!(
        (long(step, "call_id"), opt_long(step, "parent_id")),
        (1, Some(0))
    );
    assert_eq!(
        (long(run, "call_id"), opt_long(run, "parent_id")),
        (0, None)
    );
    for (c, method, depth, exit, start, end) in [
        (step, "demo.A::step", 2, "exception", 150, 300),
        (run, "demo.A::run", 1, "normal", 100, 520),
    ] {
        assert_eq!(int(c, "pid"), Some(1));
        assert_eq!(int(c, "tid"), Some(10));
        assert_eq!(text(c, "thread"), Some("worker"));
        assert_eq!(text(c, "method"), Some(method));
        assert_eq!(text(c, "class"), Some("demo.A"));
        assert_eq!(opt_long(c, "address"), None);
        assert_eq!(int(c, "depth"), Some(depth));
        assert_eq!(text(c, "exit"), Some(exit));
        assert_eq!((long(c, "start_ns"), long(c, "end_ns")), (start, end));
    }
    assert_eq!(int(step, "method_id"), Some(2));
    //                     wall cpu run  S   D  other mon  gc
    assert_eq!(parts(step, ""), [150, 90, 60, 0, 0, 0, 0, 0]);
    assert_eq!(parts(step, "excl_"), parts(step, ""));
    assert_eq!(parts(run, ""), [420, 220, 70, 80, 50, 0, 105, 50]);
    assert_eq!(parts(run, "excl_"), [270, 130, 10, 80, 50, 0, 105, 50]);

    // Thread 10's states from its first kernel record on, and every thread's states
    // tile the trace from 0 to its end.
    let states = e.rows(Table::States);
    let of = |tid: i32| -> Vec<(String, Option<i32>, i64, i64)> {
        let mut v: Vec<_> = states
            .iter()
            .filter(|r| int(r, "tid") == Some(tid))
            .map(|r| {
                (
                    text(r, "state").unwrap().to_string(),
                    int(r, "cpu"),
                    long(r, "start_ns"),
                    long(r, "end_ns"),
                )
            })
            .collect();
        v.sort_by_key(|s| s.2);
        v
    };
    let t10 = of(10);
    let from_200: Vec<_> = t10.iter().filter(|s| s.2 >= 200).cloned().collect();
    let s = |state: &str, cpu, a, b| (state.to_string(), cpu, a, b);
    assert_eq!(
        from_200,
        [
            s("runnable", Some(0), 200, 260),
            s("running", Some(0), 260, 320),
            s("sleeping", Some(0), 320, 400),
            s("runnable", Some(0), 400, 410),
            s("running", Some(0), 410, 450),
            s("uninterruptible", Some(0), 450, 500),
            s("running", Some(0), 500, 600),
        ]
    );
    assert_eq!(t10[0].0, "running");
    for tid in [10, 11, 12] {
        let v = of(tid);
        assert_eq!(v.first().map(|s| s.2), Some(0), "{tid}");
        assert!(v.windows(2).all(|w| w[0].3 == w[1].2), "{tid}: {v:?}");
        assert_eq!(v.last().map(|s| s.3), Some(600), "{tid}");
        for r in states.iter().filter(|r| int(r, "tid") == Some(tid)) {
            assert_eq!(int(r, "pid"), Some(1));
            let name = if tid == 10 {
                "worker"
            } else if tid == 12 {
                "VM Thread"
            } else {
                "java"
            };
            assert_eq!(text(r, "thread"), Some(name));
        }
    }

    let gcs = e.rows(Table::Gcs);
    assert_eq!(gcs.len(), 1);
    assert_eq!(
        (
            int(&gcs[0], "pid"),
            int(&gcs[0], "tid"),
            long(&gcs[0], "start_ns"),
            long(&gcs[0], "end_ns"),
            boolean(&gcs[0], "unfinished")
        ),
        (Some(1), Some(12), 330, 380, false)
    );
    let waits = e.rows(Table::MonitorWaits);
    assert_eq!(waits.len(), 1);
    assert_eq!(
        (
            int(&waits[0], "tid"),
            text(&waits[0], "thread"),
            text(&waits[0], "class"),
            long(&waits[0], "start_ns"),
            long(&waits[0], "end_ns"),
            boolean(&waits[0], "unfinished")
        ),
        (Some(10), Some("worker"), Some("demo.Lock"), 310, 415, false)
    );
    let wakes = e.rows(Table::Wakeups);
    assert_eq!(wakes.len(), 1);
    let w = &wakes[0];
    assert_eq!(
        (
            int(w, "waker_tid"),
            text(w, "waker"),
            int(w, "waker_cpu"),
            int(w, "tid"),
            text(w, "thread"),
            int(w, "cpu"),
            long(w, "sent_ns"),
            long(w, "received_ns")
        ),
        (
            Some(999),
            None,
            Some(1),
            Some(10),
            Some("worker"),
            Some(0),
            400,
            410
        )
    );

    let methods = e.rows(Table::Methods);
    let m: Vec<_> = methods
        .iter()
        .map(|r| {
            (
                int(r, "method_id"),
                text(r, "method"),
                text(r, "class"),
                text(r, "name"),
                text(r, "descriptor"),
                boolean(r, "native"),
            )
        })
        .collect();
    assert_eq!(
        m,
        [
            (
                Some(1),
                Some("demo.A::run"),
                Some("demo.A"),
                Some("run"),
                Some("()V"),
                false
            ),
            (
                Some(2),
                Some("demo.A::step"),
                Some("demo.A"),
                Some("step"),
                Some("()V"),
                false
            ),
        ]
    );
    let threads = e.rows(Table::Threads);
    let t: Vec<_> = threads
        .iter()
        .map(|r| {
            (
                int(r, "tid"),
                text(r, "thread"),
                text(r, "comm"),
                text(r, "java_name"),
                text(r, "process"),
                text(r, "runtime"),
            )
        })
        .collect();
    assert_eq!(
        t,
        [
            (
                Some(10),
                Some("worker"),
                Some("java"),
                Some("worker"),
                Some("java"),
                Some("java")
            ),
            (
                Some(11),
                Some("java"),
                Some("java"),
                None,
                Some("java"),
                Some("java")
            ),
            (
                Some(12),
                Some("VM Thread"),
                Some("VM Thread"),
                None,
                Some("java"),
                Some("java")
            ),
        ]
    );
    let counters = e.rows(Table::Counters);
    assert!(counters
        .iter()
        .any(|r| text(r, "name") == Some("agent.dropped") && long(r, "value") == 0));
    let traces = e.rows(Table::Traces);
    assert_eq!(traces.len(), 1);
    let tr = &traces[0];
    assert_eq!(text(tr, "path"), Some(path.to_str().unwrap()));
    assert_eq!(text(tr, "command"), Some("java Synthetic"));
    assert_eq!(text(tr, "source"), Some("tracepoints"));
    assert_eq!(int(tr, "cpus"), Some(2));
    assert_eq!(long(tr, "origin_ns"), START.0 as i64);
    assert_eq!(long(tr, "duration_ns"), 600);
    assert_eq!(long(tr, "records"), worker().records().len() as i64);
    assert!(boolean(tr, "complete"));
    assert_eq!(text(tr, "damage"), None);
    // Every table has its one file, each named after its part.
    for table in Table::ALL {
        let files = e.files(table);
        assert_eq!(files.len(), 1, "{}", table.name());
        assert!(files[0].ends_with("part-00000.parquet"));
        assert_eq!(e.summary.counts(table).files, 1);
    }
    assert_eq!(e.summary.counts(Table::Calls).rows, 2);
}

#[test]
fn files_have_the_documented_schema_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.trace");
    worker().write(&path).unwrap();
    let e = export(&path, &dir.path().join("ds"), &ExportOptions::default()).unwrap();
    for table in Table::ALL {
        let file = &e.files(table)[0];
        let reader = SerializedFileReader::new(File::open(file).unwrap()).unwrap();
        let meta = reader.metadata().file_metadata();
        let kv: Vec<(String, Option<String>)> = meta
            .key_value_metadata()
            .unwrap()
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect();
        for (k, v) in [
            ("sonda.schema", SCHEMA_VERSION.to_string()),
            ("sonda.table", table.name().to_string()),
            ("sonda.host", "synthetic".to_string()),
            ("sonda.trace", e.partition.trace.clone()),
        ] {
            assert!(kv.contains(&(k.to_string(), Some(v))), "{kv:?}");
        }
        let schema = meta.schema_descr();
        let columns = table.columns();
        assert_eq!(schema.num_columns(), columns.len());
        for (i, c) in columns.iter().enumerate() {
            let d = schema.column(i);
            assert_eq!(d.name(), c.name);
            let physical = match c.kind {
                Kind::Int32 => PhysicalType::INT32,
                Kind::Int64 => PhysicalType::INT64,
                Kind::Bool => PhysicalType::BOOLEAN,
                Kind::Text => PhysicalType::BYTE_ARRAY,
            };
            assert_eq!(d.physical_type(), physical, "{}", c.name);
            let repetition = d.self_type().get_basic_info().repetition();
            let nullable = repetition == Repetition::OPTIONAL;
            assert_eq!(nullable, c.nullable, "{}", c.name);
            // Times and durations delta-packed, names dictionary-encoded.
            if let Some(group) = reader.metadata().row_groups().first() {
                let encodings: Vec<Encoding> = group.column(i).encodings().collect();
                if c.unit == "ns" {
                    assert!(
                        encodings.contains(&Encoding::DELTA_BINARY_PACKED),
                        "{}: {encodings:?}",
                        c.name
                    );
                }
                if c.kind == Kind::Text {
                    assert!(
                        encodings.contains(&Encoding::RLE_DICTIONARY),
                        "{}: {encodings:?}",
                        c.name
                    );
                }
            }
        }
    }
}

#[test]
fn a_cut_trace_is_exported_up_to_where_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.trace");
    let b = worker();
    b.write_cut(&path, 8).unwrap();
    let e = export(&path, &dir.path().join("ds"), &ExportOptions::default()).unwrap();
    assert!(!e.summary.complete);
    let damage = e.summary.damage.as_ref().expect("the cut is reported");
    let traces = e.rows(Table::Traces);
    assert!(!boolean(&traces[0], "complete"));
    assert_eq!(
        text(&traces[0], "damage"),
        Some(damage.to_string().as_str())
    );
    // The call still open at the cut (run) is there, unfinished; step ended before.
    let calls = e.rows(Table::Calls);
    let exits: Vec<_> = calls
        .iter()
        .map(|c| (text(c, "method").unwrap(), text(c, "exit").unwrap()))
        .collect();
    assert_eq!(
        exits,
        [("demo.A::step", "exception"), ("demo.A::run", "unfinished")]
    );
}

#[test]
fn a_trace_without_records_is_refused_before_any_file_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.trace");
    let mut b = TraceBuilder::new(Source::Tracepoints, 2);
    b.process(1, "java", Runtime::Java).thread(1, 10, "java");
    b.write(&path).unwrap();
    let root = dir.path().join("ds");
    let err = export(&path, &root, &ExportOptions::default())
        .err()
        .expect("refused");
    assert!(matches!(err, ExportError::Empty { .. }), "{err}");
    assert!(err.to_string().contains("empty.trace"), "{err}");
    assert!(!root.exists());
}

/// Writers that fail once `budget` bytes were written, all together.
struct Failing {
    budget: usize,
}

struct FailingWriter {
    left: usize,
}

impl Write for FailingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() > self.left {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"));
        }
        self.left -= buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Outputs for Failing {
    type Writer = FailingWriter;
    fn create(&mut self, _: &OutputFile) -> io::Result<FailingWriter> {
        Ok(FailingWriter { left: self.budget })
    }
    fn name(&self, file: &OutputFile) -> String {
        format!("/out/{}/{}", file.table.name(), file.file_name())
    }
}

#[test]
fn a_write_error_names_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.trace");
    worker().write(&path).unwrap();
    // Room for the magic bytes, not for a row group.
    let err = sonda_parquet::export(
        Trace::open(&path).unwrap(),
        &mut Failing { budget: 8 },
        &ExportOptions::default(),
    )
    .expect_err("fails");
    let ExportError::Write { name, source } = &err else {
        panic!("{err:?}")
    };
    assert!(
        name.starts_with("/out/") && name.ends_with("part-00000.parquet"),
        "{name}"
    );
    assert_eq!(source.kind(), io::ErrorKind::StorageFull, "{err}");
    assert!(err.to_string().contains("disk full"), "{err}");
}
