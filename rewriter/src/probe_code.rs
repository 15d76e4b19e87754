//! The bytecode of the probes: `push id; invokestatic Probe.m(I)V`, and the
//! catch-all handler `push id; invokestatic Probe.exit_exception(I)V; athrow`.

use crate::bytes::Put;
use crate::constant_pool::Appender;
use crate::error::RewriteError;
use crate::opcodes::{ATHROW, BIPUSH, ICONST_0, INVOKESTATIC, LDC, LDC_W, SIPUSH};

/// Constant-pool indices of the probe methods, appended once per class.
#[derive(Clone, Copy)]
pub(crate) struct ProbeRefs {
    pub(crate) enter: u16,
    pub(crate) exit: u16,
    pub(crate) exit_exception: u16,
}

/// The three sequences for one method id.
pub(crate) struct ProbeCode {
    pub(crate) enter: Vec<u8>,
    pub(crate) exit: Vec<u8>,
    pub(crate) handler: Vec<u8>,
}

/// The shortest instruction pushing `id` as an int; ids that fit no immediate form
/// get a CONSTANT_Integer (ldc, or ldc_w past index 255).
fn push_id(id: u32, cp: &mut Appender) -> Result<Vec<u8>, RewriteError> {
    let mut v = Vec::with_capacity(3);
    if id <= 5 {
        v.put_u8(ICONST_0 + id as u8);
    } else if id <= 127 {
        v.put_u8(BIPUSH);
        v.put_u8(id as u8);
    } else if id <= 32767 {
        v.put_u8(SIPUSH);
        v.put_u16(id as u16);
    } else {
        let i = cp.integer(id)?;
        if i <= 255 {
            v.put_u8(LDC);
            v.put_u8(i as u8);
        } else {
            v.put_u8(LDC_W);
            v.put_u16(i);
        }
    }
    Ok(v)
}

impl ProbeCode {
    pub(crate) fn new(id: u32, refs: ProbeRefs, cp: &mut Appender) -> Result<Self, RewriteError> {
        let push = push_id(id, cp)?;
        let call = |m: u16| {
            let mut v = push.clone();
            v.put_u8(INVOKESTATIC);
            v.put_u16(m);
            v
        };
        let mut handler = call(refs.exit_exception);
        handler.put_u8(ATHROW);
        Ok(ProbeCode {
            enter: call(refs.enter),
            exit: call(refs.exit),
            handler,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_push_forms() {
        let mut cp = Appender::new(10);
        assert_eq!(push_id(0, &mut cp).unwrap(), [ICONST_0]);
        assert_eq!(push_id(5, &mut cp).unwrap(), [ICONST_0 + 5]);
        assert_eq!(push_id(6, &mut cp).unwrap(), [BIPUSH, 6]);
        assert_eq!(push_id(127, &mut cp).unwrap(), [BIPUSH, 127]);
        assert_eq!(push_id(128, &mut cp).unwrap(), [SIPUSH, 0, 128]);
        assert_eq!(push_id(32767, &mut cp).unwrap(), [SIPUSH, 0x7f, 0xff]);
        assert_eq!(push_id(32768, &mut cp).unwrap(), [LDC, 10]);
        assert_eq!(push_id(32768, &mut cp).unwrap(), [LDC, 10]);
        let mut big = Appender::new(300);
        assert_eq!(push_id(1 << 30, &mut big).unwrap(), [LDC_W, 1, 44]);
    }
}
