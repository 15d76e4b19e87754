//! `sonda report`: prints a trace's summary (threads' states, GC, monitors, methods) on
//! the terminal with `sonda-timeline`.

use std::io::Write;

use anyhow::{bail, Context};
use sonda_timeline::report::{render, ReportOptions};

use crate::cli::ReportArgs;

/// Prints the report; fails (after printing what it could) when the trace is damaged.
pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    let mut opts = ReportOptions::default();
    if let Some(n) = args.methods {
        opts = opts.with_max_methods(n);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let summary = render(&args.trace, &mut out, &opts)?;
    out.flush().context("cannot write the report")?;
    if let Some(damage) = summary.damage {
        bail!(
            "{}: {damage}; the report covers what comes before",
            args.trace.display()
        );
    }
    Ok(0)
}
