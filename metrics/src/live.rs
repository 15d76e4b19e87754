//! The live aggregation: the released records joined into per-method sums as they
//! come.
//!
//! [`Live`] is `sonda services`' pass run on the records as the recorder writes them:
//! the same [`Timeline`] and [`CallJoin`], fed the same records in the same order.
//! The one difference is that a trace's reader knows every thread from the metadata
//! scan before the first record, while a recording learns of threads as it goes:
//! each `Meta::Thread` adds its thread to the timeline and the join
//! ([`Timeline::add_thread`]), and the recorder writes a thread's `Meta::Thread`
//! before the first record it keeps of it. Calls are counted when they complete
//! (returned or thrown: the join's `Unfinished` calls, closed at the end, are left out
//! as `sonda services` leaves them out), with their inclusive parts: CPU (on a CPU),
//! waiting for a CPU (runnable) and blocked (sleeping `S` plus uninterruptible `D`),
//! what `sonda services` reports per call.
//!
//! Methods are labelled `Class::name` (a C API region or a native function by its name
//! as recorded: native functions by address, since symbols are read only from a
//! finished trace); overloads of one name are summed under one label.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use sonda_model::join::{CallJoin, CallRecord, CallSink};
use sonda_timeline::{ExitKind, Frame, Timeline};
use sonda_trace::{Meta, Record, Time, SWITCHES_CLOCK_DATED};

use crate::feed::Item;
use crate::Latest;
use sonda_recorder::LiveStats;

/// The sums of one method label.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MethodSums {
    /// `Class::name`.
    pub method: String,
    /// The class in source form (empty for a C API region or a native function).
    pub class: String,
    /// Completed calls.
    pub calls: u64,
    /// Their CPU time (ns), nested calls included.
    pub cpu_ns: u64,
    /// Their time runnable, waiting for a CPU (ns).
    pub wait_ns: u64,
    /// Their time blocked: sleeping or in uninterruptible sleep (ns).
    pub blocked_ns: u64,
}

/// The timeline and the join, once the trace's start is known.
#[derive(Debug)]
struct Joined {
    origin: Time,
    timeline: Timeline,
    join: CallJoin,
}

/// Where the finished calls go: the sums, by method id.
#[derive(Debug, Default)]
struct Sums {
    /// Index in `methods` of each method id's label.
    by_id: FxHashMap<u32, usize>,
    /// Index in `methods` of each label.
    by_label: FxHashMap<String, usize>,
    methods: Vec<MethodSums>,
}

impl Sums {
    /// The sums of `label`, made if new.
    fn slot(&mut self, label: String, class: &str) -> usize {
        if let Some(&i) = self.by_label.get(&label) {
            return i;
        }
        let i = self.methods.len();
        self.by_label.insert(label.clone(), i);
        self.methods.push(MethodSums {
            method: label,
            class: class.to_string(),
            ..MethodSums::default()
        });
        i
    }

    fn name(&mut self, id: u32, class: &str, name: &str) {
        let label = if class.is_empty() {
            name.to_string()
        } else {
            format!("{class}::{name}")
        };
        let i = self.slot(label, class);
        self.by_id.insert(id, i);
    }
}

impl CallSink for Sums {
    fn call(&mut self, call: &CallRecord) {
        if call.kind == ExitKind::Unfinished {
            return;
        }
        let i = match call.frame {
            Frame::Method(id) => match self.by_id.get(&id) {
                Some(&i) => i,
                // Not named (its metadata was lost): by id, as `sonda services` does.
                None => {
                    let i = self.slot(format!("method {id}"), "");
                    self.by_id.insert(id, i);
                    i
                }
            },
            Frame::Func(addr) => self.slot(format!("{addr:#x}"), ""),
        };
        let m = &mut self.methods[i];
        m.calls += 1;
        m.cpu_ns += call.inclusive.cpu;
        m.wait_ns += call.inclusive.runnable;
        m.blocked_ns += call.inclusive.blocked();
    }
}

/// The live aggregation (see the module documentation).
#[derive(Debug, Default)]
pub struct Live {
    joined: Option<Joined>,
    sums: Sums,
    counters: LiveStats,
}

impl Live {
    /// An aggregation that has seen nothing yet.
    pub fn new() -> Live {
        Live::default()
    }

    /// A metadata record, in the trace's order.
    pub fn meta(&mut self, meta: &Meta) {
        match meta {
            // The first one starts the join (a trace has one).
            Meta::TraceInfo { source, start, .. } if self.joined.is_none() => {
                self.joined = Some(Joined {
                    origin: *start,
                    timeline: Timeline::new(*start, *source, []),
                    join: CallJoin::new(*start, []),
                });
            }
            Meta::Thread { pid, tid, .. } => {
                if let Some(j) = &mut self.joined {
                    if j.timeline.thread(*tid).is_none() {
                        j.timeline.add_thread(*tid);
                        j.join.add_thread(j.origin, *pid);
                    }
                }
            }
            Meta::Method {
                id, class, name, ..
            } => self.sums.name(*id, class, name),
            // Written before the first switch (see `SWITCHES_CLOCK_DATED`).
            Meta::Counter { name, .. } if name == SWITCHES_CLOCK_DATED => {
                if let Some(j) = &mut self.joined {
                    j.timeline.switches_dated_by_clock();
                }
            }
            _ => {}
        }
    }

    /// A timed record, in the trace's order.
    pub fn record(&mut self, record: &Record) {
        if let Some(j) = &mut self.joined {
            j.join.push(&mut j.timeline, record, &mut self.sums);
        }
    }

    /// The recording's own counters, as they stand.
    pub fn counters(&mut self, counters: LiveStats) {
        self.counters = counters;
    }

    /// The sums so far, in the order the methods were first named.
    pub fn methods(&self) -> &[MethodSums] {
        &self.sums.methods
    }

    /// The recording's counters as last given.
    pub fn recording(&self) -> LiveStats {
        self.counters
    }

    fn apply(&mut self, item: Item) {
        match item {
            Item::Meta(m) => self.meta(&m),
            Item::Record(r) => self.record(&r),
            Item::Counters(c) => self.counters(c),
        }
    }
}

/// How often the page is rendered at most while records come (and at least, as long
/// as they come: the recorder sends a batch every cycle).
const PUBLISH_EVERY: Duration = Duration::from_millis(200);
/// How long the thread waits for a batch before it looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// The metrics thread: applies the batches, renders the page into `latest` every
/// [`PUBLISH_EVERY`] while they come, and once more when the feed is gone (the final
/// figures) or `stop` is set.
pub(crate) fn run(
    batches: &Receiver<Vec<Item>>,
    dropped: &AtomicU64,
    latest: &Latest,
    stop: &AtomicBool,
) {
    let mut live = Live::new();
    let publish = |live: &Live| {
        latest.set(crate::page::render(live, dropped.load(Ordering::Relaxed)));
    };
    publish(&live);
    let mut published = Instant::now();
    let mut dirty = false;
    while !stop.load(Ordering::Relaxed) {
        match batches.recv_timeout(POLL) {
            Ok(batch) => {
                for item in batch {
                    live.apply(item);
                }
                dirty = true;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if dirty && published.elapsed() >= PUBLISH_EVERY {
            publish(&live);
            published = Instant::now();
            dirty = false;
        }
    }
    publish(&live);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sonda_trace::{Event, Pid, Source, Tid};

    /// A trace's first record, from time 0, on one CPU (also the page's tests').
    pub(crate) fn trace_info() -> Meta {
        Meta::TraceInfo {
            source: Source::Tracepoints,
            start: Time(0),
            host: "h".into(),
            cpus: 1,
            command: vec![],
            tool: "t".into(),
        }
    }

    fn r(t: u64, event: Event) -> Record {
        Record {
            time: Time(t),
            event,
        }
    }

    #[test]
    fn joins_calls_of_threads_named_as_they_come() {
        let mut live = Live::new();
        live.meta(&trace_info());
        live.meta(&Meta::Method {
            id: 1,
            class: "a.B".into(),
            name: "run".into(),
            descriptor: "()V".into(),
        });
        live.meta(&Meta::Method {
            id: 2,
            class: "a.B".into(),
            name: "run".into(),
            descriptor: "(I)V".into(),
        });
        live.meta(&Meta::Thread {
            pid: Pid(10),
            tid: Tid(11),
            comm: "java".into(),
        });
        let tid = Tid(11);
        // On a CPU from 100, a call 200..1200 that sleeps 500..900, an overload of it
        // 1300..1400, and one still open at the end.
        live.record(&r(
            100,
            Event::Switch {
                cpu: sonda_trace::Cpu(0),
                prev: Tid(0),
                prev_state: 0,
                next: tid,
                charge: None,
            },
        ));
        live.record(&r(200, Event::Enter { tid, method: 1 }));
        live.record(&r(
            500,
            Event::Switch {
                cpu: sonda_trace::Cpu(0),
                prev: tid,
                prev_state: 1, // TASK_INTERRUPTIBLE: S
                next: Tid(0),
                charge: None,
            },
        ));
        live.record(&r(
            900,
            Event::Switch {
                cpu: sonda_trace::Cpu(0),
                prev: Tid(0),
                prev_state: 0,
                next: tid,
                charge: None,
            },
        ));
        live.record(&r(
            1200,
            Event::Leave {
                tid,
                method: 1,
                exception: false,
            },
        ));
        live.record(&r(1300, Event::Enter { tid, method: 2 }));
        live.record(&r(
            1400,
            Event::Leave {
                tid,
                method: 2,
                exception: true,
            },
        ));
        live.record(&r(1500, Event::Enter { tid, method: 1 }));
        let m = live.methods();
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].method, "a.B::run");
        assert_eq!(m[0].class, "a.B");
        assert_eq!(m[0].calls, 2);
        assert_eq!(m[0].cpu_ns, 600 + 100);
        assert_eq!(m[0].blocked_ns, 400);
        assert_eq!(m[0].wait_ns, 0);
    }

    /// The live join of a busy synthetic trace's records, fed in file order as the
    /// recorder writes them, against `sonda services`' pass over the file: the same
    /// calls and the same parts.
    #[test]
    fn agrees_with_sonda_services_on_a_busy_trace() {
        use sonda_model::analyze::{analyze, Options};
        use sonda_trace::codec::Item as TraceItem;
        use sonda_trace::TraceReader;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy.trace");
        sonda_testdata::Busy {
            threads: 12,
            idle: 2,
            cpus: 4,
            methods: 9,
            records: 200_000,
            seed: 7,
            start_samples: false,
        }
        .write(&path)
        .unwrap();
        let mut live = Live::new();
        let mut reader = TraceReader::open(&path).unwrap();
        while let Some(block) = reader.next_block().unwrap() {
            for item in block.items() {
                match item.unwrap() {
                    TraceItem::Meta(m) => live.meta(&m),
                    TraceItem::Record(r) => live.record(&r),
                    TraceItem::Unknown(_) => {}
                }
            }
        }
        let analysis = analyze(
            sonda_timeline::Trace::open(&path).unwrap(),
            &Options::default(),
        )
        .unwrap();
        let mut compared = 0;
        for (label, calls) in analysis.calls() {
            let m = live
                .methods()
                .iter()
                .find(|m| m.method == label)
                .unwrap_or_else(|| panic!("{label} missing"));
            let sum = |f: fn(&CallRecord) -> u64| calls.iter().map(f).sum::<u64>();
            assert_eq!(m.calls, calls.len() as u64, "{label}");
            assert_eq!(m.cpu_ns, sum(|c| c.inclusive.cpu), "{label}");
            assert_eq!(m.wait_ns, sum(|c| c.inclusive.runnable), "{label}");
            assert_eq!(m.blocked_ns, sum(|c| c.inclusive.blocked()), "{label}");
            assert!(m.calls > 100, "{label}: {}", m.calls);
            compared += 1;
        }
        assert_eq!(compared, 9);
    }

    /// The live join of a BPF recording takes its switches as the recorder dated them,
    /// as `sonda services` does with the finished trace: the recorder says so before the
    /// first switch (`SWITCHES_CLOCK_DATED`). The records are those of the BPF
    /// schedstat failure that rule fixed (timeline/tests/integration/switch_clock.rs):
    /// a charge of the burner by another CPU's wakeup, then a switch 2.7 ms later that
    /// the hypervisor's stop delayed. Read without the counter, the charge dates main's
    /// switch-in and its 2.7 ms of waiting inside the call are lost.
    #[test]
    fn a_recording_whose_switches_are_dated_by_the_clock_is_joined_as_such() {
        let (main, burner) = (Tid(11), Tid(12));
        let cpu = sonda_trace::Cpu(0);
        let switch = |prev, prev_state, next| Event::Switch {
            cpu,
            prev,
            prev_state,
            next,
            charge: None,
        };
        let wait_of_the_call = |dated: bool| {
            let mut live = Live::new();
            live.meta(&trace_info());
            if dated {
                live.meta(&Meta::Counter {
                    name: SWITCHES_CLOCK_DATED.into(),
                    value: 0,
                });
            }
            live.meta(&Meta::Method {
                id: 1,
                class: "a.B".into(),
                name: "run".into(),
                descriptor: "()V".into(),
            });
            for tid in [main, burner] {
                live.meta(&Meta::Thread {
                    pid: Pid(10),
                    tid,
                    comm: "java".into(),
                });
            }
            for rec in [
                r(10_000_000, switch(Tid(0), 0, main)),
                r(
                    20_000_000,
                    Event::Enter {
                        tid: main,
                        method: 1,
                    },
                ),
                r(30_000_000, switch(main, 1, burner)),
                r(
                    140_451_972,
                    Event::CpuTime {
                        tid: burner,
                        ns: 1_313_713,
                        by: sonda_trace::ChargedBy::Other,
                    },
                ),
                r(
                    140_466_098,
                    Event::Wakeup {
                        target: cpu,
                        wakee: main,
                        new_task: false,
                        waking: None,
                    },
                ),
                r(143_186_367, switch(burner, 0, main)),
                r(
                    143_500_000,
                    Event::Leave {
                        tid: main,
                        method: 1,
                        exception: false,
                    },
                ),
            ] {
                live.record(&rec);
            }
            let m = live.methods();
            assert_eq!(m.len(), 1, "{m:?}");
            assert_eq!(m[0].calls, 1);
            m[0].wait_ns
        };
        assert_eq!(wait_of_the_call(true), 143_186_367 - 140_466_098);
        assert_eq!(wait_of_the_call(false), 0);
    }

    #[test]
    fn records_before_the_trace_info_are_ignored() {
        let mut live = Live::new();
        live.record(&r(
            1,
            Event::Enter {
                tid: Tid(1),
                method: 1,
            },
        ));
        assert!(live.methods().is_empty());
    }
}
