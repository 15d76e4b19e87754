//! A loaded class's class file, read again from its loader's resources
//! (`<name>.class`): to tell, before retransforming a class, whether it declares a
//! method the filter selects, when JVMTI cannot say — the class is loaded but not yet
//! linked (`GetClassMethods` answers `CLASS_NOT_PREPARED`), or the filter selects by
//! annotation, which JVMTI does not show. Retransforming costs far more than reading
//! and parsing the file (a safepoint, a new class version), and a large application
//! holds hundreds of such classes.
//!
//! The bytes are those the loader would load: a class made at run time (a proxy, a
//! lambda) has none, and then the caller retransforms anyway. Runs the loader's Java
//! code, with the calling thread's records muted.

use crate::buffers;
use crate::jvmti::{Jni, Jvmti, Local};

/// The class file of `class` (internal name `name`) as its loader's resource, if any.
pub fn read(jvmti: Jvmti, jni: &Jni<'_>, class: Local<'_>, name: &str) -> Option<Vec<u8>> {
    buffers::muted(|| {
        let loader = jvmti.class_loader(jni, class).ok()?;
        let loader_class = jni.find_class(c"java/lang/ClassLoader").ok()?;
        let resource = format!("{name}.class");
        let stream = jni
            .call_object_with_string(
                loader,
                loader_class,
                if loader.is_some() {
                    c"getResourceAsStream"
                } else {
                    c"getSystemResourceAsStream"
                },
                c"(Ljava/lang/String;)Ljava/io/InputStream;",
                &resource,
            )
            .ok();
        jni.delete_local(loader_class);
        if let Some(l) = loader {
            jni.delete_local(l);
        }
        let stream = stream.filter(|s| !s.is_null())?;
        let bytes = jni
            .find_class(c"java/io/InputStream")
            .ok()
            .and_then(|input| {
                let array = jni
                    .call_object_noarg(stream, input, c"readAllBytes", c"()[B")
                    .ok()
                    .filter(|a| !a.is_null());
                let bytes = array.and_then(|a| {
                    let b = jni.byte_array(a).ok();
                    jni.delete_local(a);
                    b
                });
                let _ = jni.call_void_noarg(stream, input, c"close");
                jni.delete_local(input);
                bytes
            });
        jni.delete_local(stream);
        bytes
    })
}
