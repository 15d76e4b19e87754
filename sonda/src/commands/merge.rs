//! `sonda merge`: combines traces recorded at the same time on the same host into one,
//! so that their processes show side by side, as separate Paraver applications. The
//! merging itself is [`sonda_trace::merge`]; this checks the arguments, creates the
//! output once the inputs are known to merge ([`crate::output`]: never over an input,
//! in place only when complete), and reports.

use std::io::BufWriter;

use anyhow::{bail, Context};
use sonda_trace::merge::{Merge, MergeError};

use crate::cli::MergeArgs;
use crate::limits::MAX_MERGE_INPUTS;
use crate::output::{self, Inputs, NewFile};

/// Merges; fails after writing everything intact when an input is damaged.
pub fn run(args: MergeArgs) -> anyhow::Result<i32> {
    if args.traces.len() < 2 {
        bail!("give at least two traces to merge");
    }
    if args.traces.len() > MAX_MERGE_INPUTS {
        bail!(
            "{} traces to merge: at most {MAX_MERGE_INPUTS} at once (merge them in groups, then merge the results)",
            args.traces.len()
        );
    }
    let inputs = Inputs::new(&args.traces);
    inputs.check(&args.output)?;
    output::remove_partial_on_signals()?;
    let merge = Merge::open(&args.traces)?;
    let out = NewFile::create(&args.output, &inputs)?;
    let cannot_write = || format!("cannot write {}", args.output.display());
    let tool = format!("sonda {} (merge)", env!("CARGO_PKG_VERSION"));
    let summary = match merge.write(BufWriter::with_capacity(1 << 20, out.handle()?), &tool) {
        Ok(summary) => summary,
        Err(e @ MergeError::Write(_)) => return Err(e).with_context(cannot_write),
        Err(e) => return Err(e.into()),
    };
    out.commit()?;
    say!(
        "sonda: wrote {}: {} traces, {} processes, {} threads, {} records",
        args.output.display(),
        summary.traces,
        summary.processes,
        summary.threads,
        summary.records
    );
    if !summary.damage.is_empty() {
        let what: Vec<String> = summary.damage.iter().map(ToString::to_string).collect();
        bail!(
            "{}; merged everything intact{}",
            what.join("; "),
            if summary.complete {
                String::new()
            } else {
                format!(", and {} says it did not finish", args.output.display())
            }
        );
    }
    Ok(0)
}
