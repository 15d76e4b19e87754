//! Native class-file rewriting for method tracing: pure functions over bytes.
//!
//! sonda's JVMTI agent calls [`instrument`] from its ClassFileLoadHook. For every
//! method the selector picks, the rewriter adds
//! - an entry probe `push id; invokestatic Probe.enter(I)V` at the start (in a
//!   constructor: right after the `super()`/`this()` call, see `init_site`),
//! - an exit probe `push id; invokestatic Probe.exit(I)V` before every `*return`,
//! - a catch-all exception handler at the end of the code that calls
//!   `Probe.exit_exception(I)V` and rethrows, registered after the existing handlers
//!   so they keep precedence, and covering neither the probes nor the returns,
//!
//! so that every recorded entry gets exactly one recorded exit, normal or by
//! exception. The technique follows async-profiler's `instrument.cpp` (one pass over
//! the raw bytes, constants appended to the pool, offsets relocated); the JVM
//! verifier (`-Xverify:all`) is the judge in this crate's tests.
//!
//! Any error leaves the class as it was: `instrument` returns `Err` and the caller
//! loads the original bytes. No input makes these functions panic.
//!
//! # Limitations (each a typed refusal or a documented choice)
//! - `jsr`/`ret` (pre-Java-6 compilers' `finally`): refused, [`RewriteError::Subroutine`].
//! - A conditional branch pushed past ±32 KiB by the probes: refused
//!   ([`RewriteError::JumpOverflow`]); only `goto`/`jsr` are widened.
//! - Code type annotations (`Runtime{Visible,Invisible}TypeAnnotations` inside Code)
//!   and `CharacterRangeTable` are dropped rather than relocated; other unknown Code
//!   attributes are copied unchanged.
//! - An existing handler whose range covers a return also covers that return's exit
//!   probe (branch-target semantics). Should the probe call itself throw (a
//!   `StackOverflowError` while calling the native), such a handler could run and a
//!   later return record a second exit.
//! - An empty `finalize()V` is never offered to the selector: probes would make it
//!   non-empty, and the JVM would then register every instance for finalization.
//! - Constructors: the init-call analysis gives up (typed error) past a fixed work
//!   budget, which only pathological code reaches.
//! - The probe class must not run Java code in its static initialiser: the first
//!   probe call may come from a JDK class's `<clinit>` early in JVM bootstrap, and
//!   initialising other classes then can break them (seen with `Unsafe` before its
//!   constants are injected).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod annotations;
mod bytes;
mod class_file;
mod code_attribute;
mod constant_pool;
mod descriptor;
mod error;
mod init_site;
mod layout;
mod mutf8;
mod opcodes;
mod probe_class;
mod probe_code;
mod stack_map;

use std::borrow::Cow;

use crate::bytes::Put;
use crate::class_file::{ClassFile, ACC_ABSTRACT, ACC_NATIVE};
use crate::constant_pool::Appender;
use crate::error::malformed;
use crate::probe_code::{ProbeCode, ProbeRefs};

pub use crate::error::RewriteError;
pub use crate::probe_class::probe_class_bytes;

/// Where the probes live: a class with three `public static native void m(int)`
/// methods (see [`probe_class_bytes`]).
#[derive(Debug, Clone, Copy)]
pub struct ProbeClass<'a> {
    /// Internal name, e.g. `sonda/Probe`.
    pub class: &'a str,
    /// Called with the method id on entry.
    pub enter: &'a str,
    /// Called with the method id before each return.
    pub exit: &'a str,
    /// Called with the method id when an exception leaves the method.
    pub exit_exception: &'a str,
}

/// What the selector is told about each method (native and abstract methods are
/// never offered).
#[derive(Debug, Clone, Copy)]
pub struct MethodInfo<'a> {
    /// Internal form of the declaring class, e.g. `java/util/HashMap$Node`.
    pub class: &'a str,
    /// Method name, e.g. `get`, `<init>`, `<clinit>`.
    pub name: &'a str,
    /// Method descriptor, e.g. `(Ljava/lang/Object;)Ljava/lang/Object;`.
    pub descriptor: &'a str,
    /// Method access flags.
    pub access: u16,
    /// Type descriptors (`Ljakarta/ws/rs/Path;`) of the class's annotations,
    /// runtime visible and invisible.
    pub class_annotations: &'a [&'a str],
    /// Type descriptors of the method's annotations, runtime visible and invisible.
    pub method_annotations: &'a [&'a str],
}

/// An instrumented method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstrumentedMethod {
    /// The id the selector gave it (the probes' argument).
    pub id: u32,
    /// Method name.
    pub name: String,
    /// Method descriptor.
    pub descriptor: String,
}

/// A rewritten class.
#[derive(Debug, Clone)]
pub struct Instrumented {
    /// The new class file.
    pub bytes: Vec<u8>,
    /// The methods that got probes, in class-file order.
    pub methods: Vec<InstrumentedMethod>,
}

/// The class's own name (`this_class`), read cheaply from the header and constant
/// pool; `None` if the bytes are not a readable class file. Useful because hidden
/// and lambda classes reach the ClassFileLoadHook with a NULL name.
pub fn class_name(class: &[u8]) -> Option<String> {
    let (_, cp) = class_file::parse_head(class).ok()?;
    let this = bytes::u16_at(class, cp.end + 2)?;
    cp.class_name(this).map(Cow::into_owned)
}

/// Rewrites `class`: each method for which `select` returns `Some(id)` gets probes
/// called with `id`. `Ok(None)` when nothing was selected (or `class` is the probe
/// class itself): the class stays untouched. `Err` when the class cannot be
/// rewritten; the caller then loads it unchanged.
pub fn instrument(
    class: &[u8],
    probe: &ProbeClass<'_>,
    select: &mut dyn FnMut(&MethodInfo<'_>) -> Option<u32>,
) -> Result<Option<Instrumented>, RewriteError> {
    let cf = ClassFile::parse(class)?;
    if !(45..=61).contains(&cf.major) {
        return Err(RewriteError::UnsupportedVersion { major: cf.major });
    }
    let this = cf
        .cp
        .class_name(cf.this_class)
        .ok_or(malformed("this_class is not a Class constant"))?;
    if this == probe.class {
        return Ok(None);
    }
    let mut class_annotations = Vec::new();
    annotations::collect(&cf, &cf.attributes, &mut class_annotations)?;
    let class_annotations: Vec<&str> = class_annotations.iter().map(|s| s.as_ref()).collect();

    // (method index, id, name, descriptor)
    let mut selected: Vec<(usize, u32, Cow<'_, str>, Cow<'_, str>)> = Vec::new();
    for (index, m) in cf.methods.iter().enumerate() {
        if m.access & (ACC_NATIVE | ACC_ABSTRACT) != 0
            || !m.attributes.iter().any(|a| cf.is(a, "Code"))
        {
            continue;
        }
        let name = cf
            .cp
            .utf8(m.name)
            .ok_or(malformed("method name is not a Utf8 constant"))?;
        let descriptor = cf
            .cp
            .utf8(m.descriptor)
            .ok_or(malformed("method descriptor is not a Utf8 constant"))?;
        if name == "finalize" && descriptor == "()V" && is_empty_code(&cf, m) {
            // The JVM registers objects for finalization only when their class has a
            // non-empty finalize(); probes in an empty one (as in java.lang.Object)
            // would make every such object finalizable.
            continue;
        }
        let mut method_annotations = Vec::new();
        annotations::collect(&cf, &m.attributes, &mut method_annotations)?;
        let method_annotations: Vec<&str> = method_annotations.iter().map(|s| s.as_ref()).collect();
        let info = MethodInfo {
            class: &this,
            name: &name,
            descriptor: &descriptor,
            access: m.access,
            class_annotations: &class_annotations,
            method_annotations: &method_annotations,
        };
        if let Some(id) = select(&info) {
            selected.push((index, id, name, descriptor));
        }
    }
    if selected.is_empty() {
        return Ok(None);
    }
    rewrite(&cf, &this, probe, &selected).map(Some)
}

/// Whether the method's code is a lone `return`.
fn is_empty_code(cf: &ClassFile<'_>, m: &class_file::Method) -> bool {
    m.attributes
        .iter()
        .find(|a| cf.is(a, "Code"))
        .is_some_and(|a| cf.info(a).get(4..9) == Some(&[0, 0, 0, 1, opcodes::RETURN][..]))
}

fn rewrite(
    cf: &ClassFile<'_>,
    this: &str,
    probe: &ProbeClass<'_>,
    selected: &[(usize, u32, Cow<'_, str>, Cow<'_, str>)],
) -> Result<Instrumented, RewriteError> {
    let mut cp = Appender::new(cf.cp.count());
    let probe_class = cp.class(probe.class)?;
    let refs = ProbeRefs {
        enter: cp.methodref(probe_class, probe.enter, "(I)V")?,
        exit: cp.methodref(probe_class, probe.exit, "(I)V")?,
        exit_exception: cp.methodref(probe_class, probe.exit_exception, "(I)V")?,
    };
    let frames = cf.major >= 50;
    let throwable = if frames {
        Some(cp.class("java/lang/Throwable")?)
    } else {
        None
    };
    let stack_map_name = if frames {
        Some(cp.utf8("StackMapTable")?)
    } else {
        None
    };

    let mut new_methods: Vec<Option<Vec<u8>>> = vec![None; cf.methods.len()];
    let mut methods = Vec::with_capacity(selected.len());
    for (index, id, name, descriptor) in selected {
        let m = &cf.methods[*index];
        let constructor = name == "<init>" && this != "java/lang/Object";
        let cx = code_attribute::Context {
            class: cf,
            throwable,
            stack_map_name,
            constructor,
        };
        let named = |e: error::MethodError| e.naming(format!("{this}.{name}{descriptor}"));
        let probes = ProbeCode::new(*id, refs, &mut cp)?;
        let mut out = Vec::with_capacity(m.span.len() + 128);
        out.extend_from_slice(&cf.data[m.span.start..m.span.start + 6]);
        out.put_u16(m.attributes.len() as u16);
        let mut codes = 0;
        for a in &m.attributes {
            out.put_u16(a.name);
            if cf.is(a, "Code") {
                codes += 1;
                let code = code_attribute::rewrite(&cx, cf.info(a), &probes).map_err(named)?;
                out.put_u32(code.len() as u32);
                out.extend_from_slice(&code);
            } else {
                out.put_u32(a.info.len() as u32);
                out.extend_from_slice(cf.info(a));
            }
        }
        if codes != 1 {
            return Err(named(error::MethodError::Malformed(
                "more than one Code attribute",
            )));
        }
        new_methods[*index] = Some(out);
        methods.push(InstrumentedMethod {
            id: *id,
            name: name.clone().into_owned(),
            descriptor: descriptor.clone().into_owned(),
        });
    }

    let d = cf.data;
    let mut bytes = Vec::with_capacity(d.len() + cp.bytes().len() + 256 * methods.len());
    bytes.extend_from_slice(&d[..8]);
    bytes.put_u16(cp.count());
    bytes.extend_from_slice(&d[10..cf.cp.end]);
    bytes.extend_from_slice(cp.bytes());
    bytes.extend_from_slice(&d[cf.middle.clone()]);
    bytes.put_u16(cf.methods.len() as u16);
    for (m, new) in cf.methods.iter().zip(&new_methods) {
        match new {
            Some(b) => bytes.extend_from_slice(b),
            None => bytes.extend_from_slice(&d[m.span.clone()]),
        }
    }
    bytes.extend_from_slice(&d[cf.tail.clone()]);
    Ok(Instrumented { bytes, methods })
}
