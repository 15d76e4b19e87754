//! A switch dated by the scheduler's clock when that clock had stood still (BPF source).
//!
//! The kernel accounts a switch at its run queue's clock: schedstat's wait of the thread
//! leaving, when preempted, starts there (`sched_info.last_queued`), that of the thread
//! arriving ends there, and the CPU time charged to both counts from there. `__schedule`
//! normally updates the clock a µs or two before the `sched_switch` tracepoint. But a
//! wakeup that preempts the running thread asks the coming switch not to update it
//! again (`rq_clock_skip_update`), so the switch is dated by the wakeup's clock; the
//! switch follows within µs (a local wakeup: on the way back to user space; a remote
//! one: at the rescheduling interrupt, 10-80 µs in a virtual machine), unless the
//! hypervisor stops the virtual CPU in between. Then the switch comes milliseconds after
//! the clock it is dated by: the kernel counts the thread leaving queued from that clock
//! (its task clock, which leaves out steal, charged it nothing since), and the trace,
//! dating the switch by the tracepoint, showed the same stretch as the thread running
//! with its time stolen.
//!
//! Measured: the BPF schedstat test beside a busy program failed about one run in ten
//! with the JVM's main thread waiting 2.6-3.6 ms short of schedstat. In a failing run
//! kept with every record the programs wrote, main woke a kworker onto its own CPU at
//! 15.12 ms, its next charge and its switch-out to the kworker came at 17.73 ms by a
//! clock that had stood at 15.13 ms (its charge's wall time on the CPU measured by it
//! pointed 2.6 ms before the record), and the kworker's switch back to main 11 µs later
//! carried a run-queue wait of 2,614 µs: what schedstat counted as waiting.
//!
//! The switch program writes the record's time less the clock it read (as a charge
//! does, see `clock_lag`); beyond the least such lag of the CPU's recent switches the
//! clock was behind by that much. A switch whose clock was more than [`STALE_NS`]
//! behind is dated by the clock, and so is the charge of the thread leaving written
//! just before it (`put_prev_task`'s, made by the same clock, which the per-CPU queue
//! then folds into the switch), a ns before it. Below that the few µs of the
//! scheduler's own work are left alone.
//!
//! Never before the CPU's record before them, nor before the latest record about either
//! thread written by another task on any CPU (`Unseen::by_others`): the wakeup of the
//! thread arriving is written a µs after the clock update it made, which the switch is
//! then dated by, and a charge of the thread leaving by a wakeup from another CPU
//! likewise. The timeline weighs a charge only while its thread runs and wakes a thread
//! only before it runs; without that bound a fresh-clone CI run found `record_kernel`'s
//! threads switched in before their wakeups, and the schedstat test found remote
//! charges dropped from the steal accounting (1-2 ms shown stolen).

use sonda_trace::{ChargedBy, Event, Time};

use super::bpf_record::BpfHit;
use super::clock_lag::ClockLag;

/// The least staleness of a switch's clock that dates the switch by it, ns: the
/// scheduler's work between its clock update and the tracepoint mostly stays below it
/// (measured in a run of the schedstat test: 6,311 of 7,634 switches within 5 µs of
/// their CPU's least lag, 494 within 10); a rescheduling interrupt after a wakeup from
/// another CPU (preempting switches: 496 at 10-20 µs, 179 at 20-50) or a stopped
/// virtual CPU goes beyond. The timeline takes the switches of such a trace as dated
/// (`Timeline::switches_dated_by_clock`) and no longer infers the clock from charges.
pub const STALE_NS: u64 = 10_000;

/// The least clock lag of each CPU's switches lately, and the switches dated by it.
#[derive(Default)]
pub struct SwitchClock {
    lags: Vec<ClockLag>,
    dated: u64,
}

impl SwitchClock {
    /// Dates `hit`, if it is a switch whose clock stood still, by that clock, with the
    /// charge of the thread leaving among `before` (its CPU's records read before it,
    /// in ring order) just before it. `floor`: the time of that CPU's last record
    /// released in an earlier read.
    pub fn date(
        &mut self,
        hit: &mut BpfHit,
        before: &mut [BpfHit],
        floor: u64,
        by_others: impl Fn(u32) -> u64,
    ) {
        let Event::Switch { prev, next, .. } = hit.record.event else {
            return;
        };
        let Some(lag) = hit.clock_lag else {
            return;
        };
        let cpu = usize::from(hit.cpu);
        if self.lags.len() <= cpu {
            self.lags.resize_with(cpu + 1, ClockLag::default);
        }
        let time = hit.record.time.0;
        let Some(stale) = self.lags[cpu].behind(time, lag).filter(|&s| s > STALE_NS) else {
            return;
        };
        let own_charge = |h: &BpfHit| {
            h.current == prev.0
                && matches!(h.record.event,
                    Event::CpuTime { tid, by: ChargedBy::Itself, .. } if tid == prev)
        };
        let (charge, earlier) = match before.split_last_mut() {
            Some((last, earlier)) if own_charge(last) => (Some(last), earlier),
            _ => (None, &mut *before),
        };
        // After the CPU's record before them and the latest record about either thread
        // written by another task (see the module doc).
        let others = by_others(prev.0).max(by_others(next.0));
        let floor = earlier
            .last()
            .map_or(floor, |h| h.record.time.0.max(floor))
            .max(others.saturating_add(1));
        // The charge goes a ns before the switch: at one time the per-CPU queue puts a
        // switch before a charge (they come from two streams), and the charge belongs
        // to the stretch the switch ends.
        let room = u64::from(charge.is_some());
        let at = time.saturating_sub(stale).max(floor + room);
        if at >= time {
            return;
        }
        if let Some(c) = charge {
            c.record.time = Time(c.record.time.0.min(at - 1));
        }
        hit.record.time = Time(at);
        self.dated += 1;
    }

    /// Switches dated by a clock that stood still.
    pub fn dated(&self) -> u64 {
        self.dated
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{Record, Tid};

    use super::super::test_records::preemption;

    fn none(_: u32) -> u64 {
        0
    }

    fn hit(record: Record, current: u32) -> BpfHit {
        BpfHit {
            cpu: 1,
            ..BpfHit::plain(record, current)
        }
    }

    fn switch(time: u64, lag: u32, prev: u32, next: u32) -> BpfHit {
        let mut h = hit(preemption(time, prev, next), prev);
        h.clock_lag = Some(lag);
        h
    }

    fn charge(time: u64, tid: u32, current: u32) -> BpfHit {
        hit(
            Record {
                time: Time(time),
                event: Event::CpuTime {
                    tid: Tid(tid),
                    ns: 30_000,
                    by: ChargedBy::of(Tid(tid), Tid(current)),
                },
            },
            current,
        )
    }

    /// The failure's numbers (µs): main (7) charged at 17,725 and switched out at
    /// 17,730 by a clock of 15,126; the switches before were 2 µs behind their clock.
    #[test]
    fn a_switch_by_a_clock_that_stood_still_is_dated_by_it_with_its_charge() {
        let mut clock = SwitchClock::default();
        let mut before = vec![];
        let base = 1_000u32;
        let mut s = switch(13_532_000, base + 2_000, 6, 7);
        clock.date(&mut s, &mut before, 0, none);
        assert_eq!(s.record.time, Time(13_532_000), "the least lag: not moved");
        before.push(s);
        before.push(charge(15_091_000, 7, 7));
        before.push(charge(17_725_000, 7, 7));
        let mut out = switch(17_730_000, base + 2_000 + 2_604_000, 7, 62);
        clock.date(&mut out, &mut before, 0, none);
        assert_eq!(out.record.time, Time(15_126_000));
        assert_eq!(before[2].record.time, Time(15_125_999), "its charge moves");
        assert_eq!(before[1].record.time, Time(15_091_000));
        assert_eq!(clock.dated(), 1);
    }

    #[test]
    fn never_before_the_cpus_record_before_it_nor_for_a_few_microseconds() {
        let mut clock = SwitchClock::default();
        let mut first = switch(1_000_000, 500, 6, 7);
        clock.date(&mut first, &mut [], 0, none);
        // 9 µs behind: the scheduler's own work.
        let mut near = switch(2_000_000, 9_500, 7, 6);
        clock.date(&mut near, &mut [], 0, none);
        assert_eq!(near.record.time, Time(2_000_000));
        // 1 ms behind, but a wakeup of another thread came 0.3 ms before it (not its
        // own charge: it stays, and the switch comes after it).
        let mut before = vec![charge(2_700_000, 9, 6)];
        let mut out = switch(3_000_000, 1_000_500, 6, 7);
        clock.date(&mut out, &mut before, 0, none);
        assert_eq!(out.record.time, Time(2_700_000));
        // The floor from an earlier read holds too, and an unknown clock moves nothing.
        let mut out = switch(4_000_000, 1_000_500, 7, 6);
        clock.date(&mut out, &mut [], 3_500_000, none);
        assert_eq!(out.record.time, Time(3_500_000));
        let mut unknown = switch(5_000_000, 0, 6, 7);
        unknown.clock_lag = None;
        clock.date(&mut unknown, &mut [], 0, none);
        assert_eq!(unknown.record.time, Time(5_000_000));
        assert_eq!(clock.dated(), 2);
    }

    /// Measured: a wakeup on CPU 1 charged thread 7, running on CPU 0, at 31,913.704
    /// µs by a clock updated 0.5 µs before; 7's switch-out on CPU 0 came 20 µs later by
    /// that clock. Dated by the clock alone it went before the charge, which the
    /// timeline then took for the charge of a thread no longer running. Likewise the
    /// switch-in of a thread woken from another CPU stays after its wakeup.
    #[test]
    fn a_switch_stays_after_the_records_about_its_threads_from_other_cpus() {
        let mut clock = SwitchClock::default();
        let mut first = switch(31_000_000, 1_000, 6, 7);
        clock.date(&mut first, &mut [], 0, none);
        let charged = |tid: u32| if tid == 7 { 31_913_704 } else { 0 };
        let mut out = switch(31_933_700, 1_000 + 20_450, 7, 6);
        clock.date(&mut out, &mut [], 0, charged);
        assert_eq!(out.record.time, Time(31_913_705));
        let woken = |tid: u32| if tid == 8 { 32_000_900 } else { 0 };
        let mut r#in = switch(32_020_000, 1_000 + 20_000, 6, 8);
        clock.date(&mut r#in, &mut [], 0, woken);
        assert_eq!(r#in.record.time, Time(32_000_901));
    }
}
