//! The exporter's throughput and memory on a synthetic busy trace.
//!
//! ```text
//! cargo run --release -p sonda-paraver --example bench_export -- gen TRACE RECORDS samples|no-samples
//! cargo run --release -p sonda-paraver --example bench_export -- export TRACE STEM [REORDER_LIMIT]
//! ```
//!
//! `export` prints the Paraver records written per second and the process's peak
//! resident memory (VmHWM), so run it apart from `gen`.
use std::fs::File;
use std::io;
use std::path::Path;
use std::time::Instant;

use sonda_paraver::{export, ExportOptions, Output, Outputs};
use sonda_testdata::Busy;
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

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["gen", trace, records, samples] => {
            let spec = Busy {
                threads: 200,
                idle: 20,
                cpus: 2,
                methods: 500,
                records: records.parse().expect("RECORDS"),
                seed: 42,
                start_samples: samples == "samples",
            };
            let start = Instant::now();
            let n = spec.write(Path::new(trace)).expect("write the trace");
            let bytes = std::fs::metadata(trace).map(|m| m.len()).unwrap_or(0);
            println!(
                "wrote {n} records, {} MiB, in {:.2?}",
                bytes >> 20,
                start.elapsed()
            );
        }
        ["export", trace, stem, ref limit @ ..] => {
            let mut opts = ExportOptions::default();
            if let [limit] = limit {
                opts = opts.with_reorder_limit(limit.parse().expect("REORDER_LIMIT"));
            }
            let start = Instant::now();
            let stem = Path::new(stem);
            let trace = Trace::open(Path::new(trace)).expect("open the trace");
            let s = export(trace, &mut Files(stem), &opts).expect("export");
            let secs = start.elapsed().as_secs_f64();
            let written = s.states + s.events + s.communications;
            let prv = std::fs::metadata(Output::Prv.path(stem))
                .map(|m| m.len())
                .unwrap_or(0);
            println!(
                "read {} trace records, wrote {written} Paraver records ({} states, {} events, {} pieces), {} MiB .prv, in {secs:.2} s",
                s.trace_records, s.states, s.events, s.state_pieces, prv >> 20
            );
            println!(
                "{:.2} M Paraver records/s, {:.2} M trace records/s, peak RSS {} MiB",
                written as f64 / secs / 1e6,
                s.trace_records as f64 / secs / 1e6,
                peak_rss_kib().unwrap_or(0) >> 10
            );
        }
        _ => {
            eprintln!(
                "usage: bench_export gen TRACE RECORDS samples|no-samples | export TRACE STEM [REORDER_LIMIT]"
            );
            std::process::exit(2);
        }
    }
}
