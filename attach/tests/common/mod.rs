//! Real JVMs for the attach tests: compile the Java program (and a tiny C agent) once,
//! start JVMs as root, as `nobody`, or inside new namespaces, and clean them up.
#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use sonda_tests::{have, require, require_root};

/// A directory every user can read, outside /tmp (the namespace tests hide /tmp).
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("sonda-attach-{}", std::process::id()))
        .join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    // Against a restrictive umask (cargo creates the target dir's own parts 0755).
    for p in [dir.as_path(), dir.parent().unwrap()] {
        fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

/// The compiled test program's class directory.
pub fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("classes");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/Sleeper.java");
        let out = Command::new("javac")
            .arg("-d")
            .arg(&dir)
            .arg(&src)
            .output()
            .expect("javac");
        assert!(
            out.status.success(),
            "javac: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        fs::set_permissions(dir.join("Sleeper.class"), fs::Permissions::from_mode(0o644)).unwrap();
        dir
    })
}

/// A JVMTI-loadable library whose Agent_OnAttach returns its options as a number, or
/// None (after a skip message) without a C compiler.
pub fn test_agent() -> Option<&'static Path> {
    static LIB: OnceLock<Option<PathBuf>> = OnceLock::new();
    let lib = LIB.get_or_init(|| {
        if !have("cc") {
            return None;
        }
        let dir = scratch("agent");
        let lib = dir.join("libtestagent.so");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/test_agent.c");
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&lib)
            .arg(&src)
            .status()
            .expect("cc");
        assert!(status.success());
        Some(lib)
    });
    if require("a C compiler (cc)", lib.is_some()) {
        lib.as_deref()
    } else {
        None
    }
}

/// A program that maps libjvm.so but never starts a JVM (see `java/jvm_host.c`),
/// started and ready, or None (after a skip message) without a C compiler.
pub fn jvm_host() -> Option<Child> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    let bin = BIN.get_or_init(|| {
        if !have("cc") {
            return None;
        }
        let bin = scratch("jvm-host-bin").join("jvm_host");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/jvm_host.c");
        let status = Command::new("cc")
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .arg("-ldl")
            .status()
            .unwrap();
        assert!(status.success());
        Some(bin)
    });
    if !require("a C compiler (cc)", bin.is_some()) {
        return None;
    }
    let java = fs::canonicalize(
        String::from_utf8(
            Command::new("sh")
                .args(["-c", "command -v java"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    )
    .unwrap();
    let libjvm = java.parent().unwrap().join("../lib/server/libjvm.so");
    let mut child = Command::new(bin.as_ref().unwrap())
        .arg(&libjvm)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n", "jvm_host {}", libjvm.display());
    Some(child)
}

/// Where and as whom the JVM runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// As us, in our namespaces.
    Here,
    /// As `nobody` (via setpriv), in our namespaces.
    Nobody,
    /// In new pid, mount and network namespaces, with its own tmpfs on /tmp (pid 1).
    Container,
    /// Like `Container`, plus a user namespace: uid 0 inside is uid 100000 outside.
    UserNsContainer,
}

pub struct Jvm {
    child: Child,
    /// The JVM's pid in our namespace.
    pub pid: u32,
    /// The pid the JVM printed for itself (its namespace's view).
    pub own_pid: u32,
    /// `java.vm.version` as the JVM printed it.
    pub vm_version: String,
    output: Arc<Mutex<String>>,
}

const PREFIX_CONTAINER: &[&str] = &[
    "unshare",
    "--pid",
    "--mount",
    "--net",
    "--fork",
    "--mount-proc",
    "sh",
    "-c",
    sonda_tests::CONTAINER_OWN_TMP,
    "sh",
    env!("CARGO_TARGET_TMPDIR"),
];

impl Jvm {
    pub fn start(placement: Placement, jvm_args: &[&str], cwd: &Path) -> Jvm {
        let mut argv: Vec<String> = Vec::new();
        let prefix: &[&str] = match placement {
            Placement::Here => &[],
            Placement::Nobody => &[
                "setpriv",
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
            ],
            Placement::Container => PREFIX_CONTAINER,
            Placement::UserNsContainer => &[
                "setpriv",
                "--reuid=100000",
                "--regid=100000",
                "--clear-groups",
                "unshare",
                "--user",
                "--map-root-user",
            ],
        };
        argv.extend(prefix.iter().map(|s| s.to_string()));
        if placement == Placement::UserNsContainer {
            argv.extend(PREFIX_CONTAINER[1..].iter().map(|s| s.to_string()));
        }
        argv.extend(
            [
                "java",
                "-Xmx64m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        argv.extend(jvm_args.iter().map(|s| s.to_string()));
        argv.extend([
            "-cp".to_string(),
            classes().display().to_string(),
            "Sleeper".to_string(),
        ]);

        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let output = Arc::new(Mutex::new(String::new()));
        collect(child.stdout.take().unwrap(), output.clone());
        collect(child.stderr.take().unwrap(), output.clone());

        let started = Instant::now();
        let ready = loop {
            let text = output.lock().unwrap().clone();
            if let Some(line) = text.lines().find(|l| l.starts_with("ready ")) {
                break line.to_string();
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("JVM {argv:?} exited with {status}: {text}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "JVM not ready: {text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut words = ready.split_whitespace().skip(1);
        let own_pid = words.next().unwrap().parse().unwrap();
        let vm_version = words.next().unwrap().to_string();
        let pid = find_java(child.id()).expect("the java process under the launcher");
        Jvm {
            child,
            pid,
            own_pid,
            vm_version,
            output,
        }
    }

    /// Everything the JVM printed so far (stdout and stderr).
    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    pub fn alive(&self) -> bool {
        alive(self.pid)
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        if signal == "STOP" {
            sonda_tests::wait_until_stopped(self.pid);
        }
    }

    /// Paths of the two trigger files HotSpot looks at, from our side.
    pub fn trigger_candidates(&self, ns_pid: u32, tmp: &Path) -> [PathBuf; 2] {
        [
            PathBuf::from(format!("/proc/{}/cwd/.attach_pid{ns_pid}", self.pid)),
            tmp.join(format!(".attach_pid{ns_pid}")),
        ]
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        // Closing stdin ends the program normally, and HotSpot then removes its
        // socket; a killed JVM would leave /tmp/.java_pid<pid> behind.
        let _ = Command::new("kill")
            .args(["-CONT", &self.pid.to_string()])
            .stderr(Stdio::null())
            .status();
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && alive(self.pid) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("kill")
            .args(["-KILL", &self.pid.to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 1..]
                .split_whitespace()
                .next();
            !matches!(state, Some("Z" | "X"))
        }
        Err(_) => false,
    }
}

fn collect(stream: impl Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let mut text = into.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
}

/// The process named `java` at or under `pid` (launchers like unshare fork it).
fn find_java(pid: u32) -> Option<u32> {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    if comm.trim() == "java" {
        return Some(pid);
    }
    let children = fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .find_map(find_java)
}
