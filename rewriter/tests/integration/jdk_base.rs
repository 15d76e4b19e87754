//! Every method of every java.base class, rewritten, then a program run on the
//! rewritten java.base (`--patch-module`) under `-Xverify:all`: the verifier checks
//! each class as it loads, the program's output must not change, and the probe's
//! counters (java/lang/SondaProbe, tests/java/jdk) must show entries closed by exits.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::support::{class_files, jdk, rewrite_tree, run, scratch};
use sonda_rewriter::ProbeClass;

const PROBE: ProbeClass<'static> = ProbeClass {
    class: "java/lang/SondaProbe",
    enter: "enter",
    exit: "exit",
    exit_exception: "exitException",
};

fn field(report: &str, name: &str) -> i64 {
    let mut it = report.split_whitespace();
    while let Some(w) = it.next() {
        if w == name {
            return it.next().unwrap().parse().unwrap();
        }
    }
    panic!("no {name} in {report}")
}

#[test]
fn java_base_rewritten_runs_verified() {
    let Some(jdk) = jdk() else {
        return;
    };
    let tmp = scratch("jdk");
    let home = jdk.java.canonicalize().unwrap();
    let modules = home.parent().unwrap().parent().unwrap().join("lib/modules");
    let extracted = tmp.join("extracted");
    run(Command::new(&jdk.jimage)
        .arg("extract")
        .arg(format!("--dir={}", extracted.display()))
        .arg("--include=regex:/java.base/.*")
        .arg(&modules));
    let base = extracted.join("java.base");
    fs::remove_file(base.join("module-info.class")).unwrap();

    let patched = tmp.join("patched");
    let started = std::time::Instant::now();
    let st = rewrite_tree(&base, &patched, &PROBE);
    let took = started.elapsed();
    eprintln!("java.base: {} in {took:?}", st.summary());
    assert!(st.classes > 5000, "{}", st.summary());
    // Only what the rewriter documents as unsupported may be refused; java.base
    // (class version 61, javac output) has none of it.
    let refused: usize = st.refused.values().map(Vec::len).sum();
    assert_eq!(refused, 0, "{}", st.summary());
    assert!(st.names.len() < 1 << 17, "more ids than SondaProbe counts");

    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/jdk");
    let probe_out = tmp.join("probe");
    run(Command::new(&jdk.javac)
        .arg("--patch-module")
        .arg(format!("java.base={}", src.display()))
        .arg("-d")
        .arg(&probe_out)
        .arg(src.join("java/lang/SondaProbe.java")));
    let probe_class = class_files(&probe_out)
        .into_iter()
        .find(|p| p.ends_with("java/lang/SondaProbe.class"))
        .expect("SondaProbe.class");
    fs::copy(probe_class, patched.join("java/lang/SondaProbe.class")).unwrap();

    let app = tmp.join("app");
    run(Command::new(&jdk.javac)
        .arg("-d")
        .arg(&app)
        .arg(src.join("JdkSmoke.java")));
    let smoke = |patch: bool| {
        let mut c = Command::new(&jdk.java);
        c.arg("-Xverify:all");
        if patch {
            c.arg("--patch-module")
                .arg(format!("java.base={}", patched.display()));
        }
        c.arg("-cp").arg(&app).arg("JdkSmoke");
        let out = run(&mut c);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!err.contains("VerifyError"), "{err}");
        (String::from_utf8(out.stdout).unwrap(), err)
    };
    let (expected, err0) = smoke(false);
    assert!(err0.contains("SONDA none"), "{err0}");
    let (got, err) = smoke(true);
    assert_eq!(got, expected, "output differs on the rewritten java.base");
    let report = err
        .lines()
        .find(|l| l.starts_with("SONDA "))
        .unwrap_or_else(|| panic!("{err}"));
    eprintln!("{report}");
    assert_eq!(
        field(report, "bad"),
        0,
        "an id exited more often than entered"
    );
    assert!(field(report, "ids") > 2000, "{report}");
    assert!(field(report, "enters") > 1_000_000, "{report}");
    assert!(field(report, "exceptions") > 0, "{report}");
    // Frames still open when the report is taken: the main thread's and those of
    // the JVM's own threads (reference handler, finalizer, cleaner, ...), a few
    // dozen; a leak per call would show as thousands.
    let open = field(report, "open");
    assert!((0..500).contains(&open), "{report}");
    let _ = fs::remove_dir_all(&tmp);
}
