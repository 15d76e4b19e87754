//! `sonda services --format table`: the figures for a person.

use std::io::{self, Write};

use crate::figures::{Services, Window};
use crate::parts::Component;
use crate::units::UnitClass;

/// A duration in ns, compact: `812ns`, `41.2us`, `2.310ms`, `1.204s`.
pub fn duration(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.0}ns")
    } else if a < 1e6 {
        format!("{:.1}us", ns / 1e3)
    } else if a < 1e9 {
        format!("{:.3}ms", ns / 1e6)
    } else {
        format!("{:.3}s", ns / 1e9)
    }
}

/// Lines of cells, each column as wide as its widest cell; the first column left
/// aligned, the others right aligned.
fn columns(out: &mut dyn Write, rows: &[Vec<String>], indent: usize) -> io::Result<()> {
    let mut widths = Vec::new();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if widths.len() <= i {
                widths.push(0);
            }
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    for r in rows {
        let mut line = " ".repeat(indent);
        for (i, c) in r.iter().enumerate() {
            if i == 0 {
                line.push_str(&format!("{c:<w$}", w = widths[0]));
            } else {
                line.push_str(&format!("  {c:>w$}", w = widths[i]));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// Writes the units of work ([`crate::units`]): one line per class, means per unit.
pub fn write_units(units: &[UnitClass], out: &mut dyn Write) -> io::Result<()> {
    if units.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "Units of work (an outermost call with the traced calls inside it, on its thread; classed by what it contains, or by --unit-class):"
    )?;
    let mut rows = vec![vec![
        "class".to_string(),
        "units".into(),
        "wall".into(),
        "wall p95".into(),
        "cpu".into(),
        "cpu p95".into(),
        "waiting".into(),
        "waiting p95".into(),
        "blocked".into(),
        "blocked p95".into(),
        "cpu visits".into(),
    ]];
    for u in units {
        rows.push(vec![
            u.name(),
            u.units.to_string(),
            duration(u.wall_mean_s * 1e9),
            duration(u.wall_p95_s * 1e9),
            duration(u.cpu_mean_s * 1e9),
            duration(u.cpu_p95_s * 1e9),
            duration(u.runnable_mean_s * 1e9),
            duration(u.runnable_p95_s * 1e9),
            duration(u.blocked_mean_s * 1e9),
            duration(u.blocked_p95_s * 1e9),
            format!("{:.2}", u.visits_mean),
        ]);
    }
    columns(out, &rows, 2)?;
    // What a label stands for: the user sees which methods its units contained.
    for u in units.iter().filter(|u| u.label.is_some()) {
        writeln!(
            out,
            "  {}: {} [{}]",
            u.name(),
            u.outer,
            u.contains.join(", ")
        )?;
    }
    Ok(())
}

/// Writes the table.
pub fn write(s: &Services, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "sonda services: {} ({:.3} s recorded, {} CPUs, states from {}{})",
        s.trace.path,
        s.trace.duration_s,
        s.trace.cpus,
        s.trace.source,
        if s.trace.complete { "" } else { ", cut short" }
    )?;
    if let Some(d) = &s.trace.damage {
        writeln!(
            out,
            "damaged: {} ({} stretch{} skipped); the figures cover the {} records of the intact blocks, of {} they hold",
            d.first,
            d.skipped.len(),
            if d.skipped.len() == 1 { "" } else { "es" },
            d.records_read,
            d.records_intact
        )?;
    }
    window(s, &s.whole, out, true)?;
    if !s.windows.is_empty() {
        writeln!(out)?;
        writeln!(out, "Per window:")?;
        let mut rows = vec![vec![
            "window (s)".to_string(),
            "method".into(),
            "calls".into(),
            "X/s".into(),
            "λ/s".into(),
            "cpu".into(),
            "waiting".into(),
            "blocked".into(),
            "wall".into(),
            "in flight".into(),
            "CPUs used".into(),
        ]];
        for w in &s.windows {
            for m in &w.methods {
                rows.push(vec![
                    format!("{:.1}-{:.1}", w.begin_s, w.end_s),
                    m.method.clone(),
                    m.calls.to_string(),
                    format!("{:.1}", m.throughput_per_s),
                    format!("{:.1}", m.arrival_rate_per_s),
                    duration(m.inclusive.cpu.summary.mean),
                    duration(m.inclusive.runnable.summary.mean),
                    duration(m.inclusive.blocked.summary.mean),
                    duration(m.inclusive.wall.summary.mean),
                    format!("{:.2}", m.little.in_flight),
                    format!("{:.2}", w.utilisation.process_cpus),
                ]);
            }
        }
        columns(out, &rows, 2)?;
    }
    let c = &s.checks;
    let mut notes = Vec::new();
    if c.kernel_lost > 0 {
        notes.push(format!("{} kernel records lost", c.kernel_lost));
    }
    if c.agent_dropped > 0 {
        notes.push(format!("{} JVM records dropped", c.agent_dropped));
    }
    if let Some(u) = c.unseen_wakeups.filter(|&u| u > 0) {
        notes.push(format!(
            "{u} wakeups unseen by the kernel recording (their wait for a CPU counts as sleeping)"
        ));
    }
    if c.unfinished_calls > 0 {
        notes.push(format!(
            "{} calls still open at the end (left out)",
            c.unfinished_calls
        ));
    }
    if c.cpu_disagreements + c.unmatched_exits > 0 {
        notes.push(format!(
            "self-check: {} CPU disagreements, {} unmatched exits",
            c.cpu_disagreements, c.unmatched_exits
        ));
    }
    if !notes.is_empty() {
        writeln!(out)?;
        writeln!(out, "Note: {}.", notes.join("; "))?;
    }
    Ok(())
}

fn window(s: &Services, w: &Window, out: &mut dyn Write, detail: bool) -> io::Result<()> {
    writeln!(
        out,
        "Observed {:.3} s (from the first call at {:.3} s to the last exit at {:.3} s).",
        w.duration_s, w.begin_s, w.end_s
    )?;
    writeln!(out)?;
    let mut rows = vec![vec![
        "method".to_string(),
        "calls".into(),
        "X/s".into(),
        "λ/s".into(),
        "in flight".into(),
        "X·R".into(),
        "cpu".into(),
        "waiting".into(),
        "blocked".into(),
        "wall".into(),
    ]];
    for m in &w.methods {
        rows.push(vec![
            m.method.clone(),
            m.calls.to_string(),
            format!("{:.1}", m.throughput_per_s),
            format!("{:.1}", m.arrival_rate_per_s),
            format!("{:.3}", m.little.in_flight),
            format!("{:.3}", m.little.throughput_times_response),
            duration(m.inclusive.cpu.summary.mean),
            duration(m.inclusive.runnable.summary.mean),
            duration(m.inclusive.blocked.summary.mean),
            duration(m.inclusive.wall.summary.mean),
        ]);
    }
    columns(out, &rows, 2)?;
    writeln!(out, "  (means per call; X throughput, λ arrival rate, in flight time-averaged; Little's law: in flight = X·R)")?;
    if detail {
        for m in &w.methods {
            writeln!(out)?;
            writeln!(
                out,
                "{}: {} calls{}{}",
                m.method,
                m.calls,
                if m.exceptions > 0 {
                    format!(", {} by exception", m.exceptions)
                } else {
                    String::new()
                },
                if m.top_level_calls < m.calls {
                    format!(", {} outermost", m.top_level_calls)
                } else {
                    String::new()
                }
            )?;
            let mut rows = vec![vec![
                "inclusive".to_string(),
                "mean".into(),
                "sd".into(),
                "min".into(),
                "p50".into(),
                "p90".into(),
                "p99".into(),
                "max".into(),
                "exclusive mean".into(),
                "best fit (KS)".into(),
            ]];
            for c in Component::ALL {
                let f = m.inclusive.get(c);
                let x = m.exclusive.get(c);
                let sm = &f.summary;
                let fit = f
                    .fits
                    .as_ref()
                    .and_then(|ff| {
                        let fits = ff.fits();
                        fits.best()
                            .map(|b| format!("{} ({:.3})", b.family.key(), b.ks))
                    })
                    .unwrap_or_default();
                rows.push(vec![
                    c.label().to_string(),
                    duration(sm.mean),
                    duration(sm.sd),
                    duration(sm.min),
                    duration(sm.p50),
                    duration(sm.p90),
                    duration(sm.p99),
                    duration(sm.max),
                    duration(x.summary.mean),
                    fit,
                ]);
            }
            let ia = &m.interarrival;
            rows.push(vec![
                "inter-arrival".to_string(),
                duration(ia.summary.mean),
                duration(ia.summary.sd),
                duration(ia.summary.min),
                duration(ia.summary.p50),
                duration(ia.summary.p90),
                duration(ia.summary.p99),
                duration(ia.summary.max),
                String::new(),
                ia.fits
                    .as_ref()
                    .and_then(|ff| {
                        ff.fits()
                            .best()
                            .map(|b| format!("{} ({:.3})", b.family.key(), b.ks))
                    })
                    .unwrap_or_default(),
            ]);
            columns(out, &rows, 2)?;
        }
        writeln!(out)?;
        writeln!(out, "  cpu + waiting + sleeping + uninterruptible + other = wall for every call; * monitor contention and GC overlap are parts of those states, not added to them.")?;
        let u = &w.utilisation;
        writeln!(out)?;
        writeln!(
            out,
            "Utilisation law: the traced processes used {:.3} CPUs ({:.1}% of {}); the outermost calls' demands (sum of X·D) explain {:.3} CPUs ({:.1}%).",
            u.process_cpus,
            u.machine_fraction * 100.0,
            s.trace.cpus,
            u.demand_cpus,
            u.explained_fraction * 100.0
        )?;
    }
    Ok(())
}
