//! Address → function: which mapping of its process holds the address, which file that
//! is and where in it, and which symbol of the file is there. Each binary is read once
//! ([`Symbolizer`] keeps them, and remembers the ones that could not be read).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::demangle::demangle;
use crate::elf::Binary;

/// One executable mapping of a process (`Meta::Mapping`): `start..end` maps the file
/// `path` from file offset `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// First address after it.
    pub end: u64,
    /// File offset mapped at `start`.
    pub offset: u64,
    /// The mapped file.
    pub path: String,
}

/// What an address is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// A function symbol of a mapped file.
    Function {
        /// The source-level (demangled) name.
        name: String,
        /// The file's name (no directory).
        module: String,
        /// How far into the function the address is (0 for an entry).
        offset: u64,
    },
    /// In a mapped file, but no symbol holds it (a stripped or vanished file).
    InModule {
        /// The file's name (no directory).
        module: String,
        /// The file offset of the address.
        file_offset: u64,
    },
    /// No known mapping holds it.
    Unknown,
}

impl Resolved {
    /// A one-line label for address `addr`: the function's name (with `+0x..` when the
    /// address is inside it); else the address with the file and its offset; else the
    /// bare address.
    pub fn label(&self, addr: u64) -> String {
        match self {
            Resolved::Function {
                name, offset: 0, ..
            } => name.clone(),
            Resolved::Function { name, offset, .. } => format!("{name}+0x{offset:x}"),
            Resolved::InModule {
                module,
                file_offset,
            } => format!("0x{addr:x} ({module}+0x{file_offset:x})"),
            Resolved::Unknown => format!("0x{addr:x}"),
        }
    }
}

/// Resolves addresses, reading each binary once.
#[derive(Default)]
pub struct Symbolizer {
    binaries: HashMap<String, Option<Arc<Binary>>>,
    /// Binaries that could not be read, with why (one line each).
    failures: Vec<String>,
}

impl Symbolizer {
    /// No binary read yet.
    pub fn new() -> Symbolizer {
        Symbolizer::default()
    }

    /// What `addr` is, given the executable mappings of its process.
    pub fn resolve(&mut self, mappings: &[Mapping], addr: u64) -> Resolved {
        let Some(m) = mappings.iter().find(|m| (m.start..m.end).contains(&addr)) else {
            return Resolved::Unknown;
        };
        let file_offset = addr - m.start + m.offset;
        let module = Path::new(&m.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| m.path.clone());
        let found = self.binary(&m.path).and_then(|b| {
            let vaddr = b.vaddr_of_offset(file_offset)?;
            b.symbol_at(vaddr).map(|f| (demangle(f.name), f.offset))
        });
        match found {
            Some((name, offset)) => Resolved::Function {
                name,
                module,
                offset,
            },
            None => Resolved::InModule {
                module,
                file_offset,
            },
        }
    }

    /// The binary at `path`, read on first use.
    fn binary(&mut self, path: &str) -> Option<Arc<Binary>> {
        if let Some(b) = self.binaries.get(path) {
            return b.clone();
        }
        let b = match Binary::open(Path::new(path)) {
            Ok(b) => Some(Arc::new(b)),
            Err(e) => {
                self.failures.push(format!("{path}: {e}"));
                None
            }
        };
        self.binaries.insert(path.to_string(), b.clone());
        b
    }

    /// The binaries that could not be read, with why.
    pub fn failures(&self) -> &[String] {
        &self.failures
    }
}
