//! Thread states from `/proc` samples, the fallback when kernel tracepoints cannot be
//! opened. A sample gives a thread's one-letter state at one instant, the CPU it last
//! ran on, and its cumulative time on a CPU (`run_ns`) and runnable-waiting (`wait_ns`)
//! from `schedstat`.
//!
//! The approximation: between two samples, the thread ran exactly the `run_ns`
//! difference and waited for a CPU exactly the `wait_ns` difference (the kernel's own
//! accounting, so per-thread totals agree with `schedstat`); the rest of the span it
//! was off its CPU, in the sleep state one of the two samples shows (else `Sleeping`).
//! Where inside the span each piece lies is unknown. The order chosen follows the
//! samples: a thread seen runnable (`R`) at the later sample slept first, then waited,
//! then ran; a thread seen asleep at the later sample waited, ran, then fell asleep.
//! Before a thread's first sample, and after its last one, the sampled state holds
//! (`R` counts as Running, since `/proc` does not separate running from runnable).
//!
//! The sampler writes a thread's sample only when it changed. So between a thread's
//! sample and its next one, every sampling round but the last saw it unchanged: the
//! earlier state holds until the round before the next sample, and only the span since
//! that round is split as above.

use sonda_trace::{Cpu, SwitchOut, Time};

use crate::state::ThreadState;

/// One `/proc` sample of a thread.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Sample {
    pub time: Time,
    pub state: SwitchOut,
    pub cpu: Cpu,
    pub run_ns: u64,
    pub wait_ns: u64,
}

impl Sample {
    /// The state to show from this sample on, until the next one says better.
    pub fn presumed(&self) -> Option<ThreadState> {
        match self.state {
            SwitchOut::Runnable => Some(ThreadState::Running),
            other => ThreadState::after_switch_out(other),
        }
    }

    /// The sleep state this sample shows, if it shows one.
    fn asleep(&self) -> Option<ThreadState> {
        self.presumed().filter(|s| s.is_asleep())
    }
}

/// Splits the span `[from, now.time)` that follows sample `prev` into at most three
/// pieces (state, length in ns), in time order, lengths summing to the span. `from` may
/// be later than `prev.time` when the span's start was already written out.
pub(crate) fn split(from: Time, prev: &Sample, now: &Sample) -> [(ThreadState, u64); 3] {
    let span = now.time.since(from);
    let run = now.run_ns.saturating_sub(prev.run_ns).min(span);
    let wait = now.wait_ns.saturating_sub(prev.wait_ns).min(span - run);
    let off = span - run - wait;
    let ran = (ThreadState::Running, run);
    let waited = (ThreadState::Runnable, wait);
    match now.asleep() {
        // Asleep at the end: woke, waited, ran, then fell asleep.
        Some(end_state) => [waited, ran, (end_state, off)],
        // Runnable at the end: slept (as the earlier sample showed), was woken, waited, ran.
        None => [
            (prev.asleep().unwrap_or(ThreadState::Sleeping), off),
            waited,
            ran,
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(time: u64, letter: u8, run_ns: u64, wait_ns: u64) -> Sample {
        Sample {
            time: Time(time),
            state: SwitchOut::from_proc_letter(letter).unwrap(),
            cpu: Cpu(0),
            run_ns,
            wait_ns,
        }
    }

    #[test]
    fn runnable_at_the_end_sleeps_first() {
        let a = sample(1000, b'S', 50, 10);
        let b = sample(2000, b'R', 350, 110);
        assert_eq!(
            split(Time(1000), &a, &b),
            [
                (ThreadState::Sleeping, 600),
                (ThreadState::Runnable, 100),
                (ThreadState::Running, 300)
            ]
        );
    }

    #[test]
    fn asleep_at_the_end_sleeps_last_in_its_own_state() {
        let a = sample(1000, b'R', 0, 0);
        let b = sample(2000, b'D', 200, 50);
        assert_eq!(
            split(Time(1000), &a, &b),
            [
                (ThreadState::Runnable, 50),
                (ThreadState::Running, 200),
                (ThreadState::Uninterruptible, 750)
            ]
        );
    }

    #[test]
    fn counters_larger_than_the_span_are_clamped() {
        // The sampler is late: the counters grew more than the span between samples,
        // or the span was shortened because its start was already written.
        let a = sample(1000, b'R', 0, 0);
        let b = sample(2000, b'R', 900, 900);
        let pieces = split(Time(1500), &a, &b);
        assert_eq!(
            pieces,
            [
                (ThreadState::Sleeping, 0),
                (ThreadState::Runnable, 0),
                (ThreadState::Running, 500)
            ]
        );
        assert_eq!(pieces.iter().map(|p| p.1).sum::<u64>(), 500);
    }

    #[test]
    fn presumed_state_counts_r_as_running() {
        assert_eq!(sample(0, b'R', 0, 0).presumed(), Some(ThreadState::Running));
        assert_eq!(sample(0, b'Z', 0, 0).presumed(), None);
        assert_eq!(sample(0, b'I', 0, 0).presumed(), Some(ThreadState::Idle));
    }
}
