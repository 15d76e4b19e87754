//! The `extern "C"` functions the JVM calls for each event: they turn raw pointers
//! into the glue's safe types and call the installed [`EventHandler`](super::EventHandler)
//! inside [`guard`], so nothing unwinds into the JVM.

use std::ffi::{c_char, c_uchar, CStr};
use std::ptr;

use jni_sys::{jclass, jint, jobject, JNIEnv};

use super::jni::Jni;
use super::{guard, handler, mutf8, sys, ClassLoad, Jvmti};

/// The callback table installed by [`Jvmti::install_callbacks`].
pub(super) fn table() -> sys::jvmtiEventCallbacks {
    // SAFETY: jvmtiEventCallbacks is a C struct of nullable function pointers, for which
    // all-zero bytes (every slot None) is a valid value.
    let mut t: sys::jvmtiEventCallbacks = unsafe { std::mem::zeroed() };
    t.VMInit = Some(vm_init);
    t.VMDeath = Some(vm_death);
    t.ThreadStart = Some(thread_start);
    t.ThreadEnd = Some(thread_end);
    t.ClassFileLoadHook = Some(class_file_load_hook);
    t.GarbageCollectionStart = Some(gc_start);
    t.GarbageCollectionFinish = Some(gc_finish);
    t.MonitorContendedEnter = Some(monitor_contended_enter);
    t.MonitorContendedEntered = Some(monitor_contended_entered);
    t
}

/// Runs `f` with the handler and a JNI wrapper, caught.
fn with_jni(
    place: &'static str,
    env: *mut JNIEnv,
    f: impl FnOnce(&Jni<'_>, &dyn super::EventHandler),
) {
    guard(place, (), || {
        let Some(h) = handler() else { return };
        // SAFETY: the JVM passes the current thread's JNIEnv, valid for this callback.
        let Some(jni) = (unsafe { Jni::new(env) }) else {
            return;
        };
        f(&jni, h);
    });
}

unsafe extern "C" fn vm_init(_jvmti: *mut sys::jvmtiEnv, env: *mut JNIEnv, thread: jobject) {
    with_jni("VMInit", env, |jni, h| h.vm_init(jni, jni.wrap(thread)));
}

unsafe extern "C" fn vm_death(_jvmti: *mut sys::jvmtiEnv, env: *mut JNIEnv) {
    with_jni("VMDeath", env, |jni, h| h.vm_death(jni));
}

unsafe extern "C" fn thread_start(_jvmti: *mut sys::jvmtiEnv, env: *mut JNIEnv, thread: jobject) {
    with_jni("ThreadStart", env, |jni, h| {
        h.thread_start(jni, jni.wrap(thread))
    });
}

unsafe extern "C" fn thread_end(_jvmti: *mut sys::jvmtiEnv, env: *mut JNIEnv, thread: jobject) {
    with_jni("ThreadEnd", env, |jni, h| {
        h.thread_end(jni, jni.wrap(thread))
    });
}

unsafe extern "C" fn gc_start(_jvmti: *mut sys::jvmtiEnv) {
    guard("GarbageCollectionStart", (), || {
        if let Some(h) = handler() {
            h.gc_start();
        }
    });
}

unsafe extern "C" fn gc_finish(_jvmti: *mut sys::jvmtiEnv) {
    guard("GarbageCollectionFinish", (), || {
        if let Some(h) = handler() {
            h.gc_finish();
        }
    });
}

unsafe extern "C" fn monitor_contended_enter(
    _jvmti: *mut sys::jvmtiEnv,
    env: *mut JNIEnv,
    thread: jobject,
    object: jobject,
) {
    with_jni("MonitorContendedEnter", env, |jni, h| {
        h.monitor_contended_enter(jni, jni.wrap(thread), jni.wrap(object))
    });
}

unsafe extern "C" fn monitor_contended_entered(
    _jvmti: *mut sys::jvmtiEnv,
    env: *mut JNIEnv,
    thread: jobject,
    object: jobject,
) {
    with_jni("MonitorContendedEntered", env, |jni, h| {
        h.monitor_contended_entered(jni, jni.wrap(thread), jni.wrap(object))
    });
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn class_file_load_hook(
    jvmti: *mut sys::jvmtiEnv,
    _env: *mut JNIEnv,
    class_being_redefined: jclass,
    loader: jobject,
    name: *const c_char,
    _protection_domain: jobject,
    class_data_len: jint,
    class_data: *const c_uchar,
    new_class_data_len: *mut jint,
    new_class_data: *mut *mut c_uchar,
) {
    guard("ClassFileLoadHook", (), || {
        let Some(h) = handler() else { return };
        if class_data.is_null()
            || class_data_len <= 0
            || new_class_data.is_null()
            || new_class_data_len.is_null()
        {
            return;
        }
        // SAFETY: the VM passes `class_data_len` readable bytes at `class_data`, valid
        // for this callback.
        let bytes = unsafe { std::slice::from_raw_parts(class_data, class_data_len as usize) };
        let name = if name.is_null() {
            None
        } else {
            // SAFETY: a non-NULL name is a NUL-terminated modified-UTF-8 string.
            Some(mutf8::decode(unsafe { CStr::from_ptr(name) }.to_bytes()))
        };
        let load = ClassLoad {
            name,
            bytes,
            redefining: !class_being_redefined.is_null(),
            boot_loader: loader.is_null(),
        };
        let Some(new_bytes) = h.class_file_load(&load) else {
            return;
        };
        let Ok(len) = jint::try_from(new_bytes.len()) else {
            return;
        };
        let env = Jvmti::from_raw(jvmti);
        let Ok(mem) = env.allocate_copy(&new_bytes) else {
            return;
        };
        // SAFETY: both out-pointers were checked non-NULL; the VM takes ownership of
        // `mem` (allocated with this env's Allocate, as the spec requires).
        unsafe {
            ptr::write(new_class_data_len, len);
            ptr::write(new_class_data, mem);
        }
    });
}
