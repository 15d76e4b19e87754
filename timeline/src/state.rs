//! The states a thread can be in, as the kernel sees it. These are sonda's own states;
//! the Paraver exporter maps them to Paraver's numbers in one place
//! (`sonda_paraver::conventions`).

use sonda_trace::SwitchOut;

/// What a thread is doing at one moment.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum ThreadState {
    /// The thread does not exist: before it was created, or after it ended.
    NotCreated,
    /// On a CPU.
    Running,
    /// Runnable but waiting for a CPU (preempted, yielded, or woken and not yet run).
    Runnable,
    /// Interruptible sleep (`S`): waiting for a lock, a condition, a socket, a timer.
    Sleeping,
    /// Uninterruptible sleep (`D`): usually waiting for disk I/O.
    Uninterruptible,
    /// Stopped or traced (`T`, `t`).
    Stopped,
    /// An idle or parked kernel thread (`I`, `P`).
    Idle,
    /// On a CPU as the guest kernel sees it, but not running: the hypervisor ran
    /// something else on the virtual CPU (steal time). Found from the kernel's CPU-time
    /// charges (`Event::CpuTime`), which leave it out; without them it counts as
    /// [`ThreadState::Running`].
    Stolen,
}

impl ThreadState {
    /// How many states there are (the length of [`ThreadState::ALL`]).
    pub const COUNT: usize = 8;

    /// Every state, in [`ThreadState::index`] order.
    pub const ALL: [ThreadState; ThreadState::COUNT] = [
        ThreadState::NotCreated,
        ThreadState::Running,
        ThreadState::Runnable,
        ThreadState::Sleeping,
        ThreadState::Uninterruptible,
        ThreadState::Stopped,
        ThreadState::Idle,
        ThreadState::Stolen,
    ];

    /// A dense index, for per-state arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The state a thread is in after it leaves its CPU for reason `why`; `None` when
    /// it died (it will not run again).
    pub fn after_switch_out(why: SwitchOut) -> Option<ThreadState> {
        Some(match why {
            SwitchOut::Runnable => ThreadState::Runnable,
            SwitchOut::Sleeping => ThreadState::Sleeping,
            SwitchOut::Uninterruptible => ThreadState::Uninterruptible,
            SwitchOut::Stopped => ThreadState::Stopped,
            SwitchOut::Idle => ThreadState::Idle,
            SwitchOut::Dead => return None,
        })
    }

    /// Whether the thread is off its CPU and not asking for one (a sleep of any kind).
    pub fn is_asleep(self) -> bool {
        matches!(
            self,
            ThreadState::Sleeping
                | ThreadState::Uninterruptible
                | ThreadState::Stopped
                | ThreadState::Idle
        )
    }

    /// A short human label.
    pub fn label(self) -> &'static str {
        match self {
            ThreadState::NotCreated => "not created",
            ThreadState::Running => "running",
            ThreadState::Runnable => "waiting for a CPU",
            ThreadState::Sleeping => "sleeping",
            ThreadState::Uninterruptible => "uninterruptible (I/O)",
            ThreadState::Stopped => "stopped",
            ThreadState::Idle => "idle",
            ThreadState::Stolen => "stolen by the hypervisor",
        }
    }
}

/// Nanoseconds spent in each state.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct StateTotals([u64; ThreadState::COUNT]);

impl StateTotals {
    /// Nanoseconds spent in `state`.
    pub fn get(&self, state: ThreadState) -> u64 {
        self.0[state.index()]
    }

    /// Adds `ns` to `state`.
    pub fn add(&mut self, state: ThreadState, ns: u64) {
        self.0[state.index()] += ns;
    }

    /// Nanoseconds the thread existed (every state but [`ThreadState::NotCreated`]).
    pub fn alive(&self) -> u64 {
        self.0.iter().sum::<u64>() - self.get(ThreadState::NotCreated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_matches_all() {
        for (i, s) in ThreadState::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
        }
    }

    #[test]
    fn switch_out_reasons() {
        assert_eq!(
            ThreadState::after_switch_out(SwitchOut::from_prev_state(0x100)),
            Some(ThreadState::Runnable)
        );
        assert_eq!(
            ThreadState::after_switch_out(SwitchOut::from_prev_state(0x2)),
            Some(ThreadState::Uninterruptible)
        );
        assert_eq!(
            ThreadState::after_switch_out(SwitchOut::from_prev_state(0x20)),
            None
        );
    }

    #[test]
    fn totals_exclude_not_created_from_alive() {
        let mut t = StateTotals::default();
        t.add(ThreadState::NotCreated, 5);
        t.add(ThreadState::Running, 7);
        t.add(ThreadState::Sleeping, 3);
        assert_eq!(t.alive(), 10);
        assert_eq!(t.get(ThreadState::Running), 7);
    }
}
