//! Whole-trace views built on the block reader: [`TraceMeta`] gathers every name and
//! counter in one pass that seeks over event payloads, and [`Events`] streams the timed
//! records one block at a time. Exporters use both: first the names (a Paraver header
//! needs every thread before the first record), then the events.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use crate::block::BlockKind;
use crate::codec::{Item, Items};
use crate::reader::{block_items, Block, ReadError, TraceReader};
use crate::record::{Meta, Record, Runtime, Source};
use crate::types::{Pid, Tid, Time};

/// What the trace says about itself ([`Meta::TraceInfo`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceInfo {
    pub source: Source,
    pub start: Time,
    pub host: String,
    pub cpus: u16,
    pub command: Vec<String>,
    pub tool: String,
}

/// A process of the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: Pid,
    pub ppid: Pid,
    pub name: String,
    pub runtime: Runtime,
}

/// A thread of the trace and its names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadInfo {
    pub pid: Pid,
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
    pub class: String,
    pub name: String,
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

/// A compiler-instrumented native function ([`Meta::NativeFunction`]): its address in
/// its process, to be resolved against the process's mappings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeFunctionInfo {
    pub pid: Pid,
    pub addr: u64,
}

/// Everything a trace names, and where its data ends.
#[derive(Debug, Default)]
pub struct TraceMeta {
    pub info: Option<TraceInfo>,
    pub processes: BTreeMap<Pid, ProcessInfo>,
    pub threads: BTreeMap<Tid, ThreadInfo>,
    pub methods: HashMap<u32, MethodInfo>,
    pub monitor_classes: HashMap<u32, String>,
    pub counters: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
    pub mappings: Vec<Meta>,
    pub user_types: Vec<Meta>,
    /// Method ids that stand for native functions (each also has a `methods` entry).
    pub native_functions: HashMap<u32, NativeFunctionInfo>,
    /// Time of the first timed record, if any.
    pub first_time: Option<Time>,
    /// Time of the last timed record, if any.
    pub last_time: Option<Time>,
    /// Number of timed records.
    pub records: u64,
    /// Whether the trace has its end block (the recording finished cleanly).
    pub complete: bool,
    /// Where readable data stops, when the file is damaged or cut short.
    pub damage: Option<ReadError>,
}

impl TraceMeta {
    /// Reads every metadata and end block of the trace at `path`, seeking over events.
    /// Fails only when the file cannot be opened or is not a trace; damage further in is
    /// recorded in [`TraceMeta::damage`].
    pub fn scan(path: &Path) -> Result<TraceMeta, ReadError> {
        let mut reader = TraceReader::open(path)?;
        let mut meta = TraceMeta::default();
        loop {
            match reader.next_block_if(|k| k != BlockKind::Events) {
                Ok(None) => break,
                Ok(Some((header, block))) => {
                    if header.kind == BlockKind::Events && header.count > 0 {
                        meta.first_time.get_or_insert(Time(header.first));
                        meta.last_time = Some(Time(header.last));
                        meta.records += u64::from(header.count);
                    }
                    if let Some(block) = block {
                        if let Err(e) = meta.absorb(&block) {
                            meta.damage = Some(e);
                            break;
                        }
                    }
                }
                Err(e) => {
                    meta.damage = Some(e);
                    break;
                }
            }
        }
        meta.complete = reader.complete();
        Ok(meta)
    }

    /// Adds the metadata of one block.
    pub fn absorb(&mut self, block: &Block) -> Result<(), ReadError> {
        for item in block_items(block) {
            if let Item::Meta(m) = item? {
                self.add(m);
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
        }
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

/// Streams the timed records of a trace in time order, one block in memory at a time.
/// Yields at most one error, then ends: records before the damage are all delivered.
/// Records are decoded one at a time from the block's payload, as they are asked for.
pub struct Events {
    reader: TraceReader<BufReader<File>>,
    block: Option<Block>,
    /// Where the next record starts in the block's payload.
    pos: usize,
    failed: bool,
}

impl Events {
    /// Opens the trace at `path` for streaming.
    pub fn open(path: &Path) -> Result<Events, ReadError> {
        Ok(Events {
            reader: TraceReader::open(path)?,
            block: None,
            pos: 0,
            failed: false,
        })
    }

    /// The next record of the current block, if it has one more.
    fn next_in_block(&mut self) -> Option<Result<Record, ReadError>> {
        let block = self.block.as_ref()?;
        loop {
            let mut items = Items::new(&block.payload[self.pos..]);
            let item = items.next();
            self.pos += items.position();
            match item? {
                Ok(Item::Record(r)) => return Some(Ok(r)),
                Ok(_) => continue,
                Err(mut e) => {
                    e.offset += self.pos - items.position();
                    self.pos = block.payload.len();
                    return Some(Err(block.corrupt(e)));
                }
            }
        }
    }
}

impl Iterator for Events {
    type Item = Result<Record, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            if let Some(r) = self.next_in_block() {
                self.failed = r.is_err();
                return Some(r);
            }
            self.block = None;
            match self.reader.next_block_if(|k| k == BlockKind::Events) {
                Ok(None) => return None,
                Ok(Some((_, None))) => {}
                Ok(Some((_, Some(block)))) => {
                    self.block = Some(block);
                    self.pos = 0;
                }
                Err(e) => {
                    self.failed = true;
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
