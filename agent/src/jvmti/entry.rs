//! The library's entry points, called by the JVM: `Agent_OnLoad` for `-agentpath` at
//! start, `Agent_OnAttach` for dynamic attach. Both take the same option text and go
//! through the same path. `Agent_OnLoad` always returns 0 (JNI_OK): anything else would
//! stop the JVM, and a problem with the agent must never do that — the agent then
//! simply records nothing. `Agent_OnAttach` returns the agent's answer (0, or a
//! `sonda_shm::attach_codes` refusal), which HotSpot hands to the attaching collector;
//! a refusal harms nothing (HotSpot only unloads the library, which the agent allows by
//! refusing before it starts anything).

use std::ffi::{c_char, c_void, CStr};
use std::ptr;

use jni_sys::{jint, JavaVM, JNI_OK};

use super::jni::Jni;
use super::{guard, handler, mutf8, Jvmti, LoadMode, Vm};

/// Called by the JVM when the library is given with `-agentpath` (OnLoad phase).
///
/// # Safety
/// Called by the JVM only, with its `JavaVM` and the option text (or NULL).
#[no_mangle]
pub unsafe extern "system" fn Agent_OnLoad(
    vm: *mut JavaVM,
    options: *mut c_char,
    _reserved: *mut c_void,
) -> jint {
    // SAFETY: forwarded JVM arguments (this function's contract).
    unsafe { load(vm, options, LoadMode::Launch) };
    JNI_OK
}

/// Called by the JVM when the library is loaded by dynamic attach (live phase).
///
/// # Safety
/// Called by the JVM only, with its `JavaVM` and the option text (or NULL).
#[no_mangle]
pub unsafe extern "system" fn Agent_OnAttach(
    vm: *mut JavaVM,
    options: *mut c_char,
    _reserved: *mut c_void,
) -> jint {
    // SAFETY: forwarded JVM arguments (this function's contract).
    unsafe { load(vm, options, LoadMode::Attach) }
}

/// Called by the JVM when it unloads the library (at exit). Nothing to do: the mapping
/// and slots are the collector's to reclaim.
#[no_mangle]
pub extern "system" fn Agent_OnUnload(_vm: *mut JavaVM) {}

/// Returns the handler's code (0 when a panic was caught: the library may hold
/// threads or callbacks by then, so it must stay loaded).
///
/// # Safety
/// `vm` is the JVM's `JavaVM`; `options` NULL or a NUL-terminated string.
unsafe fn load(vm: *mut JavaVM, options: *mut c_char, mode: LoadMode) -> jint {
    crate::agent::install();
    guard("Agent_OnLoad", JNI_OK, || {
        let text = if options.is_null() {
            String::new()
        } else {
            // SAFETY: the JVM passes a NUL-terminated option string.
            mutf8::decode(unsafe { CStr::from_ptr(options) }.to_bytes())
        };
        let Some(h) = handler() else { return JNI_OK };
        // SAFETY: `vm` is the JVM's own JavaVM.
        let jvmti = match unsafe { Jvmti::from_vm(vm) } {
            Ok(j) => j,
            Err(e) => {
                eprintln!("sonda: cannot get a JVMTI environment ({e}); recording nothing");
                return if mode == LoadMode::Attach {
                    sonda_shm::attach_codes::JVMTI
                } else {
                    JNI_OK
                };
            }
        };
        // In the live phase (attach) the calling thread is a Java thread with a JNIEnv.
        let mut env: *mut c_void = ptr::null_mut();
        let jni = if mode == LoadMode::Attach {
            // SAFETY: valid JavaVM; GetEnv fills `env` for the current attached thread.
            let rc = unsafe { ((**vm).v1_2.GetEnv)(vm, &mut env, jni_sys::JNI_VERSION_1_6) };
            if rc == JNI_OK {
                // SAFETY: on success `env` is this thread's JNIEnv, valid during this call.
                unsafe { Jni::new(env.cast()) }
            } else {
                None
            }
        } else {
            None
        };
        let code = h.agent_load(Vm::new(vm), jvmti, jni.as_ref(), &text, mode);
        if mode == LoadMode::Attach {
            code
        } else {
            JNI_OK
        }
    })
}
