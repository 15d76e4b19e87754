//! `sonda attach PID`: records a running JVM without restarting it.
//!
//! Checks what can be checked first (the filter, the agent library, that the pid is a
//! HotSpot JVM we may attach to: `sonda_attach::Target::inspect`, which signals
//! nothing), makes the agent library visible in the JVM's file system (`stage_agent`:
//! the same file every time, so that a later attach reuses the library HotSpot already
//! loaded) and, when methods are to be traced, refuses a JVM that holds another copy
//! of the library (another sonda build attached earlier: its probe class is defined
//! for good, bound to that copy). Then it hands over to the recorder with the attach
//! as a closure: the recorder creates the buffer file where the JVM can open it (its
//! own `/dev/shm`, found inside its root, and given to its user), turns the kernel
//! events on, and calls it. The closure loads the agent (`load_agent`), turning the
//! agent's refusal codes into one-line errors. While the agent is still ending an
//! earlier recording (restoring the classes of a sonda that was killed, which it
//! notices at once) the load is tried again for a while.
//!
//! Ctrl-C, SIGTERM and SIGHUP do not kill sonda: they end the recording, which then
//! detaches cleanly (the agent restores the JVM's classes), as `perf record` stops on
//! Ctrl-C and still writes its file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use sonda_attach::{load_agent, other_agents, stage_agent, Target};
use sonda_filter::MethodFilter;
use sonda_shm::attach_codes;
use sonda_shm::config::AgentOptions;
use sonda_trace::Pid;

use crate::cli::AttachArgs;
use crate::output::NewFile;
use sonda_recorder::clock;
use sonda_recorder::launch::{self, AGENT_ENV, AGENT_LIB};
use sonda_recorder::SHM_DIR;
use sonda_recorder::{AgentSizes, Attach, BufferPlace, Settings, Subject};

/// How long an attach retries while the agent says it is still stopping an earlier
/// recording (restoring thousands of classes takes seconds).
const STOPPING_WAIT: Duration = Duration::from_secs(30);

/// Set by the stop signals.
static STOP: AtomicBool = AtomicBool::new(false);

/// Validates the arguments, attaches, records, detaches.
pub fn run(args: AttachArgs) -> anyhow::Result<i32> {
    let started = clock::monotonic();
    let rec = args.recording;
    let metrics = crate::commands::metrics::address(&rec)?;
    crate::limits::check_patterns("--methods", &rec.methods)?;
    crate::limits::check_kernel_memory(rec.buffer_size)?;
    let methods = MethodFilter::parse(&rec.methods)?;
    if rec.budget.is_some() && methods.is_empty() {
        bail!("--budget limits the cost of method tracing: give --methods too");
    }
    let target = Target::inspect(args.pid).map_err(|e| inspect_error(args.pid, e))?;
    let exe = std::env::current_exe().ok();
    let agent_lib = launch::find_agent(std::env::var_os(AGENT_ENV), exe.as_deref())
        .map_err(|e| anyhow!(e))?
        .ok_or_else(|| {
            let place = exe
                .as_deref()
                .and_then(Path::parent)
                .map(|d| d.display().to_string())
                .unwrap_or_default();
            anyhow!("agent library {AGENT_LIB} not found in {place} (build it with `cargo build -p sonda-agent`, or set {AGENT_ENV})")
        })?;
    let agent = stage_agent(&target, &agent_lib)?;
    if !methods.is_empty() {
        if let Some(other) = other_agents(&target, &agent).first() {
            bail!(
                "JVM {} holds the agent of another sonda build ({}, from an earlier attach), whose probe class this build cannot replace: attach with that build, or without --methods, or restart the JVM",
                target.pid(),
                other.display()
            );
        }
    }
    let buffer = buffer_place(&target, rec.buffer_dir.as_deref())?;
    let timeout = Duration::from_secs_f64(args.attach_timeout);
    install_stop_signals().context("cannot install signal handlers")?;
    // Listening is a check too (the port may be taken); the threads start idle.
    let metrics = crate::commands::metrics::start(metrics)?;
    // Last check, so that nothing is left behind when another one fails.
    let trace = NewFile::recording(&rec.output)?;
    let (tap, metrics) = metrics.unzip();
    let load = |buffer: &Path| load_into(&target, &agent, buffer, timeout);
    let outcome = sonda_recorder::record(Settings {
        output: trace.handle()?,
        output_path: rec.output.clone(),
        subject: Subject::Attach(Attach {
            pid: Pid(target.pid()),
            load: Box::new(load),
            stop_requested: Box::new(|| STOP.load(Ordering::SeqCst)),
            duration: args.duration.map(Duration::from_secs_f64),
            started,
        }),
        methods,
        budget: rec.budget,
        kernel_ring: rec.buffer_size,
        kernel_cost: rec.kernel_cost,
        agent_sizes: AgentSizes {
            slots: rec.agent_slots,
            ring: rec.agent_buffer,
        },
        buffer,
        lag: Duration::from_millis(rec.lag),
        tap,
    });
    // The endpoint ends with the recording (its last page has the final figures).
    crate::commands::metrics::stop(metrics);
    crate::commands::keep_recording(trace, outcome)
}

/// The refusal of [`Target::inspect`], made true where it cannot be: a process whose
/// memory map (`/proc/PID/maps`, which tells a JVM) is closed to us although we run as
/// its user or as root is not refused for its user. It is not dumpable; a JVM is,
/// unless started setuid or with file capabilities. Its command line, which anyone may
/// read, tells which it likely is.
fn inspect_error(pid: u32, e: sonda_attach::AttachError) -> anyhow::Error {
    use sonda_attach::AttachError;
    match e {
        AttachError::PermissionDenied {
            target_uid,
            our_uid,
            ..
        } if our_uid == 0 || our_uid == target_uid => {
            let proc = PathBuf::from(format!("/proc/{pid}"));
            let comm = std::fs::read_to_string(proc.join("comm")).unwrap_or_default();
            let comm = comm.trim();
            let cmdline = std::fs::read(proc.join("cmdline")).unwrap_or_default();
            let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
            let argv0 =
                Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(argv0));
            let java = comm == "java" || argv0.file_name().is_some_and(|n| n == "java");
            let closed = format!(
                "its memory map /proc/{pid}/maps is closed even to {} (a process that is not dumpable)",
                if our_uid == 0 { "root" } else { "its own user" }
            );
            if java {
                anyhow!("JVM {pid} ({comm}) cannot be attached to: {closed}; a JVM started setuid or with file capabilities is not dumpable")
            } else {
                anyhow!("process {pid} ({comm}) is not a JVM: its command is not java and {closed}; it was not signalled")
            }
        }
        e => e.into(),
    }
}

/// Where to create the buffer file so that the JVM can open it: `asked` (a path as the
/// JVM sees it), else its `/dev/shm`, else its `/tmp`; in our file system when the JVM
/// shares it, else inside the JVM's root. The file goes to the JVM's user when we are
/// root and the JVM is not.
fn buffer_place(target: &Target, asked: Option<&Path>) -> anyhow::Result<BufferPlace> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let owner =
        (root && (target.uid(), target.gid()) != (0, 0)).then_some((target.uid(), target.gid()));
    let same_view = target.shares_our_filesystem();
    let dir = match asked {
        Some(d) if same_view => std::path::absolute(d).context("cannot find the current directory")?,
        Some(d) if d.is_absolute() => d.to_path_buf(),
        Some(d) => bail!(
            "--buffer-dir {} must be absolute: JVM {} sees a file system of its own, in which the path is taken",
            d.display(),
            target.pid()
        ),
        None if same_view || target.root().join("dev/shm").is_dir() => PathBuf::from(SHM_DIR),
        None => PathBuf::from("/tmp"),
    };
    Ok(BufferPlace {
        root: if same_view {
            PathBuf::from("/")
        } else {
            target.root().to_path_buf()
        },
        dir,
        owner,
    })
}

/// Loads the agent (`agent`: staged, as the JVM sees it) into the JVM on the buffer
/// file `buffer` (as the JVM sees it), trying again while the agent is still stopping
/// an earlier recording.
fn load_into(
    target: &Target,
    agent: &Path,
    buffer: &Path,
    timeout: Duration,
) -> anyhow::Result<()> {
    let pid = target.pid();
    let options = AgentOptions::new(buffer).encode()?;
    let started = Instant::now();
    loop {
        let code = load_agent(target, agent, &options, timeout)?;
        if code == attach_codes::STOPPING && started.elapsed() < STOPPING_WAIT {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        return match code {
            attach_codes::OK => Ok(()),
            code => match attach_codes::describe(code) {
                Some(why) => bail!("JVM {pid} did not take the agent: {why}"),
                None => bail!("JVM {pid} did not take the agent: Agent_OnAttach returned {code} (see the JVM's stderr)"),
            },
        };
    }
}

/// Runs in signal context: one atomic store.
extern "C" fn on_stop_signal(_sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Ctrl-C, SIGTERM and SIGHUP end the recording instead of killing sonda.
fn install_stop_signals() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: an all-zero sigaction is valid; the fields set below make it a plain
        // handler with an empty mask; `on_stop_signal` only stores to an atomic, which
        // is async-signal-safe.
        let rc = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_stop_signal as *const () as usize;
            act.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
