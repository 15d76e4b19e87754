//! The file layout: a file header, then blocks. Each block has a fixed header with a
//! CRC-32 over header and payload, so a reader knows exactly where valid data ends:
//! a recording killed mid-write leaves at most one partial block at the end, which the
//! reader reports and ignores.

use crate::codec::Encoding;
use crate::le;

/// The first 8 bytes of every trace file.
pub const FILE_MAGIC: &[u8; 8] = b"SONDATRC";
/// The format's major version: readers refuse majors they do not know. Major 2 added
/// the compact encoding of events blocks (`Encoding::Compact`, header byte 5), which
/// a reader of major 1 would take for damage. Major 3 lets a switch carry its
/// switch-out's CPU-time charge (`Event::Switch`'s `charge`): a reader of major 2
/// would skip those trailing fields and lose the charge without a word. Major 4 lets a
/// wakeup carry its waking (`Event::Wakeup`'s `waking`), for the same reason.
pub const MAJOR: u16 = 4;
/// The oldest major version this reader reads (every 1.x file reads as before).
pub const OLDEST_MAJOR: u16 = 1;
/// The format's minor version: adds record kinds, and fields at the end of a record's
/// body, only; older readers skip them. 4.0 holds every record kind of 3.0.
pub const MINOR: u16 = 0;
/// Size of the file header: magic, major, minor, flags.
pub const FILE_HEADER_LEN: usize = 16;

/// The first 4 bytes of every block.
pub const BLOCK_MAGIC: &[u8; 4] = b"BLK1";
/// Size of a block header.
pub const BLOCK_HEADER_LEN: usize = 40;
/// Largest payload a reader accepts (a guard against corrupt lengths).
pub const MAX_PAYLOAD: u32 = 64 << 20;

/// What a block holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BlockKind {
    /// Metadata records.
    Meta,
    /// Timed records in time order; every record's time is at or after the last record
    /// of the previous events block.
    Events,
    /// The end of a complete recording: final counters. Nothing follows it.
    End,
}

impl BlockKind {
    fn code(self) -> u8 {
        match self {
            BlockKind::Meta => 1,
            BlockKind::Events => 2,
            BlockKind::End => 3,
        }
    }
    fn from_code(code: u8) -> Option<BlockKind> {
        match code {
            1 => Some(BlockKind::Meta),
            2 => Some(BlockKind::Events),
            3 => Some(BlockKind::End),
            _ => None,
        }
    }
}

/// A decoded block header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BlockHeader {
    /// What the payload holds.
    pub kind: BlockKind,
    /// Payload length in bytes.
    pub len: u32,
    /// CRC-32 of the header (with this field as zero) and the payload.
    pub crc: u32,
    /// How the records of an events block are encoded (header byte 5: 0 fixed, 1
    /// compact); [`Encoding::Fixed`] for other kinds.
    pub encoding: Encoding,
    /// Number of records in the payload.
    pub count: u32,
    /// Time of the first record (events blocks), else 0.
    pub first: u64,
    /// Time of the last record (events blocks), else 0.
    pub last: u64,
}

/// The minor version of a major-1 file (written with [`Encoding::Fixed`] only): 5 adds
/// what 2.1 adds to 2.0 (`CpuTime`'s writer), which readers of 1.4 ignore.
pub const MINOR_OF_1: u16 = 5;

/// Encodes a file header.
pub fn file_header() -> [u8; FILE_HEADER_LEN] {
    file_header_for(Encoding::Compact)
}

/// Encodes the header of a file whose events blocks are in `encoding`: 3.0 for compact
/// ones, 1.5 for fixed ones (which every reader of major 1 reads).
pub fn file_header_for(encoding: Encoding) -> [u8; FILE_HEADER_LEN] {
    let (major, minor) = match encoding {
        Encoding::Compact => (MAJOR, MINOR),
        Encoding::Fixed => (OLDEST_MAJOR, MINOR_OF_1),
    };
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(FILE_MAGIC);
    le::put_u16(&mut h, 8, major);
    le::put_u16(&mut h, 10, minor);
    h
}

/// Encodes a block header for `payload` in the fixed encoding, computing its CRC.
pub fn block_header(
    kind: BlockKind,
    count: u32,
    first: u64,
    last: u64,
    payload: &[u8],
) -> [u8; BLOCK_HEADER_LEN] {
    block_header_encoded(kind, Encoding::Fixed, count, first, last, payload)
}

/// Encodes a block header for `payload`, whose records are in `encoding`.
pub fn block_header_encoded(
    kind: BlockKind,
    encoding: Encoding,
    count: u32,
    first: u64,
    last: u64,
    payload: &[u8],
) -> [u8; BLOCK_HEADER_LEN] {
    let mut h = [0u8; BLOCK_HEADER_LEN];
    h[..4].copy_from_slice(BLOCK_MAGIC);
    h[4] = kind.code();
    h[5] = match encoding {
        Encoding::Fixed => 0,
        Encoding::Compact => 1,
    };
    le::put_u32(&mut h, 8, payload.len() as u32);
    le::put_u32(&mut h, 16, count);
    le::put_u64(&mut h, 24, first);
    le::put_u64(&mut h, 32, last);
    let crc = checksum(&h, payload);
    le::put_u32(&mut h, 12, crc);
    h
}

fn checksum(header: &[u8; BLOCK_HEADER_LEN], payload: &[u8]) -> u32 {
    let mut hasher = header_hasher(header);
    hasher.update(payload);
    hasher.finalize()
}

/// The CRC state after a block's header (with its CRC field as zero): the checksum is
/// this state continued over the payload.
pub(crate) fn header_hasher(header: &[u8; BLOCK_HEADER_LEN]) -> crc32fast::Hasher {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[..12]);
    hasher.update(&[0u8; 4]);
    hasher.update(&header[16..]);
    hasher
}

/// Why a block header does not parse.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HeaderFault {
    /// The block does not start with [`BLOCK_MAGIC`].
    BadMagic,
    /// The kind code is unknown.
    BadKind(u8),
    /// The length exceeds [`MAX_PAYLOAD`].
    TooLong(u32),
    /// The encoding code is unknown.
    BadEncoding(u8),
}

/// Decodes a block header (without checking the CRC: see [`verify`]).
pub fn parse_block_header(h: &[u8; BLOCK_HEADER_LEN]) -> Result<BlockHeader, HeaderFault> {
    if &h[..4] != BLOCK_MAGIC {
        return Err(HeaderFault::BadMagic);
    }
    let kind = BlockKind::from_code(h[4]).ok_or(HeaderFault::BadKind(h[4]))?;
    let len = le::u32_at(h, 8);
    if len > MAX_PAYLOAD {
        return Err(HeaderFault::TooLong(len));
    }
    let encoding = match h[5] {
        0 => Encoding::Fixed,
        1 if kind == BlockKind::Events => Encoding::Compact,
        code => return Err(HeaderFault::BadEncoding(code)),
    };
    Ok(BlockHeader {
        kind,
        encoding,
        len,
        crc: le::u32_at(h, 12),
        count: le::u32_at(h, 16),
        first: le::u64_at(h, 24),
        last: le::u64_at(h, 32),
    })
}

/// Whether `payload` matches the CRC of its header.
pub fn verify(h: &[u8; BLOCK_HEADER_LEN], payload: &[u8]) -> bool {
    checksum(h, payload) == le::u32_at(h, 12)
}
