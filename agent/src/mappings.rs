//! The process's executable mappings, written as `Meta::Mapping` so that function
//! addresses (compiler-instrumented code) can be named when the trace is read: which
//! file, and where in it. Read with `dl_iterate_phdr`, the dynamic loader's own list of
//! loaded objects: one record per executable `PT_LOAD` segment, `start..end` its
//! addresses, `offset` the file offset mapped at `start`.
//!
//! Written when a native process starts recording (the executable and every library
//! loaded with it), and again, for objects loaded since (`dlopen`, a JVM's JNI
//! libraries), when a thread claims its slot for the C hooks: before its first function
//! record, off the hot path. The loader's count of loaded objects (`dlpi_adds`) tells
//! whether anything changed, so a claim with nothing new stops at the first object.
//! A library loaded after a thread's first record and used only by threads that
//! recorded before is the collector's to add: it reads `/proc/<pid>/maps` when a
//! function address falls outside every mapping it knows of
//! (`recorder/src/agent/maps.rs`), which works while the process lives.

use std::collections::BTreeSet;
use std::ffi::{c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::Mutex;

use sonda_trace::{Meta, Pid};

use crate::{buffers, meta};

/// What was written to the current recording.
struct Published {
    /// The recording (`buffers::generation`) written to.
    generation: u32,
    /// The loader's `dlpi_adds` when last looked at.
    adds: u64,
    /// Segments written: (start, path).
    segments: BTreeSet<(u64, String)>,
}

static PUBLISHED: Mutex<Published> = Mutex::new(Published {
    generation: 0,
    adds: 0,
    segments: BTreeSet::new(),
});

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

/// What a walk of the loaded objects collects.
struct Walk {
    /// Stop at the first object when the loader's `dlpi_adds` equals this.
    unless_adds: Option<u64>,
    /// The loader's `dlpi_adds`.
    adds: u64,
    segments: Vec<Segment>,
}

/// Every executable segment of every object loaded now (the vDSO, which has no file,
/// left out).
#[cfg(test)]
fn loaded() -> Vec<Segment> {
    walk(None).segments
}

fn walk(unless_adds: Option<u64>) -> Walk {
    let mut w = Walk {
        unless_adds,
        adds: 0,
        segments: Vec::new(),
    };
    // SAFETY: `each` matches the callback type and only reads the info the loader
    // passes for the duration of the call; `w` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut w as *mut Walk).cast()) };
    w
}

unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, size: usize, data: *mut c_void) -> c_int {
    // No panic may unwind into the loader.
    let stop = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the loader passes a valid info for this call and `data` is the Walk
        // given to dl_iterate_phdr.
        let (info, w) = unsafe { (&*info, &mut *data.cast::<Walk>()) };
        // `dlpi_adds` exists when the loader's struct is that long (glibc >= 2.4).
        if size >= std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) {
            w.adds = info.dlpi_adds;
            if w.unless_adds == Some(w.adds) {
                return true;
            }
        }
        let out = &mut w.segments;
        let Some(path) = object_path(info.dlpi_name) else {
            return false;
        };
        if info.dlpi_phdr.is_null() {
            return false;
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
        false
    }));
    c_int::from(stop.unwrap_or(true))
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

/// Writes a `Meta::Mapping` for every executable segment loaded now that the current
/// recording does not have yet; returns how many. Cheap when nothing was loaded since
/// the last call.
pub fn publish_new() -> usize {
    let generation = buffers::generation();
    if generation == 0 {
        return 0;
    }
    let mut p = PUBLISHED.lock().unwrap_or_else(|e| e.into_inner());
    if p.generation != generation {
        p.generation = generation;
        p.segments.clear();
        p.adds = 0;
    }
    let w = walk((!p.segments.is_empty()).then_some(p.adds));
    p.adds = w.adds;
    let pid = Pid(buffers::pid());
    let mut written = 0;
    for s in w.segments {
        if p.segments.insert((s.start, s.path.clone())) {
            meta::write(&Meta::Mapping {
                pid,
                start: s.start,
                end: s.end,
                offset: s.offset,
                path: s.path,
            });
            written += 1;
        }
    }
    written
}

/// In a fork's child: the parent's mappings were written under the parent's pid.
pub fn forget_after_fork() {
    let mut p = PUBLISHED.lock().unwrap_or_else(|e| e.into_inner());
    p.generation = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_test_binary_and_libc_with_the_addresses_of_their_code() {
        let segments = loaded();
        let here = publish_new as *const () as usize as u64;
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
