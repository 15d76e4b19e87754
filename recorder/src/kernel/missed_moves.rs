//! Migrations the ftrace instances did not record, recovered from the records around
//! them.
//!
//! The kernel moves a thread to another CPU only through `set_task_cpu`, whose
//! tracepoint (`sched_migrate_task`) the unfiltered instance records for every task.
//! Yet on this project's platform it now and then has no record of a move the kernel
//! counted (`se.nr_migrations`): in the loops of the schedstat test read through ftrace,
//! 3 runs in 29 had one thread's count one short. Each time a thread preempted on one
//! CPU was found next switching in on the other, from the sandbox supervisor's thread
//! that had been running there: the load balancer of that CPU pulled it from an
//! interrupt while that thread ran, the same moment at which the BPF programs miss
//! events (`bpf_unseen`), and no loss was counted.
//!
//! A traced thread's CPU is known from its own records: the CPU of its switches, the
//! `from` and `to` of its migrations, the target of its wakeups. A record that puts it
//! on another CPU than its records left it on, with no migration between, is a
//! migration missed, counted as `kernel.migrations_recovered` and written as a
//! `Migrate`. It is dated just before the record that revealed it, never before the
//! thread's last record on the old CPU, nor before what the source has already passed
//! on (the caller's `floor`): the move happened somewhere in between, and the kernel's
//! accounting has the thread waiting either way.
//!
//! Records are looked at in time order (the caller sorts each read's records; reads
//! follow each other in time).

use rustc_hash::FxHashMap;
use sonda_trace::{Cpu, Event, Record, Tid, Time};

/// Where each traced thread is, by its records.
#[derive(Default)]
pub struct MissedMoves {
    /// Per tid: the CPU its latest record put it on, and that record's time.
    on: FxHashMap<u32, (Cpu, u64)>,
    recovered: u64,
}

impl MissedMoves {
    /// Looks at `record` (in time order); `traced` tells the threads to follow. A
    /// missed migration it reveals is appended to `made`, dated no earlier than
    /// `floor`.
    pub fn see(
        &mut self,
        record: &Record,
        traced: impl Fn(Tid) -> bool,
        floor: u64,
        made: &mut Vec<Record>,
    ) {
        let time = record.time.0;
        match record.event {
            Event::Switch {
                cpu, prev, next, ..
            } => {
                for tid in [prev, next] {
                    if tid.0 != 0 && traced(tid) {
                        self.put(tid, cpu, time, floor, made);
                    }
                }
            }
            Event::Migrate { tid, from, to } if traced(tid) => {
                self.put(tid, from, time, floor, made);
                self.on.insert(tid.0, (to, time));
            }
            Event::Wakeup { target, wakee, .. } if traced(wakee) => {
                self.put(wakee, target, time, floor, made);
            }
            Event::TaskExit { tid } => {
                self.on.remove(&tid.0);
            }
            _ => {}
        }
    }

    /// `tid` is on `cpu` at `time`: a migration is made up if its records left it on
    /// another CPU.
    fn put(&mut self, tid: Tid, cpu: Cpu, time: u64, floor: u64, made: &mut Vec<Record>) {
        let Some((was, seen)) = self.on.insert(tid.0, (cpu, time)) else {
            return;
        };
        if was == cpu {
            return;
        }
        self.recovered += 1;
        let at = time.saturating_sub(1).max(seen + 1).max(floor).min(time);
        made.push(migration(at, tid, was, cpu));
    }

    /// Migrations made up so far.
    pub fn recovered(&self) -> u64 {
        self.recovered
    }
}

/// A migration made up at `at` (here and in `bpf_unseen`).
pub(super) fn migration(at: u64, tid: Tid, from: Cpu, to: Cpu) -> Record {
    Record {
        time: Time(at),
        event: Event::Migrate { tid, from, to },
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_records::{migrate, switch, wakeup};
    use super::*;

    fn run(records: &[Record], floor: u64) -> (Vec<Record>, u64) {
        let mut m = MissedMoves::default();
        let mut made = Vec::new();
        for r in records {
            m.see(r, |t| t.0 != 99, floor, &mut made);
        }
        (made, m.recovered())
    }

    /// The case the loops found: preempted on CPU 0, pulled to CPU 1 unrecorded, found
    /// switching in there from another task.
    #[test]
    fn a_thread_switching_in_on_another_cpu_with_no_migration_was_moved() {
        let records = [
            switch(100, 0, 7, 0, 8),
            switch(200, 0, 8, 0, 7),
            switch(900, 1, 99, 0, 7),
        ];
        let (made, n) = run(&records, 0);
        assert_eq!(n, 1);
        assert_eq!(made, vec![migrate(899, 7, 0, 1)]);
        // Never before what was passed on already.
        let (made, _) = run(&records, 950);
        assert_eq!(made[0].time, Time(900));
    }

    #[test]
    fn recorded_migrations_wakeups_and_untraced_threads_make_nothing_up() {
        let records = [
            switch(100, 0, 7, 0, 99),
            migrate(150, 7, 0, 1),
            switch(200, 1, 99, 0, 7),
            switch(300, 1, 7, 1, 99),
            // Asleep, woken onto CPU 0 by a wakeup whose migration was recorded.
            migrate(400, 7, 1, 0),
            wakeup(401, 7, 0),
            switch(500, 0, 99, 0, 7),
            // 99 is not traced: its moves are not followed.
            switch(600, 1, 5, 0, 99),
        ];
        assert_eq!(run(&records, 0), (vec![], 0));
    }

    #[test]
    fn a_wakeup_onto_another_cpu_with_no_migration_reveals_one_just_before_it() {
        let records = [
            switch(100, 1, 7, 1, 99),
            wakeup(400, 7, 0),
            switch(500, 0, 99, 0, 7),
        ];
        let (made, n) = run(&records, 0);
        assert_eq!((made, n), (vec![migrate(399, 7, 1, 0)], 1));
    }
}
