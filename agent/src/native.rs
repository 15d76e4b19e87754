//! Recording a native process: a program linked with `-lsonda` that is not a JVM.
//!
//! `sonda record` sets `SONDA_SHM=<buffer file>` for the command it starts, and children
//! inherit it. When the library is loaded into a process that has it, a constructor
//! maps the file and starts the process's one recording: the C API and the compiler's
//! function hooks write into it from then on, and the process's executable mappings
//! are written for naming function addresses later. Without `SONDA_SHM` (a program run
//! without sonda) nothing happens and every API call is a cheap no-op.
//!
//! In a JVM the agent owns the recording (its option names the same file), so the
//! constructor leaves it alone when a JVM is present; native code there (JNI
//! libraries) records into the agent's recording.
//!
//! A `fork` without `exec` gives the child the parent's mapping and the forking
//! thread's slot; the child forgets the slot (and the cached ids) and claims its own.

use std::ffi::OsString;
use std::path::Path;

use sonda_shm::{records, Region};

use crate::{buffers, clock, hooks, mappings};

/// The environment variable that names the buffer file.
pub const SHM_ENV: &str = "SONDA_SHM";

/// Runs when the library is loaded (before the program's own constructors and `main`).
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

extern "C" fn on_load() {
    // No panic may unwind into the loader.
    let _ = std::panic::catch_unwind(|| start(std::env::var_os(SHM_ENV)));
}

/// Starts the native recording on the buffer file `shm` names, unless there is none to
/// start (no file named, a JVM present, one already running). Problems are one
/// `sonda:` line on stderr; the program runs unrecorded.
pub fn start(shm: Option<OsString>) -> bool {
    let Some(shm) = shm.filter(|s| !s.is_empty()) else {
        return false;
    };
    if in_jvm() || buffers::region().is_some() {
        return false;
    }
    let region = match Region::open(Path::new(&shm)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "sonda: cannot use buffer file {} ({SHM_ENV}): {e}; recording nothing",
                Path::new(&shm).display()
            );
            return false;
        }
    };
    clock::select(region.clock());
    buffers::start_recording(region);
    buffers::record(clock::now(), records::VM_INIT, 0);
    mappings::publish_new();
    // SAFETY: registers a plain function; no other arguments.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    true
}

/// Whether this process runs a JVM (whose agent records): `libjvm.so`'s invocation
/// interface is loaded.
fn in_jvm() -> bool {
    // SAFETY: dlsym on the default handle with a NUL-terminated name.
    !unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"JNI_CreateJavaVM".as_ptr()) }.is_null()
}

extern "C" fn after_fork_in_child() {
    buffers::after_fork();
    hooks::forget_thread();
    mappings::forget_after_fork();
}
