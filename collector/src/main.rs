//! The `sonda` command. Thin: parses the command line, runs the subcommand, and turns
//! any error into one line `sonda: <what>` with a non-zero exit code.

/// Writes one line to stderr, ignoring failure (a closed stderr must not make sonda
/// panic: the recording and the command's exit status matter more).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod agent;
mod child;
mod cli;
mod clock;
mod commands;
mod follow;
mod host;
mod kernel;
mod launch;
mod merge;
mod procfs;
mod recorder;
mod tsc;
mod wake_audit;

use clap::Parser;

/// Exit code for a command line that does not parse or a failure of sonda itself.
const USAGE: i32 = 2;
const FAILURE: i32 = 1;

fn main() {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        USAGE
                    } else {
                        0
                    },
                );
            }
            say!("sonda: {}", one_line(&e.render().to_string()));
            std::process::exit(USAGE);
        }
    };
    let code = match commands::run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            say!("sonda: {}", one_line(&format!("{e:#}")));
            FAILURE
        }
    };
    std::process::exit(code);
}

/// The first paragraph of a message on one line, without clap's `error: ` prefix.
fn one_line(text: &str) -> String {
    let first = text.split("\n\n").next().unwrap_or(text);
    let joined: Vec<&str> = first
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    joined.join(" ").trim_start_matches("error: ").to_string()
}
