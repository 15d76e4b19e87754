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

mod cli;
mod commands;
mod limits;
mod output;
mod progress;

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
        Err(e) if reader_went_away(&e) => 0,
        Err(e) => {
            say!("sonda: {}", one_line(&message(&e)));
            FAILURE
        }
    };
    std::process::exit(code);
}

/// Whether the command failed writing to a pipe whose reader went away (`sonda report
/// TRACE | head -1`). Unix tools then stop quietly with success; sonda does the same,
/// here for every subcommand at once. Rust ignores SIGPIPE, so the write fails with
/// `EPIPE` instead of killing sonda: a recording must not die of a signal before it
/// finishes its trace and lets the recorded command go on.
fn reader_went_away(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// An error and its causes, `what: why: ...`, each cause said once: many of the
/// libraries' errors put their cause in their own text and also give it as their
/// source, so the plain chain (`{:#}`) would repeat it.
fn message(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let said = cause.to_string();
        if said.is_empty() || text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_said_is_not_said_again() {
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let inner = anyhow::Error::new(io).context("t: No such file or directory (os error 2)");
        assert_eq!(message(&inner), "t: No such file or directory (os error 2)");
        let outer = inner.context("cannot merge");
        assert_eq!(
            message(&outer),
            "cannot merge: t: No such file or directory (os error 2)"
        );
    }
}
