//! The process's executable mappings, written as `Meta::Mapping` so that function
//! addresses (compiler-instrumented code) can be named when the trace is read: which
//! file, and where in it. Read with `dl_iterate_phdr`, the dynamic loader's own list of
//! loaded objects: one record per executable `PT_LOAD` segment, `start..end` its
//! addresses, `offset` the file offset mapped at `start`.
//!
//! Written when a native process starts recording (the executable and every library
//! loaded with it). Libraries loaded later (`dlopen`) are the collector's to add: it
//! reads `/proc/<pid>/maps` when a function address falls outside every mapping it
//! knows of (`collector/src/agent/maps.rs`).

use std::ffi::{c_int, c_void, CStr};
use std::path::PathBuf;

use sonda_trace::{Meta, Pid};

use crate::{buffers, meta};

/// One executable segment of a loaded object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First address.
    pub start: u64,
    /// First address after it.
    pub end: u64,
    /// File offset mapped at `start`.
    pub offset: u64,
    /// The object's file (absolute).
    pub path: String,
}

/// Every executable segment of every object loaded now (the vDSO, which has no file,
/// left out).
pub fn loaded() -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    // SAFETY: `each` matches the callback type and only reads the info the loader
    // passes for the duration of the call; `out` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut out as *mut Vec<Segment>).cast()) };
    out
}

unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
    // No panic may unwind into the loader.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the loader passes a valid info for this call and `data` is the Vec
        // given to dl_iterate_phdr.
        let (info, out) = unsafe { (&*info, &mut *data.cast::<Vec<Segment>>()) };
        let Some(path) = object_path(info.dlpi_name) else {
            return;
        };
        if info.dlpi_phdr.is_null() {
            return;
        }
        // SAFETY: the loader's program header table has dlpi_phnum entries.
        let phdrs =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        for ph in phdrs {
            if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 && ph.p_memsz > 0 {
                let start = info.dlpi_addr.wrapping_add(ph.p_vaddr);
                out.push(Segment {
                    start,
                    end: start.wrapping_add(ph.p_memsz),
                    offset: ph.p_offset,
                    path: path.clone(),
                });
            }
        }
    }));
    0
}

/// The file of a loaded object: its name as the loader has it (absolute for libraries
/// found through the search path), made absolute; the executable (empty name) is
/// `/proc/self/exe`'s target. `None` for objects without a file (the vDSO).
fn object_path(name: *const std::ffi::c_char) -> Option<String> {
    let name = if name.is_null() {
        ""
    } else {
        // SAFETY: the loader's names are NUL-terminated strings.
        unsafe { CStr::from_ptr(name) }.to_str().ok()?
    };
    let path = if name.is_empty() {
        std::fs::read_link("/proc/self/exe").ok()?
    } else {
        let p = PathBuf::from(name);
        if !p.exists() {
            return None; // linux-vdso.so.1
        }
        p.canonicalize().unwrap_or(p)
    };
    Some(path.to_string_lossy().into_owned())
}

/// Writes a `Meta::Mapping` for every executable segment loaded now.
pub fn publish() -> usize {
    let pid = Pid(buffers::pid());
    let segments = loaded();
    for s in &segments {
        meta::write(&Meta::Mapping {
            pid,
            start: s.start,
            end: s.end,
            offset: s.offset,
            path: s.path.clone(),
        });
    }
    segments.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_test_binary_and_libc_with_the_addresses_of_their_code() {
        let segments = loaded();
        let here = publish as *const () as usize as u64;
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let own = segments
            .iter()
            .find(|s| (s.start..s.end).contains(&here))
            .expect("a segment holds this function");
        assert_eq!(own.path, exe.to_string_lossy());
        // The file offset of this function lies inside the file.
        let file_len = std::fs::metadata(&exe).unwrap().len();
        assert!(here - own.start + own.offset < file_len);
        let strlen = libc::strlen as *const () as usize as u64;
        assert!(segments
            .iter()
            .any(|s| (s.start..s.end).contains(&strlen) && s.path.contains("libc")));
        assert!(segments.iter().all(|s| !s.path.contains("vdso")));
    }
}
