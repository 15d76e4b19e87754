//! The command line: what each subcommand takes. Parsing only; the subcommands'
//! modules in [`crate::commands`] do the work.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::limits;

/// Traces Java (and native) programs: methods, JVM events and kernel scheduling in one
/// time-ordered trace, viewable in Paraver.
#[derive(Parser, Debug)]
#[command(name = "sonda", version, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a command and record it until it exits: kernel scheduling of all its threads
    /// and child processes, and, in JVMs, the selected methods and JVM events.
    Record(RecordArgs),
    /// Attach to a running JVM and record it without restarting it: the selected
    /// methods (instrumented in place), JVM events and the kernel scheduling of its
    /// threads; at the end the original code is restored (the JVM can be attached again).
    Attach(AttachArgs),
    /// Export a trace to Paraver: STEM.prv, STEM.pcf, STEM.row and ready-made views
    /// (STEM.*.cfg).
    Paraver(ParaverArgs),
    /// Export a trace's calls (with their CPU, waiting and blocked time), thread states,
    /// wakeups, GCs and monitor waits as Parquet tables, for DuckDB, Spark and the like
    /// (docs/parquet.md).
    Export(ExportArgs),
    /// Merge traces recorded at the same time on the same host into one trace.
    Merge(MergeArgs),
    /// Print a trace's summary: threads' states, garbage collections, monitors, methods.
    Report(ReportArgs),
    /// Per-request service demands of the traced methods: CPU, waiting for a CPU and
    /// blocked time per call, their statistics and fitted distributions.
    Services(ServicesArgs),
    /// Write a JMT queueing model (.jsimg) of the recorded run, with per-call samples.
    Model(ModelArgs),
}

/// `sonda paraver`.
#[derive(Args, Debug)]
pub struct ParaverArgs {
    /// The trace to export.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Output files' path without extension (`out/app` writes `out/app.prv`, ...).
    #[arg(short, long, value_name = "STEM")]
    pub output: PathBuf,

    /// Leave out wakeups (drawn by default as communications from the waking thread
    /// to the woken one, between exported threads).
    #[arg(long)]
    pub no_wakeups: bool,

    /// Export from this time on (from the trace's start: 1.5s, 200ms, 30us or ns).
    // Hyphen values reach the parser, which says that a time cannot be negative.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = sonda_paraver::parse_time)]
    pub from: Option<u64>,

    /// Export up to this time (from the trace's start, as --from).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = sonda_paraver::parse_time)]
    pub to: Option<u64>,

    /// Export only threads matching PATTERN: a thread id, or a glob (`*`, `?`) on the
    /// thread's Java or kernel name (repeatable, at most 1000 patterns of at most 1000
    /// bytes: a thread matching any is exported).
    #[arg(long = "threads", value_name = "PATTERN")]
    pub threads: Vec<String>,

    /// Leave out JVM-internal threads: a JVM's native threads (GC, compiler, VM
    /// thread) and the JDK's own daemon threads (Reference Handler, Finalizer, ...).
    #[arg(long)]
    pub no_jvm_internal: bool,

    /// Do not write the ready-made Paraver views (STEM.*.cfg).
    #[arg(long)]
    pub no_cfgs: bool,

    /// Most records held back to put them in Paraver's order; past it, long states are
    /// written in pieces (bounds memory at about 32 bytes a record; 1 to 33554432).
    #[arg(long, value_name = "RECORDS", allow_negative_numbers = true, value_parser = parse_reorder_limit)]
    pub reorder_limit: Option<usize>,
}

/// `sonda export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The trace to export.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// The dataset directory (created if missing): the tables go to
    /// DIR/<table>/host=H/trace=T/, beside other traces' exports.
    #[arg(long, value_name = "DIR", required = true)]
    pub parquet: PathBuf,
}

/// `sonda merge`.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The traces to merge (recorded at the same time on the same host; 2 to 256).
    #[arg(value_name = "TRACE", required = true, num_args = 2..)]
    pub traces: Vec<PathBuf>,

    /// The merged trace to write (0600; in place once complete). It says what was
    /// skipped of a damaged input, and has no end block when an input had none.
    #[arg(short, long, value_name = "TRACE")]
    pub output: PathBuf,
}

/// `sonda report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The trace to summarise.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// List at most this many methods (those with the most inclusive time).
    #[arg(long, value_name = "N")]
    pub methods: Option<usize>,
}

/// What `sonda record` and `sonda attach` share: the trace to write, the methods to
/// trace, the buffers' sizes and the lag. Sizes are checked and rounded here, so the
/// commands get values the recorder takes as they are.
#[derive(Args, Debug)]
pub struct RecordingArgs {
    /// The trace file to write (mode 0600). It is written as TRACE.XXXXXX.partial
    /// beside it and renamed to TRACE when the recording ends (the command exits,
    /// Ctrl-C, --duration, or an error); if sonda itself is killed, the .partial file
    /// stays, readable up to its last flushed block.
    #[arg(short, long, value_name = "TRACE")]
    pub output: PathBuf,

    /// Java methods to trace, e.g. `org.apache.catalina.**::invoke`; `!pattern`
    /// excludes (repeatable, at most 1000 patterns: a method is traced when some
    /// pattern selects it and no `!` pattern excludes it; see docs/filters.md). When
    /// attaching, classes already loaded are instrumented at once. Without it: threads,
    /// GC, monitors and scheduling.
    #[arg(long = "methods", value_name = "FILTER")]
    pub methods: Vec<String>,

    /// Overhead budget for method tracing, in percent of the traced JVM's CPU time
    /// (above 0, at most 100, up to two decimals; needs --methods). The agent measures
    /// each traced method's call rate and duration, and while its estimated cost
    /// exceeds the budget it removes the probes of the methods that cost most for what
    /// they tell (very frequent, very short calls). Each removal is in the trace
    /// (`sonda report` lists them); the calls recorded before it stay.
    #[arg(long, value_name = "PERCENT", value_parser = parse_budget)]
    pub budget: Option<u32>,

    /// Kernel event buffer per CPU (e.g. 16M; rounded up to a power of two, 4K to 1G,
    /// and all CPUs' within the available memory). Larger buffers lose fewer events
    /// when the machine is saturated.
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = parse_kernel_buffer)]
    pub buffer_size: usize,

    /// Count what sonda's kernel programs cost the machine: the kernel's BPF run-time
    /// statistics are on for the recording, and the end says how many times the
    /// programs ran and their CPU time, spent in whatever task hit a tracepoint (the
    /// traced program's, the others'), beside the collector's own (counters
    /// `kernel.bpf_runs`, `kernel.bpf_run_ns`). The statistics add two clock reads to
    /// every run of every BPF program on the machine while on. BPF kernel source only.
    #[arg(long)]
    pub kernel_cost: bool,

    /// JVM event buffer per Java thread (e.g. 1M; rounded up to a power of two, 4K to
    /// 2G). Default 1M, smaller when the buffer directory has little room (said when
    /// it is). The whole buffer (threads × this) is reserved in memory for the
    /// recording.
    #[arg(long, value_name = "SIZE", value_parser = parse_agent_buffer)]
    pub agent_buffer: Option<u32>,

    /// Threads that can record JVM events at once (1 to 65536; threads beyond lose
    /// theirs, counted). Default 256, fewer when the buffer directory has little room.
    #[arg(long, value_name = "N", value_parser = parse_agent_slots)]
    pub agent_slots: Option<u32>,

    /// Where the agent buffer file goes: a directory every traced process can reach,
    /// on a file system with room for the buffer (default /dev/shm, a tmpfs; when
    /// attaching, a path as the JVM sees it, default its /dev/shm).
    #[arg(long, value_name = "DIR")]
    pub buffer_dir: Option<PathBuf>,

    /// How long events are held back to be merged in time order (milliseconds, 0 to
    /// 10000). A JVM event stamped more than this before it was written is moved later
    /// (counted as `collector.late_retimed`).
    #[arg(long, value_name = "MS", default_value = "200", allow_negative_numbers = true, value_parser = parse_lag)]
    pub lag: u64,

    /// Serve live metrics for Prometheus at ADDR while recording (PORT, IP:PORT or
    /// localhost:PORT; PORT alone is 127.0.0.1:PORT): per traced method its completed
    /// calls and their CPU, waiting-for-CPU and blocked seconds, and sonda's own
    /// counters, at http://ADDR/metrics (docs/metrics.md). Loopback only, unless
    /// --metrics-public.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    /// Allow --metrics on an address other than loopback (the metrics name the traced
    /// classes and methods: anyone who can connect reads them).
    #[arg(long, requires = "metrics")]
    pub metrics_public: bool,
}

/// `sonda record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    #[command(flatten)]
    pub recording: RecordingArgs,

    /// The command to record and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `sonda attach`.
#[derive(Args, Debug)]
pub struct AttachArgs {
    /// The JVM's process id (as we see it; a JVM in a container works too).
    #[arg(value_name = "PID")]
    pub pid: u32,

    #[command(flatten)]
    pub recording: RecordingArgs,

    /// Record for this many seconds once the instrumentation is in place, then detach
    /// (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = parse_seconds)]
    pub duration: Option<f64>,

    /// Give up when the JVM does not answer the attach request within this many seconds
    /// (at most 600).
    #[arg(long, value_name = "SECS", default_value = "10", allow_negative_numbers = true, value_parser = parse_attach_timeout)]
    pub attach_timeout: f64,
}

/// Parses a positive, finite number of seconds (below 10^9, 31 years).
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s < 1e9 => Ok(s),
        _ => Err(format!("not a positive number of seconds: {text:?}")),
    }
}

/// Parses `--attach-timeout`: seconds ([`parse_seconds`]), at most
/// [`limits::MAX_ATTACH_TIMEOUT_S`].
pub fn parse_attach_timeout(text: &str) -> Result<f64, String> {
    let s = parse_seconds(text)?;
    if s > limits::MAX_ATTACH_TIMEOUT_S {
        return Err(format!("at most {} seconds", limits::MAX_ATTACH_TIMEOUT_S));
    }
    Ok(s)
}

/// Parses `--lag`: milliseconds from 0 to [`limits::MAX_LAG_MS`].
pub fn parse_lag(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(ms) if ms <= limits::MAX_LAG_MS => Ok(ms),
        _ => Err(format!(
            "not a number of milliseconds from 0 to {}: {text:?}",
            limits::MAX_LAG_MS
        )),
    }
}

/// Parses `--reorder-limit`: records from 1 to [`limits::MAX_REORDER_LIMIT`].
pub fn parse_reorder_limit(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=limits::MAX_REORDER_LIMIT).contains(&n) => Ok(n),
        _ => Err(format!(
            "not a number of records from 1 to {}: {text:?}",
            limits::MAX_REORDER_LIMIT
        )),
    }
}

/// `sonda services`.
#[derive(Args, Debug)]
pub struct ServicesArgs {
    /// The trace to analyse.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Report only the traced methods matching these patterns (the `--methods` grammar
    /// of `sonda record`, repeatable, at most 1000; default: every traced method).
    #[arg(long = "methods", value_name = "FILTER")]
    pub methods: Vec<String>,

    /// Also give the figures per time window of this many seconds (at most 10000
    /// windows in the trace).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = parse_seconds)]
    pub window: Option<f64>,

    #[command(flatten)]
    pub period: PeriodArgs,

    /// Output: a table for a person, JSON (schema in docs/services-schema.md) or CSV.
    #[arg(long, value_enum, default_value_t = ServicesFormat::Table)]
    pub format: ServicesFormat,

    /// Name a class of units of work: `LABEL=OUTER [+INSIDE]... [!INSIDE]...`, the
    /// units whose outermost method matches OUTER, containing a method that matches
    /// each `+` pattern and none that matches a `!` pattern (`*` is any text; a pattern
    /// matches the method `pkg.Class::name` or `Class::name`). Repeatable, at most
    /// 1000, tried in order; e.g. `--unit-class 'full handshake=SecureNioChannel::handshake
    /// +*CertificateProducer::produce'`.
    #[arg(long = "unit-class", value_name = "RULE")]
    pub unit_class: Vec<String>,

    /// Print one CSV line per call (its parts, inclusive and exclusive) instead.
    #[arg(long)]
    pub calls: bool,

    /// Also draw each class's demand distributions (CPU, blocked, wall time) with the
    /// fitted curves as SVG pictures in this directory (cpu.svg, blocked.svg,
    /// wall.svg; an old one of sonda's is replaced).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

/// `--from`/`--to` of `sonda services` and `sonda model`: the calls they count.
#[derive(Args, Debug, Default, Clone, Copy)]
pub struct PeriodArgs {
    /// Count only the calls that enter from this time on (from the trace's start, as
    /// in `sonda paraver`: 1.5s, 200ms, 30us or ns), e.g. to leave out a warm-up.
    // Hyphen values reach the parser, which says that a time cannot be negative.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = sonda_paraver::parse_time)]
    pub from: Option<u64>,

    /// Count only the calls that enter before this time (from the trace's start, as
    /// --from).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = sonda_paraver::parse_time)]
    pub to: Option<u64>,
}

/// `sonda services --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServicesFormat {
    /// Aligned text.
    Table,
    /// JSON.
    Json,
    /// CSV.
    Csv,
}

/// `sonda model`.
#[derive(Args, Debug)]
pub struct ModelArgs {
    /// The trace to model.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// The model file to write (JMT JSIMgraph, e.g. run.jsimg); samples go to
    /// run.samples/ (replacing an old one that holds sample files only). Both are put
    /// in place once complete.
    #[arg(short, long, value_name = "MODEL.jsimg")]
    pub output: PathBuf,

    /// Model only the traced methods matching these patterns (repeatable, at most
    /// 1000).
    #[arg(long = "methods", value_name = "FILTER")]
    pub methods: Vec<String>,

    #[command(flatten)]
    pub period: PeriodArgs,

    /// Service times as JMT Replayer distributions over the measured samples
    /// (JMT only) instead of fitted distributions.
    #[arg(long)]
    pub replayer: bool,

    /// Model the CPUs as the kernel runs them: a round-robin run queue per CPU (the
    /// measured time slice as quantum), wake-up placement on the shortest queue, and
    /// the calls' worker pool as a finite capacity region. For simulators (LINE's
    /// LDES, JMT), not for analytic solvers.
    #[arg(long)]
    pub run_queues: bool,
}

/// Parses a size: a number of bytes with an optional K, M or G suffix (powers of 1024,
/// `KiB`/`KB` spellings accepted).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("not a size: {text:?} (try 16M)"))?;
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => {
            return Err(format!(
                "unknown size unit {unit:?} in {text:?} (use K, M or G)"
            ))
        }
    };
    n.checked_mul(1 << shift)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("size {text:?} out of range"))
}

/// Parses `--buffer-size`: a size ([`parse_size`]) within
/// [`limits::KERNEL_BUFFER_RANGE`] (whether every CPU's fits in the available memory is
/// checked when the recording starts: [`limits::check_kernel_memory`]).
pub fn parse_kernel_buffer(text: &str) -> Result<usize, String> {
    let size = parse_size(text)?;
    if !limits::KERNEL_BUFFER_RANGE.contains(&size) {
        return Err("must be between 4K and 1G".to_string());
    }
    usize::try_from(size).map_err(|_| format!("size {text:?} too large"))
}

/// Smallest and largest agent ring: a page, and the largest power of two a ring
/// offset (u32) can address.
const AGENT_BUFFER_RANGE: std::ops::RangeInclusive<u64> = 4096..=1 << 31;

/// Parses `--agent-buffer`: a size ([`parse_size`]) rounded up to a power of two, from
/// 4K to 2G.
pub fn parse_agent_buffer(text: &str) -> Result<u32, String> {
    parse_size(text)?
        .checked_next_power_of_two()
        .filter(|r| AGENT_BUFFER_RANGE.contains(r))
        .and_then(|r| u32::try_from(r).ok())
        .ok_or_else(|| "must be between 4K and 2G".to_string())
}

/// Parses `--budget`: a percentage above 0 and at most 100, in hundredths of a percent.
pub fn parse_budget(text: &str) -> Result<u32, String> {
    sonda_shm::config::parse_budget(text.trim().trim_end_matches('%'))
        .ok_or_else(|| format!("not a percentage above 0 and at most 100 (up to two decimals, e.g. 5 or 0.5): {text:?}"))
}

/// Parses `--agent-slots`: a number of slots from 1 to 65536.
pub fn parse_agent_slots(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=1 << 16).contains(&n) => Ok(n),
        _ => Err("must be a number from 1 to 65536".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("16M"), Ok(16 << 20));
        assert_eq!(parse_size("256k"), Ok(256 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("0").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("12Q").unwrap_err().contains("unit"));
        assert!(parse_size("99999999999G").is_err());
    }

    #[test]
    fn agent_buffers_are_powers_of_two_from_4k_to_2g() {
        assert_eq!(parse_agent_buffer("4K"), Ok(4096));
        assert_eq!(parse_agent_buffer("5000"), Ok(8192));
        assert_eq!(parse_agent_buffer("2G"), Ok(1 << 31));
        assert_eq!(parse_agent_buffer("1025M"), Ok(1 << 31));
        assert_eq!(
            parse_agent_buffer("2049M"),
            Err("must be between 4K and 2G".into())
        );
        assert!(parse_agent_buffer("1K").is_err());
        assert!(parse_agent_buffer("16E").is_err());
        assert_eq!(parse_kernel_buffer("16M"), Ok(16 << 20));
        let err = Cli::try_parse_from(["sonda", "record", "-o", "t", "--agent-buffer", "1K"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--agent-buffer") && err.contains("between 4K and 2G"),
            "{err}"
        );
        let err = Cli::try_parse_from(["sonda", "services", "t", "--window", "0"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--window"), "{err}");
    }

    #[test]
    fn attach_takes_a_pid_and_optional_duration() {
        let cli = Cli::try_parse_from([
            "sonda",
            "attach",
            "4242",
            "-o",
            "t.sonda",
            "--methods",
            "a.B",
            "--duration",
            "2.5",
        ])
        .unwrap();
        let Command::Attach(a) = cli.command else {
            panic!()
        };
        assert_eq!(
            (a.pid, a.duration, a.attach_timeout),
            (4242, Some(2.5), 10.0)
        );
        assert_eq!(a.recording.methods, ["a.B"]);
        let cli = Cli::try_parse_from(["sonda", "attach", "1", "-o", "t"]).unwrap();
        let Command::Attach(a) = cli.command else {
            panic!()
        };
        assert_eq!(a.duration, None);
        for bad in ["0", "-1", "x", "inf", "NaN"] {
            assert!(
                Cli::try_parse_from(["sonda", "attach", "1", "-o", "t", "--duration", bad])
                    .is_err(),
                "{bad}"
            );
        }
        assert!(Cli::try_parse_from(["sonda", "attach", "x", "-o", "t"]).is_err());
    }

    #[test]
    fn record_takes_the_command_after_the_separator() {
        let cli = Cli::try_parse_from([
            "sonda",
            "record",
            "-o",
            "t.sonda",
            "--methods",
            "a.B",
            "--",
            "sh",
            "-c",
            "true",
        ])
        .unwrap();
        let Command::Record(r) = cli.command else {
            panic!()
        };
        assert_eq!(r.recording.output, PathBuf::from("t.sonda"));
        assert_eq!(r.recording.methods, ["a.B"]);
        assert_eq!(
            r.command,
            [OsString::from("sh"), "-c".into(), "true".into()]
        );
        assert_eq!(
            (
                r.recording.buffer_size,
                r.recording.agent_buffer,
                r.recording.agent_slots,
                r.recording.lag
            ),
            (16 << 20, None, None, 200)
        );
        assert_eq!(r.recording.buffer_dir, None);
        let cli = Cli::try_parse_from([
            "sonda",
            "record",
            "-o",
            "t",
            "--agent-buffer",
            "64K",
            "--agent-slots",
            "32",
            "--buffer-dir",
            "/tmp",
            "--",
            "true",
        ])
        .unwrap();
        let Command::Record(r) = cli.command else {
            panic!()
        };
        assert_eq!(
            (r.recording.agent_buffer, r.recording.agent_slots),
            (Some(64 << 10), Some(32))
        );
        assert_eq!(r.recording.buffer_dir, Some(PathBuf::from("/tmp")));
        for bad in ["0", "65537", "x", "-1"] {
            assert!(
                Cli::try_parse_from(["sonda", "record", "-o", "t", "--agent-slots", bad]).is_err(),
                "{bad}"
            );
        }
        // Options of the command are not sonda's.
        let cli =
            Cli::try_parse_from(["sonda", "record", "-o", "t", "--", "java", "-o", "x"]).unwrap();
        let Command::Record(r) = cli.command else {
            panic!()
        };
        assert_eq!(r.command, [OsString::from("java"), "-o".into(), "x".into()]);
    }
}
