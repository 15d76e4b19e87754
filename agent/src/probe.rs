//! The probes rewritten methods call, and the class that holds them.
//!
//! Rewritten bytecode calls `java.lang.SondaProbe.enter(id)`, `.exit(id)` and
//! `.exitByException(id)`: `static native void (int)` methods implemented by the
//! exported `Java_java_lang_SondaProbe_*` functions below. Each reads the clock and
//! pushes one record into the calling thread's ring; no lock, no allocation, no system
//! call (but the clock read: `rdtsc`, or `clock_gettime` through the vDSO).
//!
//! # Why linked by name, not RegisterNatives
//! HotSpot logs a warning *to stdout* ("Re-registering of platform native method") when
//! RegisterNatives binds a native of a boot-loader class in a named module from native
//! code with no Java caller, which is the agent's case; the application's output must
//! not change. Instead the JVM links the natives itself on first call: for a
//! boot-loader class it searches libjava, then the boot loader's libraries, then the
//! agent libraries (HotSpot `NativeLookup::lookup_style`), where it finds these exported
//! functions. [`link`] calls each probe once, muted, so a failure to link shows at
//! start-up (as a warning, probes off) and never as an `UnsatisfiedLinkError` thrown
//! into the application.
//!
//! # Why `java.lang`
//! Instrumented methods may be in any class of any module and loader, including
//! `java.base` itself, and they must be able to resolve and access the probe class.
//! A class the bootstrap loader defines through JNI `DefineClass` joins the module
//! that owns its package. `java.lang` is owned by `java.base`, which every module
//! reads and which exports `java.lang` to all, so `java.lang.SondaProbe` is accessible
//! from every class by the plain module rules; `java.*` packages are reserved to the
//! bootstrap and platform loaders, so no application class can shadow it, and JNI
//! `DefineClass` with a NULL loader is the bootstrap loader, which may define there.
//! (A new package would land in the boot loader's unnamed module; that also works on
//! JDK 17 for rewritten classes, but only because HotSpot gives a module whose
//! classes an agent transformed "default read edges" to that unnamed module — an
//! implementation detail the agent does not rely on.) The tests call it from the
//! class path, from `java.base` (`Integer.reverse`, retransformed) and from `java.sql`
//! (platform loader).

use jni_sys::{jclass, jint, JNIEnv};
use sonda_rewriter::{probe_class_bytes, ProbeClass};
use sonda_shm::records;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::jvmti::{guard, Jni, JniError};
use crate::{buffers, clock};

/// The probe class and its methods, as the rewriter inserts calls to them.
pub const PROBE: ProbeClass<'static> = ProbeClass {
    class: "java/lang/SondaProbe",
    enter: "enter",
    exit: "exit",
    exit_exception: "exitByException",
};

static DEFINED: AtomicBool = AtomicBool::new(false);
static READY: AtomicBool = AtomicBool::new(false);
/// The lowest method id of the current recording. A method entered while its class was
/// instrumented keeps running that code after the class is restored, and its exit probe
/// fires later, perhaps in a later recording: ids of earlier recordings lie below this
/// floor (see `Region::raise_method_ids_to`) and are dropped.
static FIRST_ID: AtomicU32 = AtomicU32::new(1);
/// The highest method id any recording handed out plus one: the next recording's floor.
static NEXT_FLOOR: AtomicU32 = AtomicU32::new(1);

/// The id floor for a new recording: above every id handed out before.
pub fn next_floor() -> u32 {
    NEXT_FLOOR.load(Ordering::Acquire)
}

/// Sets the current recording's first method id.
pub fn set_first_id(first: u32) {
    FIRST_ID.store(first, Ordering::Release);
    NEXT_FLOOR.fetch_max(first, Ordering::AcqRel);
}

/// Notes that `id` was handed out (raises the next recording's floor).
pub fn note_id(id: u32) {
    NEXT_FLOOR.fetch_max(id.saturating_add(1), Ordering::AcqRel);
}

/// Whether the probe class is defined and its natives linked: only then may classes be
/// rewritten to call it.
pub fn ready() -> bool {
    READY.load(Ordering::Acquire)
}

/// Defines the probe class in the bootstrap loader (once; live phase).
pub fn define(jni: &Jni<'_>) -> Result<(), JniError> {
    if DEFINED.load(Ordering::Acquire) {
        return Ok(());
    }
    let class = jni.define_boot_class(PROBE.class, &probe_class_bytes(&PROBE))?;
    jni.delete_local(class);
    DEFINED.store(true, Ordering::Release);
    Ok(())
}

/// Links the probe natives by calling each once, muted; on success the probes are
/// ready. Fails with `UnsatisfiedLinkError` while the JVM does not list the agent's
/// library yet: during `Agent_OnAttach`, since HotSpot adds an attached agent to its
/// list only once `Agent_OnAttach` returned (a later retry then succeeds).
pub fn link(jni: &Jni<'_>) -> Result<(), JniError> {
    if ready() {
        return Ok(());
    }
    let class = jni.find_class(c"java/lang/SondaProbe")?;
    let linked = buffers::muted(|| {
        for name in [c"enter", c"exit", c"exitByException"] {
            jni.call_static_void_int(class, name, 0)?;
        }
        Ok(())
    });
    jni.delete_local(class);
    linked?;
    READY.store(true, Ordering::Release);
    Ok(())
}

/// `SondaProbe.enter(int id)`: a rewritten method was entered.
#[no_mangle]
pub extern "system" fn Java_java_lang_SondaProbe_enter(
    _env: *mut JNIEnv,
    _class: jclass,
    id: jint,
) {
    probe(records::ENTER, id);
}

/// `SondaProbe.exit(int id)`: a rewritten method returns.
#[no_mangle]
pub extern "system" fn Java_java_lang_SondaProbe_exit(_env: *mut JNIEnv, _class: jclass, id: jint) {
    probe(records::LEAVE, id);
}

/// `SondaProbe.exitByException(int id)`: an exception leaves a rewritten method.
#[no_mangle]
pub extern "system" fn Java_java_lang_SondaProbe_exitByException(
    _env: *mut JNIEnv,
    _class: jclass,
    id: jint,
) {
    probe(records::LEAVE_EXCEPTION, id);
}

/// `enter` as a JDK 17 "critical native", used instead of the JNI one when the JVM runs
/// with `-XX:+CriticalJNINatives`: called straight from compiled code, without the
/// JNI thread-state transition and its memory fence (about 9 ns less per call here).
/// Allowed because the probe takes no object, calls no JNI and never blocks.
#[no_mangle]
pub extern "system" fn JavaCritical_java_lang_SondaProbe_enter(id: jint) {
    probe(records::ENTER, id);
}

/// `exit` as a critical native (see [`JavaCritical_java_lang_SondaProbe_enter`]).
#[no_mangle]
pub extern "system" fn JavaCritical_java_lang_SondaProbe_exit(id: jint) {
    probe(records::LEAVE, id);
}

/// `exitByException` as a critical native.
#[no_mangle]
pub extern "system" fn JavaCritical_java_lang_SondaProbe_exitByException(id: jint) {
    probe(records::LEAVE_EXCEPTION, id);
}

/// One probe: the time, then one record on the calling thread's ring. Ids of an
/// earlier recording (stale code still running, see [`FIRST_ID`]) are ignored.
#[inline(always)]
fn probe(kind: u8, id: jint) {
    guard("SondaProbe", (), || {
        let id = id as u32;
        if id >= FIRST_ID.load(Ordering::Relaxed) {
            let now = clock::now();
            buffers::record(now, kind, id);
            crate::budget::on_probe(kind, id, now);
        }
    });
}
