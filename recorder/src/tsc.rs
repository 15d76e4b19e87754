//! Converting raw TSC ticks (how agents stamp records when the TSC is invariant: half
//! the cost of `clock_gettime`) to `CLOCK_MONOTONIC` nanoseconds.
//!
//! The TSC is one counter shared by every process, so the collector calibrates it by
//! itself: it reads `(clock_gettime, rdtsc, clock_gettime)` a few times and keeps the
//! tightest triple as a point `(tsc, ns)`, ns being the middle of the two clock reads.
//! It takes a point every drain cycle *after* draining, so the records just drained lie
//! before the newest point and are converted by interpolating between two points, which
//! follows NTP slewing of CLOCK_MONOTONIC. A time past the newest point (a record
//! committed between drain and calibration) is extrapolated with the slope measured
//! over a long baseline, where the ±20 ns jitter of a point matters least.

use std::collections::VecDeque;

use crate::clock;

/// One calibration point: a TSC reading and the monotonic time at that instant.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Point {
    /// TSC ticks.
    pub tsc: u64,
    /// CLOCK_MONOTONIC nanoseconds.
    pub ns: u64,
}

/// How many points are kept (at one per drain cycle, minutes of history: enough for any
/// record that comes late).
const KEEP: usize = 4096;
/// The baseline for extrapolation: at least this long, in ns.
const BASELINE_NS: u64 = 1_000_000_000;

/// Calibration points, oldest first, strictly increasing in both coordinates.
#[derive(Debug, Default)]
pub struct Calibration {
    points: VecDeque<Point>,
}

impl Calibration {
    /// No points yet.
    pub fn new() -> Calibration {
        Calibration::default()
    }

    /// Adds a point; one that does not advance both clocks is ignored (returns false).
    pub fn add(&mut self, p: Point) -> bool {
        if let Some(last) = self.points.back() {
            if p.tsc <= last.tsc || p.ns <= last.ns {
                return false;
            }
        }
        if self.points.len() == KEEP {
            self.points.pop_front();
        }
        self.points.push_back(p);
        true
    }

    /// Number of points.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Converts a TSC reading to monotonic ns; `None` with fewer than two points.
    pub fn to_ns(&self, tsc: u64) -> Option<u64> {
        let n = self.points.len();
        if n < 2 {
            return None;
        }
        let first = self.points[0];
        let last = self.points[n - 1];
        if tsc >= last.tsc {
            let from = self.baseline_start();
            return Some(extrapolate(from, last, last, tsc));
        }
        if tsc < first.tsc {
            let to = self.baseline_end();
            return Some(extrapolate(first, to, first, tsc));
        }
        // Records drained since the last point but one are nearly all of them: try the
        // newest segment before searching.
        let before_last = self.points[n - 2];
        if tsc >= before_last.tsc {
            return Some(interpolate(before_last, last, tsc));
        }
        // Next most common: stamped just before the previous point (after the drain
        // before it read the ring, before its point was measured).
        if n >= 3 && tsc >= self.points[n - 3].tsc {
            return Some(interpolate(self.points[n - 3], before_last, tsc));
        }
        // The segment [i - 1, i] that holds `tsc`.
        let i = self.points.partition_point(|p| p.tsc <= tsc);
        Some(interpolate(self.points[i - 1], self.points[i], tsc))
    }

    /// The newest segment (between the last two points) as a fixed-point line: the
    /// records of one drain lie in it, and converting them with one multiplication
    /// each instead of [`Calibration::to_ns`]'s division was a tenth of the
    /// collector's CPU at ten million events a second.
    pub fn newest_segment(&self) -> Option<Segment> {
        let n = self.points.len();
        if n < 2 {
            return None;
        }
        let (a, b) = (self.points[n - 2], self.points[n - 1]);
        // < 2^32: a TSC tick is shorter than a nanosecond times 2^32.
        let scale = (u128::from(b.ns - a.ns) << 32) / u128::from(b.tsc - a.tsc);
        Some(Segment {
            from: a,
            to_tsc: b.tsc,
            scale: u64::try_from(scale).ok()?,
        })
    }

    /// The newest point at least [`BASELINE_NS`] before the last one (else the oldest).
    fn baseline_start(&self) -> Point {
        let last = self.points[self.points.len() - 1];
        let i = self
            .points
            .partition_point(|p| p.ns + BASELINE_NS <= last.ns);
        self.points[i.saturating_sub(1)]
    }

    /// The oldest point at least [`BASELINE_NS`] after the first one (else the newest).
    fn baseline_end(&self) -> Point {
        let first = self.points[0];
        let i = self
            .points
            .partition_point(|p| p.ns < first.ns + BASELINE_NS);
        self.points[i.min(self.points.len() - 1)]
    }
}

/// The line between two calibration points, `ns = from.ns + (tsc - from.tsc) * scale
/// / 2^32`: within a nanosecond of [`interpolate`].
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    from: Point,
    to_tsc: u64,
    scale: u64,
}

impl Segment {
    /// `tsc` in monotonic ns, if it lies in the segment.
    #[inline]
    pub fn to_ns(self, tsc: u64) -> Option<u64> {
        if tsc < self.from.tsc || tsc >= self.to_tsc {
            return None;
        }
        let dt = u128::from(tsc - self.from.tsc);
        Some(self.from.ns + ((dt * u128::from(self.scale)) >> 32) as u64)
    }
}

/// Linear interpolation between `a` and `b` (a.tsc <= t <= b.tsc).
fn interpolate(a: Point, b: Point, t: u64) -> u64 {
    // The same result in 64 bits when the product fits (a segment of one drain period:
    // always), which spares a 128-bit division per record.
    let (dt, span_ns, span_tsc) = (t - a.tsc, b.ns - a.ns, b.tsc - a.tsc);
    if let Some(product) = dt.checked_mul(span_ns) {
        return a.ns + product / span_tsc;
    }
    let dt = u128::from(t - a.tsc);
    let span_ns = u128::from(b.ns - a.ns);
    let span_tsc = u128::from(b.tsc - a.tsc);
    a.ns + (dt * span_ns / span_tsc) as u64
}

/// `t` on the line through `a` and `b`, measured from `anchor`.
fn extrapolate(a: Point, b: Point, anchor: Point, t: u64) -> u64 {
    let span_ns = (b.ns - a.ns) as f64;
    let span_tsc = (b.tsc - a.tsc) as f64;
    let dt = t as f64 - anchor.tsc as f64;
    let ns = anchor.ns as f64 + dt * span_ns / span_tsc;
    ns.max(0.0) as u64
}

/// Takes one calibration point now: the tightest of a few (clock, tsc, clock) triples.
pub fn measure() -> Point {
    let mut best: Option<(u64, Point)> = None;
    for _ in 0..8 {
        let t1 = clock::monotonic().0;
        let tsc = clock::rdtsc();
        let t2 = clock::monotonic().0;
        let width = t2.saturating_sub(t1);
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((
                width,
                Point {
                    tsc,
                    ns: t1 + width / 2,
                },
            ));
        }
    }
    best.map(|(_, p)| p).expect("eight tries were made")
}

/// Whether agents may stamp with the TSC: an invariant TSC (`constant_tsc` and
/// `nonstop_tsc` in `/proc/cpuinfo`) that the kernel itself uses as clocksource (so
/// CLOCK_MONOTONIC is a linear function of it).
pub fn tsc_is_usable() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let clocksource =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_default();
    invariant_tsc(&cpuinfo) && clocksource.trim() == "tsc"
}

/// Whether every `flags` line of a `/proc/cpuinfo` text has both invariant-TSC flags.
fn invariant_tsc(cpuinfo: &str) -> bool {
    let mut any = false;
    for line in cpuinfo.lines().filter(|l| l.starts_with("flags")) {
        let flags: Vec<&str> = line.split_whitespace().collect();
        if !(flags.contains(&"constant_tsc") && flags.contains(&"nonstop_tsc")) {
            return false;
        }
        any = true;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal(points: &[(u64, u64)]) -> Calibration {
        let mut c = Calibration::new();
        for &(tsc, ns) in points {
            assert!(c.add(Point { tsc, ns }));
        }
        c
    }

    #[test]
    fn interpolates_between_points_and_follows_slope_changes() {
        // 2 ticks per ns, then 4 ticks per ns (a slewed clock).
        let c = cal(&[(1000, 100), (3000, 1100), (7000, 2100)]);
        assert_eq!(c.to_ns(1000), Some(100));
        assert_eq!(c.to_ns(2000), Some(600));
        assert_eq!(c.to_ns(3000), Some(1100));
        assert_eq!(c.to_ns(5000), Some(1600));
        assert_eq!(c.to_ns(6999), Some(2099));
    }

    #[test]
    fn the_newest_segment_agrees_with_to_ns_within_a_nanosecond() {
        let mut c = Calibration::new();
        assert!(c.newest_segment().is_none());
        // A 3.1 GHz TSC, 50 ms apart, then a slightly different slope.
        c.add(Point {
            tsc: 1_000_000_000_000,
            ns: 7_000_000_000,
        });
        c.add(Point {
            tsc: 1_000_155_000_000,
            ns: 7_050_000_000,
        });
        c.add(Point {
            tsc: 1_000_310_000_777,
            ns: 7_100_000_013,
        });
        let s = c.newest_segment().unwrap();
        let mut x: u64 = 5;
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let t = 1_000_155_000_000 + (x >> 20) % 155_000_777;
            let fast = s.to_ns(t).unwrap();
            let exact = c.to_ns(t).unwrap();
            assert!(fast.abs_diff(exact) <= 1, "{t}: {fast} vs {exact}");
        }
        assert_eq!(s.to_ns(1_000_154_999_999), None, "before the segment");
        assert_eq!(s.to_ns(1_000_310_000_777), None, "at its end: extrapolated");
    }

    #[test]
    fn extrapolates_beyond_the_ends() {
        let c = cal(&[(1000, 100), (3000, 1100)]);
        assert_eq!(c.to_ns(5000), Some(2100));
        assert_eq!(c.to_ns(0), Some(0));
        assert_eq!(c.to_ns(800), Some(0));
        let one = cal(&[(1000, 100)]);
        assert_eq!(one.to_ns(1000), None);
    }

    #[test]
    fn extrapolation_uses_a_long_baseline() {
        // A point every 100 ms at 3 ticks/ns, the last one 30 ns late (jitter): the slope
        // over the last segment alone would be off by 3e-7, over 1 s by 3e-8.
        let mut points: Vec<(u64, u64)> = (0..20)
            .map(|i| (i * 300_000_000, i * 100_000_000))
            .collect();
        points.last_mut().unwrap().1 += 30;
        let c = cal(&points);
        let last = *points.last().unwrap();
        let t = last.0 + 300_000_000; // 100 ms past the last point
        let got = c.to_ns(t).unwrap() as i64;
        let ideal = (last.1 + 100_000_000) as i64;
        assert!(
            (got - ideal).abs() < 40,
            "extrapolated {got}, ideal {ideal}"
        );
    }

    #[test]
    fn points_that_do_not_advance_are_refused() {
        let mut c = cal(&[(1000, 100)]);
        assert!(!c.add(Point { tsc: 1000, ns: 200 }));
        assert!(!c.add(Point { tsc: 2000, ns: 100 }));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn conversion_is_monotonic() {
        let c = cal(&[
            (1000, 100),
            (1010, 5000),
            (90_000, 5001),
            (100_000, 900_000),
        ]);
        let mut last = 0;
        for t in (0..120_000).step_by(7) {
            let ns = c.to_ns(t).unwrap();
            assert!(ns >= last, "{t}: {ns} < {last}");
            last = ns;
        }
    }

    #[test]
    fn detects_invariant_tsc() {
        let good = "processor: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc rdtscp\n\nprocessor: 1\nflags\t\t: tsc constant_tsc nonstop_tsc\n";
        assert!(invariant_tsc(good));
        let one_bad = "flags\t\t: fpu tsc constant_tsc nonstop_tsc\nflags\t\t: tsc constant_tsc\n";
        assert!(!invariant_tsc(one_bad));
        assert!(!invariant_tsc(""));
    }

    /// The real conversion error: TSC readings taken together with clock_gettime, then
    /// converted with points taken every 100 ms as the recorder does. Runs 1 s by default;
    /// `SONDA_TSC_SECONDS=10` for the longer measurement quoted in the docs.
    #[test]
    fn real_conversion_error_is_below_a_microsecond() {
        if !tsc_is_usable() {
            eprintln!("skipped: no invariant TSC used as clocksource on this machine");
            return;
        }
        let seconds: u64 = std::env::var("SONDA_TSC_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        let mut c = Calibration::new();
        c.add(measure());
        let mut errors = Vec::new();
        let mut pending = Vec::new();
        let end = clock::monotonic().0 + seconds * 1_000_000_000;
        let mut next_point = clock::monotonic().0 + 100_000_000;
        while clock::monotonic().0 < end {
            // One probe: a clock read and a TSC read as close together as a point's.
            let t1 = clock::monotonic().0;
            let tsc = clock::rdtsc();
            let t2 = clock::monotonic().0;
            if t2 - t1 < 200 {
                pending.push((tsc, t1 + (t2 - t1) / 2));
            }
            std::thread::sleep(std::time::Duration::from_micros(500));
            if clock::monotonic().0 >= next_point {
                c.add(measure());
                next_point += 100_000_000;
                for (tsc, ns) in pending.drain(..) {
                    errors.push(c.to_ns(tsc).unwrap() as i64 - ns as i64);
                }
            }
        }
        assert!(errors.len() > 100, "too few probes: {}", errors.len());
        let mut abs: Vec<u64> = errors.iter().map(|e| e.unsigned_abs()).collect();
        abs.sort_unstable();
        let p50 = abs[abs.len() / 2];
        let p99 = abs[abs.len() * 99 / 100];
        let max = *abs.last().unwrap();
        let mean = errors.iter().sum::<i64>() as f64 / errors.len() as f64;
        eprintln!(
            "TSC conversion error over {seconds} s, {} probes: mean {mean:.1} ns, |err| p50 {p50} ns, p99 {p99} ns, max {max} ns",
            errors.len()
        );
        assert!(p99 < 1_000, "p99 conversion error {p99} ns");
    }
}
