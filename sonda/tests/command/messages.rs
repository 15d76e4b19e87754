//! What the commands say when something is wrong (issue 11, item 8): one line, true,
//! naming the file or pid concerned, never saying a thing twice; and the damage a
//! reader skipped carried into `merge`'s and `services`' output and messages.

use std::path::Path;

use crate::common::*;
use sonda_trace::TraceMeta;

#[test]
fn an_error_says_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.trace");
    let m = missing.to_str().unwrap();
    let out_stem = dir.path().join("x");
    let o = out_stem.to_str().unwrap();
    calls_trace(100, 2, 4).write(&dir.path().join("a")).unwrap();
    let a = dir.path().join("a");
    let a = a.to_str().unwrap();
    for args in [
        vec!["report", m],
        vec!["paraver", m, "-o", o],
        vec!["services", m],
        vec!["model", m, "-o", o],
        vec!["merge", m, a, "-o", o],
        vec!["paraver", a, "-o", "/nonexistent-dir/x"],
    ] {
        let out = run_sonda(&args);
        assert_one_line_error(&out, "No such file or directory");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.matches("No such file or directory").count(),
            1,
            "sonda {args:?} repeats itself: {err}"
        );
    }
}

#[test]
fn a_negative_time_is_said_to_be_negative() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("a");
    calls_trace(100, 2, 4).write(&trace).unwrap();
    let t = trace.to_str().unwrap();
    let o = dir.path().join("x");
    let o = o.to_str().unwrap();
    for args in [
        vec!["paraver", t, "-o", o, "--from", "-1s"],
        vec!["paraver", t, "-o", o, "--from=-1s"],
        vec!["paraver", t, "-o", o, "--to", "-5"],
        vec!["services", t, "--from", "-1s"],
        vec!["model", t, "-o", o, "--to=-2ms"],
    ] {
        let out = run_sonda(&args);
        assert_one_line_error(&out, "cannot be negative");
        assert_eq!(out.status.code(), Some(2));
    }
    assert_eq!(names_in(dir.path()), ["a"]);
}

#[test]
fn a_period_that_holds_no_call_or_ends_before_it_begins_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("a");
    // Calls enter at 1 ms, 6 ms, ... 96 ms from the trace's start.
    calls_trace(100, 20, 4).write(&trace).unwrap();
    let t = trace.to_str().unwrap();
    let o = dir.path().join("m.jsimg");
    let o = o.to_str().unwrap();
    for (args, says) in [
        (
            vec!["services", t, "--from", "2s", "--to", "1s"],
            "--from 2 s is not before --to 1 s",
        ),
        (
            vec!["model", t, "-o", o, "--from", "50ms", "--to", "50ms"],
            "is not before",
        ),
        (
            vec!["services", t, "--from", "97ms"],
            "no call of the selected methods enters between 0.097 s and its end",
        ),
        (
            vec!["model", t, "-o", o, "--from", "2ms", "--to", "6ms"],
            "enters between 0.002 s and 0.006 s",
        ),
    ] {
        let out = run_sonda(&args);
        assert_one_line_error(&out, says);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
    }
    assert_eq!(names_in(dir.path()), ["a"]);
}

#[test]
fn a_period_counts_the_calls_that_enter_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("a");
    calls_trace(100, 20, 4).write(&trace).unwrap();
    let t = trace.to_str().unwrap();
    // Enters at 1 + 5i ms: [10 ms, 41 ms) holds i = 2..=7 (11, 16, ... 36 ms), six calls;
    // the one at 6 ms, still running at 10 ms, is not counted.
    let out = run_sonda(&["services", t, "--calls", "--from", "10ms", "--to", "41ms"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8_lossy(&out.stdout).into_owned();
    let begins: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(5).unwrap())
        .collect();
    assert_eq!(begins.len(), 6, "{csv}");
    let out = run_sonda(&["services", t, "--format", "json", "--from", "10ms"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let whole = &doc["whole"];
    assert!(
        (whole["begin_s"].as_f64().unwrap() - 0.011).abs() < 1e-9,
        "{whole}"
    );
    assert_eq!(whole["methods"][0]["calls"].as_u64(), Some(18), "{whole}");
}

#[test]
fn attaching_to_a_process_that_is_no_jvm_says_so() {
    if !sonda_tests::require_root() {
        return;
    }
    // pid 1 is an init (or a sandbox's supervisor), not a JVM: as root, whether its
    // memory map can be read or not, the answer is that it is not a JVM.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    let out = run_sonda(&["attach", "1", "-o", trace.to_str().unwrap()]);
    assert_one_line_error(&out, "process 1");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a") && err.contains("JVM"), "{err}");
    assert!(!err.contains("runs as user"), "{err}");
    assert_eq!(names_in(dir.path()), Vec::<String>::new());
}

/// Flips a byte in the events block that holds record `index` of `b` written to `path`
/// (an events block every 4 records): the block's checksum no longer matches.
fn damage_block_of(path: &Path, record_index: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let events: Vec<usize> = block_offsets(&bytes)
        .into_iter()
        .filter(|&(_, kind)| kind == 2)
        .map(|(at, _)| at)
        .collect();
    let at = events[record_index / 4];
    bytes[at + 45] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
}

/// (offset, kind) of every block of an intact trace.
fn block_offsets(bytes: &[u8]) -> Vec<(usize, u8)> {
    use sonda_trace::block::{parse_block_header, BLOCK_HEADER_LEN, FILE_HEADER_LEN};
    let mut at = FILE_HEADER_LEN;
    let mut out = Vec::new();
    while at + BLOCK_HEADER_LEN <= bytes.len() {
        let h = parse_block_header(bytes[at..at + BLOCK_HEADER_LEN].try_into().unwrap())
            .expect("an intact trace");
        let kind = match h.kind {
            sonda_trace::block::BlockKind::Meta => 1,
            sonda_trace::block::BlockKind::Events => 2,
            _ => 3,
        };
        out.push((at, kind));
        at += BLOCK_HEADER_LEN + h.len as usize;
    }
    out
}

#[test]
fn services_on_a_trace_damaged_before_its_first_call_names_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    // The first events block (records 0-3: the first call) is damaged.
    calls_trace(100, 20, 4).write(&trace).unwrap();
    damage_block_of(&trace, 0);
    let out = run_sonda(&["services", trace.to_str().unwrap()]);
    assert_one_line_error(&out, &format!("{}: ", trace.display()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("damaged at byte") && err.contains("1 stretch skipped"),
        "{err}"
    );
}

#[test]
fn services_carries_the_damage_into_its_figures_and_message() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    calls_trace(100, 20, 4).write(&trace).unwrap();
    let intact = TraceMeta::scan(&trace).unwrap().records;
    // Damage after a few calls: the figures skip its block and go on.
    damage_block_of(&trace, 40);
    let out = run_sonda(&["services", trace.to_str().unwrap(), "--format", "json"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("damaged at byte")
            && err.contains(&format!(
                "(1 stretch skipped); the figures cover the {} records of the intact blocks, of {} they hold",
                intact - 4,
                intact - 4
            )),
        "{err}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the JSON is printed");
    let damage = &json["trace"]["damage"];
    assert_eq!(damage["records_read"], intact - 4, "{damage}");
    // The damaged block held one call (its switch in, enter, switch out and leave):
    // every other call, after the damage too, is in the figures.
    assert_eq!(
        json["whole"]["methods"][0]["calls"], 19,
        "{}",
        json["whole"]
    );
    assert_eq!(damage["skipped"].as_array().unwrap().len(), 1, "{damage}");
    assert_eq!(damage["skipped"][0]["records"], 4, "{damage}");
    assert!(damage["first"]
        .as_str()
        .unwrap()
        .contains("damaged at byte"));
    let damaged = out.stdout;
    // A whole trace says so too.
    calls_trace(100, 20, 4).write(&trace).unwrap();
    let out = run_sonda(&["services", trace.to_str().unwrap(), "--format", "json"]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["trace"]["damage"].is_null());
    // Both follow the documented schema.
    let Some(venv) = sonda_tests::python_env() else {
        return;
    };
    let schema = sonda_tests::repo_root().join("docs/services.schema.json");
    for (name, doc) in [("damaged.json", &damaged), ("whole.json", &out.stdout)] {
        let path = dir.path().join(name);
        std::fs::write(&path, doc).unwrap();
        let check = std::process::Command::new(venv.join("bin/python"))
            .args([
                "-c",
                "import json,sys,jsonschema\n\
                 s=json.load(open(sys.argv[1])); d=json.load(open(sys.argv[2]))\n\
                 jsonschema.Draft202012Validator.check_schema(s)\n\
                 jsonschema.Draft202012Validator(s).validate(d)",
            ])
            .arg(&schema)
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{name} does not follow {}: {}",
            schema.display(),
            String::from_utf8_lossy(&check.stderr)
        );
    }
}

#[test]
fn merging_a_cut_short_trace_writes_a_trace_that_says_it_did_not_finish() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, out) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("ab"),
    );
    calls_trace(100, 10, 4).write(&a).unwrap();
    calls_trace(200, 10, 4).write_cut(&b, 20).unwrap();
    let run = run_sonda(&[
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(!run.status.success(), "{err}");
    let last = err.lines().last().unwrap();
    assert!(
        last.contains(&format!("{}: cut short at byte", b.display()))
            && last.contains(&format!("{} says it did not finish", out.display())),
        "{err}"
    );
    let meta = TraceMeta::scan(&out).unwrap();
    assert!(
        !meta.complete,
        "the merged trace claims a complete recording"
    );
    assert!(
        meta.warnings.iter().any(|w| w.contains("cut short")),
        "{:?}",
        meta.warnings
    );
    assert_eq!(meta.records, 70 + 20, "a's records and b's before the cut");
}

#[test]
fn merging_a_damaged_trace_takes_everything_intact_and_names_what_it_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, out) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("ab"),
    );
    calls_trace(100, 10, 4).write(&a).unwrap();
    calls_trace(200, 10, 4).write(&b).unwrap();
    damage_block_of(&b, 8);
    let run = run_sonda(&[
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(!run.status.success(), "{err}");
    let last = err.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("sonda: {}: skipped ", b.display()))
            && last.contains("1 block, 4 records")
            && last.contains("merged everything intact"),
        "{err}"
    );
    let meta = TraceMeta::scan(&out).unwrap();
    assert_eq!(
        meta.records,
        70 + 66,
        "b's records after the damage are lost"
    );
    assert!(meta.complete);
    assert!(
        meta.warnings
            .iter()
            .any(|w| w.contains("skipped") && w.contains(&*b.to_string_lossy())),
        "{:?}",
        meta.warnings
    );
}
