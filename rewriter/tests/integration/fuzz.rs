//! The rewriter must be total: random mutations of real class files (truncations,
//! flipped and overwritten bytes, inserted and deleted ranges) must give `Ok` or a
//! typed `Err`, never a panic or a hang. Deterministic (fixed-seed xorshift), so a
//! failure reproduces; the offending input is saved next to the panic message.
//! `SONDA_FUZZ_ITERS` raises the number of cases.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use sonda_rewriter::{class_name, instrument, probe_class_bytes, ProbeClass};

const PROBE: ProbeClass<'static> = ProbeClass {
    class: "sonda/Probe",
    enter: "enter",
    exit: "exit",
    exit_exception: "exitException",
};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Real classes to mutate: the probe class, plus JDK classes (java.util.regex,
/// java.lang.invoke, java.util.concurrent: switches, constructors, big methods)
/// when the JDK tools are there.
fn seeds() -> Vec<Vec<u8>> {
    let mut v = vec![probe_class_bytes(&PROBE)];
    let Some(jdk) = crate::support::jdk() else {
        return v;
    };
    let tmp = crate::support::scratch("fuzz");
    let home = jdk.java.canonicalize().unwrap();
    let modules = home.parent().unwrap().parent().unwrap().join("lib/modules");
    crate::support::run(
        Command::new(&jdk.jimage)
            .arg("extract")
            .arg(format!("--dir={}", tmp.display()))
            .arg("--include=regex:/java.base/java/(util/regex|lang/invoke|util/concurrent)/[A-Za-z]+(\\$[A-Za-z0-9]+)?\\.class")
            .arg(&modules),
    );
    for f in crate::support::class_files(&tmp) {
        v.push(fs::read(f).unwrap());
    }
    let _ = fs::remove_dir_all(&tmp);
    assert!(v.len() > 100, "too few seed classes: {}", v.len());
    v
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        if b.is_empty() {
            break;
        }
        // Half of the edits land in the last 60%: methods and code, past the pool.
        let pos = if rng.below(2) == 0 {
            rng.below(b.len())
        } else {
            b.len() - 1 - rng.below(b.len() * 6 / 10 + 1).min(b.len() - 1)
        };
        match rng.below(7) {
            0 => b[pos] ^= 1 << rng.below(8),
            1 => b[pos] = [0, 0xff, 0x7f, 0x80, 1, 0xc4, 0xaa][rng.below(7)],
            2 => b[pos] = rng.next() as u8,
            3 => b.truncate(pos),
            4 => {
                let end = (pos + 1 + rng.below(16)).min(b.len());
                b.drain(pos..end);
            }
            5 => {
                let n = 1 + rng.below(8);
                for _ in 0..n {
                    b.insert(pos, rng.next() as u8);
                }
            }
            _ => {
                // Overwrite a u16 (lengths, counts, offsets, indices).
                if pos + 1 < b.len() {
                    let v = [0u16, 1, 0xffff, 0x7fff, 0x8000, rng.next() as u16][rng.below(6)];
                    b[pos..pos + 2].copy_from_slice(&v.to_be_bytes());
                }
            }
        }
    }
    b
}

fn exercise(input: &[u8]) {
    let _ = class_name(input);
    let mut next = 0u32;
    let mut all = |_: &sonda_rewriter::MethodInfo<'_>| {
        next = next.wrapping_add(40_000);
        Some(next)
    };
    if let Ok(Some(done)) = instrument(input, &PROBE, &mut all) {
        // A rewritten class can be read (and rewritten) again.
        assert!(class_name(&done.bytes).is_some());
        let _ = instrument(&done.bytes, &PROBE, &mut |_| Some(7));
    }
}

#[test]
fn random_mutations_never_panic() {
    let iters: usize = std::env::var("SONDA_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let seeds = seeds();
    // Unmutated seeds rewrite fine.
    for s in &seeds {
        exercise(s);
    }
    let mut rng = Rng(0x05ee_d0f5_04da);
    let mut errs = 0usize;
    for i in 0..iters {
        let seed = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, seed);
        let r = std::panic::catch_unwind(|| exercise(&input));
        if r.is_err() {
            let p: PathBuf =
                std::env::temp_dir().join(format!("sonda-rewriter-fuzz-panic-{i}.class"));
            fs::write(&p, &input).unwrap();
            panic!("case {i} panicked; input saved to {}", p.display());
        }
        if instrument(&input, &PROBE, &mut |_| Some(1)).is_err() {
            errs += 1;
        }
    }
    eprintln!("{iters} mutated classes, {errs} refused with a typed error");
    assert!(
        errs > 0,
        "mutations never produced an error: the fuzzer is not reaching the checks"
    );
}

#[test]
fn garbage_and_edge_inputs() {
    for input in [
        &b""[..],
        &[0xca, 0xfe, 0xba, 0xbe],
        &[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 61, 0, 0],
        &[
            0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 61, 0xff, 0xff, 1, 0xff, 0xff,
        ],
        &[0; 64],
        &[0xff; 64],
    ] {
        exercise(input);
        assert!(instrument(input, &PROBE, &mut |_| Some(1)).is_err());
    }
}
