//! Leaving the busiest other programs' CPU-time charges out inside the kernel.
//!
//! The unfiltered ftrace instance records every task's `sched_stat_runtime` (see
//! [`super::ftrace_source`] for why it cannot be narrowed by `set_event_pid`), so every
//! program on the machine pays for a charge record whenever the scheduler updates its
//! CPU time: a load generator beside a traced server pays about as much as the server.
//! `scripts/bench-kernel-cost.sh` (docs/overhead.md): `perf bench sched pipe` not traced,
//! while sonda records another program, +2.28 µs an operation against +2.94 when it is
//! the traced program; a charge the event's filter discards costs +0.56 µs an operation
//! against +1.24 written.
//!
//! So the reader gives the event a filter `pid != A && pid != B ...` naming the other
//! programs' tasks charged most in the last second (the charges [`Foreign`] left out),
//! up to [`MOST`] of them. What is named must stay another program's:
//! - a task is named only once judged another program's (never a traced one);
//! - a tid stays named while `/proc/<tid>` shows the same task (its start time), checked
//!   every [`REVIEW`]: a task that ended is taken out before its tid can come back;
//! - a traced task created with a named tid (reused faster than that, after the tids
//!   wrapped) is taken out at once, when its creation is read, and counted
//!   (`kernel.charges_filter_reused`): its first charges may be missing then.
//!
//! The filter is not free for the traced program: with a task named, every charge is
//! built in a scratch buffer and the expression evaluated before it is written.
//! `perf bench sched pipe` traced with a busy ping-pong pair beside it (named), 5
//! alternated rounds: +2.97 µs/op without the filter, +3.14 with it (about 0.07 µs a
//! traced charge), while each charge of the named tasks costs about 0.27 µs less. On a
//! machine whose other programs share the CPUs with the traced one (a load generator
//! beside a server) that is a gain for the traced program too; where they do not, it
//! is a small cost. `SONDA_CHARGE_FILTER=0` turns it off.
//!
//! Nothing else changes: migrations stay unfiltered, other tasks' charges are still
//! recorded and left out by [`Foreign`], and nothing is named once it stopped judging
//! (a loss in the filtered instance).

use std::path::PathBuf;

use sonda_trace::Pid;

use super::foreign::Foreign;
use crate::procfs;

/// Most tasks named in the filter: the expression is evaluated for every charge on the
/// machine, a few ns per term.
const MOST: usize = 8;
/// Fewest charges left out in a review period for a task to be named: a busy task
/// (a task on a CPU is charged at every tick, 250 or more a second, and at every switch).
const BUSY: u32 = 200;
/// How often the named tasks are reviewed, ns.
const REVIEW: u64 = 1_000_000_000;

/// The filter of the unfiltered instance's `sched_stat_runtime`.
pub(super) struct ChargeFilter {
    /// `events/sched/sched_stat_runtime/filter` of the unfiltered instance.
    path: PathBuf,
    /// The tasks named, with their start times.
    named: Vec<(u32, u64)>,
    /// When the last review was (monotonic ns).
    reviewed: u64,
    /// Writing the filter failed once: no more tries.
    failed: bool,
    /// Every task named so far.
    pub named_ever: u64,
    /// Traced tasks created with a named tid.
    pub reused: u64,
}

impl ChargeFilter {
    pub fn new(path: PathBuf) -> ChargeFilter {
        ChargeFilter {
            path,
            named: Vec::new(),
            reviewed: 0,
            failed: false,
            named_ever: 0,
            reused: 0,
        }
    }

    /// A traced task was created (a creation record of the filtered instance).
    pub fn created(&mut self, tid: u32) {
        if let Some(i) = self.named.iter().position(|&(t, _)| t == tid) {
            self.named.swap_remove(i);
            self.reused += 1;
            self.write();
        }
    }

    /// Every [`REVIEW`]: takes out the named tasks that ended, names the busiest
    /// other programs' tasks since the last review.
    pub fn review(&mut self, now: u64, foreign: &mut Foreign) {
        if self.failed || now.saturating_sub(self.reviewed) < REVIEW {
            return;
        }
        self.reviewed = now;
        let charged = foreign.take_charged();
        let before = self.named.len();
        self.named
            .retain(|&(tid, start)| procfs::start_time(Pid(tid)) == Some(start));
        let mut changed = self.named.len() != before;
        if foreign.judging() {
            for (tid, charges) in charged {
                if self.named.len() >= MOST || charges < BUSY {
                    break;
                }
                if self.named.iter().any(|&(t, _)| t == tid) {
                    continue;
                }
                if let Some(start) = procfs::start_time(Pid(tid)) {
                    self.named.push((tid, start));
                    self.named_ever += 1;
                    changed = true;
                }
            }
        }
        if changed {
            self.write();
        }
    }

    fn write(&mut self) {
        if self.failed {
            return;
        }
        if std::fs::write(&self.path, expression(&self.named)).is_err() {
            // An old kernel without filters, or a filter it refuses: charges are left
            // out by `Foreign` only, as before.
            self.failed = true;
            let _ = std::fs::write(&self.path, "0");
        }
    }
}

/// The filter keeping every charge but those of `named` ("0" clears the filter).
fn expression(named: &[(u32, u64)]) -> String {
    if named.is_empty() {
        return "0".to_string();
    }
    let terms: Vec<String> = named
        .iter()
        .map(|(tid, _)| format!("pid != {tid}"))
        .collect();
    terms.join(" && ")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kernel::foreign::charge;
    use crate::kernel::task_filter::Listed;

    #[test]
    fn a_busy_live_task_is_named_until_a_traced_task_takes_its_tid() {
        // This test's own process plays the busy other program: /proc has it.
        let busy = std::process::id();
        let listed = Listed::default();
        listed.add(&[1]);
        let mut foreign = Foreign::new(listed);
        foreign.refresh();
        foreign.read_up_to(1_000_000);
        for t in 0..BUSY {
            assert!(foreign.skips(&charge(u64::from(t), busy)));
        }
        // A task that was charged a few times only is not named, nor one that ended
        // (no such tid in /proc).
        assert!(foreign.skips(&charge(5, busy + 1)));
        for t in 0..BUSY {
            assert!(foreign.skips(&charge(u64::from(t), 0x7fff_fff0)));
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("filter");
        let mut filter = ChargeFilter::new(path.clone());
        filter.review(REVIEW, &mut foreign);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("pid != {busy}")
        );
        assert_eq!(filter.named_ever, 1);
        // Its next charges are not counted again; it stays named while it lives.
        filter.review(2 * REVIEW, &mut foreign);
        assert_eq!(filter.named.len(), 1);
        filter.created(busy);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "0");
        assert_eq!(filter.reused, 1);
    }

    #[test]
    fn the_expression_names_every_task_or_clears_the_filter() {
        assert_eq!(expression(&[]), "0");
        assert_eq!(expression(&[(12, 1), (345, 2)]), "pid != 12 && pid != 345");
    }
}
