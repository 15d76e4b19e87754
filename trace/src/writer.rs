//! Writes a trace as a stream of blocks. Nothing is held back longer than one
//! [`TraceWriter::flush`]: the caller flushes periodically so that a recording killed
//! at any moment leaves every flushed record readable.

use std::io::{self, Write};

use crate::block::{block_header, block_header_encoded, file_header_for, BlockKind};
use crate::codec::{encode_meta, encode_record, encode_record_compact, Encoding};
use crate::record::{Meta, Record};

/// Events blocks are cut at about this size; readers hold one block at a time.
pub const BLOCK_TARGET: usize = 256 << 10;

/// Streams records into a trace file (or any [`Write`]).
pub struct TraceWriter<W: Write> {
    out: W,
    meta: Vec<u8>,
    meta_count: u32,
    events: Vec<u8>,
    event_count: u32,
    first: u64,
    last: u64,
    /// Compact encoding: the time of the last record queued in the block.
    prev: u64,
    encoding: Encoding,
    bytes: u64,
}

impl<W: Write> TraceWriter<W> {
    /// Starts a trace (format 2.0, compact events blocks): writes the file header.
    pub fn new(out: W) -> io::Result<TraceWriter<W>> {
        TraceWriter::with_encoding(out, Encoding::Compact)
    }

    /// Starts a trace whose events blocks are in `encoding`: [`Encoding::Fixed`] writes
    /// a 1.4 file, which readers of format 1 read too.
    pub fn with_encoding(mut out: W, encoding: Encoding) -> io::Result<TraceWriter<W>> {
        let header = file_header_for(encoding);
        out.write_all(&header)?;
        Ok(TraceWriter {
            out,
            meta: Vec::new(),
            meta_count: 0,
            events: Vec::with_capacity(BLOCK_TARGET + 1024),
            event_count: 0,
            first: 0,
            last: 0,
            prev: 0,
            encoding,
            bytes: header.len() as u64,
        })
    }

    /// Queues a metadata record; it is written before the events queued with it.
    pub fn meta(&mut self, meta: &Meta) {
        encode_meta(&mut self.meta, meta);
        self.meta_count += 1;
    }

    /// Queues a timed record. Records must come in time order: a record earlier than
    /// the previous one is an error of the caller, caught here rather than written.
    pub fn record(&mut self, record: &Record) -> io::Result<()> {
        if record.time.0 < self.last {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "record at {} after one at {}: records must come in time order",
                    record.time.0, self.last
                ),
            ));
        }
        let Some(before_ns) = record.carried_before_ns() else {
            return self.push(record, record.time.0);
        };
        // A record carrying an earlier one (a switch its switch-out's charge, a wakeup
        // its waking): that one reads back `before_ns` earlier (`Record::unfold`), never
        // before the record written last.
        let room = u32::try_from(record.time.0 - self.last).unwrap_or(u32::MAX);
        if self.encoding == Encoding::Fixed {
            // A 1.x file: readers of 1.5 and older would skip the trailing fields, so
            // the two records go apart.
            let (earlier, carrier) = record.clone().unfold(self.last);
            if let Some(earlier) = earlier {
                self.push(&earlier, earlier.time.0)?;
            }
            return self.push(&carrier, carrier.time.0);
        }
        if before_ns <= room {
            return self.push(record, record.time.0 - u64::from(before_ns));
        }
        let mut clamped = record.clone();
        clamped.shorten_carried(room);
        self.push(&clamped, record.time.0 - u64::from(room))
    }

    /// Queues a record in time order whose first record as read is at `starts` (the
    /// record it carries, before it).
    fn push(&mut self, record: &Record, starts: u64) -> io::Result<()> {
        if self.event_count == 0 {
            self.first = starts;
            self.prev = starts;
        }
        self.last = record.time.0;
        match self.encoding {
            Encoding::Fixed => encode_record(&mut self.events, record),
            Encoding::Compact => encode_record_compact(&mut self.events, record, &mut self.prev),
        }
        self.event_count += record.count();
        if self.events.len() >= BLOCK_TARGET {
            self.flush()?;
        }
        Ok(())
    }

    /// Time of the last record queued or written.
    pub fn last_time(&self) -> u64 {
        self.last
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    /// Writes every queued record as complete blocks (metadata first).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.meta_count > 0 {
            let payload = std::mem::take(&mut self.meta);
            self.write_block(BlockKind::Meta, self.meta_count, 0, 0, &payload)?;
            self.meta = payload;
            self.meta.clear();
            self.meta_count = 0;
        }
        if self.event_count > 0 {
            let payload = std::mem::take(&mut self.events);
            let header = block_header_encoded(
                BlockKind::Events,
                self.encoding,
                self.event_count,
                self.first,
                self.last,
                &payload,
            );
            self.write_header_and(&header, &payload)?;
            self.events = payload;
            self.events.clear();
            self.event_count = 0;
        }
        self.out.flush()
    }

    /// Flushes, then writes the end block with the final `counters` and returns the sink.
    pub fn finish(mut self, counters: &[Meta]) -> io::Result<W> {
        self.flush()?;
        let mut payload = Vec::new();
        for c in counters {
            encode_meta(&mut payload, c);
        }
        self.write_block(
            BlockKind::End,
            counters.len() as u32,
            0,
            self.last,
            &payload,
        )?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Flushes, with the final `counters` in a metadata block, and returns the sink
    /// without writing the end block: the trace then reads as one whose recording did
    /// not finish (`complete` false). For a trace made of one that did not finish (a
    /// merge of a trace cut short), which must not claim to be complete.
    pub fn finish_incomplete(mut self, counters: &[Meta]) -> io::Result<W> {
        for c in counters {
            self.meta(c);
        }
        self.flush()?;
        Ok(self.out)
    }

    fn write_block(
        &mut self,
        kind: BlockKind,
        count: u32,
        first: u64,
        last: u64,
        payload: &[u8],
    ) -> io::Result<()> {
        let header = block_header(kind, count, first, last, payload);
        self.write_header_and(&header, payload)
    }

    fn write_header_and(&mut self, header: &[u8], payload: &[u8]) -> io::Result<()> {
        self.out.write_all(header)?;
        self.out.write_all(payload)?;
        self.bytes += (header.len() + payload.len()) as u64;
        Ok(())
    }
}
