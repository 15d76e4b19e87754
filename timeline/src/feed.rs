//! Reading a trace for a timeline: the I/O shell around the state machines, with the
//! rules every consumer needs about where a trace begins and ends.
//!
//! - The origin is the recording's start ([`TraceMeta::origin`]), or the first record
//!   if one is earlier, so that no time is negative.
//! - A trace ends at its last record, never past the last record the metadata scan saw
//!   (threads named after that are unknown).
//! - Damage does not end the records: a damaged stretch is skipped and the records of
//!   the next intact block follow (the reader resynchronises there), so one flipped byte
//!   costs one block. [`Feed::unread`] lists every stretch skipped. A trace cut short
//!   (or an I/O error) ends where its readable records end.
//!
//! Across a skipped stretch the timeline carries each thread's last known state on, as
//! it does across kernel records the kernel lost; its repair counters say what did not
//! hold together on the far side.

use std::path::Path;

use sonda_trace::{Damage, Events, ReadError, Record, Time, TraceMeta};

/// The time origin of a trace: its start, or its first record if earlier.
pub fn origin(meta: &TraceMeta) -> Time {
    match meta.first_time {
        Some(first) => first.min(meta.origin()),
        None => meta.origin(),
    }
}

/// Streams a trace's intact records, going on past damage (the first kept for
/// [`Feed::damage`], all of it in [`Feed::unread`]).
pub struct Feed {
    events: Events,
    origin: Time,
    limit: Time,
    last: Option<Time>,
    records: u64,
    damage: Option<ReadError>,
    /// The records ended early: the file is cut short or could not be read on.
    stopped: bool,
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
            stopped: false,
        })
    }

    /// The trace's end: its last record's time, or the last readable one's when the
    /// records end early (a cut-short file). Final once [`Feed::next`] returned `None`.
    pub fn end(&self) -> Time {
        match self.stopped {
            true => self.last.unwrap_or(self.origin),
            false => self.limit,
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

    /// The first damage met, if any: a damaged stretch (the records went on after it)
    /// or the end of a cut-short file.
    pub fn damage(&self) -> Option<&ReadError> {
        self.damage.as_ref()
    }

    /// Every stretch skipped so far, with the bytes and records lost (all of them once
    /// [`Feed::next`] returned `None`).
    pub fn unread(&self) -> &Damage {
        self.events.damage()
    }

    /// The damage, for a summary that owns it (read [`Feed::end`] first).
    pub fn into_damage(self) -> Option<ReadError> {
        self.damage
    }
}

impl Iterator for Feed {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        loop {
            match self.events.next()? {
                Ok(r) if r.time > self.limit => return None,
                Ok(r) => {
                    self.records += 1;
                    self.last = Some(r.time);
                    return Some(r);
                }
                Err(e) => {
                    let last = !matches!(e, ReadError::Corrupt { .. });
                    self.stopped |= last;
                    self.damage.get_or_insert(e);
                    if last {
                        return None;
                    }
                }
            }
        }
    }
}

/// One line on a damaged trace for a command's message: every stretch a pass skipped
/// (`unread`, the scan's list) and where the file is cut short, else the first damage
/// met (`first`: a read error, or the cut-short end of an otherwise intact file).
pub fn damage_line(first: &ReadError, unread: &Damage) -> String {
    if unread.regions.is_empty() {
        first.to_string()
    } else {
        format!("trace is damaged: {unread}")
    }
}
