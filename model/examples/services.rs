//! `sonda services TRACE [json|csv|calls] [WINDOW_S]` before (or without) the `sonda`
//! command: prints the figures of a trace with this crate alone.

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(trace) = args.first() else {
        eprintln!("usage: services TRACE [table|json|csv|calls] [WINDOW_S]");
        std::process::exit(2);
    };
    let mut opts = sonda_model::analyze::Options::default();
    if let Some(w) = args.get(2).and_then(|w| w.parse::<f64>().ok()) {
        opts = opts.with_window_ns((w * 1e9) as u64);
    }
    let analysed = sonda_timeline::Trace::open(std::path::Path::new(trace))
        .map_err(sonda_model::analyze::ServicesError::from)
        .and_then(|t| sonda_model::analyze::analyze(t, &opts));
    let a = match analysed {
        Ok(a) => a,
        Err(e) => {
            eprintln!("services: {e}");
            std::process::exit(1);
        }
    };
    let mut out = std::io::stdout().lock();
    let r = match args.get(1).map(String::as_str) {
        Some("json") => sonda_model::json::write(&a.services, &mut out),
        Some("csv") => sonda_model::csv::write_figures(&a.services, &mut out),
        Some("calls") => sonda_model::csv::write_calls(a.calls(), &a.thread_names, &mut out),
        _ => sonda_model::table::write(&a.services, &mut out),
    };
    let _ = r.and_then(|()| out.flush());
}
