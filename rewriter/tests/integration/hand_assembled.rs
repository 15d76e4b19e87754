//! Small classes assembled byte by byte, for the cases javac does not produce:
//! subroutines, constructors without (or with two) init calls, `java/lang/Object`,
//! annotations seen by the selector, the typed errors and their messages.

use sonda_rewriter::{class_name, instrument, ProbeClass, RewriteError};

const PROBE: ProbeClass<'static> = ProbeClass {
    class: "sonda/Probe",
    enter: "enter",
    exit: "exit",
    exit_exception: "exitException",
};

// Constant pool of every assembled class.
const THIS: u16 = 2; // Class "t/T" (or the name given)
const OBJECT_INIT: u16 = 9; // Methodref java/lang/Object.<init>()V
const NAME: u16 = 10;
const DESC: u16 = 11;
const CODE: u16 = 12;
const ANN_VISIBLE: u16 = 13;
const ANN_INVISIBLE: u16 = 14;
const GET: u16 = 15;
const PATH: u16 = 16;

fn utf8(v: &mut Vec<u8>, s: &str) {
    v.push(1);
    v.extend_from_slice(&(s.len() as u16).to_be_bytes());
    v.extend_from_slice(s.as_bytes());
}

fn u16s(v: &mut Vec<u8>, xs: &[u16]) {
    for x in xs {
        v.extend_from_slice(&x.to_be_bytes());
    }
}

struct Method<'a> {
    access: u16,
    name: &'a str,
    desc: &'a str,
    code: &'a [u8],
    annotated: bool,
}

/// A class `this` (super java/lang/Object) of version `major` with one method.
fn class(major: u16, this: &str, m: &Method<'_>) -> Vec<u8> {
    let mut v = vec![0xca, 0xfe, 0xba, 0xbe, 0, 0];
    u16s(&mut v, &[major, 17]);
    utf8(&mut v, this); // 1
    v.push(7);
    u16s(&mut v, &[1]); // 2
    utf8(&mut v, "java/lang/Object"); // 3
    v.push(7);
    u16s(&mut v, &[3]); // 4
    utf8(&mut v, "<init>"); // 5
    utf8(&mut v, "()V"); // 6
    v.push(12);
    u16s(&mut v, &[5, 6]); // 7 NameAndType
    utf8(&mut v, "unused"); // 8
    v.push(10);
    u16s(&mut v, &[4, 7]); // 9 Methodref
    utf8(&mut v, m.name); // 10
    utf8(&mut v, m.desc); // 11
    utf8(&mut v, "Code"); // 12
    utf8(&mut v, "RuntimeVisibleAnnotations"); // 13
    utf8(&mut v, "RuntimeInvisibleAnnotations"); // 14
    utf8(&mut v, "Ljakarta/ws/rs/GET;"); // 15
    utf8(&mut v, "Ljakarta/ws/rs/Path;"); // 16
    u16s(&mut v, &[0x21, THIS, 4, 0, 0, 1]);
    // The method.
    u16s(&mut v, &[m.access, NAME, DESC, 1 + u16::from(m.annotated)]);
    u16s(&mut v, &[CODE]);
    v.extend_from_slice(&(12 + m.code.len() as u32).to_be_bytes());
    u16s(&mut v, &[4, 4]);
    v.extend_from_slice(&(m.code.len() as u32).to_be_bytes());
    v.extend_from_slice(m.code);
    u16s(&mut v, &[0, 0]);
    if m.annotated {
        u16s(&mut v, &[ANN_VISIBLE, 0, 6, 1, GET, 0]);
    }
    // Class attributes: one invisible annotation with an element value.
    u16s(&mut v, &[1, ANN_INVISIBLE, 0, 11, 1, PATH, 1, 8]);
    v.push(b's');
    u16s(&mut v, &[8]);
    v
}

fn method<'a>(name: &'a str, desc: &'a str, code: &'a [u8]) -> Method<'a> {
    Method {
        access: 0x0009,
        name,
        desc,
        code,
        annotated: false,
    }
}

#[test]
fn selector_sees_names_and_annotations() {
    let m = Method {
        annotated: true,
        ..method("get", "()V", &[0xb1])
    };
    let bytes = class(61, "t/T", &m);
    assert_eq!(class_name(&bytes).as_deref(), Some("t/T"));
    let mut seen = Vec::new();
    let out = instrument(&bytes, &PROBE, &mut |mi| {
        seen.push(format!(
            "{} {} {} {:#x} {:?} {:?}",
            mi.class,
            mi.name,
            mi.descriptor,
            mi.access,
            mi.class_annotations,
            mi.method_annotations
        ));
        None
    })
    .unwrap();
    assert!(out.is_none(), "nothing selected: class untouched");
    assert_eq!(
        seen,
        [r#"t/T get ()V 0x9 ["Ljakarta/ws/rs/Path;"] ["Ljakarta/ws/rs/GET;"]"#]
    );
}

#[test]
fn a_lone_return_gets_entry_exit_and_handler() {
    let bytes = class(61, "t/T", &method("m", "()V", &[0xb1]));
    let done = instrument(&bytes, &PROBE, &mut |_| Some(300))
        .unwrap()
        .unwrap();
    assert_eq!(done.methods.len(), 1);
    assert_eq!(
        (done.methods[0].id, done.methods[0].name.as_str()),
        (300, "m")
    );
    let b = &done.bytes;
    // sipush 300; invokestatic enter; sipush 300; invokestatic exit; return;
    // sipush 300; invokestatic exitException; athrow
    let pos = b.windows(3).position(|w| w == [0x11, 1, 44]).unwrap();
    let code = &b[pos..pos + 20];
    assert_eq!(code[3], 0xb8);
    assert_eq!(code[6..9], [0x11, 1, 44]);
    assert_eq!(code[12], 0xb1);
    assert_eq!(code[13..16], [0x11, 1, 44]);
    assert_eq!(code[16], 0xb8);
    assert_eq!(code[19], 0xbf);
    // The code length field just before: 20 bytes.
    assert_eq!(b[pos - 4..pos], [0, 0, 0, 20]);
    // The probe class itself is never rewritten.
    let probe_self = class(61, "sonda/Probe", &method("m", "()V", &[0xb1]));
    assert!(instrument(&probe_self, &PROBE, &mut |_| Some(1))
        .unwrap()
        .is_none());
}

#[test]
fn subroutines_are_refused_and_named() {
    // jsr +4; return; astore_0 (subroutine); ret 0
    let code = [0xa8, 0, 4, 0xb1, 0x4b, 0xa9, 0];
    let bytes = class(49, "t/Old", &method("sub", "()V", &code));
    let e = instrument(&bytes, &PROBE, &mut |_| Some(1)).unwrap_err();
    assert!(matches!(e, RewriteError::Subroutine { .. }), "{e:?}");
    assert_eq!(e.kind(), "subroutine");
    assert_eq!(
        e.to_string(),
        "t/Old.sub()V uses jsr/ret subroutines, which are not rewritten"
    );
}

#[test]
fn constructors_need_one_dominating_init_call() {
    let ctor = |code: &'static [u8]| Method {
        access: 0x0001,
        ..method("<init>", "(I)V", code)
    };
    // aload_0; invokespecial Object.<init>; return
    let ok = class(61, "t/C", &ctor(&[0x2a, 0xb7, 0, OBJECT_INIT as u8, 0xb1]));
    let done = instrument(&ok, &PROBE, &mut |_| Some(2)).unwrap().unwrap();
    // The entry probe (iconst_2; invokestatic) comes right after the init call.
    let at = done
        .bytes
        .windows(4)
        .position(|w| w == [0x2a, 0xb7, 0, 9])
        .unwrap();
    assert_eq!(done.bytes[at + 4], 0x05);
    assert_eq!(done.bytes[at + 5], 0xb8);

    // No init call at all.
    let none = class(61, "t/C", &ctor(&[0xb1]));
    let e = instrument(&none, &PROBE, &mut |_| Some(2)).unwrap_err();
    assert!(matches!(e, RewriteError::InitSite { .. }), "{e:?}");
    assert!(e.to_string().contains("t/C.<init>(I)V"), "{e}");

    // Two init calls on two branches: aload_0; iload_1; ifeq +9; invokespecial;
    // goto +6; invokespecial; return
    let two: &[u8] = &[
        0x2a, 0x1b, 0x99, 0, 9, 0xb7, 0, 9, 0xa7, 0, 6, 0xb7, 0, 9, 0xb1,
    ];
    let e = instrument(&class(61, "t/C", &ctor(two)), &PROBE, &mut |_| Some(2)).unwrap_err();
    assert_eq!(
        e,
        RewriteError::InitSite {
            method: "t/C.<init>(I)V".into(),
            reason: "more than one super()/this() call"
        }
    );

    // java/lang/Object's constructor has no init call: probes from offset 0.
    let object = class(61, "java/lang/Object", &ctor(&[0xb1]));
    let done = instrument(&object, &PROBE, &mut |_| Some(3))
        .unwrap()
        .unwrap();
    assert!(done.bytes.windows(2).any(|w| w == [0x06, 0xb8]));
}

#[test]
fn bad_versions_and_sizes_are_typed() {
    let bytes = class(62, "t/T", &method("m", "()V", &[0xb1]));
    assert_eq!(
        instrument(&bytes, &PROBE, &mut |_| Some(1)).unwrap_err(),
        RewriteError::UnsupportedVersion { major: 62 }
    );
    let bytes = class(44, "t/T", &method("m", "()V", &[0xb1]));
    assert!(instrument(&bytes, &PROBE, &mut |_| Some(1)).is_err());
    // 65530 nops then return: too large once probed.
    let mut code = vec![0u8; 65530];
    code.push(0xb1);
    let bytes = class(61, "t/Big", &method("m", "()V", &code));
    let e = instrument(&bytes, &PROBE, &mut |_| Some(1)).unwrap_err();
    assert!(matches!(e, RewriteError::MethodTooLarge { .. }), "{e:?}");
    assert_eq!(e.kind(), "method_too_large");
    // A branch into the middle of an instruction.
    let bytes = class(61, "t/T", &method("m", "()V", &[0xa7, 0, 1, 0xb1]));
    let e = instrument(&bytes, &PROBE, &mut |_| Some(1)).unwrap_err();
    assert!(matches!(e, RewriteError::MalformedMethod { .. }), "{e:?}");
}
