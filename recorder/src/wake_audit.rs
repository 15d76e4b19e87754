//! Counting wakeups the kernel did not report.
//!
//! A thread that switched out asleep (`S`, `D`, ...) must be woken before it runs again,
//! and the wakeup starts its runnable wait. The kernel reports `sched_waking` and
//! `sched_wakeup` in the context of the task that is running where the wakeup happens
//! (the waker, or whatever an interrupt interrupted), and some machines keep quiet for
//! some tasks (see [`crate::kernel::switch_repair`]): a wakeup done there is missing.
//! Nothing else tells when it happened, so it cannot be recovered; it is counted
//! (`kernel.unseen_wakeups`), and a reader knows that the thread's wait before that
//! switch-in is somewhere between nothing and the whole time it was off the CPU.

use rustc_hash::FxHashMap;

use sonda_trace::{Event, SwitchOut, Tid};

/// Per followed thread: whether it is asleep with no wakeup seen yet. (Fx hashing: this
/// is looked up for every switch and wakeup; tids are not chosen by an adversary.)
#[derive(Default)]
pub struct WakeAudit {
    asleep: FxHashMap<Tid, bool>,
    unseen: u64,
}

impl WakeAudit {
    /// Looks at one record written to the trace (time order); `followed` tells the
    /// threads whose wakeups the trace keeps.
    pub fn see(&mut self, event: &Event, followed: impl Fn(Tid) -> bool) {
        match *event {
            Event::Switch {
                prev,
                prev_state,
                next,
                ..
            } => {
                if self.asleep.get(&next).copied().unwrap_or(false) {
                    self.unseen += 1;
                }
                self.asleep.remove(&next);
                if prev.0 != 0 && followed(prev) {
                    let asleep = SwitchOut::from_prev_state(prev_state).needs_wakeup();
                    self.asleep.insert(prev, asleep);
                }
            }
            Event::Waking { wakee, .. } | Event::Wakeup { wakee, .. } => {
                self.asleep.remove(&wakee);
            }
            Event::TaskExit { tid } => {
                self.asleep.remove(&tid);
            }
            _ => {}
        }
    }

    /// Switch-ins of threads whose wakeup was not reported.
    pub fn unseen(&self) -> u64 {
        self.unseen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::Cpu;

    fn switch(prev: u32, prev_state: u64, next: u32) -> Event {
        Event::Switch {
            cpu: Cpu(0),
            prev: Tid(prev),
            prev_state,
            next: Tid(next),
            charge: None,
        }
    }

    #[test]
    fn counts_switch_ins_of_sleepers_nobody_woke() {
        let mut a = WakeAudit::default();
        let mut see = |e: Event| a.see(&e, |t| t.0 == 5);
        see(switch(0, 0, 5));
        see(switch(5, 0x1, 0)); // 5 sleeps
        see(Event::Wakeup {
            target: Cpu(0),
            wakee: Tid(5),
            new_task: false,
            waking: None,
        });
        see(switch(0, 0, 5)); // woken: fine
        see(switch(5, 0x2, 6)); // 5 blocks in I/O; 6 is not followed
        see(switch(6, 0x1, 5)); // no wakeup of 5 seen
        see(switch(5, 0x100, 6)); // preempted: still runnable
        see(switch(6, 0x1, 5)); // 6 was asleep, but its wakeups are not kept
        see(switch(5, 0x1, 6));
        assert_eq!(a.unseen(), 1);
    }
}
