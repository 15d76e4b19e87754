//! A long, busy trace of any size, streamed to a file.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use sonda_trace::{Event, Meta, Pid, Record, Runtime, Source, Tid, Time, TraceWriter};

use crate::START;

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
                            waking: None,
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
                    charge: None,
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
                        waking: None,
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
