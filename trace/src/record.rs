//! The records a trace holds: timed events, which come in one time order, and metadata,
//! which names what events refer to (threads, methods, monitor classes) and may come in
//! any order.

use crate::types::{Cpu, Pid, Tid, Time};

/// One timed record.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Record {
    /// When it happened, on the trace's clock.
    pub time: Time,
    /// What happened.
    pub event: Event,
}

/// What happened at one point in time. Kernel events come from scheduler tracepoints
/// (or from sampling `/proc`); JVM events come from the agent.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Event {
    /// `sched_switch`: `prev` left `cpu` (why: the raw `prev_state`, see
    /// [`crate::SwitchOut::from_prev_state`]) and `next` started running on it. One of the
    /// two may be a thread the trace does not follow; tid 0 is the idle task.
    Switch {
        cpu: Cpu,
        prev: Tid,
        prev_state: u64,
        next: Tid,
    },
    /// `sched_waking`: `waker`, running on `cpu`, starts waking `wakee`.
    Waking { cpu: Cpu, waker: Tid, wakee: Tid },
    /// `sched_wakeup`/`sched_wakeup_new`: `wakee` is now runnable on `target`'s run queue.
    Wakeup {
        target: Cpu,
        wakee: Tid,
        new_task: bool,
    },
    /// `sched_migrate_task`: the kernel moved `tid` from `from`'s run queue to `to`'s
    /// (`set_task_cpu`). It comes between `Waking` and `Wakeup` when a wakeup picks
    /// another CPU; from the load balancer otherwise, also for a task that blocked but
    /// is still on its run queue (EEVDF's delayed dequeue), which stays asleep: a
    /// migration never changes a thread's state. Since format minor 2.
    Migrate { tid: Tid, from: Cpu, to: Cpu },
    /// `task_newtask`: `parent` created `child`, which belongs to process `pid` (the
    /// parent's own process for a thread, `child` itself for a new process).
    NewTask {
        parent: Tid,
        child: Tid,
        pid: Pid,
        comm: String,
    },
    /// `sched_process_exit`: the thread is exiting; its last switch-out follows.
    TaskExit { tid: Tid },
    /// `sched_process_exec`: the process of `tid` now runs `filename`.
    Exec {
        pid: Pid,
        tid: Tid,
        filename: String,
    },
    /// `task_rename`: the thread's kernel name (`comm`) changed.
    Rename { tid: Tid, comm: String },
    /// One sample of `/proc/<pid>/task/<tid>/stat` and `schedstat`, written instead of
    /// kernel events when tracepoints cannot be opened. `state` is the one-letter state,
    /// `run_ns`/`wait_ns` the cumulative time on a CPU and runnable-waiting.
    ProcSample {
        tid: Tid,
        cpu: Cpu,
        state: u8,
        run_ns: u64,
        wait_ns: u64,
    },
    /// Kernel records lost on `cpu` because its ring buffer was full.
    KernelLost { cpu: Cpu, count: u64 },
    /// The agent of process `pid` is ready (JVMTI VMInit, or the first use of the C API).
    VmInit { pid: Pid },
    /// The JVM of process `pid` is shutting down (JVMTI VMDeath).
    VmDeath { pid: Pid },
    /// A Java thread started (named by a [`Meta::JavaThread`] record).
    ThreadStart { tid: Tid },
    /// A Java thread ended.
    ThreadEnd { tid: Tid },
    /// A garbage collection of process `pid` started (JVMTI GarbageCollectionStart),
    /// reported on thread `tid` (the VM thread that runs it).
    GcStart { pid: Pid, tid: Tid },
    /// The garbage collection of process `pid` finished.
    GcEnd { pid: Pid, tid: Tid },
    /// `tid` tries to enter a monitor held by another thread (JVMTI
    /// MonitorContendedEnter); `class` names the monitor's class ([`Meta::MonitorClass`]).
    MonitorContended { tid: Tid, class: u32 },
    /// `tid` entered the contended monitor (JVMTI MonitorContendedEntered).
    MonitorEntered { tid: Tid, class: u32 },
    /// `tid` entered instrumented method or native region `method` ([`Meta::Method`]).
    Enter { tid: Tid, method: u32 },
    /// `tid` left `method`; `exception` when it left by throwing.
    Leave {
        tid: Tid,
        method: u32,
        exception: bool,
    },
    /// `tid` entered the compiler-instrumented native function at `addr`.
    FuncEnter { tid: Tid, addr: u64 },
    /// `tid` left the native function at `addr`.
    FuncLeave { tid: Tid, addr: u64 },
    /// A typed event with a value, from the C API.
    User { tid: Tid, kind: u32, value: u64 },
    /// The agent dropped `count` events of `tid` because its buffer was full.
    Dropped { tid: Tid, count: u64 },
}

/// Where the trace's thread states come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Source {
    /// Kernel scheduler tracepoints through perf_event_open: every switch, exact.
    Tracepoints,
    /// Periodic samples of `/proc`: coarse, used without permission for tracepoints.
    Procfs,
}

/// What kind of program a process runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Runtime {
    /// A JVM with the agent loaded.
    Java,
    /// Anything else (a native program, or a JVM without the agent).
    Native,
}

/// Metadata: names and facts that events refer to. Not timed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Meta {
    /// What was recorded, how and where. The first record of every trace.
    TraceInfo {
        /// Where thread states come from.
        source: Source,
        /// Time origin: when recording started.
        start: Time,
        /// Host name.
        host: String,
        /// Number of CPUs of the machine.
        cpus: u16,
        /// The recorded command line, or `attach <pid>`.
        command: Vec<String>,
        /// The sonda version that wrote the trace.
        tool: String,
    },
    /// A process the trace follows.
    Process {
        pid: Pid,
        ppid: Pid,
        name: String,
        runtime: Runtime,
    },
    /// A thread the trace follows, with its kernel name when first seen.
    Thread { pid: Pid, tid: Tid, comm: String },
    /// A thread's name given by its runtime: a Java thread's Java name, or the name a
    /// native thread gave itself through the C API (`sonda_thread_name`, `daemon`
    /// false).
    JavaThread {
        pid: Pid,
        tid: Tid,
        name: String,
        daemon: bool,
    },
    /// An instrumented Java method (class in source form, e.g. `java.lang.String`) or a
    /// named native region (empty `descriptor`). Ids are dense and below 2^31.
    Method {
        id: u32,
        class: String,
        name: String,
        descriptor: String,
    },
    /// The class of contended monitors.
    MonitorClass { id: u32, name: String },
    /// A named counter; a later value of the same name replaces an earlier one.
    Counter { name: String, value: u64 },
    /// Something a user should know about the recording (a filter that matched nothing,
    /// a class left unchanged).
    Warning { text: String },
    /// A memory mapping of a native process, for resolving function addresses.
    Mapping {
        pid: Pid,
        start: u64,
        end: u64,
        offset: u64,
        path: String,
    },
    /// A name for a [`Event::User`] event type, and optionally for one of its values.
    UserType {
        kind: u32,
        value: Option<u64>,
        name: String,
    },
    /// Method id `id` (a [`Meta::Method`] of its own) stands for the compiler-instrumented
    /// native function at `addr` in process `pid`: the collector gives each function an
    /// id from the method id space, so that its entries and exits are ordinary
    /// [`Event::Enter`]/[`Event::Leave`] records. Its name is resolved when the trace is
    /// read, from the process's [`Meta::Mapping`]s and the mapped file's symbols.
    NativeFunction { id: u32, pid: Pid, addr: u64 },
}

impl Event {
    /// The thread this event belongs to, if it belongs to one thread.
    pub fn tid(&self) -> Option<Tid> {
        match *self {
            Event::Waking { wakee, .. } | Event::Wakeup { wakee, .. } => Some(wakee),
            Event::NewTask { child, .. } => Some(child),
            Event::TaskExit { tid }
            | Event::Migrate { tid, .. }
            | Event::Exec { tid, .. }
            | Event::Rename { tid, .. }
            | Event::ProcSample { tid, .. }
            | Event::ThreadStart { tid }
            | Event::ThreadEnd { tid }
            | Event::MonitorContended { tid, .. }
            | Event::MonitorEntered { tid, .. }
            | Event::Enter { tid, .. }
            | Event::Leave { tid, .. }
            | Event::FuncEnter { tid, .. }
            | Event::FuncLeave { tid, .. }
            | Event::User { tid, .. }
            | Event::Dropped { tid, .. }
            | Event::GcStart { tid, .. }
            | Event::GcEnd { tid, .. } => Some(tid),
            Event::Switch { .. }
            | Event::KernelLost { .. }
            | Event::VmInit { .. }
            | Event::VmDeath { .. } => None,
        }
    }

    /// Whether this is a kernel scheduler tracepoint's record (switch, waking, wakeup,
    /// migration, task creation and exit, exec, rename): the records two recordings of
    /// the same machine may both hold. Neither a `/proc` sample nor a lost-sample count.
    pub fn is_sched_tracepoint(&self) -> bool {
        matches!(
            self,
            Event::Switch { .. }
                | Event::Waking { .. }
                | Event::Wakeup { .. }
                | Event::Migrate { .. }
                | Event::NewTask { .. }
                | Event::TaskExit { .. }
                | Event::Exec { .. }
                | Event::Rename { .. }
        )
    }
}
