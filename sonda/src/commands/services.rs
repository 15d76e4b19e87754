//! `sonda services`: per-request service demands of the traced methods (CPU, waiting
//! for a CPU, blocked), their statistics and fitted distributions, with `sonda-model`.

use std::io::Write;

use anyhow::{bail, Context};
use sonda_model::analyze::{analyze, Options};
use sonda_model::plot::{plots, Plot};
use sonda_model::units::{unit_classes, ClassRule};
use sonda_model::{csv, json, table};
use sonda_timeline::Trace;

use crate::cli::{ServicesArgs, ServicesFormat};
use crate::output::{self, Inputs, NewDir};

/// Prints the figures; fails (after printing what it could) when the trace is damaged.
pub fn run(args: ServicesArgs) -> anyhow::Result<i32> {
    crate::limits::check_patterns("--methods", &args.methods)?;
    crate::limits::check_patterns("--unit-class", &args.unit_class)?;
    let rules = args
        .unit_class
        .iter()
        .map(|r| ClassRule::parse(r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!(e))?;
    let mut opts = Options::default()
        .with_methods(args.methods)
        .with_period_ns(args.period.from, args.period.to);
    if let Some(secs) = args.window {
        opts = opts.with_window_ns(((secs * 1e9).round() as u64).max(1));
    }
    opts.check()?;
    let inputs = Inputs::new(&[&args.trace]);
    inputs.check_stdout()?;
    if let Some(dir) = &args.plot {
        inputs.check_dir(dir)?;
        output::remove_partial_on_signals()?;
    }
    let analysis = analyze(Trace::open(&args.trace)?, &opts)?;
    if let Some(dir) = &args.plot {
        write_plots(&analysis, dir, &inputs)?;
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = if args.calls {
        csv::write_calls(analysis.calls(), &analysis.thread_names, &mut out)
    } else {
        match args.format {
            ServicesFormat::Table => table::write(&analysis.services, &mut out).and_then(|()| {
                let calls: Vec<_> = analysis.calls().collect();
                writeln!(out)?;
                table::write_units(&unit_classes(&calls, &rules), &mut out)
            }),
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

/// Draws the pictures into `dir`, put in place once all are written.
fn write_plots(
    analysis: &sonda_model::analyze::Analysis,
    dir: &std::path::Path,
    inputs: &Inputs,
) -> anyhow::Result<()> {
    let calls: Vec<_> = analysis.calls().collect();
    let pictures = plots(&calls).map_err(|e| anyhow::anyhow!(e))?;
    let mut out = NewDir::create(dir, inputs, Plot::is_plot_name)?;
    for p in &pictures {
        out.create_file(&p.name)?
            .write_all(p.svg.as_bytes())
            .with_context(|| format!("cannot write {}", dir.join(&p.name).display()))?;
    }
    out.commit()
}
