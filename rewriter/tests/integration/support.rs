//! Shared helpers of the JVM-backed tests: locating the JDK tools, scratch
//! directories, running commands, and rewriting whole directory trees of classes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sonda_rewriter::{instrument, ProbeClass, RewriteError};

/// The JDK tools the tests use.
pub struct Jdk {
    pub java: PathBuf,
    pub javac: PathBuf,
    pub javap: PathBuf,
    pub jimage: PathBuf,
}

fn find_tool(name: &str) -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let p = Path::new(&home).join("bin").join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The JDK, or `None` (the test skipped with a message) when one of its tools is
/// missing; under CI a missing JDK fails the test ([`sonda_tests::require`]).
pub fn jdk() -> Option<Jdk> {
    let tools = (
        find_tool("java"),
        find_tool("javac"),
        find_tool("javap"),
        find_tool("jimage"),
    );
    let found = matches!(tools, (Some(_), Some(_), Some(_), Some(_)));
    if !sonda_tests::require("the JDK (java, javac, javap, jimage)", found) {
        return None;
    }
    let (Some(java), Some(javac), Some(javap), Some(jimage)) = tools else {
        unreachable!("require returned true only when every tool was found")
    };
    Some(Jdk {
        java,
        javac,
        javap,
        jimage,
    })
}

/// A fresh, empty scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sonda-rewriter-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// Runs a command, failing the test with its output if it does not succeed.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{cmd:?} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            out.status,
            tail(&String::from_utf8_lossy(&out.stdout)),
            tail(&String::from_utf8_lossy(&out.stderr))
        );
    }
    out
}

fn tail(s: &str) -> &str {
    let mut start = s.len().saturating_sub(6000);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Every `.class` file under `dir`, sorted.
pub fn class_files(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "class") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// What rewriting a tree did.
#[derive(Default)]
pub struct Stats {
    pub classes: usize,
    pub rewritten: usize,
    pub untouched: usize,
    /// error kind -> (class file, message)
    pub refused: BTreeMap<&'static str, Vec<(String, String)>>,
    /// `names[id]` = "class.name descriptor" (ids start at 1).
    pub names: Vec<String>,
    pub methods: usize,
}

impl Stats {
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} classes: {} rewritten ({} methods), {} untouched, {} refused",
            self.classes,
            self.rewritten,
            self.methods,
            self.untouched,
            self.refused.values().map(Vec::len).sum::<usize>()
        );
        for (k, v) in &self.refused {
            s.push_str(&format!("\n  {k}: {}", v.len()));
            for (c, m) in v.iter().take(5) {
                s.push_str(&format!("\n    {c}: {m}"));
            }
        }
        s
    }
}

/// Rewrites every method of every class under `src` into the same place under
/// `dst`; refused classes are copied unchanged (as the agent would load them).
pub fn rewrite_tree(src: &Path, dst: &Path, probe: &ProbeClass<'_>) -> Stats {
    let mut st = Stats {
        names: vec![String::new()],
        ..Stats::default()
    };
    for f in class_files(src) {
        let rel = f.strip_prefix(src).unwrap();
        let out = dst.join(rel);
        fs::create_dir_all(out.parent().unwrap()).unwrap();
        let bytes = fs::read(&f).unwrap();
        st.classes += 1;
        let mut next = st.names.len() as u32;
        let mut pending = Vec::new();
        let mut select = |m: &sonda_rewriter::MethodInfo<'_>| {
            pending.push(format!("{}.{}{}", m.class, m.name, m.descriptor));
            next += 1;
            Some(next - 1)
        };
        let result = instrument(&bytes, probe, &mut select);
        match result {
            Ok(Some(done)) => {
                st.rewritten += 1;
                st.methods += done.methods.len();
                for (m, name) in done.methods.iter().zip(&pending) {
                    assert_eq!(m.id as usize, st.names.len());
                    st.names.push(name.clone());
                }
                fs::write(&out, &done.bytes).unwrap();
            }
            Ok(None) => {
                st.untouched += 1;
                fs::write(&out, &bytes).unwrap();
            }
            Err(e) => {
                let e: RewriteError = e;
                st.refused
                    .entry(e.kind())
                    .or_default()
                    .push((rel.display().to_string(), e.to_string()));
                fs::write(&out, &bytes).unwrap();
            }
        }
    }
    st
}

/// Sets the major version of a class file in place.
pub fn set_major(path: &Path, major: u16) {
    let mut b = fs::read(path).unwrap();
    b[6..8].copy_from_slice(&major.to_be_bytes());
    fs::write(path, b).unwrap();
}
