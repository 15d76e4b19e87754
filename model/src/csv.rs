//! CSV for tools: `sonda services --format csv` (one row per window, method, scope
//! and component) and `--calls` (one row per call).

use std::io::{self, Write};

use rustc_hash::FxHashMap;
use sonda_timeline::ExitKind;
use sonda_trace::Tid;

use crate::figures::{Services, Window};
use crate::join::CallRecord;
use crate::parts::{Component, Parts};

/// The header of [`write_figures`].
pub const FIGURES_HEADER: &str = "window_begin_s,window_end_s,method,calls,throughput_per_s,arrival_rate_per_s,in_flight,scope,component,count,mean_ns,sd_ns,min_ns,p50_ns,p90_ns,p99_ns,max_ns,zero_fraction,best_fit,best_ks";

/// The header of [`write_calls`].
pub const CALLS_HEADER: &str = "method,tid,thread,depth,exit,begin_ns,end_ns,wall_ns,cpu_ns,runnable_ns,sleeping_ns,uninterruptible_ns,other_ns,monitor_ns,gc_ns,excl_wall_ns,excl_cpu_ns,excl_runnable_ns,excl_sleeping_ns,excl_uninterruptible_ns,excl_other_ns,excl_monitor_ns,excl_gc_ns";

/// A CSV field: quoted when it holds a comma, quote or line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes the figures: the whole period first, then each window.
pub fn write_figures(s: &Services, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{FIGURES_HEADER}")?;
    for w in std::iter::once(&s.whole).chain(&s.windows) {
        window(w, out)?;
    }
    Ok(())
}

fn window(w: &Window, out: &mut dyn Write) -> io::Result<()> {
    for m in &w.methods {
        let lead = format!(
            "{:.6},{:.6},{},{},{:.6},{:.6},{:.6}",
            w.begin_s,
            w.end_s,
            field(&m.method),
            m.calls,
            m.throughput_per_s,
            m.arrival_rate_per_s,
            m.little.in_flight
        );
        let scopes = [("inclusive", &m.inclusive), ("exclusive", &m.exclusive)];
        for (scope, comps) in scopes {
            for c in Component::ALL {
                let f = comps.get(c);
                row(out, &lead, scope, c.key(), f)?;
            }
        }
        row(out, &lead, "arrivals", "interarrival", &m.interarrival)?;
    }
    Ok(())
}

fn row(
    out: &mut dyn Write,
    lead: &str,
    scope: &str,
    component: &str,
    f: &crate::figures::ComponentFigures,
) -> io::Result<()> {
    let s = &f.summary;
    let best = f.fits.as_ref().and_then(|ff| ff.fits().best().copied());
    writeln!(
        out,
        "{lead},{scope},{component},{},{:.1},{:.1},{:.0},{:.1},{:.1},{:.1},{:.0},{:.6},{},{}",
        s.count,
        s.mean,
        s.sd,
        s.min,
        s.p50,
        s.p90,
        s.p99,
        s.max,
        s.zero_fraction,
        best.map_or("", |b| b.family.key()),
        best.map_or(String::new(), |b| format!("{:.6}", b.ks)),
    )
}

fn exit_name(k: ExitKind) -> &'static str {
    match k {
        ExitKind::Normal => "normal",
        ExitKind::Exception => "exception",
        ExitKind::Unwound => "repaired",
        ExitKind::Unfinished => "unfinished",
    }
}

fn parts(p: &Parts) -> String {
    format!(
        "{},{},{},{},{},{},{},{}",
        p.wall, p.cpu, p.runnable, p.sleeping, p.uninterruptible, p.other, p.monitor, p.gc
    )
}

/// Writes one row per call; times are the trace's clock (`CLOCK_MONOTONIC` ns).
pub fn write_calls<'a>(
    calls: impl IntoIterator<Item = (&'a str, &'a [CallRecord])>,
    threads: &FxHashMap<Tid, String>,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "{CALLS_HEADER}")?;
    for (label, calls) in calls {
        let label = field(label);
        for c in calls {
            writeln!(
                out,
                "{label},{},{},{},{},{},{},{},{}",
                c.tid.0,
                field(threads.get(&c.tid).map_or("", |s| s.as_str())),
                c.depth,
                exit_name(c.kind),
                c.begin.0,
                c.end.0,
                parts(&c.inclusive),
                parts(&c.exclusive)
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_needed() {
        assert_eq!(field("a.B::m"), "a.B::m");
        assert_eq!(field("a.B::m(II)V,x"), "\"a.B::m(II)V,x\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(FIGURES_HEADER.split(',').count(), 20);
        assert_eq!(CALLS_HEADER.split(',').count(), 23);
    }
}
