//! A time window of the export: `--from` and `--to`, in ns from the trace's origin.
//!
//! The records before the window still go through the timeline (a state or a call that
//! began earlier must be known), but only what falls inside is written, with times
//! shifted so that the window begins at 0: states are clipped to it, calls, monitor
//! waits and collections open at its start get their begin events there, and those open
//! at its end are closed there. A window that does not overlap the trace is an error;
//! one that runs past the trace's end is cut at the end.

use std::fmt;

/// A time window, ns from the trace's origin; `None` ends are open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeWindow {
    /// Where the export begins (inclusive).
    pub from: Option<u64>,
    /// Where the export ends.
    pub to: Option<u64>,
}

impl TimeWindow {
    /// Whether the window covers the whole trace.
    pub fn is_whole(&self) -> bool {
        self.from.is_none() && self.to.is_none()
    }

    /// The window within a trace of `end` ns: `(from, to)` with `from < to <= end`, or
    /// why it does not fit.
    pub(crate) fn resolve(&self, end: u64) -> Result<(u64, u64), String> {
        let from = self.from.unwrap_or(0);
        let to = self.to.unwrap_or(end);
        if from >= end {
            return Err(format!(
                "the time window starts at {}, after the trace's end ({})",
                Ns(from),
                Ns(end)
            ));
        }
        if to <= from {
            return Err(format!(
                "the time window is empty: --to {} is not after --from {}",
                Ns(to),
                Ns(from)
            ));
        }
        Ok((from, to.min(end)))
    }
}

/// A duration printed with the unit that reads best.
pub(crate) struct Ns(pub u64);

impl fmt::Display for Ns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns >= 1_000_000_000 {
            write!(f, "{:.3} s", ns as f64 / 1e9)
        } else if ns >= 1_000_000 {
            write!(f, "{:.3} ms", ns as f64 / 1e6)
        } else if ns >= 1_000 {
            write!(f, "{:.3} us", ns as f64 / 1e3)
        } else {
            write!(f, "{ns} ns")
        }
    }
}

/// Parses a time from the trace's origin: a number with an optional unit `s`, `ms`,
/// `us` or `ns` (no unit: ns), e.g. `1.5s`, `200ms`, `250000`.
pub fn parse_time(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!(
            "a time from the trace's start cannot be negative: {text:?}"
        ));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => {
            return Err(format!(
                "unknown time unit {other:?} in {text:?} (use s, ms, us or ns)"
            ))
        }
    };
    if number.is_empty() || number.matches('.').count() > 1 {
        return Err(format!("not a time: {text:?} (try 1.5s or 200ms)"));
    }
    if let (1.0, Ok(n)) = (scale, number.parse::<u64>()) {
        return Ok(n);
    }
    let v: f64 = number
        .parse()
        .map_err(|_| format!("not a time: {text:?} (try 1.5s or 200ms)"))?;
    let ns = (v * scale).round();
    if !(0.0..1.8e19).contains(&ns) {
        return Err(format!("time {text:?} out of range"));
    }
    Ok(ns as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_with_units() {
        assert_eq!(parse_time("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_time("200ms"), Ok(200_000_000));
        assert_eq!(parse_time("3us"), Ok(3_000));
        assert_eq!(parse_time("42"), Ok(42));
        assert_eq!(parse_time("42ns"), Ok(42));
        assert_eq!(parse_time("0.000000001s"), Ok(1));
        assert!(parse_time("1.5h").unwrap_err().contains("unit"));
        assert!(parse_time("s").is_err());
        assert!(parse_time("1.2.3s").is_err());
        assert!(parse_time("-1s")
            .unwrap_err()
            .contains("cannot be negative"));
        assert!(parse_time("-5").unwrap_err().contains("cannot be negative"));
    }

    #[test]
    fn windows_fit_the_trace_or_fail() {
        let w = |from, to| TimeWindow { from, to };
        assert_eq!(w(None, None).resolve(100), Ok((0, 100)));
        assert_eq!(w(Some(10), Some(500)).resolve(100), Ok((10, 100)));
        assert!(w(Some(100), None)
            .resolve(100)
            .unwrap_err()
            .contains("after the trace's end"));
        assert!(w(Some(50), Some(50))
            .resolve(100)
            .unwrap_err()
            .contains("empty"));
        assert!(w(Some(2_000_000_000), None)
            .resolve(100)
            .unwrap_err()
            .contains("2.000 s"));
    }
}
