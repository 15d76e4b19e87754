//! How late the run queue's clock is at a CPU-time charge, to date a switch-in from it.
//!
//! A switch-in the BPF programs did not report (a silent task left the CPU) is dated
//! from the thread's first charge after it: the charge's time less its wall time on the
//! CPU, which the program measures by the run queue's clock, `rq->clock` less
//! `sched_info.last_arrival` (that clock at the switch-in). But the scheduler updates
//! that clock before its work, not at the tracepoint: by the charge the clock is some µs
//! behind, a different amount each time, and the wall time comes out short by that
//! much, so the switch-in late (6-8 µs in 2 of 150 runs of record_jvm's check that
//! method events fall inside their thread's running intervals, docs/trace-format.md).
//!
//! The program also gives the charge's time less the clock it read (the two clocks
//! differ by a constant, which cancels). The least of that lag over the recent charges
//! is the constant plus the shortest delay; a charge's lag beyond it is how far its
//! clock was behind, and is added back to its wall time. The switch-in then comes out
//! at the clock's update at that switch, which the `sched_switch` tracepoint follows by
//! the scheduler's work in between (a µs or two): early rather than late, as the
//! kernel's own accounting has it.

/// Charges older than this (by the trace clock) no longer count for the least lag: the
/// two clocks drift apart (NTP slews one of them, by up to 500 ppm), so the estimate
/// follows the last one to two windows.
const WINDOW_NS: u64 = 10_000_000;

/// The most a charge's wall time is corrected by: a larger excess is not a late clock
/// but something not understood (an unstable clock between CPUs), and left alone.
pub const MAX_CORRECTION_NS: u64 = 1_000_000;

/// The least clock lag of the last one or two windows.
#[derive(Debug, Default)]
pub struct ClockLag {
    /// The least lag of the window that began at `window_start`.
    current: Option<u32>,
    /// The least lag of the window before it.
    previous: Option<u32>,
    window_start: u64,
}

impl ClockLag {
    /// Takes the lag of a charge at `time` (the low 32 bits of its time less the clock
    /// it read) and returns how much to add to the wall time measured by that clock.
    pub fn correction(&mut self, time: u64, lag: u32) -> u64 {
        self.behind(time, lag)
            .filter(|&ns| ns <= MAX_CORRECTION_NS)
            .unwrap_or(0)
    }

    /// Takes the lag of a record at `time` and returns how far behind the least lag
    /// its clock was, ns (`None` below the least: the least is then this one).
    pub fn behind(&mut self, time: u64, lag: u32) -> Option<u64> {
        if time >= self.window_start.saturating_add(WINDOW_NS) {
            let gap = time - self.window_start;
            self.previous = if gap < 2 * WINDOW_NS {
                self.current
            } else {
                None
            };
            self.current = None;
            self.window_start = time;
        }
        self.current = Some(least(self.current, lag));
        let floor = least(self.previous, self.current.unwrap_or(lag));
        // Differences of the low 32 bits are exact while the true one is within ±2 s.
        let excess = lag.wrapping_sub(floor) as i32;
        u64::try_from(excess).ok()
    }
}

/// The lesser of two lags, compared as wrapping 32-bit differences.
fn least(a: Option<u32>, b: u32) -> u32 {
    match a {
        Some(a) if (a.wrapping_sub(b) as i32) < 0 => a,
        _ => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constant between the clocks, near the wrap of the low 32 bits.
    const BASE: u32 = u32::MAX - 500;

    #[test]
    fn a_charge_on_a_clock_later_behind_than_the_least_is_corrected_by_the_difference() {
        let mut lag = ClockLag::default();
        assert_eq!(lag.correction(1_000, BASE.wrapping_add(1_200)), 0, "first");
        assert_eq!(
            lag.correction(2_000, BASE.wrapping_add(800)),
            0,
            "a new least"
        );
        // 7 µs behind where the best was 0.8 µs: 6.2 µs short.
        assert_eq!(lag.correction(3_000, BASE.wrapping_add(7_000)), 6_200);
        assert_eq!(lag.correction(4_000, BASE.wrapping_add(900)), 100);
    }

    #[test]
    fn the_least_lag_follows_the_last_one_or_two_windows() {
        let mut lag = ClockLag::default();
        lag.correction(0, BASE);
        // The clocks drifted 3 µs apart: the old least holds for one more window...
        assert_eq!(
            lag.correction(WINDOW_NS + 1, BASE.wrapping_add(3_000)),
            3_000
        );
        // ...then only the newer charges count.
        assert_eq!(
            lag.correction(2 * WINDOW_NS + 2, BASE.wrapping_add(3_100)),
            100
        );
        assert_eq!(
            lag.correction(2 * WINDOW_NS + 3, BASE.wrapping_add(3_000)),
            0
        );
        // After a long silence nothing old counts.
        assert_eq!(lag.correction(10 * WINDOW_NS, BASE.wrapping_add(9_000)), 0);
    }

    #[test]
    fn an_excess_beyond_the_bound_or_below_the_least_is_left_alone() {
        let mut lag = ClockLag::default();
        lag.correction(0, BASE);
        let far = (MAX_CORRECTION_NS + 1) as u32;
        assert_eq!(lag.correction(1, BASE.wrapping_add(far)), 0);
        // A new least corrects nothing.
        assert_eq!(lag.correction(2, BASE.wrapping_sub(50)), 0);
        assert_eq!(lag.correction(3, BASE), 50);
    }
}
