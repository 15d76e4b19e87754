//! The builder: a small layer over
//! [`sonda_trace::TraceWriter`] that writes exactly the records it is given, complete
//! or cut short the way a killed recording is.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use sonda_trace::block::{parse_block_header, BLOCK_HEADER_LEN};
use sonda_trace::{Event, Meta, Pid, Record, Runtime, Source, Tid, Time, TraceWriter};

/// The start time of every synthetic trace (times given to [`TraceBuilder::at`] are
/// relative to it).
pub const START: Time = Time(1_000_000_000);

/// Builds a trace in memory, then writes it.
#[derive(Clone, Debug)]
pub struct TraceBuilder {
    meta: Vec<Meta>,
    records: Vec<Record>,
    counters: Vec<Meta>,
    flush_every: usize,
}

impl TraceBuilder {
    /// A trace whose thread states come from `source`, on a machine with `cpus` CPUs.
    pub fn new(source: Source, cpus: u16) -> TraceBuilder {
        let info = Meta::TraceInfo {
            source,
            start: START,
            host: "synthetic".into(),
            cpus,
            command: vec!["java".into(), "Synthetic".into()],
            tool: "sonda test".into(),
        };
        TraceBuilder {
            meta: vec![info],
            records: Vec::new(),
            counters: Vec::new(),
            flush_every: 4,
        }
    }

    /// Adds any metadata record.
    pub fn meta(&mut self, m: Meta) -> &mut Self {
        self.meta.push(m);
        self
    }

    /// Adds a process.
    pub fn process(&mut self, pid: u32, name: &str, runtime: Runtime) -> &mut Self {
        self.meta(Meta::Process {
            pid: Pid(pid),
            ppid: Pid(1),
            name: name.into(),
            runtime,
        })
    }

    /// Adds a thread with its kernel name.
    pub fn thread(&mut self, pid: u32, tid: u32, comm: &str) -> &mut Self {
        self.meta(Meta::Thread {
            pid: Pid(pid),
            tid: Tid(tid),
            comm: comm.into(),
        })
    }

    /// Gives a thread its Java name.
    pub fn java_name(&mut self, pid: u32, tid: u32, name: &str) -> &mut Self {
        self.meta(Meta::JavaThread {
            pid: Pid(pid),
            tid: Tid(tid),
            name: name.into(),
            daemon: false,
        })
    }

    /// Adds an instrumented method.
    pub fn method(&mut self, id: u32, class: &str, name: &str, descriptor: &str) -> &mut Self {
        self.meta(Meta::Method {
            id,
            class: class.into(),
            name: name.into(),
            descriptor: descriptor.into(),
        })
    }

    /// Adds a counter to the end block.
    pub fn counter(&mut self, name: &str, value: u64) -> &mut Self {
        self.counters.push(Meta::Counter {
            name: name.into(),
            value,
        });
        self
    }

    /// Adds a timed record `ns` after [`START`]. Records must be added in time order.
    pub fn at(&mut self, ns: u64, event: Event) -> &mut Self {
        self.records.push(Record {
            time: Time(START.0 + ns),
            event,
        });
        self
    }

    /// The metadata records, the first being the `TraceInfo`.
    pub fn metadata(&self) -> &[Meta] {
        &self.meta
    }

    /// The timed records.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Cuts an events block every `n` records (default 4), so that damage can be
    /// placed between blocks.
    pub fn flush_every(&mut self, n: usize) -> &mut Self {
        self.flush_every = n.max(1);
        self
    }

    /// Encodes the trace; with `cut_after`, also returns the byte offset right after
    /// the block holding the first `cut_after` records.
    fn encode(&self, cut_after: Option<usize>) -> io::Result<(Vec<u8>, u64)> {
        let mut w = TraceWriter::new(Vec::new())?;
        for m in &self.meta {
            w.meta(m);
        }
        let mut offset = 0;
        for (i, r) in self.records.iter().enumerate() {
            w.record(r)?;
            if (i + 1) % self.flush_every == 0 || Some(i + 1) == cut_after {
                w.flush()?;
            }
            if Some(i + 1) == cut_after {
                offset = w.bytes_written();
            }
        }
        w.flush()?;
        Ok((w.finish(&self.counters)?, offset))
    }

    /// Writes the complete trace to `path`.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        write_file(path, &self.encode(None)?.0)
    }

    /// Writes the trace as a recording killed after its first `kept` records (at
    /// least 1): those are in complete blocks, the next block is cut in its middle,
    /// and there is no end block. Returns the byte offset where readable data ends.
    pub fn write_cut(&self, path: &Path, kept: usize) -> io::Result<u64> {
        let (full, offset) = self.encode(Some(kept.max(1)))?;
        let header = BLOCK_HEADER_LEN;
        let at = offset as usize;
        let next_len = match full
            .get(at..at + header)
            .map(|h| parse_block_header(h.try_into().expect("header")))
        {
            Some(Ok(h)) => header + h.len as usize,
            _ => header,
        };
        write_file(path, &full[..at + next_len / 2])?;
        Ok(offset)
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = BufWriter::new(File::create(path)?);
    f.write_all(bytes)?;
    f.flush()
}
