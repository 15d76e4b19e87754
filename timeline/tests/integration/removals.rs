//! Methods the agent's overhead budget removed (`Meta::MethodRemoved`, trace format
//! minor 4) through the call stacks: calls recorded before the removal stay as they
//! are, a call in flight at the removal that records its leave (the JVM finishes it in
//! the instrumented code it started in) closes normally, and one whose leave never
//! comes is closed unfinished where its caller leaves, not counted as a repair of lost
//! events, while a frame of a method still traced is repaired as before.

use sonda_timeline::*;
use sonda_trace::{Event, Record, Source, Tid, Time};

const T: Tid = Tid(7);
const U: Tid = Tid(8);
const A: u32 = 1;
const HOT: u32 = 2;
const B: u32 = 3;
const C: u32 = 4;
const REMOVED_AT: u64 = 45;

/// A closed call: thread, method, begin, end, how it ended.
type Call = (u32, u32, u64, u64, ExitKind);

#[derive(Default)]
struct Calls(Vec<Call>);

impl Sink for Calls {
    fn exit(&mut self, call: &CallExit) {
        let Frame::Method(id) = call.frame else {
            return;
        };
        self.0
            .push((call.at.tid.0, id, call.begin.0, call.at.time.0, call.kind));
    }
}

fn enter(tid: Tid, method: u32) -> Event {
    Event::Enter { tid, method }
}

fn leave(tid: Tid, method: u32) -> Event {
    Event::Leave {
        tid,
        method,
        exception: false,
    }
}

fn run(removals: &[(u32, Time)]) -> (Repairs, Vec<Call>) {
    let mut tl = Timeline::new(Time(0), Source::Tracepoints, [T, U]);
    tl.removed_methods(removals.iter().copied());
    let mut calls = Calls::default();
    let events = [
        (10, enter(T, A)),
        (20, enter(T, HOT)),
        (30, leave(T, HOT)), // before the removal
        (40, enter(T, HOT)), // in flight at the removal...
        (42, enter(U, A)),
        (43, enter(U, HOT)), // in flight, and its leave never comes
        (50, leave(T, HOT)), // ...its leave comes from the old code
        (60, enter(T, B)),
        (65, enter(T, C)), // still traced: its lost leave is a repair
        (70, leave(T, B)),
        (90, leave(U, A)),
        (100, leave(T, A)),
    ];
    for (time, event) in events {
        tl.push(
            &Record {
                time: Time(time),
                event,
            },
            &mut calls,
        );
    }
    tl.finish(Time(200), &mut calls);
    (tl.repairs(), calls.0)
}

#[test]
fn a_removed_methods_open_frame_is_unfinished_where_its_caller_leaves() {
    use ExitKind::*;
    let (repairs, calls) = run(&[(HOT, Time(REMOVED_AT))]);
    assert_eq!(
        calls,
        vec![
            (7, HOT, 20, 30, Normal),
            (7, HOT, 40, 50, Normal),
            (7, C, 65, 70, Unwound),
            (7, B, 60, 70, Normal),
            (8, HOT, 43, 90, Unfinished),
            (8, A, 42, 90, Normal),
            (7, A, 10, 100, Normal),
        ]
    );
    assert_eq!(repairs.removed_calls, 1);
    assert_eq!(repairs.unwound_calls, 1);
    assert_eq!(repairs.unfinished_calls, 0);
}

#[test]
fn without_the_removal_the_same_frame_is_a_repair() {
    let (repairs, calls) = run(&[]);
    assert!(calls.contains(&(8, HOT, 43, 90, ExitKind::Unwound)));
    assert_eq!(repairs.removed_calls, 0);
    assert_eq!(repairs.unwound_calls, 2);
}

/// A removal after the caller's leave does not concern the frame: it was lost before.
#[test]
fn a_removal_later_than_the_leave_changes_nothing() {
    let (repairs, calls) = run(&[(HOT, Time(95))]);
    assert!(calls.contains(&(8, HOT, 43, 90, ExitKind::Unwound)));
    assert_eq!(repairs.removed_calls, 0);
}
