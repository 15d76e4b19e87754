//! Names for native function addresses: sonda's traces record compiler-instrumented
//! functions by address ([`sonda_trace::Meta::NativeFunction`]) and the executable
//! mappings of their processes ([`sonda_trace::Meta::Mapping`]); this crate turns them
//! into the names the source has, when the trace is read.
//!
//! An address is looked up in the mappings of its process (which file, which file
//! offset), the file offset in the file's load segments (which virtual address), and
//! that address among the file's function symbols (`.symtab`, a separate debug file,
//! `.dynsym`), read with the `object` crate. C++ and Rust names are demangled
//! (`cpp_demangle`, `rustc-demangle`). Each binary is read once per [`Symbolizer`].
//!
//! The files are read where the trace says they were mapped, so names come out right
//! when the trace is read on the machine that recorded it and the binaries are
//! unchanged. A function that cannot be named is labelled by its address, with its file
//! and file offset when the mapping is known (`0x5581c2 (prog+0x11c2)`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod demangle;
mod elf;
mod functions;
mod resolve;

pub use demangle::demangle;
pub use elf::{Binary, BinaryError, Found};
pub use functions::{mappings_by_process, native_function_labels};
pub use resolve::{Mapping, Resolved, Symbolizer};
