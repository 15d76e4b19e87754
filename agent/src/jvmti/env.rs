//! The agent's JVMTI environment: a safe face on the `jvmtiEnv` function table.

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;

use super::jni::{Jni, Local};
use super::{check, mutf8, sys, JvmtiError};

/// The agent's JVMTI environment. JVMTI functions may be called from any thread, so it
/// is `Copy + Send + Sync`; which functions a given context may call is each caller's
/// concern (documented at [`super::EventHandler`]).
#[derive(Clone, Copy)]
pub struct Jvmti(*mut sys::jvmtiEnv);

// SAFETY: a jvmtiEnv is valid from every thread for the life of the VM (JVMTI spec,
// "Environments"); the pointer itself is never mutated by us.
unsafe impl Send for Jvmti {}
// SAFETY: as above; JVMTI functions are thread-safe.
unsafe impl Sync for Jvmti {}

/// The JVMTI events the agent uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Event {
    /// The VM finished starting (JVMTI `VMInit`).
    VmInit,
    /// The VM is shutting down (`VMDeath`).
    VmDeath,
    /// A Java thread started (`ThreadStart`).
    ThreadStart,
    /// A Java thread ended (`ThreadEnd`).
    ThreadEnd,
    /// A class is loaded or retransformed: the rewriting hook (`ClassFileLoadHook`).
    ClassFileLoadHook,
    /// A garbage collection started (`GarbageCollectionStart`).
    GarbageCollectionStart,
    /// A garbage collection finished (`GarbageCollectionFinish`).
    GarbageCollectionFinish,
    /// A thread waits to enter a monitor another holds (`MonitorContendedEnter`).
    MonitorContendedEnter,
    /// It entered it (`MonitorContendedEntered`).
    MonitorContendedEntered,
}

impl Event {
    fn code(self) -> sys::jvmtiEvent {
        match self {
            Event::VmInit => sys::JVMTI_EVENT_VM_INIT,
            Event::VmDeath => sys::JVMTI_EVENT_VM_DEATH,
            Event::ThreadStart => sys::JVMTI_EVENT_THREAD_START,
            Event::ThreadEnd => sys::JVMTI_EVENT_THREAD_END,
            Event::ClassFileLoadHook => sys::JVMTI_EVENT_CLASS_FILE_LOAD_HOOK,
            Event::GarbageCollectionStart => sys::JVMTI_EVENT_GARBAGE_COLLECTION_START,
            Event::GarbageCollectionFinish => sys::JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
            Event::MonitorContendedEnter => sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTER,
            Event::MonitorContendedEntered => sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTERED,
        }
    }
}

/// A set of JVMTI capabilities (only those the agent may ask for are exposed).
#[derive(Clone, Copy)]
pub struct Capabilities(sys::jvmtiCapabilities);

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities(sys::jvmtiCapabilities {
            _bitfield_align_1: [],
            _bitfield_1: Default::default(),
        })
    }
}

macro_rules! capability {
    ($($name:ident, $set:ident = $get:ident, $sys_set:ident;)*) => {
        impl Capabilities {
            $(
                #[doc = concat!("`", stringify!($get), "`")]
                pub fn $name(&self) -> bool {
                    self.0.$get() != 0
                }
                #[doc = concat!("Sets `", stringify!($get), "`.")]
                pub fn $set(&mut self) {
                    self.0.$sys_set(1);
                }
            )*
        }
    };
}

capability! {
    retransform_classes, set_retransform_classes = can_retransform_classes, set_can_retransform_classes;
    retransform_any_class, set_retransform_any_class = can_retransform_any_class, set_can_retransform_any_class;
    gc_events, set_gc_events = can_generate_garbage_collection_events, set_can_generate_garbage_collection_events;
    monitor_events, set_monitor_events = can_generate_monitor_events, set_can_generate_monitor_events;
    tag_objects, set_tag_objects = can_tag_objects, set_can_tag_objects;
    constant_pool, set_constant_pool = can_get_constant_pool, set_can_get_constant_pool;
}

/// What JVMTI tells of a thread.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ThreadInfo {
    /// The Java name.
    pub name: String,
    /// `Thread.isDaemon()`.
    pub daemon: bool,
}

impl Jvmti {
    /// Gets a JVMTI environment from the VM (JVMTI 1.2 suffices: nothing newer is used).
    ///
    /// # Safety
    /// `vm` must be the `JavaVM*` the JVM passed to `Agent_OnLoad`/`Agent_OnAttach`.
    pub(crate) unsafe fn from_vm(vm: *mut jni_sys::JavaVM) -> Result<Jvmti, JvmtiError> {
        let mut env: *mut c_void = ptr::null_mut();
        // SAFETY: `vm` is a valid JavaVM (caller's contract); GetEnv is in the 1.2 table.
        let rc = unsafe { ((**vm).v1_2.GetEnv)(vm, &mut env, sys::JVMTI_VERSION_1_2 as i32) };
        if rc != jni_sys::JNI_OK || env.is_null() {
            return Err(JvmtiError(sys::JVMTI_ERROR_UNSUPPORTED_VERSION));
        }
        Ok(Jvmti(env.cast()))
    }

    /// Wraps the env pointer a JVMTI callback received (the one from `from_vm`).
    pub(super) fn from_raw(env: *mut sys::jvmtiEnv) -> Jvmti {
        Jvmti(env)
    }

    fn table(&self) -> &sys::jvmtiInterface_1_ {
        // SAFETY: self.0 came from GetEnv and stays valid for the VM's life.
        unsafe { &**self.0 }
    }

    /// Calls function `$f` of the table with the environment as first argument.
    fn call<F>(&self, f: Option<F>) -> F {
        // Every function the agent uses exists in JVMTI 1.2, so the slot is filled.
        f.expect("JVMTI function table slot is empty")
    }

    /// Gives the environment back to the VM (a later attach's own environment, when the
    /// agent keeps using its first one). Its capabilities are relinquished.
    pub fn dispose(self) {
        // SAFETY: valid env, not used again by the caller (it is consumed).
        let _ = unsafe { self.call(self.table().DisposeEnvironment)(self.0) };
    }

    /// Capabilities this VM can grant now (fewer after an attach).
    pub fn potential_capabilities(&self) -> Result<Capabilities, JvmtiError> {
        let mut caps = Capabilities::default();
        // SAFETY: valid env, out-pointer to a live jvmtiCapabilities.
        check(unsafe { self.call(self.table().GetPotentialCapabilities)(self.0, &mut caps.0) })?;
        Ok(caps)
    }

    /// Adds capabilities to this environment.
    pub fn add_capabilities(&self, caps: &Capabilities) -> Result<(), JvmtiError> {
        // SAFETY: valid env, pointer to a live jvmtiCapabilities.
        check(unsafe { self.call(self.table().AddCapabilities)(self.0, &caps.0) })
    }

    /// Installs the glue's callbacks for every event of [`Event`].
    pub fn install_callbacks(&self) -> Result<(), JvmtiError> {
        let callbacks = super::callbacks::table();
        let size = std::mem::size_of::<sys::jvmtiEventCallbacks>() as i32;
        // SAFETY: valid env; the table is copied by the VM.
        check(unsafe { self.call(self.table().SetEventCallbacks)(self.0, &callbacks, size) })
    }

    /// Turns `event` on (globally) or off.
    pub fn set_event(&self, event: Event, on: bool) -> Result<(), JvmtiError> {
        let mode = if on {
            sys::JVMTI_ENABLE
        } else {
            sys::JVMTI_DISABLE
        };
        // SAFETY: valid env; a NULL thread means "all threads"; the function is variadic
        // in C but takes no further arguments for this use.
        check(unsafe {
            self.call(self.table().SetEventNotificationMode)(
                self.0,
                mode,
                event.code(),
                ptr::null_mut(),
            )
        })
    }

    /// Whether the VM is in its live phase (JNI and most of JVMTI usable).
    pub fn is_live(&self) -> bool {
        let mut phase: sys::jvmtiPhase = 0;
        // SAFETY: valid env, out-pointer to a local.
        let ok = check(unsafe { self.call(self.table().GetPhase)(self.0, &mut phase) });
        ok.is_ok() && phase == sys::JVMTI_PHASE_LIVE
    }

    /// A VM system property (`sun.java.command`, ...), if set.
    pub fn system_property(&self, name: &str) -> Option<String> {
        let key = CString::new(name).ok()?;
        let mut value: *mut c_char = ptr::null_mut();
        // SAFETY: valid env; key is NUL-terminated; the VM allocates `value`.
        check(unsafe {
            self.call(self.table().GetSystemProperty)(self.0, key.as_ptr(), &mut value)
        })
        .ok()?;
        Some(self.take_string(value))
    }

    /// Copies and frees a JVMTI-allocated modified-UTF-8 string (NULL gives "").
    fn take_string(&self, s: *mut c_char) -> String {
        if s.is_null() {
            return String::new();
        }
        // SAFETY: JVMTI returns NUL-terminated strings that we own until Deallocate.
        let text = mutf8::decode(unsafe { CStr::from_ptr(s) }.to_bytes());
        self.deallocate(s.cast());
        text
    }

    fn deallocate(&self, mem: *mut u8) {
        if !mem.is_null() {
            // SAFETY: `mem` was allocated by this JVMTI environment and is freed once.
            unsafe { self.call(self.table().Deallocate)(self.0, mem) };
        }
    }

    /// Copies `bytes` into memory allocated by JVMTI (which the VM frees), as the
    /// ClassFileLoadHook requires for new class data.
    pub(crate) fn allocate_copy(&self, bytes: &[u8]) -> Result<*mut u8, JvmtiError> {
        let mut mem: *mut u8 = ptr::null_mut();
        // SAFETY: valid env, out-pointer to a local.
        check(unsafe { self.call(self.table().Allocate)(self.0, bytes.len() as i64, &mut mem) })?;
        // SAFETY: `mem` holds bytes.len() writable bytes, disjoint from `bytes`.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), mem, bytes.len()) };
        Ok(mem)
    }

    /// Name and daemon flag of `thread` (live phase only).
    pub fn thread_info(&self, jni: &Jni<'_>, thread: Local<'_>) -> Result<ThreadInfo, JvmtiError> {
        let mut info = sys::jvmtiThreadInfo {
            name: ptr::null_mut(),
            priority: 0,
            is_daemon: false,
            thread_group: ptr::null_mut(),
            context_class_loader: ptr::null_mut(),
        };
        // SAFETY: valid env; `thread` is a live local reference of this thread's frame.
        check(unsafe { self.call(self.table().GetThreadInfo)(self.0, thread.raw(), &mut info) })?;
        // The group and loader come back as local references we do not need.
        jni.delete_raw_local(info.thread_group);
        jni.delete_raw_local(info.context_class_loader);
        Ok(ThreadInfo {
            name: self.take_string(info.name),
            daemon: info.is_daemon,
        })
    }

    /// Every live Java thread visible to JVMTI (not the VM's hidden ones), as local
    /// references of `jni`'s frame.
    pub fn all_threads<'a>(&self, jni: &'a Jni<'_>) -> Result<Vec<Local<'a>>, JvmtiError> {
        let mut count = 0;
        let mut threads: *mut jni_sys::jobject = ptr::null_mut();
        // SAFETY: valid env, out-pointers to locals; the array is ours to Deallocate.
        check(unsafe { self.call(self.table().GetAllThreads)(self.0, &mut count, &mut threads) })?;
        Ok(self.take_refs(jni, threads, count))
    }

    /// Per live thread, the obsolete method versions its frames run: code a
    /// retransformation replaced while the frame ran it (the JVM runs such a frame to
    /// its end in the old code), as method ids. Only the `max_frames` innermost frames
    /// of each thread are looked at; threads without such frames are left out.
    pub fn obsolete_frames(
        &self,
        jni: &Jni<'_>,
        max_frames: i32,
    ) -> Result<Vec<Vec<usize>>, JvmtiError> {
        let mut infos: *mut sys::jvmtiStackInfo = ptr::null_mut();
        let mut count = 0;
        // SAFETY: valid env, out-pointers to locals; the block (the infos and their
        // frame buffers) is ours to Deallocate, the thread references are locals of
        // this thread's frame.
        check(unsafe {
            self.call(self.table().GetAllStackTraces)(self.0, max_frames, &mut infos, &mut count)
        })?;
        if infos.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: JVMTI filled `count` stack infos into `infos`.
        let stacks = unsafe { std::slice::from_raw_parts(infos, count.max(0) as usize) };
        let mut out = Vec::new();
        for stack in stacks {
            let frames = if stack.frame_buffer.is_null() {
                &[][..]
            } else {
                // SAFETY: each info's buffer holds its `frame_count` frames.
                unsafe {
                    std::slice::from_raw_parts(
                        stack.frame_buffer,
                        stack.frame_count.max(0) as usize,
                    )
                }
            };
            let obsolete: Vec<usize> = frames
                .iter()
                .filter(|f| self.is_method_obsolete(f.method))
                .map(|f| f.method as usize)
                .collect();
            if !obsolete.is_empty() {
                out.push(obsolete);
            }
            jni.delete_raw_local(stack.thread);
        }
        self.deallocate(infos.cast());
        Ok(out)
    }

    fn is_method_obsolete(&self, method: jni_sys::jmethodID) -> bool {
        let mut obsolete = false;
        // SAFETY: valid env; `method` comes from a stack trace the VM just returned
        // (method ids live as long as their class); out-pointer to a local.
        let rc = unsafe { self.call(self.table().IsMethodObsolete)(self.0, method, &mut obsolete) };
        rc == sys::JVMTI_ERROR_NONE && obsolete
    }

    /// Every class loaded, as local references of `jni`'s frame.
    pub fn loaded_classes<'a>(&self, jni: &'a Jni<'_>) -> Result<Vec<Local<'a>>, JvmtiError> {
        let mut count = 0;
        let mut classes: *mut jni_sys::jclass = ptr::null_mut();
        // SAFETY: valid env, out-pointers to locals; the array is ours to Deallocate.
        check(unsafe {
            self.call(self.table().GetLoadedClasses)(self.0, &mut count, &mut classes)
        })?;
        Ok(self.take_refs(jni, classes, count))
    }

    fn take_refs<'a>(
        &self,
        jni: &'a Jni<'_>,
        array: *mut jni_sys::jobject,
        count: i32,
    ) -> Vec<Local<'a>> {
        if array.is_null() {
            return Vec::new();
        }
        // SAFETY: JVMTI filled `count` references into `array`.
        let refs = unsafe { std::slice::from_raw_parts(array, count.max(0) as usize) };
        let out = refs.iter().map(|&r| jni.wrap(r)).collect();
        self.deallocate(array.cast());
        out
    }

    /// The JVM type signature of a class: `Ljava/lang/String;`, `[I`.
    pub fn class_signature(&self, class: Local<'_>) -> Result<String, JvmtiError> {
        let mut sig: *mut c_char = ptr::null_mut();
        // SAFETY: valid env; `class` is a live jclass reference; a NULL generic pointer
        // tells the VM not to return the generic signature.
        check(unsafe {
            self.call(self.table().GetClassSignature)(
                self.0,
                class.raw(),
                &mut sig,
                ptr::null_mut(),
            )
        })?;
        Ok(self.take_string(sig))
    }

    /// Whether some method `class` declares satisfies `pred`, given its name, its
    /// descriptor (`""` unless `descriptors`: half the work when nobody needs it) and a
    /// way to ask its modifiers; stops at the first. What the rewriter would see in the
    /// class file, without the class file. Fails for a class not yet prepared.
    pub fn any_method(
        &self,
        class: Local<'_>,
        descriptors: bool,
        mut pred: impl FnMut(&str, &str, &dyn Fn() -> i32) -> bool,
    ) -> Result<bool, JvmtiError> {
        let mut count = 0;
        let mut methods: *mut jni_sys::jmethodID = ptr::null_mut();
        // SAFETY: valid env; live jclass reference; out-pointers to locals; the array
        // is ours to Deallocate.
        check(unsafe {
            self.call(self.table().GetClassMethods)(self.0, class.raw(), &mut count, &mut methods)
        })?;
        if methods.is_null() {
            return Ok(false);
        }
        // SAFETY: JVMTI filled `count` method ids into `methods`.
        let ids = unsafe { std::slice::from_raw_parts(methods, count.max(0) as usize) };
        let mut result = Ok(false);
        for &id in ids {
            let mut name: *mut c_char = ptr::null_mut();
            let mut sig: *mut c_char = ptr::null_mut();
            let sig_ptr: *mut *mut c_char = if descriptors {
                &mut sig
            } else {
                ptr::null_mut()
            };
            // SAFETY: valid env; `id` is a method of a live class; out-pointers to locals
            // or NULL (JVMTI then skips that string); the strings are ours to Deallocate.
            let named = check(unsafe {
                self.call(self.table().GetMethodName)(
                    self.0,
                    id,
                    &mut name,
                    sig_ptr,
                    ptr::null_mut(),
                )
            });
            if let Err(e) = named {
                result = Err(e);
                break;
            }
            let modifiers = || {
                let mut m = 0;
                // SAFETY: valid env; live method id; out-pointer to a local.
                let ok = check(unsafe {
                    self.call(self.table().GetMethodModifiers)(self.0, id, &mut m)
                });
                // Unknown modifiers: treated as a method with code.
                if ok.is_ok() {
                    m
                } else {
                    0
                }
            };
            let found = {
                let name_text = self.borrow_string(name);
                let sig_text = self.borrow_string(sig);
                pred(&name_text, &sig_text, &modifiers)
            };
            self.deallocate(name.cast());
            self.deallocate(sig.cast());
            if found {
                result = Ok(true);
                break;
            }
        }
        self.deallocate(methods.cast());
        result
    }

    /// A JVMTI-allocated modified-UTF-8 string as text, without copying when it is
    /// plain UTF-8 (NULL gives ""). The caller deallocates it afterwards.
    fn borrow_string<'s>(&self, s: *const c_char) -> std::borrow::Cow<'s, str> {
        if s.is_null() {
            return std::borrow::Cow::Borrowed("");
        }
        // SAFETY: JVMTI returns NUL-terminated strings, alive until deallocated, which
        // the caller does only after the returned text is dropped.
        let bytes = unsafe { CStr::from_ptr(s) }.to_bytes();
        match std::str::from_utf8(bytes) {
            Ok(t) if !t.contains('\u{0}') => std::borrow::Cow::Borrowed(t),
            _ => std::borrow::Cow::Owned(mutf8::decode(bytes)),
        }
    }

    /// The constant pool of `class` in class-file form (its entries, without the
    /// count), and the count. Needs `can_get_constant_pool`; works for a class not yet
    /// linked.
    pub fn constant_pool(&self, class: Local<'_>) -> Result<(u16, Vec<u8>), JvmtiError> {
        let mut count = 0;
        let mut len = 0;
        let mut bytes: *mut u8 = ptr::null_mut();
        // SAFETY: valid env; live jclass reference; out-pointers to locals; the bytes
        // are ours to Deallocate.
        check(unsafe {
            self.call(self.table().GetConstantPool)(
                self.0,
                class.raw(),
                &mut count,
                &mut len,
                &mut bytes,
            )
        })?;
        let out = if bytes.is_null() {
            Vec::new()
        } else {
            // SAFETY: JVMTI filled `len` bytes at `bytes`.
            unsafe { std::slice::from_raw_parts(bytes, len.max(0) as usize) }.to_vec()
        };
        self.deallocate(bytes);
        Ok((u16::try_from(count).unwrap_or(u16::MAX), out))
    }

    /// The class loader of `class` (`None`: the bootstrap loader).
    pub fn class_loader<'a>(
        &self,
        jni: &'a Jni<'_>,
        class: Local<'_>,
    ) -> Result<Option<Local<'a>>, JvmtiError> {
        let mut loader: jni_sys::jobject = ptr::null_mut();
        // SAFETY: valid env; live jclass reference; out-pointer to a local; the loader
        // comes back as a local reference of this thread's frame.
        check(unsafe { self.call(self.table().GetClassLoader)(self.0, class.raw(), &mut loader) })?;
        Ok((!loader.is_null()).then(|| jni.wrap(loader)))
    }

    /// Whether `class` may be retransformed (not an array, primitive or hidden class).
    pub fn is_modifiable_class(&self, class: Local<'_>) -> bool {
        let mut yes = false;
        // SAFETY: valid env; live jclass reference; out-pointer to a local.
        let ok = check(unsafe {
            self.call(self.table().IsModifiableClass)(self.0, class.raw(), &mut yes)
        });
        ok.is_ok() && yes
    }

    /// Retransforms `classes`: the ClassFileLoadHook sees their original bytes again.
    pub fn retransform_classes(&self, classes: &[Local<'_>]) -> Result<(), JvmtiError> {
        if classes.is_empty() {
            return Ok(());
        }
        let raw: Vec<jni_sys::jclass> = classes.iter().map(|c| c.raw()).collect();
        // SAFETY: valid env; `raw` holds live jclass references.
        check(unsafe {
            self.call(self.table().RetransformClasses)(self.0, raw.len() as i32, raw.as_ptr())
        })
    }

    /// The tag of `object` (0 when untagged). Needs `can_tag_objects`.
    pub fn tag(&self, object: Local<'_>) -> Result<i64, JvmtiError> {
        let mut tag = 0i64;
        // SAFETY: valid env; live reference; out-pointer to a local.
        check(unsafe { self.call(self.table().GetTag)(self.0, object.raw(), &mut tag) })?;
        Ok(tag)
    }

    /// Tags `object` with `tag`. Needs `can_tag_objects`.
    pub fn set_tag(&self, object: Local<'_>, tag: i64) -> Result<(), JvmtiError> {
        // SAFETY: valid env; live reference.
        check(unsafe { self.call(self.table().SetTag)(self.0, object.raw(), tag) })
    }
}
