//! `sonda record`: checks everything that can be checked before starting the command,
//! then hands over to the recorder.

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use sonda_filter::MethodFilter;

use crate::cli::RecordArgs;
use crate::output::NewFile;
use sonda_recorder::launch::{self, AGENT_ENV, AGENT_LIB};
use sonda_recorder::{AgentSizes, BufferPlace, Settings, Subject, SHM_DIR};

/// Validates the arguments, records, and returns the command's exit code.
pub fn run(args: RecordArgs) -> anyhow::Result<i32> {
    let Some(argv0) = args.command.first() else {
        bail!("no command to record: give it after `--`, as in `sonda record -o TRACE -- COMMAND [ARGS]...`");
    };
    let program = launch::resolve(argv0, std::env::var_os("PATH").as_deref())?;
    let rec = args.recording;
    let metrics = crate::commands::metrics::address(&rec)?;
    crate::limits::check_patterns("--methods", &rec.methods)?;
    crate::limits::check_kernel_memory(rec.buffer_size)?;
    let methods = MethodFilter::parse(&rec.methods)?;
    if rec.budget.is_some() && methods.is_empty() {
        bail!("--budget limits the cost of method tracing: give --methods too");
    }
    let exe = std::env::current_exe().ok();
    let agent_lib =
        launch::find_agent(std::env::var_os(AGENT_ENV), exe.as_deref()).map_err(|e| anyhow!(e))?;
    if agent_lib.is_none() {
        let place = exe
            .as_deref()
            .and_then(|e| e.parent())
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        if launch::is_java(argv0) {
            bail!("agent library {AGENT_LIB} not found in {place} (build it with `cargo build -p sonda-agent`, or set {AGENT_ENV})");
        }
        if !methods.is_empty() {
            say!("sonda: agent library {AGENT_LIB} not found in {place}: JVMs started by the command run without it");
        }
    }
    // Absolute: the agent opens it from wherever the JVM runs.
    let buffer_dir = std::path::absolute(rec.buffer_dir.as_deref().unwrap_or(SHM_DIR.as_ref()))
        .context("cannot find the current directory")?;
    // Listening is a check too (the port may be taken); the threads start idle.
    let metrics = crate::commands::metrics::start(metrics)?;
    // Last check, so that nothing is left behind when another one fails.
    let trace = NewFile::recording(&rec.output)?;
    let (tap, metrics) = metrics.unzip();
    let outcome = sonda_recorder::record(Settings {
        output: trace.handle()?,
        output_path: rec.output.clone(),
        subject: Subject::Launch {
            program,
            argv: args.command,
            agent_lib,
        },
        methods,
        budget: rec.budget,
        kernel_ring: rec.buffer_size,
        kernel_cost: rec.kernel_cost,
        agent_sizes: AgentSizes {
            slots: rec.agent_slots,
            ring: rec.agent_buffer,
        },
        buffer: BufferPlace::here(buffer_dir),
        lag: Duration::from_millis(rec.lag),
        tap,
    });
    // The endpoint ends with the recording (its last page has the final figures).
    crate::commands::metrics::stop(metrics);
    crate::commands::keep_recording(trace, outcome)
}
