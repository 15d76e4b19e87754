//! The recording's side: copies of what the trace gets, handed to the metrics thread
//! in batches through a bounded channel without ever waiting.
//!
//! The recording calls [`Feed`] for every record it writes, so the copy must be cheap
//! and must not block: records go into a batch (a `Vec`), and a full batch (or the end
//! of a drain cycle) is passed on with `try_send`. When the metrics thread is behind
//! and the channel is full, the batch's timed records are dropped and counted; its
//! metadata (method and thread names, rare) is kept for the next batch, so that what
//! the metrics name stays right after a drop. Memory is bounded by [`QUEUE`] batches
//! of at most [`BATCH`] records each, plus the batch being filled.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use sonda_recorder::{LiveStats, Tap};
use sonda_trace::{Meta, Record};

/// Records per batch: large enough that a channel operation costs little per record,
/// small enough that a dropped batch is a small part of a second of a busy recording.
pub const BATCH: usize = 8192;
/// Batches the channel holds: about 1.6 s of a recording writing 40 000 records a
/// second (far more than the metrics thread needs to keep up), some 15 MB at most.
pub const QUEUE: usize = 32;

/// One thing the trace got.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    /// Boxed: metadata is rare and much larger than a record.
    Meta(Box<Meta>),
    Record(Record),
    Counters(LiveStats),
}

/// The sending side, owned by the recording (see the module documentation).
#[derive(Debug)]
pub struct Feed {
    batch: Vec<Item>,
    records: usize,
    tx: Option<SyncSender<Vec<Item>>>,
    dropped: Arc<AtomicU64>,
}

/// A feed, the receiving side for the metrics thread, and the shared count of timed
/// records dropped.
pub(crate) fn channel() -> (Feed, Receiver<Vec<Item>>, Arc<AtomicU64>) {
    let (tx, rx) = mpsc::sync_channel(QUEUE);
    let dropped = Arc::new(AtomicU64::new(0));
    let feed = Feed {
        batch: Vec::with_capacity(BATCH),
        records: 0,
        tx: Some(tx),
        dropped: Arc::clone(&dropped),
    };
    (feed, rx, dropped)
}

impl Feed {
    /// A metadata record the trace got.
    pub fn meta(&mut self, meta: &Meta) {
        if self.tx.is_some() {
            self.batch.push(Item::Meta(Box::new(meta.clone())));
        }
    }

    /// A timed record the trace got.
    pub fn record(&mut self, record: &Record) {
        if self.tx.is_none() {
            return;
        }
        self.batch.push(Item::Record(record.clone()));
        self.records += 1;
        if self.records >= BATCH {
            self.send();
        }
    }

    /// The end of a drain cycle: the counters, and what was gathered is passed on.
    pub fn cycle(&mut self, counters: LiveStats) {
        if self.tx.is_none() {
            return;
        }
        self.batch.push(Item::Counters(counters));
        self.send();
    }

    /// Timed records dropped so far because the metrics thread was behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn send(&mut self) {
        let Some(tx) = &self.tx else { return };
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        let records = std::mem::take(&mut self.records);
        match tx.try_send(batch) {
            Ok(()) => {}
            Err(TrySendError::Full(batch)) => {
                self.dropped.fetch_add(records as u64, Ordering::Relaxed);
                self.batch
                    .extend(batch.into_iter().filter(|i| matches!(i, Item::Meta(_))));
            }
            Err(TrySendError::Disconnected(_)) => {
                // The metrics thread is gone: nothing more to gather.
                self.dropped.fetch_add(records as u64, Ordering::Relaxed);
                self.tx = None;
                self.batch = Vec::new();
            }
        }
    }
}

/// The feed is the recorder's tap: what the recorder writes, it hands on.
impl Tap for Feed {
    fn meta(&mut self, meta: &Meta) {
        Feed::meta(self, meta);
    }

    fn record(&mut self, record: &Record) {
        Feed::record(self, record);
    }

    fn cycle(&mut self, stats: &LiveStats) {
        Feed::cycle(self, *stats);
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.send();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{Event, Tid, Time};

    fn rec(t: u64) -> Record {
        Record {
            time: Time(t),
            event: Event::ThreadStart { tid: Tid(1) },
        }
    }

    #[test]
    fn a_full_channel_drops_records_but_keeps_names() {
        let (mut feed, rx, dropped) = channel();
        // Fill the channel without a reader.
        for i in 0..QUEUE {
            feed.record(&rec(i as u64));
            feed.cycle(LiveStats::default());
        }
        assert_eq!(dropped.load(Ordering::Relaxed), 0);
        feed.meta(&Meta::Counter {
            name: "x".into(),
            value: 1,
        });
        feed.record(&rec(99));
        feed.record(&rec(100));
        feed.cycle(LiveStats::default());
        assert_eq!(feed.dropped(), 2);
        // The next batch that fits carries the kept metadata first.
        let first = rx.recv().unwrap();
        assert!(matches!(first[0], Item::Record(_)));
        for _ in 1..QUEUE {
            rx.recv().unwrap();
        }
        feed.record(&rec(101));
        feed.cycle(LiveStats::default());
        let next = rx.recv().unwrap();
        assert!(matches!(next[0], Item::Meta(_)));
        assert!(matches!(next[1], Item::Record(_)));
        assert_eq!(feed.dropped(), 2);
    }

    #[test]
    fn a_gone_reader_stops_the_copies() {
        let (mut feed, rx, _) = channel();
        drop(rx);
        feed.record(&rec(1));
        feed.cycle(LiveStats::default());
        assert_eq!(feed.dropped(), 1);
        feed.record(&rec(2));
        assert!(feed.batch.is_empty());
    }
}
