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
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The CPU time this process has used, all threads (`CLOCK_PROCESS_CPUTIME_ID`, ns):
/// what the overhead budget weighs the probes' cost against.
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// `clock_gettime(clock)` in ns.
#[inline(always)]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the callers pass valid clock ids; a valid out-pointer to a local timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Clock ticks a second of `/proc/<pid>/stat`'s CPU times (`sysconf(_SC_CLK_TCK)`).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 {
        n as u64
    } else {
        100
    }
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

/// Runs `f` with the calling thread at a higher scheduling priority (nice -10), then
/// puts its priority back: the agent's start-up work (naming threads, looking through
/// the loaded classes) then does not queue behind a busy application's threads, which
/// is the whole delay between an attach and its first event on a loaded machine. When
/// not allowed (an unprivileged JVM cannot raise priorities), `f` runs as it is.
pub fn urgently<T>(f: impl FnOnce() -> T) -> T {
    let tid = gettid() as libc::id_t;
    // SAFETY: plain calls on the calling thread's own id (on Linux, PRIO_PROCESS with a
    // tid addresses that one thread); errno is reset first since -1 is a valid nice.
    let before = unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, tid);
        (*libc::__errno_location() == 0).then_some(n)
    };
    /// Puts the priority back when dropped, even if `f` panics.
    struct Restore(libc::id_t, Option<i32>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(n) = self.1 {
                // SAFETY: as above; lowering a priority back is always allowed.
                unsafe { libc::setpriority(libc::PRIO_PROCESS, self.0, n) };
            }
        }
    }
    // SAFETY: as above.
    let raised = before.is_some_and(|n| n > -10)
        && unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, -10) } == 0;
    let _restore = Restore(tid, before.filter(|_| raised));
    f()
}
