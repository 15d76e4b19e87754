//! The probes rewritten methods call, and the class that holds them.
//!
//! Rewritten bytecode calls `java.lang.SondaProbe.enter(id)`, `.exit(id)` and
//! `.exitByException(id)`: `static native void (int)` methods bound with RegisterNatives
//! to the Rust functions below. Each reads the clock and pushes one record into the
//! calling thread's ring; no lock, no allocation, no system call (but the clock read,
//! which is the vDSO or `rdtsc`). There is one set of functions per clock so the hot
//! path has no branch on it.
//!
//! # Why `java.lang`
//! Instrumented methods may be in any class of any module and loader, including
//! `java.base` itself. A class the bootstrap loader defines through JNI `DefineClass`
//! joins the module of its package; in a new package it would land in the boot loader's
//! unnamed module, which named modules (`java.base`, `java.sql`, application modules)
//! do not read, so their calls would fail with `IllegalAccessError`. `java.lang` is
//! owned by `java.base`, exported unconditionally, and read by every module; the JVM
//! reserves `java.*` packages for the bootstrap and platform loaders, and JNI
//! `DefineClass` with a NULL loader is the bootstrap loader. So the probe class is
//! `java.lang.SondaProbe`: reachable from every class, no module edits needed, and no
//! application class can shadow it.

use jni_sys::{jclass, jint, JNIEnv};
use sonda_rewriter::{probe_class_bytes, ProbeClass};
use sonda_shm::records;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::jvmti::{guard, Jni, JniError, StaticIntNative};
use crate::{buffers, clock};

/// The probe class and its methods, as the rewriter inserts calls to them.
pub const PROBE: ProbeClass<'static> = ProbeClass {
    class: "java/lang/SondaProbe",
    enter: "enter",
    exit: "exit",
    exit_exception: "exitByException",
};

static READY: AtomicBool = AtomicBool::new(false);

/// Whether the probe class is defined and its natives bound: only then may classes be
/// rewritten to call it.
pub fn ready() -> bool {
    READY.load(Ordering::Acquire)
}

/// Defines the probe class in the bootstrap loader and binds its natives (live phase).
pub fn install(jni: &Jni<'_>) -> Result<(), JniError> {
    if ready() {
        return Ok(());
    }
    let bytes = probe_class_bytes(&PROBE);
    let class = jni.define_boot_class(PROBE.class, &bytes)?;
    let natives: [StaticIntNative; 3] = if clock::is_tsc() {
        [
            StaticIntNative {
                name: c"enter",
                function: enter::<true>,
            },
            StaticIntNative {
                name: c"exit",
                function: exit::<true>,
            },
            StaticIntNative {
                name: c"exitByException",
                function: exit_exception::<true>,
            },
        ]
    } else {
        [
            StaticIntNative {
                name: c"enter",
                function: enter::<false>,
            },
            StaticIntNative {
                name: c"exit",
                function: exit::<false>,
            },
            StaticIntNative {
                name: c"exitByException",
                function: exit_exception::<false>,
            },
        ]
    };
    jni.register_static_int_natives(class, &natives)?;
    jni.delete_local(class);
    READY.store(true, Ordering::Release);
    Ok(())
}

/// `SondaProbe.enter(int id)`: a rewritten method was entered.
extern "system" fn enter<const TSC: bool>(_env: *mut JNIEnv, _class: jclass, id: jint) {
    guard("SondaProbe.enter", (), || {
        buffers::record(clock::now_on::<TSC>(), records::ENTER, id as u32)
    });
}

/// `SondaProbe.exit(int id)`: a rewritten method returns.
extern "system" fn exit<const TSC: bool>(_env: *mut JNIEnv, _class: jclass, id: jint) {
    guard("SondaProbe.exit", (), || {
        buffers::record(clock::now_on::<TSC>(), records::LEAVE, id as u32)
    });
}

/// `SondaProbe.exitByException(int id)`: an exception leaves a rewritten method.
extern "system" fn exit_exception<const TSC: bool>(_env: *mut JNIEnv, _class: jclass, id: jint) {
    guard("SondaProbe.exitByException", (), || {
        buffers::record(clock::now_on::<TSC>(), records::LEAVE_EXCEPTION, id as u32)
    });
}
