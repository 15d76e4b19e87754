//! Merging traces recorded at the same time on the same host (one clock,
//! `CLOCK_MONOTONIC`) into one, so that their processes show side by side.
//!
//! - The hosts must match (another host's monotonic clock is unrelated) and no thread
//!   may be in two inputs (the same processes recorded twice).
//! - Metadata is combined: the first `TraceInfo` with the earliest start and the most
//!   CPUs, every process, thread and name; method and monitor-class ids, dense per
//!   recording, are shifted so that they do not collide (input k's ids come after
//!   input k-1's largest); counters of the same name are added up.
//! - Timed records are merged in time order by a heap over the inputs, one block of
//!   each in memory. A kernel record that two inputs hold (a context switch between
//!   threads of both) is written once.
//! - Damage does not stop an input: the reader goes on at the next intact block, so
//!   everything intact is merged. An input cut short is merged up to where it stops.
//!   What was skipped is carried into the merged trace, one `Warning` per damaged input
//!   naming it (bytes and records skipped, and where), and into the [`MergeSummary`]
//!   for the caller's message. A merge of an input that did not finish (no end block)
//!   does not finish either: its counters are written, but no end block, so that the
//!   merged trace does not claim a complete recording.
//!
//! It is two steps, [`Merge::open`] then [`Merge::write`], so that a caller can check
//! the inputs before it creates the output file (nothing is left behind when they
//! cannot be merged).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::{Damage, Event, Events, Meta, ReadError, Record, Tid, Time, TraceMeta, TraceWriter};

/// Why traces cannot be merged.
#[derive(Debug)]
#[non_exhaustive]
pub enum MergeError {
    /// Fewer than two inputs.
    TooFew,
    /// An input's metadata cannot be read.
    Scan {
        /// The input.
        path: PathBuf,
        /// What went wrong.
        error: ReadError,
    },
    /// An input's records cannot be opened.
    Open {
        /// The input.
        path: PathBuf,
        /// What went wrong.
        error: ReadError,
    },
    /// An input has no trace information, so its host is unknown.
    NoInfo {
        /// The input.
        path: PathBuf,
        /// The damage met before any trace information, if there was some: why it
        /// has none.
        damage: Option<String>,
    },
    /// Two inputs were recorded on different hosts: their clocks are unrelated.
    Hosts {
        /// The first input.
        first: PathBuf,
        /// Its host.
        first_host: String,
        /// An input of another host.
        other: PathBuf,
        /// That host.
        other_host: String,
    },
    /// A thread is in two inputs: the same processes recorded twice.
    SharedThread {
        /// The thread.
        tid: Tid,
        /// The first input that holds it.
        first: PathBuf,
        /// The other.
        other: PathBuf,
    },
    /// The shifted method or monitor-class ids would not fit in 31 bits.
    TooManyIds,
    /// The merged trace cannot be written.
    Write(io::Error),
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::TooFew => write!(f, "give at least two traces to merge"),
            MergeError::Scan { path, error } => write!(f, "{}: {error}", path.display()),
            MergeError::Open { path, error } => {
                write!(f, "cannot read {}: {error}", path.display())
            }
            MergeError::NoInfo { path, damage } => {
                write!(
                    f,
                    "{}: the trace does not say where it was recorded (no trace information)",
                    path.display()
                )?;
                match damage {
                    Some(d) => write!(f, " before it ends: {d}"),
                    None => Ok(()),
                }
            }
            MergeError::Hosts {
                first,
                first_host,
                other,
                other_host,
            } => write!(
                f,
                "{} was recorded on {first_host:?}, {} on {other_host:?}: only traces of one host share a clock",
                first.display(),
                other.display()
            ),
            MergeError::SharedThread { tid, first, other } => write!(
                f,
                "thread {tid} is in both {} and {}: traces of the same processes cannot be merged",
                first.display(),
                other.display()
            ),
            MergeError::TooManyIds => write!(
                f,
                "too many methods or monitor classes to merge: ids would pass 2^31"
            ),
            MergeError::Write(e) => write!(f, "{e}"),
        }
    }
}

/// The causes are part of the message (as for [`ReadError`]), so none is given as a
/// source: a caller printing the chain would repeat them.
impl std::error::Error for MergeError {}

impl From<io::Error> for MergeError {
    fn from(e: io::Error) -> MergeError {
        MergeError::Write(e)
    }
}

/// What the merge could not take of one input: the damaged stretches skipped, a
/// truncated end, or a missing end block.
#[derive(Debug)]
pub struct InputDamage {
    /// The input.
    pub path: PathBuf,
    /// What the reader skipped (every region, and a truncated end).
    pub skipped: Damage,
    /// Whether the input has its end block (its recording finished).
    pub complete: bool,
}

impl fmt::Display for InputDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path.display())?;
        if self.skipped.is_empty() {
            write!(f, "the recording did not finish (no end block)")
        } else {
            write!(f, "{}", self.skipped)
        }
    }
}

/// What a merge wrote.
#[derive(Debug)]
pub struct MergeSummary {
    /// Traces merged.
    pub traces: usize,
    /// Processes in the merged trace.
    pub processes: usize,
    /// Threads in the merged trace.
    pub threads: usize,
    /// Timed records written (kernel records held by two inputs count once).
    pub records: u64,
    /// Whether the merged trace has its end block: every input had its own.
    pub complete: bool,
    /// The inputs that were damaged, cut short or did not finish, in input order.
    pub damage: Vec<InputDamage>,
}

/// One input: its name, its id shifts and its record stream.
struct Input {
    path: PathBuf,
    method_shift: u32,
    class_shift: u32,
    events: Events,
}

/// Traces checked for merging, their records not read yet.
pub struct Merge {
    metas: Vec<TraceMeta>,
    inputs: Vec<Input>,
}

impl Merge {
    /// Reads the inputs' metadata, checks that they can be merged (same host, no
    /// thread in two of them, ids that fit once shifted) and opens their records.
    pub fn open<P: AsRef<Path>>(paths: &[P]) -> Result<Merge, MergeError> {
        if paths.len() < 2 {
            return Err(MergeError::TooFew);
        }
        let paths: Vec<&Path> = paths.iter().map(AsRef::as_ref).collect();
        let metas: Vec<TraceMeta> = paths
            .iter()
            .map(|&p| {
                TraceMeta::scan(p).map_err(|error| MergeError::Scan {
                    path: p.to_path_buf(),
                    error,
                })
            })
            .collect::<Result<_, _>>()?;
        check_compatible(&paths, &metas)?;
        let mut inputs = Vec::new();
        let (mut method_shift, mut class_shift) = (0u64, 0u64);
        for (&path, meta) in paths.iter().zip(&metas) {
            let max_method = meta.methods.keys().copied().max().unwrap_or(0);
            let max_class = meta.monitor_classes.keys().copied().max().unwrap_or(0);
            if method_shift + u64::from(max_method) > i32::MAX as u64
                || class_shift + u64::from(max_class) > i32::MAX as u64
            {
                return Err(MergeError::TooManyIds);
            }
            inputs.push(Input {
                path: path.to_path_buf(),
                method_shift: method_shift as u32,
                class_shift: class_shift as u32,
                events: Events::open(path).map_err(|error| MergeError::Open {
                    path: path.to_path_buf(),
                    error,
                })?,
            });
            method_shift += u64::from(max_method);
            class_shift += u64::from(max_class);
        }
        Ok(Merge { metas, inputs })
    }

    /// Writes the merged trace to `out`; `tool` goes into its trace information (what
    /// wrote it). Everything intact of a damaged input is merged, and the damage named
    /// in the merged trace's warnings and the summary's [`MergeSummary::damage`]; when
    /// an input did not finish, neither does the merged trace (no end block).
    pub fn write<W: Write>(mut self, out: W, tool: &str) -> Result<MergeSummary, MergeError> {
        let mut w = TraceWriter::new(out)?;
        for m in merged_meta(&self.metas, &self.inputs, tool) {
            w.meta(&m);
        }
        let records = merge_records(&mut self.inputs, &mut w)?;
        // The reader's account of each input, now that every one was read to its end.
        let damage: Vec<InputDamage> = self
            .inputs
            .iter()
            .zip(&self.metas)
            .filter_map(|(input, meta)| {
                let skipped = input.events.damage().clone();
                let complete = input.events.complete() && meta.complete;
                (!skipped.is_empty() || !complete).then(|| InputDamage {
                    path: input.path.clone(),
                    skipped,
                    complete,
                })
            })
            .collect();
        let mut counters: BTreeMap<String, u64> = BTreeMap::new();
        for meta in &self.metas {
            for (name, value) in &meta.counters {
                *counters.entry(name.clone()).or_default() += value;
            }
        }
        let counters: Vec<Meta> = counters
            .into_iter()
            .map(|(name, value)| Meta::Counter { name, value })
            .collect();
        let complete = damage.iter().all(|d| d.complete);
        if complete {
            w.finish(&counters)?;
        } else {
            w.finish_incomplete(&counters)?;
        }
        Ok(MergeSummary {
            traces: self.inputs.len(),
            processes: self.metas.iter().map(|m| m.processes.len()).sum(),
            threads: self.metas.iter().map(|m| m.threads.len()).sum(),
            records,
            complete,
            damage,
        })
    }
}

/// Merges the traces at `paths` into `out` ([`Merge::open`] then [`Merge::write`]).
pub fn merge<P: AsRef<Path>, W: Write>(
    paths: &[P],
    out: W,
    tool: &str,
) -> Result<MergeSummary, MergeError> {
    Merge::open(paths)?.write(out, tool)
}

/// Same host, and no thread in two inputs.
fn check_compatible(paths: &[&Path], metas: &[TraceMeta]) -> Result<(), MergeError> {
    let mut host: Option<(&str, &Path)> = None;
    for (&path, meta) in paths.iter().zip(metas) {
        let Some(info) = &meta.info else {
            return Err(MergeError::NoInfo {
                path: path.to_path_buf(),
                damage: meta.damage.as_ref().map(ToString::to_string),
            });
        };
        match host {
            None => host = Some((&info.host, path)),
            Some((h, first)) if h != info.host => {
                return Err(MergeError::Hosts {
                    first: first.to_path_buf(),
                    first_host: h.to_string(),
                    other: path.to_path_buf(),
                    other_host: info.host.clone(),
                })
            }
            Some(_) => {}
        }
    }
    let mut owner: BTreeMap<u32, &Path> = BTreeMap::new();
    for (&path, meta) in paths.iter().zip(metas) {
        for tid in meta.threads.keys() {
            if let Some(first) = owner.insert(tid.0, path) {
                return Err(MergeError::SharedThread {
                    tid: *tid,
                    first: first.to_path_buf(),
                    other: path.to_path_buf(),
                });
            }
        }
    }
    Ok(())
}

/// The merged metadata (counters go in the end block).
fn merged_meta(metas: &[TraceMeta], inputs: &[Input], tool: &str) -> Vec<Meta> {
    let infos: Vec<_> = metas.iter().filter_map(|m| m.info.as_ref()).collect();
    let first = infos[0];
    let mut command = Vec::new();
    for (i, info) in infos.iter().enumerate() {
        if i > 0 {
            command.push("+".to_string());
        }
        command.extend(info.command.iter().cloned());
    }
    let mut out = vec![Meta::TraceInfo {
        source: first.source,
        start: infos.iter().map(|i| i.start).min().unwrap_or(first.start),
        host: first.host.clone(),
        cpus: infos.iter().map(|i| i.cpus).max().unwrap_or(first.cpus),
        command,
        tool: tool.to_string(),
    }];
    for (meta, input) in metas.iter().zip(inputs) {
        for p in meta.processes.values() {
            out.push(Meta::Process {
                pid: p.pid,
                ppid: p.ppid,
                name: p.name.clone(),
                runtime: p.runtime,
            });
        }
        for t in meta.threads.values() {
            out.push(Meta::Thread {
                pid: t.pid,
                tid: t.tid,
                comm: t.comm.clone(),
            });
            if let Some(name) = &t.java_name {
                out.push(Meta::JavaThread {
                    pid: t.pid,
                    tid: t.tid,
                    name: name.clone(),
                    daemon: t.daemon,
                });
            }
        }
        let mut methods: Vec<_> = meta.methods.iter().collect();
        methods.sort_by_key(|m| m.0);
        for (&id, m) in methods {
            out.push(Meta::Method {
                id: id + input.method_shift,
                class: m.class.clone(),
                name: m.name.clone(),
                descriptor: m.descriptor.clone(),
            });
        }
        let mut natives: Vec<_> = meta.native_functions.iter().collect();
        natives.sort_by_key(|n| n.0);
        for (&id, f) in natives {
            out.push(Meta::NativeFunction {
                id: id + input.method_shift,
                pid: f.pid,
                addr: f.addr,
            });
        }
        for r in &meta.removals {
            out.push(Meta::MethodRemoved {
                id: r.id + input.method_shift,
                time: r.time,
                rate: r.rate,
                mean_ns: r.mean_ns,
                overhead_ppm: r.overhead_ppm,
            });
        }
        let mut classes: Vec<_> = meta.monitor_classes.iter().collect();
        classes.sort_by_key(|c| c.0);
        for (&id, name) in classes {
            out.push(Meta::MonitorClass {
                id: id + input.class_shift,
                name: name.clone(),
            });
        }
        for text in &meta.warnings {
            out.push(Meta::Warning {
                text: format!("{}: {text}", input.path.display()),
            });
        }
        // What the scan found (the records' reader skips the same): said in the merged
        // trace, which would otherwise look whole.
        if !meta.skipped.is_empty() || !meta.complete {
            let damage = InputDamage {
                path: input.path.clone(),
                skipped: meta.skipped.clone(),
                complete: meta.complete,
            };
            out.push(Meta::Warning {
                text: format!("merged from a damaged input: {damage}"),
            });
        }
        out.extend(meta.mappings.iter().cloned());
        out.extend(meta.user_types.iter().cloned());
    }
    out
}

/// A record with its ids shifted into the merged trace's ranges.
fn remap(mut r: Record, input: &Input) -> Record {
    match &mut r.event {
        Event::Enter { method, .. } | Event::Leave { method, .. } if *method != 0 => {
            *method += input.method_shift
        }
        Event::MonitorContended { class, .. } | Event::MonitorEntered { class, .. }
            if *class != 0 =>
        {
            *class += input.class_shift
        }
        _ => {}
    }
    r
}

/// Merges the inputs' records in time order into `w`. Returns the records written.
fn merge_records<W: Write>(
    inputs: &mut [Input],
    w: &mut TraceWriter<W>,
) -> Result<u64, MergeError> {
    let mut heads: Vec<Option<Record>> = Vec::with_capacity(inputs.len());
    let mut heap = BinaryHeap::new();
    for input in inputs.iter_mut() {
        let i = heads.len();
        let head = next(input)?;
        if let Some(r) = &head {
            heap.push(Reverse((r.time, i)));
        }
        heads.push(head);
    }
    // Kernel records written at the current time, to drop a second copy.
    let mut now = Time(0);
    let mut at_now: Vec<(usize, Event)> = Vec::new();
    let mut written = 0u64;
    while let Some(Reverse((time, i))) = heap.pop() {
        let record = heads[i].take().expect("a queued input has a head");
        if time != now {
            now = time;
            at_now.clear();
        }
        // Kernel records: the same one may be in two inputs (a switch between their
        // threads).
        let kernel = record.event.is_sched_tracepoint();
        let duplicate = kernel && at_now.iter().any(|(j, e)| *j != i && *e == record.event);
        if !duplicate {
            if kernel {
                at_now.push((i, record.event.clone()));
            }
            w.record(&remap(record, &inputs[i]))?;
            written += 1;
        }
        if let Some(r) = next(&mut inputs[i])? {
            heap.push(Reverse((r.time, i)));
            heads[i] = Some(r);
        }
    }
    Ok(written)
}

/// The input's next record, past any damaged stretch (the reader resynchronises and
/// keeps its account in [`Events::damage`]); `None` at its end or a truncated end. An
/// I/O error fails the merge: what follows it is unknown.
fn next(input: &mut Input) -> Result<Option<Record>, MergeError> {
    loop {
        match input.events.next() {
            None | Some(Err(ReadError::Truncated { .. })) => return Ok(None),
            Some(Ok(r)) => return Ok(Some(r)),
            Some(Err(ReadError::Corrupt { .. })) => continue,
            Some(Err(error)) => {
                return Err(MergeError::Open {
                    path: input.path.clone(),
                    error,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cpu, Pid, Runtime, Source};
    use std::fs::File;

    fn meta_with(id: u32, addr: u64) -> TraceMeta {
        let mut m = TraceMeta::default();
        m.add(Meta::TraceInfo {
            source: Source::Tracepoints,
            start: Time(1),
            host: "h".into(),
            cpus: 2,
            command: vec!["prog".into()],
            tool: "sonda".into(),
        });
        m.add(Meta::NativeFunction {
            id,
            pid: Pid(9),
            addr,
        });
        m
    }

    /// An input over an empty trace file (its events are not read here).
    fn input(dir: &Path, name: &str, method_shift: u32) -> Input {
        let path = dir.join(name);
        let w = TraceWriter::new(File::create(&path).unwrap()).unwrap();
        w.finish(&[]).unwrap();
        Input {
            events: Events::open(&path).unwrap(),
            path,
            method_shift,
            class_shift: 0,
        }
    }

    #[test]
    fn native_function_ids_move_with_the_method_ids() {
        let dir = tempfile::tempdir().unwrap();
        let metas = [meta_with(1, 0x10), meta_with(1, 0x20)];
        let inputs = [input(dir.path(), "a", 0), input(dir.path(), "b", 1)];
        let mut merged = TraceMeta::default();
        for m in merged_meta(&metas, &inputs, "sonda") {
            merged.add(m);
        }
        assert_eq!(merged.native_functions.len(), 2);
        assert_eq!(merged.native_functions[&1].addr, 0x10);
        assert_eq!(merged.native_functions[&2].addr, 0x20);
        assert_eq!(merged.methods.len(), 2);
    }

    /// A trace of host `host` with process `pid` (one thread, same id), method 1, the
    /// given records and a counter `n` = 1.
    fn trace(dir: &Path, name: &str, host: &str, pid: u32, records: &[Record]) -> PathBuf {
        let path = dir.join(name);
        let mut w = TraceWriter::new(File::create(&path).unwrap()).unwrap();
        w.meta(&Meta::TraceInfo {
            source: Source::Tracepoints,
            start: Time(100),
            host: host.into(),
            cpus: 2,
            command: vec![name.into()],
            tool: "t".into(),
        });
        w.meta(&Meta::Process {
            pid: Pid(pid),
            ppid: Pid(1),
            name: name.into(),
            runtime: Runtime::Java,
        });
        w.meta(&Meta::Thread {
            pid: Pid(pid),
            tid: Tid(pid),
            comm: name.into(),
        });
        w.meta(&Meta::Method {
            id: 1,
            class: "C".into(),
            name: name.into(),
            descriptor: "()V".into(),
        });
        for r in records {
            w.record(r).unwrap();
        }
        w.finish(&[Meta::Counter {
            name: "n".into(),
            value: 1,
        }])
        .unwrap();
        path
    }

    fn enter(time: u64, tid: u32) -> Record {
        Record {
            time: Time(time),
            event: Event::Enter {
                tid: Tid(tid),
                method: 1,
            },
        }
    }

    fn switch(time: u64, prev: u32, next: u32) -> Record {
        Record {
            time: Time(time),
            event: Event::Switch {
                cpu: Cpu(0),
                prev: Tid(prev),
                prev_state: 1,
                next: Tid(next),
                charge: None,
            },
        }
    }

    fn read(path: &Path) -> Vec<Record> {
        Events::open(path).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn records_come_out_in_time_order_with_ids_apart_and_shared_switches_once() {
        let dir = tempfile::tempdir().unwrap();
        // A switch from 10 to 20 is in both recordings (each follows one side).
        let a = trace(
            dir.path(),
            "a",
            "h",
            10,
            &[enter(110, 10), switch(120, 10, 20), enter(140, 10)],
        );
        let b = trace(
            dir.path(),
            "b",
            "h",
            20,
            &[switch(120, 10, 20), enter(130, 20)],
        );
        let out = dir.path().join("ab");
        let summary = merge(&[&a, &b], File::create(&out).unwrap(), "merger").unwrap();
        assert_eq!(
            (
                summary.traces,
                summary.processes,
                summary.threads,
                summary.records
            ),
            (2, 2, 2, 4)
        );
        assert!(summary.damage.is_empty() && summary.complete);
        let times: Vec<u64> = read(&out).iter().map(|r| r.time.0).collect();
        assert_eq!(times, [110, 120, 130, 140]);
        // b's method 1 became 2.
        assert_eq!(
            read(&out)[2].event,
            Event::Enter {
                tid: Tid(20),
                method: 2
            }
        );
        let meta = TraceMeta::scan(&out).unwrap();
        assert_eq!(meta.methods[&1].name, "a");
        assert_eq!(meta.methods[&2].name, "b");
        assert_eq!(meta.counters["n"], 2);
        assert_eq!(meta.info.unwrap().tool, "merger");
    }

    #[test]
    fn traces_that_cannot_be_merged_are_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let a = trace(dir.path(), "a", "h", 10, &[enter(110, 10)]);
        let other = trace(dir.path(), "other", "elsewhere", 20, &[]);
        let same = trace(dir.path(), "same", "h", 10, &[]);
        let err = |paths: &[&PathBuf]| Merge::open(paths).err().unwrap().to_string();
        assert!(err(&[&a]).contains("at least two"));
        assert!(err(&[&a, &other]).contains("only traces of one host share a clock"));
        assert!(err(&[&a, &same]).contains("thread 10 is in both"));
        let missing = dir.path().join("missing");
        assert!(err(&[&a, &missing]).starts_with(&format!("{}: ", missing.display())));
    }

    #[test]
    fn a_cut_input_is_merged_up_to_the_cut_and_the_merge_does_not_claim_to_be_complete() {
        let dir = tempfile::tempdir().unwrap();
        let a = trace(dir.path(), "a", "h", 10, &[enter(110, 10)]);
        let b = trace(dir.path(), "b", "h", 20, &[enter(120, 20)]);
        // Cut b inside its last block (the end block).
        let len = std::fs::metadata(&b).unwrap().len();
        File::options()
            .write(true)
            .open(&b)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        let out = dir.path().join("ab");
        let summary = merge(&[&a, &b], File::create(&out).unwrap(), "t").unwrap();
        assert_eq!(summary.damage.len(), 1);
        let damage = &summary.damage[0];
        assert_eq!(damage.path, b);
        assert!(!damage.complete && !summary.complete);
        assert!(damage.to_string().contains("cut short"), "{damage}");
        assert_eq!(summary.records, 2);
        let meta = TraceMeta::scan(&out).unwrap();
        assert!(
            !meta.complete,
            "the merge of a cut trace says it is complete"
        );
        assert!(meta.damage.is_none(), "the merged trace itself is intact");
        // a's counters are kept (b's were in its cut end block).
        assert_eq!(meta.counters["n"], 1);
        assert!(
            meta.warnings
                .iter()
                .any(|w| w.contains("b: cut short at byte")),
            "{:?}",
            meta.warnings
        );
    }

    #[test]
    fn a_damaged_input_is_merged_past_the_damage_which_the_merge_names() {
        let dir = tempfile::tempdir().unwrap();
        // b's records in three events blocks (flushed apart); its middle one damaged.
        let a = trace(dir.path(), "a", "h", 10, &[enter(110, 10)]);
        let b = dir.path().join("b");
        let mut w = TraceWriter::new(File::create(&b).unwrap()).unwrap();
        w.meta(&Meta::TraceInfo {
            source: Source::Tracepoints,
            start: Time(100),
            host: "h".into(),
            cpus: 2,
            command: vec!["b".into()],
            tool: "t".into(),
        });
        w.meta(&Meta::Thread {
            pid: Pid(20),
            tid: Tid(20),
            comm: "b".into(),
        });
        w.flush().unwrap();
        let mut ends = Vec::new();
        for t in [120, 130, 140] {
            w.record(&enter(t, 20)).unwrap();
            w.flush().unwrap();
            ends.push(w.bytes_written());
        }
        w.finish(&[]).unwrap();
        let mut bytes = std::fs::read(&b).unwrap();
        // A byte inside the second events block's payload.
        bytes[(ends[1] - 2) as usize] ^= 0xff;
        std::fs::write(&b, &bytes).unwrap();

        let out = dir.path().join("ab");
        let summary = merge(&[&a, &b], File::create(&out).unwrap(), "t").unwrap();
        let times: Vec<u64> = read(&out).iter().map(|r| r.time.0).collect();
        assert_eq!(times, [110, 120, 140], "the block after the damage is lost");
        assert_eq!(summary.records, 3);
        assert_eq!(summary.damage.len(), 1);
        let damage = summary.damage[0].to_string();
        assert!(
            damage.starts_with(&format!("{}: skipped ", b.display()))
                && damage.contains("1 record"),
            "{damage}"
        );
        // A damaged but finished input: the merge finishes too, and says what it lost.
        assert!(summary.complete);
        let meta = TraceMeta::scan(&out).unwrap();
        assert!(meta.complete);
        assert!(
            meta.warnings.iter().any(|w| w.contains(&damage)),
            "{:?}",
            meta.warnings
        );
    }
}
