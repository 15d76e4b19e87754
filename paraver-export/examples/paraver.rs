//! Exports a trace as `sonda paraver` will:
//! `cargo run --release -p sonda-paraver --example paraver -- TRACE STEM [--wakeups]`.
use sonda_paraver::{export, ExportOptions};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(trace), Some(stem)) = (args.first(), args.get(1)) else {
        eprintln!("usage: paraver TRACE STEM [--wakeups]");
        std::process::exit(2);
    };
    let opts = ExportOptions::default().with_wakeups(args.iter().any(|a| a == "--wakeups"));
    match export(trace.as_ref(), stem.as_ref(), &opts) {
        Ok(s) => {
            println!(
                "{}: {} threads in {} processes, {} states, {} events, {} communications",
                s.prv.display(),
                s.threads,
                s.applications,
                s.states,
                s.events,
                s.communications
            );
            if let Some(damage) = s.damage {
                eprintln!("paraver: {trace}: {damage}; exported what it holds");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("paraver: {e}");
            std::process::exit(1);
        }
    }
}
