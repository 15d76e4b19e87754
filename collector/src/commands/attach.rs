//! `sonda attach PID`: records a running JVM without restarting it.
//!
//! Checks what can be checked first (the filter, the agent library, that the pid is a
//! HotSpot JVM we may attach to: `sonda_attach::Target::inspect`, which signals
//! nothing), then hands over to the recorder with the attach as a closure: the recorder
//! creates the buffer file where the JVM can open it, turns the kernel events on, and
//! calls it. The closure gives the file to the JVM's user, makes the agent library
//! visible in the JVM's file system (`stage_agent`: the same file every time, so that a
//! later attach reuses the library HotSpot already loaded) and loads it
//! (`load_agent`), turning the agent's refusal codes into one-line errors.
//!
//! Ctrl-C, SIGTERM and SIGHUP do not kill sonda: they end the recording, which then
//! detaches cleanly (the agent restores the JVM's classes), as `perf record` stops on
//! Ctrl-C and still writes its file.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use sonda_attach::{load_agent, stage_agent, Target};
use sonda_filter::MethodFilter;
use sonda_shm::attach_codes;
use sonda_trace::Pid;

use crate::agent::buffer_file::SHM_DIR;
use crate::cli::AttachArgs;
use crate::clock;
use crate::launch::{self, AGENT_ENV, AGENT_LIB};
use crate::recorder::{self, Attach, Settings, Subject};

/// Per-thread agent slots, as for `sonda record`.
const AGENT_SLOTS: u32 = 1024;

/// Set by the stop signals.
static STOP: AtomicBool = AtomicBool::new(false);

/// Validates the arguments, attaches, records, detaches.
pub fn run(args: AttachArgs) -> anyhow::Result<i32> {
    let started = clock::monotonic();
    let methods = MethodFilter::parse(&args.methods)?;
    let target = Target::inspect(args.pid)?;
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
    let kernel_ring = usize::try_from(args.buffer_size).context("--buffer-size too large")?;
    let agent_ring = u32::try_from(args.agent_buffer.next_power_of_two())
        .ok()
        .filter(|&r| r >= 4096)
        .ok_or_else(|| anyhow!("--agent-buffer must be between 4K and 2G"))?;
    let buffer_dir = buffer_dir(&target);
    let timeout = Duration::from_secs_f64(args.attach_timeout);
    install_stop_signals().context("cannot install signal handlers")?;
    // Last check, so that nothing is left behind when another one fails.
    let output = File::create(&args.output)
        .with_context(|| format!("cannot write trace file {}", args.output.display()))?;
    let load = |buffer: &Path| load_into(&target, &agent_lib, buffer, timeout);
    recorder::record(Settings {
        output,
        output_path: args.output,
        subject: Subject::Attach(Attach {
            pid: Pid(target.pid()),
            buffer_dir,
            load: Box::new(load),
            stop_requested: Box::new(|| STOP.load(Ordering::SeqCst)),
            duration: args.duration.map(Duration::from_secs_f64),
            started,
        }),
        methods,
        kernel_ring,
        agent_ring,
        agent_slots: AGENT_SLOTS,
        lag: Duration::from_millis(args.lag),
    })?;
    Ok(0)
}

/// Where to create the buffer file so that the JVM can open it: our `/dev/shm` when it
/// shares our file system, else its own `/dev/shm` (through `/proc/<pid>/root`), else
/// its `/tmp`.
fn buffer_dir(target: &Target) -> PathBuf {
    if target.shares_our_filesystem() {
        return PathBuf::from(SHM_DIR);
    }
    let shm = target.root().join("dev/shm");
    if shm.is_dir() {
        shm
    } else {
        target.tmp().to_path_buf()
    }
}

/// Loads the agent into the JVM on the buffer file `buffer` (our path).
fn load_into(
    target: &Target,
    agent_lib: &Path,
    buffer: &Path,
    timeout: Duration,
) -> anyhow::Result<()> {
    let pid = target.pid();
    give_to_jvm_user(target, buffer)?;
    let agent = stage_agent(target, agent_lib)?;
    let in_jvm = target.path_in_target(buffer);
    let shm = in_jvm
        .to_str()
        .filter(|p| !p.contains(','))
        .ok_or_else(|| {
            anyhow!(
                "buffer file path {} cannot be passed to the agent (not UTF-8, or holds a comma)",
                in_jvm.display()
            )
        })?;
    match load_agent(target, &agent, &format!("shm={shm}"), timeout)? {
        attach_codes::OK => Ok(()),
        code => match attach_codes::describe(code) {
            Some(why) => bail!("JVM {pid} did not take the agent: {why}"),
            None => bail!("JVM {pid} did not take the agent: Agent_OnAttach returned {code} (see the JVM's stderr)"),
        },
    }
}

/// Makes the buffer file the JVM's user's, so that the JVM can map it read-write: when
/// we are root and the JVM runs as someone else (another uid, or a container's user).
fn give_to_jvm_user(target: &Target, buffer: &Path) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root && (target.uid(), target.gid()) != (0, 0) {
        std::os::unix::fs::chown(buffer, Some(target.uid()), Some(target.gid())).with_context(
            || {
                format!(
                    "cannot give the buffer file {} to the JVM's user {}",
                    buffer.display(),
                    target.uid()
                )
            },
        )?;
    }
    Ok(())
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
