//! Kernel records for the unit tests of the readers' recoveries (`bpf_unseen`,
//! `missed_moves`, `cpu_queue`, `switch_clock`, `resched_clock`).

use sonda_trace::{Cpu, Event, Record, Tid, Time};

/// `tid` moved from `from` to `to` at `time`.
pub fn migrate(time: u64, tid: u32, from: u16, to: u16) -> Record {
    Record {
        time: Time(time),
        event: Event::Migrate {
            tid: Tid(tid),
            from: Cpu(from),
            to: Cpu(to),
        },
    }
}

/// `tid` woken onto `cpu`'s run queue at `time`.
pub fn wakeup(time: u64, tid: u32, cpu: u16) -> Record {
    Record {
        time: Time(time),
        event: Event::Wakeup {
            target: Cpu(cpu),
            wakee: Tid(tid),
            new_task: false,
            waking: None,
        },
    }
}

/// A switch on `cpu` at `time`: `prev` left it in `prev_state`, `next` arrived.
pub fn switch(time: u64, cpu: u16, prev: u32, prev_state: u64, next: u32) -> Record {
    Record {
        time: Time(time),
        event: Event::Switch {
            cpu: Cpu(cpu),
            prev: Tid(prev),
            prev_state,
            next: Tid(next),
            charge: None,
        },
    }
}

/// A preemption on CPU 1 at `time`: `prev` left it runnable, `next` arrived.
pub fn preemption(time: u64, prev: u32, next: u32) -> Record {
    switch(time, 1, prev, 0, next)
}
