//! Exports a trace as `sonda paraver` will:
//! `cargo run --release -p sonda-paraver --example paraver -- TRACE STEM [--wakeups]`.
use std::fs::File;
use std::io;
use std::path::Path;

use sonda_paraver::{export, ExportError, ExportOptions, Output, Outputs};
use sonda_timeline::Trace;

/// Every output as the file `STEM.EXT`.
struct Files<'a>(&'a Path);

impl Outputs for Files<'_> {
    type Writer = File;

    fn create(&mut self, output: Output) -> io::Result<File> {
        File::create(output.path(self.0))
    }

    fn name(&self, output: Output) -> String {
        output.path(self.0).display().to_string()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(trace), Some(stem)) = (args.first(), args.get(1)) else {
        eprintln!("usage: paraver TRACE STEM [--wakeups]");
        std::process::exit(2);
    };
    let opts = ExportOptions::default().with_wakeups(args.iter().any(|a| a == "--wakeups"));
    let stem = Path::new(stem);
    let exported = Trace::open(trace.as_ref())
        .map_err(ExportError::from)
        .and_then(|t| export(t, &mut Files(stem), &opts));
    match exported {
        Ok(s) => {
            println!(
                "{}: {} threads in {} processes, {} states, {} events, {} communications",
                Output::Prv.path(stem).display(),
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
