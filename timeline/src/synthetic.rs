//! Synthetic traces, for tests and benchmarks: a small builder over
//! [`sonda_trace::TraceWriter`] that writes exactly the records it is given, complete
//! or cut short the way a killed recording is.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use sonda_trace::block::{parse_block_header, BLOCK_HEADER_LEN};
use sonda_trace::{Event, Meta, Pid, Record, Runtime, Source, Tid, Time, TraceWriter};

/// The start time of every synthetic trace (times given to [`TraceBuilder::at`] are
/// relative to it).
pub const START: Time = Time(1_000_000_000);

/// Builds a trace in memory, then writes it.
#[derive(Clone, Debug)]
pub struct TraceBuilder {
    meta: Vec<Meta>,
    records: Vec<Record>,
    counters: Vec<Meta>,
    flush_every: usize,
}

impl TraceBuilder {
    /// A trace whose thread states come from `source`, on a machine with `cpus` CPUs.
    pub fn new(source: Source, cpus: u16) -> TraceBuilder {
        let info = Meta::TraceInfo {
            source,
            start: START,
            host: "synthetic".into(),
            cpus,
            command: vec!["java".into(), "Synthetic".into()],
            tool: "sonda test".into(),
        };
        TraceBuilder {
            meta: vec![info],
            records: Vec::new(),
            counters: Vec::new(),
            flush_every: 4,
        }
    }

    /// Adds any metadata record.
    pub fn meta(&mut self, m: Meta) -> &mut Self {
        self.meta.push(m);
        self
    }

    /// Adds a process.
    pub fn process(&mut self, pid: u32, name: &str, runtime: Runtime) -> &mut Self {
        self.meta(Meta::Process {
            pid: Pid(pid),
            ppid: Pid(1),
            name: name.into(),
            runtime,
        })
    }

    /// Adds a thread with its kernel name.
    pub fn thread(&mut self, pid: u32, tid: u32, comm: &str) -> &mut Self {
        self.meta(Meta::Thread {
            pid: Pid(pid),
            tid: Tid(tid),
            comm: comm.into(),
        })
    }

    /// Gives a thread its Java name.
    pub fn java_name(&mut self, pid: u32, tid: u32, name: &str) -> &mut Self {
        self.meta(Meta::JavaThread {
            pid: Pid(pid),
            tid: Tid(tid),
            name: name.into(),
            daemon: false,
        })
    }

    /// Adds an instrumented method.
    pub fn method(&mut self, id: u32, class: &str, name: &str, descriptor: &str) -> &mut Self {
        self.meta(Meta::Method {
            id,
            class: class.into(),
            name: name.into(),
            descriptor: descriptor.into(),
        })
    }

    /// Adds a counter to the end block.
    pub fn counter(&mut self, name: &str, value: u64) -> &mut Self {
        self.counters.push(Meta::Counter {
            name: name.into(),
            value,
        });
        self
    }

    /// Adds a timed record `ns` after [`START`]. Records must be added in time order.
    pub fn at(&mut self, ns: u64, event: Event) -> &mut Self {
        self.records.push(Record {
            time: Time(START.0 + ns),
            event,
        });
        self
    }

    /// The metadata records, the first being the `TraceInfo`.
    pub fn metadata(&self) -> &[Meta] {
        &self.meta
    }

    /// The timed records.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Cuts an events block every `n` records (default 4), so that damage can be
    /// placed between blocks.
    pub fn flush_every(&mut self, n: usize) -> &mut Self {
        self.flush_every = n.max(1);
        self
    }

    /// Encodes the trace; with `cut_after`, also returns the byte offset right after
    /// the block holding the first `cut_after` records.
    fn encode(&self, cut_after: Option<usize>) -> io::Result<(Vec<u8>, u64)> {
        let mut w = TraceWriter::new(Vec::new())?;
        for m in &self.meta {
            w.meta(m);
        }
        let mut offset = 0;
        for (i, r) in self.records.iter().enumerate() {
            w.record(r)?;
            if (i + 1) % self.flush_every == 0 || Some(i + 1) == cut_after {
                w.flush()?;
            }
            if Some(i + 1) == cut_after {
                offset = w.bytes_written();
            }
        }
        w.flush()?;
        Ok((w.finish(&self.counters)?, offset))
    }

    /// Writes the complete trace to `path`.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        write_file(path, &self.encode(None)?.0)
    }

    /// Writes the trace as a recording killed after its first `kept` records (at
    /// least 1): those are in complete blocks, the next block is cut in its middle,
    /// and there is no end block. Returns the byte offset where readable data ends.
    pub fn write_cut(&self, path: &Path, kept: usize) -> io::Result<u64> {
        let (full, offset) = self.encode(Some(kept.max(1)))?;
        let header = BLOCK_HEADER_LEN;
        let at = offset as usize;
        let next_len = match full
            .get(at..at + header)
            .map(|h| parse_block_header(h.try_into().expect("header")))
        {
            Some(Ok(h)) => header + h.len as usize,
            _ => header,
        };
        write_file(path, &full[..at + next_len / 2])?;
        Ok(offset)
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = BufWriter::new(File::create(path)?);
    f.write_all(bytes)?;
    f.flush()
}

/// A trace that exercises every record kind and the timeline's edge cases, on 2 CPUs
/// over 1000 ns: a JVM (pid 100) with threads that existed before the trace (seen
/// first switched out, switched in, woken), one born and ended mid-trace, one never
/// named by any record, one whose agent dropped events (unbalanced stack), a VM thread
/// running a GC, monitor contention, overloaded methods, exits by exception, wakeups;
/// and a native process (pid 200) with uninterruptible, stopped and dead states and a
/// native function. `timeline/tests/showcase.rs` asserts what it must give.
pub fn showcase() -> TraceBuilder {
    use Event::*;
    let (c0, c1) = (sonda_trace::Cpu(0), sonda_trace::Cpu(1));
    let t = Tid;
    let mut b = TraceBuilder::new(Source::Tracepoints, 2);
    b.process(100, "java", Runtime::Java)
        .process(200, "dd", Runtime::Native);
    for (tid, comm) in [
        (101, "java"),
        (102, "java"),
        (103, "VM Thread"),
        (104, "java"),
        (105, "Signal Dispatch"),
        (106, "java"),
    ] {
        b.thread(100, tid, comm);
    }
    b.thread(200, 201, "dd");
    for (tid, name) in [
        (101, "main"),
        (102, "worker-1"),
        (104, "worker-2"),
        (105, "Signal Dispatcher"),
        (106, "lossy"),
    ] {
        b.java_name(100, tid, name);
    }
    b.method(1, "demo.Service", "handle", "()V")
        .method(2, "demo.Service", "parse", "(Ljava/lang/String;)I")
        .method(3, "demo.Service", "parse", "([B)I")
        .method(4, "demo.Store", "save", "()V")
        .meta(Meta::MonitorClass {
            id: 5,
            name: "demo.Store".into(),
        })
        .meta(Meta::Mapping {
            pid: Pid(200),
            start: 0x40_0000,
            end: 0x50_0000,
            offset: 0,
            path: "/usr/bin/dd".into(),
        })
        .meta(Meta::UserType {
            kind: 4,
            value: None,
            name: "phase".into(),
        })
        .meta(Meta::UserType {
            kind: 4,
            value: Some(42),
            name: "steady".into(),
        })
        .meta(Meta::Warning {
            text: "class demo.Legacy left unchanged".into(),
        })
        .counter("kernel.lost", 2)
        .counter("agent.dropped", 3)
        .counter("collector.late_retimed", 1);
    let sw = |cpu, prev: u32, prev_state, next: u32| Switch {
        cpu,
        prev: t(prev),
        prev_state,
        next: t(next),
    };
    b.at(10, VmInit { pid: Pid(100) })
        .at(50, sw(c0, 0, 0, 102))
        .at(100, sw(c1, 101, 0x100, 201))
        .at(
            105,
            FuncEnter {
                tid: t(201),
                addr: 0x40_1000,
            },
        )
        .at(
            130,
            FuncLeave {
                tid: t(201),
                addr: 0x40_1000,
            },
        )
        .at(140, sw(c1, 201, 0x2, 0))
        .at(150, sw(c0, 102, 0x100, 101))
        .at(155, sw(c1, 0, 0, 102))
        .at(
            160,
            Enter {
                tid: t(101),
                method: 1,
            },
        )
        .at(
            170,
            Enter {
                tid: t(101),
                method: 2,
            },
        )
        .at(
            200,
            Leave {
                tid: t(101),
                method: 2,
                exception: false,
            },
        )
        .at(
            210,
            Enter {
                tid: t(101),
                method: 3,
            },
        )
        .at(
            250,
            Leave {
                tid: t(101),
                method: 3,
                exception: true,
            },
        )
        .at(
            260,
            Wakeup {
                target: c1,
                wakee: t(201),
                new_task: false,
            },
        )
        .at(270, sw(c1, 102, 0x1, 201))
        .at(
            280,
            Waking {
                cpu: c1,
                waker: t(201),
                wakee: t(103),
            },
        )
        .at(
            285,
            Leave {
                tid: t(101),
                method: 1,
                exception: false,
            },
        )
        .at(
            290,
            Wakeup {
                target: c0,
                wakee: t(103),
                new_task: false,
            },
        )
        .at(295, sw(c0, 101, 0x1, 103))
        .at(
            300,
            GcStart {
                pid: Pid(100),
                tid: t(103),
            },
        )
        .at(310, sw(c1, 201, 0x4, 0))
        .at(
            350,
            GcEnd {
                pid: Pid(100),
                tid: t(103),
            },
        )
        .at(360, sw(c0, 103, 0x1, 0))
        .at(
            370,
            Rename {
                tid: t(103),
                comm: "VM Periodic".into(),
            },
        )
        .at(380, sw(c0, 0, 0, 106))
        .at(
            390,
            Enter {
                tid: t(106),
                method: 1,
            },
        )
        .at(
            395,
            Enter {
                tid: t(106),
                method: 2,
            },
        )
        .at(
            400,
            NewTask {
                parent: t(106),
                child: t(104),
                pid: Pid(100),
                comm: "java".into(),
            },
        )
        .at(
            405,
            Wakeup {
                target: c1,
                wakee: t(104),
                new_task: true,
            },
        )
        .at(410, sw(c1, 0, 0, 104))
        .at(411, ThreadStart { tid: t(104) })
        .at(
            412,
            Dropped {
                tid: t(106),
                count: 3,
            },
        )
        .at(
            415,
            Leave {
                tid: t(106),
                method: 1,
                exception: false,
            },
        )
        .at(
            418,
            Leave {
                tid: t(106),
                method: 3,
                exception: false,
            },
        )
        .at(
            419,
            Enter {
                tid: t(106),
                method: 4,
            },
        )
        .at(
            420,
            MonitorContended {
                tid: t(104),
                class: 5,
            },
        )
        .at(425, sw(c1, 104, 0x1, 0))
        .at(
            450,
            Waking {
                cpu: c0,
                waker: t(106),
                wakee: t(104),
            },
        )
        .at(
            452,
            Wakeup {
                target: c1,
                wakee: t(104),
                new_task: false,
            },
        )
        .at(460, sw(c1, 0, 0, 104))
        .at(
            465,
            MonitorEntered {
                tid: t(104),
                class: 5,
            },
        )
        .at(
            470,
            Enter {
                tid: t(104),
                method: 4,
            },
        )
        .at(478, ThreadEnd { tid: t(104) })
        .at(480, TaskExit { tid: t(104) })
        .at(490, sw(c1, 104, 0x1, 0))
        .at(
            500,
            Waking {
                cpu: c0,
                waker: t(106),
                wakee: t(101),
            },
        )
        .at(
            502,
            Wakeup {
                target: c1,
                wakee: t(101),
                new_task: false,
            },
        )
        .at(510, sw(c1, 0, 0, 101))
        .at(
            590,
            Wakeup {
                target: c1,
                wakee: t(201),
                new_task: false,
            },
        )
        .at(600, sw(c1, 101, 0, 201))
        .at(620, sw(c1, 201, 0x10, 101))
        .at(700, sw(c0, 106, 0x1, 0))
        .at(
            800,
            User {
                tid: t(101),
                kind: 4,
                value: 42,
            },
        )
        .at(900, KernelLost { cpu: c0, count: 2 })
        .at(950, VmDeath { pid: Pid(100) })
        .at(1000, sw(c1, 101, 0x100, 0));
    b
}

/// A long, busy trace streamed to a file without holding its records: threads of one
/// JVM taking turns on the CPUs, each time slice running a few instrumented calls and
/// ending preempted, asleep or in I/O; sleepers woken by the running thread; now and
/// then a GC or a contended monitor. Deterministic for a given spec. For tests of
/// scale and for the exporter's benchmark.
#[derive(Clone, Copy, Debug)]
pub struct Busy {
    /// Java threads (tids from 1001).
    pub threads: u32,
    /// Threads named in the metadata that no record mentions (like a JVM's signal
    /// dispatcher, asleep throughout), tids after the others.
    pub idle: u32,
    /// CPUs.
    pub cpus: u16,
    /// Instrumented methods (ids from 1).
    pub methods: u32,
    /// Timed records to write (about).
    pub records: u64,
    /// Seed of the pseudo-random choices.
    pub seed: u64,
    /// Whether the idle threads get a `/proc` sample when the recording starts (what
    /// tells a reader their state without reading the whole trace).
    pub start_samples: bool,
}

impl Busy {
    /// Writes the trace; returns the number of timed records written.
    pub fn write(&self, path: &Path) -> io::Result<u64> {
        use Event::*;
        let mut w = TraceWriter::new(BufWriter::with_capacity(1 << 20, File::create(path)?))?;
        let pid = Pid(1000);
        w.meta(&Meta::TraceInfo {
            source: Source::Tracepoints,
            start: START,
            host: "synthetic".into(),
            cpus: self.cpus,
            command: vec!["java".into(), "Busy".into()],
            tool: "sonda test".into(),
        });
        w.meta(&Meta::Process {
            pid,
            ppid: Pid(1),
            name: "java".into(),
            runtime: Runtime::Java,
        });
        let tids: Vec<Tid> = (0..self.threads.max(2)).map(|i| Tid(1001 + i)).collect();
        for (i, &tid) in tids.iter().enumerate() {
            w.meta(&Meta::Thread {
                pid,
                tid,
                comm: "java".into(),
            });
            w.meta(&Meta::JavaThread {
                pid,
                tid,
                name: format!("worker-{i}"),
                daemon: false,
            });
        }
        for i in 0..self.idle {
            let tid = Tid(1001 + tids.len() as u32 + i);
            w.meta(&Meta::Thread {
                pid,
                tid,
                comm: "java".into(),
            });
            w.meta(&Meta::JavaThread {
                pid,
                tid,
                name: format!("idle-{i}"),
                daemon: true,
            });
        }
        for id in 1..=self.methods.max(1) {
            let class = format!("demo.C{}", id % 17);
            w.meta(&Meta::Method {
                id,
                class,
                name: format!("m{id}"),
                descriptor: "()V".into(),
            });
        }
        w.meta(&Meta::MonitorClass {
            id: 1,
            name: "demo.Lock".into(),
        });

        let mut rng = self.seed | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n.max(1)
        };
        let cpus = self.cpus.max(1);
        // Who runs on each CPU; who waits for a CPU; who sleeps.
        let mut running: Vec<Option<Tid>> = vec![None; usize::from(cpus)];
        let mut runnable: std::collections::VecDeque<Tid> = tids.iter().copied().collect();
        let mut asleep: Vec<Tid> = Vec::new();
        let mut now = START.0;
        let mut gc_open = false;
        struct Out<W: Write> {
            w: TraceWriter<W>,
            written: u64,
        }
        impl<W: Write> Out<W> {
            fn put(&mut self, time: u64, event: Event) -> io::Result<()> {
                self.written += 1;
                self.w.record(&Record {
                    time: Time(time),
                    event,
                })
            }
        }
        let mut w = Out { w, written: 0 };
        if self.start_samples {
            for i in 0..self.idle {
                let tid = Tid(1001 + tids.len() as u32 + i);
                let sample = ProcSample {
                    tid,
                    cpu: sonda_trace::Cpu(0),
                    state: b'S',
                    run_ns: 0,
                    wait_ns: 0,
                };
                w.put(now, sample)?;
            }
        }
        let mut cpu_turn = 0u16;
        while w.written < self.records {
            let c = cpu_turn % cpus;
            cpu_turn = cpu_turn.wrapping_add(1);
            let cpu = sonda_trace::Cpu(c);
            now += 20 + next(200);
            if let Some(t) = running[usize::from(c)] {
                // A time slice: a few calls, sometimes nested, sometimes a contended monitor.
                for _ in 0..1 + next(4) {
                    let m = 1 + next(u64::from(self.methods.max(1))) as u32;
                    w.put(now, Enter { tid: t, method: m })?;
                    now += 10 + next(100);
                    if next(3) == 0 {
                        let inner = 1 + next(u64::from(self.methods.max(1))) as u32;
                        w.put(
                            now,
                            Enter {
                                tid: t,
                                method: inner,
                            },
                        )?;
                        now += 10 + next(50);
                        w.put(
                            now,
                            Leave {
                                tid: t,
                                method: inner,
                                exception: next(20) == 0,
                            },
                        )?;
                    }
                    if next(50) == 0 {
                        w.put(now, MonitorContended { tid: t, class: 1 })?;
                        now += 5 + next(50);
                        w.put(now, MonitorEntered { tid: t, class: 1 })?;
                    }
                    now += 5 + next(50);
                    w.put(
                        now,
                        Leave {
                            tid: t,
                            method: m,
                            exception: false,
                        },
                    )?;
                }
                if next(500) == 0 {
                    let event = if gc_open {
                        GcEnd { pid, tid: t }
                    } else {
                        GcStart { pid, tid: t }
                    };
                    gc_open = !gc_open;
                    w.put(now, event)?;
                }
                // Wake a sleeper onto this CPU's queue.
                if !asleep.is_empty() && next(2) == 0 {
                    let wakee = asleep.swap_remove(next(asleep.len() as u64) as usize);
                    w.put(
                        now,
                        Waking {
                            cpu,
                            waker: t,
                            wakee,
                        },
                    )?;
                    w.put(
                        now + 1,
                        Wakeup {
                            target: cpu,
                            wakee,
                            new_task: false,
                        },
                    )?;
                    runnable.push_back(wakee);
                }
            }
            now += 2;
            let prev = running[usize::from(c)].take();
            let prev_state = match next(10) {
                0..=4 => 0x1,
                5..=8 => 0x100,
                _ => 0x2,
            };
            let next_tid = runnable.pop_front();
            if prev.is_none() && next_tid.is_none() {
                continue;
            }
            w.put(
                now,
                Switch {
                    cpu,
                    prev: prev.unwrap_or(Tid(0)),
                    prev_state,
                    next: next_tid.unwrap_or(Tid(0)),
                },
            )?;
            if let Some(p) = prev {
                if prev_state == 0x100 {
                    runnable.push_back(p);
                } else {
                    asleep.push(p);
                }
            }
            running[usize::from(c)] = next_tid;
            if runnable.is_empty() && running.iter().all(Option::is_none) && !asleep.is_empty() {
                // Everyone asleep: an outside event wakes one.
                let wakee = asleep.swap_remove(0);
                w.put(
                    now + 1,
                    Wakeup {
                        target: cpu,
                        wakee,
                        new_task: false,
                    },
                )?;
                runnable.push_back(wakee);
            }
        }
        w.w.finish(&[Meta::Counter {
            name: "kernel.lost".into(),
            value: 0,
        }])?;
        Ok(w.written)
    }
}
