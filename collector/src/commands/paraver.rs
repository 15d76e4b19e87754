//! `sonda paraver`: exports a trace to Paraver (`STEM.prv`, `STEM.pcf`, `STEM.row`)
//! with `sonda-paraver`, and says in one line what it wrote.

use anyhow::bail;
use sonda_paraver::{export, ExportOptions};

use crate::cli::ParaverArgs;

/// Exports; fails (after writing what it could) when the trace is damaged.
pub fn run(args: ParaverArgs) -> anyhow::Result<i32> {
    let mut opts = ExportOptions::default().with_wakeups(args.wakeups);
    if let Some(limit) = args.reorder_limit {
        opts.reorder_limit = limit;
    }
    let s = export(&args.trace, &args.output, &opts)?;
    say!(
        "sonda: wrote {}, {}, {}: {} threads in {} processes, {} states, {} events, {} communications, {:.3} s",
        s.prv.display(),
        s.pcf.display(),
        s.row.display(),
        s.threads,
        s.applications,
        s.states,
        s.events,
        s.communications,
        s.end_ns as f64 / 1e9
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
