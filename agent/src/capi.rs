//! The C API (`agent/include/sonda.h`): native code marks regions and events and names
//! them, into the same per-thread rings and the same trace as the Java agent (inside a
//! JVM) or on its own (a native process, see `native`).
//!
//! Hot calls (`sonda_region_enter`, `sonda_region_exit`, `sonda_event`) are one push
//! through the C hot path (`hooks`): no lock, no allocation, no system call but the
//! clock read; a full ring drops and counts. Naming calls may lock and allocate: they
//! keep a registry so that a name given once is given again to every later recording
//! of the process (an attach, stop and attach again), and regions keep their ids.
//!
//! Region ids come from the method id space of the buffer file (`Meta::Method` with an
//! empty class), so they never collide with Java methods; registering a name twice
//! gives the same id. Event types are the caller's numbers (`Meta::UserType`). A thread
//! name is written as `Meta::JavaThread` (the runtime-given name, `daemon` false).
//!
//! Every exported function returns normally whatever happens: null or non-UTF-8 names
//! are ignored or replaced, and a panic in the naming code is caught (and reported as a
//! warning in the trace).

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, CStr};
use std::sync::Mutex;

use sonda_shm::records;
use sonda_trace::{Meta, Pid, Tid};

use crate::jvmti::guard;
use crate::{buffers, hooks, meta, probe};

/// Names given through the API, re-written into each new recording.
struct Names {
    /// Region name → id (ids stay the same for the life of the process).
    regions: BTreeMap<String, u32>,
    /// (type, value or none) → name.
    types: BTreeMap<(u32, Option<u64>), String>,
    /// tid → thread name.
    threads: BTreeMap<u32, String>,
    /// The recording (`buffers::generation`) the names were last written to.
    written_to: u32,
}

static NAMES: Mutex<Names> = Mutex::new(Names {
    regions: BTreeMap::new(),
    types: BTreeMap::new(),
    threads: BTreeMap::new(),
    written_to: 0,
});

impl Names {
    /// Writes every name into the current recording if it has not seen them yet.
    fn catch_up(&mut self) {
        let now = buffers::generation();
        if now == 0 || now == self.written_to {
            return;
        }
        self.written_to = now;
        for (name, &id) in &self.regions {
            write_region(id, name);
        }
        for ((kind, value), name) in &self.types {
            write_type(*kind, *value, name);
        }
        for (&tid, name) in &self.threads {
            write_thread(tid, name);
        }
    }
}

fn write_region(id: u32, name: &str) {
    meta::write(&Meta::Method {
        id,
        class: String::new(),
        name: name.to_string(),
        descriptor: String::new(),
    });
}

fn write_type(kind: u32, value: Option<u64>, name: &str) {
    meta::write(&Meta::UserType {
        kind,
        value,
        name: name.to_string(),
    });
}

fn write_thread(tid: u32, name: &str) {
    meta::write(&Meta::JavaThread {
        pid: Pid(buffers::pid()),
        tid: Tid(tid),
        name: name.to_string(),
        daemon: false,
    });
}

/// A recording started: the names given so far are written into it (regions keep
/// their ids, so code that kept an id from an earlier recording is still named).
pub fn recording_started() {
    guard("sonda C API", (), || {
        NAMES.lock().unwrap_or_else(|p| p.into_inner()).catch_up();
    });
}

/// A C string as text; `None` for a null pointer.
///
/// # Safety
/// `s` is null or a NUL-terminated string valid for the call.
unsafe fn text(s: *const c_char) -> Option<String> {
    if s.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    Some(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
}

/// Runs a naming call with the registry locked (and names caught up); 0 on failure.
fn with_names<T>(fallback: T, f: impl FnOnce(&mut Names) -> T) -> T {
    guard("sonda C API", fallback, || {
        let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
        names.catch_up();
        f(&mut names)
    })
}

/// `uint32_t sonda_region(const char *name)`: the id of the region called `name`,
/// registered (and named in the trace) on first use; 0 when nothing records (then
/// enter and exit of 0 do nothing) or `name` is null.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn sonda_region(name: *const c_char) -> u32 {
    // SAFETY: the caller's contract.
    let Some(name) = (unsafe { text(name) }) else {
        return 0;
    };
    with_names(0, |names| {
        if let Some(&id) = names.regions.get(&name) {
            return id;
        }
        let Some(id) = buffers::region().and_then(|r| r.next_method_id()) else {
            return 0;
        };
        // Later recordings of this process hand out ids above it (see probe::note_id).
        probe::note_id(id);
        write_region(id, &name);
        names.regions.insert(name, id);
        id
    })
}

/// `void sonda_region_enter(uint32_t id)`: the calling thread enters region `id`.
#[no_mangle]
pub extern "C" fn sonda_region_enter(id: u32) {
    if id != 0 {
        hooks::record1(records::ENTER, id);
    }
}

/// `void sonda_region_exit(uint32_t id)`: the calling thread leaves region `id`.
#[no_mangle]
pub extern "C" fn sonda_region_exit(id: u32) {
    if id != 0 {
        hooks::record1(records::LEAVE, id);
    }
}

/// `void sonda_event(uint32_t type, uint64_t value)`: a typed event on the calling
/// thread.
#[no_mangle]
pub extern "C" fn sonda_event(kind: u32, value: u64) {
    hooks::record2(records::USER, kind, value);
}

/// `void sonda_event_type_name(uint32_t type, const char *name)`.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn sonda_event_type_name(kind: u32, name: *const c_char) {
    // SAFETY: the caller's contract.
    if let Some(name) = unsafe { text(name) } {
        name_type(kind, None, name);
    }
}

/// `void sonda_event_value_name(uint32_t type, uint64_t value, const char *name)`.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn sonda_event_value_name(kind: u32, value: u64, name: *const c_char) {
    // SAFETY: the caller's contract.
    if let Some(name) = unsafe { text(name) } {
        name_type(kind, Some(value), name);
    }
}

fn name_type(kind: u32, value: Option<u64>, name: String) {
    with_names((), |names| {
        if names.types.get(&(kind, value)) != Some(&name) {
            write_type(kind, value, &name);
            names.types.insert((kind, value), name);
        }
    });
}

/// `void sonda_thread_name(const char *name)`: names the calling thread in the trace.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn sonda_thread_name(name: *const c_char) {
    // SAFETY: the caller's contract.
    let Some(name) = (unsafe { text(name) }) else {
        return;
    };
    let tid = buffers::current_tid();
    with_names((), |names| {
        write_thread(tid, &name);
        names.threads.insert(tid, name);
    });
}

/// `int sonda_recording(void)`: 1 when calls are recorded (a recording runs in this
/// process), else 0.
#[no_mangle]
pub extern "C" fn sonda_recording() -> c_int {
    c_int::from(buffers::region().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_shm::config::{AgentConfig, Mode};
    use sonda_shm::records::{decode, ENTER, LEAVE, USER};
    use sonda_shm::{Clock, Geometry, Region};
    use sonda_trace::codec::{Item, Items};

    fn metas(region: &Region) -> Vec<Meta> {
        let mut out = Vec::new();
        let mut cursor = 0;
        region.read_meta(&mut cursor, |bytes| {
            for item in Items::new(bytes) {
                if let Ok(Item::Meta(m)) = item {
                    out.push(m);
                }
            }
        });
        out
    }

    /// Two recordings in this process, one after the other (as attach, stop, attach
    /// again does in a JVM): names given in the first are in the second, with the same
    /// region id, without any naming call; hot calls record into the current one.
    #[test]
    fn names_outlive_a_recording_and_hot_calls_record() {
        let dir = tempfile::tempdir().unwrap();
        let geo = Geometry {
            slots: 4,
            ring_len: 4096,
            meta_len: 1 << 16,
        };
        let config = AgentConfig {
            mode: Some(Mode::Attach),
            ..AgentConfig::default()
        };
        let paths = [dir.path().join("a.buf"), dir.path().join("b.buf")];
        let files: Vec<Region> = paths
            .iter()
            .map(|p| Region::create(p, geo, Clock::Monotonic, &config).unwrap())
            .collect();
        assert_eq!(sonda_recording(), 0);
        assert_eq!(
            // SAFETY: a NUL-terminated literal (so are the strings of the calls below).
            unsafe { sonda_region(c"parse".as_ptr()) },
            0,
            "nothing records"
        );

        crate::clock::select(Clock::Monotonic);
        buffers::start_recording(Region::open(&paths[0]).unwrap());
        assert_eq!(sonda_recording(), 1);
        // SAFETY: a NUL-terminated literal.
        let id = unsafe { sonda_region(c"parse".as_ptr()) };
        assert!(id > 0);
        // SAFETY: a NUL-terminated literal.
        assert_eq!(unsafe { sonda_region(c"parse".as_ptr()) }, id);
        // SAFETY: a null name, which the API refuses.
        assert_eq!(unsafe { sonda_region(std::ptr::null()) }, 0);
        // SAFETY: a NUL-terminated literal.
        unsafe { sonda_event_type_name(3, c"depth".as_ptr()) };
        // SAFETY: a NUL-terminated literal.
        unsafe { sonda_event_value_name(3, 1, c"one".as_ptr()) };
        // SAFETY: a NUL-terminated literal.
        unsafe { sonda_thread_name(c"parser".as_ptr()) };
        sonda_region_enter(id);
        sonda_event(3, 1);
        sonda_region_exit(id);
        buffers::end_recording();
        sonda_region_enter(id); // between recordings: nowhere to go

        buffers::start_recording(Region::open(&paths[1]).unwrap());
        sonda_region_enter(id);
        sonda_region_exit(id);
        buffers::retire_current();
        buffers::end_recording();

        for (n, file) in files.iter().enumerate() {
            let m = metas(file);
            assert!(
                m.iter().any(
                    |m| matches!(m, Meta::Method { id: i, name, .. } if *i == id && name == "parse")
                ),
                "recording {n}: {m:?}"
            );
            assert!(m.contains(&Meta::UserType {
                kind: 3,
                value: Some(1),
                name: "one".into()
            }));
            assert!(m.iter().any(
                |m| matches!(m, Meta::JavaThread { name, daemon: false, .. } if name == "parser")
            ));
            let mut bytes = Vec::new();
            for i in 0..file.slots() {
                file.drain(i, &mut bytes);
            }
            let kinds: Vec<(u8, u32)> = decode(&bytes).map(|r| (r.kind, r.arg)).collect();
            let expect = if n == 0 {
                vec![(ENTER, id), (USER, 3), (LEAVE, id)]
            } else {
                vec![(ENTER, id), (LEAVE, id)]
            };
            assert_eq!(kinds, expect, "recording {n}");
        }
    }
}
