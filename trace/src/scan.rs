//! Whole-trace views built on the block reader: [`TraceMeta`] gathers every name and
//! counter in one pass (checking every block, so that it skips the same damage as the
//! events), and [`Events`] streams the timed records one block at a time. Exporters use both: first the names (a Paraver header
//! needs every thread before the first record), then the events.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::block::{BlockKind, BLOCK_HEADER_LEN};
use crate::codec::{Item, Items};
use crate::damage::{Damage, SkippedRegion};
use crate::reader::{Block, ReadError, TraceReader};
use crate::record::{Meta, Record, Runtime, Source, SWITCHES_CLOCK_DATED};
use crate::types::{Pid, Tid, Time};

/// What the trace says about itself ([`Meta::TraceInfo`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceInfo {
    /// Where thread states come from.
    pub source: Source,
    /// When recording started: the time origin.
    pub start: Time,
    /// Host name.
    pub host: String,
    /// Number of CPUs of the machine.
    pub cpus: u16,
    /// The recorded command line, or `attach <pid>`.
    pub command: Vec<String>,
    /// The sonda version that wrote the trace.
    pub tool: String,
}

/// A process of the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    /// The process id.
    pub pid: Pid,
    /// Its parent's.
    pub ppid: Pid,
    /// Its name (the program).
    pub name: String,
    /// What it runs.
    pub runtime: Runtime,
}

/// A thread of the trace and its names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadInfo {
    /// The thread's process.
    pub pid: Pid,
    /// The thread id.
    pub tid: Tid,
    /// The kernel's name (`comm`), last known.
    pub comm: String,
    /// The Java name, when the agent reported one.
    pub java_name: Option<String>,
    /// Whether it is a Java daemon thread.
    pub daemon: bool,
}

impl ThreadInfo {
    /// The name to show: the Java name if there is one, else the kernel's.
    pub fn name(&self) -> &str {
        self.java_name.as_deref().unwrap_or(&self.comm)
    }
}

/// An instrumented method or named region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodInfo {
    /// The class in source form (empty for a native region).
    pub class: String,
    /// The method's or region's name.
    pub name: String,
    /// The JVM descriptor (empty for a native region).
    pub descriptor: String,
}

impl MethodInfo {
    /// `class::name` (or just `name` for a native region without class).
    pub fn qualified(&self) -> String {
        if self.class.is_empty() {
            self.name.clone()
        } else {
            format!("{}::{}", self.class, self.name)
        }
    }
}

/// A method whose probes the agent's overhead budget removed ([`Meta::MethodRemoved`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Removal {
    /// The method id.
    pub id: u32,
    /// When its probes were gone.
    pub time: Time,
    /// Its call rate before (calls a second).
    pub rate: u64,
    /// Its mean duration before (ns).
    pub mean_ns: u64,
    /// The share of the process's CPU its probes were estimated to cost, in millionths.
    pub overhead_ppm: u64,
}

/// A compiler-instrumented native function ([`Meta::NativeFunction`]): its address in
/// its process, to be resolved against the process's mappings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeFunctionInfo {
    /// The process.
    pub pid: Pid,
    /// The function's address in it.
    pub addr: u64,
}

/// Everything a trace names, and where its data ends.
#[derive(Debug, Default)]
pub struct TraceMeta {
    /// What was recorded, how and where (`None` in a trace cut before its first block).
    pub info: Option<TraceInfo>,
    /// The processes followed, by pid.
    pub processes: BTreeMap<Pid, ProcessInfo>,
    /// The threads followed, by tid, with their last known names.
    pub threads: BTreeMap<Tid, ThreadInfo>,
    /// Instrumented methods and named regions, by id.
    pub methods: HashMap<u32, MethodInfo>,
    /// Classes of contended monitors, by id.
    pub monitor_classes: HashMap<u32, String>,
    /// Counters, last value of each name.
    pub counters: BTreeMap<String, u64>,
    /// Warnings, in the order written.
    pub warnings: Vec<String>,
    /// [`Meta::Mapping`] records, for naming native functions.
    pub mappings: Vec<Meta>,
    /// [`Meta::UserType`] records, naming C API event types and values.
    pub user_types: Vec<Meta>,
    /// Method ids that stand for native functions (each also has a `methods` entry).
    pub native_functions: HashMap<u32, NativeFunctionInfo>,
    /// Methods the overhead budget removed, in the order written (by time).
    pub removals: Vec<Removal>,
    /// Time of the first timed record, if any.
    pub first_time: Option<Time>,
    /// Time of the last timed record, if any.
    pub last_time: Option<Time>,
    /// Number of timed records, as the intact events blocks' headers count them.
    pub records: u64,
    /// Whether the trace has its end block (the recording finished cleanly).
    pub complete: bool,
    /// The first damage met, when the file is damaged or cut short: the first
    /// [`ReadError::Corrupt`] (the scan went on after it), else the
    /// [`ReadError::Truncated`] end.
    pub damage: Option<ReadError>,
    /// Everything the scan skipped: the same regions as [`Events::damage`] for damage
    /// to the blocks, plus the rest of any metadata block whose records stop decoding.
    pub skipped: Damage,
}

impl TraceMeta {
    /// Reads every block of the trace at `path` (checking every checksum), gathering the
    /// metadata and the events blocks' times and counts. Fails only when the file cannot
    /// be opened or is not a trace; damage further in is skipped (the scan goes on at
    /// the next intact block) and recorded in [`TraceMeta::damage`] and
    /// [`TraceMeta::skipped`].
    pub fn scan(path: &Path) -> Result<TraceMeta, ReadError> {
        TraceMeta::read(File::open(path)?)
    }

    /// [`TraceMeta::scan`] of a trace read from `input`.
    pub fn read(input: impl Read) -> Result<TraceMeta, ReadError> {
        let mut reader = TraceReader::new(input)?;
        let mut meta = TraceMeta::default();
        loop {
            match reader.next_block() {
                Ok(None) => break,
                Ok(Some(block)) if block.header.kind == BlockKind::Events => {
                    let header = &block.header;
                    if header.count > 0 {
                        meta.first_time.get_or_insert(Time(header.first));
                        meta.last_time = Some(Time(header.last));
                        meta.records += u64::from(header.count);
                    }
                }
                Ok(Some(block)) => {
                    if let Err((e, at)) = meta.absorb_from(&block) {
                        meta.damage.get_or_insert(e);
                        reader.note(rest_of_block(
                            &block,
                            at,
                            0,
                            "a metadata record that does not decode",
                        ));
                    }
                }
                Err(e) => {
                    let last = !matches!(e, ReadError::Corrupt { .. });
                    meta.damage.get_or_insert(e);
                    if last {
                        break;
                    }
                }
            }
        }
        meta.complete = reader.complete();
        meta.skipped = reader.damage().clone();
        Ok(meta)
    }

    /// Adds the metadata of one block.
    pub fn absorb(&mut self, block: &Block) -> Result<(), ReadError> {
        self.absorb_from(block).map_err(|(e, _)| e)
    }

    /// [`TraceMeta::absorb`], also saying where in the payload the records stopped.
    fn absorb_from(&mut self, block: &Block) -> Result<(), (ReadError, usize)> {
        for item in block.items() {
            match item {
                Ok(Item::Meta(m)) => self.add(m),
                Ok(_) => {}
                Err(e) => return Err((block.corrupt(e.clone()), e.offset)),
            }
        }
        Ok(())
    }

    /// Adds one metadata record.
    pub fn add(&mut self, m: Meta) {
        match m {
            Meta::TraceInfo {
                source,
                start,
                host,
                cpus,
                command,
                tool,
            } => {
                self.info = Some(TraceInfo {
                    source,
                    start,
                    host,
                    cpus,
                    command,
                    tool,
                });
            }
            Meta::Process {
                pid,
                ppid,
                name,
                runtime,
            } => {
                let entry = self.processes.entry(pid).or_insert(ProcessInfo {
                    pid,
                    ppid,
                    name: name.clone(),
                    runtime,
                });
                // A later record refines an earlier one (a JVM is first seen as a process),
                // except that the agent's name (the main class) is kept over the
                // collector's (the executable), whichever comes last in the file.
                if runtime == Runtime::Java || entry.runtime != Runtime::Java {
                    entry.name = name;
                }
                if runtime == Runtime::Java {
                    entry.runtime = Runtime::Java;
                }
                if ppid.0 != 0 {
                    entry.ppid = ppid;
                }
            }
            Meta::Thread { pid, tid, comm } => {
                let t = self.threads.entry(tid).or_default();
                t.pid = pid;
                t.tid = tid;
                t.comm = comm;
            }
            Meta::JavaThread {
                pid,
                tid,
                name,
                daemon,
            } => {
                let t = self.threads.entry(tid).or_default();
                t.pid = pid;
                t.tid = tid;
                if t.comm.is_empty() {
                    t.comm = name.chars().take(15).collect();
                }
                t.java_name = Some(name);
                t.daemon = daemon;
            }
            Meta::Method {
                id,
                class,
                name,
                descriptor,
            } => {
                self.methods.insert(
                    id,
                    MethodInfo {
                        class,
                        name,
                        descriptor,
                    },
                );
            }
            Meta::MonitorClass { id, name } => {
                self.monitor_classes.insert(id, name);
            }
            Meta::Counter { name, value } => {
                self.counters.insert(name, value);
            }
            Meta::Warning { text } => self.warnings.push(text),
            m @ Meta::Mapping { .. } => self.mappings.push(m),
            m @ Meta::UserType { .. } => self.user_types.push(m),
            Meta::NativeFunction { id, pid, addr } => {
                self.native_functions
                    .insert(id, NativeFunctionInfo { pid, addr });
                // The collector writes the function's `Method` too; a trace that lacks
                // it still lists the id among the methods, named by its address.
                self.methods.entry(id).or_insert_with(|| MethodInfo {
                    class: String::new(),
                    name: format!("0x{addr:x}"),
                    descriptor: String::new(),
                });
            }
            Meta::MethodRemoved {
                id,
                time,
                rate,
                mean_ns,
                overhead_ppm,
            } => self.removals.push(Removal {
                id,
                time,
                rate,
                mean_ns,
                overhead_ppm,
            }),
        }
    }

    /// Whether the recorder dated each switch by the scheduler's clock it was made by
    /// (BPF recordings, [`SWITCHES_CLOCK_DATED`]): readers need not infer that clock
    /// from the threads' CPU-time charges. Recordings before the counter was written at
    /// their start say so only in their end block: killed, they get the inference.
    pub fn switches_dated_by_clock(&self) -> bool {
        self.counters.contains_key(SWITCHES_CLOCK_DATED)
    }

    /// The time origin: the recording's start if known, else the first record.
    pub fn origin(&self) -> Time {
        self.info
            .as_ref()
            .map(|i| i.start)
            .or(self.first_time)
            .unwrap_or_default()
    }
}

/// The rest of `block` from payload offset `at`, not delivered because of `what` (the
/// record there); `delivered` of its timed records came before.
fn rest_of_block(block: &Block, at: usize, delivered: u64, what: &str) -> SkippedRegion {
    let records = match block.header.kind {
        BlockKind::Events => u64::from(block.header.count).saturating_sub(delivered),
        _ => 0,
    };
    SkippedRegion {
        offset: block.offset + BLOCK_HEADER_LEN as u64 + at as u64,
        bytes: (block.payload.len() - at) as u64,
        blocks: Some(0),
        records: Some(records),
        reason: format!("{what}, inside an intact block"),
    }
}

/// Streams the timed records of a trace in time order, one block in memory at a time.
/// Records are decoded one at a time from the block's payload, as they are asked for.
///
/// Damage does not end the stream: each damaged stretch yields one
/// `Err(ReadError::Corrupt)`, and the records of the next intact block follow. A caller
/// that stops at the first error gets every record before the damage; one that goes on
/// gets every record of every intact block, and [`Events::damage`] says what was
/// skipped. The records stay in time order: an intact block that goes back in time is
/// refused (see [`TraceReader::next_block`]), and so is the rest of a block from a
/// record that does not decode or goes back in time. `Err(ReadError::Truncated)` (the
/// file ends inside a block) and `Err(ReadError::Io)` are the last items.
pub struct Events<R = File> {
    reader: TraceReader<R>,
    block: Option<Block>,
    /// Where the next record starts in the block's payload.
    pos: usize,
    /// Timed records delivered from the block.
    delivered: u64,
    /// Time of the last record delivered.
    last: Option<Time>,
    /// Compact blocks: the time the next record's difference is from.
    prev: u64,
    /// The record whose carried record was delivered last, delivered next (see
    /// [`Items::take_held`]).
    held: Option<Record>,
    stopped: bool,
}

impl Events {
    /// Opens the trace at `path` for streaming.
    pub fn open(path: &Path) -> Result<Events, ReadError> {
        Events::new(File::open(path)?)
    }
}

impl<R: Read> Events<R> {
    /// Streams the trace read from `input` (checking its file header first).
    pub fn new(input: R) -> Result<Events<R>, ReadError> {
        Ok(Events {
            reader: TraceReader::new(input)?,
            block: None,
            pos: 0,
            delivered: 0,
            last: None,
            prev: 0,
            held: None,
            stopped: false,
        })
    }

    /// What was skipped so far (all of it once the stream has ended).
    pub fn damage(&self) -> &Damage {
        self.reader.damage()
    }

    /// Whether the end block was read: the recording finished cleanly.
    pub fn complete(&self) -> bool {
        self.reader.complete()
    }

    /// The next record of the current block, if it has one more.
    fn next_in_block(&mut self) -> Option<Result<Record, ReadError>> {
        let block = self.block.as_ref()?;
        loop {
            let start = self.pos;
            let item = match self.held.take() {
                Some(carrier) => Some(Ok(Item::Record(carrier))),
                None => {
                    let mut items =
                        Items::with(&block.payload[start..], block.header.encoding, self.prev);
                    let item = items.next();
                    self.pos += items.position();
                    self.prev = items.prev_time();
                    self.held = items.take_held();
                    item
                }
            };
            let what = match item? {
                Ok(Item::Record(r)) if self.last.is_none_or(|last| r.time >= last) => {
                    self.last = Some(r.time);
                    self.delivered += 1;
                    return Some(Ok(r));
                }
                Ok(Item::Record(_)) => "a record that goes back in time",
                Ok(_) => continue,
                Err(_) => "a record that does not decode",
            };
            // The rest of the block goes, the record carrying the refused one with it.
            self.held = None;
            self.pos = block.payload.len();
            let region = rest_of_block(block, start, self.delivered, what);
            return Some(Err(self.reader.note(region)));
        }
    }
}

impl<R: Read> Iterator for Events<R> {
    type Item = Result<Record, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.next_in_block() {
                return Some(r);
            }
            self.block = None;
            if self.stopped {
                return None;
            }
            match self.reader.next_block() {
                Ok(None) => {
                    self.stopped = true;
                    return None;
                }
                Ok(Some(block)) => {
                    let block_first = block.header.first;
                    if block.header.kind == BlockKind::Events {
                        self.block = Some(block);
                        self.pos = 0;
                        self.delivered = 0;
                        self.prev = block_first;
                        self.held = None;
                    }
                }
                Err(e) => {
                    self.stopped = !matches!(e, ReadError::Corrupt { .. });
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Pid;

    #[test]
    fn an_agents_process_name_outlives_the_kernels() {
        let mut meta = TraceMeta::default();
        let process = |name: &str, runtime| Meta::Process {
            pid: Pid(7),
            ppid: Pid(1),
            name: name.into(),
            runtime,
        };
        meta.add(process("sh", Runtime::Native));
        meta.add(process("Server", Runtime::Java));
        meta.add(process("java", Runtime::Native));
        let p = &meta.processes[&Pid(7)];
        assert_eq!((p.name.as_str(), p.runtime), ("Server", Runtime::Java));
        meta.add(process("Server2", Runtime::Java));
        assert_eq!(meta.processes[&Pid(7)].name, "Server2");
    }

    #[test]
    fn a_native_function_is_a_method_too() {
        let mut meta = TraceMeta::default();
        meta.add(Meta::NativeFunction {
            id: 4,
            pid: Pid(7),
            addr: 0x1136,
        });
        assert_eq!(meta.methods[&4].name, "0x1136");
        assert_eq!(
            meta.native_functions[&4],
            NativeFunctionInfo {
                pid: Pid(7),
                addr: 0x1136
            }
        );
        // The collector's own `Method` for it replaces the placeholder, in any order.
        meta.add(Meta::Method {
            id: 4,
            class: String::new(),
            name: "0x1136".into(),
            descriptor: String::new(),
        });
        meta.add(Meta::NativeFunction {
            id: 4,
            pid: Pid(7),
            addr: 0x1136,
        });
        assert_eq!(meta.methods.len(), 1);
    }
}
