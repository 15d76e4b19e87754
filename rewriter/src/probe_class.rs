//! The class file of the probe class itself: `public final class <name>` with three
//! `public static native void m(int)` methods, which the agent defines (in the
//! bootstrap loader, so JDK classes can call it) and binds to its natives.

use crate::bytes::Put;
use crate::constant_pool::{CLASS, UTF8};
use crate::ProbeClass;

const ACC_PUBLIC: u16 = 0x0001;
const ACC_FINAL: u16 = 0x0010;
const ACC_SUPER: u16 = 0x0020;
const ACC_STATIC: u16 = 0x0008;
const ACC_NATIVE: u16 = 0x0100;

fn utf8(out: &mut Vec<u8>, s: &str) {
    // Names are given as Rust strings; NUL and supplementary characters would need
    // modified UTF-8, which valid Java identifiers used here never contain.
    out.put_u8(UTF8);
    out.put_u16(s.len().min(65535) as u16);
    out.extend_from_slice(&s.as_bytes()[..s.len().min(65535)]);
}

/// Class file (version 52) declaring the probe class.
pub fn probe_class_bytes(probe: &ProbeClass<'_>) -> Vec<u8> {
    let mut v = Vec::with_capacity(256);
    v.put_u32(0xCAFE_BABE);
    v.put_u16(0);
    v.put_u16(52);
    // #1 Utf8 name, #2 Class #1, #3 Utf8 Object, #4 Class #3, #5 "(I)V",
    // #6..#8 method names.
    v.put_u16(9);
    utf8(&mut v, probe.class);
    v.put_u8(CLASS);
    v.put_u16(1);
    utf8(&mut v, "java/lang/Object");
    v.put_u8(CLASS);
    v.put_u16(3);
    utf8(&mut v, "(I)V");
    for name in [probe.enter, probe.exit, probe.exit_exception] {
        utf8(&mut v, name);
    }
    v.put_u16(ACC_PUBLIC | ACC_FINAL | ACC_SUPER);
    v.put_u16(2);
    v.put_u16(4);
    v.put_u16(0); // interfaces
    v.put_u16(0); // fields
    v.put_u16(3);
    for name in 6..=8u16 {
        v.put_u16(ACC_PUBLIC | ACC_STATIC | ACC_NATIVE);
        v.put_u16(name);
        v.put_u16(5);
        v.put_u16(0);
    }
    v.put_u16(0); // attributes
    v
}
