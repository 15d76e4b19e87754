//! `attach-probe PID COMMAND [ARG...]`: runs one attach command with sonda-attach and
//! prints the JVM's reply; `attach-probe PID load PATH [OPTIONS]` loads an agent.
//! Errors go to stderr as the message and, on a second line, the error's Debug form
//! (the integration tests match on it). Options: `--timeout SECONDS`.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use sonda_attach::{execute, load_agent, Target, DEFAULT_TIMEOUT};

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut timeout = DEFAULT_TIMEOUT;
    if let Some(i) = args.iter().position(|a| a == "--timeout") {
        let secs = args.get(i + 1).and_then(|s| s.parse::<f64>().ok());
        match secs {
            Some(s) if s > 0.0 && s.is_finite() => timeout = Duration::from_secs_f64(s),
            _ => return usage("--timeout needs a positive number of seconds"),
        }
        args.drain(i..i + 2);
    }
    let (Some(pid), Some(command)) = (args.first(), args.get(1)) else {
        return usage("missing PID or COMMAND");
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return usage("PID must be a number");
    };
    let rest: Vec<&str> = args[2..].iter().map(String::as_str).collect();
    let result = Target::inspect(pid).and_then(|target| {
        if command == "load" {
            let path = rest.first().copied().unwrap_or_default();
            let options = rest.get(1).copied().unwrap_or_default();
            load_agent(&target, Path::new(path), options, timeout)
                .map(|code| format!("Agent_OnAttach returned {code}"))
        } else {
            execute(&target, command, &rest, timeout)
                .map(|reply| format!("status {}\n{}", reply.status, reply.output))
        }
    });
    match result {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("attach-probe: {e}");
            eprintln!("{e:?}");
            ExitCode::FAILURE
        }
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!("attach-probe: {why}\nusage: attach-probe [--timeout SECONDS] PID COMMAND [ARG...]");
    ExitCode::from(2)
}
