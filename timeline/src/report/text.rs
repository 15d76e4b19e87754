//! Prints a [`ReportSummary`] as aligned text.

use std::io::{self, Write};

use sonda_trace::{ReadError, Runtime, Source};

use super::summary::{ProcessSummary, ReportSummary};
use super::table::{duration, percent, Align, Table};
use crate::feed::damage_line;
use crate::state::ThreadState;

/// The counters the report always lists, zero when the trace lacks them: what the
/// recording lost.
pub(crate) const LOSS_COUNTERS: [(&str, &str); 5] = [
    ("kernel.lost", "kernel records lost (ring buffers full)"),
    (
        "agent.dropped",
        "agent events dropped (thread buffers full)",
    ),
    (
        "agent.no_slot",
        "threads without a buffer slot (not recorded)",
    ),
    (
        "agent.meta_dropped",
        "agent names dropped (metadata log full)",
    ),
    (
        "collector.late_retimed",
        "records re-timed for arriving late",
    ),
];

pub(crate) fn write(
    s: &ReportSummary,
    out: &mut dyn Write,
    max_methods: Option<usize>,
) -> io::Result<()> {
    recording(s, out)?;
    for p in &s.processes {
        process(s, p, out)?;
    }
    gc(s, out)?;
    monitors(s, out)?;
    methods(s, out, max_methods)?;
    removals(s, out)?;
    losses(s, out)?;
    if !s.warnings.is_empty() {
        writeln!(out, "\nWarnings")?;
        for w in &s.warnings {
            writeln!(out, "  - {w}")?;
        }
    }
    Ok(())
}

fn recording(s: &ReportSummary, out: &mut dyn Write) -> io::Result<()> {
    let r = &s.recording;
    writeln!(out, "Recording")?;
    let mut t = Table::headless(&[Align::Left, Align::Left]);
    let command = if r.command.is_empty() {
        "(unknown)".to_string()
    } else {
        r.command.join(" ")
    };
    t.row(vec!["command".into(), command]);
    let source = match r.source {
        Some(Source::Tracepoints) => "kernel scheduler tracepoints (every switch)",
        Some(Source::Procfs) => "/proc sampling (coarse: states between samples are estimated)",
        None => "unknown",
    };
    t.row(vec!["thread states".into(), source.into()]);
    t.row(vec!["host".into(), format!("{} ({} CPUs)", r.host, r.cpus)]);
    t.row(vec![
        "duration".into(),
        format!("{} ({} records)", duration(r.duration_ns()), r.records),
    ]);
    let status = match (&s.damage, r.complete) {
        (Some(d @ ReadError::Truncated { .. }), _) if s.unread.regions.is_empty() => {
            format!("CUT SHORT: {d}; data up to {}", duration(r.duration_ns()))
        }
        (Some(d), _) => format!(
            "DAMAGED: {}; every intact block is reported",
            damage_line(d, &s.unread)
        ),
        (None, true) => "complete".to_string(),
        (None, false) => {
            "incomplete (no end block: the recording was stopped abruptly)".to_string()
        }
    };
    t.row(vec!["status".into(), status]);
    t.write(out, 2)
}

fn process(s: &ReportSummary, p: &ProcessSummary, out: &mut dyn Write) -> io::Result<()> {
    let kind = match p.runtime {
        Some(Runtime::Java) => ", Java",
        Some(Runtime::Native) => ", native",
        None => "",
    };
    let name = if p.name.is_empty() {
        "process"
    } else {
        &p.name
    };
    let n = p.threads.len();
    let plural = if n == 1 { "" } else { "s" };
    writeln!(
        out,
        "\nProcess {name} (pid {}{kind}): {n} thread{plural}",
        p.pid
    )?;
    let mut t = Table::new(&[
        ("thread", Align::Left),
        ("tid", Align::Right),
        ("running", Align::Right),
        ("waiting CPU", Align::Right),
        ("stolen", Align::Right),
        ("sleeping", Align::Right),
        ("I/O (D)", Align::Right),
        ("other", Align::Right),
        ("cpu%", Align::Right),
        ("switches", Align::Right),
        ("preempted", Align::Right),
        ("migrations", Align::Right),
        ("wakeups", Align::Right),
    ]);
    let procfs = s.recording.source == Some(Source::Procfs);
    let count = |n: u64| {
        if procfs {
            "-".to_string()
        } else {
            n.to_string()
        }
    };
    for th in &p.threads {
        let st = &th.stats.states;
        let other = st.get(ThreadState::Stopped) + st.get(ThreadState::Idle);
        let mut name = th.name.clone();
        if th.stats.unseen {
            name.push_str(" (no record)");
        }
        t.row(vec![
            name,
            th.tid.to_string(),
            duration(st.get(ThreadState::Running)),
            duration(st.get(ThreadState::Runnable)),
            duration(st.get(ThreadState::Stolen)),
            duration(st.get(ThreadState::Sleeping)),
            duration(st.get(ThreadState::Uninterruptible)),
            duration(other),
            percent(st.get(ThreadState::Running), st.alive()),
            count(th.stats.switches),
            count(th.stats.preemptions),
            count(th.stats.migrations),
            count(th.stats.wakeups),
        ]);
    }
    t.write(out, 2)?;
    queued_asleep(p, out)?;
    steal_unplaced(p, out)
}

/// The threads whose charges showed steal the timeline could not place: it came before
/// a call's enter or leave in the same stretch on a CPU, and is in their running time.
fn steal_unplaced(p: &ProcessSummary, out: &mut dyn Write) -> io::Result<()> {
    let mut t = Table::headless(&[Align::Left, Align::Right]);
    for th in p.threads.iter().filter(|th| th.stats.steal_unplaced_ns > 0) {
        t.row(vec![th.name.clone(), duration(th.stats.steal_unplaced_ns)]);
    }
    if t.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  steal not placed (before a call's enter or leave in its stretch on a CPU; counted running, not stolen):"
    )?;
    t.write(out, 4)
}

/// The threads the kernel moved while they slept on a run queue (EEVDF's delayed
/// dequeue): time the report shows as sleeping and the kernel's schedstat as waiting.
fn queued_asleep(p: &ProcessSummary, out: &mut dyn Write) -> io::Result<()> {
    let mut t = Table::headless(&[Align::Left, Align::Right, Align::Left]);
    for th in p.threads.iter().filter(|th| th.stats.queued_asleep > 0) {
        let n = th.stats.queued_asleep;
        t.row(vec![
            th.name.clone(),
            duration(th.stats.queued_asleep_ns),
            format!("in {n} sleep{}", if n == 1 { "" } else { "s" }),
        ]);
    }
    if t.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  asleep on a run queue (moved by the kernel while asleep; sleeping here, waiting for a CPU in the kernel's schedstat):"
    )?;
    t.write(out, 4)
}

fn gc(s: &ReportSummary, out: &mut dyn Write) -> io::Result<()> {
    let mut t = Table::new(&[
        ("process", Align::Left),
        ("pid", Align::Right),
        ("collections", Align::Right),
        ("total", Align::Right),
        ("mean", Align::Right),
        ("max", Align::Right),
    ]);
    for p in s.processes.iter().filter(|p| p.gc.count > 0) {
        t.row(vec![
            p.name.clone(),
            p.pid.to_string(),
            p.gc.count.to_string(),
            duration(p.gc.total_ns),
            duration(p.gc.mean_ns()),
            duration(p.gc.max_ns),
        ]);
    }
    writeln!(out, "\nGC (garbage collections)")?;
    if t.is_empty() {
        return writeln!(out, "  none recorded");
    }
    t.write(out, 2)
}

fn monitors(s: &ReportSummary, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nMonitor contention")?;
    if s.monitors.is_empty() {
        return writeln!(out, "  none recorded");
    }
    let mut t = Table::new(&[
        ("class", Align::Left),
        ("waits", Align::Right),
        ("total wait", Align::Right),
        ("mean", Align::Right),
        ("max", Align::Right),
    ]);
    for m in &s.monitors {
        t.row(vec![
            m.name.clone(),
            m.waits.count.to_string(),
            duration(m.waits.total_ns),
            duration(m.waits.mean_ns()),
            duration(m.waits.max_ns),
        ]);
    }
    t.write(out, 2)
}

fn methods(s: &ReportSummary, out: &mut dyn Write, max: Option<usize>) -> io::Result<()> {
    writeln!(out, "\nInstrumented methods and native functions")?;
    if s.methods.is_empty() {
        return writeln!(out, "  no calls recorded");
    }
    let mut t = Table::new(&[
        ("method", Align::Left),
        ("calls", Align::Right),
        ("exceptions", Align::Right),
        ("inclusive", Align::Right),
        ("mean", Align::Right),
        ("exclusive", Align::Right),
        ("mean", Align::Right),
        ("running", Align::Right),
        ("max", Align::Right),
    ]);
    let shown = max.unwrap_or(usize::MAX).min(s.methods.len());
    for m in &s.methods[..shown] {
        t.row(vec![
            m.label.clone(),
            m.calls.to_string(),
            m.exceptions.to_string(),
            duration(m.inclusive_ns),
            duration(m.mean_inclusive_ns()),
            duration(m.exclusive_ns),
            duration(m.mean_exclusive_ns()),
            duration(m.cpu_ns),
            duration(m.max_ns),
        ]);
    }
    t.write(out, 2)?;
    if shown < s.methods.len() {
        writeln!(out, "  ... {} more methods", s.methods.len() - shown)?;
    }
    writeln!(out, "  (inclusive: wall time with nested calls; exclusive: without; running: on a CPU, nested included)")
}

/// The methods the overhead budget removed: the user learns which methods were too hot
/// to trace, and that their calls after the removal are missing.
fn removals(s: &ReportSummary, out: &mut dyn Write) -> io::Result<()> {
    if s.removals.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nMethods removed by the overhead budget")?;
    let mut t = Table::new(&[
        ("method", Align::Left),
        ("removed at", Align::Right),
        ("calls/s", Align::Right),
        ("mean", Align::Right),
        ("overhead", Align::Right),
        ("calls recorded", Align::Right),
    ]);
    for r in &s.removals {
        t.row(vec![
            r.label.clone(),
            duration(r.at_ns),
            r.rate.to_string(),
            duration(r.mean_ns),
            format!("{:.1}%", r.overhead_ppm as f64 / 10_000.0),
            r.calls.to_string(),
        ]);
    }
    t.write(out, 2)?;
    writeln!(out, "  (measured by the agent before removing the probes; calls after the removal are not in the trace; overhead: estimated share of the process's CPU time)")
}

fn losses(s: &ReportSummary, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nDropped or lost")?;
    let mut t = Table::headless(&[Align::Left, Align::Right, Align::Left]);
    for (name, what) in LOSS_COUNTERS {
        let value = s.counters.get(name).copied().unwrap_or(0);
        t.row(vec![name.into(), value.to_string(), what.into()]);
    }
    t.write(out, 2)?;
    let mut others = Table::headless(&[Align::Left, Align::Right]);
    for (name, value) in s
        .counters
        .iter()
        .filter(|(n, _)| !LOSS_COUNTERS.iter().any(|(l, _)| l == n))
    {
        others.row(vec![name.clone(), value.to_string()]);
    }
    if !others.is_empty() {
        writeln!(out, "\nOther counters")?;
        others.write(out, 2)?;
    }
    let r = &s.repairs;
    let repairs = [
        (
            r.kernel_lost,
            "kernel records lost (from the lost-record markers)",
        ),
        (
            r.agent_dropped,
            "agent events dropped (from the drop markers)",
        ),
        (
            r.sched_conflicts,
            "kernel records that contradicted a thread's state",
        ),
        (
            r.unwound_calls,
            "calls closed because an outer call returned first",
        ),
        (r.unmatched_leaves, "returns without a call, ignored"),
        (
            r.removed_calls,
            "calls of removed methods closed where their caller returned",
        ),
        (
            r.unfinished_calls,
            "calls still open at their thread's or the trace's end",
        ),
        (r.too_deep, "calls not tracked (stack too deep)"),
        (r.unmatched_gc, "GC begins/ends that did not pair"),
        (r.unmatched_monitor, "monitor waits that did not pair"),
        (
            r.unseen_threads,
            "threads without any record (state presumed asleep)",
        ),
        (
            r.after_end,
            "agent events after their thread ended, ignored",
        ),
    ];
    let mut t = Table::headless(&[Align::Right, Align::Left]);
    for (value, what) in repairs.into_iter().filter(|r| r.0 > 0) {
        t.row(vec![value.to_string(), what.into()]);
    }
    if t.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nTimeline repairs")?;
    t.write(out, 2)
}
