//! The clock records are stamped with: the one the collector chose in the shared file's
//! header (`Clock::Tsc` when the TSC is invariant, else `Clock::Monotonic`).

use std::sync::atomic::{AtomicBool, Ordering};

use sonda_shm::Clock;

use crate::os;

static USE_TSC: AtomicBool = AtomicBool::new(false);

/// Sets the clock for [`now`] (once, when the shared file is mapped).
pub fn select(clock: Clock) {
    USE_TSC.store(clock == Clock::Tsc, Ordering::Relaxed);
}

/// Whether the selected clock is the TSC.
pub fn is_tsc() -> bool {
    USE_TSC.load(Ordering::Relaxed)
}

/// The time now on the selected clock (a predictable branch on a cached flag).
#[inline(always)]
pub fn now() -> u64 {
    if is_tsc() {
        os::tsc()
    } else {
        os::monotonic_ns()
    }
}
