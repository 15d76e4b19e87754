//! One module per subcommand.

pub mod attach;
pub mod merge;
pub mod model;
pub mod paraver;
pub mod record;
pub mod report;
pub mod services;

use crate::cli::Command;

/// Runs a subcommand; returns the process exit code.
pub fn run(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Record(args) => record::run(args),
        Command::Attach(args) => attach::run(args),
        Command::Paraver(args) => paraver::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Report(args) => report::run(args),
        Command::Services(args) => services::run(args),
        Command::Model(args) => model::run(args),
    }
}
