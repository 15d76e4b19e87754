//! Rewrites every method of every class under a directory, for experiments:
//! `cargo run --example rewrite_dir -- SRC DST PROBE_CLASS [PATH_PREFIX...]`.
//! Classes whose relative path starts with none of the prefixes are copied as they
//! are (all are rewritten when no prefix is given). Prints a summary per outcome.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).expect("readable directory") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: rewrite_dir SRC DST PROBE_CLASS [PATH_PREFIX...]");
        std::process::exit(2);
    }
    let (src, dst) = (Path::new(&args[0]), Path::new(&args[1]));
    let probe = sonda_rewriter::ProbeClass {
        class: &args[2],
        enter: "enter",
        exit: "exit",
        exit_exception: "exitException",
    };
    let prefixes = &args[3..];
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut next = 1u32;
    let mut outcome: BTreeMap<String, usize> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).expect("under SRC");
        let out = dst.join(rel);
        fs::create_dir_all(out.parent().expect("parent")).expect("mkdir");
        let bytes = fs::read(&f).expect("read");
        let chosen = rel.extension().is_some_and(|e| e == "class")
            && (prefixes.is_empty()
                || prefixes
                    .iter()
                    .any(|p| rel.to_string_lossy().starts_with(p.as_str())));
        if !chosen {
            fs::write(&out, &bytes).expect("write");
            continue;
        }
        let mut select = |_: &sonda_rewriter::MethodInfo<'_>| {
            next += 1;
            Some(next - 1)
        };
        match sonda_rewriter::instrument(&bytes, &probe, &mut select) {
            Ok(Some(done)) => {
                fs::write(&out, &done.bytes).expect("write");
                *outcome.entry("rewritten".into()).or_default() += 1;
            }
            Ok(None) => {
                fs::write(&out, &bytes).expect("write");
                *outcome.entry("untouched".into()).or_default() += 1;
            }
            Err(e) => {
                eprintln!("{}: {e}", rel.display());
                fs::write(&out, &bytes).expect("write");
                *outcome.entry(format!("refused: {}", e.kind())).or_default() += 1;
            }
        }
    }
    println!("{outcome:?}, ids 1..{next}");
}
