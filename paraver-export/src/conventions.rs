//! sonda's Paraver numbering, in one place (`docs/architecture.md`, "Paraver
//! conventions"): state values, event types, their labels and colours. Where a number
//! exists in Extrae, Paraver's main producer, it means what it means there, so that
//! Paraver configurations made for Extrae traces work on sonda's.

use sonda_timeline::ThreadState;

/// Paraver state values.
pub mod state {
    /// Idle (an idle or parked kernel thread).
    pub const IDLE: u32 = 0;
    /// Running on a CPU.
    pub const RUNNING: u32 = 1;
    /// The thread does not exist (before its creation, after its end).
    pub const NOT_CREATED: u32 = 2;
    /// Blocked: interruptible sleep (`S`).
    pub const BLOCKED: u32 = 9;
    /// I/O: uninterruptible sleep (`D`).
    pub const IO: u32 = 12;
    /// Others: stopped or traced (`T`, `t`).
    pub const OTHERS: u32 = 15;
    /// Runnable, waiting for a CPU (not an Extrae state: a free number).
    pub const WAITING_CPU: u32 = 40;
    /// On a CPU, but the hypervisor ran something else on it (steal time; a free
    /// number).
    pub const STOLEN: u32 = 41;
}

/// Paraver event types.
pub mod event {
    /// Extrae's "User function": value = method id (or native function), 0 = exit.
    pub const USER_FUNCTION: u32 = 60000019;
    /// Extrae's "Java garbage collector": 1 while a collection runs, 0 after.
    pub const GC: u32 = 48000001;
    /// A method exited by an exception: value = method id.
    pub const EXCEPTION_EXIT: u32 = 49000001;
    /// Monitor contention: value = monitor class id while waiting, 0 once entered.
    pub const MONITOR: u32 = 49000002;
    /// The thread running on a CPU (the CPU view): value = the thread's Paraver row
    /// (1-based) when it starts running there, 0 when it stops.
    pub const CPU_THREAD: u32 = 49000003;
    /// C API values (`Event::User`): type = `USER_BASE + kind`.
    pub const USER_BASE: u32 = 70000000;
    /// Largest `kind` a C API value may have to get its own type.
    pub const USER_MAX_KIND: u32 = 9_999_999;
}

/// The tag of wakeup communications (waker to wakee).
pub const WAKEUP_TAG: u32 = 1;

/// The Paraver state of a timeline state.
pub fn state_value(s: ThreadState) -> u32 {
    match s {
        ThreadState::NotCreated => state::NOT_CREATED,
        ThreadState::Running => state::RUNNING,
        ThreadState::Runnable => state::WAITING_CPU,
        ThreadState::Sleeping => state::BLOCKED,
        ThreadState::Uninterruptible => state::IO,
        ThreadState::Stopped => state::OTHERS,
        ThreadState::Idle => state::IDLE,
        ThreadState::Stolen => state::STOLEN,
    }
}

/// Every state the `.pcf` declares: value, label, colour.
pub const STATES: [(u32, &str, (u8, u8, u8)); 8] = [
    (state::IDLE, "Idle", (117, 195, 255)),
    (state::RUNNING, "Running", (0, 0, 255)),
    (state::NOT_CREATED, "Not created", (255, 255, 255)),
    (state::BLOCKED, "Blocked (sleeping)", (0, 162, 0)),
    (state::IO, "I/O (uninterruptible)", (172, 174, 41)),
    (state::OTHERS, "Others (stopped)", (192, 224, 0)),
    (state::WAITING_CPU, "Waiting for a CPU", (255, 140, 0)),
    (state::STOLEN, "Stolen (hypervisor)", (230, 0, 230)),
];

/// Label of the value 0 of [`event::USER_FUNCTION`].
pub const FUNCTION_END: &str = "End";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_timeline_state_is_declared_once() {
        for s in ThreadState::ALL {
            let v = state_value(s);
            assert_eq!(STATES.iter().filter(|d| d.0 == v).count(), 1, "{s:?}");
        }
        let mut values: Vec<u32> = STATES.iter().map(|s| s.0).collect();
        values.dedup();
        assert_eq!(values.len(), STATES.len());
    }
}
