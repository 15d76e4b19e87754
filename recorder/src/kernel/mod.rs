//! The kernel source of a recording: scheduler tracepoints on every CPU, decoded into
//! trace events.
//!
//! Three ways to read them, tried in this order (`SONDA_KERNEL=ftrace` starts at the
//! second):
//! 0. **BPF** (`bpf_source`): programs on the tracepoints' BTF raw form look the tasks
//!    up in a map before writing anything, so other programs pay a lookup instead of a
//!    record, and one stream has everything: 40-60% less than the two ftrace
//!    instances cost the traced program, half of what they cost the programs beside
//!    it (docs/overhead.md, "The BPF kernel source"). Needs BTF, CAP_BPF and
//!    CAP_PERFMON, and a recorder built with clang. On this project's platform the
//!    kernel skips the programs for some wakeups (done from interrupts while the
//!    sandbox supervisor's threads run); `bpf_unseen` makes up the wakeups, dated from
//!    the kernel's own run-queue wait, and the migrations they missed.
//! 1. **ftrace** (`ftrace_source`): a private tracefs instance records the
//!    tracepoints; switches they do not report are recovered from each event's running
//!    task (`cpu_queue`). Needs write access to tracefs (root). On kernels where perf does not deliver
//!    tracepoint samples while the idle task runs, only this path sees the wakeups done
//!    from interrupts on idle CPUs (a timer expiring, a disk completing).
//! 2. **perf** (`perf_source`): tracepoint samples and context-switch records in perf
//!    rings. Needs CAP_PERFMON and read access to tracefs.
//!
//! Without either, the recorder samples /proc instead.
//!
//! - `tracefs` finds tracefs and reads tracepoint descriptions;
//! - [`tp_format`] parses them (field offsets are never hard-coded);
//! - [`sched_events`] turns tracepoint payloads into [`sonda_trace::Event`]s;
//! - `ftrace_instance` makes, configures, reads and removes the private instance;
//! - [`ftrace_page`] decodes its ring-buffer pages from bytes;
//! - `tgids` finds the process of a task that ftrace names by tid only;
//! - `perf_ring` opens perf events and reads the per-CPU rings;
//! - [`perf_record`] decodes perf ring records from bytes;
//! - `switch_repair` recovers switches the tracepoint did not report from perf's
//!   switch-in records (the perf source);
//! - `task_filter` makes the kernel record only the traced tasks' events;
//! - `cpu_queue` holds a CPU's ftrace events until they can be released, and recovers
//!   the switches the tracepoint did not report from the events' running task;
//! - `bpf_source` loads the BPF programs and reads their ring buffer (`bpf_ring`);
//!   [`bpf_record`] decodes their records; `bpf_unseen` makes up the wakeups and
//!   migrations they missed;
//! - `bytes` reads the words of the buffers the kernel fills, for the decoders;
//! - `reader_thread` empties everything on a thread of its own.
//!
//! The decoders ([`tp_format`], [`sched_events`], [`ftrace_page`], [`perf_record`],
//! [`bpf_record`]) are
//! public: they are pure functions of bytes, so they can be fuzzed and benchmarked
//! without a kernel. The rest is the crate's own.

pub mod bpf_record;
pub(crate) mod bpf_ring;
pub(crate) mod bpf_source;
pub(crate) mod bpf_unseen;
pub(crate) mod bpf_verdicts;
mod bytes;
pub(crate) mod clock_lag;
pub(crate) mod cpu_queue;
mod foreign;
pub(crate) mod ftrace_instance;
pub mod ftrace_page;
pub(crate) mod ftrace_source;
pub(crate) mod missed_moves;
pub mod perf_record;
pub(crate) mod perf_ring;
pub(crate) mod perf_source;
pub(crate) mod reader_thread;
pub(crate) mod resched_clock;
pub mod sched_events;
pub(crate) mod switch_clock;
pub(crate) mod switch_repair;
pub(crate) mod task_filter;
#[cfg(test)]
mod test_records;
pub(crate) mod tgids;
pub mod tp_format;
pub(crate) mod tracefs;

use sonda_trace::Record;

use bpf_source::BpfSource;
use ftrace_instance::{Instance, InstanceError};
use ftrace_page::PageLayout;
use ftrace_source::FtraceSource;
use perf_ring::KernelRings;
use perf_source::PerfSource;
use sched_events::{
    SchedDecoder, CPU_TIME_TRACEPOINT, MIGRATE_TRACEPOINT, TRACEPOINTS, TRACEPOINT_COUNT,
};
use tp_format::Format;
use tracefs::{Tracefs, TracefsError};

/// Why the kernel source could not start.
#[derive(Debug)]
pub(crate) enum KernelError {
    /// Not allowed (not root, no CAP_PERFMON): the recording falls back to /proc.
    Permission(String),
    /// Anything else: the recording cannot go on.
    Other(String),
}

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelError::Permission(s) | KernelError::Other(s) => f.write_str(s),
        }
    }
}

/// What one [`KernelSource::read`] found.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Drained {
    /// A buffer was left with records: read again at once.
    pub more: bool,
    /// The largest share of one CPU's buffer that this read took (0 to 1): how fast
    /// the busiest CPU fills its buffer, for pacing the reads.
    pub busiest: f64,
}

/// Tally of what was read.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct KernelStats {
    /// Tracepoint records decoded into events.
    pub samples: u64,
    /// Records the kernel lost (buffers full).
    pub lost: u64,
    /// Records or pages that did not decode (never expected).
    pub undecodable: u64,
    /// Other programs' records left out as they were released (`foreign`: their
    /// charges and migrations, wakeups of their tasks, switches between two of them;
    /// not in `samples`).
    pub foreign_skipped: u64,
    /// Traced tasks some of whose records were left out as another program's, their
    /// creation record read after them (see `foreign`): never expected; each means
    /// records missing from the trace.
    pub foreign_misjudged: u64,
    /// Switches the tracepoint did not report, recovered (see `cpu_queue` and
    /// [`switch_repair`]).
    pub repaired: u64,
    /// Whether the tracepoints were read from an ftrace instance.
    pub ftrace: bool,
    /// Whether they were read from the BPF programs (neither: from perf).
    pub bpf: bool,
    /// BPF program runs the kernel skipped, one being already under way on that CPU
    /// (see `bpf_source`): events missing from the trace.
    pub missed: u64,
    /// BPF program runs and their time (ns) while the kernel's BPF statistics were on
    /// (both 0 otherwise, see `bpf_source`): what the programs cost inside the kernel,
    /// in the context of whatever task hit the tracepoint.
    pub bpf_runs: u64,
    pub bpf_run_ns: u64,
    /// Wakeups the BPF programs did not see, dated from the kernel's run-queue wait
    /// (`bpf_unseen`).
    pub wakeups_recovered: u64,
    /// Migrations the BPF programs did not see, found from the CPUs of a thread's
    /// switch records (`bpf_unseen`).
    pub migrations_recovered: u64,
    /// Switches dated by their run queue's clock, which had stood still since a wakeup
    /// asked for the switch (`switch_clock`, BPF only).
    pub switches_clock_dated: u64,
    /// ftrace only: preempting switches dated by the clock update a skipped update
    /// left them (`resched_clock`).
    pub switches_resched_dated: u64,
    /// The perf source: the largest of the CPUs' median delays from a reported switch
    /// to its perf switch-in record, ns (see [`switch_repair`]): a few µs when the
    /// tracepoints and perf share a clock; 0 when nothing was measured.
    pub switch_delay_ns: u64,
}

/// The tracepoints, open on every CPU.
pub(crate) struct KernelSource {
    inner: Inner,
    notice: Option<String>,
}

enum Inner {
    Bpf(Box<BpfSource>),
    Ftrace(Box<FtraceSource>),
    Perf(Box<PerfSource>),
}

impl KernelSource {
    /// Opens the tracepoints, not yet recording, on `cpus` with buffers of `ring_bytes`
    /// per CPU: BPF programs if they load, else an ftrace instance, else perf.
    /// `SONDA_KERNEL=ftrace` skips BPF (to compare, or where it misbehaves);
    /// `SONDA_KERNEL=bpf` asks for BPF and says why when it cannot be had.
    pub fn open(cpus: &[u16], ring_bytes: usize) -> Result<KernelSource, KernelError> {
        let choice = std::env::var("SONDA_KERNEL").ok();
        let mut notice = None;
        if choice.as_deref() != Some("ftrace") {
            match BpfSource::open(cpus, ring_bytes) {
                Ok(source) => {
                    return Ok(KernelSource {
                        inner: Inner::Bpf(Box::new(source)),
                        notice: None,
                    })
                }
                // Quietly by default: the counters say which path ran.
                Err(e) if choice.as_deref() == Some("bpf") => {
                    notice = Some(format!(
                        "sonda: no BPF kernel source ({e}); reading the scheduler tracepoints through ftrace"
                    ))
                }
                Err(_) => {}
            }
        }
        let mut source = Self::open_tracefs(cpus, ring_bytes)?;
        if source.notice.is_none() {
            source.notice = notice;
        }
        Ok(source)
    }

    /// The ftrace path, else perf.
    fn open_tracefs(cpus: &[u16], ring_bytes: usize) -> Result<KernelSource, KernelError> {
        let tracefs = Tracefs::locate().map_err(tracefs_error)?;
        let mut formats = Vec::with_capacity(TRACEPOINTS.len());
        for (sys, name) in TRACEPOINTS {
            formats.push(tracefs.format(sys, name).map_err(tracefs_error)?);
        }
        let formats: [Format; TRACEPOINT_COUNT] =
            formats.try_into().expect("one format per tracepoint");
        // Optional: without it steal time counts as running (older or unusual kernels).
        let (sys, name) = CPU_TIME_TRACEPOINT;
        let cpu_time = tracefs.format(sys, name).ok();
        let decoder = || {
            SchedDecoder::new(&formats, cpu_time.as_ref())
                .map_err(|e| KernelError::Other(e.to_string()))
        };
        let mut events = TRACEPOINTS.to_vec();
        if cpu_time.is_some() {
            events.push(CPU_TIME_TRACEPOINT);
        }
        let why_not_ftrace = match open_ftrace(&tracefs, decoder()?, &events, cpus, ring_bytes) {
            Ok(source) => return Ok(source),
            Err(why) => why,
        };
        let ids: Vec<u64> = formats.iter().chain(&cpu_time).map(|f| f.id).collect();
        let rings = KernelRings::open(&ids, cpus, ring_bytes).map_err(|e| match e {
            perf_ring::OpenError::Permission(e) => KernelError::Permission(e.to_string()),
            perf_ring::OpenError::Other(s) => KernelError::Other(s),
        })?;
        let max_cpu = cpus.iter().copied().max().unwrap_or(0);
        let what = match why_not_ftrace {
            InstanceError::Permission(s) => format!("no permission for a tracefs instance: {s}"),
            InstanceError::Other(s) => format!("no tracefs instance: {s}"),
        };
        Ok(KernelSource {
            inner: Inner::Perf(Box::new(PerfSource::new(rings, decoder()?, max_cpu))),
            notice: Some(format!(
                "sonda: {what}; reading scheduler tracepoints through perf instead (wakeups on idle CPUs may be missed on some kernels)"
            )),
        })
    }

    /// A one-line message for the user about how the kernel is read, if it is not the
    /// best way.
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }

    /// The filter that makes the kernel record only the traced tasks, when the
    /// tracepoints are read from ftrace (perf has none for per-CPU events: the
    /// recorder's follower does the filtering then).
    pub fn task_filter(&self) -> Option<task_filter::TaskFilter> {
        match &self.inner {
            Inner::Bpf(s) => Some(s.task_filter()),
            Inner::Ftrace(s) => Some(s.task_filter()),
            Inner::Perf(_) => None,
        }
    }

    /// Whether each switch this source delivers is dated by the scheduler's clock it
    /// was made by (the BPF programs write that clock; see `switch_clock`), so that
    /// readers must not infer the clock from the threads' charges again.
    pub fn dates_switches_by_clock(&self) -> bool {
        matches!(self.inner, Inner::Bpf(_))
    }

    /// Has the kernel count the programs' runs and their time from now on, for the
    /// recording's counters (`kernel.bpf_runs`, `kernel.bpf_run_ns`): the BPF source
    /// only; an error says why not.
    pub fn count_cost(&mut self) -> Result<(), String> {
        match &mut self.inner {
            Inner::Bpf(s) => s.count_cost(),
            Inner::Ftrace(_) | Inner::Perf(_) => Err(
                "the kernel is read through ftrace or perf here, whose cost the kernel does not count".into(),
            ),
        }
    }

    /// Starts recording.
    pub fn enable(&mut self) -> std::io::Result<()> {
        match &mut self.inner {
            Inner::Bpf(s) => s.enable(),
            Inner::Ftrace(s) => s.enable(),
            Inner::Perf(s) => s.enable(),
        }
    }

    /// Stops recording; what is in the buffers can still be read.
    pub fn disable(&mut self) -> std::io::Result<()> {
        match &mut self.inner {
            Inner::Bpf(s) => s.disable(),
            Inner::Ftrace(s) => s.disable(),
            Inner::Perf(s) => s.disable(),
        }
    }

    /// Appends records read now to `out`, decoded; after [`KernelSource::disable`],
    /// everything left. Each CPU's records come in about time order, not exactly.
    /// Says whether records were left to read (a read takes a bounded amount, so that
    /// no buffer waits for another to be emptied) and how full the fullest buffer was.
    pub fn read(&mut self, out: &mut Vec<Record>) -> Drained {
        match &mut self.inner {
            Inner::Bpf(s) => s.read(out),
            Inner::Ftrace(s) => s.read(out),
            Inner::Perf(s) => s.read(out),
        }
    }

    /// Bytes of one CPU's buffer.
    pub fn buffer_bytes(&self) -> usize {
        match &self.inner {
            Inner::Bpf(s) => s.buffer_bytes(),
            Inner::Ftrace(s) => s.buffer_bytes(),
            Inner::Perf(s) => s.buffer_bytes(),
        }
    }

    /// What was read so far.
    pub fn stats(&self) -> KernelStats {
        match &self.inner {
            Inner::Bpf(s) => s.stats(),
            Inner::Ftrace(s) => s.stats(),
            Inner::Perf(s) => s.stats(),
        }
    }
}

/// A tracepoint as `(subsystem, name)`.
type Tracepoint<'a> = (&'a str, &'a str);

/// The ftrace path.
fn open_ftrace(
    tracefs: &Tracefs,
    decoder: SchedDecoder,
    events: &[(&str, &str)],
    cpus: &[u16],
    ring_bytes: usize,
) -> Result<KernelSource, InstanceError> {
    let header = |rel: &str| {
        tracefs
            .read(rel)
            .map_err(|e| InstanceError::Other(e.to_string()))
    };
    let layout = PageLayout::parse(
        &header("events/header_page")?,
        &header("events/header_event")?,
    )
    .map_err(|e| InstanceError::Other(e.to_string()))?;
    // Migrations and CPU-time charges come from an instance of their own, which the
    // task filter never narrows: the kernel writes them about a task from any other
    // task's context (see `ftrace_source`).
    let (main, side): (Vec<Tracepoint>, Vec<Tracepoint>) = events
        .iter()
        .partition(|e| **e != MIGRATE_TRACEPOINT && **e != CPU_TIME_TRACEPOINT);
    let instance = Instance::create(tracefs, &main, ring_bytes, cpus, layout.page_size())?;
    let unfiltered = if side.is_empty() {
        None
    } else {
        Some(Instance::create(
            tracefs,
            &side,
            ring_bytes,
            cpus,
            layout.page_size(),
        )?)
    };
    Ok(KernelSource {
        inner: Inner::Ftrace(Box::new(FtraceSource::new(
            instance, unfiltered, layout, decoder,
        ))),
        notice: None,
    })
}

fn tracefs_error(e: TracefsError) -> KernelError {
    match e {
        TracefsError::Permission(_) => KernelError::Permission(e.to_string()),
        _ => KernelError::Other(e.to_string()),
    }
}
