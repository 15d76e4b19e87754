//! The trace's clock: `CLOCK_MONOTONIC` nanoseconds, the clock of perf samples (with
//! `use_clockid`), of `System.nanoTime` and of agents stamping with
//! [`sonda_shm::Clock::Monotonic`].

use sonda_trace::Time;

/// Now, on `CLOCK_MONOTONIC`.
pub fn monotonic() -> Time {
    Time(crate::sys::monotonic_ns())
}

/// The CPU's time-stamp counter, as agents stamping with [`sonda_shm::Clock::Tsc`] read
/// it.
#[cfg(target_arch = "x86_64")]
pub(crate) fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` exists on every x86_64 CPU and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// No TSC elsewhere: agents are told to use the monotonic clock (see
/// [`crate::tsc::tsc_is_usable`]), so this is never used for conversion.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn rdtsc() -> u64 {
    monotonic().0
}
