//! Thousands of mutations of real traces per run: every read ends, never panics, keeps
//! the records in time order, and a mutation that leaves the checksums alone loses only
//! the blocks it touches (see tests/integration/mutate/mod.rs). Deterministic: a failure prints the
//! run's seed and the case; `SONDA_MUTATION_SEED=<seed>` reruns that run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::mutate::{case_seed, check, recording, Rng, Trace};

/// A case that takes longer than this is a hang (a case takes about a millisecond).
const HANG: Duration = Duration::from_secs(20);

fn seed() -> u64 {
    std::env::var("SONDA_MUTATION_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0x5eed_0011)
}

/// Runs `cases` mutations of `trace`; a watchdog ends the process if one hangs.
fn campaign(name: &str, trace: &Trace, cases: u64) {
    let seed = seed();
    let current = Arc::new(AtomicU64::new(u64::MAX));
    let started = Instant::now();
    let since = Arc::new(AtomicU64::new(0));
    {
        let (current, since) = (current.clone(), since.clone());
        let name = name.to_string();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            let case = current.load(Ordering::SeqCst);
            let at = Duration::from_millis(since.load(Ordering::SeqCst));
            if case != u64::MAX && started.elapsed().saturating_sub(at) > HANG {
                eprintln!(
                    "{name}: case {case} of seed {seed:#x} hangs (SONDA_MUTATION_SEED={seed:x})"
                );
                std::process::exit(101);
            }
        });
    }
    let mut failures = Vec::new();
    let (mut records, mut errors) = (0usize, 0usize);
    for case in 0..cases {
        let mut rng = Rng::new(case_seed(seed, case));
        let m = trace.mutate(&mut rng);
        since.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
        current.store(case, Ordering::SeqCst);
        match check(trace, &m) {
            Ok(o) => {
                records += o.records;
                errors += o.errors;
            }
            Err(e) => failures.push(format!("case {case} ({}): {e}", m.what)),
        }
    }
    current.store(u64::MAX, Ordering::SeqCst);
    let took = started.elapsed();
    eprintln!(
        "{name}: {cases} cases in {:.2} s ({:.0}/s), {records} records read, {errors} errors reported",
        took.as_secs_f64(),
        cases as f64 / took.as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{name}: {} of {cases} cases failed (SONDA_MUTATION_SEED={seed:x}):\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn small_blocks_survive_mutations() {
    // Many drain cycles of few records: ~300 blocks.
    let trace = recording(1, 6_000, 40);
    assert!(trace.blocks.len() > 250, "{}", trace.blocks.len());
    campaign("small blocks", &trace, 4_000);
}

#[test]
fn blocks_cut_at_the_writers_size_survive_mutations() {
    // Long drain cycles: events blocks cut at the writer's 256 KiB.
    let trace = recording(2, 150_000, 75_000);
    let biggest = trace.blocks.iter().map(|b| b.len).max().unwrap();
    assert!(biggest > 200_000, "{biggest}");
    campaign("big blocks", &trace, 600);
}

#[test]
fn one_flipped_byte_loses_only_its_block() {
    // Every 97th byte of a trace flipped in turn (the campaigns pick at random).
    let trace = recording(3, 3_000, 100);
    for at in (16..trace.bytes.len()).step_by(97) {
        let mut bytes = trace.bytes.clone();
        bytes[at] ^= 0x20;
        let lost = trace
            .blocks
            .iter()
            .position(|b| (b.offset..b.offset + b.len).contains(&at))
            .unwrap();
        let m = crate::mutate::Mutation {
            what: format!("byte {at}"),
            bytes,
            expect: crate::mutate::Expect::Lose(vec![lost]),
        };
        let o = check(&trace, &m).unwrap_or_else(|e| panic!("flip at {at}: {e}"));
        // The report names the block: where it is, its length, and (when the flip is
        // in the payload, so that the header still holds) its records.
        let block = &trace.blocks[lost];
        if o.damage.regions.is_empty() && lost == trace.blocks.len() - 1 {
            // The end block's length now runs past the end of the file: cut short.
            assert_eq!(
                o.damage.truncated,
                Some(block.offset as u64),
                "flip at {at}"
            );
            continue;
        }
        let [region] = &o.damage.regions[..] else {
            panic!("flip at {at}: {:?}", o.damage)
        };
        assert_eq!(
            (region.offset, region.bytes),
            (block.offset as u64, block.len as u64),
            "flip at {at}"
        );
        if at >= block.offset + 40 {
            assert_eq!(region.blocks, Some(1), "flip at {at}");
            assert_eq!(region.records, Some(block.records as u64), "flip at {at}");
            assert_eq!(region.reason, "checksum mismatch");
        }
    }
}
