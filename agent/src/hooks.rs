//! The Rust side of the C hot path (`hooks.c`): the compiler's function hooks and the C
//! API's region and event records are pushed there, with per-thread state in
//! initial-exec TLS (see the C file for why). This module keeps that state in step with
//! [`crate::buffers`], which owns the slots:
//!
//! - a recording starts or ends ([`recording_changed`], called by `buffers`): every
//!   thread's cached slot becomes stale, and the clock is set;
//! - a thread's first record in a recording calls back into [`claim`], which takes the
//!   thread's slot from `buffers` (claiming one if it has none, counting a drop if none
//!   is free) and hands its raw parts to C;
//! - a thread gives its slot back ([`forget_thread`], called by `buffers`): its next
//!   record claims again.

use std::ffi::c_int;

use crate::jvmti::guard;
use crate::{buffers, clock};

/// What C gets from a claim (`struct sonda_hooks_claim`).
#[repr(C)]
struct Claim {
    header: *mut u8,
    data: *mut u8,
    len: u64,
}

type ClaimFn = extern "C" fn(*mut Claim) -> c_int;

extern "C" {
    fn sonda_hooks_recording(active: c_int, tsc: c_int, claim: Option<ClaimFn>);
    fn sonda_hooks_forget_thread();
    fn sonda_hooks_record1(kind: u32, arg: u32);
    fn sonda_hooks_record2(kind: u32, arg: u32, extra: u64);
}

/// Called from C on a thread's first record in a recording: fills `out` with the
/// thread's slot and returns 1, or returns 0 when the thread cannot record now.
/// Objects loaded since the last claim (a JNI library, a `dlopen`) get their mappings
/// written here, before the thread's first function record.
extern "C" fn claim(out: *mut Claim) -> c_int {
    guard("sonda hooks", 0, || match buffers::producer() {
        Some(p) if !out.is_null() => {
            crate::mappings::publish_new();
            let (header, data, len) = p.raw_parts();
            // SAFETY: C passes a pointer to a live `struct sonda_hooks_claim` (checked
            // non-null), laid out as `Claim`.
            unsafe { out.write(Claim { header, data, len }) };
            1
        }
        _ => 0,
    })
}

/// A recording started or ended (`buffers::region()` says which): the C side drops
/// every thread's cached slot and takes the clock the buffer asks for; a new recording
/// gets the names given through the C API so far.
pub fn recording_changed() {
    let active = buffers::region().is_some();
    // SAFETY: plain stores into the C side's globals; `claim` has the signature C expects.
    unsafe {
        sonda_hooks_recording(
            c_int::from(active),
            c_int::from(clock::is_tsc()),
            Some(claim),
        )
    };
    if active {
        crate::capi::recording_started();
    }
}

/// The calling thread gave its slot back, or is a fork's child: C forgets its slot.
pub fn forget_thread() {
    // SAFETY: clears the calling thread's own TLS.
    unsafe { sonda_hooks_forget_thread() };
}

/// A one-unit record (`kind`, `arg`) on the calling thread's ring, stamped now.
#[inline]
pub fn record1(kind: u8, arg: u32) {
    // SAFETY: the C push only touches the calling thread's slot, validated by epoch.
    unsafe { sonda_hooks_record1(u32::from(kind), arg) };
}

/// A two-unit record (`kind`, `arg`, `extra`) on the calling thread's ring, stamped now.
#[inline]
pub fn record2(kind: u8, arg: u32, extra: u64) {
    // SAFETY: as in `record1`.
    unsafe { sonda_hooks_record2(u32::from(kind), arg, extra) };
}

/// The compiler's hooks exported unversioned, from Rust, when the linker cannot take
/// the `SONDA_1` version node (see build.rs): C symbols are not exported from the
/// library (rustc's version script keeps only Rust's), so these forward to the C ones.
#[cfg(sonda_unversioned_hooks)]
mod unversioned {
    use std::ffi::c_void;

    extern "C" {
        fn sonda_cyg_enter(function: *mut c_void, site: *mut c_void);
        fn sonda_cyg_exit(function: *mut c_void, site: *mut c_void);
    }

    /// `__cyg_profile_func_enter`, called by code built with `-finstrument-functions`.
    #[no_mangle]
    pub extern "C" fn __cyg_profile_func_enter(function: *mut c_void, site: *mut c_void) {
        // SAFETY: the C hook only reads the calling thread's slot; the pointers are
        // values, never dereferenced.
        unsafe { sonda_cyg_enter(function, site) }
    }

    /// `__cyg_profile_func_exit`.
    #[no_mangle]
    pub extern "C" fn __cyg_profile_func_exit(function: *mut c_void, site: *mut c_void) {
        // SAFETY: as above.
        unsafe { sonda_cyg_exit(function, site) }
    }
}
