//! The per-call join: the time each instrumented call spent in each thread state, in
//! monitor contention and in garbage collections, inclusive and exclusive of the
//! instrumented calls nested in it.
//!
//! [`CallJoin`] is a [`Sink`] of the [`Timeline`] plus a little state per thread, so
//! the join streams with the timeline: memory grows with the number of threads and
//! their stack depths, never with the trace's length.
//!
//! ## How a call's parts are found
//!
//! For every thread the join keeps the cumulative time spent in each state up to the
//! end of the last state interval the timeline delivered (`covered`). A call's parts
//! are the difference of two snapshots of those totals, one at its enter and one at
//! its exit. A snapshot at time `t` is the closed totals plus `t - covered` in the
//! state of the interval still open at `t`.
//!
//! The timeline delivers an interval when it ends, but a call's enter and exit when
//! they happen, so the open interval's state is not delivered yet when a call enters
//! or leaves. The join therefore buffers what the timeline outputs for one record and
//! settles it after [`Timeline::push`] returns: the open state at an enter or exit is
//! the state of the next interval of that thread delivered for the same record, or,
//! if none was, the thread's current state ([`Timeline::current`]). Both are exact.
//!
//! The five state parts of every call add up to its wall time exactly (integer
//! nanoseconds): the totals partition the thread's life. A call's exclusive parts are
//! its inclusive parts minus the inclusive parts of the calls nested directly in it.
//! The CPU part equals the timeline's own [`CallExit::cpu_ns`]; the join counts any
//! disagreement ([`JoinStats::cpu_disagreements`]) as a self-check.
//!
//! Monitor contention is the overlap of the call with its thread's contended monitor
//! waits; GC overlap is its overlap with its process's garbage collections. Both are
//! cumulative clocks too, read at enter and exit.

use rustc_hash::FxHashMap;
use sonda_timeline::{
    CallEnter, CallExit, Edge, ExitKind, Frame, GcSpan, Interval, MonitorWait, Sink, ThreadIx,
    ThreadState, Timeline,
};
use sonda_trace::{Pid, Record, Tid, Time};

use crate::parts::Parts;

/// One finished call with its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallRecord {
    /// The method (or native function).
    pub frame: Frame,
    /// The thread.
    pub thread: ThreadIx,
    /// Its kernel thread id.
    pub tid: Tid,
    /// Its process.
    pub pid: Pid,
    /// When the call entered.
    pub begin: Time,
    /// When it left.
    pub end: Time,
    /// Stack depth of the call (1 = outermost instrumented call of its thread).
    pub depth: usize,
    /// How it ended.
    pub kind: ExitKind,
    /// Its parts, nested instrumented calls included.
    pub inclusive: Parts,
    /// Its parts, nested instrumented calls excluded.
    pub exclusive: Parts,
    /// Blocked phases in the call, nested calls included: maximal spells of `S`/`D`
    /// between two stretches on a CPU. The call ran on a CPU once more than this
    /// (it enters and leaves running): its CPU visits, as a model needs them.
    pub blocked_phases: u32,
    /// Its time on a CPU (running or stolen, as [`Parts::on_cpu`]) before its first
    /// blocked phase: its first CPU visit, the whole of it for a call that never
    /// blocked. A call's visits are seldom alike (ServiceDemo's checkout: 2.2 ms of
    /// work, then four visits of 20-45 us after each of its blocks), and how long a
    /// visit waits for a CPU depends on its length.
    pub first_visit_ns: u64,
}

/// What the join receives besides finished calls: the hooks the statistics need.
pub trait CallSink {
    /// A call finished.
    fn call(&mut self, call: &CallRecord);
    /// A call began (arrivals, calls in flight).
    fn enter(&mut self, _enter: &CallEnter, _pid: Pid) {}
    /// A thread's state interval ended (the process's CPU time).
    fn interval(&mut self, _iv: &Interval, _pid: Pid) {}
}

/// The join's self-checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JoinStats {
    /// Calls whose CPU part differs from the timeline's own running time inside the
    /// call (should be 0).
    pub cpu_disagreements: u64,
    /// Exits that did not match the join's own stack (should be 0).
    pub unmatched_exits: u64,
}

/// Cumulative clocks of one thread at one instant.
#[derive(Clone, Copy, Debug, Default)]
struct Snapshot {
    states: [u64; ThreadState::COUNT],
    monitor: u64,
    gc: u64,
    /// Blocked phases begun so far.
    phases: u64,
}

#[derive(Clone, Copy, Debug)]
struct OpenCall {
    frame: Frame,
    begin: Time,
    at_enter: Snapshot,
    /// Inclusive parts of the calls nested directly in this one, closed so far.
    children: Parts,
    /// The thread's time on a CPU (running and stolen, cumulative) where the call's
    /// first blocked phase began, once it has.
    on_cpu_at_first_block: Option<u64>,
}

#[derive(Debug)]
struct ThreadJoin {
    pid: Pid,
    totals: [u64; ThreadState::COUNT],
    covered: Time,
    /// Blocked phases begun up to `covered`, and whether the thread is in one there
    /// (its last interval was `S` or `D`, not ended by a stretch on a CPU).
    phases: u64,
    in_blocked: bool,
    monitor_closed: u64,
    monitor_open: Option<Time>,
    stack: Vec<OpenCall>,
}

impl ThreadJoin {
    /// A thread of `pid` whose clocks start at `origin`.
    fn new(pid: Pid, origin: Time) -> ThreadJoin {
        ThreadJoin {
            pid,
            totals: [0; ThreadState::COUNT],
            covered: origin,
            phases: 0,
            in_blocked: false,
            monitor_closed: 0,
            monitor_open: None,
            stack: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct GcClock {
    closed: u64,
    open: Option<Time>,
}

impl GcClock {
    fn at(&self, t: Time) -> u64 {
        self.closed + self.open.map_or(0, |b| t.since(b))
    }
}

/// What the timeline output for one record, kept until it is settled.
#[derive(Clone, Copy, Debug)]
enum Out {
    Interval(Interval),
    Enter(CallEnter),
    Exit(CallExit),
    Gc(GcSpan),
    Monitor(MonitorWait),
}

/// The per-call join. Drive it with [`CallJoin::push`] for every record and
/// [`CallJoin::finish`] at the end, instead of calling the timeline directly; or make
/// it the timeline's sink and call [`CallJoin::settle`] after each push and after the
/// finish (what `sonda_timeline::Trace::drive_with` lets a consumer do).
#[derive(Debug)]
pub struct CallJoin {
    threads: Vec<ThreadJoin>,
    gc: FxHashMap<Pid, GcClock>,
    buf: Vec<Out>,
    open_state: Vec<Option<ThreadState>>,
    stats: JoinStats,
}

impl Sink for CallJoin {
    fn interval(&mut self, iv: &Interval) {
        self.buf.push(Out::Interval(*iv));
    }
    fn enter(&mut self, call: &CallEnter) {
        self.buf.push(Out::Enter(*call));
    }
    fn exit(&mut self, call: &CallExit) {
        self.buf.push(Out::Exit(*call));
    }
    fn gc(&mut self, gc: &GcSpan) {
        self.buf.push(Out::Gc(*gc));
    }
    fn monitor(&mut self, wait: &MonitorWait) {
        self.buf.push(Out::Monitor(*wait));
    }
}

impl CallJoin {
    /// A join for a timeline over threads whose processes are `pids`, in the
    /// timeline's thread order, starting at `origin`.
    pub fn new(origin: Time, pids: impl IntoIterator<Item = Pid>) -> CallJoin {
        CallJoin {
            threads: pids
                .into_iter()
                .map(|pid| ThreadJoin::new(pid, origin))
                .collect(),
            gc: FxHashMap::default(),
            buf: Vec::new(),
            open_state: Vec::new(),
            stats: JoinStats::default(),
        }
    }

    /// Joins one more thread, of process `pid`, starting at `origin`: the companion of
    /// `Timeline::add_thread`, for a join that learns of threads as they come. Call it
    /// each time the timeline gets a new thread, so that both keep one thread order.
    pub fn add_thread(&mut self, origin: Time, pid: Pid) {
        self.threads.push(ThreadJoin::new(pid, origin));
    }

    /// Threads joined (the timeline's thread count when they are kept in step).
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// The self-checks so far.
    pub fn stats(&self) -> JoinStats {
        self.stats
    }

    /// Feeds one record (in the trace's order) through `timeline` and the join.
    pub fn push(&mut self, timeline: &mut Timeline, record: &Record, out: &mut impl CallSink) {
        timeline.push(record, self);
        self.settle(timeline, out);
    }

    /// Ends the timeline and the join at `end`; calls still open are closed there.
    pub fn finish(&mut self, timeline: &mut Timeline, end: Time, out: &mut impl CallSink) {
        timeline.finish(end, self);
        self.settle(timeline, out);
    }

    /// Settles what the timeline delivered into the join for the last record (or for
    /// [`Timeline::finish`]) and passes the finished calls to `out`. For a driver that
    /// pushes the records with the join as the timeline's sink: call it after each
    /// push and after the finish ([`CallJoin::push`] and [`CallJoin::finish`] do both
    /// steps).
    pub fn settle(&mut self, timeline: &Timeline, out: &mut impl CallSink) {
        if self.buf.is_empty() {
            return;
        }
        // Backwards: the state of the next interval each thread delivers after each
        // enter or exit, which is the state open at that enter or exit.
        self.open_state.clear();
        self.open_state.resize(self.buf.len(), None);
        let mut next: Vec<(ThreadIx, ThreadState)> = Vec::new();
        for (i, o) in self.buf.iter().enumerate().rev() {
            match o {
                Out::Interval(iv) => match next.iter_mut().find(|(t, _)| *t == iv.thread) {
                    Some(e) => e.1 = iv.state,
                    None => next.push((iv.thread, iv.state)),
                },
                Out::Enter(CallEnter { at, .. }) | Out::Exit(CallExit { at, .. }) => {
                    self.open_state[i] = next.iter().find(|(t, _)| *t == at.thread).map(|e| e.1);
                }
                _ => {}
            }
        }
        let buf = std::mem::take(&mut self.buf);
        for (i, o) in buf.iter().enumerate() {
            match o {
                Out::Interval(iv) => {
                    let Some(t) = self.threads.get_mut(iv.thread.get()) else {
                        continue;
                    };
                    t.totals[iv.state.index()] += iv.end.since(iv.begin);
                    t.covered = iv.end;
                    match iv.state {
                        ThreadState::Sleeping | ThreadState::Uninterruptible => {
                            if !t.in_blocked {
                                t.phases += 1;
                                // A phase begins: the first visit of every open call
                                // that had none ends here.
                                let on_cpu = on_cpu_of(&t.totals);
                                for call in t.stack.iter_mut().rev() {
                                    if call.on_cpu_at_first_block.is_some() {
                                        break;
                                    }
                                    call.on_cpu_at_first_block = Some(on_cpu);
                                }
                            }
                            t.in_blocked = true;
                        }
                        ThreadState::Running | ThreadState::Stolen => t.in_blocked = false,
                        _ => {}
                    }
                    out.interval(iv, t.pid);
                }
                Out::Enter(e) => {
                    let state =
                        self.open_state[i].unwrap_or_else(|| timeline.current(e.at.thread).0);
                    let Some(snap) = self.snapshot(e.at.thread, e.at.time, state) else {
                        continue;
                    };
                    let t = &mut self.threads[e.at.thread.get()];
                    t.stack.push(OpenCall {
                        frame: e.frame,
                        begin: e.at.time,
                        at_enter: snap,
                        children: Parts::default(),
                        on_cpu_at_first_block: None,
                    });
                    out.enter(e, t.pid);
                }
                Out::Exit(x) => {
                    let state =
                        self.open_state[i].unwrap_or_else(|| timeline.current(x.at.thread).0);
                    if let Some(call) = self.exit(x, state) {
                        out.call(&call);
                    }
                }
                Out::Gc(g) => {
                    let clock = self.gc.entry(g.pid).or_default();
                    match g.edge {
                        Edge::Begin => clock.open = Some(g.time),
                        Edge::End { begin, .. } => {
                            clock.closed += g.time.since(begin);
                            clock.open = None;
                        }
                    }
                }
                Out::Monitor(w) => {
                    let Some(t) = self.threads.get_mut(w.at.thread.get()) else {
                        continue;
                    };
                    match w.edge {
                        Edge::Begin => t.monitor_open = Some(w.at.time),
                        Edge::End { begin, .. } => {
                            t.monitor_closed += w.at.time.since(begin);
                            t.monitor_open = None;
                        }
                    }
                }
            }
        }
        self.buf = buf;
        self.buf.clear();
    }

    /// The thread's cumulative clocks at `time`, with `open` the state of its
    /// interval still open then.
    fn snapshot(&self, thread: ThreadIx, time: Time, open: ThreadState) -> Option<Snapshot> {
        let t = self.threads.get(thread.get())?;
        let mut states = t.totals;
        states[open.index()] += time.since(t.covered);
        let opens_phase = matches!(open, ThreadState::Sleeping | ThreadState::Uninterruptible)
            && !t.in_blocked
            && time > t.covered;
        Some(Snapshot {
            states,
            phases: t.phases + u64::from(opens_phase),
            monitor: t.monitor_closed + t.monitor_open.map_or(0, |b| time.since(b)),
            gc: self.gc.get(&t.pid).map_or(0, |c| c.at(time)),
        })
    }

    fn exit(&mut self, x: &CallExit, open: ThreadState) -> Option<CallRecord> {
        let ix = x.at.thread;
        let snap = self.snapshot(ix, x.at.time, open)?;
        let t = &mut self.threads[ix.get()];
        let Some(call) = t.stack.pop() else {
            self.stats.unmatched_exits += 1;
            return None;
        };
        if call.frame != x.frame || t.stack.len() + 1 != x.depth {
            self.stats.unmatched_exits += 1;
        }
        let mut inclusive = Parts {
            wall: x.at.time.since(call.begin),
            monitor: snap.monitor.saturating_sub(call.at_enter.monitor),
            gc: snap.gc.saturating_sub(call.at_enter.gc),
            ..Parts::default()
        };
        for s in ThreadState::ALL {
            let ns = snap.states[s.index()].saturating_sub(call.at_enter.states[s.index()]);
            inclusive.add_state(s, ns);
        }
        if inclusive.cpu != x.cpu_ns {
            self.stats.cpu_disagreements += 1;
        }
        let exclusive = inclusive.minus(&call.children);
        if let Some(parent) = t.stack.last_mut() {
            parent.children = parent.children.plus(&inclusive);
        }
        Some(CallRecord {
            frame: call.frame,
            thread: ix,
            tid: x.at.tid,
            pid: t.pid,
            begin: call.begin,
            end: x.at.time,
            depth: x.depth,
            kind: x.kind,
            inclusive,
            exclusive,
            blocked_phases: u32::try_from(snap.phases.saturating_sub(call.at_enter.phases))
                .unwrap_or(u32::MAX),
            first_visit_ns: call.on_cpu_at_first_block.map_or(inclusive.on_cpu(), |c| {
                c.saturating_sub(on_cpu_of(&call.at_enter.states))
            }),
        })
    }
}

/// Running and stolen time of cumulative per-state clocks (what [`Parts::on_cpu`] adds).
fn on_cpu_of(states: &[u64; ThreadState::COUNT]) -> u64 {
    states[ThreadState::Running.index()] + states[ThreadState::Stolen.index()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_timeline::Timeline;
    use sonda_trace::{Cpu, Event, Source};

    #[derive(Default)]
    struct Calls(Vec<CallRecord>);
    impl CallSink for Calls {
        fn call(&mut self, c: &CallRecord) {
            self.0.push(*c);
        }
    }

    fn rec(t: u64, event: Event) -> Record {
        Record {
            time: Time(t),
            event,
        }
    }

    fn switch(cpu: u16, prev: u32, prev_state: u64, next: u32) -> Event {
        Event::Switch {
            cpu: Cpu(cpu),
            prev: Tid(prev),
            prev_state,
            next: Tid(next),
            charge: None,
        }
    }

    /// Thread 10 runs A (which calls B), is preempted, sleeps, does I/O; thread 11
    /// takes the CPU in between.
    #[test]
    fn nested_calls_split_by_state() {
        let records = vec![
            rec(
                100,
                Event::Enter {
                    tid: Tid(10),
                    method: 1,
                },
            ),
            rec(
                150,
                Event::Enter {
                    tid: Tid(10),
                    method: 2,
                },
            ),
            rec(200, switch(0, 10, 0x100, 11)), // preempted in B
            rec(260, switch(0, 11, 0x1, 10)),
            rec(
                300,
                Event::Leave {
                    tid: Tid(10),
                    method: 2,
                    exception: false,
                },
            ),
            rec(320, switch(0, 10, 0x1, 0)), // sleeps in A
            rec(
                400,
                Event::Wakeup {
                    target: Cpu(0),
                    wakee: Tid(10),
                    new_task: false,
                    waking: None,
                },
            ),
            rec(410, switch(0, 0, 0, 10)),
            rec(450, switch(0, 10, 0x2, 0)), // D
            rec(
                500,
                Event::Wakeup {
                    target: Cpu(0),
                    wakee: Tid(10),
                    new_task: false,
                    waking: None,
                },
            ),
            rec(500, switch(0, 0, 0, 10)),
            rec(
                520,
                Event::Leave {
                    tid: Tid(10),
                    method: 1,
                    exception: false,
                },
            ),
            rec(600, switch(0, 10, 0x1, 0)),
        ];
        let mut tl = Timeline::new(Time(0), Source::Tracepoints, [Tid(10), Tid(11)]);
        let mut join = CallJoin::new(Time(0), [Pid(1), Pid(1)]);
        let mut calls = Calls::default();
        for r in &records {
            join.push(&mut tl, r, &mut calls);
        }
        join.finish(&mut tl, Time(700), &mut calls);
        assert_eq!(join.stats(), JoinStats::default());
        let [b, a] = [calls.0[0], calls.0[1]];
        assert_eq!(b.frame, Frame::Method(2));
        assert_eq!(
            b.inclusive,
            Parts {
                wall: 150,
                cpu: 90,
                runnable: 60,
                ..Parts::default()
            }
        );
        assert_eq!(b.exclusive, b.inclusive);
        assert_eq!(
            a.inclusive,
            Parts {
                wall: 420,
                cpu: 50 + 90 + 20 + 40 + 20,
                runnable: 60 + 10,
                sleeping: 80,
                uninterruptible: 50,
                ..Parts::default()
            }
        );
        assert_eq!(a.inclusive.states_sum(), a.inclusive.wall);
        assert_eq!(a.exclusive.wall, 420 - 150);
        assert_eq!(a.exclusive.cpu, a.inclusive.cpu - 90);
        assert_eq!(a.exclusive.runnable, 10);
        assert_eq!(a.depth, 1);
        assert_eq!(b.depth, 2);
        // A slept, then was in I/O, each phase between two stretches on the CPU; B
        // was only preempted.
        assert_eq!((a.blocked_phases, b.blocked_phases), (2, 0));
        // A's first visit: its CPU before the sleep at 320 (B's included); B never
        // blocked, so its first visit is all of its CPU.
        assert_eq!((a.first_visit_ns, b.first_visit_ns), (50 + 90 + 20, 90));
    }

    #[test]
    fn monitor_and_gc_are_parts_not_extra() {
        let records = vec![
            rec(
                0,
                Event::Enter {
                    tid: Tid(10),
                    method: 1,
                },
            ),
            rec(
                10,
                Event::MonitorContended {
                    tid: Tid(10),
                    class: 3,
                },
            ),
            rec(20, switch(0, 10, 0x1, 0)),
            rec(
                30,
                Event::GcStart {
                    pid: Pid(1),
                    tid: Tid(12),
                },
            ),
            rec(
                50,
                Event::GcEnd {
                    pid: Pid(1),
                    tid: Tid(12),
                },
            ),
            rec(
                60,
                Event::Wakeup {
                    target: Cpu(0),
                    wakee: Tid(10),
                    new_task: false,
                    waking: None,
                },
            ),
            rec(70, switch(0, 0, 0, 10)),
            rec(
                75,
                Event::MonitorEntered {
                    tid: Tid(10),
                    class: 3,
                },
            ),
            rec(
                90,
                Event::Leave {
                    tid: Tid(10),
                    method: 1,
                    exception: false,
                },
            ),
        ];
        let mut tl = Timeline::new(Time(0), Source::Tracepoints, [Tid(10), Tid(12)]);
        let mut join = CallJoin::new(Time(0), [Pid(1), Pid(1)]);
        let mut calls = Calls::default();
        for r in &records {
            join.push(&mut tl, r, &mut calls);
        }
        join.finish(&mut tl, Time(100), &mut calls);
        let c = calls.0[0];
        assert_eq!(c.inclusive.wall, 90);
        assert_eq!(c.inclusive.states_sum(), 90);
        assert_eq!(c.inclusive.monitor, 65);
        assert_eq!(c.inclusive.gc, 20);
        assert_eq!(
            (c.inclusive.cpu, c.inclusive.sleeping, c.inclusive.runnable),
            (20 + 20, 40, 10)
        );
    }

    #[test]
    fn calls_open_at_the_end_are_closed_there() {
        let records = vec![rec(
            5,
            Event::Enter {
                tid: Tid(10),
                method: 1,
            },
        )];
        let mut tl = Timeline::new(Time(0), Source::Tracepoints, [Tid(10)]);
        let mut join = CallJoin::new(Time(0), [Pid(1)]);
        let mut calls = Calls::default();
        for r in &records {
            join.push(&mut tl, r, &mut calls);
        }
        join.finish(&mut tl, Time(25), &mut calls);
        assert_eq!(calls.0.len(), 1);
        assert_eq!(calls.0[0].kind, ExitKind::Unfinished);
        assert_eq!(calls.0[0].inclusive.cpu, 20);
        assert_eq!(calls.0[0].inclusive.wall, 20);
    }
}
