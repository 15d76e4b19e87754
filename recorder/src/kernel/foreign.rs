//! Leaving out other programs' scheduler records as they are released.
//!
//! The unfiltered instance (see [`super::ftrace_source`]) records the charges and
//! migrations of every task on the machine, because the kernel may write those of a
//! traced task from any task's context. Most are other programs' (a load generator
//! beside a server: a quarter of all the records read under Tomcat with `wrk`), and
//! each was ordered, merged and followed only for the follower to drop it. They are
//! still decoded and held in their CPU's queue (a charge dates a recovered switch, see
//! [`super::cpu_queue`]), but not released.
//!
//! The filtered instance says which tasks are traced: the kernel lists the tasks the
//! recorder gave it (`set_event_pid`) and every task they create, and it records the
//! creation (`task_newtask`, written by the listed creator) before the new task can
//! run. So once the filtered buffers have been read up to a time `bound`, every traced
//! task that a record stamped before `bound` can name is known: given, or created in a
//! record already read. A charge or migration of any other task stamped before `bound`
//! is another program's and is left out; later ones cannot be judged yet and are kept.
//! A tid reused by a new traced task is known from its creation record, which comes
//! first.
//!
//! The filtered instance has other programs' records too, which the same knowledge
//! leaves out: the kernel keeps a wakeup when the waker is traced (a server's thread
//! waking its client, a load generator on the same machine), and the queue recovers
//! switches between two untraced tasks. Those still tell the queue which task runs.
//!
//! A loss in the filtered instance may have taken a creation record with it: from the
//! first one on, nothing is left out here (the follower looks unknown tasks up in
//! `/proc` after a loss).
//!
//! Known tasks are never forgotten: a tid reused by another program after a traced
//! task ended keeps its records, which the follower drops as before. With the task
//! filter off nothing is left out here.
//!
//! The judgement rests on one assumption: a record stamped before `now - SLACK` is in
//! the buffer when it is read (see [`super::ftrace_source`]). Were a creation record
//! committed later than that, the new task's first records would have been left out as
//! another program's. That is checked, not assumed: the latest record left out for
//! each tid is remembered, and a creation read for a tid left out at or after its
//! creation is counted as a misjudgement (`kernel.foreign_misjudged`, which the
//! recorder reports and the end-to-end tests require to be zero). A tid's earlier
//! holder ended before the creation that reuses it, so its records are stamped before
//! that and never count.
//!
//! Both facts live in one [`TidTable`] slot per tid, because the judgement runs for
//! every record read (a quarter of a million a second under Tomcat): one indexed load
//! instead of a set lookup and a map update, and nothing to prune.

use sonda_trace::{Event, Record};

use super::task_filter::Listed;

/// A [`TidTable`] slot's value for a traced task; any other value is the time of the
/// latest record left out naming the tid (0: none).
const TRACED: u64 = u64::MAX;

/// Tids per page of a [`TidTable`] (32 KiB of slots).
const PAGE: usize = 4096;

/// One `u64` per tid, in pages allocated as tids are first named, so that its memory
/// follows the tids in use (Linux gives tids up to 2^22, which flat would be 32 MiB).
#[derive(Default)]
struct TidTable {
    pages: Vec<Option<Box<[u64]>>>,
}

impl TidTable {
    fn get(&self, tid: u32) -> u64 {
        let (page, slot) = (tid as usize / PAGE, tid as usize % PAGE);
        match self.pages.get(page) {
            Some(Some(p)) => p[slot],
            _ => 0,
        }
    }

    fn slot(&mut self, tid: u32) -> &mut u64 {
        let (page, slot) = (tid as usize / PAGE, tid as usize % PAGE);
        if page >= self.pages.len() {
            self.pages.resize_with(page + 1, || None);
        }
        &mut self.pages[page].get_or_insert_with(|| vec![0; PAGE].into_boxed_slice())[slot]
    }
}

/// The traced tasks as the reader knows them, and how far that knowledge goes.
pub(super) struct Foreign {
    listed: Listed,
    /// The generation of `listed` marked in `tids`.
    generation: u32,
    /// Per tid: [`TRACED`] for every task given to the filter or created by a traced
    /// task so far, else the time of the latest record left out naming it.
    tids: TidTable,
    /// Records stamped before this are left out when they are another program's.
    bound: u64,
    /// The filtered instance lost records: nothing is left out any more.
    given_up: bool,
    /// Creations read for tasks whose records had been left out after their creation.
    misjudged: u64,
}

impl Foreign {
    pub fn new(listed: Listed) -> Foreign {
        Foreign {
            listed,
            generation: 0,
            tids: TidTable::default(),
            bound: 0,
            given_up: false,
            misjudged: 0,
        }
    }

    /// Takes in the tasks given to the filter since the last call.
    pub fn refresh(&mut self) {
        let (generation, tids) = self.listed.since(self.generation);
        self.generation = generation;
        for tid in tids {
            *self.tids.slot(tid) = TRACED;
        }
    }

    /// A record of the filtered instance (read before `bound` is raised).
    pub fn filtered(&mut self, record: &Record) {
        if let Event::NewTask { child, .. } = record.event {
            let slot = self.tids.slot(child.0);
            if *slot != TRACED && *slot >= record.time.0 {
                self.misjudged += 1;
            }
            *slot = TRACED;
        }
    }

    /// Traced tasks some of whose records were left out as another program's: their
    /// creation was read after those records were judged (see the module
    /// documentation). Zero unless the kernel committed a creation record more than
    /// `SLACK` after stamping it.
    pub fn misjudged(&self) -> u64 {
        self.misjudged
    }

    /// The filtered instance lost records (or some did not decode), perhaps a task's
    /// creation: from now on nothing is left out, the follower judges everything.
    pub fn give_up(&mut self) {
        self.given_up = true;
    }

    /// The filtered instance has been read up to `bound` on every CPU.
    pub fn read_up_to(&mut self, bound: u64) {
        self.bound = bound;
    }

    /// Whether `record` is another program's: a CPU-time charge or migration of
    /// another program's task, a wakeup of one (by a traced task: the kernel keeps it),
    /// a switch between two of them (recovered; the kernel reports none).
    pub fn skips(&mut self, record: &Record) -> bool {
        if !self.judging() || record.time.0 >= self.bound {
            return false;
        }
        let other = |tid: sonda_trace::Tid| self.tids.get(tid.0) != TRACED;
        let (first, second) = match record.event {
            Event::CpuTime { tid, .. } | Event::Migrate { tid, .. } if other(tid) => (tid, None),
            // Kept by the kernel because the waker is traced; the follower keeps the
            // wakeups of followed threads only.
            Event::Waking { wakee, .. } | Event::Wakeup { wakee, .. } if other(wakee) => {
                (wakee, None)
            }
            // Recovered between two tasks the filter does not list.
            Event::Switch { prev, next, .. } if other(prev) && other(next) => (prev, Some(next)),
            _ => return false,
        };
        let time = record.time.0;
        for tid in std::iter::once(first).chain(second) {
            let latest = self.tids.slot(tid.0);
            *latest = (*latest).max(time);
        }
        true
    }

    /// Whether `tid` is a traced task as far as the filtered instance has told (every
    /// tid while records are not judged).
    pub fn traced(&self, tid: sonda_trace::Tid) -> bool {
        !self.judging() || self.tids.get(tid.0) == TRACED
    }

    /// Whether records are being judged at all (the filter lists tasks, nothing lost).
    fn judging(&self) -> bool {
        self.generation != 0 && !self.given_up
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::task_filter::Listed;
    use sonda_trace::ChargedBy;
    use sonda_trace::{Cpu, Pid, Tid, Time};

    fn charge(time: u64, tid: u32) -> Record {
        Record {
            time: Time(time),
            event: Event::CpuTime {
                tid: Tid(tid),
                ns: 1000,
                by: ChargedBy::Itself,
            },
        }
    }

    #[test]
    fn nothing_is_left_out_before_the_filter_lists_a_task() {
        let listed = Listed::default();
        let mut f = Foreign::new(listed.clone());
        f.refresh();
        f.read_up_to(1_000);
        assert!(!f.skips(&charge(10, 7)));
        listed.add(&[5]);
        f.refresh();
        assert!(f.skips(&charge(10, 7)));
        assert!(!f.skips(&charge(10, 5)));
    }

    /// Task 5 (given to the filter) creates `child` at `time`.
    fn newtask(time: u64, child: u32) -> Record {
        Record {
            time: Time(time),
            event: Event::NewTask {
                parent: Tid(5),
                child: Tid(child),
                pid: Pid(5),
                comm: "worker".into(),
            },
        }
    }

    #[test]
    fn created_tasks_are_traced_and_records_past_the_bound_wait() {
        let listed = Listed::default();
        listed.add(&[5]);
        let mut f = Foreign::new(listed);
        f.refresh();
        f.filtered(&newtask(50, 6));
        f.read_up_to(100);
        assert!(!f.skips(&charge(60, 6)));
        assert!(f.skips(&charge(60, 9)));
        let migrate = |time, tid| Record {
            time: Time(time),
            event: Event::Migrate {
                tid: Tid(tid),
                from: Cpu(0),
                to: Cpu(1),
            },
        };
        assert!(f.skips(&migrate(99, 9)));
        let waking = |time, waker, wakee| Record {
            time: Time(time),
            event: Event::Waking {
                cpu: Cpu(0),
                waker: Tid(waker),
                wakee: Tid(wakee),
            },
        };
        assert!(f.skips(&waking(70, 5, 9)));
        assert!(!f.skips(&waking(70, 9, 6)));
        let switch = |prev, next| Record {
            time: Time(80),
            event: Event::Switch {
                cpu: Cpu(0),
                prev: Tid(prev),
                prev_state: 0,
                next: Tid(next),
                charge: None,
            },
        };
        assert!(f.skips(&switch(9, 10)));
        assert!(!f.skips(&switch(9, 6)) && !f.skips(&switch(5, 9)));
        // Not yet known to be another program's: its creation may not be read yet.
        assert!(!f.skips(&charge(100, 9)));
        assert!(!f.skips(&migrate(150, 9)));
        // After a loss, nothing.
        f.give_up();
        assert!(!f.skips(&charge(60, 9)));
    }

    #[test]
    fn a_creation_read_after_its_tasks_records_were_left_out_is_counted() {
        let listed = Listed::default();
        listed.add(&[5]);
        let mut f = Foreign::new(listed);
        f.refresh();
        f.read_up_to(100);
        // 6's charge at 60 is left out; its creation, stamped at 50, comes late.
        assert!(f.skips(&charge(60, 6)));
        // 7 was another program's task when its charge was left out, and its tid was
        // given to a new traced task later: no misjudgement.
        assert!(f.skips(&charge(40, 7)));
        f.filtered(&newtask(50, 6));
        f.filtered(&newtask(70, 7));
        assert_eq!(f.misjudged(), 1);
        assert!(!f.skips(&charge(80, 6)));
    }

    #[test]
    fn the_tid_table_holds_tids_across_pages() {
        let mut t = TidTable::default();
        assert_eq!(t.get(4_194_303), 0);
        *t.slot(4_194_303) = 9;
        *t.slot(1) = TRACED;
        assert_eq!((t.get(4_194_303), t.get(1), t.get(2)), (9, TRACED, 0));
        // Only the pages of the tids named are allocated.
        assert_eq!(t.pages.iter().flatten().count(), 2);
    }
}
