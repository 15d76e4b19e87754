//! The showcase trace: every record kind and the timeline's edge cases in 1000 ns.

use sonda_trace::{Event, Meta, Pid, Runtime, Source, Tid};

use crate::TraceBuilder;

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
        charge: None,
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
                waking: None,
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
                waking: None,
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
                waking: None,
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
                waking: None,
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
        .at(490, sw(c1, 104, 0x10, 0))
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
                waking: None,
            },
        )
        .at(510, sw(c1, 0, 0, 101))
        .at(
            590,
            Wakeup {
                target: c1,
                wakee: t(201),
                new_task: false,
                waking: None,
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
