//! `sonda services`: per-request service demands of the traced methods (CPU, waiting
//! for a CPU, blocked), their statistics and fitted distributions, with `sonda-model`.

use std::io::Write;

use anyhow::{bail, Context};
use sonda_model::analyze::{analyze, Options};
use sonda_model::{csv, json, table};

use crate::cli::{ServicesArgs, ServicesFormat};

/// Prints the figures; fails (after printing what it could) when the trace is damaged.
pub fn run(args: ServicesArgs) -> anyhow::Result<i32> {
    let mut opts = Options::default().with_methods(args.methods);
    if let Some(secs) = args.window {
        if !(secs.is_finite() && secs > 0.0 && secs < 1e9) {
            bail!("--window must be a number of seconds above 0 (e.g. 1 or 0.5), not {secs}");
        }
        opts = opts.with_window_ns(((secs * 1e9).round() as u64).max(1));
    }
    let analysis = analyze(&args.trace, &opts)?;
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
    if let Some(damage) = analysis.damage {
        bail!(
            "{}: {damage}; the figures cover what comes before",
            args.trace.display()
        );
    }
    Ok(0)
}
