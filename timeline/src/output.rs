//! What the timeline produces, and the [`Sink`] that receives it.
//!
//! Everything but [`Interval`]s and [`WakeEdge`]s is delivered at its own time, so a
//! sink sees those outputs in time order. An interval is delivered when it ends (its
//! begin is earlier than outputs already delivered) and a wake edge when it is received;
//! [`crate::Timeline::low_water`] says how far back such late outputs can still reach.

use sonda_trace::{Cpu, Pid, Tid, Time};

use crate::state::ThreadState;

/// A thread's position in the list given to [`crate::Timeline::new`]: a dense index that
/// consumers use for their own per-thread tables (a Paraver row, a report line).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct ThreadIx(pub u32);

impl ThreadIx {
    /// As an index into a `Vec`.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

/// Where and when something happened on a thread.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct At {
    /// The thread.
    pub thread: ThreadIx,
    /// Its kernel thread id.
    pub tid: Tid,
    /// When.
    pub time: Time,
    /// The CPU the thread is on at that moment (or waits on, or last ran on); `None`
    /// when no record has named one yet.
    pub cpu: Option<Cpu>,
}

/// A span of time one thread spent in one state. Intervals of a thread are delivered in
/// order, without gaps or overlap, and never empty (`begin < end`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Interval {
    /// The thread.
    pub thread: ThreadIx,
    /// Its kernel thread id.
    pub tid: Tid,
    /// First instant of the span.
    pub begin: Time,
    /// First instant after the span.
    pub end: Time,
    /// The state.
    pub state: ThreadState,
    /// The CPU it runs on (Running), waits on (Runnable) or last ran on (asleep);
    /// `None` when unknown or not created.
    pub cpu: Option<Cpu>,
}

/// What a call stack frame is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Frame {
    /// An instrumented Java method or named region (`Meta::Method` id).
    Method(u32),
    /// A compiler-instrumented native function, by address.
    Func(u64),
}

/// A call begins.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CallEnter {
    /// Thread, time and CPU.
    pub at: At,
    /// What was entered.
    pub frame: Frame,
    /// Stack depth after entering (1 = outermost).
    pub depth: usize,
}

/// How a call ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ExitKind {
    /// It returned.
    Normal,
    /// It ended by throwing an exception.
    Exception,
    /// Repaired: a leave of a call further down the stack came first (events were
    /// dropped), so this call is closed at that leave.
    Unwound,
    /// Still open when its thread or the trace ended; closed there.
    Unfinished,
}

/// A call ends, with its durations.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CallExit {
    /// Thread, time and CPU of the exit.
    pub at: At,
    /// What was left.
    pub frame: Frame,
    /// Stack depth before leaving (1 = outermost).
    pub depth: usize,
    /// When the call began.
    pub begin: Time,
    /// How it ended.
    pub kind: ExitKind,
    /// Wall time inside the call, nested calls excluded (ns).
    pub exclusive_ns: u64,
    /// Time the thread was Running during the call, nested calls included (ns).
    pub cpu_ns: u64,
    /// Time the thread was Running during the call, nested calls excluded (ns).
    pub exclusive_cpu_ns: u64,
}

impl CallExit {
    /// Wall time from enter to exit, nested calls included (ns).
    pub fn inclusive_ns(&self) -> u64 {
        self.at.time.since(self.begin)
    }
}

/// The two ends of a span delivered as it happens.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Edge {
    /// The span begins at this output's time.
    Begin,
    /// The span that began at `begin` ends at this output's time.
    End {
        /// When the span began.
        begin: Time,
        /// Whether it was closed by the trace's or the thread's end, not by its own event.
        unfinished: bool,
    },
}

/// A garbage collection of one process begins or ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct GcSpan {
    /// The collected process.
    pub pid: Pid,
    /// The thread that reported it (the JVM's VM thread), when the trace follows it.
    pub at: Option<At>,
    /// When.
    pub time: Time,
    /// Begin or end.
    pub edge: Edge,
}

/// A thread waits for a contended monitor, or got it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MonitorWait {
    /// The waiting thread.
    pub at: At,
    /// The monitor's class (`Meta::MonitorClass` id).
    pub class: u32,
    /// Begin (contended) or end (entered).
    pub edge: Edge,
}

/// One thread woke another: sent when the waker called `sched_waking`, received when
/// the wakee next got a CPU.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WakeEdge {
    /// The waker's kernel thread id (any thread, followed or not).
    pub waker: Tid,
    /// The waker's position, when the trace follows it.
    pub waker_thread: Option<ThreadIx>,
    /// The CPU the waker ran on.
    pub waker_cpu: Cpu,
    /// When the waker woke it.
    pub sent: Time,
    /// The wakee when it starts running (time, CPU).
    pub received: At,
}

/// A thread starts running on a CPU other than the one it last ran on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Migration {
    /// Thread, time and the new CPU.
    pub at: At,
    /// The CPU it last ran on.
    pub from: Cpu,
}

/// A thread slept on a run queue: the kernel moved it to another CPU at `begin` while
/// it was asleep with no wakeup under way (EEVDF's delayed dequeue keeps a thread that
/// blocks with negative lag queued), and it was woken at `at.time` (or switched in
/// there, when its wakeup was not reported). Its state in that span is asleep, as the
/// trace shows; the kernel's `schedstat` counts the span as waiting for a CPU.
/// Delivered at its end. See `crate::sched`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct QueuedAsleep {
    /// The thread, the end of the span and the CPU it is queued on from then.
    pub at: At,
    /// When the kernel moved it.
    pub begin: Time,
}

/// A thread starts or stops running on a CPU (a context switch), delivered at its own
/// time. For views that follow CPUs rather than threads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OnCpu {
    /// The thread and the time (`at.cpu` is the CPU it runs on, or ran on).
    pub at: At,
    /// The CPU.
    pub cpu: Cpu,
    /// Whether it starts running (else it stops).
    pub starts: bool,
    /// For a stop: another thread of the trace starts on the same CPU at the same
    /// instant (the same context switch).
    pub handover: bool,
}

/// A typed value from the C API (`Event::User`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct UserValue {
    /// Thread, time and CPU.
    pub at: At,
    /// The value's type.
    pub kind: u32,
    /// The value.
    pub value: u64,
}

/// Receives what the timeline produces. Every method has an empty default, so a
/// consumer implements only what it needs.
pub trait Sink {
    /// A thread's state interval ended.
    fn interval(&mut self, _iv: &Interval) {}
    /// A call began.
    fn enter(&mut self, _call: &CallEnter) {}
    /// A call ended.
    fn exit(&mut self, _call: &CallExit) {}
    /// A garbage collection began or ended.
    fn gc(&mut self, _gc: &GcSpan) {}
    /// A monitor wait began or ended.
    fn monitor(&mut self, _wait: &MonitorWait) {}
    /// A woken thread got a CPU.
    fn wake(&mut self, _edge: &WakeEdge) {}
    /// A thread changed CPU.
    fn migration(&mut self, _m: &Migration) {}
    /// A thread's sleep on a run queue ended.
    fn queued_asleep(&mut self, _q: &QueuedAsleep) {}
    /// A thread started or stopped running on a CPU.
    fn on_cpu(&mut self, _r: &OnCpu) {}
    /// A C API value.
    fn user(&mut self, _u: &UserValue) {}
}

/// A sink that keeps nothing (the timeline's own totals are all that is wanted).
impl Sink for () {}

/// A borrowed sink is a sink (so that a pair can hold borrows).
impl<S: Sink + ?Sized> Sink for &mut S {
    fn interval(&mut self, iv: &Interval) {
        (**self).interval(iv)
    }
    fn enter(&mut self, call: &CallEnter) {
        (**self).enter(call)
    }
    fn exit(&mut self, call: &CallExit) {
        (**self).exit(call)
    }
    fn gc(&mut self, gc: &GcSpan) {
        (**self).gc(gc)
    }
    fn monitor(&mut self, wait: &MonitorWait) {
        (**self).monitor(wait)
    }
    fn wake(&mut self, edge: &WakeEdge) {
        (**self).wake(edge)
    }
    fn migration(&mut self, m: &Migration) {
        (**self).migration(m)
    }
    fn queued_asleep(&mut self, q: &QueuedAsleep) {
        (**self).queued_asleep(q)
    }
    fn on_cpu(&mut self, r: &OnCpu) {
        (**self).on_cpu(r)
    }
    fn user(&mut self, u: &UserValue) {
        (**self).user(u)
    }
}

/// Fan-out: a pair of sinks gets every output, the first one first. Nest pairs for
/// more: one pass of the trace feeds them all.
impl<A: Sink, B: Sink> Sink for (A, B) {
    fn interval(&mut self, iv: &Interval) {
        self.0.interval(iv);
        self.1.interval(iv);
    }
    fn enter(&mut self, call: &CallEnter) {
        self.0.enter(call);
        self.1.enter(call);
    }
    fn exit(&mut self, call: &CallExit) {
        self.0.exit(call);
        self.1.exit(call);
    }
    fn gc(&mut self, gc: &GcSpan) {
        self.0.gc(gc);
        self.1.gc(gc);
    }
    fn monitor(&mut self, wait: &MonitorWait) {
        self.0.monitor(wait);
        self.1.monitor(wait);
    }
    fn wake(&mut self, edge: &WakeEdge) {
        self.0.wake(edge);
        self.1.wake(edge);
    }
    fn migration(&mut self, m: &Migration) {
        self.0.migration(m);
        self.1.migration(m);
    }
    fn queued_asleep(&mut self, q: &QueuedAsleep) {
        self.0.queued_asleep(q);
        self.1.queued_asleep(q);
    }
    fn on_cpu(&mut self, r: &OnCpu) {
        self.0.on_cpu(r);
        self.1.on_cpu(r);
    }
    fn user(&mut self, u: &UserValue) {
        self.0.user(u);
        self.1.user(u);
    }
}
