//! Helpers shared by the end-to-end tests: where the built `sonda` and `libsonda.so`
//! are, compiling the Java workloads and recording them ([`Workload`]), running
//! commands, deciding when a test may skip ([`require`]), which tests may share the
//! machine ([`exclusive`]), checking Paraver output with prvcheck and pertalde
//! ([`check_paraver`]), and reading a `.prv` back for cross-checks.
//!
//! The tests run the real binaries: build them first (`cargo build --release
//! --workspace`, which `scripts/test.sh` does) — the harness does not call cargo, so
//! that a test run never blocks on cargo's build lock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

mod machine;
pub mod paraver;
pub mod pcf;
mod skip;
mod workload;

pub use machine::{exclusive, shared};
pub use workload::{Attach, Recorded, Workload};

pub use skip::{
    have, in_ci, is_root, optional, require, require_root, require_tool, require_tracepoints,
    tracepoints_available,
};

/// A temporary directory that stays when the test holding it fails (dropped while
/// panicking), and says where: a recording behind a rare failure can then be read.
pub struct KeptOnFailure(Option<tempfile::TempDir>);

impl KeptOnFailure {
    /// A fresh temporary directory.
    pub fn new() -> KeptOnFailure {
        KeptOnFailure(Some(tempfile::tempdir().expect("a temporary directory")))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.as_ref().expect("held until dropped").path()
    }
}

impl Default for KeptOnFailure {
    fn default() -> KeptOnFailure {
        KeptOnFailure::new()
    }
}

impl Drop for KeptOnFailure {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            if std::thread::panicking() {
                eprintln!("the test's files are kept in {}", dir.keep().display());
            }
        }
    }
}

/// A trace's `kernel.*` counters as `name=value` words: what the recorder says of its own
/// reading (records lost, recovered, left out as another program's), printed beside a
/// failure so that its cause can be told from the log.
pub fn kernel_counters(meta: &sonda_trace::TraceMeta) -> String {
    let words: Vec<String> = meta
        .counters
        .iter()
        .filter(|(name, _)| name.starts_with("kernel."))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    words.join(" ")
}

/// The machine's CPU time so far and the part of it the hypervisor stole, in clock
/// ticks (`/proc/stat`'s first line: user, nice, system, idle, iowait, irq, softirq,
/// steal), to say how disturbed a run was. A kernel with paravirtual steal accounting
/// leaves steal out of the task clock, hence out of schedstat and the JVM's CPU clock.
pub fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    Some((fields.iter().take(8).sum(), *fields.get(7)?))
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Compiles the bundled demo service (scripts/demo/demo/ServiceDemo.java, the workload
/// of the services, metrics, Parquet and model tests) into `dir/classes`, and returns
/// that class path; the test fails if javac does.
pub fn service_demo_classes(dir: &Path) -> PathBuf {
    let out = dir.join("classes");
    std::fs::create_dir_all(&out).expect("classes directory");
    let src = repo_root().join("scripts/demo/demo/ServiceDemo.java");
    let st = run(Command::new("javac").arg("-d").arg(&out).arg(&src));
    assert!(st.status.success(), "javac: {}", text(&st.stderr));
    out
}

/// The cargo profile directory the test binary was built into (`target/release`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test binary>
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

fn built(name: &str) -> PathBuf {
    let p = profile_dir().join(name);
    assert!(
        p.exists(),
        "{} is not built: run `cargo build --release --workspace` before the tests (scripts/test.sh does)",
        p.display()
    );
    p
}

/// The partial files of the output `path`: `NAME.XXXXXX.partial` beside it, where sonda
/// writes an output until it is complete (and where a killed recording's trace stays).
pub fn partial_outputs(path: &Path) -> Vec<PathBuf> {
    let name = path
        .file_name()
        .expect("an output has a file name")
        .to_string_lossy()
        .into_owned();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let partial = |file: &str| {
        file.strip_prefix(name.as_str())
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|rest| rest.strip_suffix(".partial"))
            .is_some_and(|random| random.len() == 6)
    };
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(partial))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The `sonda` binary.
pub fn sonda() -> PathBuf {
    built("sonda")
}

/// The agent library.
pub fn agent() -> PathBuf {
    built("libsonda.so")
}

/// A `sh -c` script that gives a container (a new mount namespace) its own /tmp, a
/// fresh tmpfs, as Docker does, then runs the rest of its arguments. Its first argument
/// is the test's CARGO_TARGET_TMPDIR: when the checkout lives under /tmp (a scratch
/// clone), the test's files there would vanish under the tmpfs, so they are bound back
/// at their paths, through the host's /tmp kept on /mnt of the private namespace.
pub const CONTAINER_OWN_TMP: &str = "k=$1; shift; case $k in /tmp/*) mount --bind /tmp /mnt && mount -t tmpfs tmpfs /tmp && mkdir -p \"$k\" && mount --bind \"/mnt/${k#/tmp/}\" \"$k\" ;; *) mount -t tmpfs tmpfs /tmp ;; esac && exec \"$@\"";

/// Waits until every thread of process `pid` is stopped after a SIGSTOP: kill(2)
/// returns before a thread running on another CPU has taken the stop, and meanwhile
/// it may still answer (an attach request, say).
pub fn wait_until_stopped(pid: u32) {
    let started = std::time::Instant::now();
    let all_stopped = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .all(|task| {
                std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                    stat.rsplit_once(')')
                        .and_then(|(_, rest)| rest.split_whitespace().next())
                        == Some("T")
                })
            })
    };
    while !all_stopped() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "process {pid} not stopped 5 s after SIGSTOP"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Compiles `tests/java/<name>.java` (once per test process) and returns the class dir.
pub fn java_classes(name: &str) -> PathBuf {
    static DIRS: OnceLock<std::sync::Mutex<BTreeMap<String, PathBuf>>> = OnceLock::new();
    let dirs = DIRS.get_or_init(Default::default);
    let mut dirs = dirs.lock().unwrap();
    if let Some(d) = dirs.get(name) {
        return d.clone();
    }
    let out = std::env::temp_dir().join(format!("sonda-java-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let src = repo_root().join("tests/java").join(format!("{name}.java"));
    let status = Command::new("javac")
        .arg("-d")
        .arg(&out)
        .arg(&src)
        .status()
        .expect("javac runs");
    assert!(status.success(), "javac failed on {}", src.display());
    dirs.insert(name.to_string(), out.clone());
    out
}

/// Runs a command to completion, capturing its output. Fails the test when the
/// output reports a panic the agent caught at the FFI boundary ("internal error in
/// ...": printed by the agent itself, or by `sonda record`/`attach` when the agent's
/// warnings hold one): no test may get there, even one that expects the command to fail.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if std::env::var_os("SONDA_TEST_VERBOSE").is_some() {
        eprintln!(
            "{cmd:?}\n--- stdout\n{}--- stderr\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        !said.contains("internal error in "),
        "the agent caught a panic running {cmd:?}:\n{said}"
    );
    out
}

/// Bytes as text, lossy.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The strict Paraver checker: `$PRVCHECK`, else the shared tool next to the
/// repository, else the copy kept in `tests/tools/`.
pub fn prvcheck_path() -> PathBuf {
    if let Some(p) = std::env::var_os("PRVCHECK") {
        return PathBuf::from(p);
    }
    let shared = repo_root().join("../shared/tools/prvcheck");
    if shared.exists() {
        return shared;
    }
    repo_root().join("tests/tools/prvcheck")
}

/// Checks a Paraver trace with both checkers the project answers to, and fails the
/// test with their findings: prvcheck (strict, no `--allow-gaps`) and pertalde's
/// `ptd comprovar -e`, BSC's own reader of the record syntax. `trace` is the `.prv`
/// or its stem (the path `sonda paraver -o` was given). Every test that exports to
/// Paraver checks here, so that no export is judged by one checker only. pertalde
/// comes from the tests' Python environment ([`python_env`]); where that cannot be
/// made it is skipped with a message, except in CI.
pub fn check_paraver(trace: &Path) {
    let prv = if trace.extension().is_some_and(|e| e == "prv") {
        trace.to_path_buf()
    } else {
        trace.with_extension("prv")
    };
    let out = run(Command::new("python3").arg(prvcheck_path()).arg(&prv));
    assert!(
        out.status.success() && text(&out.stdout).contains("prvcheck: OK"),
        "prvcheck failed on {}:\n{}{}",
        prv.display(),
        text(&out.stdout),
        text(&out.stderr)
    );
    if let Some(venv) = python_env() {
        let out = run(Command::new(venv.join("bin/ptd"))
            .args(["comprovar", "-e"])
            .arg(&prv));
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(
            out.status.success() && !said.to_lowercase().contains("error"),
            "pertalde (ptd comprovar -e) found faults in {}:\n{said}",
            prv.display()
        );
    }
}

/// The tests' Python environment: LINE (`line-solver`), `jsonschema`, pertalde, DuckDB and
/// `prometheus_client` at the versions of `tests/python-requirements.txt`, made once under the target
/// directory (scripts/test.sh makes it before the tests run) and made afresh when that
/// file changes. `None` (a skip) only when it cannot be made and CI is not "true".
pub fn python_env() -> Option<PathBuf> {
    static ENV: OnceLock<Option<PathBuf>> = OnceLock::new();
    ENV.get_or_init(make_python_env).clone()
}

fn make_python_env() -> Option<PathBuf> {
    let venv = profile_dir().join("python-venv");
    let requirements = repo_root().join("tests/python-requirements.txt");
    let stamp = venv.join("requirements.installed");
    let wanted = std::fs::read(&requirements).expect("tests/python-requirements.txt");
    let ready = || {
        std::fs::read(&stamp).is_ok_and(|s| s == wanted)
            && run(Command::new(venv.join("bin/python")).args([
                "-c",
                "import duckdb, jsonschema, line_solver, prometheus_client",
            ]))
            .status
            .success()
            && venv.join("bin/line").exists()
            && venv.join("bin/ptd").exists()
    };
    if !ready() {
        eprintln!("making {} (pip install, about a minute)", venv.display());
        let _ = std::fs::remove_dir_all(&venv);
        let made = run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        let installed = made.status.success()
            && run(Command::new(venv.join("bin/pip"))
                .args(["install", "-q", "-r"])
                .arg(&requirements))
            .status
            .success();
        if installed {
            std::fs::write(&stamp, &wanted).expect("write the venv's stamp");
        }
        if !require(
            "a Python venv with tests/python-requirements.txt (python3-venv, PyPI)",
            installed && ready(),
        ) {
            return None;
        }
    }
    Some(venv)
}

/// Asserts that a command failed with one clear line on stderr and no panic.
pub fn assert_clean_error(out: &Output, expect: &str) {
    clean_error(&out.status, &text(&out.stderr), expect);
}

fn clean_error(status: &std::process::ExitStatus, err: &str, expect: &str) {
    assert!(
        !status.success(),
        "expected failure, got success; stderr: {err}"
    );
    assert!(!err.contains("panicked"), "panic on bad input: {err}");
    assert!(
        err.contains(expect),
        "stderr should mention {expect:?}: {err}"
    );
    let lines: Vec<_> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one error line, got: {err}");
}

#[cfg(test)]
mod kept_on_failure_tests {
    use super::KeptOnFailure;

    /// Gone after a passing test, kept after a failing one.
    #[test]
    fn a_failing_tests_directory_is_kept() {
        let passed = KeptOnFailure::new();
        let gone = passed.path().to_path_buf();
        drop(passed);
        assert!(!gone.exists());
        let mut kept = std::path::PathBuf::new();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let failed = KeptOnFailure::new();
            kept = failed.path().to_path_buf();
            panic!("a failing test");
        }));
        assert!(result.is_err());
        assert!(kept.is_dir());
        std::fs::remove_dir(&kept).unwrap();
    }
}
