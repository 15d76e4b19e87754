//! The JVM verifier as the judge: a Java corpus (tests/java plus sources generated
//! here) is compiled, every method of every class is rewritten with the test probe
//! `sonda/Probe` (tests/java/sonda/Probe.java), and the program runs under
//! `java -Xverify:all`: no VerifyError, the same output as unmodified, and the probe's
//! report shows every entry closed by exactly one exit per thread.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{class_files, jdk, rewrite_tree, run, scratch, set_major, Jdk};
use sonda_rewriter::{instrument, probe_class_bytes, ProbeClass};

const PROBE: ProbeClass<'static> = ProbeClass {
    class: "sonda/Probe",
    enter: "enter",
    exit: "exit",
    exit_exception: "exitException",
};

fn java_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java")
}

/// `v = v * 31 + k;` compiles to 8 bytes (iload_0 bipush imul bipush iadd istore_0).
fn statements(n: usize, s: &mut String) {
    for i in 0..n {
        writeln!(s, "        v = v * 31 + {};", 10 + i % 100).unwrap();
    }
}

/// `if (v == 1000 + j) return j;` for j in 0..n: returns whose exit probes grow the
/// code between a branch and its target.
fn returns(n: usize, s: &mut String) {
    for j in 0..n {
        writeln!(s, "        if (v == {}) return {j};", 1000 + j).unwrap();
    }
}

/// Java sources generated here: sizes near the limits, big switches, wide locals.
fn generate(dir: &Path) {
    let d = dir.join("corpus");
    fs::create_dir_all(&d).unwrap();
    let class = |name: &str, body: String| {
        fs::write(
            d.join(format!("{name}.java")),
            format!("package corpus;\n\nclass {name} {{\n{body}}}\n"),
        )
        .unwrap();
    };
    // 8 * 8100 + 2 = 64802 bytes: still fits with the probes.
    let mut b = String::from("    static int big(int v) {\n");
    statements(8100, &mut b);
    b.push_str("        return v;\n    }\n");
    class("NearLimit", b);
    // 8 * 8191 + 2 = 65530 bytes: the probes push it past 65535.
    let mut b = String::from("    static int big(int v) {\n");
    statements(8191, &mut b);
    b.push_str("        return v;\n    }\n");
    class("TooBig", b);
    // An unconditional goto over ~32.75 KB with 60 returns in between: widened.
    let mut b = String::from("    static int far(int v) {\n        if (v < 0) {\n            v = -v;\n        } else {\n");
    returns(60, &mut b);
    statements(4020, &mut b);
    b.push_str("        }\n        return v;\n    }\n");
    class("FarJump", b);
    // The same distance for a conditional branch: refused (jump_overflow).
    let mut b = String::from("    static int far(int v) {\n        if (v >= 0) {\n");
    returns(60, &mut b);
    statements(4020, &mut b);
    b.push_str("        }\n        return v;\n    }\n");
    class("FarCond", b);
    // A dense tableswitch and a sparse lookupswitch of 300 cases each.
    let mut b = String::from("    static int dense(int x) {\n        switch (x) {\n");
    for i in 0..300 {
        writeln!(b, "            case {i}: return {};", i * 7 % 301).unwrap();
    }
    b.push_str("            default: return -1;\n        }\n    }\n\n    static int sparse(int x) {\n        switch (x) {\n");
    for i in 0..300 {
        writeln!(b, "            case {}: return {i};", i * 1009).unwrap();
    }
    b.push_str("            default: return -1;\n        }\n    }\n");
    class("BigSwitch", b);
    // 300 int locals: wide iload/istore/iinc.
    let mut b = String::from("    static int sum(int seed) {\n        int v0 = seed;\n");
    for i in 1..300 {
        writeln!(b, "        int v{i} = v{} + {i};", i - 1).unwrap();
    }
    b.push_str("        v299 += 100000;\n        long w = v299;\n        for (int i = 0; i < 3; i++) { v298++; w += v298; }\n        return (int) w + v0 + v150;\n    }\n");
    class("ManyLocals", b);
    class(
        "Generated",
        "    static void run() {\n        Main.out(\"generated \" + NearLimit.big(1) + \" \" + TooBig.big(1) + \" \" + FarJump.far(1) + \" \" + FarJump.far(-5) + \" \" + FarJump.far(1010) + \" \" + FarCond.far(1059) + \" \" + FarCond.far(-1));\n    }\n"
            .to_string(),
    );
}

fn javac(jdk: &Jdk, args: &[&str], files: Vec<PathBuf>) {
    let mut c = Command::new(&jdk.javac);
    c.arg("-nowarn")
        .arg("-Xlint:-options")
        .args(args)
        .args(files);
    run(&mut c);
}

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "java"))
        .collect();
    v.sort();
    v
}

/// Compiles the corpus into `<tmp>/orig`, class versions 46 to 61.
fn compile(jdk: &Jdk, tmp: &Path) -> PathBuf {
    let orig = tmp.join("orig");
    let o = orig.to_str().unwrap();
    let old = java_dir().join("old");
    let pre8: Vec<PathBuf> = ["V51", "V50", "V49", "V46"]
        .iter()
        .map(|n| old.join(format!("{n}.java")))
        .collect();
    javac(jdk, &["--release", "7", "-d", o], pre8);
    for (n, v) in [("V50", 50), ("V49", 49), ("V46", 46)] {
        set_major(&orig.join(format!("old/{n}.class")), v);
    }
    javac(
        jdk,
        &["--release", "8", "-cp", o, "-d", o],
        vec![old.join("Legacy.java")],
    );
    let gen = tmp.join("gen");
    generate(&gen);
    let mut files = sources(&java_dir().join("corpus"));
    files.extend(sources(&gen.join("corpus")));
    javac(jdk, &["--release", "17", "-cp", o, "-d", o], files);
    orig
}

fn java_run(jdk: &Jdk, cp: &str, extra: &[&str]) -> String {
    let mut c = Command::new(&jdk.java);
    c.arg("-Xverify:all")
        .args(extra)
        .arg("-cp")
        .arg(cp)
        .arg("corpus.Main");
    let out = run(&mut c);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("VerifyError"), "verifier complained:\n{err}");
    String::from_utf8(out.stdout).unwrap()
}

fn javap_code(jdk: &Jdk, class: &Path) -> String {
    let out = run(Command::new(&jdk.javap).arg("-c").arg(class));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn corpus_runs_verified_and_balanced() {
    let Some(jdk) = jdk() else {
        return;
    };
    let tmp = scratch("corpus");
    let orig = compile(&jdk, &tmp);
    let versions: BTreeMap<u16, usize> =
        class_files(&orig).iter().fold(BTreeMap::new(), |mut m, f| {
            let b = fs::read(f).unwrap();
            *m.entry(u16::from_be_bytes([b[6], b[7]])).or_insert(0) += 1;
            m
        });
    for v in [46, 49, 50, 51, 52, 61] {
        assert!(
            versions.contains_key(&v),
            "no class of version {v}: {versions:?}"
        );
    }

    let expected = java_run(&jdk, orig.to_str().unwrap(), &[]);
    assert!(expected.contains("checksum"), "{expected}");

    let new = tmp.join("new");
    let st = rewrite_tree(&orig, &new, &PROBE);
    eprintln!("corpus: {}", st.summary());
    let refused: BTreeMap<&str, Vec<&str>> = st
        .refused
        .iter()
        .map(|(k, v)| (*k, v.iter().map(|(c, _)| c.as_str()).collect()))
        .collect();
    let want: BTreeMap<&str, Vec<&str>> = [
        ("jump_overflow", vec!["corpus/FarCond.class"]),
        ("method_too_large", vec!["corpus/TooBig.class"]),
    ]
    .into_iter()
    .collect();
    assert_eq!(refused, want, "{}", st.summary());
    assert!(st.methods > 150, "{}", st.summary());

    // The far unconditional jump was widened; javac had not needed goto_w.
    assert!(!javap_code(&jdk, &orig.join("corpus/FarJump.class")).contains("goto_w"));
    assert!(javap_code(&jdk, &new.join("corpus/FarJump.class")).contains("goto_w"));

    let probe_dir = tmp.join("probe");
    javac(
        &jdk,
        &["--release", "17", "-d", probe_dir.to_str().unwrap()],
        vec![java_dir().join("sonda/Probe.java")],
    );
    let report = tmp.join("report.txt");
    let cp = format!("{}:{}", new.display(), probe_dir.display());
    let got = java_run(
        &jdk,
        &cp,
        &[
            &format!("-Dsonda.probe.report={}", report.display()),
            &format!("-Dsonda.probe.max={}", st.names.len()),
        ],
    );
    assert_eq!(got, expected, "output differs after rewriting");

    let report = fs::read_to_string(&report).unwrap();
    let mut counts: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
    let mut errors = None;
    let mut open = None;
    for line in report.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f[0] {
            "errors" => errors = Some(f[1].to_string()),
            "open" => open = Some(f[1].to_string()),
            "first" => {}
            id => {
                let id: usize = id.parse().unwrap();
                let n = |i: usize| f[i].parse::<u64>().unwrap();
                let (e, x, t) = (n(1), n(2), n(3));
                let name = st.names[id].as_str();
                assert_eq!(
                    e,
                    x + t,
                    "{name}: {e} entries, {x} exits, {t} exception exits"
                );
                counts.insert(name, (e, x, t));
            }
        }
    }
    assert_eq!(errors.as_deref(), Some("0"), "nesting errors:\n{report}");
    assert_eq!(open.as_deref(), Some("0"), "entries left open:\n{report}");
    let c = |m: &str| *counts.get(m).unwrap_or_else(|| panic!("{m} never entered"));
    // Always ends in a throw from the bottom: every exit is by exception.
    let (e, x, t) = c("corpus/Exceptions.depth(I)I");
    assert!(e > 12 && x == 0 && t == e, "{e} {x} {t}");
    // Sometimes throws, on several threads: both kinds of exit.
    let (_, x, t) = c("corpus/Threads.step(II)I");
    assert!(x > 0 && t > 0);
    // Throws after super(): entered, left by exception.
    assert_eq!(c("corpus/Derived.<init>(Ljava/lang/String;I)V"), (1, 0, 1));
    // Throws before super() (in check("")): neither entered nor left.
    assert_eq!(c("corpus/Derived.<init>(Ljava/lang/String;)V"), (1, 1, 0));
    // super(new Helper(v)) and new Helper(c ? 1 : 2): Helper(-1) throws after its
    // own super(), so Derived(-1)
    // never reaches its super() call.
    assert_eq!(c("corpus/Helper.<init>(I)V"), (3, 2, 1));
    assert_eq!(c("corpus/Derived.<init>(I)V"), (1, 1, 0));
    assert_eq!(c("corpus/StaticInits$Broken.<clinit>()V"), (1, 0, 1));
    assert_eq!(c("corpus/Recursion.fib(I)J").0, 21891 + 1973);
    assert!(c("old/V46.deep(I)I").2 > 0);
    assert!(c("corpus/Locking.incOrThrow(I)I").2 > 0);
    assert!(c("corpus/NearLimit.big(I)I").1 == 1);
    // Entered and left by every worker thread.
    assert_eq!(c("corpus/Threads.work(I)I"), (14, 14, 0));
    let _ = fs::remove_dir_all(&tmp);
}

#[test]
fn probe_class_loads_and_is_left_alone() {
    let Some(jdk) = jdk() else {
        return;
    };
    let tmp = scratch("probe-class");
    let probe = ProbeClass {
        class: "sonda/NativeProbe",
        enter: "in",
        exit: "out",
        exit_exception: "thrown",
    };
    let bytes = probe_class_bytes(&probe);
    assert_eq!(
        sonda_rewriter::class_name(&bytes).as_deref(),
        Some("sonda/NativeProbe")
    );
    // Never instrumented, even when everything is selected.
    assert!(instrument(&bytes, &probe, &mut |_| Some(1))
        .unwrap()
        .is_none());
    fs::create_dir_all(tmp.join("sonda")).unwrap();
    fs::write(tmp.join("sonda/NativeProbe.class"), &bytes).unwrap();
    fs::write(
        tmp.join("Check.java"),
        "public class Check {\n  public static void main(String[] a) throws Exception {\n    Class<?> c = Class.forName(\"sonda.NativeProbe\");\n    System.out.println(java.lang.reflect.Modifier.toString(c.getModifiers()) + \" \" + c.getSuperclass().getName());\n    for (String n : new String[] {\"in\", \"out\", \"thrown\"}) {\n      java.lang.reflect.Method m = c.getMethod(n, int.class);\n      System.out.println(n + \" \" + java.lang.reflect.Modifier.toString(m.getModifiers()) + \" \" + m.getReturnType());\n    }\n  }\n}\n",
    )
    .unwrap();
    javac(
        &jdk,
        &["-d", tmp.to_str().unwrap()],
        vec![tmp.join("Check.java")],
    );
    let out = run(Command::new(&jdk.java)
        .arg("-Xverify:all")
        .arg("-cp")
        .arg(&tmp)
        .arg("Check"));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "public final java.lang.Object\nin public static native void\nout public static native void\nthrown public static native void\n"
    );
    let _ = fs::remove_dir_all(&tmp);
}
