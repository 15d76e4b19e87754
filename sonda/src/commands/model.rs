//! `sonda model`: a JMT queueing model (`.jsimg`) of the recorded run, with the
//! per-call samples beside it, with `sonda-model`. The model and its samples directory
//! are written under temporary names and put in place once complete
//! ([`crate::output`]): the samples first, since the model names them.

use anyhow::bail;
use sonda_model::analyze::{analyze, Options};
use sonda_model::jmt::{model_of, samples_dir, to_xml, ModelOptions, Population, SampleFile};
use sonda_timeline::Trace;

use crate::cli::ModelArgs;
use crate::output::{self, Inputs, NewDir, NewFile};

/// Writes the model and says what is in it, one line per class.
pub fn run(args: ModelArgs) -> anyhow::Result<i32> {
    crate::limits::check_patterns("--methods", &args.methods)?;
    let opts = Options::default()
        .with_methods(args.methods)
        .with_period_ns(args.period.from, args.period.to);
    opts.check()?;
    let inputs = Inputs::new(&[&args.trace]);
    let samples = samples_dir(&args.output);
    if samples == args.output {
        bail!(
            "the model {} would be its own samples directory: give it a name ending in .jsimg",
            args.output.display()
        );
    }
    inputs.check(&args.output)?;
    inputs.check_dir(&samples)?;
    output::remove_partial_on_signals()?;
    let analysis = analyze(Trace::open(&args.trace)?, &opts)?;
    if let Some(damage) = &analysis.damage {
        bail!(
            "{}: {damage}; no model written from a damaged trace",
            args.trace.display()
        );
    }
    let mut dir = NewDir::create(&samples, &inputs, SampleFile::is_sample_name)?;
    let model = model_of(
        &analysis,
        &args.output,
        &dir.absolute_path()?,
        &ModelOptions::default()
            .with_replayer(args.replayer)
            .with_run_queues(args.run_queues),
    );
    if model.classes.is_empty() {
        bail!("no outermost calls of the selected methods: nothing to model");
    }
    for s in &model.samples {
        let file = dir.create_file(&s.name)?;
        s.write(file).map_err(|e| {
            anyhow::anyhow!("cannot write {}: {e}", samples.join(&s.name).display())
        })?;
    }
    let jsimg = NewFile::create(&args.output, &inputs)?;
    {
        use std::io::Write;
        let mut file = jsimg.handle()?;
        file.write_all(to_xml(&model).as_bytes())
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.output.display()))?;
    }
    dir.commit()?;
    jsimg.commit()?;
    let cpus = match model.run_queues {
        None => format!("CPU station: processor sharing, {} servers", model.cpus),
        Some(rq) => format!(
            "{} round-robin run queues, slice {:.3} ms, {}",
            model.cpus,
            rq.quantum_s * 1e3,
            match rq.workers {
                Some(n) => format!("a pool of {n} workers"),
                None => "no worker pool".to_string(),
            }
        ),
    };
    say!(
        "sonda: wrote {} ({} classes, {cpus}) and samples in {}",
        args.output.display(),
        model.classes.len(),
        samples.display()
    );
    for c in &model.classes {
        match (c.traced, c.population) {
            (true, _) => say!(
                "sonda:   {}: {} calls, {:.2} calls/s, CPU demand {:.3} ms in {:.2} visits (the first {:.3} ms), blocked {:.3} ms in {:.2} phases, wall {:.3} ms",
                c.name,
                c.calls,
                c.arrival_rate(),
                c.cpu_mean * 1e3,
                c.visits,
                c.first_visit_mean * 1e3,
                c.blocked_mean * 1e3,
                c.blocked_phases,
                c.wall_mean * 1e3
            ),
            (false, Population::Open { rate }) => say!(
                "sonda:   {}: {:.3} CPUs ({:.1} arrivals/s of {:.3} ms)",
                c.name,
                rate * c.cpu_mean,
                rate,
                c.cpu_mean * 1e3
            ),
            (false, Population::Closed { jobs }) => say!(
                "sonda:   {}: {jobs} CPU-bound task{} (stretches of {:.3} ms, {:.3} ms away between two)",
                c.name,
                if jobs == 1 { "" } else { "s" },
                c.cpu_mean * 1e3,
                c.blocked_mean * 1e3
            ),
        }
    }
    Ok(0)
}
