//! `sonda record`: checks everything that can be checked before starting the command,
//! then hands over to the recorder.

use std::fs::File;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use sonda_filter::MethodFilter;

use crate::cli::RecordArgs;
use crate::launch::{self, AGENT_ENV, AGENT_LIB};
use crate::recorder::{self, Settings, Subject};

/// Per-thread agent slots: threads beyond this many recording at once lose their
/// events (counted as `agent.no_slot`). The file is sparse: unused slots cost nothing.
const AGENT_SLOTS: u32 = 1024;

/// Validates the arguments, records, and returns the command's exit code.
pub fn run(args: RecordArgs) -> anyhow::Result<i32> {
    let Some(argv0) = args.command.first() else {
        bail!("no command to record: give it after `--`, as in `sonda record -o TRACE -- COMMAND [ARGS]...`");
    };
    let program = launch::resolve(argv0, std::env::var_os("PATH").as_deref())?;
    let methods = MethodFilter::parse(&args.methods)?;
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
    let kernel_ring = usize::try_from(args.buffer_size).context("--buffer-size too large")?;
    let agent_ring = u32::try_from(args.agent_buffer.next_power_of_two())
        .ok()
        .filter(|&r| r >= 4096)
        .ok_or_else(|| anyhow!("--agent-buffer must be between 4K and 2G"))?;
    // Last check, so that nothing is left behind when another one fails.
    let output = File::create(&args.output)
        .with_context(|| format!("cannot write trace file {}", args.output.display()))?;
    let outcome = recorder::record(Settings {
        output,
        output_path: args.output,
        subject: Subject::Launch {
            program,
            argv: args.command,
            agent_lib,
        },
        methods,
        kernel_ring,
        agent_ring,
        agent_slots: AGENT_SLOTS,
        lag: Duration::from_millis(args.lag),
    })?;
    Ok(outcome.exit_code)
}
