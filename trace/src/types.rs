//! Small value types shared by every part of sonda, so that a thread id is never
//! mistaken for a process id or a CPU number for an index.

use std::fmt;

/// A point in time: nanoseconds of `CLOCK_MONOTONIC`, the clock of `System.nanoTime`
/// and of perf_event_open with `use_clockid`. Every record of a trace is on this clock.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Time(pub u64);

impl Time {
    /// Nanoseconds elapsed from `earlier` to `self`, 0 if `earlier` is later.
    pub fn since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// A kernel thread id (the `pid` of a task in kernel terms, what `gettid()` returns).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Tid(pub u32);

/// A process id (the kernel's thread group id).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Pid(pub u32);

/// A CPU number as the kernel counts them, from 0.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Cpu(pub u16);

impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Cpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a thread left its CPU, decoded from `sched_switch`'s `prev_state`.
///
/// The tracepoint reports an index, not the raw task state: 0 means the task was still
/// runnable when it switched (it yielded), bit 0x100 means it was preempted (also still
/// runnable), and otherwise one bit names the state it sleeps in (see `docs/kernel.md`
/// of the shared notes and the `print fmt` of the tracepoint's format file).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SwitchOut {
    /// Still runnable (preempted or yielded): it now waits for a CPU.
    Runnable,
    /// Interruptible sleep (`S`): waits, sleeps, parks, blocks on a lock or a socket.
    Sleeping,
    /// Uninterruptible sleep (`D`): usually disk I/O.
    Uninterruptible,
    /// Stopped or traced (`T`, `t`).
    Stopped,
    /// Exiting or dead (`X`, `Z`): the thread will not run again.
    Dead,
    /// Parked or idle kernel thread (`P`, `I`).
    Idle,
}

impl SwitchOut {
    /// Decodes the `prev_state` field of `sched_switch`.
    pub fn from_prev_state(prev_state: u64) -> SwitchOut {
        const PREEMPTED: u64 = 0x100;
        if prev_state == 0 || prev_state & PREEMPTED != 0 {
            return SwitchOut::Runnable;
        }
        // The lowest set bit decides: the kernel reports exactly one bit.
        match prev_state & prev_state.wrapping_neg() {
            0x1 => SwitchOut::Sleeping,
            0x2 => SwitchOut::Uninterruptible,
            0x4 | 0x8 => SwitchOut::Stopped,
            0x10 | 0x20 => SwitchOut::Dead,
            _ => SwitchOut::Idle,
        }
    }

    /// Whether a task that left its CPU so must be woken before it runs again (it went
    /// to sleep, stopped or parked, rather than being preempted or ending): the switch
    /// back in should follow a wakeup.
    pub fn needs_wakeup(self) -> bool {
        !matches!(self, SwitchOut::Runnable | SwitchOut::Dead)
    }

    /// Decodes the one-letter state of `/proc/<pid>/task/<tid>/stat` (field 3).
    pub fn from_proc_letter(letter: u8) -> Option<SwitchOut> {
        Some(match letter {
            b'R' => SwitchOut::Runnable,
            b'S' => SwitchOut::Sleeping,
            b'D' => SwitchOut::Uninterruptible,
            b'T' | b't' => SwitchOut::Stopped,
            b'X' | b'Z' | b'x' => SwitchOut::Dead,
            b'P' | b'I' | b'W' | b'K' => SwitchOut::Idle,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prev_state_decoding() {
        assert_eq!(SwitchOut::from_prev_state(0), SwitchOut::Runnable);
        assert_eq!(SwitchOut::from_prev_state(0x100), SwitchOut::Runnable);
        assert_eq!(SwitchOut::from_prev_state(0x1), SwitchOut::Sleeping);
        assert_eq!(SwitchOut::from_prev_state(0x2), SwitchOut::Uninterruptible);
        assert_eq!(SwitchOut::from_prev_state(0x10), SwitchOut::Dead);
        assert_eq!(SwitchOut::from_prev_state(0x80), SwitchOut::Idle);
    }

    #[test]
    fn asleep_is_everything_but_preempted_or_ended() {
        let woken = |s: u64| SwitchOut::from_prev_state(s).needs_wakeup();
        assert!(woken(0x1) && woken(0x2) && woken(0x4) && woken(0x80));
        assert!(!woken(0) && !woken(0x100) && !woken(0x10));
    }
}
