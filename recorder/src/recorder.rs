//! A recording from start to end: opens the sources, starts the command (or attaches to
//! a running JVM), runs the drain cycle until the command exits (or the attach ends),
//! and finishes the trace.
//!
//! One cycle (every 50 ms; with the /proc fallback, /proc is sampled every 10 ms and the
//! rest runs every 100 ms):
//! 1. take the records the kernel reader thread read from the rings (or sample /proc);
//! 2. drain the agent rings (what the ring copier staged first, see
//!    [`crate::agent::copier`]), *then* take a TSC calibration point, so that every
//!    drained record lies before it and converts by interpolation; copy new agent
//!    metadata;
//! 3. hand everything to the watermark and release what is older than now − lag, in time
//!    order, through the process-tree follower into the trace, in pieces of
//!    [`RELEASE_CHUNK`] records with the agent rings drained again between pieces;
//! 4. flush complete blocks, so a collector killed at any moment leaves a trace that
//!    reads up to the last cycle.
//!
//! At the end (the command exited) the kernel events are stopped, everything left is
//! read and written, and the trace gets its end block with the final counters.
//!
//! # Attach
//! The subject is then a running process: it is the root of the followed tree (its
//! threads and any children it creates), each of its threads gets an
//! [`Event::ProcSample`] at the start (state, CPU, run and wait times from /proc) so the
//! trace knows every thread's state from the first instant, and the agent is loaded
//! into it once the kernel events are on. The recording waits for the agent to report
//! its instrumentation in place, runs until the duration is over, the caller says stop
//! (a signal) or the process exits, then sets the stop flag and keeps draining until
//! the agent confirms it stopped and restored its classes (at most [`STOP_WAIT`]).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use sonda_filter::MethodFilter;
use sonda_shm::{AgentState, Clock};
use sonda_trace::{Event, Meta, Pid, Record, Source, Time, TraceWriter, SWITCHES_CLOCK_DATED};

use crate::tap::{LiveStats, Tap, Tapped};

use crate::agent::buffer_file::BufferPlace;
use crate::agent::packed::PackedRun;
use crate::agent::pid_map::PidMap;
use crate::agent::sizing::Wanted;
use crate::agent::{AgentSettings, AgentSource, Drained};
use crate::child::{self, Child};
use crate::follow::{Follow, ProcLookup};
use crate::kernel::reader_thread::KernelReader;
use crate::kernel::task_filter::TaskFilter;
use crate::kernel::{KernelError, KernelSource, KernelStats};
use crate::liveness::Watched;
use crate::procfs::{self, ProcSampler};
use crate::tsc::{self, Calibration};
use crate::wake_audit::WakeAudit;
use crate::watermark::Watermark;
use crate::{clock, host, launch, sys};

/// Cycle period with kernel tracepoints.
const CYCLE: Duration = Duration::from_millis(50);
/// /proc sampling period of the fallback.
const PROC_PERIOD: Duration = Duration::from_millis(10);
/// Samples per cycle with the fallback.
const PROC_SAMPLES_PER_CYCLE: u32 = 10;
/// How long to wait after the command exits for its last kernel records (its final
/// switch-out is written just after its parent is told it exited).
const SETTLE: Duration = Duration::from_millis(20);
/// Longest wait for an attached agent to report its instrumentation in place
/// (retransforming thousands of classes takes seconds).
const READY_WAIT: Duration = Duration::from_secs(60);
/// Longest wait for an attached agent to confirm it stopped and restored its classes.
const STOP_WAIT: Duration = Duration::from_secs(5);
/// Records released between two drains of the agents' rings within a cycle. Writing a
/// cycle's backlog at 10 million events a second takes tens of milliseconds, in which a
/// thread fills a 1 MiB ring several times over: the rings are drained again after
/// each piece (about 2 ms of work) so that none of them waits for the whole backlog.
const RELEASE_CHUNK: usize = 16 * 1024;
/// The nice value of the cycle's thread while recording (when permitted: root or
/// CAP_SYS_NICE), as the kernel reader's. On a saturated machine the traced program's
/// threads compete with the collector for the CPU; at nice 0 the collector gets its
/// fair share only, which at high event rates is less than the rings need to not
/// overflow (measured in docs/overhead.md). Set once the command was started, so that
/// the command does not inherit it.
const CYCLE_NICE: i32 = -10;

/// What to record and how.
pub struct Settings<'a> {
    /// The trace file, already created (so that an unwritable path failed early). The
    /// caller owns the file's name: it may write under a temporary name and rename the
    /// file once [`record`] returned; the recorder never removes or renames it.
    pub output: File,
    /// The trace's path as the user knows it, for messages.
    pub output_path: PathBuf,
    /// The command to start, or the process to attach to.
    pub subject: Subject<'a>,
    /// The validated `--methods` filter.
    pub methods: MethodFilter,
    /// The agent's overhead budget (`--budget`), hundredths of a percent
    /// (`sonda_shm::config::AgentConfig::budget`).
    pub budget: Option<u32>,
    /// Bytes of kernel ring per CPU.
    pub kernel_ring: usize,
    /// Count what the kernel programs cost (`--kernel-cost`: the kernel's BPF
    /// statistics on for the recording; `kernel.bpf_runs`, `kernel.bpf_run_ns`).
    pub kernel_cost: bool,
    /// The agent buffer's sizes the user gave (bytes of ring per thread, slots:
    /// threads that can record at once); what is not given is chosen to fit.
    pub agent_sizes: Wanted,
    /// Where the agent buffer file goes (a directory every traced process can reach).
    pub buffer: BufferPlace,
    /// How long records are held back to be released in time order (the watermark
    /// trails now by this much).
    pub lag: Duration,
    /// Gets a copy of everything written to the trace, for live views (`--metrics`);
    /// see [`crate::tap`].
    pub tap: Option<Box<dyn Tap>>,
}

/// What a recording follows.
pub enum Subject<'a> {
    /// A command sonda starts and records until it exits.
    Launch {
        /// The program to run (resolved in PATH).
        program: PathBuf,
        /// The command line as given (`argv[0]` first).
        argv: Vec<OsString>,
        /// The agent library, if found.
        agent_lib: Option<PathBuf>,
    },
    /// A running JVM the agent is attached to.
    Attach(Attach<'a>),
}

/// Loads the agent into the JVM on the buffer file (given as the JVM sees it); returns
/// once `Agent_OnAttach` answered.
pub type LoadAgent<'a> = Box<dyn FnOnce(&Path) -> anyhow::Result<()> + 'a>;

/// How to attach to a running JVM; the attach protocol itself is the caller's.
pub struct Attach<'a> {
    /// The JVM's pid.
    pub pid: Pid,
    /// Loads the agent on the buffer file (given as the JVM sees it), returning once
    /// `Agent_OnAttach` answered; its error ends the recording before it started.
    pub load: LoadAgent<'a>,
    /// Whether the user asked to stop (Ctrl-C, SIGTERM), polled every cycle.
    pub stop_requested: Box<dyn Fn() -> bool + 'a>,
    /// Record for this long once the agent is ready; `None`: until stopped.
    pub duration: Option<Duration>,
    /// When the `sonda attach` command started, for the time to the first event.
    pub started: Time,
}

/// What a recording ended with, once the subject started (the command ran or the
/// agent was loaded). From then on the trace holds what was recorded, whatever
/// happens after: a failure is reported here, not as an error of [`record`], so that the
/// caller keeps the trace.
pub struct Outcome {
    /// The command's exit code (shell convention).
    pub exit_code: i32,
    /// Why the recording failed after the subject started (the trace then stops where
    /// the failure came: it is readable up to its last complete block).
    pub failure: Option<anyhow::Error>,
}

/// Records written per source, for the summary.
#[derive(Default)]
struct Tally {
    /// Thread states and process tree: kernel tracepoints or /proc samples.
    scheduler: u64,
    /// Agents' events.
    agent: u64,
    /// When the first method entry written happened.
    first_enter: Option<Time>,
}

impl Tally {
    fn count(&mut self, r: &Record) {
        if self.first_enter.is_none() && matches!(r.event, Event::Enter { .. }) {
            self.first_enter = Some(r.time);
        }
        let e = &r.event;
        if e.is_sched_tracepoint()
            || matches!(e, Event::ProcSample { .. } | Event::KernelLost { .. })
        {
            self.scheduler += u64::from(r.count());
        } else {
            self.agent += 1;
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
    watermark: Watermark,
    follow: Follow<ProcLookup>,
    writer: Tapped<W>,
    lag_ns: u64,
    batch: Vec<Record>,
    /// The agents' rings drained this cycle, kept as they came (see
    /// [`crate::agent::packed`]).
    packed: Vec<PackedRun>,
    metas: Vec<Meta>,
    tally: Tally,
    wakes: WakeAudit,
    /// Cycles run because an agent's ring passed a quarter full.
    bell_cycles: u64,
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
            let watermark = &mut self.watermark;
            k.take(|batch| watermark.extend_from(batch));
        }
        self.take_agents(now);
        let watermark = if end {
            Time(u64::MAX)
        } else {
            Time(now.0.saturating_sub(self.lag_ns))
        };
        // In pieces, with the agents' rings drained between them (see RELEASE_CHUNK);
        // what they give joins the watermark and goes out this cycle if old enough. At
        // the end everything goes at once: the agents have stopped writing.
        let chunk = if end { usize::MAX } else { RELEASE_CHUNK };
        while self.release(watermark, chunk)? {
            self.take_agents(clock::monotonic());
        }
        self.writer.flush()?;
        if self.writer.tapped() {
            let stats = self.live_stats();
            self.writer.cycle(&stats);
        }
        self.agent.heartbeat(now.0);
        Ok(())
    }

    /// Drains the agents' rings into the watermark: drain first, then calibrate, so
    /// that every drained record lies before the point and converts by interpolation;
    /// then the metadata the agents published before those records.
    fn take_agents(&mut self, now: Time) {
        let now_raw = match self.agent_clock {
            Clock::Tsc => clock::rdtsc(),
            Clock::Monotonic => now.0,
        };
        let follow = &mut self.follow;
        let drained_from = self.batch.len();
        let drained = Drained {
            records: &mut self.batch,
            packed: &mut self.packed,
            pool: self.watermark.byte_buffers(),
        };
        self.agent.drain(now_raw, drained, |pid, tid| {
            follow.note_agent_thread(pid, tid)
        });
        if self.agent_clock == Clock::Tsc {
            self.calibration.add(tsc::measure());
            let (calibration, segment) = (&self.calibration, self.calibration.newest_segment());
            let convert = |raw: u64| {
                segment
                    .and_then(|s| s.to_ns(raw))
                    .or_else(|| calibration.to_ns(raw))
                    .unwrap_or(now.0)
            };
            for r in &mut self.batch[drained_from..] {
                r.time = Time(convert(r.time.0));
            }
            for run in &mut self.packed {
                run.convert_times(convert);
            }
        }
        // Metadata an agent published before the records just drained is in the log now.
        let writer = &mut self.writer;
        self.agent.read_meta(|m| writer.meta(&m));
        for m in self.metas.drain(..) {
            self.writer.meta(&m);
        }
        self.watermark.extend_from(&mut self.batch);
        for run in self.packed.drain(..) {
            self.watermark.extend_packed(run);
        }
    }

    /// Releases up to `limit` records at or before `watermark` through the follower
    /// into the trace, each straight to the writer (no list in between); returns
    /// whether some are left (see [`Watermark::release`]).
    fn release(&mut self, watermark: Time, limit: usize) -> io::Result<bool> {
        let (follow, metas, writer) = (&mut self.follow, &mut self.metas, &mut self.writer);
        let (tally, wakes) = (&mut self.tally, &mut self.wakes);
        let mut failed = None;
        let more = self.watermark.release(watermark, limit, |mut r| {
            if failed.is_some() {
                return;
            }
            let keep = follow.process(&mut r, metas);
            if !metas.is_empty() {
                for m in metas.drain(..) {
                    writer.meta(&m);
                }
            }
            if keep {
                tally.count(&r);
                wakes.see(&r.event, |t| follow.is_followed(t));
                if let Err(e) = writer.record(&r) {
                    failed = Some(e);
                }
            }
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(more),
        }
    }

    /// The counters a tap gets after each cycle.
    fn live_stats(&self) -> LiveStats {
        LiveStats {
            events: self.tally.agent + self.tally.scheduler,
            dropped: self.agent.stats().dropped + self.agent.no_slot_drops(),
            collector_cpu_ns: host::own_cpu_ns(),
        }
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
            c(
                "agent.native_functions",
                self.agent.native_functions().0 as u64,
            ),
            c("collector.late_retimed", self.watermark.late_retimed()),
            c(
                "collector.bell_cycles",
                self.agent.copier_bells().unwrap_or(self.bell_cycles),
            ),
            c(
                "collector.copier_retries",
                self.agent.copier_retries().unwrap_or(0),
            ),
            c("collector.cpu_ns", host::own_cpu_ns()),
            c("collector.elapsed_ns", elapsed.as_nanos() as u64),
        ];
        if self.kernel.is_some() {
            let s = self.kernel_stats;
            counters.push(c("kernel.events", self.tally.scheduler));
            counters.push(c("kernel.lost", s.lost));
            counters.push(c("kernel.samples", s.samples));
            counters.push(c("kernel.undecodable", s.undecodable));
            if s.ftrace || s.bpf {
                counters.push(c("kernel.foreign_skipped", s.foreign_skipped));
                counters.push(c("kernel.foreign_misjudged", s.foreign_misjudged));
                counters.push(c("kernel.migrations_recovered", s.migrations_recovered));
            }
            counters.push(c("kernel.switches_recovered", s.repaired));
            counters.push(c("kernel.unseen_wakeups", self.wakes.unseen()));
            counters.push(c("kernel.ftrace", u64::from(s.ftrace)));
            if s.ftrace {
                counters.push(c("kernel.switches_resched_dated", s.switches_resched_dated));
            }
            counters.push(c("kernel.bpf", u64::from(s.bpf)));
            if s.bpf {
                counters.push(c("kernel.bpf_missed", s.missed));
                if s.bpf_runs > 0 {
                    counters.push(c("kernel.bpf_runs", s.bpf_runs));
                    counters.push(c("kernel.bpf_run_ns", s.bpf_run_ns));
                }
                counters.push(c("kernel.wakeups_recovered", s.wakeups_recovered));
                counters.push(c(SWITCHES_CLOCK_DATED, s.switches_clock_dated));
            }
            if !s.ftrace && !s.bpf {
                counters.push(c("kernel.switch_record_delay_ns", s.switch_delay_ns));
            }
        }
        if let Some(p) = &self.procfs {
            counters.push(c("procfs.events", self.tally.scheduler));
            counters.push(c("procfs.samples", p.samples()));
        }
        if a.unknown > 0 {
            counters.push(c("agent.unknown_records", a.unknown));
        }
        if self.agent.unmapped_ids() > 0 {
            counters.push(c("agent.unmapped_ids", self.agent.unmapped_ids()));
        }
        if self.agent.native_functions().1 > 0 {
            counters.push(c(
                "agent.native_without_id",
                self.agent.native_functions().1,
            ));
        }
        if a.bad_metas > 0 {
            counters.push(c("agent.bad_metas", a.bad_metas));
        }
        counters
    }
}

/// Records the subject: a command until it exits, or a running JVM until the attach
/// ends. An error means that the subject did not start (nothing was recorded); once it
/// started, the [`Outcome`] says whether the recording failed.
pub fn record(s: Settings) -> anyhow::Result<Outcome> {
    let cpus = host::online_cpus();
    let kernel = match KernelSource::open(&cpus, s.kernel_ring) {
        Ok(mut k) => {
            if let Some(notice) = k.notice() {
                say!("{notice}");
            }
            if s.kernel_cost {
                if let Err(why) = k.count_cost() {
                    say!("sonda: --kernel-cost: {why}; the programs' cost is not counted");
                }
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
    let attached = matches!(s.subject, Subject::Attach(_));
    let agent = AgentSource::create(
        &s.buffer,
        &AgentSettings {
            methods: s.methods.patterns().to_vec(),
            budget: s.budget,
            wanted: s.agent_sizes,
            clock: agent_clock,
            attach: attached,
        },
    )?;
    if let Some(notice) = agent.notice() {
        say!("{notice}");
    }
    let agent = RemoveOnDrop(Some(agent));
    if attached {
        // A first heartbeat before the agent comes: it stops by itself if they cease.
        agent.get().heartbeat(clock::monotonic().0);
    }

    let out_path = s.output_path.display().to_string();
    let mut writer = Tapped::new(
        TraceWriter::new(BufWriter::with_capacity(1 << 20, s.output))
            .with_context(|| format!("cannot write {out_path}"))?,
        s.tap,
    );
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
        command: match &s.subject {
            Subject::Launch { argv, .. } => argv
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            Subject::Attach(a) => vec!["attach".to_string(), a.pid.0.to_string()],
        },
        tool: format!("sonda {}", env!("CARGO_PKG_VERSION")),
    });
    if kernel
        .as_ref()
        .is_some_and(KernelSource::dates_switches_by_clock)
    {
        // Before any switch: a reader of a recording killed before its end block, and
        // the live metrics reading this one as it is written, learn here that the
        // switches are dated by the scheduler's clock (`TraceMeta::switches_dated_by_clock`).
        // The end block's value replaces this one.
        writer.meta(&Meta::Counter {
            name: SWITCHES_CLOCK_DATED.to_string(),
            value: 0,
        });
    }
    writer
        .flush()
        .with_context(|| format!("cannot write {out_path}"))?;
    let mut calibration = Calibration::new();
    calibration.add(tsc::measure());
    let opened = Opened {
        kernel,
        agent,
        agent_clock,
        calibration,
        writer,
        out_path,
        lag: s.lag,
    };
    match s.subject {
        Subject::Launch {
            program,
            argv,
            agent_lib,
        } => launch(opened, &program, &argv, agent_lib.as_deref()),
        Subject::Attach(a) => attach(opened, a),
    }
}

/// The sources and the trace, open, before the subject starts.
struct Opened<W: Write> {
    kernel: Option<KernelSource>,
    agent: RemoveOnDrop,
    agent_clock: Clock,
    calibration: Calibration,
    writer: Tapped<W>,
    out_path: String,
    lag: Duration,
}

impl<W: Write> Opened<W> {
    /// Makes the kernel record the scheduler events of `tids` and of what they create
    /// only (`kernel::task_filter`); the filter, if it is on. `SONDA_TASK_FILTER=0`
    /// turns it off (every task's events recorded, the follower keeping ours), to
    /// compare.
    fn task_filter(&self, tids: &[u32]) -> Option<TaskFilter> {
        if std::env::var_os("SONDA_TASK_FILTER").is_some_and(|v| v == "0") {
            return None;
        }
        let filter = self.kernel.as_ref()?.task_filter()?;
        match filter.follow(tids) {
            Ok(()) => Some(filter),
            Err(e) => {
                say!("sonda: no kernel task filter ({e}); recording every task's scheduler events");
                None
            }
        }
    }

    /// Turns the kernel events on and starts their reader.
    fn start_kernel(&mut self) -> anyhow::Result<Option<KernelReader>> {
        Ok(match self.kernel.take() {
            Some(mut k) => {
                k.enable().context("cannot enable kernel tracepoints")?;
                Some(KernelReader::start(k).context("cannot start the kernel reader thread")?)
            }
            None => None,
        })
    }

    /// The recording state, following `follow`'s tree.
    fn into_recording(
        self,
        kernel: Option<KernelReader>,
        follow: Follow<ProcLookup>,
        procfs: Option<ProcSampler>,
    ) -> Recording<W> {
        Recording {
            kernel,
            kernel_stats: KernelStats::default(),
            procfs,
            agent: self.agent.take(),
            agent_clock: self.agent_clock,
            calibration: self.calibration,
            watermark: Watermark::new(),
            follow,
            writer: self.writer,
            lag_ns: self.lag.as_nanos() as u64,
            batch: Vec::new(),
            packed: Vec::new(),
            metas: Vec::new(),
            tally: Tally::default(),
            wakes: WakeAudit::default(),
            bell_cycles: 0,
        }
    }
}

/// Starts the command with the agent option and records it until it exits.
fn launch(
    mut opened: Opened<BufWriter<File>>,
    program: &Path,
    argv: &[OsString],
    agent_lib: Option<&Path>,
) -> anyhow::Result<Outcome> {
    child::install_forwarding().context("cannot install signal handlers")?;
    // The command is forked by this thread: with this thread listed, the kernel lists
    // the command from its first instruction (event-fork), and all it creates.
    let filter = opened.task_filter(&[crate::sys::gettid()]);
    let kernel = opened.start_kernel()?;
    let agent_path = opened.agent.get().path().to_path_buf();
    let option = agent_lib
        .map(|lib| launch::agent_option(lib, &agent_path))
        .transpose()?;
    let existing = std::env::var_os(launch::JAVA_TOOL_OPTIONS);
    let injection = launch::inject(argv, option.as_deref(), existing.as_deref());
    let argv0 = &argv[0];
    let mut command = Child::spawn(
        program,
        argv0,
        &injection.args,
        &agent_path,
        injection.java_tool_options.as_deref(),
    )
    .with_context(|| format!("cannot start {}", argv0.to_string_lossy()))?;
    let began = Instant::now();
    if let Some(f) = &filter {
        // The collector's own threads (and what they create) are not recorded. Kernels
        // before 5.8 have no such list: the follower drops them, as without a filter.
        let own = procfs::tasks_of(Pid(std::process::id())).map(|(_, t)| t);
        let tids: Vec<u32> = own.iter().flatten().map(|t| t.tid.0).collect();
        let _ = f.exclude(&tids);
    }

    let root = Pid(command.pid());
    let name = Path::new(argv0)
        .file_name()
        .unwrap_or(argv0)
        .to_string_lossy()
        .into_owned();
    let (follow, root_meta) = Follow::new(ProcLookup, root, Pid(std::process::id()), &name);
    opened.writer.meta(&root_meta);
    let procfs = kernel.is_none().then(|| ProcSampler::new(root));
    let out_path = opened.out_path.clone();
    let mut rec = opened.into_recording(kernel, follow, procfs);

    let exit_code = match run(&mut rec, &mut command) {
        Ok(code) => code,
        Err(e) => {
            // The command must not suffer from a failed recording: let it finish.
            say!("sonda: recording failed: {e:#}; waiting for the command to exit");
            rec.kernel = None;
            let code = command.wait().unwrap_or(1);
            let _ = rec.agent.remove();
            // What was flushed before the failure stays in the trace.
            let _ = rec.writer.flush();
            return Ok(Outcome {
                exit_code: code,
                failure: Some(anyhow::anyhow!("the recording failed")),
            });
        }
    };
    let unrecorded = rec.agent.attached() == 0;
    if let Err(e) = finish(rec, began.elapsed(), &out_path) {
        return Ok(Outcome {
            exit_code,
            failure: Some(e),
        });
    }
    if unrecorded {
        say!(
            "sonda: {} did not load libsonda.so: kernel states only; link it with -lsonda (and build with -finstrument-functions) to record its functions",
            argv0.to_string_lossy()
        );
    }
    Ok(Outcome {
        exit_code,
        failure: None,
    })
}

/// Ends the trace (final counters) and prints the summary.
fn finish(
    mut rec: Recording<BufWriter<File>>,
    elapsed: Duration,
    out_path: &str,
) -> anyhow::Result<()> {
    let counters = rec.counters(elapsed);
    let stats = rec.live_stats();
    let lost = rec.kernel_stats.lost;
    let misjudged = rec.kernel_stats.foreign_misjudged;
    let (bpf_runs, bpf_run_ns) = (rec.kernel_stats.bpf_runs, rec.kernel_stats.bpf_run_ns);
    let agent_stats = rec.agent.stats();
    let dropped = agent_stats.dropped + rec.agent.no_slot_drops();
    let tally = std::mem::take(&mut rec.tally);
    let summary_warning = rec.agent.summary_warning().map(str::to_owned);
    let procfs = rec.procfs.is_some();
    let Recording { writer, agent, .. } = rec;
    let _ = agent.remove();
    let mut out = writer
        .finish(&counters, stats)
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
        "sonda: recorded {thread_source}, {} agent events ({dropped} dropped) in {:.1} s, collector CPU {:.2} s; {out_path} ({})",
        tally.agent,
        elapsed.as_secs_f64(),
        host::own_cpu_ns() as f64 / 1e9,
        human_size(size)
    );
    if bpf_runs > 0 {
        say!(
            "sonda: kernel programs ran {bpf_runs} times, {:.3} s of CPU in the tasks that hit the tracepoints ({:.0} ns a run; kernel.bpf_run_ns)",
            bpf_run_ns as f64 / 1e9,
            bpf_run_ns as f64 / bpf_runs as f64
        );
    }
    if misjudged > 0 {
        say!(
            "sonda: {misjudged} new task(s) lost kernel records, left out as another program's before their creation record was read (kernel.foreign_misjudged; please report)"
        );
    }
    if let Some(shown) = summary_warning {
        say!(
            "sonda: the agent warned {} time(s): {shown} (all of them: sonda report {out_path})",
            agent_stats.warnings
        );
    }
    Ok(())
}

/// Ticks at fixed deadlines, so that the work of a tick does not stretch the period:
/// with kernel events, one cycle per tick; with the /proc fallback, one /proc sample
/// per tick and a cycle every [`PROC_SAMPLES_PER_CYCLE`].
struct Ticker {
    tick: Duration,
    ticks_per_cycle: u32,
    next: Instant,
    ticks: u32,
    /// The thread's nice value before [`CYCLE_NICE`], restored when the ticker goes.
    nice_before: Option<i32>,
}

impl Ticker {
    fn new<W: Write>(rec: &Recording<W>) -> Ticker {
        let (tick, ticks_per_cycle) = if rec.procfs.is_some() {
            (PROC_PERIOD, PROC_SAMPLES_PER_CYCLE)
        } else {
            (CYCLE, 1)
        };
        // Without permission the thread keeps its nice value (and nothing is restored).
        let nice_before = sys::thread_nice()
            .ok()
            .filter(|_| sys::set_thread_nice(CYCLE_NICE).is_ok());
        Ticker {
            tick,
            ticks_per_cycle,
            next: Instant::now(),
            ticks: 0,
            nice_before,
        }
    }

    /// One tick's work, then a wait until the next deadline, during which every ring
    /// an agent says is a quarter full gets drained at once (an extra cycle).
    fn tick<W: Write>(&mut self, rec: &mut Recording<W>) -> io::Result<()> {
        rec.sample_proc();
        self.ticks += 1;
        if self.ticks == self.ticks_per_cycle {
            self.ticks = 0;
            rec.cycle(false)?;
        }
        self.next += self.tick;
        loop {
            let now = Instant::now();
            if self.next <= now {
                // Fell behind: no burst of cycles to catch up.
                self.next = self.next.max(now.checked_sub(self.tick).unwrap_or(now));
                return Ok(());
            }
            if rec.agent.wait_for_bell(self.next - now) {
                rec.bell_cycles += 1;
                rec.cycle(false)?;
            }
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        // The caller's thread goes on (the command's wait, the summary) at its own.
        if let Some(nice) = self.nice_before {
            let _ = sys::set_thread_nice(nice);
        }
    }
}

/// The end of a recording: the last kernel records, then everything drained.
fn drain_all<W: Write>(rec: &mut Recording<W>) -> io::Result<()> {
    std::thread::sleep(SETTLE);
    // From here the cycle alone drains: the last cycle takes everything staged.
    rec.agent.stop_copier();
    if let Some(k) = &mut rec.kernel {
        rec.kernel_stats = k.finish(&mut rec.batch);
    }
    rec.sample_proc();
    rec.cycle(true)
}

/// The cycle loop: runs until the command exits, then drains everything.
fn run<W: Write>(rec: &mut Recording<W>, command: &mut Child) -> io::Result<i32> {
    let mut ticker = Ticker::new(rec);
    let code = loop {
        if let Some(code) = command.try_wait()? {
            break code;
        }
        ticker.tick(rec)?;
    };
    drain_all(rec)?;
    Ok(code)
}

/// Lists the threads of `pid` created since `given` was read, until a look finds none:
/// a thread created by a listed thread after its listing is listed by the kernel, one
/// created before is not.
fn follow_new_threads(filter: &TaskFilter, pid: Pid, mut given: Vec<u32>) {
    given.sort_unstable();
    for _ in 0..16 {
        let Some((_, now)) = procfs::tasks_of(pid) else {
            return;
        };
        let new: Vec<u32> = now
            .iter()
            .map(|t| t.tid.0)
            .filter(|t| given.binary_search(t).is_err())
            .collect();
        if new.is_empty() || filter.follow(&new).is_err() {
            return;
        }
        given.extend(new);
        given.sort_unstable();
    }
}

/// Attaches to a running JVM and records it until the attach ends (see the module
/// documentation).
fn attach(mut opened: Opened<BufWriter<File>>, a: Attach<'_>) -> anyhow::Result<Outcome> {
    let pid = a.pid;
    // Asked at every tick: a pidfd's poll, not a read of /proc/<pid>/stat (see
    // `liveness`).
    let watched = Watched::open(pid).ok_or_else(|| anyhow::anyhow!("no process with pid {pid}"))?;
    let alive = || watched.alive();
    // Every thread alive now, sampled before the kernel events start: their first
    // evidence (in /proc fallback the sampler does this itself).
    let before = clock::monotonic();
    let (process, tasks) =
        procfs::tasks_of(pid).ok_or_else(|| anyhow::anyhow!("process {pid} exited"))?;
    let tids: Vec<u32> = tasks.iter().map(|t| t.tid.0).collect();
    if let Some(f) = opened.task_filter(&tids) {
        follow_new_threads(&f, pid, tids);
    }
    let kernel = opened.start_kernel()?;
    let (mut follow, root_meta) = Follow::new(ProcLookup, pid, Pid(process.ppid), &process.comm);
    opened.writer.meta(&root_meta);
    let procfs = kernel.is_none().then(|| ProcSampler::new(pid));
    let mut metas = Vec::new();
    let mut samples = Vec::new();
    if procfs.is_none() {
        for t in &tasks {
            follow.adopt(
                pid,
                Pid(process.ppid),
                t.tid,
                &t.stat.comm,
                &process.comm,
                &mut metas,
            );
            samples.push(Record {
                time: before,
                event: t.sample(),
            });
        }
    }
    for m in &metas {
        opened.writer.meta(m);
    }
    let agent_path = opened.agent.get().path().to_path_buf();
    let out_path = opened.out_path.clone();
    // The attach itself; on failure nothing is left behind (buffer file, trace file).
    (a.load)(&agent_path)?;
    let began = Instant::now();
    let mut rec = opened.into_recording(kernel, follow, procfs);
    rec.batch.extend(samples);
    if let Some(map) = PidMap::for_process(pid) {
        // A JVM in a container: its agent speaks in the ids of its pid namespace.
        rec.agent.translate_ids(map);
    }

    let stop_requested = &a.stop_requested;
    let mut ticker = Ticker::new(&rec);
    let recorded: io::Result<()> = (|| {
        // Until the agent's instrumentation is in place.
        let waiting = Instant::now();
        while rec.agent.agent_state() == AgentState::Starting {
            if stop_requested() || !alive() {
                break;
            }
            if waiting.elapsed() > READY_WAIT {
                say!(
                    "sonda: the agent in JVM {pid} did not report ready within {} s; recording anyway",
                    READY_WAIT.as_secs()
                );
                break;
            }
            ticker.tick(&mut rec)?;
        }
        let until = a.duration.map(|d| Instant::now() + d);
        if !stop_requested() && alive() {
            let how = match a.duration {
                Some(d) => format!("for {} s", d.as_secs_f64()),
                None => "until Ctrl-C".to_string(),
            };
            say!(
                "sonda: attached to JVM {pid} ({}) in {:.2} s; recording {how}",
                process.comm,
                clock::monotonic().0.saturating_sub(a.started.0) as f64 / 1e9
            );
        }
        while !stop_requested() && until.is_none_or(|u| Instant::now() < u) && alive() {
            ticker.tick(&mut rec)?;
        }
        if alive() {
            // Detach: the agent switches its events off, restores the classes and says
            // so; drain meanwhile, so that nothing it writes before is lost.
            rec.agent.request_stop();
            let asked = Instant::now();
            while rec.agent.agent_state() != AgentState::Stopped && alive() {
                if asked.elapsed() > STOP_WAIT {
                    say!(
                        "sonda: the agent in JVM {pid} did not confirm it stopped within {} s; its classes may still be instrumented",
                        STOP_WAIT.as_secs()
                    );
                    break;
                }
                ticker.tick(&mut rec)?;
            }
        } else {
            say!("sonda: JVM {pid} exited during the recording");
        }
        drain_all(&mut rec)
    })();
    if let Err(e) = recorded {
        rec.agent.request_stop();
        rec.kernel = None;
        let _ = rec.agent.remove();
        let _ = rec.writer.flush();
        return Ok(Outcome {
            exit_code: 0,
            failure: Some(anyhow::anyhow!("recording failed: {e}")),
        });
    }
    if rec.agent.agent_state() == AgentState::Stopped {
        say!("sonda: detached from JVM {pid}: events off, original classes restored");
    }
    if let Some(first) = rec.tally.first_enter {
        say!(
            "sonda: first method event {:.3} s after sonda attach started",
            first.0.saturating_sub(a.started.0) as f64 / 1e9
        );
    }
    let failure = finish(rec, began.elapsed(), &out_path).err();
    Ok(Outcome {
        exit_code: 0,
        failure,
    })
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
