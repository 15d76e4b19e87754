//! Resolution against real binaries: small programs built with gcc and g++ (PIE and
//! not, stripped and not) print the addresses of their own functions and their own
//! `/proc/self/maps`; each address must resolve to the function's source-level name.

use std::path::{Path, PathBuf};
use std::process::Command;

use sonda_symbols::{demangle, Mapping, Resolved, Symbolizer};

const C_SOURCE: &str = r#"
#include <stdio.h>
__attribute__((noinline)) static int helper(int x) { return x + 1; }
__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int main(void) {
    printf("fn %p fib\n", (void *)fib);
    printf("fn %p helper\n", (void *)helper);
    printf("fn %p main\n", (void *)main);
    printf("in %p fib\n", (void *)((char *)fib + 3));
    FILE *m = fopen("/proc/self/maps", "r");
    char line[4096];
    while (fgets(line, sizeof line, m)) printf("map %s", line);
    return helper(fib(3)) == 3 ? 0 : 1;
}
"#;

const CPP_SOURCE: &str = r#"
#include <cstdio>
namespace shapes {
struct Square {
    __attribute__((noinline)) static double area(double side) { return side * side; }
};
template <typename T> __attribute__((noinline)) T twice(T x) { return x + x; }
}
int main() {
    std::printf("fn %p shapes::Square::area(double)\n", (void *)&shapes::Square::area);
    std::printf("fn %p int shapes::twice<int>(int)\n", (void *)&shapes::twice<int>);
    FILE *m = std::fopen("/proc/self/maps", "r");
    char line[4096];
    while (std::fgets(line, sizeof line, m)) std::printf("map %s", line);
    return shapes::twice(1) == 2 && shapes::Square::area(2.0) == 4.0 ? 0 : 1;
}
"#;

/// What a test program printed about itself.
struct Printed {
    /// The executable.
    exe: PathBuf,
    /// (function address, its name).
    fns: Vec<(u64, String)>,
    /// (an address 3 bytes into a function, its name).
    inside: Vec<(u64, String)>,
    /// Its executable file mappings.
    maps: Vec<Mapping>,
}

/// Builds `source` with `compiler` and `flags`, runs it, and returns what it printed.
fn build_and_run(dir: &Path, compiler: &str, ext: &str, source: &str, flags: &[&str]) -> Printed {
    let src = dir.join(format!("prog.{ext}"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(format!(
        "prog-{compiler}-{}",
        flags.join("").replace('-', "")
    ));
    let out = Command::new(compiler)
        .args(flags)
        .arg("-O1")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("compiler runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let text = String::from_utf8(run.stdout).unwrap();
    let mut fns = Vec::new();
    let mut inside = Vec::new();
    let mut maps = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("map ") {
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.len() >= 6 && f[1].contains('x') && f[5].starts_with('/') {
                let (s, e) = f[0].split_once('-').unwrap();
                maps.push(Mapping {
                    start: u64::from_str_radix(s, 16).unwrap(),
                    end: u64::from_str_radix(e, 16).unwrap(),
                    offset: u64::from_str_radix(f[2], 16).unwrap(),
                    path: f[5..].join(" "),
                });
            }
        } else {
            let (kind, rest) = line.split_once(' ').unwrap();
            let (addr, name) = rest.split_once(' ').unwrap();
            let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap();
            match kind {
                "fn" => fns.push((addr, name.to_string())),
                "in" => inside.push((addr, name.to_string())),
                _ => panic!("{line}"),
            }
        }
    }
    Printed {
        exe,
        fns,
        inside,
        maps,
    }
}

fn names(flags: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let Printed {
        fns, inside, maps, ..
    } = build_and_run(dir.path(), "gcc", "c", C_SOURCE, flags);
    let mut sym = Symbolizer::new();
    for (addr, name) in &fns {
        assert_eq!(sym.resolve(&maps, *addr).label(*addr), *name, "{flags:?}");
    }
    for (addr, name) in &inside {
        match sym.resolve(&maps, *addr) {
            Resolved::Function {
                name: n, offset, ..
            } => {
                assert_eq!((n.as_str(), offset), (name.as_str(), 3));
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(sym.failures().is_empty(), "{:?}", sym.failures());
}

#[test]
fn c_functions_of_a_pie_executable() {
    names(&["-g", "-pie", "-fPIE"]);
}

#[test]
fn c_functions_of_a_fixed_address_executable() {
    names(&["-no-pie", "-fno-pie"]);
}

#[test]
fn cpp_functions_are_demangled() {
    // scripts/test.sh installs it; under CI a missing g++ fails the test.
    if !sonda_tests::require_tool("g++") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Printed { fns, maps, .. } = build_and_run(dir.path(), "g++", "cc", CPP_SOURCE, &["-g"]);
    let mut sym = Symbolizer::new();
    for (addr, name) in &fns {
        assert_eq!(sym.resolve(&maps, *addr).label(*addr), *name);
    }
}

#[test]
fn stripped_vanished_and_unmapped_addresses_keep_where_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let Printed { exe, fns, maps, .. } = build_and_run(dir.path(), "gcc", "c", C_SOURCE, &["-s"]);
    let mut sym = Symbolizer::new();
    let (fib, _) = fns.iter().find(|(_, n)| n == "fib").unwrap().clone();
    // -s strips .symtab; fib is not exported, so no symbol names it.
    let label = sym.resolve(&maps, fib).label(fib);
    let module = exe.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        label.starts_with(&format!("0x{fib:x} ({module}+0x")),
        "{label}"
    );
    // The binary gone: the same label, and the failure said once.
    std::fs::remove_file(&exe).unwrap();
    let mut fresh = Symbolizer::new();
    assert_eq!(fresh.resolve(&maps, fib).label(fib), label);
    fresh.resolve(&maps, fib);
    assert_eq!(fresh.failures().len(), 1);
    // No mapping holds it.
    assert_eq!(fresh.resolve(&[], 0x1234), Resolved::Unknown);
    assert_eq!(Resolved::Unknown.label(0x1234), "0x1234");
}

#[test]
fn library_functions_through_dynsym() {
    // libc is stripped of .symtab on Debian; its exported functions are in .dynsym.
    let maps: Vec<Mapping> = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 6 && f[1].contains('x') && f[5].contains("libc.so")).then(|| {
                let (s, e) = f[0].split_once('-').unwrap();
                Mapping {
                    start: u64::from_str_radix(s, 16).unwrap(),
                    end: u64::from_str_radix(e, 16).unwrap(),
                    offset: u64::from_str_radix(f[2], 16).unwrap(),
                    path: f[5].to_string(),
                }
            })
        })
        .collect();
    if !sonda_tests::require("a test binary that maps libc.so (glibc)", !maps.is_empty()) {
        return;
    }
    let mut sym = Symbolizer::new();
    let addr = libc_getpid();
    assert_eq!(sym.resolve(&maps, addr).label(addr), "getpid");
    assert_eq!(demangle("getpid"), "getpid");
}

extern "C" {
    fn getpid() -> i32;
}

fn libc_getpid() -> u64 {
    getpid as *const () as usize as u64
}
