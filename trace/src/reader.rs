//! Reads a trace block by block, with memory bounded by one block. Damage is reported
//! with the byte offset where valid data ends; everything before it stays usable.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::block::{
    parse_block_header, verify, BlockHeader, BlockKind, HeaderFault, BLOCK_HEADER_LEN,
    FILE_HEADER_LEN, FILE_MAGIC, MAJOR,
};
use crate::codec::{DecodeError, Item, Items};

/// Why a trace cannot be read (further).
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be read.
    Io(io::Error),
    /// The file is not a sonda trace.
    NotATrace,
    /// The file is a trace of an unsupported major version.
    Version { major: u16, minor: u16 },
    /// The file ends inside a block: the recording was cut (killed, or disk full).
    Truncated { offset: u64 },
    /// A block is damaged: its header, checksum or records do not hold together.
    Corrupt { offset: u64, reason: String },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotATrace => write!(f, "not a sonda trace (no SONDATRC header)"),
            ReadError::Version { major, minor } => {
                write!(
                    f,
                    "trace format {major}.{minor} is not supported (this sonda reads {MAJOR}.x)"
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
        Items::new(&self.payload)
    }

    /// Turns a payload decoding error into a [`ReadError`] with its file offset.
    pub fn corrupt(&self, e: DecodeError) -> ReadError {
        ReadError::Corrupt {
            offset: self.offset + BLOCK_HEADER_LEN as u64 + e.offset as u64,
            reason: e.what.to_string(),
        }
    }
}

/// Sequential block reader.
pub struct TraceReader<R> {
    input: R,
    offset: u64,
    done: bool,
    ended: bool,
    /// The file's length when last asked (seeking readers only).
    file_len: Option<u64>,
}

impl TraceReader<BufReader<File>> {
    /// Opens a trace file and checks its header.
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let file = File::open(path)?;
        TraceReader::new(BufReader::with_capacity(1 << 20, file))
    }
}

impl<R: Read> TraceReader<R> {
    /// Reads and checks the file header.
    pub fn new(mut input: R) -> Result<Self, ReadError> {
        let mut h = [0u8; FILE_HEADER_LEN];
        match read_full(&mut input, &mut h)? {
            n if n < FILE_HEADER_LEN => return Err(ReadError::NotATrace),
            _ => {}
        }
        if &h[..8] != FILE_MAGIC {
            return Err(ReadError::NotATrace);
        }
        let major = u16::from_le_bytes([h[8], h[9]]);
        let minor = u16::from_le_bytes([h[10], h[11]]);
        if major != MAJOR {
            return Err(ReadError::Version { major, minor });
        }
        Ok(TraceReader {
            input,
            offset: FILE_HEADER_LEN as u64,
            done: false,
            ended: false,
            file_len: None,
        })
    }

    /// Whether the end block was read: the recording finished cleanly.
    pub fn complete(&self) -> bool {
        self.ended
    }

    /// Reads the next block header; `Ok(None)` at the end of the file. After an error,
    /// returns `Ok(None)`.
    fn next_header(
        &mut self,
    ) -> Result<Option<([u8; BLOCK_HEADER_LEN], BlockHeader, u64)>, ReadError> {
        if self.done {
            return Ok(None);
        }
        let offset = self.offset;
        let mut raw = [0u8; BLOCK_HEADER_LEN];
        let n = read_full(&mut self.input, &mut raw).inspect_err(|_| self.done = true)?;
        if n == 0 {
            self.done = true;
            return Ok(None);
        }
        if n < BLOCK_HEADER_LEN {
            self.done = true;
            return Err(ReadError::Truncated { offset });
        }
        let header = parse_block_header(&raw).map_err(|fault| {
            self.done = true;
            ReadError::Corrupt {
                offset,
                reason: match fault {
                    HeaderFault::BadMagic => "no block starts here".to_string(),
                    HeaderFault::BadKind(k) => format!("unknown block kind {k}"),
                    HeaderFault::TooLong(l) => format!("block length {l} is implausible"),
                },
            }
        })?;
        Ok(Some((raw, header, offset)))
    }

    /// Reads the next block, checking its checksum.
    pub fn next_block(&mut self) -> Result<Option<Block>, ReadError> {
        let Some((raw, header, offset)) = self.next_header()? else {
            return Ok(None);
        };
        let mut payload = vec![0u8; header.len as usize];
        let n = read_full(&mut self.input, &mut payload).inspect_err(|_| self.done = true)?;
        if n < payload.len() {
            self.done = true;
            return Err(ReadError::Truncated { offset });
        }
        if !verify(&raw, &payload) {
            self.done = true;
            return Err(ReadError::Corrupt {
                offset,
                reason: "checksum mismatch".to_string(),
            });
        }
        self.offset += (BLOCK_HEADER_LEN + payload.len()) as u64;
        if header.kind == BlockKind::End {
            self.ended = true;
            self.done = true;
        }
        Ok(Some(Block {
            header,
            offset,
            payload,
        }))
    }
}

impl<R: Read + Seek> TraceReader<R> {
    /// Reads the next block if `want(kind)`, else seeks over its payload (its checksum is
    /// then not checked, but its length is: a block that runs past the end of the file
    /// is reported as truncated). Returns the header either way.
    pub fn next_block_if(
        &mut self,
        want: impl Fn(BlockKind) -> bool,
    ) -> Result<Option<(BlockHeader, Option<Block>)>, ReadError> {
        let Some((raw, header, offset)) = self.next_header()? else {
            return Ok(None);
        };
        if want(header.kind) {
            let mut payload = vec![0u8; header.len as usize];
            let n = read_full(&mut self.input, &mut payload).inspect_err(|_| self.done = true)?;
            if n < payload.len() {
                self.done = true;
                return Err(ReadError::Truncated { offset });
            }
            if !verify(&raw, &payload) {
                self.done = true;
                return Err(ReadError::Corrupt {
                    offset,
                    reason: "checksum mismatch".to_string(),
                });
            }
            self.offset += (BLOCK_HEADER_LEN + payload.len()) as u64;
            if header.kind == BlockKind::End {
                self.ended = true;
                self.done = true;
            }
            return Ok(Some((
                header,
                Some(Block {
                    header,
                    offset,
                    payload,
                }),
            )));
        }
        let end = self.offset + (BLOCK_HEADER_LEN as u64) + u64::from(header.len);
        // The file's length is asked again only when a block seems to run past it (the
        // file may have grown): a seek to the end would empty a buffered reader's buffer.
        if self.file_len.is_none_or(|len| end > len) {
            let here = self.offset + BLOCK_HEADER_LEN as u64;
            let len = self.input.seek(SeekFrom::End(0))?;
            self.input.seek(SeekFrom::Start(here))?;
            self.file_len = Some(len);
        }
        if self.file_len.is_some_and(|len| end > len) {
            self.done = true;
            return Err(ReadError::Truncated { offset });
        }
        // Relative, so that a buffered reader keeps what it holds beyond the payload.
        self.input.seek_relative(i64::from(header.len))?;
        self.offset = end;
        Ok(Some((header, None)))
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
