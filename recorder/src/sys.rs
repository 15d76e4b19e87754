//! The engine's raw system calls, each behind a small safe function: the only `unsafe`
//! of the engine outside the perf event setup (`kernel::perf_ring`, which uses the
//! perf-event crates' own calls). Everything here is a thin call with its error
//! turned into an [`io::Error`] or a plain value, so that the modules using them read
//! as ordinary Rust and their memory-safety arguments sit in one place.
//!
//! The functions marked *async-signal-safe* may be called from a signal handler: they
//! make one system call and touch no lock or allocator.

use std::ffi::CStr;
use std::io;

pub(crate) use libc::c_int;

/// Now on `CLOCK_MONOTONIC`, in nanoseconds.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on
    // Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time this process used so far (user + system), in nanoseconds.
pub(crate) fn own_cpu_ns() -> u64 {
    // SAFETY: rusage is plain integers and timevals: all-zero is a valid value for the
    // kernel to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; RUSAGE_SELF always exists.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Whether process `pid` exists (also when it is someone else's, which we may not
/// signal).
pub(crate) fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill takes no pointers; signal 0 sends nothing, it only checks that the
    // process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Sends signal `sig` to process `pid`. Async-signal-safe.
///
/// The caller makes sure that `pid` is the process it means (e.g. its own unreaped
/// child, whose pid cannot be reused).
pub(crate) fn send_signal(pid: u32, sig: c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: kill takes no pointers and has no memory effects in this process.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether process `pid` is in our process group. Async-signal-safe.
pub(crate) fn in_our_process_group(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: getpgid and getpgrp take no pointers; getpgid fails with -1 for a
    // process that does not exist, which is never our group.
    unsafe { libc::getpgid(pid) == libc::getpgrp() }
}

/// The calling thread's kernel id.
pub(crate) fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// Sets the calling thread's nice value (only that thread's: on Linux PRIO_PROCESS
/// with a thread id is per thread).
pub(crate) fn set_thread_nice(nice: c_int) -> io::Result<()> {
    let tid = gettid();
    // SAFETY: setpriority takes no pointers; it only changes the scheduling of the
    // thread named.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes the calling thread a real-time (`SCHED_FIFO`) thread of `priority` (only
/// that thread: a tid names one thread for sched_setscheduler).
pub(crate) fn set_thread_fifo(priority: c_int) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param that outlives the call; the call changes
    // only the scheduling of the thread named.
    if unsafe { libc::sched_setscheduler(gettid() as libc::pid_t, libc::SCHED_FIFO, &param) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's nice value.
pub(crate) fn thread_nice() -> io::Result<c_int> {
    let tid = gettid();
    // SAFETY: getpriority takes no pointers. It returns -1 both for nice -1 and for an
    // error, so errno (this thread's) is cleared before and read after.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        if nice == -1 && *libc::__errno_location() != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(nice)
    }
}

/// `mount -t tracefs nodev <target>`.
pub(crate) fn mount_tracefs(target: &CStr) -> io::Result<()> {
    // SAFETY: every argument is a valid NUL-terminated string that outlives the call;
    // a null data pointer is allowed for tracefs.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What a signal handler installed with [`catch_signals`] runs. It runs in signal
/// context: it may only use atomics and async-signal-safe calls.
pub(crate) trait SignalHandler {
    /// Signal `sig` arrived; `code` is its `si_code` (`SI_USER` for a `kill`,
    /// `SI_KERNEL` for one the kernel sent, e.g. on a terminal's behalf).
    fn on_signal(sig: c_int, code: c_int);
}

/// The handler the kernel calls: reads `si_code` and hands over to `H`.
extern "C" fn trampoline<H: SignalHandler>(
    sig: c_int,
    info: *mut libc::siginfo_t,
    _ctx: *mut libc::c_void,
) {
    let code = if info.is_null() {
        libc::SI_USER
    } else {
        // SAFETY: installed with SA_SIGINFO, so the kernel passes a valid siginfo_t
        // that lives for the duration of the handler (checked non-null above).
        unsafe { (*info).si_code }
    };
    H::on_signal(sig, code);
}

/// Makes `H` the handler of each of `signals` (restarting interrupted system calls,
/// no signal blocked while it runs).
pub(crate) fn catch_signals<H: SignalHandler>(signals: &[c_int]) -> io::Result<()> {
    for &sig in signals {
        // SAFETY: an all-zero sigaction is valid; the fields set below make it a
        // SA_SIGINFO handler with an empty mask, and `trampoline::<H>` has the
        // signature the kernel calls a SA_SIGINFO handler with. The old action is not
        // asked for (null).
        let rc = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = trampoline::<H> as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering};

    #[test]
    fn thin_calls_answer_sensibly() {
        let a = monotonic_ns();
        assert!(monotonic_ns() >= a);
        assert!(own_cpu_ns() > 0);
        assert!(process_exists(std::process::id()));
        assert!(process_exists(1), "init exists, even when it is not ours");
        assert!(!process_exists(u32::MAX));
        assert!(in_our_process_group(std::process::id()));
        assert_eq!(
            std::fs::read_to_string("/proc/thread-self/stat")
                .unwrap()
                .split(' ')
                .next(),
            Some(gettid().to_string().as_str())
        );
    }

    static SEEN: AtomicI32 = AtomicI32::new(0);
    static CODE: AtomicI32 = AtomicI32::new(0);

    struct Record;
    impl SignalHandler for Record {
        fn on_signal(sig: c_int, code: c_int) {
            CODE.store(code, Ordering::SeqCst);
            SEEN.store(sig, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_caught_signal_reaches_the_handler_with_its_code() {
        // SIGWINCH: ignored by default, so a stray one cannot harm the test process.
        catch_signals::<Record>(&[libc::SIGWINCH]).unwrap();
        send_signal(std::process::id(), libc::SIGWINCH).unwrap();
        let waited = std::time::Instant::now();
        while SEEN.load(Ordering::SeqCst) == 0 && waited.elapsed().as_secs() < 5 {
            std::thread::yield_now();
        }
        assert_eq!(SEEN.load(Ordering::SeqCst), libc::SIGWINCH);
        assert_eq!(CODE.load(Ordering::SeqCst), libc::SI_USER);
    }
}
