//! Migration records (`Event::Migrate`, trace format minor 2) through the whole
//! timeline: the CPU a runnable thread waits on, sleeps on a run queue (the kernel's
//! delayed dequeue) told apart from wakeups choosing a CPU, and which count of
//! migrations a trace gets.

use sonda_timeline::*;
use sonda_trace::{Cpu, Event, Tid};

const T: Tid = Tid(7);
const OTHER: Tid = Tid(8);

#[derive(Default)]
struct Capture {
    intervals: Vec<(u64, u64, ThreadState, Option<u16>)>,
    queued: Vec<(u32, u64, u64)>,
}

impl Sink for Capture {
    fn interval(&mut self, iv: &Interval) {
        if iv.tid == T {
            self.intervals
                .push((iv.begin.0, iv.end.0, iv.state, iv.cpu.map(|c| c.0)));
        }
    }
    fn queued_asleep(&mut self, q: &QueuedAsleep) {
        self.queued.push((q.at.tid.0, q.begin.0, q.at.time.0));
    }
}

fn switch(cpu: u16, prev: Tid, prev_state: u64, next: Tid) -> Event {
    Event::Switch {
        cpu: Cpu(cpu),
        prev,
        prev_state,
        next,
        charge: None,
    }
}

fn migrate(tid: Tid, from: u16, to: u16) -> Event {
    Event::Migrate {
        tid,
        from: Cpu(from),
        to: Cpu(to),
    }
}

fn wakeup(wakee: Tid, target: u16) -> Event {
    Event::Wakeup {
        target: Cpu(target),
        wakee,
        new_task: false,
        waking: None,
    }
}

fn run(events: Vec<(u64, Event)>, end: u64) -> (Timeline, Capture) {
    crate::push_all([T, OTHER], events, end)
}

#[test]
fn a_thread_moved_asleep_stays_asleep_and_its_queued_span_is_reported() {
    use ThreadState::*;
    let (tl, cap) = run(
        vec![
            (10, switch(0, T, 0x100, OTHER)), // preempted on CPU 0
            (20, migrate(T, 0, 1)),           // the load balancer pulls it to CPU 1
            (30, switch(1, Tid(0), 0, T)),
            (40, switch(1, T, 0x1, Tid(0))), // blocks; stays on CPU 1's run queue
            (50, migrate(T, 1, 0)),          // moved while asleep, no wakeup under way
            (
                70,
                Event::Waking {
                    cpu: Cpu(0),
                    waker: OTHER,
                    wakee: T,
                },
            ),
            (71, wakeup(T, 0)),
            (80, switch(0, OTHER, 0x100, T)),
            (90, switch(0, T, 0x1, OTHER)), // sleeps again
            (
                100,
                Event::Waking {
                    cpu: Cpu(1),
                    waker: OTHER,
                    wakee: T,
                },
            ),
            (101, migrate(T, 0, 1)), // the wakeup choosing a CPU: no queued sleep
            (102, wakeup(T, 1)),
        ],
        120,
    );
    assert_eq!(
        cap.intervals,
        vec![
            (0, 10, Running, Some(0)),
            (10, 20, Runnable, Some(0)),
            (20, 30, Runnable, Some(1)),
            (30, 40, Running, Some(1)),
            (40, 71, Sleeping, Some(1)),
            (71, 80, Runnable, Some(0)),
            (80, 90, Running, Some(0)),
            (90, 102, Sleeping, Some(0)),
            (102, 120, Runnable, Some(1)),
        ]
    );
    assert_eq!(cap.queued, vec![(7, 50, 71)]);
    let st = tl.stats(tl.thread(T).unwrap());
    assert_eq!((st.queued_asleep, st.queued_asleep_ns), (1, 21));
    // Three moves by the kernel; two switch-ins on another CPU than the last.
    assert_eq!((st.migrations, st.cpu_changes), (3, 2));
    assert_eq!(tl.repairs().sched_conflicts, 0);
}

#[test]
fn without_migration_records_migrations_are_cpu_changes() {
    let (tl, cap) = run(
        vec![
            (10, switch(0, T, 0x1, OTHER)),
            (20, wakeup(T, 1)),
            (30, switch(1, Tid(0), 0, T)),
        ],
        40,
    );
    assert!(cap.queued.is_empty());
    let st = tl.stats(tl.thread(T).unwrap());
    assert_eq!((st.migrations, st.cpu_changes), (1, 1));
    // With them, a thread that never moved has none, whatever the others did.
    let (tl, _) = run(
        vec![
            (10, switch(0, T, 0x1, OTHER)),
            (15, migrate(OTHER, 0, 1)),
            (20, wakeup(T, 0)),
            (30, switch(0, Tid(0), 0, T)),
        ],
        40,
    );
    let st = tl.stats(tl.thread(T).unwrap());
    assert_eq!((st.migrations, st.cpu_changes), (0, 0));
    let other = tl.stats(tl.thread(OTHER).unwrap());
    assert_eq!(other.migrations, 1);
}
