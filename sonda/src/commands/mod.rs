//! One module per subcommand.

pub mod attach;
pub mod export;
pub mod merge;
pub mod metrics;
pub mod model;
pub mod paraver;
pub mod record;
pub mod report;
pub mod services;

use anyhow::bail;
use sonda_recorder::Outcome;

use crate::cli::Command;
use crate::output::NewFile;

/// Runs a subcommand; returns the process exit code.
///
/// Every subcommand first removes what killed sondas left (an ftrace instance still
/// tracing, buffer files): a recording killed with SIGKILL leaves nothing running once
/// any later sonda command ran, even `sonda report`.
pub fn run(command: Command) -> anyhow::Result<i32> {
    sonda_recorder::leftovers::remove();
    match command {
        Command::Record(args) => record::run(args),
        Command::Attach(args) => attach::run(args),
        Command::Paraver(args) => paraver::run(args),
        Command::Export(args) => export::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Report(args) => report::run(args),
        Command::Services(args) => services::run(args),
        Command::Model(args) => model::run(args),
    }
}

/// The end of a recording: when the subject never started, nothing was recorded and the
/// partial trace goes (the old trace, if any, stays); once it started, the trace is put
/// in place whatever happened after, a failure included (it holds what was recorded up
/// to the failure). Returns the command's exit code.
fn keep_recording(trace: NewFile, outcome: anyhow::Result<Outcome>) -> anyhow::Result<i32> {
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            trace.discard();
            return Err(e);
        }
    };
    let path = trace.path().to_path_buf();
    trace.commit()?;
    if let Some(failure) = outcome.failure {
        bail!(
            "{failure:#}; the trace {} holds what was recorded before",
            path.display()
        );
    }
    Ok(outcome.exit_code)
}
