//! The command line: what each subcommand takes. Parsing only; the subcommands'
//! modules in [`crate::commands`] do the work.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    #[arg(long, value_name = "TIME", value_parser = sonda_paraver::parse_time)]
    pub from: Option<u64>,

    /// Export up to this time (from the trace's start, as --from).
    #[arg(long, value_name = "TIME", value_parser = sonda_paraver::parse_time)]
    pub to: Option<u64>,

    /// Export only threads matching PATTERN: a thread id, or a glob (`*`, `?`) on the
    /// thread's Java or kernel name (repeatable: a thread matching any is exported).
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
    /// written in pieces (bounds memory at about 32 bytes a record).
    #[arg(long, value_name = "RECORDS")]
    pub reorder_limit: Option<usize>,
}

/// `sonda merge`.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The traces to merge (recorded at the same time on the same host).
    #[arg(value_name = "TRACE", required = true, num_args = 2..)]
    pub traces: Vec<PathBuf>,

    /// The merged trace to write.
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

/// `sonda record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The trace file to write.
    #[arg(short, long, value_name = "TRACE")]
    pub output: PathBuf,

    /// Java methods to trace, e.g. `org.apache.catalina.**::invoke`; `!pattern`
    /// excludes (repeatable: a method is traced when some pattern selects it and no
    /// `!` pattern excludes it; see docs/filters.md).
    #[arg(long = "methods", value_name = "FILTER")]
    pub methods: Vec<String>,

    /// Kernel event buffer per CPU (e.g. 16M; rounded up to a power of two). Larger
    /// buffers lose fewer events when the machine is saturated.
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = parse_size)]
    pub buffer_size: u64,

    /// JVM event buffer per Java thread (e.g. 1M; rounded up to a power of two).
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = parse_size)]
    pub agent_buffer: u64,

    /// How long events are held back to be merged in time order (milliseconds). A JVM
    /// event stamped more than this before it was written is moved later (counted as
    /// `collector.late_retimed`).
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub lag: u64,

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

    /// The trace file to write.
    #[arg(short, long, value_name = "TRACE")]
    pub output: PathBuf,

    /// Java methods to trace, as for `sonda record` (repeatable; classes already loaded
    /// are instrumented at once). Without it: threads, GC, monitors and scheduling.
    #[arg(long = "methods", value_name = "FILTER")]
    pub methods: Vec<String>,

    /// Record for this many seconds once the instrumentation is in place, then detach
    /// (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub duration: Option<f64>,

    /// Give up when the JVM does not answer the attach request within this many seconds.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_seconds)]
    pub attach_timeout: f64,

    /// Kernel event buffer per CPU (as for `sonda record`).
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = parse_size)]
    pub buffer_size: u64,

    /// JVM event buffer per Java thread (as for `sonda record`).
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = parse_size)]
    pub agent_buffer: u64,

    /// How long events are held back to be merged in time order (milliseconds).
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub lag: u64,
}

/// Parses a positive, finite number of seconds.
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s < 1e9 => Ok(s),
        _ => Err(format!("not a positive number of seconds: {text:?}")),
    }
}

/// `sonda services`.
#[derive(Args, Debug)]
pub struct ServicesArgs {
    /// The trace to analyse.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Report only the traced methods matching these patterns (the `--methods` grammar
    /// of `sonda record`, repeatable; default: every traced method).
    #[arg(long = "methods", value_name = "FILTER")]
    pub methods: Vec<String>,

    /// Also give the figures per time window of this many seconds.
    #[arg(long, value_name = "SECS")]
    pub window: Option<f64>,

    /// Output: a table for a person, JSON (schema in docs/services-schema.md) or CSV.
    #[arg(long, value_enum, default_value_t = ServicesFormat::Table)]
    pub format: ServicesFormat,

    /// Print one CSV line per call (its parts, inclusive and exclusive) instead.
    #[arg(long)]
    pub calls: bool,
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
    /// run.samples/.
    #[arg(short, long, value_name = "MODEL.jsimg")]
    pub output: PathBuf,

    /// Model only the traced methods matching these patterns (repeatable).
    #[arg(long = "methods", value_name = "FILTER")]
    pub methods: Vec<String>,

    /// Service times as JMT Replayer distributions over the measured samples
    /// (JMT only) instead of fitted distributions.
    #[arg(long)]
    pub replayer: bool,
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
        assert_eq!(a.methods, ["a.B"]);
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
        assert_eq!(r.output, PathBuf::from("t.sonda"));
        assert_eq!(r.methods, ["a.B"]);
        assert_eq!(
            r.command,
            [OsString::from("sh"), "-c".into(), "true".into()]
        );
        assert_eq!(
            (r.buffer_size, r.agent_buffer, r.lag),
            (16 << 20, 1 << 20, 200)
        );
        // Options of the command are not sonda's.
        let cli =
            Cli::try_parse_from(["sonda", "record", "-o", "t", "--", "java", "-o", "x"]).unwrap();
        let Command::Record(r) = cli.command else {
            panic!()
        };
        assert_eq!(r.command, [OsString::from("java"), "-o".into(), "x".into()]);
    }
}
