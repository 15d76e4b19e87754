//! The JavaVM handle, for work the agent must do on a thread of its own.

use std::ffi::{c_void, CString};
use std::ptr;

use jni_sys::{JavaVM, JavaVMAttachArgs, JNI_OK, JNI_VERSION_1_6};

use super::guard;
use super::jni::Jni;

/// The JVM the agent runs in. JavaVM pointers are valid from every thread.
#[derive(Clone, Copy)]
pub struct Vm(*mut JavaVM);

// SAFETY: a JavaVM* is process-wide and its invocation functions are thread-safe.
unsafe impl Send for Vm {}
// SAFETY: as above.
unsafe impl Sync for Vm {}

impl Vm {
    /// Wraps the JavaVM the JVM passed to an entry point.
    pub(super) fn new(vm: *mut JavaVM) -> Vm {
        Vm(vm)
    }

    fn raw(self) -> *mut JavaVM {
        self.0
    }

    /// Runs `f` on a new OS thread attached to the JVM as a daemon Java thread named
    /// `name`, then detaches. The thread is the agent's: its records are ignored from
    /// before it attaches (so its own ThreadStart names nothing).
    pub fn spawn_daemon(
        self,
        name: &str,
        f: impl FnOnce(&Jni<'_>) + Send + 'static,
    ) -> std::io::Result<()> {
        let java_name = CString::new(name).unwrap_or_default();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || attached(self, &java_name, f))?;
        Ok(())
    }
}

/// The body of a [`Vm::spawn_daemon`] thread.
fn attached(vm: Vm, name: &CString, f: impl FnOnce(&Jni<'_>)) {
    crate::buffers::mute_this_thread();
    let raw = vm.raw();
    let mut env: *mut c_void = ptr::null_mut();
    let mut args = JavaVMAttachArgs {
        version: JNI_VERSION_1_6,
        name: name.as_ptr().cast_mut(),
        group: ptr::null_mut(),
    };
    let args_ptr: *mut c_void = (&mut args as *mut JavaVMAttachArgs).cast();
    // SAFETY: valid JavaVM; `args` (with its NUL-terminated name) and `env` outlive the
    // call.
    let rc = unsafe { ((**raw).v1_4.AttachCurrentThreadAsDaemon)(raw, &mut env, args_ptr) };
    if rc != JNI_OK {
        return;
    }
    // SAFETY: on success `env` is this thread's JNIEnv until DetachCurrentThread.
    if let Some(jni) = unsafe { Jni::new(env.cast()) } {
        guard("agent thread", (), || f(&jni));
    }
    // SAFETY: this thread attached itself above and has no Java frames left.
    unsafe { ((**raw).v1_1.DetachCurrentThread)(raw) };
}
