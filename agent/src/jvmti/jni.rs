//! One thread's JNI environment, with the few JNI operations the agent needs, each
//! checked for a pending Java exception (which is cleared and turned into an error, so
//! the application never sees an exception the agent caused).

use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::ptr;

use jni_sys::{jobject, jvalue, JNIEnv};

use super::mutf8;

/// A JNI call failed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum JniError {
    /// The call threw; the text is the exception's `toString()` (now cleared).
    Exception(String),
    /// The call returned NULL or an error code without an exception.
    Failed(&'static str),
}

impl fmt::Display for JniError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JniError::Exception(e) => write!(f, "Java exception: {e}"),
            JniError::Failed(what) => write!(f, "{what} failed"),
        }
    }
}

impl std::error::Error for JniError {}

/// The current thread's JNI environment, valid during one JVMTI callback (or one
/// `Agent_OnAttach` call). Not `Send`: a JNIEnv belongs to its thread.
pub struct Jni<'a> {
    env: *mut JNIEnv,
    _frame: PhantomData<&'a ()>,
}

/// A JNI local reference, valid while the [`Jni`] it came from is (the callback's frame).
#[derive(Clone, Copy)]
pub struct Local<'a> {
    raw: jobject,
    _frame: PhantomData<&'a ()>,
}

impl Local<'_> {
    pub(crate) fn raw(&self) -> jobject {
        self.raw
    }

    /// Whether this is a NULL reference.
    pub fn is_null(&self) -> bool {
        self.raw.is_null()
    }
}

impl<'a> Jni<'a> {
    /// Wraps the env the JVM handed to a callback.
    ///
    /// # Safety
    /// `env` must be the current thread's valid JNIEnv, for the whole lifetime `'a`.
    pub(crate) unsafe fn new(env: *mut JNIEnv) -> Option<Jni<'a>> {
        (!env.is_null()).then_some(Jni {
            env,
            _frame: PhantomData,
        })
    }

    fn t(&self) -> &jni_sys::JNINativeInterface_ {
        // SAFETY: `env` is the current thread's valid JNIEnv (constructor contract).
        unsafe { &**self.env }
    }

    pub(crate) fn wrap(&self, raw: jobject) -> Local<'a> {
        Local {
            raw,
            _frame: PhantomData,
        }
    }

    /// Frees a local reference early (loops over many classes or threads).
    pub fn delete_local(&self, local: Local<'_>) {
        self.delete_raw_local(local.raw);
    }

    pub(crate) fn delete_raw_local(&self, raw: jobject) {
        if !raw.is_null() {
            // SAFETY: `raw` is a local reference of this thread's current frame.
            unsafe { (self.t().v1_1.DeleteLocalRef)(self.env, raw) };
        }
    }

    /// Clears a pending exception, returning its description.
    fn take_exception(&self) -> Option<String> {
        // SAFETY: valid env; ExceptionCheck/Occurred/Clear may be called with one pending.
        unsafe {
            if !(self.t().v1_2.ExceptionCheck)(self.env) {
                return None;
            }
            let throwable = (self.t().v1_1.ExceptionOccurred)(self.env);
            (self.t().v1_1.ExceptionClear)(self.env);
            let text = self.describe(throwable);
            self.delete_raw_local(throwable);
            Some(text)
        }
    }

    /// `throwable.toString()`, or a placeholder if even that fails.
    fn describe(&self, throwable: jobject) -> String {
        if throwable.is_null() {
            return "unknown exception".into();
        }
        // SAFETY: valid env, live reference; the method id is checked before use and
        // toString takes no arguments. Exceptions thrown here are cleared.
        unsafe {
            let object = (self.t().v1_1.FindClass)(self.env, c"java/lang/Object".as_ptr());
            let mid = if object.is_null() {
                ptr::null_mut()
            } else {
                (self.t().v1_1.GetMethodID)(
                    self.env,
                    object,
                    c"toString".as_ptr(),
                    c"()Ljava/lang/String;".as_ptr(),
                )
            };
            self.delete_raw_local(object);
            let s = if mid.is_null() {
                ptr::null_mut()
            } else {
                (self.t().v1_1.CallObjectMethodA)(self.env, throwable, mid, ptr::null())
            };
            if (self.t().v1_2.ExceptionCheck)(self.env) {
                (self.t().v1_1.ExceptionClear)(self.env);
            }
            let text = self
                .string_value_raw(s)
                .unwrap_or_else(|| "exception".into());
            self.delete_raw_local(s);
            text
        }
    }

    /// Fails with the pending exception, if any, else with `what` when `ok` is false.
    fn checked<T>(&self, value: T, ok: bool, what: &'static str) -> Result<T, JniError> {
        if let Some(e) = self.take_exception() {
            return Err(JniError::Exception(e));
        }
        if ok {
            Ok(value)
        } else {
            Err(JniError::Failed(what))
        }
    }

    /// Looks a class up by internal name (`java/lang/Thread`), without initialising it.
    pub fn find_class(&self, name: &CStr) -> Result<Local<'a>, JniError> {
        // SAFETY: valid env; NUL-terminated name.
        let c = unsafe { (self.t().v1_1.FindClass)(self.env, name.as_ptr()) };
        self.checked(self.wrap(c), !c.is_null(), "FindClass")
    }

    /// Defines a class in the bootstrap loader (JNI `DefineClass` with a NULL loader).
    pub fn define_boot_class(&self, name: &str, bytes: &[u8]) -> Result<Local<'a>, JniError> {
        let name = CString::new(name).map_err(|_| JniError::Failed("class name with NUL"))?;
        // SAFETY: valid env; NUL-terminated name; `bytes` is a readable buffer of the
        // given length which the VM only reads during the call.
        let c = unsafe {
            (self.t().v1_1.DefineClass)(
                self.env,
                name.as_ptr(),
                ptr::null_mut(),
                bytes.as_ptr().cast(),
                bytes.len() as i32,
            )
        };
        self.checked(self.wrap(c), !c.is_null(), "DefineClass")
    }

    /// Whether two references denote the same object.
    pub fn same_object(&self, a: Local<'_>, b: Local<'_>) -> bool {
        // SAFETY: valid env; live (possibly NULL) references.
        unsafe { (self.t().v1_1.IsSameObject)(self.env, a.raw, b.raw) }
    }

    /// Calls `static void name(int)` of `class`.
    pub fn call_static_void_int(
        &self,
        class: Local<'_>,
        name: &CStr,
        arg: i32,
    ) -> Result<(), JniError> {
        // SAFETY: valid env; live class reference; the method id was looked up with
        // signature (I)V and is called with exactly one int argument.
        unsafe {
            let mid = (self.t().v1_1.GetStaticMethodID)(
                self.env,
                class.raw,
                name.as_ptr(),
                c"(I)V".as_ptr(),
            );
            self.checked((), !mid.is_null(), "GetStaticMethodID")?;
            let args = [jvalue { i: arg }];
            (self.t().v1_1.CallStaticVoidMethodA)(self.env, class.raw, mid, args.as_ptr());
        }
        self.checked((), true, "CallStaticVoidMethodA")
    }

    /// The class of `object`.
    pub fn object_class(&self, object: Local<'_>) -> Result<Local<'a>, JniError> {
        // SAFETY: valid env; live reference.
        let c = unsafe { (self.t().v1_1.GetObjectClass)(self.env, object.raw) };
        self.checked(self.wrap(c), !c.is_null(), "GetObjectClass")
    }

    /// Reads a `long` instance field by name (access checks do not apply to JNI).
    pub fn long_field(
        &self,
        object: Local<'_>,
        class: Local<'_>,
        name: &CStr,
    ) -> Result<i64, JniError> {
        // SAFETY: valid env; live references; the field id is checked non-NULL and was
        // looked up with signature "J", matching GetLongField.
        unsafe {
            let fid = (self.t().v1_1.GetFieldID)(self.env, class.raw, name.as_ptr(), c"J".as_ptr());
            self.checked((), !fid.is_null(), "GetFieldID")?;
            let v = (self.t().v1_1.GetLongField)(self.env, object.raw, fid);
            self.checked(v, true, "GetLongField")
        }
    }

    /// Initialises `class` (runs its static initialiser) by looking up one of its
    /// static methods, which JNI specifies as initialising.
    pub fn initialise_via_static_method(
        &self,
        class: Local<'_>,
        name: &CStr,
        sig: &CStr,
    ) -> Result<(), JniError> {
        // SAFETY: valid env; live class reference; NUL-terminated strings.
        let mid = unsafe {
            (self.t().v1_1.GetStaticMethodID)(self.env, class.raw, name.as_ptr(), sig.as_ptr())
        };
        self.checked((), !mid.is_null(), "GetStaticMethodID")
    }

    /// Calls a static method taking no argument and returning an object.
    pub fn call_static_object_noarg(
        &self,
        class: Local<'_>,
        name: &CStr,
        sig: &CStr,
    ) -> Result<Local<'a>, JniError> {
        if !sig.to_bytes().starts_with(b"()L") && !sig.to_bytes().starts_with(b"()[") {
            return Err(JniError::Failed(
                "call_static_object_noarg with a non-object signature",
            ));
        }
        // SAFETY: valid env; the signature was checked to take no argument and return a
        // reference, which is what CallStaticObjectMethodA with no arguments requires.
        unsafe {
            let mid =
                (self.t().v1_1.GetStaticMethodID)(self.env, class.raw, name.as_ptr(), sig.as_ptr());
            self.checked((), !mid.is_null(), "GetStaticMethodID")?;
            let o = (self.t().v1_1.CallStaticObjectMethodA)(self.env, class.raw, mid, ptr::null());
            self.checked(self.wrap(o), true, "CallStaticObjectMethodA")
        }
    }

    /// Calls `String name(String)` on `object` (the method may be private).
    pub fn call_string_to_string(
        &self,
        object: Local<'_>,
        class: Local<'_>,
        name: &CStr,
        arg: &str,
    ) -> Result<Option<String>, JniError> {
        let text = self.new_string(arg)?;
        // SAFETY: valid env; live references; the method id was looked up with the
        // signature (String)String and is called with one jstring argument.
        let result = unsafe {
            let mid = (self.t().v1_1.GetMethodID)(
                self.env,
                class.raw,
                name.as_ptr(),
                c"(Ljava/lang/String;)Ljava/lang/String;".as_ptr(),
            );
            self.checked((), !mid.is_null(), "GetMethodID")?;
            let args = [jvalue { l: text.raw }];
            let s = (self.t().v1_1.CallObjectMethodA)(self.env, object.raw, mid, args.as_ptr());
            self.checked(s, true, "CallObjectMethodA")?
        };
        self.delete_local(text);
        let value = self.string_value_raw(result);
        self.delete_raw_local(result);
        Ok(value)
    }

    /// Calls `name`, a method taking one `String` and returning an object, on `object`
    /// (an instance of `class`), or on `class` itself when `object` is `None` (static).
    pub fn call_object_with_string(
        &self,
        object: Option<Local<'_>>,
        class: Local<'_>,
        name: &CStr,
        sig: &CStr,
        arg: &str,
    ) -> Result<Local<'a>, JniError> {
        let sig_bytes = sig.to_bytes();
        if !sig_bytes.starts_with(b"(Ljava/lang/String;)L")
            && !sig_bytes.starts_with(b"(Ljava/lang/String;)[")
        {
            return Err(JniError::Failed(
                "call_object_with_string with another signature",
            ));
        }
        let text = self.new_string(arg)?;
        // SAFETY: valid env; live references; the signature was checked to take one
        // String and return a reference, and the call passes one jstring.
        let result = unsafe {
            let args = [jvalue { l: text.raw }];
            match object {
                Some(o) => {
                    let mid = (self.t().v1_1.GetMethodID)(
                        self.env,
                        class.raw,
                        name.as_ptr(),
                        sig.as_ptr(),
                    );
                    self.checked((), !mid.is_null(), "GetMethodID")?;
                    (self.t().v1_1.CallObjectMethodA)(self.env, o.raw, mid, args.as_ptr())
                }
                None => {
                    let mid = (self.t().v1_1.GetStaticMethodID)(
                        self.env,
                        class.raw,
                        name.as_ptr(),
                        sig.as_ptr(),
                    );
                    self.checked((), !mid.is_null(), "GetStaticMethodID")?;
                    (self.t().v1_1.CallStaticObjectMethodA)(self.env, class.raw, mid, args.as_ptr())
                }
            }
        };
        self.delete_local(text);
        self.checked(self.wrap(result), true, "CallObjectMethodA")
    }

    /// Calls `name`, a method taking nothing and returning an object, on `object`.
    pub fn call_object_noarg(
        &self,
        object: Local<'_>,
        class: Local<'_>,
        name: &CStr,
        sig: &CStr,
    ) -> Result<Local<'a>, JniError> {
        if !sig.to_bytes().starts_with(b"()L") && !sig.to_bytes().starts_with(b"()[") {
            return Err(JniError::Failed(
                "call_object_noarg with a non-object signature",
            ));
        }
        // SAFETY: valid env; live references; the signature was checked to take no
        // argument and return a reference.
        unsafe {
            let mid = (self.t().v1_1.GetMethodID)(self.env, class.raw, name.as_ptr(), sig.as_ptr());
            self.checked((), !mid.is_null(), "GetMethodID")?;
            let o = (self.t().v1_1.CallObjectMethodA)(self.env, object.raw, mid, ptr::null());
            self.checked(self.wrap(o), true, "CallObjectMethodA")
        }
    }

    /// Calls `void name()` on `object`.
    pub fn call_void_noarg(
        &self,
        object: Local<'_>,
        class: Local<'_>,
        name: &CStr,
    ) -> Result<(), JniError> {
        // SAFETY: valid env; live references; the method id was looked up with "()V"
        // and is called with no argument.
        unsafe {
            let mid =
                (self.t().v1_1.GetMethodID)(self.env, class.raw, name.as_ptr(), c"()V".as_ptr());
            self.checked((), !mid.is_null(), "GetMethodID")?;
            (self.t().v1_1.CallVoidMethodA)(self.env, object.raw, mid, ptr::null());
        }
        self.checked((), true, "CallVoidMethodA")
    }

    /// The contents of a `byte[]`.
    pub fn byte_array(&self, array: Local<'_>) -> Result<Vec<u8>, JniError> {
        if array.is_null() {
            return Err(JniError::Failed("byte_array of NULL"));
        }
        // SAFETY: valid env; `array` is a live byte[] reference (callers pass what a
        // method declared as returning byte[] returned); the buffer holds `len` bytes.
        unsafe {
            let len = (self.t().v1_1.GetArrayLength)(self.env, array.raw);
            let mut out = vec![0u8; len.max(0) as usize];
            (self.t().v1_1.GetByteArrayRegion)(
                self.env,
                array.raw,
                0,
                len,
                out.as_mut_ptr().cast(),
            );
            self.checked(out, true, "GetByteArrayRegion")
        }
    }

    /// A new Java string.
    pub fn new_string(&self, s: &str) -> Result<Local<'a>, JniError> {
        let c = CString::new(mutf8::encode(s)).map_err(|_| JniError::Failed("string encoding"))?;
        // SAFETY: valid env; NUL-terminated modified UTF-8 (encode never emits a NUL).
        let o = unsafe { (self.t().v1_1.NewStringUTF)(self.env, c.as_ptr()) };
        self.checked(self.wrap(o), !o.is_null(), "NewStringUTF")
    }

    /// The text of a Java string reference (None for NULL).
    fn string_value_raw(&self, s: jobject) -> Option<String> {
        if s.is_null() {
            return None;
        }
        // SAFETY: valid env; `s` is a live jstring; the chars are released below.
        unsafe {
            let chars = (self.t().v1_1.GetStringUTFChars)(self.env, s, ptr::null_mut());
            if chars.is_null() {
                let _ = self.take_exception();
                return None;
            }
            let text = mutf8::decode(CStr::from_ptr(chars).to_bytes());
            (self.t().v1_1.ReleaseStringUTFChars)(self.env, s, chars);
            Some(text)
        }
    }
}
