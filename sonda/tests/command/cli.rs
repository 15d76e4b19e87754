//! The command line of `sonda record`: errors before anything starts, exit status, and
//! how JVMs get the agent. These run the real binary; the recording itself uses kernel
//! tracepoints as root and the /proc fallback otherwise.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::*;

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_missing_command_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.sonda");
    let t = trace.to_str().unwrap();
    for args in [vec!["record", "-o", t], vec!["record", "-o", t, "--"]] {
        let out = run_sonda(&args);
        assert_one_line_error(&out, "no command to record");
        assert!(!trace.exists(), "a trace file was left behind");
    }
}

#[test]
fn an_unknown_command_is_an_error_and_nothing_is_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.sonda");
    let out = run_sonda(&[
        "record",
        "-o",
        trace.to_str().unwrap(),
        "--",
        "no-such-command-sonda-test",
    ]);
    assert_one_line_error(&out, "command not found: no-such-command-sonda-test");
    assert!(!trace.exists());
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let out = run_sonda(&[
        "record",
        "-o",
        trace.to_str().unwrap(),
        "--",
        plain.to_str().unwrap(),
    ]);
    assert_one_line_error(&out, "not an executable file");
}

#[test]
fn an_unwritable_output_is_an_error_before_the_command_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    for output in [
        dir.path().join("no/such/dir/t.sonda"),
        dir.path().to_path_buf(),
    ] {
        let out = run_sonda(&[
            "record",
            "-o",
            output.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ]);
        assert_one_line_error(&out, &format!("cannot write {}", output.display()));
        assert!(
            !marker.exists(),
            "the command ran although the output was unwritable"
        );
    }
}

#[test]
fn bad_options_are_one_line_errors() {
    let out = run_sonda(&["record", "--bogus", "-o", "x", "--", "true"]);
    assert_one_line_error(&out, "--bogus");
    assert_eq!(out.status.code(), Some(2));
    let out = run_sonda(&["record", "-o", "x", "--buffer-size", "12Q", "--", "true"]);
    assert_one_line_error(&out, "unknown size unit");
    let out = run_sonda(&["record", "--", "true"]);
    assert_one_line_error(&out, "--output");
}

#[test]
fn the_exit_status_is_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.sonda");
    let t = trace.to_str().unwrap();
    let out = run_sonda(&["record", "-o", t, "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr_of(&out));
    let (meta, _) = read_trace(&trace);
    assert!(meta.complete);
    // Death by a signal is 128 + its number, as in a shell.
    let out = run_sonda(&["record", "-o", t, "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(out.status.code(), Some(128 + 15), "{}", stderr_of(&out));
    let out = run_sonda(&["record", "-o", t, "--", "true"]);
    assert_eq!(out.status.code(), Some(0));
    let err = stderr_of(&out);
    assert!(
        err.contains("sonda: recorded ") && err.contains(t),
        "no summary: {err}"
    );
}

/// The `-agentpath` option a command was given, and the buffer file in it.
fn buffer_of(option: &str) -> &Path {
    Path::new(option.rsplit_once("=shm=").expect("an shm= option").1)
}

#[test]
fn other_commands_pass_the_agent_through_java_tool_options() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libsonda.so");
    std::fs::write(&lib, b"not really").unwrap();
    let trace = dir.path().join("t.sonda");
    let seen = dir.path().join("seen");
    // The shell (standing for catalina.sh) records what a JVM it starts would get, and
    // whether the buffer file exists while it runs.
    let script = format!(
        "printf '%s' \"$JAVA_TOOL_OPTIONS\" > {s}; f=${{JAVA_TOOL_OPTIONS##*=shm=}}; test -f \"$f\" && echo yes > {s}.exists",
        s = seen.display()
    );
    let mut child = sonda()
        .env("SONDA_AGENT", &lib)
        .env("JAVA_TOOL_OPTIONS", "-Dsome.flag=1")
        .args([
            "record",
            "-o",
            trace.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    let jto = std::fs::read_to_string(&seen).unwrap();
    let lib = lib.canonicalize().unwrap();
    let expected_prefix = format!(
        "-Dsome.flag=1 -agentpath:{}=shm=/dev/shm/sonda-{pid}-",
        lib.display()
    );
    assert!(
        jto.starts_with(&expected_prefix),
        "JAVA_TOOL_OPTIONS={jto:?}"
    );
    assert!(jto.ends_with(".buf"), "{jto:?}");
    assert!(
        seen.with_extension("exists").exists(),
        "the buffer file did not exist while the command ran"
    );
    assert!(!buffer_of(&jto).exists(), "the buffer file was not removed");
}

#[test]
fn java_gets_the_agent_right_after_argv0() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libsonda.so");
    std::fs::write(&lib, b"not really").unwrap();
    let java = dir.path().join("java");
    let args_file = dir.path().join("args");
    std::fs::write(
        &java,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\nprintf '%s' \"$JAVA_TOOL_OPTIONS\" > {}.jto\n",
            args_file.display(),
            args_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&java, std::fs::Permissions::from_mode(0o755)).unwrap();
    let trace = dir.path().join("t.sonda");
    let out = sonda()
        .env("SONDA_AGENT", &lib)
        .env_remove("JAVA_TOOL_OPTIONS")
        .args([
            "record",
            "-o",
            trace.to_str().unwrap(),
            "--methods",
            "a.B::c",
            "--",
        ])
        .arg(&java)
        .args(["-Xmx64m", "-cp", "x", "Main"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let args = std::fs::read_to_string(&args_file).unwrap();
    let lines: Vec<&str> = args.lines().collect();
    assert_eq!(lines.len(), 5, "{args}");
    assert!(lines[0].starts_with(&format!(
        "-agentpath:{}=shm=/dev/shm/sonda-",
        lib.canonicalize().unwrap().display()
    )));
    assert_eq!(&lines[1..], ["-Xmx64m", "-cp", "x", "Main"]);
    assert_eq!(
        std::fs::read_to_string(args_file.with_extension("jto")).unwrap(),
        ""
    );
}

#[test]
fn java_without_an_agent_library_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // A copy of sonda with no libsonda.so next to it.
    let sonda_copy = dir.path().join("sonda");
    std::fs::copy(env!("CARGO_BIN_EXE_sonda"), &sonda_copy).unwrap();
    let java = dir.path().join("bin/java");
    std::fs::create_dir_all(java.parent().unwrap()).unwrap();
    std::fs::write(&java, "#!/bin/sh\ntouch \"$0.ran\"\n").unwrap();
    std::fs::set_permissions(&java, std::fs::Permissions::from_mode(0o755)).unwrap();
    let trace = dir.path().join("t.sonda");
    let out = std::process::Command::new(&sonda_copy)
        .env_remove("SONDA_AGENT")
        .args(["record", "-o", trace.to_str().unwrap(), "--"])
        .arg(&java)
        .output()
        .unwrap();
    assert_one_line_error(&out, "agent library libsonda.so not found");
    assert!(!java.with_extension("ran").exists() && !trace.exists());
    let out = sonda()
        .env("SONDA_AGENT", dir.path().join("missing.so"))
        .args(["record", "-o", trace.to_str().unwrap(), "--"])
        .arg(&java)
        .output()
        .unwrap();
    assert_one_line_error(&out, "missing.so is not a file");
}

/// `sonda report T | head -1`: once the reader is gone, sonda stops quietly with
/// success, as other Unix tools do, instead of reporting that it cannot write.
#[test]
fn a_report_piped_into_a_reader_that_goes_away_ends_quietly() {
    use sonda_trace::{Event, Meta, Pid, Record, Runtime, Source, Tid, Time, TraceWriter};
    use std::io::BufRead;
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("many-threads.sonda");
    // One line per thread: a report far longer than a pipe's buffer (64 KiB), so sonda
    // is still writing when the reader closes its end.
    let mut w = TraceWriter::new(std::fs::File::create(&trace).unwrap()).unwrap();
    w.meta(&Meta::TraceInfo {
        source: Source::Tracepoints,
        start: Time(1_000),
        host: "h".into(),
        cpus: 1,
        command: vec!["many".into()],
        tool: "test".into(),
    });
    w.meta(&Meta::Process {
        pid: Pid(100),
        ppid: Pid(1),
        name: "many".into(),
        runtime: Runtime::Native,
    });
    for i in 0..20_000u32 {
        let tid = 100 + i;
        w.meta(&Meta::Thread {
            pid: Pid(100),
            tid: Tid(tid),
            comm: format!("worker-{i}"),
        });
        w.record(&Record {
            time: Time(1_000 + u64::from(i)),
            event: Event::ThreadStart { tid: Tid(tid) },
        })
        .unwrap();
    }
    w.finish(&[]).unwrap();
    let t = trace.to_str().unwrap();
    let whole = run_sonda(&["report", t]);
    assert!(whole.status.success(), "{}", stderr_of(&whole));
    assert!(
        whole.stdout.len() > 1 << 20,
        "the report ({} bytes) must outgrow the pipe",
        whole.stdout.len()
    );

    let mut child = sonda()
        .args(["report", t])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(!first.is_empty());
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}: {}",
        out.status,
        stderr_of(&out)
    );
}
