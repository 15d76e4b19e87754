//! `sonda paraver`: exports a trace to Paraver (`STEM.prv`, `STEM.pcf`, `STEM.row`,
//! `STEM.*.cfg`) with `sonda-paraver`, with a progress bar when stderr is a terminal,
//! and says in one line what it wrote.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::bail;
use indicatif::{ProgressBar, ProgressStyle};
use sonda_paraver::{export, ExportOptions, Progress, ThreadPattern, TimeWindow};

use crate::cli::ParaverArgs;

/// Exports; fails (after writing what it could) when the trace is damaged.
pub fn run(args: ParaverArgs) -> anyhow::Result<i32> {
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
    let bar = progress_bar();
    if let Some(bar) = &bar {
        let bar = bar.clone();
        opts = opts.with_progress(Progress::new(move |done, total| {
            bar.set_length(total.max(done));
            bar.set_position(done);
        }));
    }
    let started = Instant::now();
    let result = export(&args.trace, &args.output, &opts);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let s = result?;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let records = s.states + s.events + s.communications;
    say!(
        "sonda: wrote {} (+ .pcf, .row, {} views): {} threads in {} processes, {} states, {} events, {} communications, {:.3} s of trace; {} records in {:.2} s ({:.1} M/s)",
        s.prv.display(),
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
        say!("sonda: note: the recording did not finish (sonda was killed): the trace ends early");
    }
    if let Some(damage) = s.damage {
        bail!(
            "{}: {damage}; exported what comes before",
            args.trace.display()
        );
    }
    Ok(0)
}

/// A progress bar on stderr, only when it is a terminal (quiet in scripts and logs).
fn progress_bar() -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(0);
    let style = ProgressStyle::with_template(
        "{spinner} exporting [{bar:40}] {percent:>3}% {human_pos}/{human_len} trace records, eta {eta}",
    )
    .ok()?
    .progress_chars("=> ");
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}
