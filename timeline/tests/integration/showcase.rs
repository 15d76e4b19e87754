//! The timeline over `sonda_testdata::showcase()`, record by record without any file: every
//! interval, call, span and edge, checked against values worked out by hand from the
//! records (see the comments for why each one is what it is).

use std::collections::BTreeMap;

use sonda_testdata::{showcase, START};
use sonda_timeline::*;
use sonda_trace::{Cpu, Meta, Pid, Source, Tid, Time};

/// One thread's intervals: (begin, end, state, CPU), times relative to the start.
type Intervals = Vec<(u64, u64, ThreadState, Option<u16>)>;

/// Everything a timeline outputs, with times relative to the trace start.
#[derive(Default)]
struct Capture {
    intervals: BTreeMap<u32, Intervals>,
    /// Begin of every interval, in delivery order.
    begins: Vec<u64>,
    calls: Vec<(u32, u64, u64, Frame, ExitKind, u64, u64)>,
    enters: Vec<(u32, u64, Frame, usize, Option<u16>)>,
    gc: Vec<(u64, Edge, Option<u32>)>,
    monitors: Vec<(u32, u64, u32, Edge)>,
    wakes: Vec<(u32, Option<u32>, u16, u64, u32, u64)>,
    migrations: Vec<(u32, u64, u16, u16)>,
    users: Vec<(u32, u64, u32, u64)>,
}

fn rel(t: Time) -> u64 {
    t.0 - START.0
}

impl Sink for Capture {
    fn interval(&mut self, iv: &Interval) {
        assert!(iv.begin < iv.end, "empty interval {iv:?}");
        self.intervals.entry(iv.tid.0).or_default().push((
            rel(iv.begin),
            rel(iv.end),
            iv.state,
            iv.cpu.map(|c| c.0),
        ));
        self.begins.push(rel(iv.begin));
    }
    fn enter(&mut self, c: &CallEnter) {
        self.enters.push((
            c.at.tid.0,
            rel(c.at.time),
            c.frame,
            c.depth,
            c.at.cpu.map(|c| c.0),
        ));
    }
    fn exit(&mut self, c: &CallExit) {
        self.calls.push((
            c.at.tid.0,
            rel(c.begin),
            rel(c.at.time),
            c.frame,
            c.kind,
            c.exclusive_ns,
            c.cpu_ns,
        ));
    }
    fn gc(&mut self, g: &GcSpan) {
        assert_eq!(g.pid, Pid(100));
        let edge = match g.edge {
            Edge::End { begin, unfinished } => Edge::End {
                begin: Time(rel(begin)),
                unfinished,
            },
            e => e,
        };
        self.gc.push((rel(g.time), edge, g.at.map(|a| a.tid.0)));
    }
    fn monitor(&mut self, w: &MonitorWait) {
        let edge = match w.edge {
            Edge::End { begin, unfinished } => Edge::End {
                begin: Time(rel(begin)),
                unfinished,
            },
            e => e,
        };
        self.monitors
            .push((w.at.tid.0, rel(w.at.time), w.class, edge));
    }
    fn wake(&mut self, e: &WakeEdge) {
        self.wakes.push((
            e.waker.0,
            e.waker_thread.map(|t| t.0),
            e.waker_cpu.0,
            rel(e.sent),
            e.received.tid.0,
            rel(e.received.time),
        ));
    }
    fn migration(&mut self, m: &Migration) {
        self.migrations
            .push((m.at.tid.0, rel(m.at.time), m.from.0, m.at.cpu.unwrap().0));
    }
    fn user(&mut self, u: &UserValue) {
        self.users
            .push((u.at.tid.0, rel(u.at.time), u.kind, u.value));
    }
}

const TIDS: [u32; 7] = [101, 102, 103, 104, 105, 106, 201];

fn run() -> (Timeline, Capture) {
    let b = showcase();
    assert!(matches!(b.metadata()[0], Meta::TraceInfo { .. }));
    let mut tl = Timeline::new(START, Source::Tracepoints, TIDS.map(Tid));
    let mut cap = Capture::default();
    for r in b.records() {
        tl.push(r, &mut cap);
    }
    tl.finish(Time(START.0 + 1000), &mut cap);
    (tl, cap)
}

use ThreadState::*;

#[test]
fn intervals_of_every_thread() {
    let (_, cap) = run();
    let expect: BTreeMap<u32, Intervals> = [
        // Existed before: first seen switched out (preempted) on CPU 1, so it ran there
        // from the origin. Migrates to CPU 0, sleeps, is woken onto CPU 1, yields, runs.
        (
            101,
            vec![
                (0, 100, Running, Some(1)),
                (100, 150, Runnable, Some(1)),
                (150, 295, Running, Some(0)),
                (295, 502, Sleeping, Some(0)),
                (502, 510, Runnable, Some(1)),
                (510, 600, Running, Some(1)),
                (600, 620, Runnable, Some(1)),
                // Preempted at 1000, the trace's last instant: nothing after.
                (620, 1000, Running, Some(1)),
            ],
        ),
        // First seen switched in on CPU 0: it waited for that CPU since the origin.
        (
            102,
            vec![
                (0, 50, Runnable, Some(0)),
                (50, 150, Running, Some(0)),
                (150, 155, Runnable, Some(0)),
                (155, 270, Running, Some(1)),
                (270, 1000, Sleeping, Some(1)),
            ],
        ),
        // First seen being woken: asleep since the origin, CPU unknown until the wakeup.
        (
            103,
            vec![
                (0, 290, Sleeping, None),
                (290, 295, Runnable, Some(0)),
                (295, 360, Running, Some(0)),
                (360, 1000, Sleeping, Some(0)),
            ],
        ),
        // Born at 400 (NewTask), wakeup_new names CPU 1 without splitting; ends at the
        // switch-out after TaskExit.
        (
            104,
            vec![
                (0, 400, NotCreated, None),
                (400, 410, Runnable, Some(1)),
                (410, 425, Running, Some(1)),
                (425, 452, Sleeping, Some(1)),
                (452, 460, Runnable, Some(1)),
                (460, 490, Running, Some(1)),
                (490, 1000, NotCreated, None),
            ],
        ),
        // No record at all: presumed asleep.
        (105, vec![(0, 1000, Sleeping, None)]),
        (
            106,
            vec![
                (0, 380, Runnable, Some(0)),
                (380, 700, Running, Some(0)),
                (700, 1000, Sleeping, Some(0)),
            ],
        ),
        // D, T and X states; X ends it without a TaskExit.
        (
            201,
            vec![
                (0, 100, Runnable, Some(1)),
                (100, 140, Running, Some(1)),
                (140, 260, Uninterruptible, Some(1)),
                (260, 270, Runnable, Some(1)),
                (270, 310, Running, Some(1)),
                (310, 590, Stopped, Some(1)),
                (590, 600, Runnable, Some(1)),
                (600, 620, Running, Some(1)),
                (620, 1000, NotCreated, None),
            ],
        ),
    ]
    .into_iter()
    .collect();
    for tid in TIDS {
        assert_eq!(cap.intervals[&tid], expect[&tid], "thread {tid}");
    }
}

#[test]
fn per_thread_counts() {
    let (tl, _) = run();
    let stats = |tid| tl.stats(tl.thread(Tid(tid)).unwrap()).clone();
    let counts = |tid| {
        let s = stats(tid);
        (s.switches, s.preemptions, s.migrations, s.wakeups)
    };
    assert_eq!(counts(101), (3, 3, 2, 1));
    assert_eq!(counts(102), (2, 1, 1, 0));
    assert_eq!(counts(103), (1, 0, 0, 1));
    assert_eq!(counts(104), (2, 0, 0, 1));
    assert_eq!(counts(201), (3, 0, 0, 2));
    assert_eq!(
        (stats(104).born, stats(104).ended),
        (Some(Time(START.0 + 400)), Some(Time(START.0 + 490)))
    );
    assert_eq!(stats(201).ended, Some(Time(START.0 + 620)));
    assert!(stats(105).unseen && !stats(101).unseen);
    assert_eq!(stats(106).dropped, 3);
    let s = stats(101).states;
    assert_eq!(
        (s.get(Running), s.get(Runnable), s.get(Sleeping)),
        (100 + 145 + 90 + 380, 50 + 8 + 20, 207)
    );
    assert_eq!(s.alive(), 1000);
    assert_eq!(stats(104).states.alive(), 90);
    assert_eq!(
        tl.renamed(tl.thread(Tid(103)).unwrap()),
        Some("VM Periodic")
    );
}

#[test]
fn calls_with_repairs() {
    let (tl, cap) = run();
    let m = Frame::Method;
    assert_eq!(
        cap.calls,
        vec![
            // (tid, begin, end, frame, kind, exclusive, running)
            (
                201,
                105,
                130,
                Frame::Func(0x40_1000),
                ExitKind::Normal,
                25,
                25
            ),
            (101, 170, 200, m(2), ExitKind::Normal, 30, 30),
            (101, 210, 250, m(3), ExitKind::Exception, 40, 40),
            (101, 160, 285, m(1), ExitKind::Normal, 125 - 30 - 40, 125),
            // A leave of method 1 while 2 is on top: 2's leave was dropped.
            (106, 395, 415, m(2), ExitKind::Unwound, 20, 20),
            (106, 390, 415, m(1), ExitKind::Normal, 5, 25),
            // Still open at the Java thread's end.
            (104, 470, 478, m(4), ExitKind::Unfinished, 8, 8),
            // Still open at the trace's end; its thread ran until 700.
            (106, 419, 1000, m(4), ExitKind::Unfinished, 581, 281),
        ]
    );
    assert_eq!(
        cap.enters[0],
        (201, 105, Frame::Func(0x40_1000), 1, Some(1))
    );
    assert_eq!(cap.enters[2], (101, 170, m(2), 2, Some(0)));
    let r = tl.repairs();
    assert_eq!(
        (
            r.unwound_calls,
            r.unmatched_leaves,
            r.unfinished_calls,
            r.too_deep
        ),
        (1, 1, 2, 0),
        "{r:?}"
    );
    assert_eq!(
        (
            r.kernel_lost,
            r.agent_dropped,
            r.unseen_threads,
            r.sched_conflicts
        ),
        (2, 3, 1, 0)
    );
    assert_eq!(
        (
            r.unmatched_gc,
            r.unmatched_monitor,
            r.after_end,
            r.dropped_wake_edges
        ),
        (0, 0, 0, 0)
    );
}

#[test]
fn jvm_spans_wakeups_and_migrations() {
    let (tl, cap) = run();
    assert_eq!(
        cap.gc,
        vec![
            (300, Edge::Begin, Some(103)),
            (
                350,
                Edge::End {
                    begin: Time(300),
                    unfinished: false
                },
                Some(103)
            )
        ]
    );
    assert_eq!(
        cap.monitors,
        vec![
            (104, 420, 5, Edge::Begin),
            (
                104,
                465,
                5,
                Edge::End {
                    begin: Time(420),
                    unfinished: false
                }
            )
        ]
    );
    let ix = |tid| tl.thread(Tid(tid)).map(|t| t.0);
    assert_eq!(
        cap.wakes,
        vec![
            // (waker, its index, its CPU, sent, wakee, received when it next ran)
            (201, ix(201), 1, 280, 103, 295),
            (106, ix(106), 0, 450, 104, 460),
            (106, ix(106), 0, 500, 101, 510),
        ]
    );
    assert_eq!(
        cap.migrations,
        vec![(101, 150, 1, 0), (102, 155, 0, 1), (101, 510, 0, 1)]
    );
    assert_eq!(cap.users, vec![(101, 800, 4, 42)]);
    assert_eq!(
        tl.current(tl.thread(Tid(101)).unwrap()),
        (Runnable, Some(Cpu(1)))
    );
}

#[test]
fn look_ahead_makes_written_out_states_exact() {
    // Cut every open interval early, before most threads' first record: with the
    // look-ahead the pieces written out carry the right states, and every thread's
    // intervals still tile the trace with the same totals.
    let b = showcase();
    let cut_at_30 = |look_ahead: bool| {
        let mut tl = Timeline::new(START, Source::Tracepoints, TIDS.map(Tid));
        if look_ahead {
            for r in b.records() {
                tl.presume_from(r);
            }
            // 105 has no record: nothing to presume it from.
            assert!(!tl.all_presumed());
        }
        let mut cap = Capture::default();
        let mut cut_done = false;
        for r in b.records() {
            if !cut_done && r.time.0 >= START.0 + 30 {
                tl.cut(Time(START.0 + 30), &mut cap);
                cut_done = true;
            }
            tl.push(r, &mut cap);
        }
        tl.finish(Time(START.0 + 1000), &mut cap);
        (tl, cap)
    };
    // Without it, a thread born later is written out as asleep before its birth.
    assert_eq!(
        cut_at_30(false).1.intervals[&104][0],
        (0, 30, Sleeping, None)
    );
    let (tl, cap) = cut_at_30(true);
    assert_eq!(cap.intervals[&104][0], (0, 30, NotCreated, None));
    assert_eq!(cap.intervals[&104][1], (30, 400, NotCreated, None));
    assert_eq!(cap.intervals[&101][0], (0, 30, Running, Some(1)));
    assert_eq!(cap.intervals[&103][0], (0, 30, Sleeping, None));
    for (tid, ivs) in &cap.intervals {
        assert_eq!(ivs.first().unwrap().0, 0, "{tid}");
        assert_eq!(ivs.last().unwrap().1, 1000, "{tid}");
        assert!(ivs.windows(2).all(|w| w[0].1 == w[1].0), "{tid}: {ivs:?}");
    }
    let (plain, _) = run();
    for tid in TIDS {
        let ix = tl.thread(Tid(tid)).unwrap();
        assert_eq!(tl.stats(ix).states, plain.stats(ix).states, "{tid}");
    }
}

#[test]
fn low_water_follows_the_oldest_open_interval() {
    let b = showcase();
    let mut tl = Timeline::new(START, Source::Tracepoints, TIDS.map(Tid));
    let mut cap = Capture::default();
    for r in b.records().iter().take_while(|r| r.time.0 < START.0 + 280) {
        tl.push(r, &mut cap);
    }
    // 105 and 103 are still unseen: their intervals open at the origin.
    assert_eq!(tl.low_water(), START);
    tl.cut(Time(START.0 + 270), &mut cap);
    assert_eq!(tl.low_water(), Time(START.0 + 270));
    // Nothing delivered after this begins before the low water.
    let before = cap.begins.len();
    for r in b.records().iter().skip_while(|r| r.time.0 < START.0 + 280) {
        tl.push(r, &mut cap);
    }
    tl.finish(Time(START.0 + 1000), &mut cap);
    let later = &cap.begins[before..];
    assert!(later.len() > 10);
    assert!(later.iter().all(|&b| b >= 270), "{later:?}");
}

#[test]
fn a_proc_sample_in_a_tracepoint_trace_is_only_first_evidence() {
    use sonda_trace::{Event, Record};
    let at = |ns: u64, event| Record {
        time: Time(START.0 + ns),
        event,
    };
    let sample = |state| Event::ProcSample {
        tid: Tid(7),
        cpu: Cpu(1),
        state,
        run_ns: 0,
        wait_ns: 0,
    };
    let records = [
        at(10, sample(b'S')),
        at(
            50,
            Event::Wakeup {
                target: Cpu(0),
                wakee: Tid(7),
                new_task: false,
                waking: None,
            },
        ),
        at(
            60,
            Event::Switch {
                cpu: Cpu(0),
                prev: Tid(0),
                prev_state: 0,
                next: Tid(7),
                charge: None,
            },
        ),
        // Later samples change nothing: the switches are exact.
        at(70, sample(b'D')),
    ];
    let mut tl = Timeline::new(START, Source::Tracepoints, [Tid(7)]);
    tl.presume_from(&records[0]);
    assert!(
        tl.all_presumed(),
        "a sample is enough to presume a thread's state"
    );
    let mut cap = Capture::default();
    for r in &records {
        tl.push(r, &mut cap);
    }
    tl.finish(Time(START.0 + 100), &mut cap);
    assert_eq!(
        cap.intervals[&7],
        vec![
            (0, 50, Sleeping, Some(1)),
            (50, 60, Runnable, Some(0)),
            (60, 100, Running, Some(0))
        ]
    );
}
