//! Thread states from `/proc` samples (the fallback without tracepoints), fed to the
//! timeline without any file: between two samples, the run and wait times are the
//! `schedstat` differences, the rest goes to the sleep state the samples show.

use sonda_testdata::{TraceBuilder, START};
use sonda_timeline::*;
use sonda_trace::{Cpu, Event, Pid, Runtime, Source, Tid, Time};

use ThreadState::*;

fn procfs_trace() -> TraceBuilder {
    let mut b = TraceBuilder::new(Source::Procfs, 2);
    b.process(300, "app", Runtime::Native)
        .thread(300, 301, "app")
        .thread(300, 302, "worker")
        .thread(300, 303, "gone");
    let sample = |tid, cpu, state: u8, run_ns, wait_ns| Event::ProcSample {
        tid: Tid(tid),
        cpu: Cpu(cpu),
        state,
        run_ns,
        wait_ns,
    };
    b.at(100, sample(301, 1, b'S', 5000, 1000))
        .at(100, sample(303, 0, b'R', 10, 0))
        // Agent events are no evidence of state in a /proc trace.
        .at(
            120,
            Event::Enter {
                tid: Tid(302),
                method: 1,
            },
        )
        .at(
            150,
            Event::NewTask {
                parent: Tid(301),
                child: Tid(302),
                pid: Pid(300),
                comm: "worker".into(),
            },
        )
        .at(200, sample(301, 0, b'R', 5030, 1010))
        .at(200, sample(302, 1, b'S', 20, 5))
        .at(200, sample(303, 0, b'R', 60, 40))
        .at(250, Event::TaskExit { tid: Tid(303) })
        .at(300, sample(301, 0, b'D', 5050, 1010))
        .at(300, sample(302, 1, b'Z', 20, 5))
        .at(400, sample(301, 0, b'S', 5050, 1010));
    b
}

#[derive(Default)]
struct Intervals(Vec<(u32, u64, u64, ThreadState, Option<u16>)>);

impl Sink for Intervals {
    fn interval(&mut self, iv: &Interval) {
        self.0.push((
            iv.tid.0,
            iv.begin.0 - START.0,
            iv.end.0 - START.0,
            iv.state,
            iv.cpu.map(|c| c.0),
        ));
    }
}

#[test]
fn samples_split_by_schedstat_differences() {
    let b = procfs_trace();
    let mut tl = Timeline::new(START, Source::Procfs, [301, 302, 303].map(Tid));
    let mut out = Intervals::default();
    for r in b.records() {
        tl.push(r, &mut out);
    }
    tl.finish(Time(START.0 + 400), &mut out);
    let of = |tid| {
        out.0
            .iter()
            .filter(|i| i.0 == tid)
            .map(|i| (i.1, i.2, i.3, i.4))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of(301),
        vec![
            // Seen S at 100: asleep since the origin (on CPU 1, where it last ran).
            (0, 100, Sleeping, Some(1)),
            // 100..200: ran 30, waited 10, seen R at 200: slept first.
            (100, 160, Sleeping, Some(0)),
            (160, 170, Runnable, Some(0)),
            // Seen R, it keeps running; 200..300 ran 20 more, then blocked (seen D).
            (170, 220, Running, Some(0)),
            (220, 300, Uninterruptible, Some(0)),
            (300, 400, Sleeping, Some(0)),
        ]
    );
    assert_eq!(
        of(302),
        vec![
            (0, 150, NotCreated, None),
            // Born at 150 with counters at zero: waited 5, ran 20, then slept.
            (150, 155, Runnable, Some(1)),
            (155, 175, Running, Some(1)),
            (175, 300, Sleeping, Some(1)),
            // Seen as a zombie: ended.
            (300, 400, NotCreated, None),
        ]
    );
    assert_eq!(
        of(303),
        vec![
            (0, 100, Running, Some(0)),
            (100, 110, Sleeping, Some(0)),
            (110, 150, Runnable, Some(0)),
            (150, 250, Running, Some(0)),
            // TaskExit ends a /proc-sampled thread at once.
            (250, 400, NotCreated, None),
        ]
    );
    // Totals between samples are the kernel's own.
    let s = tl.stats(tl.thread(Tid(301)).unwrap());
    assert_eq!((s.states.get(Running), s.states.get(Runnable)), (50, 10));
    assert_eq!(
        tl.stats(tl.thread(Tid(302)).unwrap()).states.get(Running),
        20
    );
    assert_eq!(s.switches, 0);
}

#[test]
fn a_thread_unchanged_for_rounds_changed_only_since_the_last_one() {
    // The sampler writes only samples that changed: thread 11 is written at 100 and 400
    // only, so at the rounds of 200 and 300 (seen through thread 12) it was unchanged,
    // asleep. Its activity lies after the round of 300.
    let mut b = TraceBuilder::new(Source::Procfs, 1);
    b.process(10, "app", Runtime::Native)
        .thread(10, 11, "a")
        .thread(10, 12, "b");
    let sample = |tid, state: u8, run_ns, wait_ns| Event::ProcSample {
        tid: Tid(tid),
        cpu: Cpu(0),
        state,
        run_ns,
        wait_ns,
    };
    b.at(100, sample(11, b'S', 0, 0))
        .at(100, sample(12, b'R', 0, 0));
    b.at(200, sample(12, b'R', 100, 0))
        .at(300, sample(12, b'R', 200, 0));
    b.at(400, sample(11, b'S', 30, 10))
        .at(400, sample(12, b'R', 260, 40));
    let mut tl = Timeline::new(START, Source::Procfs, [Tid(11), Tid(12)]);
    let mut out = Intervals::default();
    for r in b.records() {
        tl.push(r, &mut out);
    }
    tl.finish(Time(START.0 + 400), &mut out);
    let of = |tid| {
        out.0
            .iter()
            .filter(|i| i.0 == tid)
            .map(|i| (i.1, i.2, i.3))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of(11),
        vec![
            (0, 300, Sleeping),
            (300, 310, Runnable),
            (310, 340, Running),
            (340, 400, Sleeping)
        ]
    );
    // Ran 60 and waited 40 since the round of 300; seen R, so it waited first.
    assert_eq!(
        of(12),
        vec![(0, 300, Running), (300, 340, Runnable), (340, 400, Running)]
    );
}
