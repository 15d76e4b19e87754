//! The optional tap of a recording: a copy of what goes into the trace, for live views
//! of the recording in progress (`sonda record --metrics`).
//!
//! The tap sees every metadata record and every timed record in the order the trace
//! writer gets them (timed records released in time order by the watermark, the
//! metadata that names them before them), and once per drain cycle the recording's
//! own counters. It runs on the recording's thread, between the release and the
//! writer: an implementation must never block or take long (copy into a bounded
//! queue and drop what does not fit), because the recording waits for it. What the
//! tap does has no effect on the trace.

use std::io::{self, Write};

use sonda_trace::{Meta, Record, TraceWriter};

/// The recording's own counters, as they stand at the end of a drain cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveStats {
    /// Timed records written to the trace so far (kernel, /proc and agent records).
    pub events: u64,
    /// Agent events lost so far: dropped by full rings, or by threads that found no
    /// free slot.
    pub dropped: u64,
    /// CPU time of the collector process so far (ns, every thread of it).
    pub collector_cpu_ns: u64,
}

/// Receives a copy of what the recording writes. See the module documentation: every
/// method is called on the recording's thread and must return at once.
pub trait Tap: Send {
    /// A metadata record, as written to the trace.
    fn meta(&mut self, meta: &Meta);
    /// A timed record, as written to the trace (in time order).
    fn record(&mut self, record: &Record);
    /// The end of a drain cycle, with the counters as they stand.
    fn cycle(&mut self, stats: &LiveStats);
}

/// The trace writer with the tap beside it: every meta and record goes to both.
pub(crate) struct Tapped<W: Write> {
    writer: TraceWriter<W>,
    tap: Option<Box<dyn Tap>>,
}

impl<W: Write> Tapped<W> {
    pub fn new(writer: TraceWriter<W>, tap: Option<Box<dyn Tap>>) -> Tapped<W> {
        Tapped { writer, tap }
    }

    pub fn meta(&mut self, meta: &Meta) {
        self.writer.meta(meta);
        if let Some(t) = &mut self.tap {
            t.meta(meta);
        }
    }

    pub fn record(&mut self, record: &Record) -> io::Result<()> {
        let floor = self.writer.last_time();
        self.writer.record(record)?;
        let Some(t) = &mut self.tap else {
            return Ok(());
        };
        if record.count() == 1 {
            t.record(record);
        } else {
            // As the trace reads it: a switch's carried charge before it, where the
            // writer puts it.
            let (charge, switch) = record.clone().unfold(floor);
            if let Some(charge) = charge {
                t.record(&charge);
            }
            t.record(&switch);
        }
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    /// Whether there is a tap (so that its counters are only gathered for one).
    pub fn tapped(&self) -> bool {
        self.tap.is_some()
    }

    /// Tells the tap that a cycle ended.
    pub fn cycle(&mut self, stats: &LiveStats) {
        if let Some(t) = &mut self.tap {
            t.cycle(stats);
        }
    }

    /// Ends the trace with `counters`; the tap sees them as metadata first, then the
    /// last cycle.
    pub fn finish(mut self, counters: &[Meta], stats: LiveStats) -> io::Result<W> {
        if let Some(t) = &mut self.tap {
            for c in counters {
                t.meta(c);
            }
            t.cycle(&stats);
        }
        self.writer.finish(counters)
    }
}
