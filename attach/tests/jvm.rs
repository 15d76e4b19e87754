//! The attach protocol against real HotSpot JVMs: as root, as `nobody`, across users,
//! inside new pid/mount/network (and user) namespaces, and when things go wrong.

mod common;

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{require, require_root, scratch, test_agent, Jvm, Placement};
use sonda_attach::{execute, load_agent, stage_agent, AttachError, Target, DEFAULT_TIMEOUT};

/// The thread dump SIGQUIT prints when it does not start the attach listener: its
/// absence shows no stray SIGQUIT reached the JVM.
const STRAY_DUMP: &str = "Full thread dump";

fn no_trigger_left(jvm: &Jvm, target: &Target) {
    for path in jvm.trigger_candidates(target.ns_pid(), target.tmp()) {
        assert!(
            fs::symlink_metadata(&path).is_err(),
            "trigger file left behind: {}",
            path.display()
        );
    }
}

#[test]
fn jcmd_and_properties_return_the_jvms_own_answers() {
    let marker = format!("m{}", std::process::id());
    let jvm = Jvm::start(
        Placement::Here,
        &[&format!("-Dsonda.test.marker={marker}")],
        &scratch("jcmd"),
    );
    let target = Target::inspect(jvm.pid).unwrap();
    assert_eq!(target.ns_pid(), jvm.own_pid);
    assert!(target.shares_our_filesystem());

    let reply = execute(&target, "jcmd", &["VM.version"], DEFAULT_TIMEOUT).unwrap();
    assert_eq!(reply.status, 0);
    assert!(
        reply.output.contains(&jvm.vm_version),
        "{} not in {:?}",
        jvm.vm_version,
        reply.output
    );
    let props = execute(&target, "properties", &[], DEFAULT_TIMEOUT).unwrap();
    assert_eq!(props.status, 0);
    assert!(
        props
            .output
            .contains(&format!("sonda.test.marker={marker}")),
        "{}",
        props.output
    );
    no_trigger_left(&jvm, &target);
    assert!(!jvm.output().contains(STRAY_DUMP));
}

#[test]
fn threaddump_names_our_thread_with_its_native_id() {
    let jvm = Jvm::start(Placement::Here, &[], &scratch("threaddump"));
    let target = Target::inspect(jvm.pid).unwrap();
    let dump = execute(&target, "threaddump", &[], DEFAULT_TIMEOUT).unwrap();
    assert_eq!(dump.status, 0);
    let line = dump
        .output
        .lines()
        .find(|l| l.starts_with("\"sonda-test-worker\""))
        .unwrap_or_else(|| panic!("no worker thread in {}", dump.output));
    let nid = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("nid=0x"))
        .unwrap_or_else(|| panic!("no nid in {line}"));
    let tid = u32::from_str_radix(nid, 16).unwrap();
    // Independent truth: the kernel knows that thread by the name HotSpot gave it.
    let comm = fs::read_to_string(format!("/proc/{}/task/{tid}/comm", jvm.pid)).unwrap();
    assert_eq!(comm.trim(), "sonda-test-work");
    // A thread id stands for its process.
    assert_eq!(Target::inspect(tid).unwrap().pid(), jvm.pid);
    // The dump went to us, not to the JVM's stdout.
    assert!(!jvm.output().contains(STRAY_DUMP));
}

#[test]
fn a_second_attach_reuses_the_socket_without_a_signal() {
    let jvm = Jvm::start(Placement::Here, &[], &scratch("second"));
    let target = Target::inspect(jvm.pid).unwrap();
    let socket = target.tmp().join(format!(".java_pid{}", target.ns_pid()));
    assert!(!socket.exists());
    execute(&target, "jcmd", &["VM.uptime"], DEFAULT_TIMEOUT).unwrap();
    assert!(fs::metadata(&socket).unwrap().file_type().is_socket());
    let again = Target::inspect(jvm.pid).unwrap();
    let reply = execute(&again, "jcmd", &["VM.version"], DEFAULT_TIMEOUT).unwrap();
    assert!(reply.output.contains(&jvm.vm_version));
    // A SIGQUIT to a JVM whose listener runs would print a thread dump.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!jvm.output().contains(STRAY_DUMP), "{}", jvm.output());
}

#[test]
fn a_stale_socket_is_replaced() {
    // What a JVM killed with SIGKILL leaves behind; in containers the next JVM often
    // gets the same pid.
    let jvm = Jvm::start(Placement::Here, &[], &scratch("stale"));
    let target = Target::inspect(jvm.pid).unwrap();
    let socket = target.tmp().join(format!(".java_pid{}", target.ns_pid()));
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let stale = fs::metadata(&socket).unwrap().ino();
    let reply = execute(&target, "jcmd", &["VM.version"], DEFAULT_TIMEOUT).unwrap();
    assert!(reply.output.contains(&jvm.vm_version));
    assert_ne!(fs::metadata(&socket).unwrap().ino(), stale);
}

#[test]
fn loading_a_missing_library_gives_the_jvms_message() {
    let jvm = Jvm::start(Placement::Here, &[], &scratch("missing-agent"));
    let target = Target::inspect(jvm.pid).unwrap();
    let path = Path::new("/nonexistent/libnothing.so");
    match load_agent(&target, path, "", DEFAULT_TIMEOUT) {
        Err(AttachError::AgentLoadFailed { code, message }) => {
            assert_eq!(code, -1);
            assert!(message.contains("/nonexistent/libnothing.so"), "{message}");
            assert!(
                message.contains("cannot open shared object file"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // A library without Agent_OnAttach.
    let zlib = Path::new("/lib/x86_64-linux-gnu/libz.so.1");
    if zlib.exists() {
        match load_agent(&target, zlib, "", DEFAULT_TIMEOUT) {
            Err(AttachError::AgentLoadFailed { message, .. }) => {
                assert!(message.contains("Agent_OnAttach"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        load_agent(&target, Path::new("relative/lib.so"), "", DEFAULT_TIMEOUT),
        Err(AttachError::InvalidRequest(_))
    ));
    assert!(jvm.alive());
}

#[test]
fn a_real_agent_returns_its_agent_onattach_code() {
    let Some(agent) = test_agent() else {
        return;
    };
    let jvm = Jvm::start(Placement::Here, &[], &scratch("real-agent"));
    let target = Target::inspect(jvm.pid).unwrap();
    let staged = stage_agent(&target, agent).unwrap();
    assert_eq!(
        staged,
        fs::canonicalize(agent).unwrap(),
        "same view: used in place"
    );
    assert_eq!(
        load_agent(&target, &staged, "0", DEFAULT_TIMEOUT).unwrap(),
        0
    );
    assert_eq!(
        load_agent(&target, &staged, "7", DEFAULT_TIMEOUT).unwrap(),
        7
    );
}

#[test]
fn a_missing_pid_is_reported() {
    assert!(matches!(
        Target::inspect(99_999_999),
        Err(AttachError::NoSuchProcess(99_999_999))
    ));
    let mut done = Command::new("true").spawn().unwrap();
    let pid = done.id();
    done.wait().unwrap();
    assert!(matches!(
        Target::inspect(pid),
        Err(AttachError::NoSuchProcess(p)) if p == pid
    ));
}

#[test]
fn a_process_that_is_not_a_jvm_is_never_signalled() {
    let mut sleep = Command::new("sleep").arg("100").spawn().unwrap();
    let pid = sleep.id();
    let e = Target::inspect(pid).unwrap_err();
    assert!(matches!(e, AttachError::NotAJvm(p) if p == pid), "{e:?}");
    assert!(e.to_string().contains("not a HotSpot JVM"));
    std::thread::sleep(Duration::from_millis(200));
    assert!(sleep.try_wait().unwrap().is_none(), "sleep was killed");
    sleep.kill().unwrap();
    sleep.wait().unwrap();
}

#[test]
fn a_process_mapping_libjvm_without_handlers_is_not_signalled() {
    // A launcher that loaded libjvm.so but has not created the JVM: SIGQUIT would kill it.
    let Some(mut host) = common::jvm_host() else {
        return;
    };
    let target = Target::inspect(host.id()).unwrap();
    let e = execute(&target, "jcmd", &["VM.version"], DEFAULT_TIMEOUT).unwrap_err();
    assert!(
        matches!(e, AttachError::SignalsDisabled(p) if p == host.id()),
        "{e:?}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(host.try_wait().unwrap().is_none(), "the process was killed");
    for path in [
        format!("/proc/{}/cwd/.attach_pid{}", host.id(), host.id()),
        format!("/tmp/.attach_pid{}", host.id()),
    ] {
        assert!(!Path::new(&path).exists(), "{path}");
    }
    host.kill().unwrap();
    host.wait().unwrap();
}

#[test]
fn a_jvm_run_with_xrs_is_attached_without_a_signal() {
    // -Xrs: no SIGQUIT handler (the signal would kill it), but HotSpot then opens the
    // attach socket at start-up, so no signal is needed.
    let jvm = Jvm::start(Placement::Here, &["-Xrs"], &scratch("xrs"));
    let target = Target::inspect(jvm.pid).unwrap();
    let reply = execute(&target, "jcmd", &["VM.version"], DEFAULT_TIMEOUT).unwrap();
    assert!(reply.output.contains(&jvm.vm_version));
    assert!(jvm.alive());
    no_trigger_left(&jvm, &target);
}

#[test]
fn a_stopped_jvm_times_out_and_leaves_no_trigger() {
    let jvm = Jvm::start(Placement::Here, &[], &scratch("stopped"));
    let target = Target::inspect(jvm.pid).unwrap();
    jvm.signal("STOP");
    let timeout = Duration::from_secs(2);
    let started = Instant::now();
    let e = execute(&target, "jcmd", &["VM.version"], timeout).unwrap_err();
    let took = started.elapsed();
    match &e {
        AttachError::Timeout { pid, waited } => {
            assert_eq!(*pid, jvm.pid);
            assert!(
                *waited >= timeout && *waited < timeout + Duration::from_millis(600),
                "{waited:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(took < timeout + Duration::from_millis(700), "{took:?}");
    assert!(
        e.to_string()
            .contains("did not answer the attach request within 2."),
        "{e}"
    );
    no_trigger_left(&jvm, &target);

    // Resumed, it answers (the SIGQUIT it got meanwhile only prints a thread dump).
    jvm.signal("CONT");
    let reply = execute(&target, "jcmd", &["VM.version"], DEFAULT_TIMEOUT).unwrap();
    assert!(reply.output.contains(&jvm.vm_version));

    // Stopped again with its listener running: the connection succeeds, the reply
    // never comes.
    jvm.signal("STOP");
    let e = execute(&target, "jcmd", &["VM.version"], Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, AttachError::Timeout { .. }), "{e:?}");
    jvm.signal("CONT");
    assert!(execute(&target, "jcmd", &["VM.uptime"], DEFAULT_TIMEOUT).is_ok());
}

#[test]
fn a_jvm_with_attach_disabled_times_out_unharmed() {
    let jvm = Jvm::start(
        Placement::Here,
        &["-XX:+DisableAttachMechanism"],
        &scratch("disabled"),
    );
    let target = Target::inspect(jvm.pid).unwrap();
    let e = execute(
        &target,
        "jcmd",
        &["VM.version"],
        Duration::from_millis(1500),
    )
    .unwrap_err();
    assert!(matches!(e, AttachError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains("DisableAttachMechanism"), "{e}");
    no_trigger_left(&jvm, &target);
    // It took the SIGQUIT as a request for a thread dump, and lives on.
    std::thread::sleep(Duration::from_millis(300));
    assert!(jvm.alive());
    assert!(jvm.output().contains(STRAY_DUMP), "{}", jvm.output());
}

#[test]
fn a_jvm_dying_during_the_attach_ends_it_at_once() {
    let jvm = Jvm::start(Placement::Here, &[], &scratch("dying"));
    let target = Target::inspect(jvm.pid).unwrap();
    jvm.signal("STOP");
    let pid = jvm.pid;
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
    });
    let started = Instant::now();
    let e = execute(&target, "jcmd", &["VM.version"], DEFAULT_TIMEOUT).unwrap_err();
    killer.join().unwrap();
    assert!(
        matches!(e, AttachError::ProcessExited(p) if p == pid),
        "{e:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    no_trigger_left(&jvm, &target);
}

/// Runs the attach-probe binary as `nobody`.
fn probe_as_nobody(args: &[&str]) -> std::process::Output {
    // The probe must be reachable by nobody: copy it next to the test classes.
    let dir = scratch("probe");
    let probe = dir.join("attach-probe");
    fs::copy(env!("CARGO_BIN_EXE_attach-probe"), &probe).unwrap();
    Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(&probe)
        .args(args)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn another_users_jvm_is_refused_before_any_signal() {
    if !require_root() {
        return;
    }
    let jvm = Jvm::start(Placement::Here, &[], &scratch("refused"));
    let out = probe_as_nobody(&[&jvm.pid.to_string(), "jcmd", "VM.version"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("PermissionDenied"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "process {} runs as user 0 and we run as user 65534",
            jvm.pid
        )),
        "{stderr}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(jvm.alive());
    assert!(!jvm.output().contains(STRAY_DUMP), "the JVM got a SIGQUIT");
    let target = Target::inspect(jvm.pid).unwrap();
    no_trigger_left(&jvm, &target);
}

#[test]
fn a_user_attaches_to_its_own_jvm() {
    if !require_root() {
        return;
    }
    // The JVM's working directory is root's: the trigger falls back to /tmp.
    let jvm = Jvm::start(Placement::Nobody, &[], &scratch("own"));
    // A socket of an earlier JVM with this pid, killed (pids wrap at 32768 on a small
    // machine, and other tests' root JVMs die without removing theirs), would be
    // root's: this JVM could not put its own in place, and nobody may not remove it,
    // so the attach is rightly refused (see try_connect). That is another test's case;
    // here the machine is made clean first (the JVM makes its socket only when asked).
    let stale = Path::new("/tmp").join(format!(".java_pid{}", jvm.pid));
    if fs::symlink_metadata(&stale).is_ok() {
        fs::remove_file(&stale).unwrap();
    }
    let out = probe_as_nobody(&[&jvm.pid.to_string(), "jcmd", "VM.version"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("status 0\n"), "{stdout}");
    assert!(stdout.contains(&jvm.vm_version), "{stdout}");
    let target = Target::inspect(jvm.pid).unwrap();
    no_trigger_left(&jvm, &target);
}

#[test]
fn root_attaches_to_a_jvm_of_another_user() {
    if !require_root() {
        return;
    }
    let jvm = Jvm::start(Placement::Nobody, &[], &scratch("nobody-jvm"));
    let target = Target::inspect(jvm.pid).unwrap();
    assert_eq!((target.uid(), target.gid()), (65534, 65534));
    let reply = execute(&target, "jcmd", &["VM.version"], DEFAULT_TIMEOUT).unwrap();
    assert!(reply.output.contains(&jvm.vm_version));
    no_trigger_left(&jvm, &target);
    // The agent is copied where nobody can read it, and loads.
    if let Some(agent) = test_agent() {
        let staged = stage_agent(&target, agent).unwrap();
        assert!(
            staged.to_str().unwrap().starts_with("/tmp/sonda-65534-"),
            "{}",
            staged.display()
        );
        let meta = fs::metadata(staged.parent().unwrap()).unwrap();
        assert_eq!((meta.uid(), meta.mode() & 0o777), (65534, 0o700));
        assert_eq!(
            load_agent(&target, &staged, "5", DEFAULT_TIMEOUT).unwrap(),
            5
        );
        fs::remove_dir_all(staged.parent().unwrap()).unwrap();
    }
}

fn container_test(test: &str, placement: Placement) {
    if !require_root() || !require("unshare", common::have("unshare")) {
        return;
    }
    let jvm = Jvm::start(placement, &[], &scratch(test));
    assert_eq!(jvm.own_pid, 1, "the JVM is pid 1 of its namespace");
    let target = Target::inspect(jvm.pid).unwrap();
    assert_eq!(target.ns_pid(), 1);
    assert_ne!(target.pid(), 1);
    assert!(!target.shares_our_filesystem());
    assert_eq!(
        target.tmp(),
        Path::new(&format!("/proc/{}/root/tmp", jvm.pid))
    );

    let reply = execute(&target, "jcmd", &["VM.version"], DEFAULT_TIMEOUT).unwrap();
    assert!(reply.output.contains(&jvm.vm_version));
    // The socket is in the JVM's private /tmp, not ours.
    assert!(fs::metadata(target.tmp().join(".java_pid1"))
        .unwrap()
        .file_type()
        .is_socket());
    assert!(!Path::new("/tmp/.java_pid1").exists());
    no_trigger_left(&jvm, &target);

    if let Some(agent) = test_agent() {
        let staged = stage_agent(&target, agent).unwrap();
        assert!(
            staged
                .to_str()
                .unwrap()
                .starts_with(&format!("/tmp/sonda-{}-", target.uid())),
            "{}",
            staged.display()
        );
        let ours = target.root().join(staged.strip_prefix("/").unwrap());
        assert_eq!(fs::read(&ours).unwrap(), fs::read(agent).unwrap());
        assert_ne!(
            fs::metadata(&ours).unwrap().ino(),
            fs::metadata(&staged).map(|m| m.ino()).unwrap_or(0),
            "the copy is in the JVM's /tmp, not ours"
        );
        assert_eq!(fs::metadata(&ours).unwrap().uid(), target.uid());
        assert_eq!(
            load_agent(&target, &staged, "3", DEFAULT_TIMEOUT).unwrap(),
            3
        );
        // Staging again reuses the directory.
        assert_eq!(stage_agent(&target, agent).unwrap(), staged);
    }
}

#[test]
fn a_jvm_in_new_pid_mount_and_network_namespaces() {
    container_test(
        "a_jvm_in_new_pid_mount_and_network_namespaces",
        Placement::Container,
    );
}

#[test]
fn a_jvm_in_a_user_namespace_container() {
    // uid 0 inside is 100000 outside: HotSpot refuses host root as a peer (it appears
    // as the overflow uid), so this only works by acting as uid 100000.
    container_test(
        "a_jvm_in_a_user_namespace_container",
        Placement::UserNsContainer,
    );
}
