//! Reads a trace block by block, with memory bounded by one block (and a read). Damage
//! is reported with its byte offset and skipped: the reader goes on at the next intact
//! block ([`crate::finder`]), and lists what it skipped ([`Damage`]).

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::block::{
    BlockHeader, BlockKind, BLOCK_HEADER_LEN, FILE_HEADER_LEN, FILE_MAGIC, MAJOR, OLDEST_MAJOR,
};
use crate::codec::{DecodeError, Item, Items};
use crate::damage::{Damage, SkippedRegion};
use crate::finder::{BlockFinder, Found, Gap};
use crate::le;

/// Why a trace cannot be read (further).
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be read.
    Io(io::Error),
    /// The file is not a sonda trace.
    NotATrace,
    /// The file is a trace of an unsupported major version.
    Version {
        /// The file's major version.
        major: u16,
        /// The file's minor version.
        minor: u16,
    },
    /// The file ends inside a block: the recording was cut (killed, or disk full).
    Truncated {
        /// Where the incomplete block starts.
        offset: u64,
    },
    /// A block is damaged: its header, checksum or records do not hold together.
    Corrupt {
        /// Where the damaged block starts.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotATrace => write!(f, "not a sonda trace (no SONDATRC header)"),
            ReadError::Version { major, minor } => {
                write!(
                    f,
                    "trace format {major}.{minor} is not supported (this sonda reads {OLDEST_MAJOR}.x to {MAJOR}.x)"
                )
            }
            ReadError::Truncated { offset } => write!(
                f,
                "trace is cut short at byte {offset} (an incomplete block)"
            ),
            ReadError::Corrupt { offset, reason } => {
                write!(f, "trace is damaged at byte {offset}: {reason}")
            }
        }
    }
}

impl std::error::Error for ReadError {}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        ReadError::Io(e)
    }
}

/// One block read from a trace.
#[derive(Debug)]
pub struct Block {
    /// The block's header.
    pub header: BlockHeader,
    /// Byte offset of the block in the file.
    pub offset: u64,
    /// The raw payload (decode it with [`Block::items`]).
    pub payload: Vec<u8>,
}

impl Block {
    /// Decodes the payload's records.
    pub fn items(&self) -> Items<'_> {
        Items::with(&self.payload, self.header.encoding, self.header.first)
    }

    /// Turns a payload decoding error into a [`ReadError`] with its file offset.
    pub fn corrupt(&self, e: DecodeError) -> ReadError {
        ReadError::Corrupt {
            offset: self.offset + BLOCK_HEADER_LEN as u64 + e.offset as u64,
            reason: e.what.to_string(),
        }
    }
}

/// Sequential block reader. It goes on after damage: a damaged stretch is reported once,
/// as a [`ReadError::Corrupt`] from [`TraceReader::next_block`] (and a region of
/// [`TraceReader::damage`]), and the next call returns the next intact block.
pub struct TraceReader<R> {
    finder: BlockFinder<R>,
    /// The intact block found after a damaged stretch, returned after its error.
    held: Option<Block>,
    /// No block comes any more: end of the file, end block, truncation or I/O error.
    stopped: bool,
    ended: bool,
    /// Time of the last record of the events blocks returned so far.
    last_time: Option<u64>,
    damage: Damage,
}

impl TraceReader<File> {
    /// Opens a trace file and checks its header.
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        TraceReader::new(File::open(path)?)
    }
}

impl<R: Read> TraceReader<R> {
    /// Reads and checks the file header. The reader buffers its input itself.
    pub fn new(mut input: R) -> Result<Self, ReadError> {
        let mut h = [0u8; FILE_HEADER_LEN];
        match read_full(&mut input, &mut h)? {
            n if n < FILE_HEADER_LEN => return Err(ReadError::NotATrace),
            _ => {}
        }
        if &h[..8] != FILE_MAGIC {
            return Err(ReadError::NotATrace);
        }
        let major = le::u16_at(&h, 8);
        let minor = le::u16_at(&h, 10);
        if !(OLDEST_MAJOR..=MAJOR).contains(&major) {
            return Err(ReadError::Version { major, minor });
        }
        Ok(TraceReader {
            finder: BlockFinder::new(input, FILE_HEADER_LEN as u64),
            held: None,
            stopped: false,
            ended: false,
            last_time: None,
            damage: Damage::default(),
        })
    }

    /// Whether the end block was read: the recording finished cleanly.
    pub fn complete(&self) -> bool {
        self.ended
    }

    /// What was skipped so far: damaged stretches, and a truncated end.
    pub fn damage(&self) -> &Damage {
        &self.damage
    }

    /// Reads the next intact block; `Ok(None)` after the last one (the end of the file,
    /// or the end block).
    ///
    /// Damage does not end the reading: a damaged stretch (a header that does not parse,
    /// a checksum that does not match, bytes between blocks) is returned once as
    /// [`ReadError::Corrupt`] at its first byte, and the next call returns the next
    /// intact block after it. An intact events block that starts before the last record
    /// of the events blocks returned (a block copied or written out of place) is refused
    /// the same way, so that the blocks returned stay in time order. The file ending
    /// inside a block is [`ReadError::Truncated`], and an I/O error is returned as is;
    /// both are final.
    pub fn next_block(&mut self) -> Result<Option<Block>, ReadError> {
        let block = match self.held.take() {
            Some(block) => block,
            None if self.stopped => return Ok(None),
            None => match self.finder.next() {
                Err(e) => {
                    self.stopped = true;
                    return Err(e.into());
                }
                Ok(Found::Block { block, gap: None }) => block,
                Ok(Found::Block {
                    block,
                    gap: Some(gap),
                }) => {
                    self.held = Some(block);
                    return Err(self.skipped(gap, false));
                }
                Ok(Found::End { gap: None, .. }) => {
                    self.stopped = true;
                    return Ok(None);
                }
                Ok(Found::End {
                    gap: Some(gap),
                    truncated,
                }) => {
                    self.stopped = true;
                    if truncated {
                        self.damage.truncated = Some(gap.offset);
                        return Err(ReadError::Truncated { offset: gap.offset });
                    }
                    return Err(self.skipped(gap, true));
                }
            },
        };
        let header = &block.header;
        if header.kind == BlockKind::Events {
            if let Some(last) = self.last_time.filter(|&last| header.first < last) {
                let region = SkippedRegion {
                    offset: block.offset,
                    bytes: BLOCK_HEADER_LEN as u64 + u64::from(header.len),
                    blocks: Some(1),
                    records: Some(u64::from(header.count)),
                    reason: format!(
                        "an intact block goes back in time (its first record at {} is before \
                         {last}, read before it), refused",
                        header.first
                    ),
                };
                return Err(self.note(region));
            }
            self.last_time = Some(self.last_time.unwrap_or(0).max(header.last));
        }
        if header.kind == BlockKind::End {
            self.ended = true;
            self.stopped = true;
        }
        Ok(Some(block))
    }

    /// Records a gap the finder skipped, as a region and as the error to return.
    fn skipped(&mut self, gap: Gap, to_end: bool) -> ReadError {
        let whither = if to_end {
            "nothing intact follows"
        } else {
            "skipped to the next intact block"
        };
        let error = ReadError::Corrupt {
            offset: gap.offset,
            reason: format!("{}; {} bytes {whither}", gap.reason, gap.bytes),
        };
        self.damage.regions.push(SkippedRegion {
            offset: gap.offset,
            bytes: gap.bytes,
            blocks: gap.blocks,
            records: gap.records,
            reason: gap.reason,
        });
        error
    }

    /// Adds a skipped region; returns the error that reports it.
    pub(crate) fn note(&mut self, region: SkippedRegion) -> ReadError {
        let error = ReadError::Corrupt {
            offset: region.offset,
            reason: format!("{}; {} bytes skipped", region.reason, region.bytes),
        };
        self.damage.regions.push(region);
        error
    }
}

fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Decodes all items of a block, turning decoding errors into [`ReadError`]s.
pub fn block_items(block: &Block) -> impl Iterator<Item = Result<Item, ReadError>> + '_ {
    block.items().map(move |r| r.map_err(|e| block.corrupt(e)))
}
