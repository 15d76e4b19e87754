//! The kernel source read from BPF programs on the scheduler's BTF raw tracepoints
//! (`bpf/sched.bpf.c`), one ring buffer for every CPU.
//!
//! Why: an ftrace tracepoint builds its record before any filter looks at it, so every
//! task on the machine pays for the events sonda records, and sonda needed a second,
//! unfiltered instance for the charges and migrations the kernel writes about a traced
//! task from another task's context. A `tp_btf` program gets the tracepoint's arguments
//! as they are and looks the tasks up in a map first: a task sonda does not trace pays
//! a lookup, a traced one about what one ftrace instance costs (docs/overhead.md, "BPF
//! raw tracepoints"), and one stream has everything.
//!
//! The records go through the same per-CPU queues as ftrace's ([`CpuQueue`]: switches
//! the tracepoint did not report recovered from the running task each record names)
//! and the same judgement of other programs' records ([`Foreign`]). A read:
//! 1. note `now`, take every committed record from the ring buffer, sort each CPU's
//!    (records written from an interrupt inside another program are reserved after it
//!    but stamped before it);
//! 2. hand them to their CPU's queue (migrations and charges as the unfiltered stream,
//!    which only dates recovered switches), count the records the programs could not
//!    write (the buffer was full) as a loss at that CPU's last record;
//! 3. release each queue up to `now - SLACK`, as the ftrace source does; the wakeups
//!    the programs did not see, and the migrations, made up from the switch records
//!    (`bpf_unseen`), go out beside them.
//!
//! The first source tried (see [`super::KernelSource::open`]); it needs
//! `/sys/kernel/btf/vmlinux`, CAP_BPF and CAP_PERFMON (root), and a recorder built with
//! clang (`build.rs`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder};
use sonda_trace::Record;

use super::bpf_record::{self, BpfHit};
use super::bpf_ring::Ring;
use super::bpf_unseen::Unseen;
use super::bpf_verdicts::Verdicts;
use super::clock_lag::ClockLag;
use super::cpu_queue::CpuQueue;
use super::foreign::Foreign;
use super::ftrace_source::SLACK;
use super::switch_clock::SwitchClock;
use super::task_filter::TaskFilter;
use super::{Drained, KernelError, KernelStats};
use crate::clock;

/// The compiled programs (`build.rs`).
#[cfg(sonda_bpf)]
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sched.bpf.o"));
#[cfg(not(sonda_bpf))]
static OBJECT: &[u8] = &[];

/// `tasks` values (as in the C file).
const TRACED: u8 = 1;
const EXCLUDED: u8 = 2;

/// The programs' map of traced and excluded tasks, shared with the recorder's threads
/// through the [`TaskFilter`].
pub struct BpfTasks {
    /// The `tasks` array's bytes, mapped.
    tasks: Verdicts,
    settings: MapHandle,
}

impl BpfTasks {
    /// Traces `tids` and what they create from now on; the first call turns the filter
    /// on (before it, every task's events are written).
    pub fn follow(&self, tids: &[u32]) -> io::Result<()> {
        self.set(tids, TRACED)?;
        // After the tasks, so that none of their events is left out in between.
        self.settings
            .update(&0u32.to_ne_bytes(), &1u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| io::Error::other(format!("BPF settings map: {e}")))
    }

    /// Never traces `tids` nor what they create from now on.
    pub fn exclude(&self, tids: &[u32]) -> io::Result<()> {
        self.set(tids, EXCLUDED)
    }

    fn set(&self, tids: &[u32], value: u8) -> io::Result<()> {
        for &tid in tids {
            self.tasks
                .set(tid, value)
                .map_err(|e| io::Error::other(format!("BPF tasks map: {e}")))?;
        }
        Ok(())
    }
}

/// The loss counts are read (a `bpf` system call, a tenth of the collector's CPU on an
/// idle server, docs/overhead.md) only after a read that found the ring half full or
/// more since the last, or after this many reads: a program loses a record only when
/// the ring is full, and the most it held between two reads is what the first left in
/// it plus what came since, all of which the second consumes or leaves. Only a read
/// that could have followed a loss looks, and finds it at once; the count every so many
/// reads is a safety net.
const LOSS_CHECK_EVERY: u32 = 64;

/// Keys of the programs' `counts` map.
const COUNT_LOST: u32 = 0;
const COUNT_SKIPPED: u32 = 1;

/// What the kernel counts for the programs, all of them together.
#[derive(Clone, Copy, Default)]
struct ProgramTotals {
    /// Runs the kernel skipped because one was already running on that CPU
    /// (`recursion_misses`: a tracepoint hit from an interrupt while the same program
    /// ran in the task it interrupted): events not written, on no known CPU.
    missed: u64,
    /// Runs, and their time in ns, counted only while the kernel's BPF statistics are
    /// on (`kernel.bpf_stats_enabled`, or a `BPF_ENABLE_STATS` descriptor held open):
    /// what the programs cost the tasks that hit the tracepoints.
    runs: u64,
    run_ns: u64,
}

/// Tracepoints from BPF programs.
pub struct BpfSource {
    object: Object,
    /// The attached programs (empty while not recording).
    links: Vec<Link>,
    ring: Ring,
    /// Per CPU: records not written because the ring buffer was full (key 0), other
    /// programs' records the task filter left out (key 1).
    counts: MapHandle,
    filter: TaskFilter,
    /// Per CPU number.
    queues: Vec<CpuQueue>,
    /// Per CPU number: this read's records, sorted before they are queued.
    pending: Vec<Vec<BpfHit>>,
    /// Per CPU number: the time of the last record queued (where a loss is placed).
    last_time: Vec<u64>,
    /// Per CPU number: the counts of lost records already passed on.
    accounted: Vec<u64>,
    /// Reads since the loss counts were last read (see [`LOSS_CHECK_EVERY`]).
    reads_unchecked: u32,
    foreign: Foreign,
    /// Wakeups and migrations the programs did not see, made up from the switch records.
    unseen: Unseen,
    /// How late the run queue's clock was at each charge, for its wall time on the CPU.
    clock_lag: ClockLag,
    /// Switches dated by a clock that stood still (`switch_clock`).
    switch_clock: SwitchClock,
    stats: KernelStats,
    /// Bytes of ring buffer per CPU, as asked.
    ring_bytes: usize,
    stopped: bool,
    /// Held while the kernel counts the programs' runs for this source (see
    /// [`BpfSource::count_cost`]).
    stats_on: Option<OwnedFd>,
}

/// The programs, attached in this order (creations before the events of what they
/// create).
const PROGRAMS: [&str; 11] = [
    "task_newtask",
    "sched_process_free",
    "sched_process_exec",
    "sched_process_exit",
    "task_rename",
    "sched_wakeup_new",
    "sched_waking",
    "sched_wakeup",
    "sched_migrate_task",
    "sched_stat_runtime",
    "sched_switch",
];

fn bpf_error(what: &str, e: libbpf_rs::Error) -> KernelError {
    let text = format!("BPF scheduler programs: {what}: {e}");
    match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => KernelError::Permission(text),
        _ => KernelError::Other(text),
    }
}

impl BpfSource {
    /// Loads the programs, not yet attached, with a ring buffer of `ring_bytes` per CPU
    /// of `cpus` (one buffer for all, rounded up to a power of two).
    pub fn open(cpus: &[u16], ring_bytes: usize) -> Result<BpfSource, KernelError> {
        if OBJECT.is_empty() {
            return Err(KernelError::Other(
                "this sonda was built without its BPF programs (no clang at build time)".into(),
            ));
        }
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            return Err(KernelError::Other(
                "the kernel has no BTF (/sys/kernel/btf/vmlinux)".into(),
            ));
        }
        // libbpf's own messages would go to stderr; its errors come back as values.
        libbpf_rs::set_print(None);
        let size = (ring_bytes.max(1 << 16) * cpus.len().max(1))
            .next_power_of_two()
            .min(1 << 30);
        let mut open = ObjectBuilder::default()
            .name("sonda")
            .map_err(|e| bpf_error("name", e))?
            .open_memory(OBJECT)
            .map_err(|e| bpf_error("open", e))?;
        for mut map in open.maps_mut() {
            if map.name() == "records" {
                map.set_max_entries(size as u32)
                    .map_err(|e| bpf_error("ring buffer size", e))?;
            }
        }
        let object = open.load().map_err(|e| bpf_error("load", e))?;
        let map = |name: &str| -> Result<MapHandle, KernelError> {
            let m = object
                .maps()
                .find(|m| m.name() == name)
                .ok_or_else(|| KernelError::Other(format!("BPF object has no map {name}")))?;
            MapHandle::try_from(&m).map_err(|e| bpf_error(name, e))
        };
        let records = map("records")?;
        let ring = Ring::map(records.as_fd(), size)
            .map_err(|e| KernelError::Other(format!("cannot map the BPF ring buffer: {e}")))?;
        let tasks = map("tasks")?;
        let tasks = Verdicts::map(tasks.as_fd())
            .map_err(|e| KernelError::Other(format!("cannot map the BPF tasks array: {e}")))?;
        let tasks = Arc::new(BpfTasks {
            tasks,
            settings: map("settings")?,
        });
        let filter = TaskFilter::bpf(tasks);
        let foreign = Foreign::new(filter.listed());
        let counts = map("counts")?;
        Ok(BpfSource {
            object,
            links: Vec::new(),
            ring,
            counts,
            filter,
            queues: Vec::new(),
            pending: Vec::new(),
            last_time: Vec::new(),
            accounted: Vec::new(),
            reads_unchecked: 0,
            foreign,
            unseen: Unseen::default(),
            clock_lag: ClockLag::default(),
            switch_clock: SwitchClock::default(),
            stats: KernelStats {
                bpf: true,
                ..KernelStats::default()
            },
            ring_bytes,
            stopped: false,
            stats_on: None,
        })
    }

    /// Turns the kernel's BPF run-time statistics on for as long as this source lives
    /// (`BPF_ENABLE_STATS`: a descriptor, closed with the source, that leaves the
    /// system setting as it was): every program's runs and run time are counted, the
    /// recording's own cost inside the kernel. They cost two clock reads a run, of every
    /// BPF program on the machine, while on.
    pub fn count_cost(&mut self) -> Result<(), String> {
        if self.stats_on.is_some() {
            return Ok(());
        }
        // SAFETY: no pointer is passed; the call returns a new descriptor or a negative
        // error.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            return Err(format!(
                "the kernel refused its BPF statistics: {}",
                io::Error::from_raw_os_error(-fd)
            ));
        }
        // SAFETY: `fd` was just returned by the kernel and is owned by nothing else.
        self.stats_on = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(())
    }

    /// The programs' task filter, for the recorder to give it the traced tasks.
    pub fn task_filter(&self) -> TaskFilter {
        self.filter.clone()
    }

    /// Attaches the programs.
    pub fn enable(&mut self) -> io::Result<()> {
        for name in PROGRAMS {
            let prog = self
                .object
                .progs_mut()
                .find(|p| p.name() == name)
                .ok_or_else(|| io::Error::other(format!("BPF object has no program {name}")))?;
            let link = prog
                .attach()
                .map_err(|e| io::Error::other(format!("cannot attach BPF program {name}: {e}")))?;
            self.links.push(link);
        }
        Ok(())
    }

    /// Detaches the programs; the next read takes everything left.
    pub fn disable(&mut self) -> io::Result<()> {
        let totals = self.totals();
        self.stats.missed = totals.missed;
        self.stats.bpf_runs = totals.runs;
        self.stats.bpf_run_ns = totals.run_ns;
        self.stopped = true;
        self.links.clear();
        Ok(())
    }

    /// Makes the per-CPU vectors reach CPU `cpu`.
    fn grow(&mut self, cpu: usize) {
        while self.queues.len() <= cpu {
            self.queues.push(CpuQueue::new(self.queues.len() as u16));
            self.last_time.push(0);
            self.accounted.push(0);
        }
        if self.pending.len() <= cpu {
            self.pending.resize_with(cpu + 1, Vec::new);
        }
    }

    /// Appends what can be released now to `out`, in time order per CPU.
    pub fn read(&mut self, out: &mut Vec<Record>) -> Drained {
        let readable = clock::monotonic().0.saturating_sub(SLACK.as_nanos() as u64);
        let horizon = if self.stopped { u64::MAX } else { readable };
        self.foreign.refresh();
        let mut undecodable = 0;
        // The records are looked at in ring order (see `bpf_unseen`); each made-up one
        // goes out as is: it names no running task, and the recorder's watermark puts
        // it in time order.
        let mut made = Vec::new();
        let (pending, unseen, clock_lag, switch_clock, last_time) = (
            &mut self.pending,
            &mut self.unseen,
            &mut self.clock_lag,
            &mut self.switch_clock,
            &self.last_time,
        );
        let consumed = self.ring.consume(|bytes| match bpf_record::decode(bytes) {
            Some(mut hit) => {
                if let (Some(on_cpu), Some(lag)) = (&mut hit.on_cpu_ns, hit.clock_lag) {
                    // Measured by a clock updated some µs before the charge: see
                    // `clock_lag`.
                    *on_cpu += clock_lag.correction(hit.record.time.0, lag);
                }
                let cpu = usize::from(hit.cpu);
                if pending.len() <= cpu {
                    pending.resize_with(cpu + 1, Vec::new);
                }
                // Before the unseen wakeups are dated from it (see `switch_clock`).
                let floor = last_time.get(cpu).copied().unwrap_or(0);
                switch_clock.date(&mut hit, &mut pending[cpu], floor, |t| unseen.by_others(t));
                unseen.see(&hit, &mut made);
                pending[cpu].push(hit);
            }
            None => undecodable += 1,
        });
        self.unseen.end_of_read();
        // The other per-CPU vectors as long as `pending`.
        if let Some(last) = self.pending.len().checked_sub(1) {
            self.grow(last);
        }
        if undecodable > 0 {
            // Never expected (the layout is this crate's own): whatever was lost with
            // them, nothing is judged another program's from now on.
            self.stats.undecodable += undecodable;
            self.foreign.give_up();
        }
        for cpu in 0..self.pending.len() {
            let pending = &mut self.pending[cpu];
            pending.sort_by_key(|h| h.record.time);
            let queue = &mut self.queues[cpu];
            for hit in pending.drain(..) {
                self.last_time[cpu] = self.last_time[cpu].max(hit.record.time.0);
                if hit.side {
                    queue.unfiltered_event(hit.record, hit.on_cpu_ns);
                } else {
                    self.foreign.filtered(&hit.record);
                    queue.event(hit.record, hit.current);
                }
            }
        }
        // The most the ring held since the last read: what was left then plus what came
        // since, all of which is consumed or left now.
        let peak = consumed + self.ring.unread();
        self.reads_unchecked += 1;
        if self.stopped
            || peak >= self.ring.size() as u64 / 2
            || self.reads_unchecked >= LOSS_CHECK_EVERY
        {
            self.reads_unchecked = 0;
            self.check_loss();
        }
        self.foreign.read_up_to(readable);
        // Made-up records first: one dated at the instant of the switch-in it comes
        // before (the kernel's wait 0) must stay before it, and records of equal time
        // keep their arrival order; that switch-in goes out now or later.
        self.stats.samples += made.len() as u64;
        out.extend(made);
        for queue in &mut self.queues {
            let foreign = &mut self.foreign;
            queue.release(horizon, out, &mut self.stats, |r| foreign.skips(r));
        }
        Drained {
            more: false,
            busiest: (consumed as f64 / self.ring.size() as f64).min(1.0),
        }
    }

    /// Passes on the records the programs could not write, per CPU, at that CPU's last
    /// record read.
    fn check_loss(&mut self) {
        for (cpu, now) in self.per_cpu(COUNT_LOST).into_iter().enumerate() {
            if now == 0 {
                continue;
            }
            self.grow(cpu);
            let new = now.saturating_sub(self.accounted[cpu]);
            if new > 0 {
                self.accounted[cpu] = now;
                self.queues[cpu].lost(self.last_time[cpu], new);
                // A creation may be among them.
                self.foreign.give_up();
            }
        }
    }

    /// Bytes of ring buffer per CPU, as asked (one buffer holds every CPU's).
    pub fn buffer_bytes(&self) -> usize {
        self.ring_bytes
    }

    /// The programs' own counts, summed (see [`ProgramTotals`]).
    fn totals(&self) -> ProgramTotals {
        self.object
            .progs()
            .filter_map(|p| {
                let mut info = libbpf_sys::bpf_prog_info::default();
                let mut len = std::mem::size_of_val(&info) as u32;
                // SAFETY: `info` is a zeroed bpf_prog_info of `len` bytes (no array
                // fields asked for, so the kernel writes nothing else), the fd is the
                // loaded program's, open while `self.object` lives.
                let rc = unsafe {
                    libbpf_sys::bpf_prog_get_info_by_fd(p.as_fd().as_raw_fd(), &mut info, &mut len)
                };
                (rc == 0).then_some(ProgramTotals {
                    missed: info.recursion_misses,
                    runs: info.run_cnt,
                    run_ns: info.run_time_ns,
                })
            })
            .fold(ProgramTotals::default(), |a, b| ProgramTotals {
                missed: a.missed + b.missed,
                runs: a.runs + b.runs,
                run_ns: a.run_ns + b.run_ns,
            })
    }

    /// One of the programs' per-CPU counts (`counts` in sched.bpf.c), by CPU number;
    /// empty if the map cannot be read.
    fn per_cpu(&self, key: u32) -> Vec<u64> {
        let Ok(Some(values)) = self.counts.lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY) else {
            return Vec::new();
        };
        values
            .iter()
            .map(|bytes| {
                bytes
                    .get(..8)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_ne_bytes)
            })
            .collect()
    }

    /// What was read so far; `foreign_skipped` counts the records the programs left
    /// out (they never reach the collector).
    pub fn stats(&self) -> KernelStats {
        KernelStats {
            foreign_misjudged: self.foreign.misjudged(),
            wakeups_recovered: self.unseen.wakeups(),
            migrations_recovered: self.unseen.migrations(),
            switches_clock_dated: self.switch_clock.dated(),
            foreign_skipped: self.stats.foreign_skipped
                + self.per_cpu(COUNT_SKIPPED).iter().sum::<u64>(),
            ..self.stats
        }
    }
}
