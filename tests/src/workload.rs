//! A Java workload run under the real `sonda`, declared instead of assembled by hand:
//! which program (a class of tests/java, compiled once per test process), its JVM
//! options and arguments, the methods to trace and sonda's own options. Recording it
//! runs `sonda record -o TRACE [options] [--methods M]... -- java [jvm args] -cp
//! CLASSES MAIN [args]`, fails the test when sonda fails or anything reports a panic
//! the agent caught ([`crate::run`]), and hands back what the test judges. [`Attach`]
//! does the same for `sonda attach PID`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};

use crate::{java_classes, run, sonda, text};

/// A Java program to run under `sonda record`.
#[derive(Clone, Debug)]
pub struct Workload {
    classes: PathBuf,
    main: String,
    jvm_args: Vec<OsString>,
    args: Vec<OsString>,
    methods: Vec<String>,
    options: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl Workload {
    /// `tests/java/<main>.java`, compiled (once per test process) with javac.
    pub fn java(main: &str) -> Workload {
        Workload::java_in(java_classes(main), main)
    }

    /// Class `main` of an already compiled class directory.
    pub fn java_in(classes: impl Into<PathBuf>, main: &str) -> Workload {
        Workload {
            classes: classes.into(),
            main: main.to_string(),
            jvm_args: Vec::new(),
            args: Vec::new(),
            methods: Vec::new(),
            options: Vec::new(),
            env: Vec::new(),
        }
    }

    /// An environment variable of `sonda record` (and so of the program).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Options of the JVM, before `-cp`.
    pub fn jvm_args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.jvm_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Arguments of the program, after its main class.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Method filters, each passed as `--methods F`.
    pub fn methods<I: IntoIterator<Item = S>, S: Into<String>>(mut self, filters: I) -> Self {
        self.methods.extend(filters.into_iter().map(Into::into));
        self
    }

    /// Options of `sonda record` (as `--agent-buffer 64M`), before the method filters.
    pub fn options<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, options: I) -> Self {
        self.options.extend(options.into_iter().map(Into::into));
        self
    }

    /// The class directory the program runs from.
    pub fn classes(&self) -> &Path {
        &self.classes
    }

    /// The program's command line without sonda: `java [jvm args] -cp CLASSES MAIN
    /// [args]`, for comparing its behaviour with and without the agent.
    pub fn java_command(&self) -> Command {
        let mut cmd = Command::new("java");
        self.java_args(&mut cmd);
        cmd
    }

    fn java_args(&self, cmd: &mut Command) {
        cmd.args(&self.jvm_args)
            .arg("-cp")
            .arg(&self.classes)
            .arg(&self.main)
            .args(&self.args);
    }

    /// The `sonda record` command, not started: for a test that drives the process
    /// itself (kills sonda midway, runs two at once).
    pub fn record_command(&self, trace: &Path) -> Command {
        let mut cmd = Command::new(sonda());
        cmd.arg("record").arg("-o").arg(trace).args(&self.options);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        for m in &self.methods {
            cmd.arg("--methods").arg(m);
        }
        cmd.arg("--").arg("java");
        self.java_args(&mut cmd);
        cmd
    }

    /// Records the program into `trace`; fails the test unless `sonda record` (and so
    /// the program) exited successfully, without a panic.
    pub fn record(&self, trace: &Path) -> Recorded {
        let done = Recorded::new(trace, run(&mut self.record_command(trace)));
        assert!(
            done.status.success(),
            "sonda record of {} failed ({}):\n{}",
            self.main,
            done.status,
            done.stderr
        );
        assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
        done
    }
}

/// `sonda attach PID` with its options.
#[derive(Clone, Debug)]
pub struct Attach {
    pid: u32,
    methods: Vec<String>,
    options: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl Attach {
    /// Attaches to process `pid`.
    pub fn to(pid: u32) -> Attach {
        Attach {
            pid,
            methods: Vec::new(),
            options: Vec::new(),
            env: Vec::new(),
        }
    }

    /// An environment variable of `sonda attach` (`SONDA_AGENT`).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Method filters, each passed as `--methods F`.
    pub fn methods<I: IntoIterator<Item = S>, S: Into<String>>(mut self, filters: I) -> Self {
        self.methods.extend(filters.into_iter().map(Into::into));
        self
    }

    /// Other options of `sonda attach` (`--duration 2`, `--agent-buffer 64M`, ...).
    pub fn options<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, options: I) -> Self {
        self.options.extend(options.into_iter().map(Into::into));
        self
    }

    /// The `sonda attach` command, not started.
    pub fn command(&self, trace: &Path) -> Command {
        let mut cmd = Command::new(sonda());
        cmd.arg("attach")
            .arg(self.pid.to_string())
            .arg("-o")
            .arg(trace);
        for m in &self.methods {
            cmd.arg("--methods").arg(m);
        }
        cmd.args(&self.options);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// Runs `sonda attach` to its end; fails the test unless it succeeded.
    pub fn record(&self, trace: &Path) -> Recorded {
        let done = self.record_unchecked(trace);
        assert!(
            done.status.success(),
            "sonda attach {} failed ({}):\n{}",
            self.pid,
            done.status,
            done.stderr
        );
        done
    }

    /// Runs `sonda attach` to its end, whatever its exit: for the tests of its errors.
    pub fn record_unchecked(&self, trace: &Path) -> Recorded {
        Recorded::new(trace, run(&mut self.command(trace)))
    }
}

/// What a recording left: the trace's path and what sonda (and the program) said.
#[derive(Debug)]
pub struct Recorded {
    /// The trace file (absent when sonda failed before writing it).
    pub trace: PathBuf,
    /// sonda's exit status: the program's, for `sonda record`.
    pub status: ExitStatus,
    /// Standard output: the program's, for `sonda record`.
    pub stdout: String,
    /// Standard error: sonda's summary or error, and the program's.
    pub stderr: String,
}

impl Recorded {
    fn new(trace: &Path, out: Output) -> Recorded {
        Recorded {
            trace: trace.to_path_buf(),
            status: out.status,
            stdout: text(&out.stdout),
            stderr: text(&out.stderr),
        }
    }

    /// Asserts that sonda failed with one clear line on stderr containing `expect`,
    /// and no panic ([`crate::assert_clean_error`]).
    pub fn assert_clean_error(&self, expect: &str) {
        crate::clean_error(&self.status, &self.stderr, expect);
    }
}
