//! `sonda report`: prints a trace's summary (threads' states, GC, monitors, methods) on
//! the terminal with `sonda-timeline`.

use std::io::Write;

use anyhow::{bail, Context};
use sonda_timeline::report::{render, ReportOptions};
use sonda_timeline::Trace;

use crate::cli::ReportArgs;
use crate::output::Inputs;

/// Prints the report; fails (after printing what it could) when the trace is damaged.
pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    let mut opts = ReportOptions::default();
    if let Some(n) = args.methods {
        opts = opts.with_max_methods(n);
    }
    Inputs::new(&[&args.trace]).check_stdout()?;
    let trace = Trace::open(&args.trace)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let summary = render(trace, &mut out, &opts)?;
    out.flush().context("cannot write the report")?;
    if let Some(damage) = summary.damage {
        bail!(
            "{}: {}; the report covers every intact block",
            args.trace.display(),
            sonda_timeline::damage_line(&damage, &summary.unread)
        );
    }
    Ok(0)
}
