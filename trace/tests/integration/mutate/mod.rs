//! Mutations of real traces and what reading them must give: shared by the mutation
//! test (tests/mutations.rs) and the longer campaign (examples/fuzz_trace.rs,
//! scripts/fuzz-trace.sh).
//!
//! A trace is written with the crate's own writer in the shape of a recording
//! (metadata and events blocks in turns, events blocks cut at the writer's size, an
//! end block), then one mutation is applied and the trace is read as the tools read it
//! (`TraceMeta` scan, then every record of `Events`). Every case must end, without a
//! panic, with the records in time order. Mutations that leave the checksums alone
//! (flips, zeroed, inserted or deleted bytes, huge lengths, truncation) must lose only
//! the blocks they touch: the records read are exactly the trace's minus those blocks',
//! and the scan and the stream report the same damage.

#![allow(dead_code)]

use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};

use sonda_trace::block::{BLOCK_HEADER_LEN, FILE_HEADER_LEN};
use sonda_trace::*;

/// splitmix64: small, seedable, and the same on every machine.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn range(&mut self, r: Range<usize>) -> usize {
        r.start + self.below((r.end - r.start) as u64) as usize
    }
}

/// The seed of case `i` of a run seeded with `seed`.
pub fn case_seed(seed: u64, i: u64) -> u64 {
    Rng::new(seed ^ i.wrapping_mul(0xa076_1d64_78bd_642f)).next()
}

/// One block of a written trace.
#[derive(Clone, Debug)]
pub struct BlockInfo {
    pub offset: usize,
    /// Header and payload.
    pub len: usize,
    pub kind: u8,
    /// Timed records in it (0 for metadata and end blocks).
    pub records: usize,
    /// Times of its first and last records (events blocks).
    pub first: u64,
    pub last: u64,
}

impl BlockInfo {
    fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.len
    }
}

/// A trace and what it holds.
pub struct Trace {
    pub bytes: Vec<u8>,
    pub blocks: Vec<BlockInfo>,
    /// Every timed record, in file order.
    pub records: Vec<Record>,
}

/// Writes a trace of about `records` timed records in the shape of a recording: the
/// recording's metadata first, then in every drain cycle (`per_cycle` records) the
/// metadata of new threads and methods, and the records; an end block with counters.
pub fn recording(seed: u64, records: usize, per_cycle: usize) -> Trace {
    let mut rng = Rng::new(seed);
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    w.meta(&Meta::TraceInfo {
        source: Source::Tracepoints,
        start: Time(1_000_000),
        host: "host".into(),
        cpus: 4,
        command: vec!["java".into(), "-jar".into(), "app.jar".into()],
        tool: "sonda test".into(),
    });
    w.meta(&Meta::Process {
        pid: Pid(100),
        ppid: Pid(1),
        name: "java".into(),
        runtime: Runtime::Java,
    });
    let mut all = Vec::with_capacity(records);
    let mut time = 1_000_000u64;
    let mut threads = 0u32;
    let mut methods = 0u32;
    while all.len() < records {
        // New threads and methods this cycle, named before their first record.
        for _ in 0..rng.below(3) {
            threads += 1;
            w.meta(&Meta::Thread {
                pid: Pid(100),
                tid: Tid(100 + threads),
                comm: format!("worker-{threads}"),
            });
            if rng.below(2) == 0 {
                w.meta(&Meta::JavaThread {
                    pid: Pid(100),
                    tid: Tid(100 + threads),
                    name: format!("pool-1-thread-{threads}"),
                    daemon: false,
                });
            }
        }
        for _ in 0..rng.below(5) {
            methods += 1;
            w.meta(&Meta::Method {
                id: methods,
                class: "com.example.Service".into(),
                name: format!("handle{methods}"),
                descriptor: "(Ljava/lang/String;)V".into(),
            });
        }
        let tids = threads.max(1);
        for _ in 0..per_cycle {
            time += rng.below(3) * rng.below(2000); // ties too
            let tid = Tid(101 + rng.below(u64::from(tids)) as u32);
            let method = 1 + rng.below(u64::from(methods.max(1))) as u32;
            let event = match rng.below(10) {
                0 => Event::Switch {
                    cpu: Cpu(rng.below(4) as u16),
                    prev: tid,
                    prev_state: [0, 1, 2, 0x100][rng.below(4) as usize],
                    next: Tid(101 + rng.below(u64::from(tids)) as u32),
                    charge: None,
                },
                1 => Event::Waking {
                    cpu: Cpu(rng.below(4) as u16),
                    waker: tid,
                    wakee: Tid(101 + rng.below(u64::from(tids)) as u32),
                },
                // Half of them carrying their waking (format 4.0).
                2 => Event::Wakeup {
                    target: Cpu(rng.below(4) as u16),
                    wakee: tid,
                    new_task: false,
                    waking: (rng.below(2) == 0).then(|| CarriedWaking {
                        cpu: Cpu(rng.below(4) as u16),
                        waker: Tid(101 + rng.below(u64::from(tids)) as u32),
                        before_ns: rng.below(3000) as u32,
                    }),
                },
                3 => Event::MonitorContended { tid, class: 1 },
                4 => Event::User {
                    tid,
                    kind: 1,
                    value: rng.next(),
                },
                5 | 6 => Event::Enter { tid, method },
                _ => Event::Leave {
                    tid,
                    method,
                    exception: rng.below(50) == 0,
                },
            };
            let record = Record {
                time: Time(time),
                event,
            };
            w.record(&record).unwrap();
            // As read: a carried waking before its wakeup, never before the record
            // written ahead of it.
            let floor = all.last().map_or(0, |r: &Record| r.time.0);
            let (waking, wakeup) = record.unfold(floor);
            all.extend(waking);
            all.push(wakeup);
        }
        w.flush().unwrap();
    }
    let bytes = w
        .finish(&[
            Meta::Counter {
                name: "kernel.events".into(),
                value: all.len() as u64,
            },
            Meta::Counter {
                name: "agent.dropped".into(),
                value: 0,
            },
        ])
        .unwrap();
    index(bytes, all)
}

/// Finds the blocks of an undamaged trace.
fn index(bytes: Vec<u8>, records: Vec<Record>) -> Trace {
    let mut blocks = Vec::new();
    let mut at = FILE_HEADER_LEN;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let count = u32::from_le_bytes(bytes[at + 16..at + 20].try_into().unwrap()) as usize;
        let kind = bytes[at + 4];
        let time = |i: usize| u64::from_le_bytes(bytes[at + i..at + i + 8].try_into().unwrap());
        blocks.push(BlockInfo {
            offset: at,
            len: BLOCK_HEADER_LEN + len,
            kind,
            records: if kind == 2 { count } else { 0 },
            first: time(24),
            last: time(32),
        });
        at += BLOCK_HEADER_LEN + len;
    }
    Trace {
        bytes,
        blocks,
        records,
    }
}

/// What a mutation did, and what reading the result must give.
#[derive(Debug)]
pub struct Mutation {
    pub what: String,
    pub bytes: Vec<u8>,
    pub expect: Expect,
}

#[derive(Debug)]
pub enum Expect {
    /// Only the blocks with these indexes are lost (the checksums were left alone).
    Lose(Vec<usize>),
    /// The file is cut at this offset: the blocks before it are read, then `Truncated`
    /// unless the cut is between two blocks.
    Cut(usize),
    /// A copy of this events block, put where it goes back in time, is refused; nothing
    /// else is lost.
    Refused(usize),
    /// Anything may be lost (checksums recomputed, blocks moved): only the invariants.
    Anything,
}

impl Trace {
    /// Indexes of the blocks that overlap `range` (or hold its first byte when empty).
    fn touched(&self, range: Range<usize>) -> Vec<usize> {
        let range = range.start..range.end.max(range.start + 1);
        self.blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.range().start < range.end && range.start < b.range().end)
            .map(|(i, _)| i)
            .collect()
    }

    /// Whether block `i` stands unchanged, at its offset, in the mutated `bytes`.
    fn unchanged_in(&self, i: usize, bytes: &[u8]) -> bool {
        bytes.get(self.blocks[i].range()) == Some(self.block_bytes(i))
    }

    fn block_bytes(&self, i: usize) -> &[u8] {
        &self.bytes[self.blocks[i].range()]
    }

    /// A random mutation.
    pub fn mutate(&self, rng: &mut Rng) -> Mutation {
        let n = self.bytes.len();
        let body = FILE_HEADER_LEN..n;
        let mut bytes = self.bytes.clone();
        let (what, expect) = match rng.below(12) {
            0..=2 => {
                let at = rng.range(body);
                let x = 1 + rng.below(255) as u8;
                bytes[at] ^= x;
                (
                    format!("byte {at} ^= {x:#04x}"),
                    Expect::Lose(self.touched(at..at + 1)),
                )
            }
            3 => {
                // A flip where the header's fields are: magic, kind, length, CRC, count.
                let b = rng.range(0..self.blocks.len());
                let at = self.blocks[b].offset + rng.range(0..BLOCK_HEADER_LEN);
                let bit = 1u8 << rng.below(8);
                bytes[at] ^= bit;
                (
                    format!("header bit {at} ^= {bit:#04x}"),
                    Expect::Lose(vec![b]),
                )
            }
            4 => {
                let at = rng.range(0..n + 1);
                bytes.truncate(at);
                (format!("cut at {at}"), Expect::Cut(at))
            }
            5 => {
                // Cut at a block boundary, inside a header, or inside a payload.
                let b = &self.blocks[rng.range(0..self.blocks.len())];
                let at = b.offset
                    + match rng.below(3) {
                        0 => 0,
                        1 => rng.range(1..BLOCK_HEADER_LEN),
                        _ => rng.range(BLOCK_HEADER_LEN..b.len),
                    };
                bytes.truncate(at);
                (format!("cut at {at}"), Expect::Cut(at))
            }
            6 => {
                let at = rng.range(body);
                let len = rng.range(1..4096).min(n - at);
                bytes[at..at + len].fill(0);
                // Only the bytes that were not zero already change a block.
                let changed: Vec<usize> = (at..at + len).filter(|&i| self.bytes[i] != 0).collect();
                let lost = match (changed.first(), changed.last()) {
                    (Some(&a), Some(&b)) => self.touched(a..b + 1),
                    _ => vec![],
                };
                (format!("zeroed {len} bytes at {at}"), Expect::Lose(lost))
            }
            7 => {
                let b = rng.range(0..self.blocks.len());
                let at = self.blocks[b].offset + 8;
                let len: u32 = match rng.below(3) {
                    0 => u32::MAX,
                    1 => block::MAX_PAYLOAD,
                    _ => rng.below(u64::from(block::MAX_PAYLOAD)) as u32,
                };
                bytes[at..at + 4].copy_from_slice(&len.to_le_bytes());
                let expect = if len as usize == self.blocks[b].len - BLOCK_HEADER_LEN {
                    Expect::Lose(vec![])
                } else {
                    Expect::Lose(vec![b])
                };
                (format!("block {b} length := {len}"), expect)
            }
            8 => {
                // Inserted or deleted bytes.
                let at = rng.range(body);
                let len = rng.range(1..300);
                if rng.below(2) == 0 {
                    let junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                    bytes.splice(at..at, junk);
                    // Between two blocks, nothing is lost but the junk.
                    let lost = self.touched(at..at).into_iter();
                    let lost = lost.filter(|&i| self.blocks[i].offset != at).collect();
                    (format!("{len} bytes inserted at {at}"), Expect::Lose(lost))
                } else {
                    let len = len.min(n - at);
                    bytes.drain(at..at + len);
                    // A block that ends in the deleted bytes stays whole when the bytes
                    // that move up into its tail equal the deleted ones (zeros, often):
                    // the campaign met it 4 times in 117,436 cases.
                    let lost = self.touched(at..at + len).into_iter();
                    let lost = lost.filter(|&i| !self.unchanged_in(i, &bytes)).collect();
                    (format!("{len} bytes deleted at {at}"), Expect::Lose(lost))
                }
            }
            9 => {
                // A bit flip with the block's CRC recomputed: the decoder sees garbage.
                let b = rng.range(0..self.blocks.len());
                let block = &self.blocks[b];
                let at = block.offset + rng.range(0..block.len);
                bytes[at] ^= 1 << rng.below(8);
                let start = block.offset;
                let mut header = [0u8; BLOCK_HEADER_LEN];
                header.copy_from_slice(&bytes[start..start + BLOCK_HEADER_LEN]);
                let payload = &bytes[start + BLOCK_HEADER_LEN..start + block.len];
                let crc = recompute_crc(&header, payload);
                bytes[start + 12..start + 16].copy_from_slice(&crc.to_le_bytes());
                (
                    format!("byte {at} flipped in block {b}, CRC recomputed"),
                    Expect::Anything,
                )
            }
            10 => {
                // A block copied to another block boundary (spliced, duplicated).
                let from = rng.range(0..self.blocks.len());
                let before = rng.range(0..self.blocks.len());
                let to = self.blocks[before].offset;
                let copy = self.block_bytes(from).to_vec();
                bytes.splice(to..to, copy);
                // The events blocks read before the copy end at `last`.
                let last = self.blocks[..before]
                    .iter()
                    .filter(|b| b.kind == 2)
                    .map(|b| b.last)
                    .max();
                let block = &self.blocks[from];
                let expect = if block.kind == 2 && last.is_some_and(|t| block.first < t) {
                    Expect::Refused(from)
                } else {
                    Expect::Anything
                };
                (format!("block {from} copied to {to}"), expect)
            }
            _ => {
                // Two blocks swapped, or a block copied over another (same length or not).
                let a = rng.range(0..self.blocks.len() - 1);
                let b = rng.range(a + 1..self.blocks.len());
                if rng.below(2) == 0 {
                    let mut out = self.bytes[..self.blocks[a].offset].to_vec();
                    out.extend_from_slice(self.block_bytes(b));
                    out.extend_from_slice(
                        &self.bytes[self.blocks[a].range().end..self.blocks[b].offset],
                    );
                    out.extend_from_slice(self.block_bytes(a));
                    out.extend_from_slice(&self.bytes[self.blocks[b].range().end..]);
                    bytes = out;
                    (format!("blocks {a} and {b} swapped"), Expect::Anything)
                } else {
                    let range = self.blocks[b].range();
                    bytes.splice(range, self.block_bytes(a).iter().copied());
                    (format!("block {a} copied over block {b}"), Expect::Anything)
                }
            }
        };
        Mutation {
            what,
            bytes,
            expect,
        }
    }
}

/// A block's CRC as the writer computes it (header with the CRC field zero, payload).
fn recompute_crc(header: &[u8; BLOCK_HEADER_LEN], payload: &[u8]) -> u32 {
    let mut h = *header;
    h[12..16].fill(0);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&h);
    hasher.update(payload);
    hasher.finalize()
}

/// What reading one mutated trace gave.
#[derive(Default, Debug)]
pub struct Outcome {
    pub records: usize,
    pub errors: usize,
    /// What the stream skipped.
    pub damage: Damage,
}

/// Reads `m.bytes` as the tools do and checks it against `trace`. `Err` says what went
/// wrong (a panic included).
pub fn check(trace: &Trace, m: &Mutation) -> Result<Outcome, String> {
    match catch_unwind(AssertUnwindSafe(|| read_and_check(trace, m))) {
        Ok(result) => result,
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("PANIC: {text}"))
        }
    }
}

fn read_and_check(trace: &Trace, m: &Mutation) -> Result<Outcome, String> {
    let bytes = &m.bytes[..];
    let meta = match TraceMeta::read(bytes) {
        Ok(meta) => meta,
        Err(ReadError::NotATrace | ReadError::Version { .. }) if bytes.len() < 16 => {
            return Ok(Outcome::default())
        }
        Err(e) => return Err(format!("the scan fails: {e}")),
    };
    let mut events = Events::new(bytes).map_err(|e| format!("the stream fails: {e}"))?;
    let mut got = Vec::new();
    let mut errors = Vec::new();
    let mut last = None;
    for item in events.by_ref() {
        match item {
            Ok(r) => {
                if last.is_some_and(|t| r.time < t) {
                    return Err(format!("record at {:?} after {last:?}", r.time));
                }
                last = Some(r.time);
                got.push(r);
            }
            Err(e) => {
                if matches!(
                    errors.last(),
                    Some(ReadError::Truncated { .. } | ReadError::Io(_))
                ) {
                    return Err(format!("{e} after a final error"));
                }
                errors.push(e);
            } // Every item is progress: no more than one per byte.
        }
        if got.len() + errors.len() > bytes.len() + trace.records.len() {
            return Err("more items than bytes".into());
        }
    }
    let damage = events.damage().clone();
    let mut end = 0;
    for r in &damage.regions {
        if r.offset < end || r.bytes == 0 || r.offset + r.bytes > bytes.len() as u64 {
            return Err(format!("region {r} overlaps or lies outside the file"));
        }
        end = r.offset + r.bytes;
    }
    let outcome = Outcome {
        records: got.len(),
        errors: errors.len(),
        damage: damage.clone(),
    };
    let lost = match &m.expect {
        Expect::Anything => return Ok(outcome),
        Expect::Refused(copied) => {
            let block = &trace.blocks[*copied];
            match &damage.regions[..] {
                [r] if r.bytes == block.len as u64
                    && r.blocks == Some(1)
                    && r.records == Some(block.records as u64)
                    && r.reason.contains("back in time") => {}
                _ => return Err(format!("the copy is not refused alone: {damage:?}")),
            }
            vec![]
        }
        Expect::Cut(at) => {
            let at = *at;
            if at < FILE_HEADER_LEN {
                return Err("a file shorter than its header read as a trace".into());
            }
            let cut: Vec<usize> = trace.touched(at..at).into_iter().collect();
            let between = trace.blocks.iter().any(|b| b.offset == at) || at == trace.bytes.len();
            match (&errors[..], between) {
                ([], true) => {}
                ([ReadError::Truncated { offset }], false)
                    if *offset as usize == trace.blocks[cut[0]].offset => {}
                _ => return Err(format!("cut at {at}: errors {errors:?}")),
            }
            // Everything from the cut block on is lost.
            (cut.first().copied().unwrap_or(trace.blocks.len())..trace.blocks.len()).collect()
        }
        Expect::Lose(lost) => lost.clone(),
    };
    let want: Vec<&Record> = trace
        .blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.kind == 2)
        .scan(0usize, |first, (i, b)| {
            let range = *first..*first + b.records;
            *first += b.records;
            Some((i, range))
        })
        .filter(|(i, _)| !lost.contains(i))
        .flat_map(|(_, range)| &trace.records[range])
        .collect();
    if got.len() != want.len() || got.iter().zip(&want).any(|(a, b)| a != *b) {
        return Err(format!(
            "read {} records, want {} (all {} but those of blocks {lost:?})",
            got.len(),
            want.len(),
            trace.records.len()
        ));
    }
    if meta.records != want.len() as u64 {
        return Err(format!(
            "the scan counts {} records, want {}",
            meta.records,
            want.len()
        ));
    }
    if meta.skipped != damage {
        return Err(format!(
            "the scan skipped {:?}, the stream {:?}",
            meta.skipped, damage
        ));
    }
    if let Expect::Lose(lost) = &m.expect {
        // One damaged stretch per run of adjacent lost blocks.
        if lost.is_empty() && !errors.is_empty() && !m.what.contains("inserted") {
            return Err(format!("errors {errors:?} with nothing lost"));
        }
        if errors.len() > lost.len().max(1) {
            return Err(format!(
                "{} errors for {} blocks lost",
                errors.len(),
                lost.len()
            ));
        }
        let end_lost = lost.contains(&(trace.blocks.len() - 1));
        if meta.complete == end_lost {
            return Err(format!(
                "complete is {} with blocks {lost:?} lost",
                meta.complete
            ));
        }
    }
    Ok(outcome)
}
