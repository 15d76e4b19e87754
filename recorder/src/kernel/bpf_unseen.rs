//! Wakeups the BPF programs did not see, dated by the kernel's own run-queue wait.
//!
//! On some machines the kernel does not run the programs for some wakeups (on this
//! project's platform: wakeups done from interrupts while the sandbox supervisor's
//! threads run, which ftrace's probe on the same tracepoint records). The woken thread
//! then switches in with no wakeup before it, and its runnable wait would be lost
//! (`kernel.unseen_wakeups`). But every switch record carries the wait the kernel
//! itself measured for the task arriving (its run queue's clock less
//! `sched_info.last_queued`, what schedstat adds up): a wakeup at the switch-in less
//! that wait is the one the kernel made, as schedstat dates it.
//!
//! Records are looked at in the ring buffer's order, the order the programs reserved
//! them in: a thread's switch-out, then its wakeup (the scheduler activates it only
//! once it is off its CPU), then its switch-in. A wakeup is made up only for a traced
//! thread that switched out asleep and switched in again with neither a `sched_waking`
//! nor a `sched_wakeup` of it stamped after the switch-out. The times decide, not the
//! ring order alone: a `sched_waking` is written before the waker waits for the thread
//! to leave its CPU, so it can be stamped before the switch-out yet reserved after it
//! (or, a virtual CPU stalled between reserving and stamping, the other way round);
//! the recorder's own check (`wake_audit`) sees the records in time order.

use rustc_hash::FxHashMap;
use sonda_trace::{Event, Record, SwitchOut, Time};

use super::bpf_record::BpfHit;

/// Traced threads asleep with no wakeup seen since, and the wakeups made up.
#[derive(Default)]
pub struct UnseenWakes {
    /// Per tid: when it switched out asleep. (Fx hashing: looked up per switch and
    /// wakeup; tids are not chosen by an adversary.)
    asleep: FxHashMap<u32, u64>,
    /// Per tid: the latest wakeup seen in this read while it was not asleep here, for
    /// a switch-out reserved after a wakeup stamped later (cleared at each read).
    woken: FxHashMap<u32, u64>,
    recovered: u64,
}

impl UnseenWakes {
    /// Looks at the next record in ring order; returns the wakeup to add before it
    /// when it is the switch-in of a thread whose wakeup was not seen.
    pub fn see(&mut self, hit: &BpfHit) -> Option<Record> {
        match hit.record.event {
            Event::Switch {
                cpu,
                prev,
                prev_state,
                next,
            } => {
                let time = hit.record.time.0;
                let made = self.asleep.remove(&next.0).and_then(|out| {
                    hit.wait_ns.map(|wait| {
                        self.recovered += 1;
                        Record {
                            // After it went to sleep, never at the same instant (records of
                            // equal time keep their arrival order, and the switch-out may
                            // arrive later): the run queue's clock is not the trace's.
                            time: Time(time.saturating_sub(wait).max(out + 1)),
                            event: Event::Wakeup {
                                target: cpu,
                                wakee: next,
                                new_task: false,
                            },
                        }
                    })
                });
                let asleep = SwitchOut::from_prev_state(prev_state).needs_wakeup();
                let woken_since = self.woken.remove(&prev.0).is_some_and(|w| w > time);
                if hit.prev_traced && asleep && prev.0 != 0 && !woken_since {
                    self.asleep.insert(prev.0, time);
                } else {
                    self.asleep.remove(&prev.0);
                }
                made
            }
            Event::Waking { wakee, .. } | Event::Wakeup { wakee, .. } => {
                let time = hit.record.time.0;
                match self.asleep.get(&wakee.0) {
                    // Stamped before the switch-out: the wakeup that raced with it.
                    Some(&out) if time <= out => {}
                    Some(_) => {
                        self.asleep.remove(&wakee.0);
                    }
                    None => {
                        self.woken.insert(wakee.0, time);
                    }
                }
                None
            }
            Event::TaskExit { tid } => {
                self.asleep.remove(&tid.0);
                None
            }
            _ => None,
        }
    }

    /// Ends one read's records: wakeups of threads not asleep here are forgotten.
    pub fn end_of_read(&mut self) {
        self.woken.clear();
    }

    /// Wakeups made up so far.
    pub fn recovered(&self) -> u64 {
        self.recovered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{Cpu, Tid};

    fn hit(time: u64, event: Event, wait_ns: Option<u64>, prev_traced: bool) -> BpfHit {
        BpfHit {
            record: Record {
                time: Time(time),
                event,
            },
            current: 0,
            cpu: 0,
            side: false,
            wait_ns,
            prev_traced,
        }
    }

    fn switch(time: u64, prev: u32, prev_state: u64, next: u32, wait: Option<u64>) -> BpfHit {
        let event = Event::Switch {
            cpu: Cpu(1),
            prev: Tid(prev),
            prev_state,
            next: Tid(next),
        };
        hit(time, event, wait, true)
    }

    #[test]
    fn a_switch_in_with_no_wakeup_seen_gets_one_at_the_kernels_wait() {
        let mut w = UnseenWakes::default();
        assert_eq!(w.see(&switch(100, 7, 1, 8, Some(0))), None);
        // Back 900 ns later, after 300 ns waiting by the kernel's count.
        let made = w.see(&switch(1000, 8, 0, 7, Some(300))).unwrap();
        assert_eq!(made.time, Time(700));
        assert_eq!(
            made.event,
            Event::Wakeup {
                target: Cpu(1),
                wakee: Tid(7),
                new_task: false
            }
        );
        assert_eq!(w.recovered(), 1);
        // Never before the switch-out.
        w.see(&switch(2000, 7, 2, 8, Some(0)));
        assert_eq!(
            w.see(&switch(2100, 8, 0, 7, Some(5000))).unwrap().time,
            Time(2001)
        );
    }

    #[test]
    fn a_seen_wakeup_or_a_preemption_makes_none() {
        let mut w = UnseenWakes::default();
        w.see(&switch(100, 7, 1, 8, Some(0)));
        let waking = Event::Waking {
            cpu: Cpu(0),
            waker: Tid(3),
            wakee: Tid(7),
        };
        w.see(&hit(500, waking, None, false));
        assert_eq!(w.see(&switch(1000, 8, 0, 7, Some(300))), None);
        // Preempted (runnable): its wait is the switch records' own.
        w.see(&switch(1100, 7, 0x100, 8, Some(0)));
        assert_eq!(w.see(&switch(1200, 8, 0, 7, Some(100))), None);
        // An untraced task leaving asleep is not followed.
        let mut untraced = switch(1300, 9, 1, 7, Some(0));
        untraced.prev_traced = false;
        w.see(&untraced);
        assert_eq!(w.see(&switch(1400, 7, 0, 9, Some(100))), None);
        // A waking stamped before the switch-out it raced with does not count ...
        w.see(&switch(1700, 7, 1, 8, Some(0)));
        let early = Event::Waking {
            cpu: Cpu(0),
            waker: Tid(3),
            wakee: Tid(7),
        };
        w.see(&hit(1650, early.clone(), None, false));
        assert!(w.see(&switch(1800, 8, 0, 7, Some(50))).is_some());
        // ... and one reserved before the switch-out but stamped after it does.
        w.see(&hit(1950, early, None, false));
        w.see(&switch(1900, 7, 1, 8, Some(0)));
        assert_eq!(w.see(&switch(2000, 8, 0, 7, Some(30))), None);
        assert_eq!(w.recovered(), 1);
        // Asleep, back with the wait not known: none either.
        w.see(&switch(1500, 7, 1, 8, None));
        assert_eq!(w.see(&switch(1600, 8, 0, 7, None)), None);
    }
}
