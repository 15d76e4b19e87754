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
        /// The CPU the switch happened on.
        cpu: Cpu,
        /// The thread that stopped running.
        prev: Tid,
        /// Why it stopped: the tracepoint's raw `prev_state` (runnable, S, D, ...).
        prev_state: u64,
        /// The thread that started running (0: the idle task).
        next: Tid,
        /// The CPU time the kernel charged `prev` on its way out (its own
        /// `sched_stat_runtime`, a µs or so before this record), carried here by the
        /// recorder instead of in a [`Event::CpuTime`] record of its own: a third fewer
        /// records through every stage of a busy recording (format 3.0). Decoding puts
        /// that `CpuTime` back before the switch ([`Record::unfold`]), so a switch read
        /// from a trace never has one.
        charge: Option<SwitchCharge>,
    },
    /// `sched_waking`: `waker`, running on `cpu`, starts waking `wakee`.
    Waking {
        /// The CPU the waker runs on.
        cpu: Cpu,
        /// The thread that wakes the other (the one running when the tracepoint fired).
        waker: Tid,
        /// The thread being woken.
        wakee: Tid,
    },
    /// `sched_wakeup`/`sched_wakeup_new`: `wakee` is now runnable on `target`'s run queue.
    Wakeup {
        /// The CPU whose run queue the thread joins.
        target: Cpu,
        /// The thread now runnable.
        wakee: Tid,
        /// Whether this is a new thread's first wakeup (`sched_wakeup_new`).
        new_task: bool,
        /// The `sched_waking` of `wakee` written just before on the same CPU, carried
        /// here by the recorder instead of in a [`Event::Waking`] record of its own: a
        /// wakeup done by the waker itself is the two records a µs apart, a fifth of a
        /// busy server's kernel records (format 4.0). Decoding puts that `Waking` back
        /// before the wakeup ([`Record::unfold`]), so a wakeup read from a trace never
        /// has one.
        waking: Option<CarriedWaking>,
    },
    /// `sched_migrate_task`: the kernel moved `tid` from `from`'s run queue to `to`'s
    /// (`set_task_cpu`). It comes between `Waking` and `Wakeup` when a wakeup picks
    /// another CPU; from the load balancer otherwise, also for a task that blocked but
    /// is still on its run queue (EEVDF's delayed dequeue), which stays asleep: a
    /// migration never changes a thread's state. Since format minor 2.
    Migrate {
        /// The thread moved.
        tid: Tid,
        /// The CPU whose run queue it left.
        from: Cpu,
        /// The CPU whose run queue it joined.
        to: Cpu,
    },
    /// `sched_stat_runtime`: the scheduler charged `ns` of CPU time to `tid`, which is
    /// running, for the stretch since its previous charge (at every tick, at its
    /// switch-out, when its run queue is updated, possibly from another CPU). The charge
    /// counts the task clock, which leaves out what the hypervisor stole from the
    /// virtual CPU (and, on kernels with `IRQ_TIME_ACCOUNTING`, interrupt time): the
    /// difference between a stretch's wall time and its charges is time the thread was
    /// on a CPU but did not run. The charges of a thread sum to its `schedstat`
    /// running time and to its thread CPU clock. Since format minor 3.
    CpuTime {
        /// The thread charged.
        tid: Tid,
        /// The CPU time charged, ns.
        ns: u64,
        /// Whose context the kernel wrote the charge from (since format 2.1 and 1.5).
        by: ChargedBy,
    },
    /// `task_newtask`: `parent` created `child`, which belongs to process `pid` (the
    /// parent's own process for a thread, `child` itself for a new process).
    NewTask {
        /// The creating thread.
        parent: Tid,
        /// The new thread.
        child: Tid,
        /// The process the new thread belongs to.
        pid: Pid,
        /// The new thread's kernel name.
        comm: String,
    },
    /// `sched_process_exit`: the thread is exiting; its last switch-out follows.
    TaskExit {
        /// The exiting thread.
        tid: Tid,
    },
    /// `sched_process_exec`: the process of `tid` now runs `filename`.
    Exec {
        /// The process.
        pid: Pid,
        /// The thread that called exec.
        tid: Tid,
        /// The program it now runs.
        filename: String,
    },
    /// `task_rename`: the thread's kernel name (`comm`) changed.
    Rename {
        /// The renamed thread.
        tid: Tid,
        /// Its new kernel name.
        comm: String,
    },
    /// One sample of `/proc/<pid>/task/<tid>/stat` and `schedstat`, written instead of
    /// kernel events when tracepoints cannot be opened. `state` is the one-letter state,
    /// `run_ns`/`wait_ns` the cumulative time on a CPU and runnable-waiting.
    ProcSample {
        /// The sampled thread.
        tid: Tid,
        /// The CPU it last ran on.
        cpu: Cpu,
        /// Its one-letter state (`R`, `S`, `D`, ...).
        state: u8,
        /// Cumulative time on a CPU (ns).
        run_ns: u64,
        /// Cumulative time runnable but waiting for a CPU (ns).
        wait_ns: u64,
    },
    /// Kernel records lost on `cpu` because its ring buffer was full.
    KernelLost {
        /// The CPU whose buffer overflowed.
        cpu: Cpu,
        /// How many records were lost.
        count: u64,
    },
    /// The agent of process `pid` is ready (JVMTI VMInit, or the first use of the C API).
    VmInit {
        /// The process.
        pid: Pid,
    },
    /// The JVM of process `pid` is shutting down (JVMTI VMDeath).
    VmDeath {
        /// The process.
        pid: Pid,
    },
    /// A Java thread started (named by a [`Meta::JavaThread`] record).
    ThreadStart {
        /// The thread.
        tid: Tid,
    },
    /// A Java thread ended.
    ThreadEnd {
        /// The thread.
        tid: Tid,
    },
    /// A garbage collection of process `pid` started (JVMTI GarbageCollectionStart),
    /// reported on thread `tid` (the VM thread that runs it).
    GcStart {
        /// The collected process.
        pid: Pid,
        /// The thread that reported it.
        tid: Tid,
    },
    /// The garbage collection of process `pid` finished.
    GcEnd {
        /// The collected process.
        pid: Pid,
        /// The thread that reported it.
        tid: Tid,
    },
    /// `tid` tries to enter a monitor held by another thread (JVMTI
    /// MonitorContendedEnter); `class` names the monitor's class ([`Meta::MonitorClass`]).
    MonitorContended {
        /// The waiting thread.
        tid: Tid,
        /// The monitor's class id.
        class: u32,
    },
    /// `tid` entered the contended monitor (JVMTI MonitorContendedEntered).
    MonitorEntered {
        /// The thread that got the monitor.
        tid: Tid,
        /// The monitor's class id.
        class: u32,
    },
    /// `tid` entered instrumented method or native region `method` ([`Meta::Method`]).
    Enter {
        /// The calling thread.
        tid: Tid,
        /// The method id.
        method: u32,
    },
    /// `tid` left `method`; `exception` when it left by throwing.
    Leave {
        /// The thread.
        tid: Tid,
        /// The method id.
        method: u32,
        /// Whether the method left by throwing.
        exception: bool,
    },
    /// `tid` entered the compiler-instrumented native function at `addr`.
    FuncEnter {
        /// The calling thread.
        tid: Tid,
        /// The function's address in its process.
        addr: u64,
    },
    /// `tid` left the native function at `addr`.
    FuncLeave {
        /// The thread.
        tid: Tid,
        /// The function's address in its process.
        addr: u64,
    },
    /// A typed event with a value, from the C API.
    User {
        /// The thread that emitted it.
        tid: Tid,
        /// The event type ([`Meta::UserType`] names it).
        kind: u32,
        /// The value.
        value: u64,
    },
    /// The agent dropped `count` events of `tid` because its buffer was full.
    Dropped {
        /// The thread whose events were dropped.
        tid: Tid,
        /// How many.
        count: u64,
    },
}

/// A switch-out's own CPU-time charge, carried in its [`Event::Switch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchCharge {
    /// The CPU time charged, ns (the `CpuTime`'s `ns`).
    pub ns: u64,
    /// How long before the switch the charge was written, ns.
    pub before_ns: u32,
}

/// The `sched_waking` that came just before a wakeup, carried in its [`Event::Wakeup`]:
/// the [`Event::Waking`] of the same wakee, less the wakee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CarriedWaking {
    /// The CPU the waker ran on.
    pub cpu: Cpu,
    /// The thread that woke the other.
    pub waker: Tid,
    /// How long before the wakeup the waking was written, ns.
    pub before_ns: u32,
}

impl Record {
    /// Splits a record carrying an earlier one into the two records it stands for: a
    /// switch carrying its switch-out's charge into that charge (a `CpuTime` of `prev`,
    /// written by itself) and the bare switch; a wakeup carrying its waking into that
    /// `Waking` and the bare wakeup. The earlier record is dated `before_ns` before the
    /// carrier but never before `floor`, the time of the record before it. Any other
    /// record comes back as it is.
    pub fn unfold(self, floor: u64) -> (Option<Record>, Record) {
        let earlier = |before_ns: u32| {
            let at = self.time.0.saturating_sub(u64::from(before_ns));
            Time(at.max(floor).min(self.time.0))
        };
        match self.event {
            Event::Wakeup {
                target,
                wakee,
                new_task,
                waking: Some(w),
            } => {
                let waking = Record {
                    time: earlier(w.before_ns),
                    event: Event::Waking {
                        cpu: w.cpu,
                        waker: w.waker,
                        wakee,
                    },
                };
                let wakeup = Record {
                    time: self.time,
                    event: Event::Wakeup {
                        target,
                        wakee,
                        new_task,
                        waking: None,
                    },
                };
                (Some(waking), wakeup)
            }
            Event::Switch {
                cpu,
                prev,
                prev_state,
                next,
                charge: Some(c),
            } => {
                let charge = Record {
                    time: earlier(c.before_ns),
                    event: Event::CpuTime {
                        tid: prev,
                        ns: c.ns,
                        by: ChargedBy::Itself,
                    },
                };
                let switch = Record {
                    time: self.time,
                    event: Event::Switch {
                        cpu,
                        prev,
                        prev_state,
                        next,
                        charge: None,
                    },
                };
                (Some(charge), switch)
            }
            _ => (None, self),
        }
    }

    /// The records this one stands for in a trace as read: 2 for a switch carrying its
    /// switch-out's charge or a wakeup carrying its waking, else 1.
    pub fn count(&self) -> u32 {
        match self.carried_before_ns() {
            Some(_) => 2,
            None => 1,
        }
    }

    /// How long before this record the record it carries was written (a switch's
    /// charge, a wakeup's waking), ns; `None` when it carries none.
    pub fn carried_before_ns(&self) -> Option<u32> {
        match self.event {
            Event::Switch {
                charge: Some(c), ..
            } => Some(c.before_ns),
            Event::Wakeup {
                waking: Some(w), ..
            } => Some(w.before_ns),
            _ => None,
        }
    }

    /// Brings the record this one carries up to `before_ns` before it (never further
    /// back than it was); nothing when it carries none.
    pub fn shorten_carried(&mut self, before_ns: u32) {
        match &mut self.event {
            Event::Switch {
                charge: Some(c), ..
            } => c.before_ns = c.before_ns.min(before_ns),
            Event::Wakeup {
                waking: Some(w), ..
            } => w.before_ns = w.before_ns.min(before_ns),
            _ => {}
        }
    }
}

/// Whose context the kernel wrote a CPU-time charge ([`Event::CpuTime`]) from. It tells
/// the timeline whether the run queue's clock may have stopped at that charge: a wakeup
/// from another CPU that preempts the running thread charges it, then asks the switch
/// that follows not to update the clock (`rq_clock_skip_update`), and the kernel counts
/// the thread queued from that charge however long the rescheduling interrupt takes.
/// A gap after the thread's own charge is the hypervisor's (steal): the kernel counts it
/// neither running nor waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ChargedBy {
    /// Not recorded: traces before format 2.1 (1.5).
    #[default]
    Unknown,
    /// The thread itself, on its own CPU: its tick, its switch, an interrupt there.
    Itself,
    /// Another task (on another CPU): a wakeup or the load balancer updating the run
    /// queue the thread runs on.
    Other,
}

impl ChargedBy {
    /// From the task the kernel was running where it wrote the charge of `tid`.
    pub fn of(tid: Tid, current: Tid) -> ChargedBy {
        if tid == current {
            ChargedBy::Itself
        } else {
            ChargedBy::Other
        }
    }
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

/// The counter whose presence says that the recorder dated each switch by the
/// scheduler's clock it was made by (BPF recordings): readers must not infer that
/// clock from the threads' CPU-time charges again. Written with 0 before the first
/// switch, so that a recording killed before its end block and a reader following a
/// recording live know it too; the end block gives the number of switches moved.
pub const SWITCHES_CLOCK_DATED: &str = "kernel.switches_clock_dated";

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
        /// The process id.
        pid: Pid,
        /// Its parent's process id.
        ppid: Pid,
        /// Its name (the program).
        name: String,
        /// What it runs.
        runtime: Runtime,
    },
    /// A thread the trace follows, with its kernel name when first seen.
    Thread {
        /// The thread's process.
        pid: Pid,
        /// The thread id.
        tid: Tid,
        /// Its kernel name when first seen.
        comm: String,
    },
    /// A thread's name given by its runtime: a Java thread's Java name, or the name a
    /// native thread gave itself through the C API (`sonda_thread_name`, `daemon`
    /// false).
    JavaThread {
        /// The thread's process.
        pid: Pid,
        /// The thread id.
        tid: Tid,
        /// The name its runtime gave it.
        name: String,
        /// Whether it is a Java daemon thread.
        daemon: bool,
    },
    /// An instrumented Java method (class in source form, e.g. `java.lang.String`) or a
    /// named native region (empty `descriptor`). Ids are dense and below 2^31.
    Method {
        /// The id [`Event::Enter`] and [`Event::Leave`] carry.
        id: u32,
        /// The class, in source form (empty for a native region).
        class: String,
        /// The method's (or region's) name.
        name: String,
        /// The JVM descriptor, e.g. `(I)V` (empty for a native region).
        descriptor: String,
    },
    /// The class of contended monitors.
    MonitorClass {
        /// The id monitor events carry.
        id: u32,
        /// The class name.
        name: String,
    },
    /// A named counter; a later value of the same name replaces an earlier one.
    Counter {
        /// The counter's name (`agent.<what>`, `kernel.<what>`, ...).
        name: String,
        /// Its value.
        value: u64,
    },
    /// Something a user should know about the recording (a filter that matched nothing,
    /// a class left unchanged).
    Warning {
        /// What happened, one line.
        text: String,
    },
    /// A memory mapping of a native process, for resolving function addresses.
    Mapping {
        /// The process.
        pid: Pid,
        /// The first address mapped.
        start: u64,
        /// The address past the last one mapped.
        end: u64,
        /// The file offset mapped at `start`.
        offset: u64,
        /// The mapped file.
        path: String,
    },
    /// A name for a [`Event::User`] event type, and optionally for one of its values.
    UserType {
        /// The event type.
        kind: u32,
        /// The value named, or `None` when this names the type itself.
        value: Option<u64>,
        /// The name.
        name: String,
    },
    /// Method id `id` (a [`Meta::Method`] of its own) stands for the compiler-instrumented
    /// native function at `addr` in process `pid`: the collector gives each function an
    /// id from the method id space, so that its entries and exits are ordinary
    /// [`Event::Enter`]/[`Event::Leave`] records. Its name is resolved when the trace is
    /// read, from the process's [`Meta::Mapping`]s and the mapped file's symbols.
    NativeFunction {
        /// The method id standing for the function.
        id: u32,
        /// The process.
        pid: Pid,
        /// The function's address in that process.
        addr: u64,
    },
    /// The agent's overhead budget (`--budget`) removed the probes of method `id`: its
    /// calls after `time` are not recorded. Calls recorded before stay valid; a call in
    /// flight at `time` still records its leave (the JVM finishes it in the old,
    /// instrumented code), and a reader closes one whose leave never comes as unfinished
    /// rather than as a repair of lost events. Since minor 4.
    MethodRemoved {
        /// The method id (a [`Meta::Method`] of its own).
        id: u32,
        /// When the probes were gone (`CLOCK_MONOTONIC` ns, the trace's clock).
        time: Time,
        /// The method's call rate the agent measured before removing it (calls a second).
        rate: u64,
        /// The method's mean duration the agent measured (inclusive ns a call).
        mean_ns: u64,
        /// The share of the process's CPU time the agent estimated its probes cost, in
        /// millionths.
        overhead_ppm: u64,
    },
}

impl Event {
    /// The thread this event belongs to, if it belongs to one thread.
    pub fn tid(&self) -> Option<Tid> {
        match *self {
            Event::Waking { wakee, .. } | Event::Wakeup { wakee, .. } => Some(wakee),
            Event::NewTask { child, .. } => Some(child),
            Event::TaskExit { tid }
            | Event::Migrate { tid, .. }
            | Event::CpuTime { tid, .. }
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
    /// migration, CPU time charged, task creation and exit, exec, rename): the records
    /// two recordings of the same machine may both hold. Neither a `/proc` sample nor a
    /// lost-sample count.
    pub fn is_sched_tracepoint(&self) -> bool {
        matches!(
            self,
            Event::Switch { .. }
                | Event::Waking { .. }
                | Event::Wakeup { .. }
                | Event::Migrate { .. }
                | Event::CpuTime { .. }
                | Event::NewTask { .. }
                | Event::TaskExit { .. }
                | Event::Exec { .. }
                | Event::Rename { .. }
        )
    }
}
