//! Spans the JVM reports through the agent: garbage collections (one at a time per
//! process, JVMTI GarbageCollectionStart/Finish) and contended monitor waits (one at a
//! time per thread, MonitorContendedEnter/Entered). Both pair a begin with an end and
//! repair what does not pair: an end without a begin is ignored, a second begin closes
//! the first one, and spans still open at the end are closed there.

use sonda_trace::{Pid, Tid, Time};

/// The open garbage collections, at most one per process.
#[derive(Default, Debug)]
pub(crate) struct GcTracker {
    open: Vec<(Pid, Time, Tid)>,
}

impl GcTracker {
    /// A collection of `pid` began on thread `tid`. Returns false when one is already
    /// open (its end was lost or the JVM reported twice): the open one is kept.
    pub fn start(&mut self, pid: Pid, tid: Tid, at: Time) -> bool {
        if self.open.iter().any(|g| g.0 == pid) {
            return false;
        }
        self.open.push((pid, at, tid));
        true
    }

    /// The collection of `pid` ended: when it began and on which thread.
    pub fn end(&mut self, pid: Pid) -> Option<(Time, Tid)> {
        let pos = self.open.iter().position(|g| g.0 == pid)?;
        let (_, begin, tid) = self.open.swap_remove(pos);
        Some((begin, tid))
    }

    /// Every collection still open: (process, when it began, the thread that began it).
    pub fn open(&self) -> impl Iterator<Item = (Pid, Time, Tid)> + '_ {
        self.open.iter().copied()
    }

    /// Every collection still open, removed.
    pub fn drain(&mut self) -> impl Iterator<Item = (Pid, Time, Tid)> + '_ {
        self.open.drain(..)
    }
}

/// A thread's wait for a contended monitor.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct MonitorWaitOpen {
    pub class: u32,
    pub begin: Time,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_collection_per_process() {
        let mut g = GcTracker::default();
        assert!(g.start(Pid(1), Tid(10), Time(5)));
        assert!(!g.start(Pid(1), Tid(10), Time(6)));
        assert!(g.start(Pid(2), Tid(20), Time(7)));
        assert_eq!(g.end(Pid(1)), Some((Time(5), Tid(10))));
        assert_eq!(g.end(Pid(1)), None);
        assert_eq!(
            g.drain().collect::<Vec<_>>(),
            vec![(Pid(2), Time(7), Tid(20))]
        );
    }
}
