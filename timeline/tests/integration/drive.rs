//! The driver (`Trace`) on trace files: it delivers what pushing the records one by
//! one delivers, feeds a pair of sinks alike, calls a consumer's hooks around each
//! record, stops where a consumer says, reports progress, and stops at damage.

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, Mutex};

use sonda_testdata::showcase;
use sonda_timeline::{
    CallEnter, CallExit, Consumer, DriveOptions, Feed, GcSpan, Interval, MonitorWait, OnCpu,
    Progress, Sink, Timeline, Trace, WakeEdge,
};
use sonda_trace::{ReadError, Record, Time, TraceMeta};

/// Every output, in order, as text.
#[derive(Default, Debug, PartialEq)]
struct Log(Vec<String>);

impl Sink for Log {
    fn interval(&mut self, iv: &Interval) {
        self.0.push(format!("{iv:?}"));
    }
    fn enter(&mut self, c: &CallEnter) {
        self.0.push(format!("{c:?}"));
    }
    fn exit(&mut self, c: &CallExit) {
        self.0.push(format!("{c:?}"));
    }
    fn gc(&mut self, g: &GcSpan) {
        self.0.push(format!("{g:?}"));
    }
    fn monitor(&mut self, w: &MonitorWait) {
        self.0.push(format!("{w:?}"));
    }
    fn wake(&mut self, e: &WakeEdge) {
        self.0.push(format!("{e:?}"));
    }
    fn on_cpu(&mut self, r: &OnCpu) {
        self.0.push(format!("{r:?}"));
    }
}

fn showcase_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("s.trace");
    showcase().write(&path).unwrap();
    path
}

/// The records pushed by hand through a timeline over every thread.
fn by_hand(path: &Path) -> (Log, u64) {
    let meta = TraceMeta::scan(path).unwrap();
    let mut feed = Feed::open(path, &meta).unwrap();
    let source = meta.info.as_ref().unwrap().source;
    let mut timeline = Timeline::new(feed.origin(), source, meta.threads.keys().copied());
    let mut log = Log::default();
    for record in feed.by_ref() {
        timeline.push(&record, &mut log);
    }
    timeline.finish(feed.end(), &mut log);
    (log, feed.records())
}

#[test]
fn driving_a_sink_delivers_what_pushing_by_hand_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = showcase_file(dir.path());
    let (expected, records) = by_hand(&path);
    assert!(expected.0.len() > 50, "{}", expected.0.len());

    let trace = Trace::open(&path).unwrap();
    let (origin, end) = (trace.origin(), trace.end());
    let total = trace.meta().records;
    let mut log = Log::default();
    let driven = trace.drive(&mut log).unwrap();
    assert_eq!(log, expected);
    assert_eq!(driven.records, records);
    assert_eq!((driven.records, driven.pushed), (total, total));
    assert_eq!((driven.origin, driven.end), (origin, end));
    assert!(driven.damage.is_none() && driven.meta.complete);
    assert_eq!(driven.timeline.len(), driven.meta.threads.len());
}

#[test]
fn a_pair_of_sinks_gets_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let path = showcase_file(dir.path());
    let (expected, _) = by_hand(&path);
    let (mut a, mut b) = (Log::default(), Log::default());
    Trace::open(&path)
        .unwrap()
        .drive(&mut (&mut a, &mut b))
        .unwrap();
    assert_eq!(a, expected);
    assert_eq!(b, expected);
}

/// Stops before the record numbered `stop_at` (from 0) and logs every hook.
struct Stopper {
    log: Log,
    stop_at: usize,
    seen: usize,
    hooks: Vec<String>,
}

impl Consumer for Stopper {
    type Sink = Log;
    type Error = Infallible;

    fn sink(&mut self) -> &mut Log {
        &mut self.log
    }

    fn before(&mut self, _: &Timeline, record: &Record) -> ControlFlow<()> {
        if self.seen == self.stop_at {
            self.hooks.push(format!("stop {}", record.time.0));
            return ControlFlow::Break(());
        }
        self.seen += 1;
        self.hooks.push("before".into());
        ControlFlow::Continue(())
    }

    fn after(&mut self, _: &mut Timeline, _: &Record) -> Result<(), Infallible> {
        self.hooks.push("after".into());
        Ok(())
    }

    fn closing(&mut self, _: &Timeline, end: Time) -> Time {
        self.hooks.push(format!("closing {}", end.0));
        Time(end.0 + 7)
    }

    fn finished(&mut self, _: &mut Timeline) -> Result<(), Infallible> {
        self.hooks.push("finished".into());
        Ok(())
    }
}

#[test]
fn a_consumer_is_called_around_each_record_and_can_stop_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = showcase_file(dir.path());
    let records = showcase().records().to_vec();
    let told = Arc::new(Mutex::new(Vec::new()));
    let progress = {
        let told = told.clone();
        Progress::new(move |done, total| told.lock().unwrap().push((done, total)))
    };
    let mut stopper = Stopper {
        log: Log::default(),
        stop_at: 10,
        seen: 0,
        hooks: Vec::new(),
    };
    let trace = Trace::open(&path).unwrap();
    let total = trace.meta().records;
    let end = trace.end();
    let opts = DriveOptions::default().with_progress(Some(progress));
    let driven = trace.drive_with(&opts, &mut stopper).unwrap();

    // Ten records pushed, the eleventh read and not pushed.
    assert_eq!((driven.pushed, driven.records), (10, 11));
    let mut expected: Vec<String> = ["before", "after"]
        .repeat(10)
        .into_iter()
        .map(String::from)
        .collect();
    expected.push(format!("stop {}", records[10].time.0));
    // The trace's end is still the metadata's; the timeline ends where `closing` said.
    expected.push(format!("closing {}", end.0));
    expected.push("finished".into());
    assert_eq!(stopper.hooks, expected);
    assert_eq!(driven.end, Time(end.0 + 7));
    // Fewer than a progress step: told once, at the end.
    assert_eq!(*told.lock().unwrap(), [(10, total)]);
}

#[test]
fn following_some_threads_and_looking_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let path = showcase_file(dir.path());
    let trace = Trace::open(&path).unwrap();
    let some: Vec<_> = trace.meta().threads.keys().copied().take(2).collect();
    let opts = DriveOptions::default()
        .with_threads(some.iter().copied())
        .with_look_ahead(true);
    let mut stopper = Stopper {
        log: Log::default(),
        stop_at: usize::MAX,
        seen: 0,
        hooks: Vec::new(),
    };
    let driven = trace.drive_with(&opts, &mut stopper).unwrap();
    assert_eq!(driven.timeline.len(), 2);
    assert_eq!(driven.timeline.thread(some[1]).map(|ix| ix.get()), Some(1));
    assert_eq!(driven.pushed, driven.records);
}

#[test]
fn a_cut_trace_is_driven_up_to_where_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.trace");
    let b = showcase();
    let offset = b.write_cut(&path, 40).unwrap();
    let mut log = Log::default();
    let driven = Trace::open(&path).unwrap().drive(&mut log).unwrap();
    assert!(
        matches!(driven.damage, Some(ReadError::Truncated { offset: o }) if o == offset),
        "{:?}",
        driven.damage
    );
    assert_eq!(driven.records, 40);
    assert_eq!(driven.end, b.records()[39].time);
}

#[test]
fn a_missing_trace_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.trace");
    let err = Trace::open(&missing).unwrap_err().to_string();
    assert!(err.contains("missing.trace"), "{err}");
}
