//! The parts a call's wall time splits into, and the names every output uses for them.
//!
//! A call's wall time is split by the state its thread was in, as the kernel saw it:
//! on a CPU ([`Parts::cpu`]), runnable but waiting for a CPU ([`Parts::runnable`]),
//! on a CPU whose time the hypervisor took ([`Parts::stolen`]), interruptible sleep
//! `S` ([`Parts::sleeping`]), uninterruptible sleep `D` ([`Parts::uninterruptible`]),
//! and any other state ([`Parts::other`]: stopped, idle, or a thread whose state the
//! trace does not know). These six add up to the wall time exactly. "Blocked" is
//! `S + D`. `cpu` is the CPU time the kernel charged (what the JVM's thread CPU clock
//! counts); `cpu + stolen` is the time the call held a virtual CPU.
//!
//! Monitor contention ([`Parts::monitor`]) and garbage-collection overlap
//! ([`Parts::gc`]) are not states: they are the time of the call during which its
//! thread waited for a contended monitor, or its JVM was collecting. They overlap the
//! five states above (a contended wait is mostly `S`, a collection stops the thread
//! in `S` or keeps it runnable) and are reported as parts of them, never added to them.

use serde::Serialize;
use sonda_timeline::ThreadState;

/// Nanoseconds of one call (or of a sum of calls) in each part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Parts {
    /// From enter to exit.
    pub wall: u64,
    /// On a CPU.
    pub cpu: u64,
    /// Runnable, waiting for a CPU.
    pub runnable: u64,
    /// On a CPU, but the hypervisor ran something else on it (steal time).
    pub stolen: u64,
    /// Interruptible sleep (`S`).
    pub sleeping: u64,
    /// Uninterruptible sleep (`D`).
    pub uninterruptible: u64,
    /// Any other state (stopped, idle, not known).
    pub other: u64,
    /// Waiting for a contended monitor (part of the states above).
    pub monitor: u64,
    /// While the JVM was collecting garbage (part of the states above).
    pub gc: u64,
}

impl Parts {
    /// Blocked time: `S + D`.
    pub fn blocked(&self) -> u64 {
        self.sleeping + self.uninterruptible
    }

    /// The sum of the six states; equals [`Parts::wall`] for every call.
    pub fn states_sum(&self) -> u64 {
        self.cpu + self.runnable + self.stolen + self.sleeping + self.uninterruptible + self.other
    }

    /// The time the call held a (virtual) CPU: charged CPU time plus steal. What a
    /// queueing model of this machine's CPUs takes as service: while the hypervisor
    /// steals, no other thread of the guest runs on that CPU.
    pub fn on_cpu(&self) -> u64 {
        self.cpu + self.stolen
    }

    /// Adds `ns` of `state`.
    pub fn add_state(&mut self, state: ThreadState, ns: u64) {
        match state {
            ThreadState::Running => self.cpu += ns,
            ThreadState::Runnable => self.runnable += ns,
            ThreadState::Stolen => self.stolen += ns,
            ThreadState::Sleeping => self.sleeping += ns,
            ThreadState::Uninterruptible => self.uninterruptible += ns,
            ThreadState::NotCreated | ThreadState::Stopped | ThreadState::Idle => self.other += ns,
        }
    }

    /// Component-wise sum.
    pub fn plus(&self, o: &Parts) -> Parts {
        Parts {
            wall: self.wall + o.wall,
            cpu: self.cpu + o.cpu,
            runnable: self.runnable + o.runnable,
            stolen: self.stolen + o.stolen,
            sleeping: self.sleeping + o.sleeping,
            uninterruptible: self.uninterruptible + o.uninterruptible,
            other: self.other + o.other,
            monitor: self.monitor + o.monitor,
            gc: self.gc + o.gc,
        }
    }

    /// Component-wise difference, floored at zero.
    pub fn minus(&self, o: &Parts) -> Parts {
        Parts {
            wall: self.wall.saturating_sub(o.wall),
            cpu: self.cpu.saturating_sub(o.cpu),
            runnable: self.runnable.saturating_sub(o.runnable),
            stolen: self.stolen.saturating_sub(o.stolen),
            sleeping: self.sleeping.saturating_sub(o.sleeping),
            uninterruptible: self.uninterruptible.saturating_sub(o.uninterruptible),
            other: self.other.saturating_sub(o.other),
            monitor: self.monitor.saturating_sub(o.monitor),
            gc: self.gc.saturating_sub(o.gc),
        }
    }

    /// The value of `c`.
    pub fn get(&self, c: Component) -> u64 {
        match c {
            Component::Wall => self.wall,
            Component::Cpu => self.cpu,
            Component::Runnable => self.runnable,
            Component::Stolen => self.stolen,
            Component::Blocked => self.blocked(),
            Component::Sleeping => self.sleeping,
            Component::Uninterruptible => self.uninterruptible,
            Component::Other => self.other,
            Component::Monitor => self.monitor,
            Component::Gc => self.gc,
        }
    }
}

/// A part of a call's time, as the outputs name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    /// Wall time (response time of the call).
    Wall,
    /// On a CPU: the CPU demand.
    Cpu,
    /// Runnable, waiting for a CPU.
    Runnable,
    /// On a CPU, taken by the hypervisor (steal time).
    Stolen,
    /// Blocked: `S + D`.
    Blocked,
    /// Interruptible sleep (`S`).
    Sleeping,
    /// Uninterruptible sleep (`D`).
    Uninterruptible,
    /// Other states.
    Other,
    /// Monitor contention (part of the states).
    Monitor,
    /// Garbage-collection overlap (part of the states).
    Gc,
}

impl Component {
    /// Every component, in output order.
    pub const ALL: [Component; 10] = [
        Component::Wall,
        Component::Cpu,
        Component::Runnable,
        Component::Stolen,
        Component::Blocked,
        Component::Sleeping,
        Component::Uninterruptible,
        Component::Other,
        Component::Monitor,
        Component::Gc,
    ];

    /// The name in JSON and CSV output.
    pub fn key(self) -> &'static str {
        match self {
            Component::Wall => "wall",
            Component::Cpu => "cpu",
            Component::Runnable => "runnable",
            Component::Stolen => "stolen",
            Component::Blocked => "blocked",
            Component::Sleeping => "sleeping",
            Component::Uninterruptible => "uninterruptible",
            Component::Other => "other",
            Component::Monitor => "monitor",
            Component::Gc => "gc",
        }
    }

    /// The label in the table for a person.
    pub fn label(self) -> &'static str {
        match self {
            Component::Wall => "wall",
            Component::Cpu => "cpu",
            Component::Runnable => "waiting for cpu",
            Component::Stolen => "stolen (hypervisor)",
            Component::Blocked => "blocked (S+D)",
            Component::Sleeping => "  sleeping (S)",
            Component::Uninterruptible => "  uninterruptible (D)",
            Component::Other => "other states",
            Component::Monitor => "monitor contention*",
            Component::Gc => "gc overlap*",
        }
    }

    /// Whether distributions are fitted to it (the parts a model uses).
    pub fn fitted(self) -> bool {
        matches!(
            self,
            Component::Wall
                | Component::Cpu
                | Component::Runnable
                | Component::Blocked
                | Component::Sleeping
                | Component::Uninterruptible
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_is_s_plus_d_and_states_add_up() {
        let mut p = Parts {
            wall: 100,
            ..Default::default()
        };
        p.add_state(ThreadState::Running, 40);
        p.add_state(ThreadState::Runnable, 10);
        p.add_state(ThreadState::Sleeping, 30);
        p.add_state(ThreadState::Uninterruptible, 15);
        p.add_state(ThreadState::Stopped, 5);
        assert_eq!(p.blocked(), 45);
        assert_eq!(p.states_sum(), p.wall);
        assert_eq!(p.get(Component::Other), 5);
        let q = p.minus(&Parts {
            cpu: 50,
            wall: 10,
            ..Default::default()
        });
        assert_eq!((q.cpu, q.wall), (0, 90));
        assert_eq!(p.plus(&q).wall, 190);
    }
}
