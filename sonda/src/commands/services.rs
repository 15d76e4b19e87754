//! `sonda services`: per-request service demands of the traced methods (CPU, waiting
//! for a CPU, blocked), their statistics and fitted distributions, with `sonda-model`.

use std::io::Write;

use anyhow::{bail, Context};
use sonda_model::analyze::{analyze, Options};
use sonda_model::{csv, json, table};
use sonda_timeline::Trace;

use crate::cli::{ServicesArgs, ServicesFormat};
use crate::output::Inputs;

/// Prints the figures; fails (after printing what it could) when the trace is damaged.
pub fn run(args: ServicesArgs) -> anyhow::Result<i32> {
    crate::limits::check_patterns("--methods", &args.methods)?;
    let mut opts = Options::default().with_methods(args.methods);
    if let Some(secs) = args.window {
        opts = opts.with_window_ns(((secs * 1e9).round() as u64).max(1));
    }
    opts.check()?;
    Inputs::new(&[&args.trace]).check_stdout()?;
    let analysis = analyze(Trace::open(&args.trace)?, &opts)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = if args.calls {
        csv::write_calls(analysis.calls(), &analysis.thread_names, &mut out)
    } else {
        match args.format {
            ServicesFormat::Table => table::write(&analysis.services, &mut out),
            ServicesFormat::Csv => csv::write_figures(&analysis.services, &mut out),
            ServicesFormat::Json => json::write(&analysis.services, &mut out),
        }
    };
    written
        .and_then(|()| out.flush())
        .context("cannot write the figures")?;
    if let Some(damage) = &analysis.services.trace.damage {
        bail!(
            "{}: {} ({} stretch{} skipped); the figures cover the {} records of the intact blocks, of {} they hold",
            args.trace.display(),
            damage.first,
            damage.skipped.len(),
            if damage.skipped.len() == 1 { "" } else { "es" },
            damage.records_read,
            damage.records_intact
        );
    }
    Ok(0)
}
