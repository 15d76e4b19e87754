//! The whole-trace state machine: feeds each record to the state machines of the
//! threads it names ([`crate::sched`], [`crate::stack`], [`crate::jvm`]) and hands what
//! they produce to a [`Sink`].
//!
//! Streaming: [`Timeline::push`] takes one record at a time, in the trace's time order,
//! and keeps only per-thread state (the open interval, the call stack, a pending wake
//! edge), so memory grows with the number of threads and stack depths, never with the
//! trace's length. Each record costs one or two hash look-ups and a few comparisons.

use rustc_hash::FxHashMap;
use sonda_trace::{Cpu, Event, Pid, Record, Source, SwitchOut, Tid, Time};

use crate::jvm::{GcTracker, MonitorWaitOpen};
use crate::output::{
    At, CallEnter, CallExit, Edge, ExitKind, Frame, GcSpan, Migration, MonitorWait, OnCpu, Sink,
    ThreadIx, UserValue, WakeEdge,
};
use crate::procfs::Sample;
use crate::sched::{evidence, Sched, ThreadStats};
use crate::stack::{CallStack, Closed, LeaveOutcome};
use crate::state::ThreadState;

/// What the timeline had to repair, and what made repairs necessary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repairs {
    /// Calls closed because a leave of a call below them came first.
    pub unwound_calls: u64,
    /// Leaves ignored because their call was not on the stack.
    pub unmatched_leaves: u64,
    /// Calls still open at their thread's end or the trace's end, closed there.
    pub unfinished_calls: u64,
    /// Enters not pushed because the stack was [`crate::stack::MAX_DEPTH`] deep.
    pub too_deep: u64,
    /// Garbage-collection begins or ends that did not pair.
    pub unmatched_gc: u64,
    /// Monitor waits without a begin, or begun again before their end.
    pub unmatched_monitor: u64,
    /// Kernel records that contradicted a thread's state (summed over threads).
    pub sched_conflicts: u64,
    /// Threads no record named: their state is presumed for the whole trace.
    pub unseen_threads: u64,
    /// Agent records of a thread after the kernel said it ended, ignored.
    pub after_end: u64,
    /// Wake edges dropped because their wakee's interval was written out before it ran.
    pub dropped_wake_edges: u64,
    /// Kernel records lost (sum of `Event::KernelLost`).
    pub kernel_lost: u64,
    /// Agent records dropped (sum of `Event::Dropped`).
    pub agent_dropped: u64,
    /// Calls of methods the overhead budget removed (`Meta::MethodRemoved`) whose leave
    /// never came: closed as [`ExitKind::Unfinished`] where their caller left, since
    /// no probe was left to record the end, rather than counted as unwound (which
    /// says events were lost). Those closed at the thread's or trace's end count in
    /// `unfinished_calls` as any.
    pub removed_calls: u64,
}

/// A wake edge waiting for its wakee to run.
#[derive(Clone, Copy, Debug)]
struct PendingWake {
    waker: Tid,
    waker_thread: Option<ThreadIx>,
    waker_cpu: Cpu,
    sent: Time,
}

/// Everything the timeline keeps about one thread.
#[derive(Debug)]
struct Track {
    sched: Sched,
    stack: CallStack,
    monitor: Option<MonitorWaitOpen>,
    wake: Option<PendingWake>,
    /// Its kernel name, when a `task_rename` changed it.
    renamed: Option<String>,
    /// Whether [`Timeline::presume_from`] already set its presumed state.
    presumed: bool,
}

/// Turns a trace's timed records into intervals, calls, spans and edges. See the crate
/// documentation for the rules.
#[derive(Debug)]
pub struct Timeline {
    source: Source,
    origin: Time,
    index: FxHashMap<Tid, ThreadIx>,
    tracks: Vec<Track>,
    gc: GcTracker,
    repairs: Repairs,
    unpresumed: usize,
    /// The latest `/proc` sampling round (the time of its samples), and the one before.
    rounds: (Option<Time>, Option<Time>),
    /// Whether an `Event::Migrate` came: the trace counts migrations itself.
    saw_migrate: bool,
    /// See [`Timeline::switches_dated_by_clock`].
    clock_dated: bool,
    /// Methods whose probes the overhead budget removed, with when
    /// (`Meta::MethodRemoved`; see [`Timeline::removed_methods`]).
    removed: FxHashMap<u32, Time>,
}

/// The threads a record names: up to two.
fn named(event: &Event) -> [Option<Tid>; 2] {
    match *event {
        Event::Switch { prev, next, .. } => [Some(prev), Some(next)],
        Event::Waking { waker, wakee, .. } => [Some(waker), Some(wakee)],
        Event::NewTask { parent, child, .. } => [Some(parent), Some(child)],
        _ => [event.tid(), None],
    }
}

impl Timeline {
    /// A timeline over `threads` (the followed threads, e.g. every `Meta::Thread` of the
    /// trace; the order sets each one's [`ThreadIx`]), starting at `origin`, with states
    /// from `source`. Records about other threads are ignored.
    pub fn new(origin: Time, source: Source, threads: impl IntoIterator<Item = Tid>) -> Timeline {
        let mut index = FxHashMap::default();
        let mut tracks = Vec::new();
        for tid in threads {
            if index.contains_key(&tid) {
                continue;
            }
            let ix = ThreadIx(tracks.len() as u32);
            index.insert(tid, ix);
            tracks.push(Track {
                sched: Sched::new(ix, tid, origin),
                stack: CallStack::default(),
                monitor: None,
                wake: None,
                renamed: None,
                presumed: false,
            });
        }
        let unpresumed = tracks.len();
        Timeline {
            source,
            origin,
            index,
            tracks,
            gc: GcTracker::default(),
            repairs: Repairs::default(),
            unpresumed,
            rounds: (None, None),
            saw_migrate: false,
            clock_dated: false,
            removed: FxHashMap::default(),
        }
    }

    /// Tells the timeline which methods the agent's overhead budget removed and when
    /// (the trace's `Meta::MethodRemoved` records, `TraceMeta::removals`). Their calls
    /// recorded before stay as they are; a frame of such a method that is still open
    /// after its removal when a call below it leaves is closed as unfinished there (its
    /// probes were gone, so its leave could not be recorded), not as a repair.
    pub fn removed_methods(&mut self, removed: impl IntoIterator<Item = (u32, Time)>) {
        for (id, at) in removed {
            let t = self.removed.entry(id).or_insert(at);
            *t = (*t).min(at);
        }
    }

    /// The trace's switches are dated by the scheduler's clock (the BPF recorder reads
    /// the clock each switch was made by and dates it so, `TraceMeta::switches_dated_by_clock`):
    /// the rules that infer that clock from the threads' CPU-time charges
    /// (the stale clock of `sched.rs`) are not applied. They would misread a charge
    /// from another CPU's wakeup followed, milliseconds later, by a switch on a clock
    /// updated after the hypervisor stopped the CPU (measured: the JVM main thread
    /// shown running for the 2.7 ms it waited behind such a switch).
    pub fn switches_dated_by_clock(&mut self) {
        self.clock_dated = true;
        for t in &mut self.tracks {
            t.sched.set_clock_dated();
        }
    }

    /// Follows one more thread from now on, for a consumer that learns of threads as
    /// they come (live metrics of a recording in progress) instead of from a trace's
    /// metadata: the thread gets the next [`ThreadIx`] (or keeps its own, if already
    /// followed), its state before its first record is presumed as for any thread.
    pub fn add_thread(&mut self, tid: Tid) -> ThreadIx {
        if let Some(&ix) = self.index.get(&tid) {
            return ix;
        }
        let ix = ThreadIx(self.tracks.len() as u32);
        self.index.insert(tid, ix);
        let mut sched = Sched::new(ix, tid, self.origin);
        if self.clock_dated {
            sched.set_clock_dated();
        }
        self.tracks.push(Track {
            sched,
            stack: CallStack::default(),
            monitor: None,
            wake: None,
            renamed: None,
            presumed: false,
        });
        self.unpresumed += 1;
        ix
    }

    /// The time origin.
    pub fn origin(&self) -> Time {
        self.origin
    }

    /// Number of threads.
    pub fn len(&self) -> usize {
        self.tracks.len()
    }

    /// Whether there are no threads.
    pub fn is_empty(&self) -> bool {
        self.tracks.is_empty()
    }

    /// The position of `tid`, if followed.
    pub fn thread(&self, tid: Tid) -> Option<ThreadIx> {
        self.index.get(&tid).copied()
    }

    /// What was counted for thread `ix` (complete after [`Timeline::finish`]).
    pub fn stats(&self, ix: ThreadIx) -> &ThreadStats {
        &self.tracks[ix.get()].sched.stats
    }

    /// The thread's kernel name after its last `task_rename`, if it was renamed.
    pub fn renamed(&self, ix: ThreadIx) -> Option<&str> {
        self.tracks[ix.get()].renamed.as_deref()
    }

    /// The thread's current state and CPU.
    pub fn current(&self, ix: ThreadIx) -> (ThreadState, Option<Cpu>) {
        let s = &self.tracks[ix.get()].sched;
        (s.state(), s.cpu())
    }

    /// What had to be repaired so far.
    pub fn repairs(&self) -> Repairs {
        let mut r = self.repairs.clone();
        for t in &self.tracks {
            r.sched_conflicts += t.sched.stats.conflicts;
            r.unseen_threads += u64::from(t.sched.stats.unseen);
        }
        r
    }

    /// Look-ahead: uses `record` to set the presumed state of the threads it names
    /// that no earlier record (of this look-ahead) named. A caller that streams the
    /// trace once through this before [`Timeline::push`] makes the states it writes
    /// out before a thread's first record ([`Timeline::cut`]) exact.
    pub fn presume_from(&mut self, record: &Record) {
        for tid in named(&record.event).into_iter().flatten() {
            let Some(&ix) = self.index.get(&tid) else {
                continue;
            };
            let track = &mut self.tracks[ix.get()];
            if track.presumed {
                continue;
            }
            if let Some((state, cpu)) = evidence(&record.event, tid, self.source) {
                track.sched.presume(state, cpu);
                track.presumed = true;
                self.unpresumed -= 1;
            }
        }
    }

    /// Whether every thread has its presumed state (the look-ahead can stop).
    pub fn all_presumed(&self) -> bool {
        self.unpresumed == 0
    }

    /// The earliest time an output not yet delivered can begin at: every interval
    /// still open, and every wake edge not yet received, begins at or after it. Outputs
    /// delivered at their own time are always later.
    pub fn low_water(&self) -> Time {
        let mut low = Time(u64::MAX);
        for t in &self.tracks {
            low = low.min(t.sched.since());
            if let Some(w) = &t.wake {
                low = low.min(w.sent);
            }
        }
        low
    }

    /// Writes out every interval still open up to `at` (and continues it from there),
    /// and drops wake edges sent before `at`, so that [`Timeline::low_water`] is at
    /// least `at`. `at` must not be later than the last record pushed. For consumers
    /// that must emit in begin order with bounded memory; long intervals come out in
    /// pieces.
    pub fn cut(&mut self, at: Time, out: &mut impl Sink) {
        for t in &mut self.tracks {
            t.sched.cut(at, out);
            if t.wake.is_some_and(|w| w.sent < at) {
                t.wake = None;
                self.repairs.dropped_wake_edges += 1;
            }
        }
    }

    /// What is open on thread `ix`: its calls (outermost first) and the monitor class it
    /// waits for. For a consumer that starts its output mid-trace (a time window) and
    /// must open there what began before.
    pub fn open_spans(&self, ix: ThreadIx) -> (impl Iterator<Item = Frame> + '_, Option<u32>) {
        let t = &self.tracks[ix.get()];
        (t.stack.frames(), t.monitor.map(|m| m.class))
    }

    /// The garbage collections in progress: (process, when it began, the thread that
    /// began it, if followed).
    pub fn open_gcs(&self) -> impl Iterator<Item = (Pid, Time, Option<ThreadIx>)> + '_ {
        self.gc
            .open()
            .map(|(pid, begin, tid)| (pid, begin, self.thread(tid)))
    }

    /// Where and when thread `ix` is at `time` (its current CPU).
    pub fn at(&self, ix: ThreadIx, time: Time) -> At {
        self.at_index(ix.get(), time)
    }

    /// The thread `tid`'s index, after applying `event` as its first evidence if no
    /// record named it before.
    fn seen(&mut self, tid: Tid, event: &Event) -> Option<usize> {
        let i = self.index.get(&tid)?.get();
        let sched = &mut self.tracks[i].sched;
        if sched.is_unseen() {
            if let Some((state, cpu)) = evidence(event, tid, self.source) {
                sched.seed(state, cpu);
            }
        }
        Some(i)
    }

    fn at_index(&self, i: usize, time: Time) -> At {
        let s = &self.tracks[i].sched;
        At {
            thread: ThreadIx(i as u32),
            tid: s.tid(),
            time,
            cpu: s.cpu(),
        }
    }

    /// Feeds one record. Records must come in time order. Dispatches by family:
    /// kernel scheduling, calls (Java methods and native functions), JVM events,
    /// and the rest (C API values, loss counts).
    pub fn push(&mut self, record: &Record, out: &mut impl Sink) {
        let (time, event) = (record.time, &record.event);
        match event {
            Event::Switch { .. }
            | Event::Waking { .. }
            | Event::Wakeup { .. }
            | Event::Migrate { .. }
            | Event::CpuTime { .. }
            | Event::NewTask { .. }
            | Event::TaskExit { .. }
            | Event::Rename { .. }
            | Event::Exec { .. }
            | Event::ProcSample { .. }
            | Event::KernelLost { .. } => self.push_kernel(time, event, out),
            Event::Enter { .. }
            | Event::Leave { .. }
            | Event::FuncEnter { .. }
            | Event::FuncLeave { .. } => self.push_call(time, event, out),
            Event::VmInit { .. }
            | Event::VmDeath { .. }
            | Event::ThreadStart { .. }
            | Event::ThreadEnd { .. }
            | Event::GcStart { .. }
            | Event::GcEnd { .. }
            | Event::MonitorContended { .. }
            | Event::MonitorEntered { .. } => self.push_jvm(time, event, out),
            Event::User { .. } | Event::Dropped { .. } => self.push_other(time, event, out),
        }
    }

    /// Kernel scheduling records (tracepoints or `/proc` samples): thread states, CPUs,
    /// wake edges, births, ends, renames, and kernel records lost.
    fn push_kernel(&mut self, time: Time, event: &Event, out: &mut impl Sink) {
        match *event {
            Event::Switch {
                cpu,
                prev,
                prev_state,
                next,
                ..
            } => {
                let next_followed = next.0 != 0 && self.index.contains_key(&next);
                // The kernel's clock for this switch, as the thread leaving shows it.
                let mut clock = None;
                if let Some(i) = self.seen(prev, event) {
                    clock = self.tracks[i].sched.switch_clock(time);
                    let last = self.at_index(i, time);
                    let ends = self.ends_on_switch_out(i, prev_state);
                    if ends {
                        self.close_agent_spans(i, last, out);
                    }
                    let was_running = self.tracks[i].sched.state() == ThreadState::Running
                        && !self.tracks[i].sched.is_ended();
                    self.tracks[i].sched.switch_out(time, cpu, prev_state, out);
                    if was_running {
                        out.on_cpu(&OnCpu {
                            at: last,
                            cpu,
                            starts: false,
                            handover: next_followed,
                        });
                    }
                }
                if let Some(i) = self.seen(next, event) {
                    let before = self.at_index(i, time);
                    let (state, ended) = (
                        self.tracks[i].sched.state(),
                        self.tracks[i].sched.is_ended(),
                    );
                    let from = self.tracks[i]
                        .sched
                        .switch_in_on_clock(time, clock, cpu, out);
                    let at = self.at_index(i, time);
                    if !ended {
                        if let (ThreadState::Running, Some(old)) = (state, before.cpu) {
                            // Its switch-out was lost: it stops on the CPU it was on.
                            out.on_cpu(&OnCpu {
                                at: before,
                                cpu: old,
                                starts: false,
                                handover: old == cpu,
                            });
                        }
                        out.on_cpu(&OnCpu {
                            at,
                            cpu,
                            starts: true,
                            handover: false,
                        });
                    }
                    if let Some(from) = from {
                        out.migration(&Migration { at, from });
                    }
                    if let Some(w) = self.tracks[i].wake.take() {
                        out.wake(&WakeEdge {
                            waker: w.waker,
                            waker_thread: w.waker_thread,
                            waker_cpu: w.waker_cpu,
                            sent: w.sent,
                            received: at,
                        });
                    }
                }
            }
            Event::Waking { cpu, waker, wakee } => {
                let waker_thread = self.seen(waker, event).map(|i| ThreadIx(i as u32));
                if let Some(i) = self.seen(wakee, event) {
                    self.tracks[i].sched.waking();
                    if !self.tracks[i].sched.is_ended() {
                        self.tracks[i].wake = Some(PendingWake {
                            waker,
                            waker_thread,
                            waker_cpu: cpu,
                            sent: time,
                        });
                    }
                }
            }
            Event::Wakeup { target, wakee, .. } => {
                if let Some(i) = self.seen(wakee, event) {
                    self.tracks[i].sched.wakeup(time, target, out);
                }
            }
            Event::Migrate { tid, to, .. } => {
                self.saw_migrate = true;
                if let Some(i) = self.seen(tid, event) {
                    self.tracks[i].sched.migrate(time, to, out);
                }
            }
            Event::CpuTime { tid, ns, by } => {
                if let Some(i) = self.seen(tid, event) {
                    self.tracks[i].sched.charge(time, ns, by, out);
                }
            }
            Event::NewTask { parent, child, .. } => {
                self.seen(parent, event);
                if let Some(i) = self.seen(child, event) {
                    self.tracks[i].sched.new_task(time, out);
                }
            }
            Event::TaskExit { tid } => {
                if let Some(i) = self.seen(tid, event) {
                    let last = self.at_index(i, time);
                    if self.source == Source::Procfs && !self.tracks[i].sched.is_ended() {
                        self.close_agent_spans(i, last, out);
                    }
                    self.tracks[i].sched.task_exit(time, self.source, out);
                }
            }
            Event::Rename { tid, ref comm } => {
                if let Some(i) = self.seen(tid, event) {
                    self.tracks[i].renamed = Some(comm.clone());
                }
            }
            Event::ProcSample {
                tid,
                cpu,
                state,
                run_ns,
                wait_ns,
            } => {
                // Every sample of a round has the round's time.
                if self.rounds.0.is_none_or(|latest| time > latest) {
                    self.rounds = (Some(time), self.rounds.0);
                }
                let Some(i) = self.seen(tid, event) else {
                    return;
                };
                // With tracepoints a sample is only evidence of an unseen thread's state
                // (applied by `seen`); switches say the rest exactly.
                if self.source != Source::Procfs {
                    return;
                }
                let Some(state) = SwitchOut::from_proc_letter(state) else {
                    self.tracks[i].sched.stats.conflicts += 1;
                    return;
                };
                let last = self.at_index(i, time);
                if state == SwitchOut::Dead && !self.tracks[i].sched.is_ended() {
                    self.close_agent_spans(i, last, out);
                }
                self.tracks[i].sched.sample(
                    Sample {
                        time,
                        state,
                        cpu,
                        run_ns,
                        wait_ns,
                    },
                    self.rounds.1,
                    out,
                );
            }
            Event::KernelLost { count, .. } => self.repairs.kernel_lost += count,
            Event::Exec { .. } => {}
            // Other families: dispatched elsewhere by `push`.
            _ => {}
        }
    }

    /// Enters and leaves of Java methods and native functions.
    fn push_call(&mut self, time: Time, event: &Event, out: &mut impl Sink) {
        match *event {
            Event::Enter { tid, method } => {
                self.enter(tid, Frame::Method(method), time, event, out)
            }
            Event::FuncEnter { tid, addr } => self.enter(tid, Frame::Func(addr), time, event, out),
            Event::Leave {
                tid,
                method,
                exception,
            } => self.leave(tid, Frame::Method(method), exception, time, event, out),
            Event::FuncLeave { tid, addr } => {
                self.leave(tid, Frame::Func(addr), false, time, event, out)
            }
            // Other families: dispatched elsewhere by `push`.
            _ => {}
        }
    }

    /// JVM events: garbage collections, contended monitors, thread and VM lifecycle.
    fn push_jvm(&mut self, time: Time, event: &Event, out: &mut impl Sink) {
        match *event {
            Event::ThreadStart { tid } => {
                self.seen(tid, event);
            }
            Event::ThreadEnd { tid } => {
                if let Some(i) = self.agent_thread(tid, event) {
                    let at = self.at_index(i, time);
                    self.close_agent_spans(i, at, out);
                }
            }
            Event::GcStart { pid, tid } => {
                let at = self.seen(tid, event).map(|i| self.at_index(i, time));
                if self.gc.start(pid, tid, time) {
                    out.gc(&GcSpan {
                        pid,
                        at,
                        time,
                        edge: Edge::Begin,
                    });
                } else {
                    self.repairs.unmatched_gc += 1;
                }
            }
            Event::GcEnd { pid, tid } => {
                self.seen(tid, event);
                match self.gc.end(pid) {
                    Some((begin, started_on)) => {
                        // On the thread that began it, so that begin and end pair up.
                        let at = self
                            .thread(started_on)
                            .map(|ix| self.at_index(ix.get(), time));
                        out.gc(&GcSpan {
                            pid,
                            at,
                            time,
                            edge: Edge::End {
                                begin,
                                unfinished: false,
                            },
                        });
                    }
                    None => self.repairs.unmatched_gc += 1,
                }
            }
            Event::MonitorContended { tid, class } => {
                if let Some(i) = self.agent_thread(tid, event) {
                    let at = self.at_index(i, time);
                    if let Some(open) = self.tracks[i].monitor.take() {
                        self.repairs.unmatched_monitor += 1;
                        out.monitor(&MonitorWait {
                            at,
                            class: open.class,
                            edge: Edge::End {
                                begin: open.begin,
                                unfinished: true,
                            },
                        });
                    }
                    self.tracks[i].monitor = Some(MonitorWaitOpen { class, begin: time });
                    out.monitor(&MonitorWait {
                        at,
                        class,
                        edge: Edge::Begin,
                    });
                }
            }
            Event::MonitorEntered { tid, .. } => {
                if let Some(i) = self.agent_thread(tid, event) {
                    let at = self.at_index(i, time);
                    match self.tracks[i].monitor.take() {
                        Some(open) => out.monitor(&MonitorWait {
                            at,
                            class: open.class,
                            edge: Edge::End {
                                begin: open.begin,
                                unfinished: false,
                            },
                        }),
                        None => self.repairs.unmatched_monitor += 1,
                    }
                }
            }
            Event::VmInit { .. } | Event::VmDeath { .. } => {}
            // Other families: dispatched elsewhere by `push`.
            _ => {}
        }
    }

    /// C API values, and agent records dropped.
    fn push_other(&mut self, time: Time, event: &Event, out: &mut impl Sink) {
        match *event {
            Event::User { tid, kind, value } => {
                if let Some(i) = self.agent_thread(tid, event) {
                    out.user(&UserValue {
                        at: self.at_index(i, time),
                        kind,
                        value,
                    });
                }
            }
            Event::Dropped { tid, count } => {
                self.repairs.agent_dropped += count;
                if let Some(i) = self.seen(tid, event) {
                    self.tracks[i].sched.stats.dropped += count;
                }
            }
            // Other families: dispatched elsewhere by `push`.
            _ => {}
        }
    }

    /// The thread of an agent record, unless the kernel said it ended (then counted).
    fn agent_thread(&mut self, tid: Tid, event: &Event) -> Option<usize> {
        let i = self.seen(tid, event)?;
        if self.tracks[i].sched.is_ended() {
            self.repairs.after_end += 1;
            return None;
        }
        Some(i)
    }

    fn ends_on_switch_out(&self, i: usize, prev_state: u64) -> bool {
        let s = &self.tracks[i].sched;
        !s.is_ended() && SwitchOut::from_prev_state(prev_state) == SwitchOut::Dead
    }

    fn enter(&mut self, tid: Tid, frame: Frame, time: Time, event: &Event, out: &mut impl Sink) {
        let Some(i) = self.agent_thread(tid, event) else {
            return;
        };
        let run = self.tracks[i].sched.running_ns(time);
        match self.tracks[i].stack.enter(frame, time, run) {
            Some(depth) => out.enter(&CallEnter {
                at: self.at_index(i, time),
                frame,
                depth,
            }),
            None => self.repairs.too_deep += 1,
        }
    }

    fn leave(
        &mut self,
        tid: Tid,
        frame: Frame,
        exception: bool,
        time: Time,
        event: &Event,
        out: &mut impl Sink,
    ) {
        let Some(i) = self.agent_thread(tid, event) else {
            return;
        };
        let at = self.at_index(i, time);
        let run = self.tracks[i].sched.running_ns(time);
        let removed = &self.removed;
        let mut removed_calls = 0;
        let outcome = self.tracks[i]
            .stack
            .leave(frame, exception, time, run, |mut c| {
                let gone = match c.frame {
                    Frame::Method(id) => removed.get(&id).is_some_and(|&r| r <= time),
                    Frame::Func(_) => false,
                };
                if c.kind == ExitKind::Unwound && gone {
                    c.kind = ExitKind::Unfinished;
                    removed_calls += 1;
                }
                out.exit(&exit(at, c))
            });
        match outcome {
            LeaveOutcome::Matched { unwound } => {
                self.repairs.unwound_calls += unwound as u64 - removed_calls;
                self.repairs.removed_calls += removed_calls;
            }
            LeaveOutcome::Unmatched => self.repairs.unmatched_leaves += 1,
        }
    }

    /// Closes the thread's open calls and monitor wait at `at` (its end, or the
    /// trace's): they are unfinished.
    fn close_agent_spans(&mut self, i: usize, at: At, out: &mut impl Sink) {
        let run = self.tracks[i].sched.running_ns(at.time);
        let n = self.tracks[i]
            .stack
            .close_all(at.time, run, |c| out.exit(&exit(at, c)));
        self.repairs.unfinished_calls += n as u64;
        if let Some(open) = self.tracks[i].monitor.take() {
            out.monitor(&MonitorWait {
                at,
                class: open.class,
                edge: Edge::End {
                    begin: open.begin,
                    unfinished: true,
                },
            });
        }
        self.tracks[i].wake = None;
    }

    /// Ends the timeline at `end` (the trace's last instant): closes every open call,
    /// span and interval there. Call it once, after the last [`Timeline::push`].
    pub fn finish(&mut self, end: Time, out: &mut impl Sink) {
        for i in 0..self.tracks.len() {
            let stats = &mut self.tracks[i].sched.stats;
            if !self.saw_migrate {
                // No migration records: switch-ins on another CPU are all there is.
                stats.migrations = stats.cpu_changes;
            }
            if !self.tracks[i].sched.is_ended() {
                let at = self.at_index(i, end);
                self.close_agent_spans(i, at, out);
            }
            self.tracks[i].sched.finish(end, out);
        }
        let open: Vec<_> = self.gc.drain().collect();
        for (pid, begin, tid) in open {
            let at = self.thread(tid).map(|ix| self.at_index(ix.get(), end));
            out.gc(&GcSpan {
                pid,
                at,
                time: end,
                edge: Edge::End {
                    begin,
                    unfinished: true,
                },
            });
        }
    }
}

fn exit(at: At, c: Closed) -> CallExit {
    CallExit {
        at,
        frame: c.frame,
        depth: c.depth,
        begin: c.begin,
        kind: c.kind,
        exclusive_ns: c.exclusive_ns,
        cpu_ns: c.cpu_ns,
        exclusive_cpu_ns: c.exclusive_cpu_ns,
    }
}
