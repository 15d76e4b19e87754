//! Finds the intact blocks in a trace's byte stream, and the next intact block after
//! damage.
//!
//! An intact block is a [`BLOCK_MAGIC`] whose 40-byte header parses and whose CRC
//! matches header and payload. After a damaged block the next one may start anywhere,
//! and a `BLK1` inside a payload (a string, a time) looks like a block: only the CRC can
//! tell. Checking every such candidate by itself would cost its whole length each,
//! quadratic in the worst case, so the finder checks all candidates in one pass: one
//! running CRC over the stream gives the CRC of any stretch from the running values at
//! its two ends (CRC-32 is linear: `crc(a ‖ b) = crc(a)·x^(8|b|) ⊕ crc(b)`, which
//! `crc32fast`'s `combine` computes). So every byte is read once, hashed once, searched
//! for the magic once, and a candidate costs a few hundred operations when it ends.
//!
//! The stream is read forward only, into a window that holds the bytes from the
//! earliest unresolved candidate on (at most one block, [`MAX_PAYLOAD`] plus a read).
//! The first candidate to verify (the one that ends first) is the next block; in an
//! undamaged file that is always the block at the expected place. At most
//! [`MAX_CANDIDATES`] are followed at once; beyond, the ones that end last are given
//! up (only a file built to defeat the reader has that many).
//!
//! [`MAX_PAYLOAD`]: crate::block::MAX_PAYLOAD

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read};

use crc32fast::Hasher;
use memchr::memmem;

use crate::block::{
    header_hasher, parse_block_header, BlockHeader, BlockKind, HeaderFault, BLOCK_HEADER_LEN,
    BLOCK_MAGIC,
};
use crate::reader::Block;

/// Bytes asked of the input at a time.
const READ: usize = 256 << 10;
/// Candidates followed at once (about 100 bytes each).
const MAX_CANDIDATES: usize = 1 << 16;
const HEADER: u64 = BLOCK_HEADER_LEN as u64;

/// Bytes skipped before a block (or the end of the file).
#[derive(Debug)]
pub(crate) struct Gap {
    pub offset: u64,
    pub bytes: u64,
    pub reason: String,
    /// Blocks and timed records of the skipped headers, when they chain to the end.
    pub blocks: Option<u64>,
    pub records: Option<u64>,
}

/// What [`BlockFinder::next`] found.
#[derive(Debug)]
pub(crate) enum Found {
    /// The next intact block, after the bytes skipped to reach it if any.
    Block { block: Block, gap: Option<Gap> },
    /// The end of the input, after the bytes no intact block follows, if any;
    /// `truncated` when they are the start of a block the file ends inside.
    End { gap: Option<Gap>, truncated: bool },
}

/// A header whose payload is not checked yet.
struct Candidate {
    header: BlockHeader,
    /// CRC of the header (CRC field zero) XOR the running CRC where the payload starts:
    /// the block's CRC is `k·x^(8·len) ⊕ running CRC where the payload ends`.
    k: u32,
}

/// What is at the place the next block should start.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum AtNext {
    Unseen,
    NoMagic,
    Fault(HeaderFault),
    Header { len: u32 },
    Mismatch,
}

/// The headers from the expected place on, each length leading to the next header.
#[derive(Clone, Copy)]
struct Chain {
    /// Where the last header's block ends.
    next: u64,
    blocks: u64,
    records: u64,
    /// `next`, `blocks` and `records` before the last header joined: the last header may
    /// be the intact block that ends the gap.
    before: (u64, u64, u64),
}

/// Reads a trace's blocks from a stream, skipping damage (see the module's doc).
pub(crate) struct BlockFinder<R> {
    input: R,
    /// The stream's bytes from `base` on.
    win: Vec<u8>,
    base: u64,
    eof: bool,
    /// Where the next block should start: the end of the last one found.
    next: u64,
    at_next: AtNext,
    chain: Option<Chain>,
    /// Candidates start at or after this offset (those before are found).
    scan_from: u64,
    /// Unchecked candidates by (end, start): the first one ends first.
    pending: BTreeMap<(u64, u64), Candidate>,
    starts: BTreeSet<u64>,
    /// The running CRC and the offset it has reached, while candidates are pending.
    hasher: Option<(Hasher, u64)>,
    magic: memmem::Finder<'static>,
}

impl<R: Read> BlockFinder<R> {
    /// Finds blocks in `input`, whose first byte is at offset `start` of the file.
    pub fn new(input: R, start: u64) -> BlockFinder<R> {
        BlockFinder {
            input,
            win: Vec::new(),
            base: start,
            eof: false,
            next: start,
            at_next: AtNext::Unseen,
            chain: None,
            scan_from: start,
            pending: BTreeMap::new(),
            starts: BTreeSet::new(),
            hasher: None,
            magic: memmem::Finder::new(BLOCK_MAGIC),
        }
    }

    /// The next intact block, or the end of the input.
    pub fn next(&mut self) -> io::Result<Found> {
        loop {
            let avail = self.base + self.win.len() as u64;
            let first_end = self.pending.keys().next().map(|&(end, _)| end);
            // Candidates whose header lies before the first end: one of them may end
            // sooner still.
            let limit = first_end.map_or(avail, |end| end.min(avail));
            if limit >= self.scan_from + HEADER {
                let from = (self.scan_from - self.base) as usize;
                let to = (limit - self.base) as usize - (BLOCK_HEADER_LEN - BLOCK_MAGIC.len());
                match self.magic.find(&self.win[from..to]) {
                    Some(at) => {
                        self.candidate(self.scan_from + at as u64);
                        continue;
                    }
                    None => {
                        self.scan_from = limit - (HEADER - 1);
                        self.note_no_magic();
                    }
                }
            }
            if let Some(end) = first_end.filter(|&end| end <= avail) {
                if let Some(found) = self.resolve(end) {
                    return Ok(found);
                }
                continue;
            }
            if self.eof {
                return Ok(self.end(avail));
            }
            self.fill()?;
        }
    }

    fn note_no_magic(&mut self) {
        if self.at_next == AtNext::Unseen && self.scan_from > self.next {
            self.at_next = AtNext::NoMagic;
        }
    }

    /// Takes the `BLK1` at `at` as a candidate if its header parses.
    fn candidate(&mut self, at: u64) {
        self.scan_from = at + 1;
        let i = (at - self.base) as usize;
        let mut raw = [0u8; BLOCK_HEADER_LEN];
        raw.copy_from_slice(&self.win[i..i + BLOCK_HEADER_LEN]);
        match parse_block_header(&raw) {
            Err(fault) => {
                if at == self.next {
                    self.at_next = AtNext::Fault(fault);
                }
            }
            Ok(header) => {
                let start = at + HEADER;
                let end = start + u64::from(header.len);
                let records = match header.kind {
                    BlockKind::Events => u64::from(header.count),
                    _ => 0,
                };
                if at == self.next {
                    self.at_next = AtNext::Header { len: header.len };
                    self.chain = Some(Chain {
                        next: end,
                        blocks: 1,
                        records,
                        before: (at, 0, 0),
                    });
                } else if let Some(chain) = self.chain.as_mut().filter(|c| c.next == at) {
                    chain.before = (chain.next, chain.blocks, chain.records);
                    chain.next = end;
                    chain.blocks += 1;
                    chain.records += records;
                }
                let k = header_hasher(&raw).finalize() ^ self.crc_at(start);
                self.pending.insert((end, at), Candidate { header, k });
                self.starts.insert(at);
                if self.pending.len() > MAX_CANDIDATES {
                    if let Some(((_, start), _)) = self.pending.pop_last() {
                        self.starts.remove(&start);
                    }
                }
            }
        }
        self.note_no_magic();
    }

    /// The running CRC up to `offset` (not before where it has reached, not past the
    /// window).
    fn crc_at(&mut self, offset: u64) -> u32 {
        match &mut self.hasher {
            Some((hasher, at)) => {
                let from = (*at - self.base) as usize;
                let to = (offset - self.base) as usize;
                hasher.update(&self.win[from..to]);
                *at = offset;
                hasher.clone().finalize()
            }
            None => {
                self.hasher = Some((Hasher::new(), offset));
                0
            }
        }
    }

    /// Checks the candidate that ends first (at `end`): the next block if it verifies.
    fn resolve(&mut self, end: u64) -> Option<Found> {
        let ((_, at), candidate) = self.pending.pop_first()?;
        self.starts.remove(&at);
        let running = self.crc_at(end);
        let len = u64::from(candidate.header.len);
        let crc = if len == 0 {
            candidate.k ^ running
        } else {
            let mut shifted = Hasher::new_with_initial_len(candidate.k, 0);
            shifted.combine(&Hasher::new_with_initial_len(running, len));
            shifted.finalize()
        };
        if crc != candidate.header.crc {
            if at == self.next {
                self.at_next = AtNext::Mismatch;
            }
            if self.pending.is_empty() {
                self.hasher = None;
            }
            return None;
        }
        let i = (at - self.base) as usize + BLOCK_HEADER_LEN;
        let block = Block {
            header: candidate.header,
            offset: at,
            payload: self.win[i..(end - self.base) as usize].to_vec(),
        };
        let gap = (at > self.next).then(|| self.gap(at));
        // Every other candidate starts before `end` (inside this block or before it).
        self.pending.clear();
        self.starts.clear();
        self.hasher = None;
        self.next = end;
        self.scan_from = end;
        self.at_next = AtNext::Unseen;
        self.chain = None;
        Some(Found::Block { block, gap })
    }

    /// The bytes from the expected place to `to`, skipped.
    fn gap(&self, to: u64) -> Gap {
        let reason = match self.at_next {
            AtNext::Unseen | AtNext::NoMagic | AtNext::Fault(HeaderFault::BadMagic) => {
                "no block starts here".to_string()
            }
            AtNext::Fault(HeaderFault::BadKind(k)) => format!("unknown block kind {k}"),
            AtNext::Fault(HeaderFault::BadEncoding(e)) => format!("unknown record encoding {e}"),
            AtNext::Fault(HeaderFault::TooLong(len)) => {
                format!("block length {len} is implausible")
            }
            AtNext::Header { len } if self.next + HEADER + u64::from(len) > to => {
                format!("block length {len} runs past the next intact block")
            }
            AtNext::Header { .. } | AtNext::Mismatch => "checksum mismatch".to_string(),
        };
        let (blocks, records) = match self.chain {
            Some(chain) if chain.next == to => (Some(chain.blocks), Some(chain.records)),
            Some(Chain {
                before: (next, blocks, records),
                ..
            }) if next == to => (Some(blocks), Some(records)),
            _ => (None, None),
        };
        Gap {
            offset: self.next,
            bytes: to - self.next,
            reason,
            blocks,
            records,
        }
    }

    /// The end of the input at `avail`, with what lies between the last block and it.
    fn end(&mut self, avail: u64) -> Found {
        if avail == self.next {
            return Found::End {
                gap: None,
                truncated: false,
            };
        }
        let truncated = avail - self.next < HEADER
            || matches!(self.at_next, AtNext::Header { len }
                if self.next + HEADER + u64::from(len) > avail);
        let gap = self.gap(avail);
        // Nothing more to find: the next call reports a clean end.
        self.next = avail;
        self.scan_from = avail;
        self.pending.clear();
        self.starts.clear();
        self.hasher = None;
        self.win.clear();
        self.base = avail;
        Found::End {
            gap: Some(gap),
            truncated,
        }
    }

    /// Reads more of the input, first dropping the bytes no candidate needs any more.
    fn fill(&mut self) -> io::Result<()> {
        let keep = self
            .starts
            .first()
            .map_or(self.scan_from, |&s| s.min(self.scan_from));
        let drop = (keep - self.base) as usize;
        if drop > 0 && drop >= self.win.len() / 2 {
            self.win.drain(..drop);
            self.base = keep;
        }
        // Appends without zeroing the buffer first; stops early only at the end.
        let n = (&mut self.input)
            .take(READ as u64)
            .read_to_end(&mut self.win)?;
        self.eof = n == 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::block_header;

    fn block(kind: BlockKind, payload: &[u8]) -> Vec<u8> {
        let mut b = block_header(kind, 1, 5, 6, payload).to_vec();
        b.extend_from_slice(payload);
        b
    }

    /// Each block found: offset, payload length, bytes skipped before it.
    type Blocks = Vec<(u64, usize, Option<u64>)>;
    /// The bytes after the last block: offset, length, whether a truncation.
    type Tail = Option<(u64, u64, bool)>;

    fn all(bytes: &[u8]) -> (Blocks, Tail) {
        let mut finder = BlockFinder::new(bytes, 0);
        let mut found = Vec::new();
        loop {
            match finder.next().unwrap() {
                Found::Block { block, gap } => {
                    found.push((block.offset, block.payload.len(), gap.map(|g| g.bytes)))
                }
                Found::End { gap, truncated } => {
                    return (found, gap.map(|g| (g.offset, g.bytes, truncated)));
                }
            }
        }
    }

    #[test]
    fn the_crc_of_a_stretch_comes_from_the_running_crc() {
        // A magic in a payload, a block embedded in garbage, a block after a bad one.
        let mut bytes = b"xxBLK1\x02\0\0\0\x10\0\0\0".to_vec();
        bytes.extend(block(BlockKind::Events, b"BLK1 inside the payload"));
        let good = bytes.len() as u64;
        bytes.extend(block(BlockKind::Meta, &[7; 1000]));
        let mut bad = block(BlockKind::Meta, &[8; 300]);
        bad[100] ^= 1;
        let bad_at = bytes.len() as u64;
        bytes.extend(&bad);
        let after = bytes.len() as u64;
        bytes.extend(block(BlockKind::End, b""));
        let (found, end) = all(&bytes);
        assert_eq!(
            found,
            vec![
                (14, 23, Some(14)),
                (good, 1000, None),
                (after, 0, Some(after - bad_at))
            ]
        );
        assert_eq!(end, None);
    }

    #[test]
    fn false_magics_everywhere_cost_one_pass() {
        // 4 MB of overlapping headers that parse and claim up to 64 MiB each (one
        // every 12 bytes: 350,000 candidates, more than are followed at once), between
        // two intact blocks. Checking each by itself would hash ~10^13 bytes.
        let mut bytes = block(BlockKind::Meta, b"first");
        let damage_at = bytes.len() as u64;
        for i in 0..350_000u32 {
            bytes.extend_from_slice(b"BLK1\x02\0\0\0");
            bytes.extend_from_slice(&(crate::block::MAX_PAYLOAD - i).to_le_bytes());
        }
        let after = bytes.len() as u64;
        bytes.extend(block(BlockKind::End, b"last"));
        let started = std::time::Instant::now();
        let (found, end) = all(&bytes);
        assert_eq!(
            found,
            vec![(0, 5, None), (after, 4, Some(after - damage_at))]
        );
        assert_eq!(end, None);
        // A pass over 4 MB takes a few tens of milliseconds; generous for a busy machine.
        assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
    }

    #[test]
    fn a_block_the_file_ends_inside_is_a_truncation() {
        let mut bytes = block(BlockKind::Meta, &[1; 100]);
        let whole = bytes.len() as u64;
        bytes.extend(&block(BlockKind::Meta, &[2; 100])[..70]);
        let (found, end) = all(&bytes);
        assert_eq!(found.len(), 1);
        assert_eq!(end, Some((whole, 70, true)));
    }
}
