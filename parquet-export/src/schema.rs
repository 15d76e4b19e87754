//! The tables and their columns: the one place that says what each Parquet file holds
//! (names, types, units, encodings). `docs/parquet.md` describes the same columns; a
//! test holds the two together.
//!
//! Choices that hold for every table:
//! - Times are `INT64` nanoseconds since the trace's origin (when the recording
//!   started; its `CLOCK_MONOTONIC` value is the `traces` table's `origin_ns`), so that
//!   traces from different hosts and boots line up from 0. Durations are `INT64`
//!   nanoseconds. Signed types only: Spark has no unsigned 64-bit integer.
//! - Names are `BYTE_ARRAY` (`STRING`) columns of the fact tables, dictionary-encoded:
//!   a query needs no join to group calls by method or states by thread, and each
//!   distinct name is stored once per column chunk. The dimension tables (`methods`,
//!   `threads`) hold what is not worth repeating on every row (descriptors, kernel and
//!   Java names, daemon flags, process names).
//! - Enumerations (a thread's state, how a call ended) are strings, not numbers: a
//!   state added to the timeline is a new value of the `state` column, never a new
//!   column or a renumbering ([`state_name`]).
//! - The trace's host and identity are not columns of the files: they are the
//!   partition directories (`host=H/trace=T`), which every Hive-aware reader turns
//!   into columns (a file that held them too would clash with the directory's value
//!   in Spark).

use std::sync::Arc;

use parquet::basic::{Encoding, LogicalType, Repetition, Type as PhysicalType};
use parquet::schema::types::{Type, TypePtr};
use sonda_model::parts::Parts;
use sonda_timeline::{ExitKind, ThreadState};

/// A column's Parquet type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `INT32`.
    Int32,
    /// `INT64`.
    Int64,
    /// `BOOLEAN`.
    Bool,
    /// `BYTE_ARRAY` annotated `STRING` (UTF-8), dictionary-encoded.
    Text,
}

impl Kind {
    /// The type as `docs/parquet.md` writes it.
    pub fn parquet_name(self) -> &'static str {
        match self {
            Kind::Int32 => "INT32",
            Kind::Int64 => "INT64",
            Kind::Bool => "BOOLEAN",
            Kind::Text => "STRING",
        }
    }

    /// Bytes one value takes in the writer's row buffer (a string is an index into
    /// the names), for the row groups' size.
    pub(crate) fn buffered_bytes(self) -> usize {
        match self {
            Kind::Int32 | Kind::Text => 4,
            Kind::Int64 => 8,
            Kind::Bool => 1,
        }
    }
}

/// How a column's values are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encode {
    /// Dictionary (few distinct values: ids, names, CPUs, depths).
    Dictionary,
    /// `DELTA_BINARY_PACKED` (times, which grow, and durations, which vary): a few
    /// bits a value instead of eight bytes.
    Delta,
    /// Plain (booleans).
    Plain,
}

/// One column of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// Its type.
    pub kind: Kind,
    /// Whether it can be null (`OPTIONAL`), else `REQUIRED`.
    pub nullable: bool,
    /// Its unit, or empty.
    pub unit: &'static str,
    /// What it holds.
    pub doc: String,
    pub(crate) encode: Encode,
}

fn col(name: &str, kind: Kind, unit: &'static str, doc: &str) -> Column {
    let encode = match (kind, unit) {
        (Kind::Bool, _) => Encode::Plain,
        (Kind::Int64, "ns") => Encode::Delta,
        _ => Encode::Dictionary,
    };
    Column {
        name: name.to_string(),
        kind,
        nullable: false,
        unit,
        doc: doc.to_string(),
        encode,
    }
}

fn nullable(mut c: Column) -> Column {
    c.nullable = true;
    c
}

/// A table of the export: one directory of Parquet files per table
/// (`DIR/<table>/host=H/trace=T/part-NNNNN.parquet`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Table {
    /// One row per call of an instrumented method or native function, with the parts
    /// of its time (the per-call join of `sonda-model`).
    Calls,
    /// One row per thread state interval.
    States,
    /// One row per wakeup: who woke whom, when it was sent and when the woken thread
    /// got a CPU.
    Wakeups,
    /// One row per garbage collection.
    Gcs,
    /// One row per wait for a contended monitor.
    MonitorWaits,
    /// One row per instrumented method or native function (dimension).
    Methods,
    /// One row per thread (dimension).
    Threads,
    /// One row per counter the recording kept.
    Counters,
    /// One row: the trace itself.
    Traces,
}

impl Table {
    /// Every table, in the order the export creates them.
    pub const ALL: [Table; 9] = [
        Table::Calls,
        Table::States,
        Table::Wakeups,
        Table::Gcs,
        Table::MonitorWaits,
        Table::Methods,
        Table::Threads,
        Table::Counters,
        Table::Traces,
    ];

    /// Its directory's name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Calls => "calls",
            Table::States => "states",
            Table::Wakeups => "wakeups",
            Table::Gcs => "gcs",
            Table::MonitorWaits => "monitor_waits",
            Table::Methods => "methods",
            Table::Threads => "threads",
            Table::Counters => "counters",
            Table::Traces => "traces",
        }
    }

    /// Its columns, in file order.
    pub fn columns(self) -> Vec<Column> {
        use Kind::*;
        let thread = || {
            [
                col("pid", Int32, "", "process id"),
                col("tid", Int32, "", "kernel thread id"),
                col(
                    "thread",
                    Text,
                    "",
                    "thread name: its Java name, else its kernel name",
                ),
            ]
        };
        match self {
            Table::Calls => {
                let mut c = vec![
                    col(
                        "call_id",
                        Int64,
                        "",
                        "the call, numbered from 0 in the order calls began (per trace)",
                    ),
                    nullable(col(
                        "parent_id",
                        Int64,
                        "",
                        "the instrumented call it was made in; null for an outermost call",
                    )),
                ];
                c.extend(thread());
                c.extend([
                    nullable(col("method_id", Int32, "", "the trace's method id; null for a native function recorded by address")),
                    nullable(col("method", Text, "", "the method's label as `sonda services` prints it (`Class::name`, with the descriptor for overloads); null when the trace does not name it")),
                    nullable(col("class", Text, "", "the method's class; null for native functions and C API regions")),
                    nullable(col("address", Int64, "", "the native function's address, for one recorded by address; else null")),
                    col("depth", Int32, "", "stack depth, 1 for the outermost instrumented call of its thread"),
                    col("exit", Text, "", "how the call ended: `normal`, `exception`, `repaired` (closed at a leave further down its stack: events were dropped) or `unfinished` (still open when its thread or the trace ended, closed there)"),
                    col("start_ns", Int64, "ns", "when it began"),
                    col("end_ns", Int64, "ns", "when it ended"),
                ]);
                for p in PARTS {
                    c.push(col(
                        &format!("{}_ns", p.name),
                        Int64,
                        "ns",
                        &format!("{}, nested instrumented calls included", p.doc),
                    ));
                }
                for p in PARTS {
                    c.push(col(
                        &format!("excl_{}_ns", p.name),
                        Int64,
                        "ns",
                        &format!("{}, nested instrumented calls excluded", p.doc),
                    ));
                }
                c
            }
            Table::States => {
                let mut c = thread().to_vec();
                c.extend([
                    col("state", Text, "", "the thread's state: `running`, `runnable` (waiting for a CPU), `sleeping` (S), `uninterruptible` (D), `stopped`, `idle`, `stolen` (on a CPU the hypervisor ran something else on), `not_created` (before its creation or after its end)"),
                    nullable(col("cpu", Int32, "", "the CPU it runs on (running), waits on (runnable) or last ran on (asleep), from 0; null when unknown")),
                    col("start_ns", Int64, "ns", "first instant of the interval"),
                    col("end_ns", Int64, "ns", "first instant after it"),
                ]);
                c
            }
            Table::Wakeups => vec![
                col("waker_tid", Int32, "", "the thread that woke it (any thread of the machine, or 0 for an interrupt on an idle CPU)"),
                nullable(col("waker", Text, "", "its name, when the trace follows it")),
                col("waker_cpu", Int32, "", "the CPU the waker ran on"),
                col("pid", Int32, "", "the woken thread's process id"),
                col("tid", Int32, "", "the woken thread"),
                col("thread", Text, "", "its name"),
                nullable(col("cpu", Int32, "", "the CPU it got")),
                col("sent_ns", Int64, "ns", "when it was woken (`sched_waking`)"),
                col("received_ns", Int64, "ns", "when it next got a CPU"),
            ],
            Table::Gcs => vec![
                col("pid", Int32, "", "the collected JVM's process id"),
                nullable(col("tid", Int32, "", "the thread that reported it (the VM thread), when followed")),
                col("start_ns", Int64, "ns", "when the collection began"),
                col("end_ns", Int64, "ns", "when it ended"),
                col("unfinished", Bool, "", "whether it was still running at the trace's end (closed there)"),
            ],
            Table::MonitorWaits => {
                let mut c = thread().to_vec();
                c.extend([
                    col("class", Text, "", "the class of the contended monitor's object"),
                    col("start_ns", Int64, "ns", "when the thread began to wait"),
                    col("end_ns", Int64, "ns", "when it entered the monitor"),
                    col("unfinished", Bool, "", "whether the wait was closed by the thread's or the trace's end"),
                ]);
                c
            }
            Table::Methods => vec![
                col("method_id", Int32, "", "the trace's method id (unique within the trace)"),
                col("method", Text, "", "its label, as in `calls.method`"),
                nullable(col("class", Text, "", "its class; null for native functions and C API regions")),
                col("name", Text, "", "its name"),
                nullable(col("descriptor", Text, "", "its JVM descriptor; null when it has none")),
                col("native", Bool, "", "whether it is a compiler-instrumented native function"),
            ],
            Table::Threads => {
                let mut c = thread().to_vec();
                c.extend([
                    col("comm", Text, "", "its kernel name, as last known"),
                    nullable(col("java_name", Text, "", "its Java name, when the agent reported one")),
                    col("daemon", Bool, "", "whether it is a Java daemon thread"),
                    nullable(col("process", Text, "", "its process's name")),
                    nullable(col("runtime", Text, "", "what its process runs: `java` (a JVM with the agent) or `native`")),
                ]);
                c
            }
            Table::Counters => vec![
                col("name", Text, "", "the counter (`kernel.lost`, `agent.dropped`, ...: docs/trace-format.md)"),
                col("value", Int64, "", "its last value"),
            ],
            Table::Traces => vec![
                col("path", Text, "", "the trace file, as given to `sonda export`"),
                col("command", Text, "", "the recorded command line, its words joined by spaces"),
                col("tool", Text, "", "the sonda version that recorded it"),
                col("source", Text, "", "where thread states come from: `tracepoints` or `procfs`"),
                col("cpus", Int32, "", "CPUs of the machine"),
                col("origin_ns", Int64, "ns", "the trace's origin: `CLOCK_MONOTONIC` ns of the host when recording started; every `_ns` time is counted from it"),
                col("duration_ns", Int64, "ns", "from the origin to the trace's end"),
                col("records", Int64, "", "timed records read"),
                col("complete", Bool, "", "whether the recording finished cleanly"),
                nullable(col("damage", Text, "", "the damage the reader skipped, when the trace is cut short or damaged: the tables hold every intact block")),
            ],
        }
    }

    /// Its Parquet schema.
    pub(crate) fn schema(self) -> TypePtr {
        let fields = self
            .columns()
            .iter()
            .map(|c| {
                let (physical, logical) = match c.kind {
                    Kind::Int32 => (PhysicalType::INT32, None),
                    Kind::Int64 => (PhysicalType::INT64, None),
                    Kind::Bool => (PhysicalType::BOOLEAN, None),
                    Kind::Text => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
                };
                let repetition = if c.nullable {
                    Repetition::OPTIONAL
                } else {
                    Repetition::REQUIRED
                };
                Arc::new(
                    Type::primitive_type_builder(&c.name, physical)
                        .with_repetition(repetition)
                        .with_logical_type(logical)
                        .build()
                        .expect("a primitive column's type is valid"),
                )
            })
            .collect();
        Arc::new(
            Type::group_type_builder(self.name())
                .with_fields(fields)
                .build()
                .expect("a group of primitive columns is valid"),
        )
    }
}

impl Encode {
    /// The encoding to set when the dictionary is off.
    pub(crate) fn encoding(self) -> Option<Encoding> {
        match self {
            Encode::Delta => Some(Encoding::DELTA_BINARY_PACKED),
            Encode::Plain => Some(Encoding::PLAIN),
            Encode::Dictionary => None,
        }
    }
}

/// One part of a call's time as the per-call join gives it ([`Parts`]): a column of
/// the `calls` table, inclusive (`NAME_ns`) and exclusive (`excl_NAME_ns`).
pub(crate) struct Part {
    pub name: &'static str,
    pub doc: &'static str,
    pub get: fn(&Parts) -> u64,
}

/// Every part of [`Parts`], in column order: adding a part to the join is one line
/// here (a test fails while a field of `Parts` has no line).
pub(crate) const PARTS: &[Part] = &[
    Part {
        name: "wall",
        doc: "wall time, from enter to exit",
        get: |p| p.wall,
    },
    Part {
        name: "cpu",
        doc: "on a CPU (the CPU time the kernel charged)",
        get: |p| p.cpu,
    },
    Part {
        name: "runnable",
        doc: "runnable, waiting for a CPU",
        get: |p| p.runnable,
    },
    Part {
        name: "stolen",
        doc: "on a CPU the hypervisor ran something else on (steal time)",
        get: |p| p.stolen,
    },
    Part {
        name: "sleeping",
        doc: "in interruptible sleep (S)",
        get: |p| p.sleeping,
    },
    Part {
        name: "uninterruptible",
        doc: "in uninterruptible sleep (D)",
        get: |p| p.uninterruptible,
    },
    Part {
        name: "other",
        doc: "in any other state (stopped, idle, unknown)",
        get: |p| p.other,
    },
    Part {
        name: "monitor",
        doc: "waiting for a contended monitor (part of the states above, not added to them)",
        get: |p| p.monitor,
    },
    Part {
        name: "gc",
        doc: "while its JVM collected garbage (part of the states above, not added to them)",
        get: |p| p.gc,
    },
];

/// The `state` column's value for `s`. A state added to the timeline is one more line
/// (the match is exhaustive, so the build says where).
pub fn state_name(s: ThreadState) -> &'static str {
    match s {
        ThreadState::NotCreated => "not_created",
        ThreadState::Running => "running",
        ThreadState::Runnable => "runnable",
        ThreadState::Sleeping => "sleeping",
        ThreadState::Uninterruptible => "uninterruptible",
        ThreadState::Stopped => "stopped",
        ThreadState::Idle => "idle",
        ThreadState::Stolen => "stolen",
    }
}

/// The `exit` column's value for `k` (the names of `sonda services --calls`).
pub fn exit_name(k: ExitKind) -> &'static str {
    match k {
        ExitKind::Normal => "normal",
        ExitKind::Exception => "exception",
        ExitKind::Unwound => "repaired",
        ExitKind::Unfinished => "unfinished",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_of_the_join_has_its_columns() {
        // The join's parts, as its own serialisation names them.
        let parts = serde_json::to_value(Parts::default()).unwrap();
        let fields: Vec<&str> = parts
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut ours: Vec<&str> = PARTS.iter().map(|p| p.name).collect();
        let mut theirs = fields.clone();
        ours.sort_unstable();
        theirs.sort_unstable();
        assert_eq!(
            ours, theirs,
            "a part of sonda_model::parts::Parts has no column"
        );
        let names: Vec<String> = Table::Calls.columns().into_iter().map(|c| c.name).collect();
        for f in fields {
            assert!(names.contains(&format!("{f}_ns")), "{f}");
            assert!(names.contains(&format!("excl_{f}_ns")), "{f}");
        }
        // Each getter reads its own field: every part a distinct value (the states
        // through the join's own mapping, so a part added with its state is covered).
        let mut p = Parts::default();
        for (i, s) in ThreadState::ALL.iter().enumerate() {
            p.add_state(*s, 1 << i);
        }
        p.wall = 1 << 20;
        p.monitor = 1 << 21;
        p.gc = 1 << 22;
        let by_name = serde_json::to_value(p).unwrap();
        let mut values: Vec<u64> = PARTS.iter().map(|part| (part.get)(&p)).collect();
        for part in PARTS {
            assert_eq!(
                by_name[part.name].as_u64(),
                Some((part.get)(&p)),
                "{}",
                part.name
            );
        }
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), PARTS.len());
    }

    #[test]
    fn states_and_exits_have_distinct_names() {
        let mut states: Vec<&str> = ThreadState::ALL.iter().map(|&s| state_name(s)).collect();
        states.sort_unstable();
        states.dedup();
        assert_eq!(states.len(), ThreadState::COUNT);
        let exits = [
            ExitKind::Normal,
            ExitKind::Exception,
            ExitKind::Unwound,
            ExitKind::Unfinished,
        ]
        .map(exit_name);
        assert_eq!(exits, ["normal", "exception", "repaired", "unfinished"]);
    }

    #[test]
    fn every_table_has_a_valid_schema_with_unique_names() {
        for (i, t) in Table::ALL.iter().enumerate() {
            // The writers are indexed by it.
            assert_eq!(*t as usize, i);
        }
        for t in Table::ALL {
            let cols = t.columns();
            let mut names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), cols.len(), "{}", t.name());
            assert_eq!(t.schema().get_fields().len(), cols.len());
            for c in &cols {
                assert!(!c.doc.is_empty(), "{}.{}", t.name(), c.name);
                // No column is named like a partition directory.
                assert!(c.name != "trace" && c.name != "host", "{}", c.name);
            }
        }
    }
}
