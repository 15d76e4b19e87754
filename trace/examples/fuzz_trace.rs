//! A long mutation campaign over real traces (the test suite's tests/mutations.rs runs
//! a few thousand cases; this runs millions), and the measurement of one flipped byte.
//!
//!   fuzz_trace CASES|SECONDSs [SEED]    e.g. `fuzz_trace 1000000` or `fuzz_trace 600s`
//!   fuzz_trace measure [OUT]            one flipped byte in the middle of a ~1 MB trace
//!                                       (written to OUT, to read it with other tools)
//!
//! The campaign writes a new trace every 2,000 cases (shapes vary: small drain cycles,
//! blocks cut at the writer's size), mutates it (tests/integration/mutate/mod.rs says how and what
//! must hold), and prints cases per second, panics, hangs and failed expectations. A
//! case that runs longer than 20 s is a hang: the campaign stops there, naming the seed.
//! Exit status 0 only when every case passed.

#[path = "../tests/integration/mutate/mod.rs"]
mod mutate;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mutate::{case_seed, check, recording, Rng, Trace};
use sonda_trace::{Events, ReadError, TraceMeta};

const HANG: Duration = Duration::from_secs(20);
const PER_TRACE: u64 = 2_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("measure") => measure(args.get(1)),
        Some(limit) => {
            let seed = args
                .get(1)
                .map(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("SEED in hex"))
                .unwrap_or_else(|| {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_nanos() as u64
                });
            let (cases, time) = match limit.strip_suffix('s') {
                Some(secs) => (
                    u64::MAX,
                    Duration::from_secs(secs.parse().expect("SECONDSs")),
                ),
                None => (limit.parse().expect("CASES"), Duration::MAX),
            };
            std::process::exit(campaign(seed, cases, time));
        }
        None => {
            eprintln!("usage: fuzz_trace CASES|SECONDSs [SEED] | fuzz_trace measure");
            std::process::exit(2);
        }
    }
}

/// The trace of round `round`: its shape varies from round to round.
fn trace_for(seed: u64, round: u64) -> Trace {
    let mut rng = Rng::new(case_seed(seed, u64::MAX - round));
    let (records, per_cycle) = match rng.below(4) {
        0 => (rng.range(500..3_000), rng.range(1..20)),
        1 => (rng.range(3_000..8_000), rng.range(20..200)),
        2 => (rng.range(20_000..40_000), rng.range(2_000..20_000)),
        _ => (rng.range(1..500), rng.range(1..600)),
    };
    recording(rng.next(), records, per_cycle)
}

fn campaign(seed: u64, cases: u64, time: Duration) -> i32 {
    println!("fuzz_trace: seed {seed:x}");
    let current = Arc::new(AtomicU64::new(0));
    let since = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    {
        let (current, since) = (current.clone(), since.clone());
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            let at = Duration::from_millis(since.load(Ordering::SeqCst));
            if started.elapsed().saturating_sub(at) > HANG {
                let case = current.load(Ordering::SeqCst);
                println!("HANG: case {case} of seed {seed:x} runs longer than {HANG:?}");
                println!("hangs: 1");
                std::process::exit(3);
            }
        });
    }
    let (mut panics, mut failures, mut done) = (0u64, 0u64, 0u64);
    let mut report = Instant::now();
    let mut trace = trace_for(seed, 0);
    while done < cases && started.elapsed() < time {
        if done > 0 && done % PER_TRACE == 0 {
            trace = trace_for(seed, done / PER_TRACE);
        }
        let mut rng = Rng::new(case_seed(seed, done));
        let m = trace.mutate(&mut rng);
        current.store(done, Ordering::SeqCst);
        since.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
        if let Err(e) = check(&trace, &m) {
            if e.starts_with("PANIC") {
                panics += 1;
            } else {
                failures += 1;
            }
            if panics + failures <= 20 {
                println!("case {done} of seed {seed:x} ({}): {e}", m.what);
            }
        }
        done += 1;
        if report.elapsed() > Duration::from_secs(10) {
            report = Instant::now();
            let secs = started.elapsed().as_secs_f64();
            println!(
                "{done} cases, {:.0} cases/s, panics {panics}, failures {failures}",
                done as f64 / secs
            );
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "done: {done} cases in {secs:.0} s, {:.0} cases/s; panics: {panics}, hangs: 0, failures: {failures}",
        done as f64 / secs
    );
    if panics + failures == 0 {
        0
    } else {
        1
    }
}

/// One flipped byte in the middle of a ~1 MB trace: the records a reader that stops at
/// the first error gets (all that the reader gave before resynchronising), and those
/// one that goes on gets.
fn measure(out: Option<&String>) {
    let trace = recording(7, 57_000, 2_000);
    let mut bytes = trace.bytes.clone();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    if let Some(out) = out {
        std::fs::write(out, &bytes).unwrap();
    }
    let (mut first_part, mut all, mut errors, mut stopped) = (0, 0, 0, false);
    let started = Instant::now();
    let mut events = Events::new(&bytes[..]).unwrap();
    for item in events.by_ref() {
        match item {
            Ok(_) => {
                all += 1;
                if !stopped {
                    first_part += 1;
                }
            }
            Err(_) => {
                errors += 1;
                stopped = true;
            }
        }
    }
    let took = started.elapsed();
    let meta = TraceMeta::read(&bytes[..]).unwrap();
    println!(
        "trace: {} bytes, {} blocks, {} records; byte {mid} flipped",
        bytes.len(),
        trace.blocks.len(),
        trace.records.len()
    );
    println!("records up to the first error (the reader before resynchronising): {first_part}");
    println!("records going on after it: {all} ({errors} error), read in {took:.2?}");
    for r in &events.damage().regions {
        println!("  {r}");
    }
    println!(
        "scan: {} records, damage {}",
        meta.records,
        meta.damage
            .as_ref()
            .map_or("none".into(), ReadError::to_string)
    );
}
