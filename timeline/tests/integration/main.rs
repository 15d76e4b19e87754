//! sonda-timeline's integration tests, one test binary (one link step): each module was a test file of its own.

mod drive;
mod migrations;
mod procfs;
mod removals;
mod report;
mod showcase;
mod switch_clock;

use sonda_timeline::{Sink, Timeline};
use sonda_trace::{Event, Record, Source, Tid, Time};

/// A timeline of `threads` (from the kernel's tracepoints, starting at 0) fed `events`
/// (time, event) one by one and finished at `end`, with what the sink `S` was given.
pub fn push_all<S: Sink + Default>(
    threads: impl IntoIterator<Item = Tid>,
    events: Vec<(u64, Event)>,
    end: u64,
) -> (Timeline, S) {
    push_into(
        Timeline::new(Time(0), Source::Tracepoints, threads),
        events,
        end,
    )
}

/// [`push_all`] into a timeline set up by the caller.
pub fn push_into<S: Sink + Default>(
    mut tl: Timeline,
    events: Vec<(u64, Event)>,
    end: u64,
) -> (Timeline, S) {
    let mut sink = S::default();
    for (time, event) in events {
        tl.push(
            &Record {
                time: Time(time),
                event,
            },
            &mut sink,
        );
    }
    tl.finish(Time(end), &mut sink);
    (tl, sink)
}
