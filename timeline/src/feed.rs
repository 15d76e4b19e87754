//! Reading a trace for a timeline: the I/O shell around the state machines, with the
//! rules every consumer needs about where a trace begins and ends.
//!
//! - The origin is the recording's start ([`TraceMeta::origin`]), or the first record
//!   if one is earlier, so that no time is negative.
//! - A complete trace ends at its last record. A damaged one ends where its readable
//!   records end: records are delivered up to the first damaged block, and never past
//!   the last record the metadata scan saw (threads named after that are unknown).

use std::path::Path;

use sonda_trace::{Events, ReadError, Record, Time, TraceMeta};

/// The time origin of a trace: its start, or its first record if earlier.
pub fn origin(meta: &TraceMeta) -> Time {
    match meta.first_time {
        Some(first) => first.min(meta.origin()),
        None => meta.origin(),
    }
}

/// Streams a trace's records, stopping at damage (kept for [`Feed::damage`]).
pub struct Feed {
    events: Events,
    origin: Time,
    limit: Time,
    last: Option<Time>,
    records: u64,
    damage: Option<ReadError>,
}

impl Feed {
    /// Opens the trace at `path`, already scanned into `meta`.
    pub fn open(path: &Path, meta: &TraceMeta) -> Result<Feed, ReadError> {
        let origin = origin(meta);
        Ok(Feed {
            events: Events::open(path)?,
            origin,
            limit: meta.last_time.unwrap_or(origin).max(origin),
            last: None,
            records: 0,
            damage: None,
        })
    }

    /// The trace's end: its last record's time, or the last readable one's when the
    /// records are damaged. Final once [`Feed::next`] returned `None`.
    pub fn end(&self) -> Time {
        match self.damage {
            Some(_) => self.last.unwrap_or(self.origin),
            None => self.limit,
        }
    }

    /// The time origin.
    pub fn origin(&self) -> Time {
        self.origin
    }

    /// Records delivered so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Where the records stopped being readable, if they did.
    pub fn damage(&self) -> Option<&ReadError> {
        self.damage.as_ref()
    }

    /// The damage, for a summary that owns it (read [`Feed::end`] first).
    pub fn into_damage(self) -> Option<ReadError> {
        self.damage
    }
}

impl Iterator for Feed {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        match self.events.next()? {
            Ok(r) if r.time > self.limit => None,
            Ok(r) => {
                self.records += 1;
                self.last = Some(r.time);
                Some(r)
            }
            Err(e) => {
                self.damage = Some(e);
                None
            }
        }
    }
}
