//! `sonda model`: a JMT queueing model (`.jsimg`) of the recorded run, with the
//! per-call samples beside it, with `sonda-model`.

use anyhow::{bail, Context};
use sonda_model::analyze::{analyze, Options};
use sonda_model::jmt::{model_of, samples_dir, to_xml, ModelOptions};

use crate::cli::ModelArgs;

/// Writes the model and says what is in it, one line per class.
pub fn run(args: ModelArgs) -> anyhow::Result<i32> {
    let opts = Options::default().with_methods(args.methods);
    let analysis = analyze(&args.trace, &opts)?;
    if let Some(damage) = &analysis.damage {
        bail!(
            "{}: {damage}; no model written from a damaged trace",
            args.trace.display()
        );
    }
    let model = model_of(
        &analysis,
        &args.output,
        &ModelOptions::default().with_replayer(args.replayer),
    )
    .with_context(|| {
        format!(
            "cannot write the samples in {}",
            samples_dir(&args.output).display()
        )
    })?;
    if model.classes.is_empty() {
        bail!("no outermost calls of the selected methods: nothing to model");
    }
    std::fs::write(&args.output, to_xml(&model))
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    say!(
        "sonda: wrote {} ({} classes, CPU station: processor sharing, {} servers) and samples in {}",
        args.output.display(),
        model.classes.len(),
        model.cpus,
        samples_dir(&args.output).display()
    );
    for c in &model.classes {
        say!(
            "sonda:   {}: {:.2} calls/s, CPU demand {:.3} ms, blocked {:.3} ms in {:.0}% of calls, wall {:.3} ms",
            c.name,
            c.arrival_rate,
            c.cpu_mean * 1e3,
            c.blocked_mean * 1e3,
            c.blocked_fraction * 100.0,
            c.wall_mean * 1e3
        );
    }
    Ok(0)
}
