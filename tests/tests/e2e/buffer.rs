//! The agent buffer file and everything else sonda makes in shared places, end to end
//! (issue 11): a small `/dev/shm` never harms the traced JVM (sonda records with a
//! buffer that fits, drops counted, or refuses before the program starts or before it
//! attaches); nothing of a root recording can be opened by another user; a file or
//! symlink planted at a name sonda would use neither stops the recording nor is written
//! through; and what a killed sonda leaves (its ftrace instance, still tracing; its
//! buffer file) is gone once any later sonda command ran.
//!
//! The truth: the program's own output and exit status (Chatty checks every thread's
//! sum), the kernel's own view of the files (modes, owners, what a user may open, as
//! `setpriv` makes us that user), and tracefs itself.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sonda_tests::*;
use sonda_trace::codec::Item;
use sonda_trace::{Event, Meta, TraceReader};

/// The program every test here runs: 64 threads calling `Chatty::mid` flat out.
const METHOD: &str = "Chatty::mid";
const INSTANCES: &str = "/sys/kernel/tracing/instances";

/// A command run in a private mount namespace whose /dev/shm is a tmpfs of `size`
/// (`1M`): a container's /dev/shm, or a small one on a host.
fn with_shm_of(size: &str) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args([
        "-m",
        "sh",
        "-c",
        "mount -t tmpfs -o size=$0 tmpfs /dev/shm && exec \"$@\"",
        size,
    ]);
    cmd
}

fn may_use_mount_namespaces() -> bool {
    require(
        "root and unshare (a private /dev/shm)",
        is_root() && have("unshare"),
    )
}

/// What a trace says about the agent's events.
struct Tally {
    enters: usize,
    /// `agent.dropped` + `agent.no_slot`.
    lost: u64,
    /// Dropped records in the trace.
    dropped_records: u64,
}

fn tally(trace: &Path, method: &str) -> Tally {
    let mut reader = TraceReader::open(trace).expect("trace opens");
    let mut id = None;
    let mut enters = Vec::new();
    let (mut lost, mut dropped_records) = (0, 0);
    while let Some(block) = reader.next_block().expect("block reads") {
        for item in block.items() {
            match item.expect("item decodes") {
                Item::Record(r) => match r.event {
                    Event::Enter { method, .. } => enters.push(method),
                    Event::Dropped { count, .. } => dropped_records += count,
                    _ => {}
                },
                Item::Meta(Meta::Method {
                    id: m, class, name, ..
                }) if format!("{class}::{name}") == method => id = Some(m),
                Item::Meta(Meta::Counter { name, value })
                    if name == "agent.dropped" || name == "agent.no_slot" =>
                {
                    lost += value
                }
                _ => {}
            }
        }
    }
    assert!(reader.complete(), "{} has no end block", trace.display());
    let id = id.unwrap_or_else(|| panic!("{method} not in {}", trace.display()));
    Tally {
        enters: enters.iter().filter(|&&m| m == id).count(),
        lost,
        dropped_records,
    }
}

/// sonda's refusal: one line (the program's stdout and stderr are empty: it did not
/// run, or, after an attach, it is still running), naming the directory, its file
/// system and its free space, and the options that help.
fn assert_refused(out: &Output, dir: &str) {
    let err = text(&out.stderr);
    assert_clean_error(out, "cannot make the agent buffer in");
    for part in [
        dir,
        "tmpfs",
        "free",
        "--buffer-dir",
        "--agent-buffer",
        "--agent-slots",
    ] {
        assert!(
            err.contains(part),
            "the refusal does not name {part:?}: {err}"
        );
    }
}

/// `sonda record` of 64 busy threads with a /dev/shm of 1, 4 and 64 MiB (Docker's
/// default). Before, 1 and 4 MiB crashed the JVM with SIGBUS in the probe (and sonda
/// died of SIGBUS without a word), 64 MiB two runs in five.
#[test]
fn a_small_dev_shm_never_crashes_a_recorded_jvm() {
    let _machine = shared();
    if !may_use_mount_namespaces() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = Workload::java("Chatty").args(["200", "4"]);
    let plain = run(&mut program.java_command());
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    assert_eq!(text(&plain.stdout), "Chatty: 64 threads, every sum right\n");
    for size in ["1M", "4M", "64M"] {
        let trace = dir.path().join(format!("{size}.trace"));
        let record = program.clone().methods([METHOD]).record_command(&trace);
        let mut cmd = with_shm_of(size);
        cmd.arg(record.get_program()).args(record.get_args());
        let out = run(&mut cmd);
        let err = text(&out.stderr);
        assert!(
            !err.contains("SIGBUS") && !err.contains("hs_err"),
            "{size}: {err}"
        );
        if size == "1M" {
            // Not even the least buffer fits in half of it: refused, the program never
            // started.
            assert_refused(&out, "/dev/shm");
            assert!(out.stdout.is_empty(), "{size}: the program ran");
            assert!(
                !trace.exists(),
                "{size}: a refused recording left its trace"
            );
            // What the refusal offers works: another directory, or both sizes given
            // (which may take all of the free space).
            let elsewhere = tempfile::tempdir().unwrap();
            let other_dir = vec![
                "--buffer-dir".into(),
                elsewhere.path().as_os_str().to_os_string(),
            ];
            let both_sizes: Vec<std::ffi::OsString> =
                ["--agent-buffer", "4K", "--agent-slots", "80"]
                    .map(Into::into)
                    .into();
            for options in [other_dir, both_sizes] {
                let record = program
                    .clone()
                    .options(options.clone())
                    .methods([METHOD])
                    .record_command(&trace);
                let mut cmd = with_shm_of(size);
                cmd.arg(record.get_program()).args(record.get_args());
                let out = run(&mut cmd);
                assert!(out.status.success(), "{options:?}: {}", text(&out.stderr));
                assert_eq!(text(&out.stdout), text(&plain.stdout), "{options:?}");
                assert!(tally(&trace, METHOD).enters > 0, "{options:?}");
                std::fs::remove_file(&trace).unwrap();
            }
            continue;
        }
        assert_eq!(
            out.status.code(),
            plain.status.code(),
            "{size}: the program's exit status changed under sonda: {err}"
        );
        assert_eq!(text(&out.stdout), text(&plain.stdout), "{size}: {err}");
        // One notice says what was made instead of the defaults.
        let notices: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("sonda: the agent buffer is"))
            .collect();
        assert_eq!(notices.len(), 1, "{size}: {err}");
        assert!(
            notices[0].contains("/dev/shm, tmpfs with"),
            "{}",
            notices[0]
        );
        let t = tally(&trace, METHOD);
        assert!(t.enters > 0, "{size}: no call of {METHOD} recorded");
        // 64 threads flat out overflow rings this small: the loss is counted.
        assert!(
            t.lost > 0 && t.dropped_records > 0,
            "{size}: nothing dropped, lost {}",
            t.lost
        );
    }
}

/// The program for the attach tests: Chatty calling until its stdin closes.
struct Running {
    child: Child,
    pid: u32,
}

impl Running {
    /// Starts `cmd` (which runs Chatty with CALLS = 0) and waits for "ready".
    fn start(mut cmd: Command) -> Running {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the program starts");
        let mut first = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert_eq!(first, "ready\n", "the program did not start");
        let pid = child.id();
        Running { child, pid }
    }

    /// Closes stdin; returns the exit status and the rest of stdout and stderr.
    fn end(mut self) -> (std::process::ExitStatus, String, String) {
        drop(self.child.stdin.take());
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (self.child.wait().unwrap(), out, err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `sonda attach` to 64 busy threads of a JVM in a private mount namespace (a
/// container) whose /dev/shm is 1, 4 and 64 MiB: the buffer goes in the JVM's own
/// /dev/shm, sized to fit it, or the attach is refused with the JVM left as it was.
/// Before, the JVM died of SIGBUS.
#[test]
fn a_small_dev_shm_in_a_container_never_crashes_an_attached_jvm() {
    let _machine = shared();
    if !may_use_mount_namespaces() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = Workload::java("Chatty").args(["0", "4"]);
    let (status, plain, _) = Running::start(program.java_command()).end();
    assert!(status.success());
    assert_eq!(plain, "Chatty: 64 threads, every sum right\n");
    for size in ["1M", "4M", "64M"] {
        let java = program.java_command();
        let mut cmd = with_shm_of(size);
        cmd.arg(java.get_program()).args(java.get_args());
        let jvm = Running::start(cmd);
        let trace = dir.path().join(format!("{size}.trace"));
        let out = run(&mut Attach::to(jvm.pid)
            .methods([METHOD])
            .options(["--duration", "1"])
            .command(&trace));
        let pid = jvm.pid;
        let (status, stdout, stderr) = jvm.end();
        assert!(
            !stderr.contains("SIGBUS") && !stderr.contains("hs_err"),
            "{size}: {stderr}"
        );
        assert!(status.success(), "{size}: the JVM failed: {stderr}");
        assert_eq!(stdout, plain, "{size}: the JVM's output changed");
        let err = text(&out.stderr);
        if size == "1M" {
            assert_refused(&out, &format!("/dev/shm inside /proc/{pid}/root"));
            assert!(!trace.exists());
            continue;
        }
        assert!(out.status.success(), "{size}: sonda attach failed: {err}");
        assert!(
            err.contains("sonda: the agent buffer is")
                && err.contains(&format!("in /dev/shm inside /proc/{pid}/root, tmpfs")),
            "{size}: {err}"
        );
        // Recorded, whatever was dropped: with the smaller rings a 4 or 64 MiB /dev/shm
        // gives, 64 busy threads overflow them unless the collector keeps up (since
        // the ring copier it often does at 64 MiB: 10.8 M enters, 0 lost).
        let t = tally(&trace, METHOD);
        assert!(t.enters > 0, "{size}: {} enters, {} lost", t.enters, t.lost);
    }
}

/// The buffer files of a running sonda (its pid).
fn buffer_files_of(sonda: u32) -> Vec<PathBuf> {
    let prefix = format!("sonda-{sonda}-");
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// The ftrace instances of sonda pid `sonda`.
fn instances_of(sonda: u32) -> Vec<PathBuf> {
    let prefix = format!("sonda-{sonda}-");
    std::fs::read_dir(INSTANCES)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until `what` gives something (at most 30 s).
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Vec<T>) -> Vec<T> {
    let started = Instant::now();
    loop {
        let found = f();
        if !found.is_empty() {
            return found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no {what} after 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The same through BPF programs (the default): the kernel holds them for the
/// collector's open files only, so SIGKILL itself detaches and frees them, before any
/// other sonda command runs; a later command still removes the buffer file.
#[test]
fn a_killed_bpf_recording_leaves_no_program_in_the_kernel() {
    let _machine = shared();
    if !require_tracepoints() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("killed.trace");
    let mut child = record_a_sleep(&trace, "bpf");
    let pid = child.id();
    // Its programs, by the ids its open files name (attached once the command runs).
    let sleeper = wait_for("recorded command", || children_of(pid))[0];
    let programs = wait_for("BPF programs", || bpf_programs_of(pid));
    assert!(
        programs.iter().all(|id| loaded_bpf_programs().contains(id)),
        "{programs:?}"
    );
    let buffers = wait_for("buffer file", || buffer_files_of(pid));
    child.kill().unwrap();
    child.wait().unwrap();
    // Freed once the last reference goes (after an RCU grace period).
    let started = Instant::now();
    loop {
        let loaded = loaded_bpf_programs();
        let left: Vec<&u32> = programs.iter().filter(|id| loaded.contains(id)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "BPF programs {left:?} still loaded 10 s after the collector was killed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(buffers[0].exists());
    let partial = partial_outputs(&trace);
    assert_eq!(partial.len(), 1, "the killed recording's partial trace");
    let out = run(Command::new(sonda()).arg("report").arg(&partial[0]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        buffer_files_of(pid),
        Vec::<PathBuf>::new(),
        "the buffer file is left"
    );
    // SAFETY: kill on the sleep our sonda started; it is still alive (its parent's
    // death did not end it), so the pid is still its.
    unsafe { libc::kill(sleeper as i32, libc::SIGKILL) };
}

/// `sonda record -o TRACE -- sleep 60` with `SONDA_KERNEL=kernel`, started.
fn record_a_sleep(trace: &Path, kernel: &str) -> Child {
    Command::new(sonda())
        .env("SONDA_KERNEL", kernel)
        .arg("record")
        .arg("-o")
        .arg(trace)
        .args(["--", "sleep", "60"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The ids of the BPF programs process `pid` holds open (`prog_id` in its fdinfo).
fn bpf_programs_of(pid: u32) -> Vec<u32> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return Vec::new();
    };
    let mut ids: Vec<u32> = fds
        .flatten()
        .filter_map(|f| std::fs::read_to_string(f.path()).ok())
        .flat_map(|info| {
            info.lines()
                .filter_map(|l| l.strip_prefix("prog_id:"))
                .filter_map(|v| v.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The ids of every BPF program loaded in the kernel.
fn loaded_bpf_programs() -> Vec<u32> {
    libbpf_rs::query::ProgInfoIter::default()
        .map(|p| p.id)
        .collect()
}

/// The children of every thread of process `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Whether `nobody` can open `path` for reading.
fn nobody_can_read(path: &Path) -> bool {
    Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat"])
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// While root records, another user can open nothing sonda made: the buffer file
/// (0644 before: method and thread names for anyone), the ftrace instance's files. And
/// the names are not predictable: a dangling symlink at the name sonda used before
/// (`sonda-<pid>-0.buf`, planted by a shell that then becomes sonda) stopped the
/// recording with "File exists"; now it neither stops it nor is followed.
#[test]
fn a_root_recording_is_private_and_planted_names_do_not_matter() {
    let _machine = shared();
    if !require_tracepoints() || !require_tool("setpriv") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    let trace = dir.path().join("private.trace");
    // Through ftrace, whose instance has files of its own (BPF programs have none).
    let record = Workload::java("Chatty")
        .args(["0", "4", "4"])
        .methods([METHOD])
        .env("SONDA_KERNEL", "ftrace")
        .record_command(&trace);
    // The shell plants at the names of its own pid, then becomes sonda (same pid).
    let plant = "ln -s \"$0\" /dev/shm/sonda-$$-0.buf && ln -s \"$0\" /dev/shm/sonda-$$-1.buf \
                 && exec \"$@\"";
    let mut cmd = Command::new("sh");
    cmd.envs(record.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .args(["-c", plant])
        .arg(&victim)
        .arg(record.get_program())
        .args(record.get_args());
    let sonda = Running::start(cmd);
    let pid = sonda.pid;
    let buffers: Vec<PathBuf> = wait_for("buffer file", || {
        buffer_files_of(pid)
            .into_iter()
            .filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_file()))
            .collect()
    });
    assert_eq!(buffers.len(), 1, "{buffers:?}");
    let buffer = &buffers[0];
    let name = buffer.file_name().unwrap().to_string_lossy().into_owned();
    let random = name
        .strip_suffix(".buf")
        .and_then(|n| n.rsplit('-').next())
        .unwrap();
    assert!(
        random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit()),
        "{name}: no random part"
    );
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = buffer.metadata().unwrap();
    assert_eq!((meta.uid(), meta.permissions().mode() & 0o777), (0, 0o600));
    assert!(
        meta.blocks() * 512 >= meta.len(),
        "the buffer is not reserved whole"
    );
    assert!(!nobody_can_read(buffer), "nobody read {}", buffer.display());
    let instance = wait_for("ftrace instance", || instances_of(pid));
    for file in ["trace", "per_cpu/cpu0/trace_pipe_raw", "tracing_on"] {
        let path = instance[0].join(file);
        assert!(path.exists(), "{}", path.display());
        assert!(!nobody_can_read(&path), "nobody read {}", path.display());
    }
    let (status, stdout, stderr) = sonda.end();
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, "Chatty: 4 threads, every sum right\n");
    assert!(!victim.exists(), "written through the planted symlink");
    assert!(tally(&trace, METHOD).enters > 0);
    // Ours went at the end (the planted symlinks may be gone too: any sonda command
    // removes what has the name of a collector that is gone).
    let left = buffer_files_of(pid);
    assert!(
        left.iter()
            .all(|p| p.symlink_metadata().map_or(true, |m| m.is_symlink())),
        "{left:?}"
    );
    for n in [0, 1] {
        let _ = std::fs::remove_file(format!("/dev/shm/sonda-{pid}-{n}.buf"));
    }
}

/// A JVM of `nobody` whose working directory it may not write (so the attach trigger
/// must go to /tmp), attached by root after another user planted, at the names sonda
/// and HotSpot use: a symlink at the staging directory, a file at the trigger, and a
/// listening socket at the JVM's attach socket. Before, each stopped the attach (the
/// planted directory refused, the trigger not removable, the impostor's reply garbage).
/// The buffer file is nobody's, mode 0600: the JVM's user's and no one else's.
#[test]
fn files_planted_by_another_user_do_not_stop_an_attach() {
    let _machine = shared();
    if !require_root() || !require_tool("setpriv") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let classes = dir.path().join("classes");
    std::fs::create_dir_all(&classes).unwrap();
    for f in std::fs::read_dir(java_classes("Chatty")).unwrap().flatten() {
        std::fs::copy(f.path(), classes.join(f.file_name())).unwrap();
    }
    use std::os::unix::fs::PermissionsExt;
    for p in [dir.path(), classes.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut java = Command::new("setpriv");
    java.args([
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "java",
        "-cp",
    ])
    .arg(&classes)
    .args(["Chatty", "0", "4", "4"])
    .current_dir("/");
    let jvm = Running::start(java);
    let pid = jvm.pid;
    // The staging directory sonda would use for nobody, as a symlink to Mallory's.
    let lib = std::fs::read(agent()).unwrap();
    let hash = lib.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let staging = PathBuf::from(format!("/tmp/sonda-65534-{hash:016x}"));
    let _ = std::fs::remove_dir_all(&staging);
    let _ = std::fs::remove_file(&staging);
    let mallorys = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(mallorys.path(), &staging).unwrap();
    std::os::unix::fs::lchown(&staging, Some(12345), Some(12345)).unwrap();
    // The trigger file, Mallory's.
    let trigger = PathBuf::from(format!("/tmp/.attach_pid{pid}"));
    std::fs::write(&trigger, b"").unwrap();
    std::os::unix::fs::chown(&trigger, Some(12345), Some(12345)).unwrap();
    // The attach socket, Mallory's, with a listener that counts what it is sent (this
    // process listens: its pid is not the JVM's either).
    let socket = PathBuf::from(format!("/tmp/.java_pid{pid}"));
    let impostor = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::os::unix::fs::lchown(&socket, Some(12345), Some(12345)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    impostor.set_nonblocking(true).unwrap();
    let heard = std::thread::spawn(move || {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            match impostor.accept() {
                Ok((mut peer, _)) => {
                    peer.set_nonblocking(false).unwrap();
                    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    let mut got = Vec::new();
                    let _ = peer.read_to_end(&mut got);
                    return Some(got.len());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        None
    });

    let trace = dir.path().join("planted.trace");
    let attach = Attach::to(pid)
        .methods([METHOD])
        .options(["--duration", "2"])
        .command(&trace)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The buffer file is the JVM's user's, and no one else's. sonda creates it (0600,
    // its own) and then gives it to that user: seen in between, it is still sonda's
    // (a fresh-clone CI run read root's owner there).
    use std::os::unix::fs::MetadataExt;
    let owners = wait_for("buffer file given to the JVM's user", || {
        buffer_files_of(attach.id())
            .into_iter()
            .filter_map(|f| f.metadata().ok().map(|m| (f, m)))
            .inspect(|(f, m)| assert_eq!(m.mode() & 0o777, 0o600, "{}", f.display()))
            .filter(|(_, m)| (m.uid(), m.gid()) != (0, 0))
            .collect()
    });
    let (buffer, meta) = &owners[0];
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o777),
        (65534, 65534, 0o600),
        "{}",
        buffer.display()
    );
    let out = attach.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "sonda attach failed: {err}");
    assert!(err.contains("original classes restored"), "{err}");
    assert!(tally(&trace, METHOD).enters > 0);
    let (status, stdout, stderr) = jvm.end();
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, "Chatty: 4 threads, every sum right\n");
    assert_eq!(
        heard.join().unwrap(),
        Some(0),
        "the impostor was not asked, or was sent the request"
    );
    assert_eq!(
        std::fs::read_dir(mallorys.path()).unwrap().count(),
        0,
        "written through the planted staging directory"
    );
    // The copy went to a directory of its own, nobody's and private.
    let copies: Vec<PathBuf> = std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("sonda-65534-{hash:016x}-"))
        })
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    let meta = copies[0].metadata().unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (65534, 0o700));
    let _ = std::fs::remove_file(&staging);
    let _ = std::fs::remove_file(&trigger);
    let _ = std::fs::remove_file(&socket);
    std::fs::remove_dir_all(&copies[0]).unwrap();
}

/// A `sonda record` killed with SIGKILL, reading the kernel through ftrace: its ftrace
/// instance was left tracing (a 16 MiB buffer per CPU) until the next recording
/// started, and its buffer file stayed in /dev/shm. Now any later sonda command, even a
/// `sonda report`, removes both.
#[test]
fn a_killed_recording_leaves_nothing_tracing_after_any_sonda_command() {
    let _machine = shared();
    if !require_tracepoints() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("killed.trace");
    let mut child = record_a_sleep(&trace, "ftrace");
    let pid = child.id();
    let instance = wait_for("ftrace instance", || instances_of(pid));
    let buffers = wait_for("buffer file", || buffer_files_of(pid));
    // Tracing once the command runs.
    let tracing_on = instance[0].join("tracing_on");
    let started = Instant::now();
    while std::fs::read_to_string(&tracing_on).unwrap().trim() != "1" {
        assert!(started.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    // The recorded command, to end it ourselves: the collector's death does not. Its
    // tracing may be on before the command is forked (the run failed once reading an
    // empty list of children), and whichever thread forks it is its parent.
    let sleeper = wait_for("recorded command", || children_of(pid))[0];
    child.kill().unwrap();
    child.wait().unwrap();
    // What SIGKILL leaves: the kernel goes on tracing for nobody.
    assert_eq!(std::fs::read_to_string(&tracing_on).unwrap().trim(), "1");
    assert!(buffers[0].exists());
    // The killed recording's trace stays at its partial name (sonda had no chance to
    // rename it); reporting on it is the later sonda command.
    let partial = partial_outputs(&trace);
    assert_eq!(partial.len(), 1, "the killed recording's partial trace");
    let out = run(Command::new(sonda()).arg("report").arg(&partial[0]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        instances_of(pid),
        Vec::<PathBuf>::new(),
        "the instance is left"
    );
    assert_eq!(
        buffer_files_of(pid),
        Vec::<PathBuf>::new(),
        "the buffer file is left"
    );
    // SAFETY: kill on the sleep our sonda started; it is still alive (its parent's
    // death did not end it), so the pid is still its.
    unsafe { libc::kill(sleeper as i32, libc::SIGKILL) };
}
