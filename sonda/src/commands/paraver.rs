//! `sonda paraver`: exports a trace to Paraver (`STEM.prv`, `STEM.pcf`, `STEM.row`,
//! `STEM.*.cfg`) with `sonda-paraver`, with a progress bar when stderr is a terminal,
//! and says in one line what it wrote. The files are written under temporary names and
//! put in place together once the export is complete ([`crate::output`]).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::bail;
use sonda_paraver::{export, ExportOptions, Output, Outputs, ThreadPattern, TimeWindow};
use sonda_timeline::Trace;

use crate::cli::ParaverArgs;
use crate::output::{self, Inputs, NewFile};
use crate::progress::ExportBar;

/// Exports; fails (after writing what it could) when the trace is damaged.
pub fn run(args: ParaverArgs) -> anyhow::Result<i32> {
    crate::limits::check_patterns("--threads", &args.threads)?;
    let inputs = Inputs::new(&[&args.trace]);
    for o in [Output::Prv, Output::Pcf, Output::Row] {
        inputs.check(&o.path(&args.output))?;
    }
    output::remove_partial_on_signals()?;
    let mut opts = ExportOptions::default()
        .with_wakeups(!args.no_wakeups)
        .with_window(TimeWindow {
            from: args.from,
            to: args.to,
        })
        .with_threads(
            args.threads
                .iter()
                .map(|t| ThreadPattern::parse(t))
                .collect(),
        )
        .with_jvm_internal(!args.no_jvm_internal)
        .with_cfgs(!args.no_cfgs);
    if let Some(limit) = args.reorder_limit {
        opts = opts.with_reorder_limit(limit);
    }
    let trace = Trace::open(&args.trace)?;
    let (bar, progress) = ExportBar::start();
    if let Some(progress) = progress {
        opts = opts.with_progress(progress);
    }
    let started = Instant::now();
    let mut files = Files {
        stem: &args.output,
        inputs: &inputs,
        new: Vec::new(),
    };
    let result = export(trace, &mut files, &opts);
    bar.finish();
    let s = result?;
    let prv = files.path(Output::Prv);
    for file in files.new {
        file.commit()?;
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let records = s.states + s.events + s.communications;
    say!(
        "sonda: wrote {} (+ .pcf, .row, {} views): {} threads in {} processes, {} states, {} events, {} communications, {:.3} s of trace; {} records in {:.2} s ({:.1} M/s)",
        prv.display(),
        s.cfgs.len(),
        s.threads,
        s.applications,
        s.states,
        s.events,
        s.communications,
        s.end_ns as f64 / 1e9,
        records,
        secs,
        records as f64 / secs / 1e6
    );
    if !s.complete && s.damage.is_none() {
        say!("sonda: note: {} has no end block (its recording did not finish: sonda was killed, or a merged input was cut short): the export ends where it does", args.trace.display());
    }
    if let Some(damage) = s.damage {
        bail!(
            "{}: {}; exported every intact block",
            args.trace.display(),
            sonda_timeline::damage_line(&damage, &s.unread)
        );
    }
    Ok(0)
}

/// The outputs as files `STEM.prv`, `STEM.pcf`, ... next to each other, each written
/// under a temporary name until all are complete.
struct Files<'a> {
    stem: &'a Path,
    inputs: &'a Inputs,
    new: Vec<NewFile>,
}

impl Files<'_> {
    fn path(&self, output: Output) -> PathBuf {
        output.path(self.stem)
    }
}

impl Outputs for Files<'_> {
    type Writer = File;

    fn create(&mut self, output: Output) -> io::Result<File> {
        // The message names the file already (ExportError::Write adds the name).
        let new = NewFile::create(&self.path(output), self.inputs)
            .map_err(|e| io::Error::other(format!("{:#}", e.root_cause())))?;
        let handle = new
            .handle()
            .map_err(|e| io::Error::other(format!("{:#}", e.root_cause())))?;
        self.new.push(new);
        Ok(handle)
    }

    fn name(&self, output: Output) -> String {
        self.path(output).display().to_string()
    }
}
