//! A recording from start to end: opens the sources, starts the command, runs the drain
//! cycle until the command exits, and finishes the trace.
//!
//! One cycle (every 50 ms; with the /proc fallback, /proc is sampled every 10 ms and the
//! rest runs every 100 ms):
//! 1. take the records the kernel reader thread read from the rings (or sample /proc);
//! 2. drain the agent rings, *then* take a TSC calibration point, so that every drained
//!    record lies before it and converts by interpolation; copy new agent metadata;
//! 3. hand everything to the merger and release what is older than now − lag, in time
//!    order, through the process-tree follower into the trace;
//! 4. flush complete blocks, so a collector killed at any moment leaves a trace that
//!    reads up to the last cycle.
//!
//! At the end (the command exited) the kernel events are stopped, everything left is
//! read and written, and the trace gets its end block with the final counters.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use sonda_filter::MethodFilter;
use sonda_shm::Clock;
use sonda_trace::{Event, Meta, Pid, Record, Source, Time, TraceWriter};

use crate::agent::buffer_file::SHM_DIR;
use crate::agent::{AgentSettings, AgentSource, Stamped};
use crate::child::{self, Child};
use crate::follow::{Follow, ProcLookup};
use crate::kernel::reader_thread::KernelReader;
use crate::kernel::{KernelError, KernelSource, KernelStats};
use crate::merge::Merger;
use crate::procfs::ProcSampler;
use crate::tsc::{self, Calibration};
use crate::wake_audit::WakeAudit;
use crate::{clock, host, launch};

/// Cycle period with kernel tracepoints.
const CYCLE: Duration = Duration::from_millis(50);
/// /proc sampling period of the fallback.
const PROC_PERIOD: Duration = Duration::from_millis(10);
/// Samples per cycle with the fallback.
const PROC_SAMPLES_PER_CYCLE: u32 = 10;
/// How long to wait after the command exits for its last kernel records (its final
/// switch-out is written just after its parent is told it exited).
const SETTLE: Duration = Duration::from_millis(20);

/// What to record and how.
pub struct Settings {
    /// The trace file, already created (so that an unwritable path failed early).
    pub output: File,
    /// Its path, for the summary.
    pub output_path: PathBuf,
    /// The program to run (resolved in PATH).
    pub program: PathBuf,
    /// The command line as given (`argv[0]` first).
    pub argv: Vec<OsString>,
    /// The agent library, if found.
    pub agent_lib: Option<PathBuf>,
    /// The validated `--methods` filter.
    pub methods: MethodFilter,
    /// Bytes of kernel ring per CPU.
    pub kernel_ring: usize,
    /// Bytes of agent ring per thread.
    pub agent_ring: u32,
    /// Agent slots (threads that can record at once).
    pub agent_slots: u32,
    /// How long records are held for the merge.
    pub lag: Duration,
}

/// What a recording ended with.
pub struct Outcome {
    /// The command's exit code (shell convention).
    pub exit_code: i32,
}

/// Records written per source, for the summary.
#[derive(Default)]
struct Tally {
    /// Thread states and process tree: kernel tracepoints or /proc samples.
    scheduler: u64,
    /// Agents' events.
    agent: u64,
}

impl Tally {
    fn count(&mut self, e: &Event) {
        match e {
            Event::ProcSample { .. }
            | Event::Switch { .. }
            | Event::Waking { .. }
            | Event::Wakeup { .. }
            | Event::NewTask { .. }
            | Event::TaskExit { .. }
            | Event::Exec { .. }
            | Event::Rename { .. }
            | Event::KernelLost { .. } => self.scheduler += 1,
            _ => self.agent += 1,
        }
    }
}

/// The state of a running recording.
struct Recording<W: Write> {
    kernel: Option<KernelReader>,
    /// The kernel reader's tally, once it finished.
    kernel_stats: KernelStats,
    procfs: Option<ProcSampler>,
    agent: AgentSource,
    agent_clock: Clock,
    calibration: Calibration,
    merger: Merger,
    follow: Follow<ProcLookup>,
    writer: TraceWriter<W>,
    lag_ns: u64,
    batch: Vec<Record>,
    stamped: Vec<Stamped>,
    ready: Vec<Record>,
    metas: Vec<Meta>,
    tally: Tally,
    wakes: WakeAudit,
}

impl<W: Write> Recording<W> {
    /// One /proc sample (fallback only).
    fn sample_proc(&mut self) {
        if let Some(p) = &mut self.procfs {
            p.sample(
                clock::monotonic(),
                &mut self.batch,
                &mut self.follow,
                &mut self.metas,
            );
        }
    }

    /// One drain cycle; `end` releases everything instead of stopping at the watermark.
    fn cycle(&mut self, end: bool) -> io::Result<()> {
        let now = clock::monotonic();
        if let Some(k) = &self.kernel {
            let merger = &mut self.merger;
            k.take(|batch| merger.extend(batch));
        }
        // Agent: drain first, then calibrate, so drained records lie before the point.
        let now_raw = match self.agent_clock {
            Clock::Tsc => clock::rdtsc(),
            Clock::Monotonic => now.0,
        };
        let follow = &mut self.follow;
        self.agent.drain(now_raw, &mut self.stamped, |pid, tid| {
            follow.note_agent_thread(pid, tid)
        });
        if self.agent_clock == Clock::Tsc {
            self.calibration.add(tsc::measure());
        }
        for s in self.stamped.drain(..) {
            let time = match self.agent_clock {
                Clock::Tsc => self.calibration.to_ns(s.raw).unwrap_or(now.0),
                Clock::Monotonic => s.raw,
            };
            self.batch.push(Record {
                time: Time(time),
                event: s.event,
            });
        }
        // Metadata an agent published before the records just drained is in the log now.
        let writer = &mut self.writer;
        self.agent.read_meta(|m| writer.meta(&m));
        for m in self.metas.drain(..) {
            self.writer.meta(&m);
        }
        self.merger.extend(self.batch.drain(..));
        let ready = &mut self.ready;
        if end {
            self.merger.release_all(|r| ready.push(r));
        } else {
            self.merger
                .release(Time(now.0.saturating_sub(self.lag_ns)), |r| ready.push(r));
        }
        for r in self.ready.drain(..) {
            if self.follow.process(&r, &mut self.metas) {
                for m in self.metas.drain(..) {
                    self.writer.meta(&m);
                }
                self.tally.count(&r.event);
                let follow = &self.follow;
                self.wakes.see(&r.event, |t| follow.is_followed(t));
                self.writer.record(&r)?;
            } else {
                for m in self.metas.drain(..) {
                    self.writer.meta(&m);
                }
            }
        }
        self.writer.flush()?;
        self.agent.heartbeat(now.0);
        Ok(())
    }

    /// The final counters of the end block.
    fn counters(&self, elapsed: Duration) -> Vec<Meta> {
        let c = |name: &str, value: u64| Meta::Counter {
            name: name.to_string(),
            value,
        };
        let a = self.agent.stats();
        let mut counters = vec![
            c("agent.events", self.tally.agent),
            c("agent.dropped", a.dropped),
            c("agent.dropped_enters", a.dropped_enters),
            c("agent.no_slot", self.agent.no_slot_drops()),
            c("agent.meta_dropped", self.agent.meta_drops()),
            c("agent.processes", u64::from(self.agent.attached())),
            c("collector.late_retimed", self.merger.late_retimed()),
            c("collector.cpu_ns", host::own_cpu_ns()),
            c("collector.elapsed_ns", elapsed.as_nanos() as u64),
        ];
        if self.kernel.is_some() {
            let s = self.kernel_stats;
            counters.push(c("kernel.events", self.tally.scheduler));
            counters.push(c("kernel.lost", s.lost));
            counters.push(c("kernel.samples", s.samples));
            counters.push(c("kernel.undecodable", s.undecodable));
            counters.push(c("kernel.switches_recovered", s.repaired));
            counters.push(c("kernel.unseen_wakeups", self.wakes.unseen()));
            counters.push(c("kernel.ftrace", u64::from(s.ftrace)));
            counters.push(c("kernel.switch_record_delay_ns", s.switch_delay_ns));
        }
        if let Some(p) = &self.procfs {
            counters.push(c("procfs.events", self.tally.scheduler));
            counters.push(c("procfs.samples", p.samples()));
        }
        if a.unknown > 0 {
            counters.push(c("agent.unknown_records", a.unknown));
        }
        if a.bad_metas > 0 {
            counters.push(c("agent.bad_metas", a.bad_metas));
        }
        counters
    }
}

/// Removes the trace file if the recording fails before the command starts.
struct Unstarted<'a>(Option<&'a Path>);

impl Drop for Unstarted<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Records `s.argv` until it exits.
pub fn record(s: Settings) -> anyhow::Result<Outcome> {
    let mut unstarted = Unstarted(Some(&s.output_path));
    let cpus = host::online_cpus();
    let kernel = match KernelSource::open(&cpus, s.kernel_ring) {
        Ok(k) => {
            if let Some(notice) = k.notice() {
                say!("{notice}");
            }
            Some(k)
        }
        Err(KernelError::Permission(_)) => {
            say!(
                "sonda: no permission for kernel tracepoints (run as root or grant CAP_PERFMON); sampling /proc every 10 ms instead"
            );
            None
        }
        Err(KernelError::Other(why)) => {
            say!(
                "sonda: cannot use kernel tracepoints ({why}); sampling /proc every 10 ms instead"
            );
            None
        }
    };
    let agent_clock = if tsc::tsc_is_usable() {
        Clock::Tsc
    } else {
        Clock::Monotonic
    };
    let agent = AgentSource::create(
        Path::new(SHM_DIR),
        &AgentSettings {
            method_lines: s.methods.to_config_lines(),
            slots: s.agent_slots,
            ring_len: s.agent_ring,
            meta_len: 16 << 20,
            clock: agent_clock,
        },
    )
    .with_context(|| format!("cannot create the agent buffer in {SHM_DIR}"))?;
    let agent = RemoveOnDrop(Some(agent));

    let out_path = s.output_path.display().to_string();
    let mut writer = TraceWriter::new(BufWriter::with_capacity(1 << 20, s.output))
        .with_context(|| format!("cannot write {out_path}"))?;
    let start = clock::monotonic();
    writer.meta(&Meta::TraceInfo {
        source: if kernel.is_some() {
            Source::Tracepoints
        } else {
            Source::Procfs
        },
        start,
        host: host::hostname(),
        cpus: cpus.iter().max().map_or(1, |&m| m + 1),
        command: s
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        tool: format!("sonda {}", env!("CARGO_PKG_VERSION")),
    });
    writer
        .flush()
        .with_context(|| format!("cannot write {out_path}"))?;
    let mut calibration = Calibration::new();
    calibration.add(tsc::measure());

    child::install_forwarding().context("cannot install signal handlers")?;
    let kernel = match kernel {
        Some(mut k) => {
            k.enable().context("cannot enable kernel tracepoints")?;
            Some(KernelReader::start(k).context("cannot start the kernel reader thread")?)
        }
        None => None,
    };
    let agent_path = agent.get().path().to_path_buf();
    let option = s
        .agent_lib
        .as_deref()
        .map(|lib| launch::agent_option(lib, &agent_path));
    let existing = std::env::var_os(launch::JAVA_TOOL_OPTIONS);
    let injection = launch::inject(&s.argv, option.as_deref(), existing.as_deref());
    let argv0 = &s.argv[0];
    let mut command = Child::spawn(
        &s.program,
        argv0,
        &injection.args,
        injection.java_tool_options.as_deref(),
    )
    .with_context(|| format!("cannot start {}", argv0.to_string_lossy()))?;
    unstarted.0 = None;
    let began = Instant::now();

    let root = Pid(command.pid());
    let name = Path::new(argv0)
        .file_name()
        .unwrap_or(argv0)
        .to_string_lossy()
        .into_owned();
    let (follow, root_meta) = Follow::new(ProcLookup, root, Pid(std::process::id()), &name);
    writer.meta(&root_meta);
    let procfs = kernel.is_none().then(|| ProcSampler::new(root));
    let mut rec = Recording {
        kernel,
        kernel_stats: KernelStats::default(),
        procfs,
        agent: agent.take(),
        agent_clock,
        calibration,
        merger: Merger::new(),
        follow,
        writer,
        lag_ns: s.lag.as_nanos() as u64,
        batch: Vec::new(),
        stamped: Vec::new(),
        ready: Vec::new(),
        metas: Vec::new(),
        tally: Tally::default(),
        wakes: WakeAudit::default(),
    };

    let exit_code = match run(&mut rec, &mut command) {
        Ok(code) => code,
        Err(e) => {
            // The command must not suffer from a failed recording: let it finish.
            say!("sonda: recording failed: {e:#}; waiting for the command to exit");
            rec.kernel = None;
            let _ = command.wait();
            let _ = rec.agent.remove();
            return Err(anyhow::anyhow!("the trace {out_path} is incomplete"));
        }
    };
    let elapsed = began.elapsed();
    let counters = rec.counters(elapsed);
    let lost = rec.kernel_stats.lost;
    let dropped = rec.agent.stats().dropped + rec.agent.no_slot_drops();
    let tally = std::mem::take(&mut rec.tally);
    let procfs = rec.procfs.is_some();
    let Recording { writer, agent, .. } = rec;
    let _ = agent.remove();
    let mut out = writer
        .finish(&counters)
        .with_context(|| format!("cannot write {out_path}"))?;
    out.flush()
        .with_context(|| format!("cannot write {out_path}"))?;
    let size = out.get_ref().metadata().map(|m| m.len()).unwrap_or(0);
    let thread_source = if procfs {
        format!("{} /proc records", tally.scheduler)
    } else {
        format!("{} kernel events ({lost} lost)", tally.scheduler)
    };
    say!(
        "sonda: recorded {thread_source}, {} JVM events ({dropped} dropped) in {:.1} s, collector CPU {:.2} s; {out_path} ({})",
        tally.agent,
        elapsed.as_secs_f64(),
        host::own_cpu_ns() as f64 / 1e9,
        human_size(size)
    );
    Ok(Outcome { exit_code })
}

/// The cycle loop: runs until the command exits, then drains everything.
fn run<W: Write>(rec: &mut Recording<W>, command: &mut Child) -> io::Result<i32> {
    // Ticks at fixed deadlines, so that the work of a tick does not stretch the period.
    let (tick, ticks_per_cycle) = if rec.procfs.is_some() {
        (PROC_PERIOD, PROC_SAMPLES_PER_CYCLE)
    } else {
        (CYCLE, 1)
    };
    let mut next = Instant::now();
    let mut ticks = 0u32;
    let code = loop {
        if let Some(code) = command.try_wait()? {
            break code;
        }
        rec.sample_proc();
        ticks += 1;
        if ticks == ticks_per_cycle {
            ticks = 0;
            rec.cycle(false)?;
        }
        next += tick;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now; // fell behind: do not try to catch up in a burst
        }
    };
    std::thread::sleep(SETTLE);
    if let Some(k) = &mut rec.kernel {
        rec.kernel_stats = k.finish(&mut rec.batch);
    }
    rec.sample_proc();
    rec.cycle(true)?;
    Ok(code)
}

/// Owns the agent buffer until the recording takes it; removes the file on early exit.
struct RemoveOnDrop(Option<AgentSource>);

impl RemoveOnDrop {
    fn get(&self) -> &AgentSource {
        self.0.as_ref().expect("taken only once")
    }
    fn take(mut self) -> AgentSource {
        self.0.take().expect("taken only once")
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(a) = self.0.take() {
            let _ = a.remove();
        }
    }
}

fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}
