//! `sonda merge`: combines traces recorded at the same time on the same host (one
//! clock, `CLOCK_MONOTONIC`) into one, so that their processes show side by side, as
//! separate Paraver applications.
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
//! - An input that is cut short or damaged is merged up to where it stops; the command
//!   then says where and fails.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use sonda_trace::{Event, Events, Meta, ReadError, Record, Time, TraceMeta, TraceWriter};

use crate::cli::MergeArgs;

/// One input: its name, its id shifts and its record stream.
struct Input {
    path: PathBuf,
    method_shift: u32,
    class_shift: u32,
    events: Events,
}

/// Merges; fails after writing what it could when an input is damaged.
pub fn run(args: MergeArgs) -> anyhow::Result<i32> {
    if args.traces.len() < 2 {
        bail!("give at least two traces to merge");
    }
    if args.traces.iter().any(|t| same_file(t, &args.output)) {
        bail!("the output {} is one of the inputs", args.output.display());
    }
    let metas: Vec<TraceMeta> = args
        .traces
        .iter()
        .map(|p| TraceMeta::scan(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display())))
        .collect::<anyhow::Result<_>>()?;
    check_compatible(&args.traces, &metas)?;

    let mut inputs = Vec::new();
    let (mut method_shift, mut class_shift) = (0u64, 0u64);
    for (path, meta) in args.traces.iter().zip(&metas) {
        let max_method = meta.methods.keys().copied().max().unwrap_or(0);
        let max_class = meta.monitor_classes.keys().copied().max().unwrap_or(0);
        if method_shift + u64::from(max_method) > i32::MAX as u64
            || class_shift + u64::from(max_class) > i32::MAX as u64
        {
            bail!("too many methods or monitor classes to merge: ids would pass 2^31");
        }
        inputs.push(Input {
            path: path.clone(),
            method_shift: method_shift as u32,
            class_shift: class_shift as u32,
            events: Events::open(path)
                .with_context(|| format!("cannot read {}", path.display()))?,
        });
        method_shift += u64::from(max_method);
        class_shift += u64::from(max_class);
    }

    let file = File::create(&args.output)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    let mut w = TraceWriter::new(BufWriter::with_capacity(1 << 20, file))?;
    for m in merged_meta(&metas, &inputs) {
        w.meta(&m);
    }
    let (written, damage) = merge_records(&mut inputs, &mut w)?;
    let mut counters: BTreeMap<String, u64> = BTreeMap::new();
    for meta in &metas {
        for (name, value) in &meta.counters {
            *counters.entry(name.clone()).or_default() += value;
        }
    }
    let counters: Vec<Meta> = counters
        .into_iter()
        .map(|(name, value)| Meta::Counter { name, value })
        .collect();
    w.finish(&counters)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    let threads: usize = metas.iter().map(|m| m.threads.len()).sum();
    let processes: usize = metas.iter().map(|m| m.processes.len()).sum();
    say!(
        "sonda: wrote {}: {} traces, {processes} processes, {threads} threads, {written} records",
        args.output.display(),
        inputs.len()
    );
    if let Some((path, e)) = damage {
        bail!("{}: {e}; merged what comes before", path.display());
    }
    Ok(0)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Same host, and no thread in two inputs.
fn check_compatible(paths: &[PathBuf], metas: &[TraceMeta]) -> anyhow::Result<()> {
    let mut host: Option<(&str, &Path)> = None;
    for (path, meta) in paths.iter().zip(metas) {
        let Some(info) = &meta.info else {
            bail!(
                "{}: the trace does not say where it was recorded (no trace information)",
                path.display()
            );
        };
        match host {
            None => host = Some((&info.host, path)),
            Some((h, first)) if h != info.host => bail!(
                "{} was recorded on {h:?}, {} on {:?}: only traces of one host share a clock",
                first.display(),
                path.display(),
                info.host
            ),
            Some(_) => {}
        }
    }
    let mut owner: BTreeMap<u32, &Path> = BTreeMap::new();
    for (path, meta) in paths.iter().zip(metas) {
        for tid in meta.threads.keys() {
            if let Some(first) = owner.insert(tid.0, path) {
                bail!(
                    "thread {tid} is in both {} and {}: traces of the same processes cannot be merged",
                    first.display(),
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// The merged metadata (counters go in the end block).
fn merged_meta(metas: &[TraceMeta], inputs: &[Input]) -> Vec<Meta> {
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
        tool: format!("sonda {} (merge)", env!("CARGO_PKG_VERSION")),
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

/// Merges the inputs' records in time order into `w`. Returns the records written and
/// the first damage met.
fn merge_records(
    inputs: &mut [Input],
    w: &mut TraceWriter<BufWriter<File>>,
) -> anyhow::Result<(u64, Option<(PathBuf, ReadError)>)> {
    let mut damage = None;
    let mut heads: Vec<Option<Record>> = Vec::with_capacity(inputs.len());
    let mut heap = BinaryHeap::new();
    for (i, input) in inputs.iter_mut().enumerate() {
        let head = next(input, &mut damage);
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
        if let Some(r) = next(&mut inputs[i], &mut damage) {
            heap.push(Reverse((r.time, i)));
            heads[i] = Some(r);
        }
    }
    Ok((written, damage))
}

/// The input's next record; damage ends it (the first damage is kept).
fn next(input: &mut Input, damage: &mut Option<(PathBuf, ReadError)>) -> Option<Record> {
    match input.events.next()? {
        Ok(r) => Some(r),
        Err(e) => {
            if damage.is_none() {
                *damage = Some((input.path.clone(), e));
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{Pid, Source};

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
        for m in merged_meta(&metas, &inputs) {
            merged.add(m);
        }
        assert_eq!(merged.native_functions.len(), 2);
        assert_eq!(merged.native_functions[&1].addr, 0x10);
        assert_eq!(merged.native_functions[&2].addr, 0x20);
        assert_eq!(merged.methods.len(), 2);
    }
}
