//! The files the commands write (issue 11, items 2 and 4): no output ever replaces an
//! input, whatever the path that leads to it; an output appears only complete (a full
//! disk, Ctrl-C or a failed recording leave the old file or nothing, never a partial
//! one); every file is its owner's only, whatever the umask. Each against the real
//! binary and real files (a small tmpfs for the full disk).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::*;
use sonda_trace::TraceMeta;

fn sonda_in(dir: &Path, args: &[&str]) -> Output {
    sonda()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("sonda runs")
}

/// A file's mode bits.
fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn no_command_writes_over_one_of_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    calls_trace(100, 5, 4).write(&d.join("a")).unwrap();
    calls_trace(200, 5, 4).write(&d.join("b")).unwrap();
    let original = std::fs::read(d.join("a")).unwrap();
    std::fs::copy(d.join("a"), d.join("x.prv")).unwrap();
    std::fs::hard_link(d.join("a"), d.join("h")).unwrap();
    std::os::unix::fs::symlink("a", d.join("s")).unwrap();
    std::fs::create_dir(d.join("out")).unwrap();
    std::os::unix::fs::symlink("../a", d.join("out/y.pcf")).unwrap();

    let cases: [(&[&str], &str, &str); 6] = [
        // The stem's extension: x.prv is the trace being exported.
        (
            &["paraver", "x.prv", "-o", "x"],
            "x.prv",
            "the output x.prv is an input",
        ),
        // A symlink among the outputs that leads to the input.
        (
            &["paraver", "a", "-o", "out/y"],
            "a",
            "the output out/y.pcf is the input a",
        ),
        (&["model", "a", "-o", "a"], "a", "the output a is an input"),
        // A hard link of an input, and a symlink to one.
        (
            &["merge", "a", "b", "-o", "h"],
            "a",
            "the output h is the input a",
        ),
        (
            &["merge", "a", "b", "-o", "s"],
            "a",
            "the output s is the input a",
        ),
        // The samples directory of a model (replaced as a whole) holding the input.
        (
            &["model", "a.samples/t", "-o", "a.jsimg"],
            "a.samples/t",
            "the output a.samples holds the input a.samples/t",
        ),
    ];
    std::fs::create_dir(d.join("a.samples")).unwrap();
    std::fs::copy(d.join("a"), d.join("a.samples/t")).unwrap();
    for (args, input, expect) in cases {
        let before = std::fs::read(d.join(input)).unwrap();
        let out = sonda_in(d, args);
        assert_one_line_error(&out, expect);
        assert_eq!(
            std::fs::read(d.join(input)).unwrap(),
            before,
            "sonda {args:?} changed its input"
        );
        assert!(
            partials_of_dir(d).is_empty(),
            "sonda {args:?} left partial files"
        );
    }
    assert_eq!(std::fs::read(d.join("a")).unwrap(), original);
    assert_eq!(names_in(&d.join("out")), ["y.pcf"], "an export began");

    // Standard output redirected into the trace being read.
    for sub in ["report", "services"] {
        let before = std::fs::read(d.join("a")).unwrap();
        let out = sonda()
            .current_dir(d)
            .args([sub, "a"])
            .stdout(
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(d.join("a"))
                    .unwrap(),
            )
            .output()
            .unwrap();
        assert_one_line_error(&out, "standard output is the input a");
        assert_eq!(std::fs::read(d.join("a")).unwrap(), before);
    }
}

/// The partial files in `dir` (`*.XXXXXX.partial`, and directories of that name).
fn partials_of_dir(dir: &Path) -> Vec<String> {
    names_in(dir)
        .into_iter()
        .filter(|n| n.ends_with(".partial"))
        .collect()
}

/// A tmpfs of `size` mounted on a new directory, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn new(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot mount a tmpfs (as root)");
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_full_disk_leaves_the_old_outputs_and_no_partial_file() {
    if !sonda_tests::require_root() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let big = work.path().join("big.trace");
    busy_trace(&big, 200_000);
    let other = work.path().join("other.trace");
    calls_trace(5000, 5, 4).write(&other).unwrap();
    let disk = SmallDisk::new("256k");
    let d = disk.path();
    for name in ["x.prv", "x.pcf", "m.trace", "model.jsimg"] {
        std::fs::write(d.join(name), "old").unwrap();
    }
    std::fs::create_dir(d.join("model.samples")).unwrap();
    std::fs::write(d.join("model.samples/00-old.cpu.txt"), "old").unwrap();
    let before = names_in(d);
    let (x, m, model) = (d.join("x"), d.join("m.trace"), d.join("model.jsimg"));
    let o = Path::new("-o");
    let runs: [(Vec<&Path>, &str); 3] = [
        (vec![Path::new("paraver"), &big, o, &x], "x."),
        (vec![Path::new("merge"), &big, &other, o, &m], "m.trace"),
        (vec![Path::new("model"), &big, o, &model], "model."),
    ];
    for (args, named) in runs {
        let out = sonda().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_one_line_error(&out, "No space left on device");
        assert!(
            err.contains(&format!("cannot write {}", d.join(named).display())),
            "the error does not name the output: {err}"
        );
        assert_eq!(names_in(d), before, "{args:?} left files behind: {err}");
        for name in [
            "x.prv",
            "x.pcf",
            "m.trace",
            "model.jsimg",
            "model.samples/00-old.cpu.txt",
        ] {
            assert_eq!(
                std::fs::read_to_string(d.join(name)).unwrap(),
                "old",
                "{name}"
            );
        }
    }
}

#[test]
fn ctrl_c_during_an_export_leaves_the_old_files_and_no_partial_one() {
    let work = tempfile::tempdir().unwrap();
    let big = work.path().join("big.trace");
    // Long enough an export (seconds) to be interrupted in the middle.
    busy_trace(&big, 4_000_000);
    let out = work.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("x.prv"), "old").unwrap();
    let mut child = sonda()
        .arg("paraver")
        .arg(&big)
        .arg("-o")
        .arg(out.join("x"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Once the export writes its files (under their temporary names).
    let deadline = Instant::now() + Duration::from_secs(60);
    while partials_of_dir(&out).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the export wrote nothing in 60 s"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the export ended before the signal"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status}");
    assert_eq!(names_in(&out), ["x.prv"], "partial files were left");
    assert_eq!(std::fs::read_to_string(out.join("x.prv")).unwrap(), "old");
}

#[test]
fn every_output_is_its_owners_only_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let with_umask = |args: &[&str]| {
        let mut cmd = sonda();
        cmd.current_dir(d).args(args);
        // SAFETY: umask is async-signal-safe and has no memory-safety preconditions.
        unsafe {
            cmd.pre_exec(|| {
                libc::umask(0);
                Ok(())
            })
        };
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "sonda {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    with_umask(&["record", "-o", "rec.trace", "--", "true"]);
    calls_trace(100, 5, 4).write(&d.join("a")).unwrap();
    calls_trace(200, 5, 4).write(&d.join("b")).unwrap();
    with_umask(&["paraver", "a", "-o", "p"]);
    with_umask(&["merge", "a", "b", "-o", "ab.trace"]);
    with_umask(&["model", "a", "-o", "m.jsimg"]);
    let mut files: Vec<PathBuf> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("a") && !p.ends_with("b"))
        .collect();
    files.extend(
        std::fs::read_dir(d.join("m.samples"))
            .unwrap()
            .map(|e| e.unwrap().path()),
    );
    assert!(files.len() >= 10, "{files:?}");
    for f in files {
        let want = if f.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&f), want, "{} is {:o}", f.display(), mode(&f));
    }
}

#[test]
fn a_recording_that_fails_before_its_command_starts_keeps_the_old_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    std::fs::write(&trace, "the previous recording").unwrap();
    // An executable file that is no program: the command cannot start.
    let bogus = dir.path().join("bogus");
    std::fs::write(&bogus, [0x7f, b'E', b'L', b'F', 0, 1, 2, 3]).unwrap();
    std::fs::set_permissions(&bogus, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run_sonda(&[
        "record",
        "-o",
        trace.to_str().unwrap(),
        "--",
        bogus.to_str().unwrap(),
    ]);
    assert_one_line_error(&out, "cannot start");
    assert_eq!(
        std::fs::read_to_string(&trace).unwrap(),
        "the previous recording"
    );
    assert_eq!(names_in(dir.path()), ["bogus", "t.trace"]);
}

#[test]
fn a_recording_that_fails_puts_what_it_recorded_in_place_and_says_so() {
    if !sonda_tests::require_root() {
        return;
    }
    // A disk that fills up during the recording: the trace written until then is kept
    // under its name, and the command runs to its end.
    let disk = SmallDisk::new("64k");
    let trace = disk.path().join("t.trace");
    let done = tempfile::tempdir().unwrap();
    let marker = done.path().join("done");
    let script = format!(
        "i=0; while [ $i -lt 1500 ]; do /bin/true; i=$((i+1)); done; touch {}",
        marker.display()
    );
    let out = sonda()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--lag", "0", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    assert!(marker.exists(), "the command did not run to its end: {err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.lines().last().unwrap().contains(&format!(
            "the trace {} holds what was recorded before",
            trace.display()
        )),
        "{err}"
    );
    assert_eq!(names_in(disk.path()), ["t.trace"]);
    let meta = TraceMeta::scan(&trace).expect("the trace opens");
    assert!(!meta.complete && meta.records > 0, "{meta:?}");
}
