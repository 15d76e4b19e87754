//! The few system calls the agent makes: the clocks records are stamped with, and the
//! thread id. The only `unsafe` outside the JVMTI glue, each a plain libc call.

/// Raw time-stamp counter ticks (`rdtsc`): ~8 ns here. The collector converts ticks to
/// `CLOCK_MONOTONIC` by calibration; only used when the collector chose `Clock::Tsc`
/// (invariant TSC), so reading it on any CPU gives comparable values.
#[inline(always)]
pub fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86_64 (it is not disabled for user mode
        // on Linux unless a process asks with prctl(PR_SET_TSC), which the JVM does not).
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// `clock_gettime(CLOCK_MONOTONIC)` in ns (through the vDSO: no real system call), the
/// trace's own clock: ~18 ns here.
#[inline(always)]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid clock id and a valid out-pointer to a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's kernel id (`gettid`): a real system call (~100 ns), so callers
/// cache it per thread.
pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// The command name of the process (`/proc/self/comm`), e.g. `java`.
pub fn process_comm() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

/// Every thread of this process with its kernel name (`/proc/self/task/*/comm`).
pub fn task_comms() -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid = e.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        Some((tid, comm.trim_end_matches('\n').to_string()))
    })
    .collect()
}
