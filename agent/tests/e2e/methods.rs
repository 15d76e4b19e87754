//! Method tracing end to end: the collector's `methods=` filter, classes rewritten in
//! the ClassFileLoadHook (or retransformed at VMInit), the rewritten code calling the
//! probes under `-Xverify:all`, and exactly one record per call.

use std::collections::BTreeMap;

use crate::common::*;
use sonda_shm::records::{RingRecord, ENTER, LEAVE, LEAVE_EXCEPTION};
use sonda_shm::Clock;

const FILTER: &str = "methods=Traced::work
methods=Traced::fail
methods=Traced::<init>
methods=java.lang.Integer::reverse
methods=java.sql.Timestamp::getNanos
methods=no.such.Thing::nothing
";

#[test]
fn selected_methods_record_every_call() {
    let classes = java_classes("Traced", false);
    let n = 2000;
    let plain = run_java(&classes, &[], "Traced", &[&n.to_string()]);
    assert!(plain.status.success());
    let rec = Recording::new(FILTER, Clock::Tsc);
    let out = rec.run_java(&classes, &["-Xverify:all"], "Traced", &[&n.to_string()]);
    assert_ok(&out);
    assert_eq!(
        out.stdout, plain.stdout,
        "the instrumented program computes the same"
    );
    let d = rec.drain();

    let methods = d.methods();
    let id = |key: &str| {
        *methods
            .get(key)
            .unwrap_or_else(|| panic!("no Meta::Method {key}: {methods:?}"))
    };
    let work = id("Traced.work(I)I");
    let fail = id("Traced.fail(I)V");
    let init = id("Traced.<init>(I)V");
    let reverse = id("java.lang.Integer.reverse(I)I");
    let nanos = id("java.sql.Timestamp.getNanos()I");
    assert_eq!(methods.len(), 5, "{methods:?}");

    let main = d.tid_of("main").expect("main named");
    let recs: Vec<RingRecord> = d
        .slots
        .iter()
        .filter(|s| s.tid == main)
        .flat_map(|s| s.records.iter().copied())
        .filter(|r| matches!(r.kind, ENTER | LEAVE | LEAVE_EXCEPTION))
        .collect();
    let count = |kind: u8, m: u32| recs.iter().filter(|r| r.kind == kind && r.arg == m).count();
    assert_eq!(
        (
            count(ENTER, work),
            count(LEAVE, work),
            count(LEAVE_EXCEPTION, work)
        ),
        (n, n, 0)
    );
    assert_eq!(
        (
            count(ENTER, fail),
            count(LEAVE, fail),
            count(LEAVE_EXCEPTION, fail)
        ),
        (n, 0, n)
    );
    assert_eq!((count(ENTER, init), count(LEAVE, init)), (n, n));
    // JDK code may call these too, but the program's n calls are all there.
    assert!(count(ENTER, reverse) >= n && count(ENTER, reverse) == count(LEAVE, reverse));
    assert!(count(ENTER, nanos) >= n && count(ENTER, nanos) == count(LEAVE, nanos));
    // Calls nest: every exit closes the innermost open entry of the same method.
    let mut stack = Vec::new();
    for r in &recs {
        match r.kind {
            ENTER => stack.push(r.arg),
            _ => assert_eq!(stack.pop(), Some(r.arg), "unbalanced exit {r:?}"),
        }
    }
    assert!(stack.is_empty());
    assert!(recs.windows(2).all(|w| w[0].time <= w[1].time));

    assert!(
        d.warnings()
            .contains(&"filter 'no.such.Thing::nothing' matched no method".to_string()),
        "{:?}",
        d.warnings()
    );
    assert_eq!(d.warnings().len(), 1, "{:?}", d.warnings());
    assert_eq!(d.counter("agent.methods_instrumented"), Some(5));
    assert!(d.counter("agent.classes_instrumented").unwrap() >= 3);
    assert_eq!(d.counter("agent.classes_refused"), Some(0));
    // Integer was loaded before the probes existed, then retransformed.
    let early = d.counter("agent.classes_before_probes").unwrap();
    assert!(early >= 1);
    assert_eq!(d.counter("agent.classes_retransformed"), Some(early));
    assert_eq!(d.counter("agent.retransform_failures"), Some(0));
    assert_eq!(d.meta_drops, 0);
}

/// A method the probes would push past 65535 bytes of code: the class stays as it was,
/// with a warning, and the program runs unchanged.
#[test]
fn refused_class_is_left_unchanged_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let lines = "        x ^= 0x12345678;\n".repeat(13105);
    let src = format!(
        "public class Big {{\n    static int big(int x) {{\n{lines}        return x;\n    }}\n    static int small(int x) {{ return x + 1; }}\n    public static void main(String[] a) {{ System.out.println(\"big\\t\" + big(small(Integer.parseInt(a[0])))); }}\n}}\n"
    );
    std::fs::write(dir.path().join("Big.java"), src).unwrap();
    let javac = std::process::Command::new("javac")
        .arg("-d")
        .arg(dir.path())
        .arg(dir.path().join("Big.java"))
        .output()
        .unwrap();
    assert!(javac.status.success(), "{}", text(&javac.stderr));
    let plain = run_java(dir.path(), &[], "Big", &["5"]);
    let rec = Recording::new("methods=Big\n", Clock::Monotonic);
    let out = rec.run_java(dir.path(), &["-Xverify:all"], "Big", &["5"]);
    assert_ok(&out);
    assert_eq!(out.stdout, plain.stdout);
    let d = rec.drain();
    let warnings = d.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("class Big left unchanged: "),
        "{warnings:?}"
    );
    assert_eq!(d.counter("agent.classes_refused"), Some(1));
    assert_eq!(d.counter("agent.classes_instrumented"), Some(0));
    assert!(
        d.methods().is_empty(),
        "no Meta::Method for a refused class: {:?}",
        d.methods()
    );
    assert!(d.all_of(ENTER).is_empty());
}

/// Method ids are per (class, method, descriptor): the same class loaded by two class
/// loaders shares its ids and is described once.
#[test]
fn same_class_in_two_loaders_shares_ids() {
    let classes = java_classes("TwoLoaders", false);
    let rec = Recording::new("methods=Traced::work\n", Clock::Monotonic);
    let traced = java_classes("Traced", false);
    let out = rec.run_java(&classes, &[], "TwoLoaders", &[traced.to_str().unwrap()]);
    assert_ok(&out);
    let d = rec.drain();
    let described: Vec<_> = d.methods().into_iter().collect();
    assert_eq!(described.len(), 1, "{described:?}");
    let work = described[0].1;
    let mut per_thread: BTreeMap<u32, usize> = BTreeMap::new();
    for (tid, r) in d.all_of(ENTER) {
        assert_eq!(r.arg, work);
        *per_thread.entry(tid).or_default() += 1;
    }
    assert_eq!(
        per_thread.values().sum::<usize>(),
        2 * 3,
        "two loaders x 3 calls"
    );
    assert_eq!(d.counter("agent.classes_instrumented"), Some(2));
    assert_eq!(d.counter("agent.methods_instrumented"), Some(1));
}
