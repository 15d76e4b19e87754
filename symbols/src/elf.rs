//! One binary's function symbols and load segments, read with the `object` crate.
//!
//! Symbols come from `.symtab` when the file has one, else from its separate debug
//! file (found by build id under `/usr/lib/debug/.build-id/`, or by `.gnu_debuglink`
//! next to it or under `/usr/lib/debug`), and from `.dynsym` in any case. Only function
//! (text) symbols are kept, sorted by address; of several names at one address the
//! global one wins over weak and local ones (then the shortest, then the first in
//! byte order), so that the name is stable whatever the order in the file.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// Why a binary could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum BinaryError {
    /// The file could not be read (gone since the recording, or no permission).
    Io(std::io::Error),
    /// It is not an object file `object` can parse.
    Parse(String),
}

impl std::fmt::Display for BinaryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BinaryError::Io(e) => write!(f, "{e}"),
            BinaryError::Parse(e) => write!(f, "not a readable object file: {e}"),
        }
    }
}

impl std::error::Error for BinaryError {}

/// A load segment: file bytes `offset..offset + size` are mapped at virtual address
/// `vaddr` (before the load bias).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    offset: u64,
    size: u64,
    vaddr: u64,
}

/// A function symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Symbol {
    vaddr: u64,
    /// 0 when the file does not say.
    size: u64,
    name: String,
    /// Lower ranks win among symbols at one address.
    rank: u8,
}

/// The function symbols of one binary.
#[derive(Debug)]
pub struct Binary {
    segments: Vec<Segment>,
    symbols: Vec<Symbol>,
}

/// A symbol found for an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found<'a> {
    /// The raw (mangled) name.
    pub name: &'a str,
    /// How far into the function the address is.
    pub offset: u64,
}

impl Binary {
    /// Reads the binary at `path` (and its separate debug file, if it has no `.symtab`).
    pub fn open(path: &Path) -> Result<Binary, BinaryError> {
        let data = std::fs::read(path).map_err(BinaryError::Io)?;
        let file = object::File::parse(&*data).map_err(|e| BinaryError::Parse(e.to_string()))?;
        let segments = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                Segment {
                    offset,
                    size,
                    vaddr: s.address(),
                }
            })
            .collect();
        let mut symbols = Vec::new();
        collect(file.symbols(), &mut symbols);
        collect(file.dynamic_symbols(), &mut symbols);
        if file.symbol_table().is_none() {
            if let Some(debug) = debug_file(path, &file) {
                if let Ok(bytes) = std::fs::read(&debug) {
                    if let Ok(dbg) = object::File::parse(&*bytes) {
                        collect(dbg.symbols(), &mut symbols);
                    }
                }
            }
        }
        symbols.sort_by(|a, b| {
            (a.vaddr, a.rank, a.name.len(), &a.name).cmp(&(b.vaddr, b.rank, b.name.len(), &b.name))
        });
        symbols.dedup_by(|later, first| later.vaddr == first.vaddr);
        Ok(Binary { segments, symbols })
    }

    /// The virtual address (as the file's symbols use) of file offset `offset`: inside
    /// a load segment, else `None`.
    pub fn vaddr_of_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| (s.offset..s.offset + s.size).contains(&offset))
            .map(|s| offset - s.offset + s.vaddr)
    }

    /// The function symbol holding virtual address `vaddr`.
    pub fn symbol_at(&self, vaddr: u64) -> Option<Found<'_>> {
        let i = self.symbols.partition_point(|s| s.vaddr <= vaddr);
        let s = &self.symbols[i.checked_sub(1)?];
        let offset = vaddr - s.vaddr;
        if s.size > 0 && offset >= s.size {
            return None;
        }
        // A symbol without size only names its own address.
        if s.size == 0 && offset != 0 {
            return None;
        }
        Some(Found {
            name: &s.name,
            offset,
        })
    }

    /// Number of function symbols.
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Whether the binary has no function symbol.
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }
}

fn collect<'d, 'f>(syms: impl Iterator<Item = impl ObjectSymbol<'d>>, out: &mut Vec<Symbol>)
where
    'd: 'f,
{
    for s in syms {
        if s.kind() != SymbolKind::Text || !s.is_definition() || s.address() == 0 {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        if name.is_empty() {
            continue;
        }
        let rank = if s.is_global() {
            0
        } else if s.is_weak() {
            1
        } else {
            2
        };
        out.push(Symbol {
            vaddr: s.address(),
            size: s.size(),
            name: name.to_string(),
            rank,
        });
    }
}

/// Where the separate debug file of `path` is, if installed: by build id, else by
/// `.gnu_debuglink` (next to the file, in its `.debug/`, or under `/usr/lib/debug`).
fn debug_file(path: &Path, file: &object::File<'_>) -> Option<PathBuf> {
    if let Ok(Some(id)) = file.build_id() {
        if id.len() > 1 {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let p = PathBuf::from(format!(
                "/usr/lib/debug/.build-id/{}/{}.debug",
                &hex[..2],
                &hex[2..]
            ));
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let (name, _crc) = file.gnu_debuglink().ok()??;
    let name = std::str::from_utf8(name).ok()?;
    let dir = path.parent()?;
    let candidates = [
        dir.join(name),
        dir.join(".debug").join(name),
        Path::new("/usr/lib/debug")
            .join(dir.strip_prefix("/").unwrap_or(dir))
            .join(name),
    ];
    candidates.into_iter().find(|p| p.is_file() && p != path)
}
