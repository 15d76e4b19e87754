//! Prints the report of a trace, as `sonda report` will:
//! `cargo run --release -p sonda-timeline --example report -- TRACE`.
use sonda_timeline::report::{render, ReportError, ReportOptions};
use sonda_timeline::Trace;

fn main() {
    let Some(trace) = std::env::args().nth(1) else {
        eprintln!("usage: report TRACE");
        std::process::exit(2);
    };
    let mut out = std::io::stdout().lock();
    let rendered = Trace::open(trace.as_ref())
        .map_err(ReportError::from)
        .and_then(|t| render(t, &mut out, &ReportOptions::default()));
    match rendered {
        Ok(summary) => {
            if let Some(damage) = summary.damage {
                eprintln!("report: {trace}: {damage}");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("report: {e}");
            std::process::exit(1);
        }
    }
}
