//! The page: Prometheus' text exposition format, version 0.0.4.
//!
//! One family per figure, each with its `# HELP` and `# TYPE` lines, the samples of a
//! family together. Every figure is a counter (it only grows while the recording
//! runs), so its name ends in `_total` and a scraper's `rate()`/`increase()` apply;
//! times are seconds. Label values are escaped as the format says (`\` as `\\`, `"` as
//! `\"`, a line feed as `\n`); a method label holds what the program named, so it is
//! never trusted to be plain.

use std::fmt::Write as _;

use crate::live::{Live, MethodSums};

/// The content type of the page.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The per-method families: name, help, value of one method's sums.
type PerMethod = (&'static str, &'static str, fn(&MethodSums) -> f64);

const PER_METHOD: [PerMethod; 4] = [
    (
        "sonda_method_calls_total",
        "Completed calls of the traced method (returned or thrown).",
        |m| m.calls as f64,
    ),
    (
        "sonda_method_cpu_seconds_total",
        "CPU time of the method's completed calls, nested calls included.",
        |m| m.cpu_ns as f64 / 1e9,
    ),
    (
        "sonda_method_wait_seconds_total",
        "Time the method's completed calls were runnable, waiting for a CPU.",
        |m| m.wait_ns as f64 / 1e9,
    ),
    (
        "sonda_method_blocked_seconds_total",
        "Time the method's completed calls were blocked (sleeping or in uninterruptible sleep).",
        |m| m.blocked_ns as f64 / 1e9,
    ),
];

/// Appends `value` escaped as a label value.
fn escape(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Appends a value: integers without a fraction, others as Rust's shortest exact
/// decimal (never an exponent, which the format allows but some readers do not).
fn value(out: &mut String, v: f64) {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} counter");
}

fn single(out: &mut String, name: &str, help: &str, v: f64) {
    family(out, name, help);
    out.push_str(name);
    out.push(' ');
    value(out, v);
    out.push('\n');
}

/// The page for `live`'s figures; `tap_dropped` records did not reach them.
pub fn render(live: &Live, tap_dropped: u64) -> Vec<u8> {
    let mut out = String::with_capacity(1024 + live.methods().len() * 600);
    for (name, help, get) in PER_METHOD {
        family(&mut out, name, help);
        // Only methods called: a filter may instrument thousands that never run.
        for m in live.methods().iter().filter(|m| m.calls > 0) {
            out.push_str(name);
            out.push_str("{method=\"");
            escape(&mut out, &m.method);
            out.push_str("\",class=\"");
            escape(&mut out, &m.class);
            out.push_str("\"} ");
            value(&mut out, get(m));
            out.push('\n');
        }
    }
    let c = live.recording();
    single(
        &mut out,
        "sonda_events_total",
        "Events written to the trace (kernel scheduling, /proc samples and agent events).",
        c.events as f64,
    );
    single(
        &mut out,
        "sonda_events_dropped_total",
        "Agent events lost (full per-thread rings, or threads without a free slot).",
        c.dropped as f64,
    );
    single(
        &mut out,
        "sonda_collector_cpu_seconds_total",
        "CPU time of the sonda collector process.",
        c.collector_cpu_ns as f64 / 1e9,
    );
    single(
        &mut out,
        "sonda_metrics_dropped_total",
        "Events written to the trace that these metrics missed (the metrics thread fell behind).",
        tap_dropped as f64,
    );
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::Meta;

    #[test]
    fn escapes_label_values() {
        let mut s = String::new();
        escape(&mut s, "a\\b\"c\nd");
        assert_eq!(s, "a\\\\b\\\"c\\nd");
    }

    #[test]
    fn values() {
        let mut s = String::new();
        value(&mut s, 3.0);
        s.push(' ');
        value(&mut s, 0.0015);
        s.push(' ');
        value(&mut s, 1e-9);
        assert_eq!(s, "3 0.0015 0.000000001");
    }

    #[test]
    fn every_family_has_help_and_type() {
        let mut live = Live::new();
        live.meta(&Meta::Method {
            id: 1,
            class: "we\"ird".into(),
            name: "x\ny".into(),
            descriptor: String::new(),
        });
        let page = String::from_utf8(render(&live, 7)).unwrap();
        assert!(page.contains("# TYPE sonda_method_calls_total counter\n"));
        assert!(page.contains("sonda_metrics_dropped_total 7\n"));
        assert!(page.contains("# HELP sonda_collector_cpu_seconds_total "));
        // A method with no completed call has no samples yet.
        assert!(!page.contains("we\\\"ird"));
        for line in page.lines() {
            assert!(!line.is_empty());
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(page.contains(&format!("# HELP {name} ")), "{name}");
            }
        }
    }
}
