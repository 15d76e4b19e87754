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
pub const CALLS_HEADER: &str = "method,tid,thread,depth,exit,begin_ns,end_ns,wall_ns,cpu_ns,runnable_ns,stolen_ns,sleeping_ns,uninterruptible_ns,other_ns,monitor_ns,gc_ns,excl_wall_ns,excl_cpu_ns,excl_runnable_ns,excl_stolen_ns,excl_sleeping_ns,excl_uninterruptible_ns,excl_other_ns,excl_monitor_ns,excl_gc_ns,blocked_phases,first_visit_ns";

/// The CSV writer: the `csv` crate quotes a field when it holds a comma, a quote or a
/// line break (method and thread names may), and doubles its quotes.
type Csv<'a> = csv::Writer<&'a mut dyn Write>;

fn csv_writer(out: &mut dyn Write) -> Csv<'_> {
    csv::WriterBuilder::new().from_writer(out)
}

/// An integer field.
fn int(w: &mut Csv, v: impl itoa::Integer) -> csv::Result<()> {
    w.write_field(itoa::Buffer::new().format(v))
}

/// Writes the figures: the whole period first, then each window.
pub fn write_figures(s: &Services, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(FIGURES_HEADER.split(','))?;
    for win in std::iter::once(&s.whole).chain(&s.windows) {
        window(win, &mut w)?;
    }
    w.flush()
}

fn window(win: &Window, w: &mut Csv) -> csv::Result<()> {
    for m in &win.methods {
        let lead = [
            format!("{:.6}", win.begin_s),
            format!("{:.6}", win.end_s),
            m.method.clone(),
            m.calls.to_string(),
            format!("{:.6}", m.throughput_per_s),
            format!("{:.6}", m.arrival_rate_per_s),
            format!("{:.6}", m.little.in_flight),
        ];
        let scopes = [("inclusive", &m.inclusive), ("exclusive", &m.exclusive)];
        for (scope, comps) in scopes {
            for c in Component::ALL {
                let f = comps.get(c);
                row(w, &lead, scope, c.key(), f)?;
            }
        }
        row(w, &lead, "arrivals", "interarrival", &m.interarrival)?;
    }
    Ok(())
}

fn row(
    w: &mut Csv,
    lead: &[String],
    scope: &str,
    component: &str,
    f: &crate::figures::ComponentFigures,
) -> csv::Result<()> {
    let s = &f.summary;
    let best = f.fits.as_ref().and_then(|ff| ff.fits().best().copied());
    for field in lead {
        w.write_field(field)?;
    }
    w.write_field(scope)?;
    w.write_field(component)?;
    int(w, s.count)?;
    for field in [
        format!("{:.1}", s.mean),
        format!("{:.1}", s.sd),
        format!("{:.0}", s.min),
        format!("{:.1}", s.p50),
        format!("{:.1}", s.p90),
        format!("{:.1}", s.p99),
        format!("{:.0}", s.max),
        format!("{:.6}", s.zero_fraction),
    ] {
        w.write_field(field)?;
    }
    w.write_field(best.map_or("", |b| b.family.key()))?;
    w.write_field(best.map_or(String::new(), |b| format!("{:.6}", b.ks)))?;
    w.write_record(None::<&[u8]>)
}

fn exit_name(k: ExitKind) -> &'static str {
    match k {
        ExitKind::Normal => "normal",
        ExitKind::Exception => "exception",
        ExitKind::Unwound => "repaired",
        ExitKind::Unfinished => "unfinished",
    }
}

fn parts(w: &mut Csv, p: &Parts) -> csv::Result<()> {
    for v in [
        p.wall,
        p.cpu,
        p.runnable,
        p.stolen,
        p.sleeping,
        p.uninterruptible,
        p.other,
        p.monitor,
        p.gc,
    ] {
        int(w, v)?;
    }
    Ok(())
}

/// Writes one row per call; times are the trace's clock (`CLOCK_MONOTONIC` ns).
pub fn write_calls<'a>(
    calls: impl IntoIterator<Item = (&'a str, &'a [CallRecord])>,
    threads: &FxHashMap<Tid, String>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(CALLS_HEADER.split(','))?;
    for (label, calls) in calls {
        for c in calls {
            w.write_field(label)?;
            int(&mut w, c.tid.0)?;
            w.write_field(threads.get(&c.tid).map_or("", |s| s.as_str()))?;
            int(&mut w, c.depth)?;
            w.write_field(exit_name(c.kind))?;
            int(&mut w, c.begin.0)?;
            int(&mut w, c.end.0)?;
            parts(&mut w, &c.inclusive)?;
            parts(&mut w, &c.exclusive)?;
            int(&mut w, c.blocked_phases)?;
            int(&mut w, c.first_visit_ns)?;
            w.write_record(None::<&[u8]>)?;
        }
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_needed() {
        use sonda_timeline::{Frame, ThreadIx};
        use sonda_trace::{Pid, Time};
        assert_eq!(FIGURES_HEADER.split(',').count(), 20);
        assert_eq!(CALLS_HEADER.split(',').count(), 27);
        let parts = |wall| Parts {
            wall,
            cpu: wall,
            ..Parts::default()
        };
        let call = |tid| CallRecord {
            frame: Frame::Method(1),
            thread: ThreadIx(0),
            tid: Tid(tid),
            pid: Pid(1),
            begin: Time(10),
            end: Time(30),
            depth: 1,
            kind: ExitKind::Normal,
            inclusive: parts(20),
            exclusive: parts(5),
            blocked_phases: 1,
            first_visit_ns: 12,
        };
        let calls = [call(7), call(8)];
        let threads: FxHashMap<Tid, String> = [
            (Tid(7), "pool-1, \"worker\"".to_string()),
            (Tid(8), "main".to_string()),
        ]
        .into_iter()
        .collect();
        let mut out = Vec::new();
        write_calls(
            [
                ("a.B::m(II)V,x", &calls[..1]),
                ("say \"hi\"", &calls[1..]),
                ("a.B::m", &calls[1..]),
            ],
            &threads,
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CALLS_HEADER);
        let tail = "1,normal,10,30,20,20,0,0,0,0,0,0,0,5,5,0,0,0,0,0,0,0,1,12";
        assert_eq!(
            lines[1],
            format!("\"a.B::m(II)V,x\",7,\"pool-1, \"\"worker\"\"\",{tail}")
        );
        assert_eq!(lines[2], format!("\"say \"\"hi\"\"\",8,main,{tail}"));
        assert_eq!(lines[3], format!("a.B::m,8,main,{tail}"));
        assert_eq!(lines.len(), 4);
        // A CSV reader gets the names back, every row as wide as the header.
        let rows: Vec<csv::StringRecord> = csv::Reader::from_reader(text.as_bytes())
            .records()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(&rows[0][0], "a.B::m(II)V,x");
        assert_eq!(&rows[0][2], "pool-1, \"worker\"");
        assert_eq!(&rows[1][0], "say \"hi\"");
        assert!(rows.iter().all(|r| r.len() == 27));
    }
}
