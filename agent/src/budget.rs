//! The overhead budget (`budget=` in the collector's configuration, `sonda record
//! --budget PERCENT`): the agent measures each traced method's call rate and mean
//! duration, estimates what its probes cost, and while that estimate exceeds the budget
//! it takes the probes out of the methods that cost most for what they tell (very
//! frequent, very short calls) by retransforming their classes without them. Each
//! removal is a `Meta::MethodRemoved` in the trace.
//!
//! # Measuring without slowing the probes
//! Counting every call in a shared per-method counter would put a locked
//! read-modify-write on a cache line that every thread calling the method fights for,
//! more than the probe pair itself (~19 ns) on a hot method. Instead each thread
//! samples its own probe stream: a thread-local countdown picks every
//! [`PERIOD`]th entry, and only that entry touches the method's shared counters
//! (`sampled`, one relaxed add). `sampled × PERIOD` estimates the calls without bias
//! (every entry is equally likely to be picked), and on a hot method the sample is
//! large. The same sampled entry is timed: the thread remembers its depth and time,
//! and the exit at that depth (of that id) adds the call's duration. A thread times
//! up to four nested sampled calls at once and gives up the outermost for a new one,
//! so that a frame that never returns (a run loop) does not stop the timing of the
//! calls inside it. The hot path adds a thread-local countdown and depth (no atomic, no
//! lock, no allocation); the shared counters live in chunks allocated when a method
//! gets its id (rewrite time), never on the hot path.
//!
//! # The estimate and the choice
//! The cost of a call is the probe pair's, calibrated once at start (timing pairs of
//! the clock reads and ring-sized writes the probes make, plus the native call; see
//! [`calibrate_pair_ns`]). Every [`INTERVAL`] (the first time sooner) the budget thread estimates each
//! method's calls in the interval; their cost summed over the methods still traced,
//! against the process's CPU time in the interval (`CLOCK_PROCESS_CPUTIME_ID`: what the
//! application could have done instead, so a single-threaded program on many CPUs is
//! judged by the CPU it uses), is the overhead. When it exceeds the budget, methods
//! are removed by decreasing `cost × pair / (pair + mean)`: the probes' cost weighted by
//! the share of a call's measured time that they are, so that a method called very
//! often for a few nanoseconds goes first and a method called once per request for a
//! millisecond stays, until the remaining estimate is under the budget.
//!
//! # Removing, and what the trace says
//! The removed ids are marked in the transformer (its selector refuses them from then
//! on, for this class and any loaded later) and their classes are retransformed: the
//! hook rewrites the original bytes again without them. The JVM runs a frame that is
//! in flight to its end in the code it started in, which has the probes, so its leave
//! is recorded; calls after the retransformation are not. A class whose
//! retransformation fails keeps its probes: the warning says so and its methods are
//! not tried again. The `Meta::MethodRemoved` is written once the class is replaced,
//! with that time (`CLOCK_MONOTONIC`), the measured rate and mean duration and the
//! estimated share.

use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use sonda_shm::records;
use sonda_trace::{Meta, Time};

use crate::agent::State;
use crate::jvmti::{Jni, Vm};
use crate::{clock, counters, meta, os};

/// One sampled entry in this many, per thread.
pub const PERIOD: u32 = 64;
/// How often the budget thread looks. Short, because until the first removal a broad
/// filter's hottest methods fill the rings faster than a collector drains them (a
/// method called 4 million times a second per thread writes 128 MB/s): a second of that
/// dropped events on this machine. Half a second still gives a method called a
/// thousand times a second several samples, and such a method costs nothing to judge.
pub const INTERVAL: Duration = Duration::from_millis(500);
/// The first look, sooner still (the start's burst of calls, before any removal).
const FIRST_LOOK: Duration = Duration::from_millis(200);
/// Below this much process CPU time in an interval (ns) there is nothing to budget
/// against: an idle process, whose few calls cost nothing anyone would notice.
const MIN_CPU_NS: u64 = 20_000_000;
/// Methods per chunk of counters.
const CHUNK: usize = 1024;
/// Chunks: ids from the recording's first up to `CHUNK × CHUNKS` above it are counted
/// (a million methods; ids beyond are traced but never removed).
const CHUNKS: usize = 1024;

/// One method's shared counters (touched by sampled calls only).
#[derive(Default)]
struct Stats {
    /// Sampled entries.
    sampled: AtomicU64,
    /// Sampled calls timed to their exit.
    timed: AtomicU64,
    /// Their summed duration, in clock units (TSC ticks or ns).
    ticks: AtomicU64,
}

/// One recording's counters, by `id - first`.
struct Table {
    first: u32,
    chunks: Box<[AtomicPtr<[Stats; CHUNK]>]>,
    /// The highest id noted plus one.
    end: AtomicU32,
    /// Whether its budget thread was started.
    started: AtomicBool,
}

impl Table {
    fn stats(&self, id: u32) -> Option<&Stats> {
        let ix = id.checked_sub(self.first)? as usize;
        let chunk = self.chunks.get(ix / CHUNK)?.load(Ordering::Acquire);
        // SAFETY: a non-null chunk pointer comes from Box::into_raw in `note_method`
        // and is never freed (tables and chunks are leaked: a probe may be reading
        // one at any moment).
        let chunk = unsafe { chunk.as_ref() }?;
        Some(&chunk[ix % CHUNK])
    }
}

/// Whether probes sample (a budget is set and the recording runs).
static SAMPLING: AtomicBool = AtomicBool::new(false);
/// The current recording's table; null when it has no budget. Leaked.
static TABLE: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());
/// The JVM, for the budget thread (set at load).
static VM: OnceLock<Vm> = OnceLock::new();

fn table() -> Option<&'static Table> {
    // SAFETY: null or a pointer from Box::leak in `new_recording`, never freed.
    unsafe { TABLE.load(Ordering::Acquire).as_ref() }
}

/// A sampled call being timed: its depth, id and entry time.
#[derive(Clone, Copy)]
struct Open {
    depth: u32,
    id: u32,
    at: u64,
}

/// Sampled calls a thread times at once. They nest (each was entered while the ones
/// below were open), so the deepest is the next to end; when a sampled entry finds
/// them all taken, the outermost is given up: a frame that never returns (a thread's
/// run loop) must not stop the timing of everything called inside it.
const OPEN: usize = 4;

/// A thread's sampling state. `const`-initialised cells without a destructor: a
/// thread-local access is a plain load from the thread's block.
struct Sampler {
    countdown: Cell<u32>,
    depth: Cell<u32>,
    /// Depth of the deepest sampled call being timed; 0: none. The only field an exit
    /// reads besides `depth`.
    top: Cell<u32>,
    open: Cell<[Open; OPEN]>,
    len: Cell<usize>,
}

thread_local! {
    static SAMPLER: Sampler = const {
        Sampler {
            countdown: Cell::new(0),
            depth: Cell::new(0),
            top: Cell::new(0),
            open: Cell::new([Open { depth: 0, id: 0, at: 0 }; OPEN]),
            len: Cell::new(0),
        }
    };
}

/// Remembers the JVM for the budget thread.
pub fn set_vm(vm: Vm) {
    let _ = VM.set(vm);
}

/// A recording starts whose first method id is `first`: counters for it when it has
/// a budget, none (and no sampling) otherwise.
pub fn new_recording(first: u32, budget: Option<u32>) {
    SAMPLING.store(false, Ordering::Release);
    let table = budget.map(|_| {
        let chunks = (0..CHUNKS)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        Box::leak(Box::new(Table {
            first,
            chunks,
            end: AtomicU32::new(first),
            started: AtomicBool::new(false),
        })) as *mut Table
    });
    TABLE.store(table.unwrap_or(std::ptr::null_mut()), Ordering::Release);
    SAMPLING.store(budget.is_some(), Ordering::Release);
}

/// The recording ended: probes stop sampling.
pub fn end_recording() {
    SAMPLING.store(false, Ordering::Release);
}

/// `id` was handed out (rewrite time): makes sure it has counters.
pub fn note_method(id: u32) {
    let Some(t) = table() else { return };
    let Some(ix) = id.checked_sub(t.first).map(|i| i as usize) else {
        return;
    };
    let Some(slot) = t.chunks.get(ix / CHUNK) else {
        return;
    };
    t.end.fetch_max(id.saturating_add(1), Ordering::AcqRel);
    if !slot.load(Ordering::Acquire).is_null() {
        return;
    }
    let fresh: Box<[Stats; CHUNK]> = Box::new(std::array::from_fn(|_| Stats::default()));
    let fresh = Box::into_raw(fresh);
    if slot
        .compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        // SAFETY: `fresh` came from Box::into_raw just above and was never shared.
        drop(unsafe { Box::from_raw(fresh) });
    }
}

/// The probes' part: every entry and exit of a current-recording id, with its time.
#[inline(always)]
pub fn on_probe(kind: u8, id: u32, time: u64) {
    if !SAMPLING.load(Ordering::Relaxed) {
        return;
    }
    let _ = SAMPLER.try_with(|s| {
        if kind == records::ENTER {
            let depth = s.depth.get().wrapping_add(1);
            s.depth.set(depth);
            let left = s.countdown.get();
            if left > 1 {
                s.countdown.set(left - 1);
            } else {
                s.countdown.set(PERIOD);
                sampled_entry(s, id, depth, time);
            }
        } else {
            let depth = s.depth.get();
            if depth == s.top.get() {
                sampled_exit(s, id, time);
            }
            s.depth.set(depth.saturating_sub(1));
        }
    });
}

#[cold]
#[inline(never)]
fn sampled_entry(s: &Sampler, id: u32, depth: u32, time: u64) {
    let Some(stats) = table().and_then(|t| t.stats(id)) else {
        return;
    };
    stats.sampled.fetch_add(1, Ordering::Relaxed);
    let mut open = s.open.get();
    let mut len = s.len.get().min(OPEN);
    if len == OPEN {
        open.copy_within(1.., 0);
        len -= 1;
    }
    open[len] = Open {
        depth,
        id,
        at: time,
    };
    s.open.set(open);
    s.len.set(len + 1);
    s.top.set(depth);
}

/// The exit at the depth of the deepest sampled call: that call ends (when the id
/// differs, depths were thrown off, by a lost entry say, and the sample is dropped).
#[cold]
#[inline(never)]
fn sampled_exit(s: &Sampler, id: u32, time: u64) {
    let open = s.open.get();
    let len = s.len.get().min(OPEN);
    let Some(last) = len.checked_sub(1) else {
        s.top.set(0);
        return;
    };
    let ended = open[last];
    s.len.set(last);
    s.top.set(if last == 0 { 0 } else { open[last - 1].depth });
    if ended.id != id {
        return;
    }
    if let Some(stats) = table().and_then(|t| t.stats(id)) {
        stats.timed.fetch_add(1, Ordering::Relaxed);
        stats
            .ticks
            .fetch_add(time.saturating_sub(ended.at), Ordering::Relaxed);
    }
}

/// Starts the budget thread for `state` if its configuration has a budget and methods
/// are traced (the probes are ready: called once the loaded classes are instrumented).
pub fn start(state: &'static State) {
    let (Some(budget), Some(_)) = (state.config.budget, &state.transformer) else {
        return;
    };
    let Some(table) = table() else { return };
    if !crate::probe::ready() || table.started.swap(true, Ordering::AcqRel) {
        return;
    }
    let Some(vm) = VM.get() else {
        meta::warning("no JVM handle for the overhead budget: every selected method stays traced");
        return;
    };
    if let Err(e) = vm.spawn_daemon("sonda-budget", move |jni| run(state, jni, budget)) {
        meta::warning(format!(
            "cannot start the overhead budget's thread, every selected method stays traced: {e}"
        ));
    }
}

/// What the budget thread keeps about a method between two looks.
#[derive(Clone, Copy, Default)]
struct Seen {
    sampled: u64,
    removed: bool,
}

/// Once over budget, removals go down to this share of it.
const TARGET: f64 = 0.8;

/// Events a look must estimate in its interval before the collector's CPU time is put
/// down to them (below, the collector's own work, kernel events and its clock, would
/// make each agent event look dear).
const COLLECTOR_MIN_EVENTS: f64 = 100_000.0;
/// The most collector ns an agent event is charged.
const COLLECTOR_MAX_NS: f64 = 2_000.0;

/// The events this process's threads could not write because their rings were full
/// (the slots' `dropped` counters), new since the last call: a ring fills when the
/// collector drains less than the probes write, and an event dropped is lost to the
/// trace, so drops put the recording over budget whatever the CPU estimate says.
struct Drops {
    /// Each slot's (generation, dropped) at the last look.
    last: Vec<(u32, u64)>,
}

impl Drops {
    fn new() -> Drops {
        Drops { last: Vec::new() }
    }

    fn since_last(&mut self, region: &sonda_shm::Region) -> u64 {
        let pid = crate::buffers::pid();
        let slots = region.slots() as usize;
        self.last.resize(slots, (u32::MAX, 0));
        let mut new = 0;
        for (i, last) in self.last.iter_mut().enumerate() {
            let info = region.slot_info(i as u32);
            if info.pid != pid || info.state == sonda_shm::SlotState::Free {
                continue;
            }
            let before = if last.0 == info.generation { last.1 } else { 0 };
            new += info.dropped.saturating_sub(before);
            *last = (info.generation, info.dropped);
        }
        new
    }
}

/// The collector's CPU time (ns), when this process can see it: the buffer file names
/// its pid as it sees itself, which is ours too unless a pid namespace lies between
/// (a container after an attach), and then `/proc/<pid>` is another process or none:
/// its `comm` must say sonda.
fn collector_cpu_ns(pid: u32) -> Option<u64> {
    if pid == 0 {
        return None;
    }
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    if !comm.starts_with("sonda") {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime: fields 14 and 15 of stat, 12 and 13 after the command.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks * 1_000_000_000 / os::clock_ticks_per_second())
}

/// The budget thread: looks every [`INTERVAL`] until the recording stops.
///
/// A call costs the probe pair (calibrated) plus what the collector spends on its two
/// events (draining, ordering, writing), on the same machine: measured as the
/// collector's CPU time over the events that reached it, when it is visible and the
/// events many enough to be what it spends its time on; it dwarfs the pair (200 ns an
/// event was seen here, against a 26 ns pair).
fn run(state: &'static State, jni: &Jni<'_>, budget: u32) {
    let Some(table) = table() else { return };
    let pair_ns = calibrate_pair_ns();
    counters::BUDGET_PAIR_NS.set(pair_ns.round() as u64);
    let ns_per_tick = ticks_to_ns();
    let collector = state.region.collector_pid();
    let mut drops = Drops::new();
    drops.since_last(state.region);
    let mut event_ns = 0.0f64;
    let mut seen: Vec<Seen> = Vec::new();
    let mut last_cpu = os::process_cpu_ns();
    let mut last_collector = collector_cpu_ns(collector);
    let mut last_wall = os::monotonic_ns();
    let over = || state.stopped.load(Ordering::Acquire) || state.ended.load(Ordering::Acquire);
    let mut pause = FIRST_LOOK;
    loop {
        std::thread::sleep(pause);
        pause = INTERVAL;
        if over() {
            return;
        }
        let (cpu, wall) = (os::process_cpu_ns(), os::monotonic_ns());
        let collector_now = collector_cpu_ns(collector);
        let (d_cpu, d_wall) = (cpu.saturating_sub(last_cpu), wall.saturating_sub(last_wall));
        let d_collector = match (last_collector, collector_now) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        (last_cpu, last_wall, last_collector) = (cpu, wall, collector_now);
        let dropped = drops.since_last(state.region);
        counters::BUDGET_CHECKS.incr();
        let end = table.end.load(Ordering::Acquire);
        let span = end.saturating_sub(table.first) as usize;
        seen.resize(span, Seen::default());
        let mut methods = Vec::new();
        let mut calls_total = 0.0;
        for (ix, s) in seen.iter_mut().enumerate() {
            let id = table.first + ix as u32;
            let Some(stats) = table.stats(id) else {
                continue;
            };
            let sampled = stats.sampled.load(Ordering::Relaxed);
            let delta = sampled.saturating_sub(s.sampled);
            s.sampled = sampled;
            if s.removed || delta == 0 {
                continue;
            }
            let calls = (delta * u64::from(PERIOD)) as f64;
            let timed = stats.timed.load(Ordering::Relaxed);
            let mean_ns = if timed == 0 {
                0.0
            } else {
                stats.ticks.load(Ordering::Relaxed) as f64 * ns_per_tick / timed as f64
            };
            calls_total += calls;
            methods.push(Candidate {
                id,
                calls,
                rate: calls * 1e9 / d_wall.max(1) as f64,
                mean_ns,
                cost: 0.0,
                score: calls * pair_ns / (pair_ns + mean_ns),
            });
        }
        // The events that reached the collector in the interval, and its cost of each.
        let through = (2.0 * calls_total - dropped as f64).max(0.0);
        if let Some(d) = d_collector.filter(|_| through >= COLLECTOR_MIN_EVENTS) {
            let now = (d as f64 / through).min(COLLECTOR_MAX_NS);
            event_ns = if event_ns == 0.0 {
                now
            } else {
                0.5 * event_ns + 0.5 * now
            };
            counters::BUDGET_COLLECTOR_EVENT_NS.set(event_ns.round() as u64);
        }
        let per_call = pair_ns + 2.0 * event_ns;
        let mut total_ns = 0.0;
        for m in &mut methods {
            m.cost = m.calls * per_call;
            total_ns += m.cost;
        }
        let judged = d_cpu >= MIN_CPU_NS;
        let allowed = d_cpu as f64 * f64::from(budget) / 10_000.0;
        if judged {
            counters::BUDGET_OVERHEAD_PPM.set((total_ns * 1e6 / d_cpu as f64) as u64);
        }
        // Drops: down to half the events that got through, so that the rings empty.
        let events_allowed = if dropped > 0 {
            counters::BUDGET_DROPPED_LOOKS.incr();
            through / 2.0
        } else {
            f64::INFINITY
        };
        let mut events = 2.0 * calls_total;
        if !(judged && total_ns > allowed) && events <= events_allowed {
            continue;
        }
        // Over: down to a fifth under the budget, so that the next looks' noise does
        // not bring a removal (a retransformation, deoptimised code) each time.
        let over_cpu = |total: f64| judged && total > TARGET * allowed;
        methods.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut chosen = Vec::new();
        for m in methods {
            if !over_cpu(total_ns) && events <= events_allowed {
                break;
            }
            total_ns -= m.cost;
            events -= 2.0 * m.calls;
            chosen.push(Removal {
                candidate: m,
                overhead_ppm: (m.cost * 1e6 / d_cpu.max(1) as f64) as u64,
            });
        }
        for id in remove(state, jni, &chosen) {
            if let Some(s) = seen.get_mut((id - table.first) as usize) {
                s.removed = true;
            }
        }
    }
}

/// A method the budget may remove, with its figures over the last interval.
#[derive(Clone, Copy)]
struct Candidate {
    id: u32,
    /// Calls in the interval (estimated).
    calls: f64,
    /// Calls a second.
    rate: f64,
    /// Mean duration, ns (0 when no sampled call was timed).
    mean_ns: f64,
    /// Estimated probe cost in the interval, ns.
    cost: f64,
    /// The order of removal (see the module documentation).
    score: f64,
}

struct Removal {
    candidate: Candidate,
    overhead_ppm: u64,
}

/// Removes the probes of `chosen` (under the transformer's lock, unless the recording
/// stopped); returns the ids no longer to consider: those removed, and those whose
/// class could not be retransformed (kept, not tried again).
fn remove(state: &State, jni: &Jni<'_>, chosen: &[Removal]) -> Vec<u32> {
    let Some(t) = &state.transformer else {
        return Vec::new();
    };
    let Ok(_serial) = state.transforming.lock() else {
        return Vec::new();
    };
    if state.stopped.load(Ordering::Acquire) {
        return Vec::new();
    }
    let ids: Vec<u32> = chosen.iter().map(|r| r.candidate.id).collect();
    let classes: HashSet<String> = t.exclude(&ids).into_iter().map(|(_, c)| c).collect();
    let failed = t.retransform_named(state.jvmti, jni, &classes);
    let time = Time(os::monotonic_ns());
    let mut done = Vec::new();
    for r in chosen {
        let c = &r.candidate;
        done.push(c.id);
        if t.class_of(c.id)
            .is_some_and(|class| failed.contains(&class))
        {
            t.include_again(c.id);
            continue;
        }
        counters::BUDGET_REMOVED.incr();
        meta::write(&Meta::MethodRemoved {
            id: c.id,
            time,
            rate: c.rate.round() as u64,
            mean_ns: c.mean_ns.round() as u64,
            overhead_ppm: r.overhead_ppm,
        });
    }
    done
}

/// ns per clock unit of [`clock::now`]: 1 on the monotonic clock; for the TSC, the
/// ratio over a 20 ms sleep (the collector converts records by its own calibration;
/// this only scales mean durations).
fn ticks_to_ns() -> f64 {
    if !clock::is_tsc() {
        return 1.0;
    }
    let (t0, n0) = (os::tsc(), os::monotonic_ns());
    std::thread::sleep(Duration::from_millis(20));
    let (t1, n1) = (os::tsc(), os::monotonic_ns());
    let ticks = t1.saturating_sub(t0);
    if ticks == 0 {
        1.0
    } else {
        n1.saturating_sub(n0) as f64 / ticks as f64
    }
}

/// ns a call of the native probe itself takes from compiled code, beside the clock
/// read and the ring write timed below: the JNI transition of a static native (most of
/// the ~19 ns pair `scripts/bench-probe.sh` measures here, with the TSC, is not the
/// clock: reads pipeline with the call).
const CALL_NS: f64 = 3.0;

/// The probe pair's cost (ns): the median of 5 timings of 20,000 pairs of what each
/// probe does (a clock read and a 16-byte record written and published), plus
/// [`CALL_NS`] per probe. On the budget thread, once.
pub fn calibrate_pair_ns() -> f64 {
    const PAIRS: usize = 20_000;
    let mut ring = vec![0u64; 2 * 64];
    let head = AtomicU64::new(0);
    let mut runs = [0.0f64; 5];
    for run in &mut runs {
        let begin = os::monotonic_ns();
        for i in 0..PAIRS {
            for half in 0..2 {
                let at = clock::now();
                let slot = ((2 * i + half) % 64) * 2;
                ring[slot] = at;
                ring[slot + 1] = i as u64;
                head.store((2 * i + half) as u64, Ordering::Release);
            }
        }
        std::hint::black_box(&ring);
        *run = os::monotonic_ns().saturating_sub(begin) as f64 / PAIRS as f64;
    }
    runs.sort_by(f64::total_cmp);
    runs[2] + 2.0 * CALL_NS
}
