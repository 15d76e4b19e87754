//! One module per subcommand.

pub mod record;

use crate::cli::Command;

/// Runs a subcommand; returns the process exit code.
pub fn run(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Record(args) => record::run(args),
    }
}
