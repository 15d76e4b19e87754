//! The constant pool: an index of the existing entries (read in place, never copied)
//! and an appender for the few entries the probes need.
//!
//! New entries go at the end so every existing index in the class stays valid.

use std::borrow::Cow;

use crate::bytes::{Put, Reader};
use crate::error::{malformed, RewriteError};
use crate::mutf8;

pub(crate) const UTF8: u8 = 1;
pub(crate) const INTEGER: u8 = 3;
pub(crate) const FLOAT: u8 = 4;
pub(crate) const LONG: u8 = 5;
pub(crate) const DOUBLE: u8 = 6;
pub(crate) const CLASS: u8 = 7;
pub(crate) const STRING: u8 = 8;
pub(crate) const FIELDREF: u8 = 9;
pub(crate) const METHODREF: u8 = 10;
pub(crate) const INTERFACE_METHODREF: u8 = 11;
pub(crate) const NAME_AND_TYPE: u8 = 12;
pub(crate) const METHOD_HANDLE: u8 = 15;
pub(crate) const METHOD_TYPE: u8 = 16;
pub(crate) const DYNAMIC: u8 = 17;
pub(crate) const INVOKE_DYNAMIC: u8 = 18;
pub(crate) const MODULE: u8 = 19;
pub(crate) const PACKAGE: u8 = 20;

/// Existing constant pool of a class: `offsets[i]` is where entry `i` starts (its
/// tag byte) in the class bytes; 0 for index 0 and the unusable slot after a
/// long/double.
pub(crate) struct ConstantPool<'a> {
    data: &'a [u8],
    offsets: Vec<u32>,
    /// Byte offset just past the last entry.
    pub(crate) end: usize,
}

impl<'a> ConstantPool<'a> {
    /// Parses the pool starting at `pos` (the `constant_pool_count` field).
    pub(crate) fn parse(data: &'a [u8], pos: usize) -> Result<Self, RewriteError> {
        let t = |_| malformed("truncated constant pool");
        let mut r = Reader::at(data, pos);
        let count = r.u16().map_err(t)? as usize;
        if count == 0 {
            return Err(malformed("constant_pool_count is 0"));
        }
        let mut offsets = vec![0u32; count];
        let mut i = 1;
        while i < count {
            offsets[i] = r.pos() as u32;
            let tag = r.u8().map_err(t)?;
            let size = match tag {
                UTF8 => r.u16().map_err(t)? as usize,
                INTEGER | FLOAT => 4,
                LONG | DOUBLE => 8,
                CLASS | STRING | METHOD_TYPE | MODULE | PACKAGE => 2,
                FIELDREF | METHODREF | INTERFACE_METHODREF | NAME_AND_TYPE | DYNAMIC
                | INVOKE_DYNAMIC => 4,
                METHOD_HANDLE => 3,
                _ => return Err(malformed("unknown constant pool tag")),
            };
            r.skip(size).map_err(t)?;
            i += if tag == LONG || tag == DOUBLE { 2 } else { 1 };
        }
        if i != count {
            return Err(malformed("long/double constant overruns the pool"));
        }
        Ok(ConstantPool {
            data,
            offsets,
            end: r.pos(),
        })
    }

    /// Number of slots (`constant_pool_count`).
    pub(crate) fn count(&self) -> usize {
        self.offsets.len()
    }

    fn entry(&self, index: u16, tag: u8) -> Option<usize> {
        let off = *self.offsets.get(index as usize)? as usize;
        if off == 0 || *self.data.get(off)? != tag {
            return None;
        }
        Some(off + 1)
    }

    fn u16_at(&self, pos: usize) -> Option<u16> {
        crate::bytes::u16_at(self.data, pos)
    }

    /// Raw modified-UTF-8 bytes of a Utf8 entry.
    pub(crate) fn utf8_bytes(&self, index: u16) -> Option<&'a [u8]> {
        let p = self.entry(index, UTF8)?;
        let len = self.u16_at(p)? as usize;
        self.data.get(p + 2..p + 2 + len)
    }

    /// A Utf8 entry as text.
    pub(crate) fn utf8(&self, index: u16) -> Option<Cow<'a, str>> {
        self.utf8_bytes(index).map(mutf8::decode)
    }

    /// The name of a Class entry.
    pub(crate) fn class_name(&self, index: u16) -> Option<Cow<'a, str>> {
        let p = self.entry(index, CLASS)?;
        self.utf8(self.u16_at(p)?)
    }

    /// (class index, name, descriptor) of a Fieldref/Methodref/InterfaceMethodref.
    pub(crate) fn member_ref(&self, index: u16) -> Option<(u16, &'a [u8], &'a [u8])> {
        let off = *self.offsets.get(index as usize)? as usize;
        let tag = *self.data.get(off)?;
        if off == 0 || !matches!(tag, FIELDREF | METHODREF | INTERFACE_METHODREF) {
            return None;
        }
        let class = self.u16_at(off + 1)?;
        let (name, desc) = self.name_and_type(self.u16_at(off + 3)?)?;
        Some((class, name, desc))
    }

    /// (name, descriptor) of an InvokeDynamic entry.
    pub(crate) fn invoke_dynamic(&self, index: u16) -> Option<(&'a [u8], &'a [u8])> {
        let p = self.entry(index, INVOKE_DYNAMIC)?;
        self.name_and_type(self.u16_at(p + 2)?)
    }

    fn name_and_type(&self, index: u16) -> Option<(&'a [u8], &'a [u8])> {
        let p = self.entry(index, NAME_AND_TYPE)?;
        Some((
            self.utf8_bytes(self.u16_at(p)?)?,
            self.utf8_bytes(self.u16_at(p + 2)?)?,
        ))
    }
}

/// Entries appended after the existing ones, deduplicated among themselves.
pub(crate) struct Appender {
    next: usize,
    bytes: Vec<u8>,
    utf8s: Vec<(Vec<u8>, u16)>,
    integers: Vec<(u32, u16)>,
}

impl Appender {
    pub(crate) fn new(count: usize) -> Self {
        Appender {
            next: count,
            bytes: Vec::new(),
            utf8s: Vec::new(),
            integers: Vec::new(),
        }
    }

    fn take_index(&mut self) -> Result<u16, RewriteError> {
        // constant_pool_count is a u16, so the largest usable index is 65534.
        if self.next >= 65535 {
            return Err(RewriteError::ConstantPoolOverflow);
        }
        let i = self.next as u16;
        self.next += 1;
        Ok(i)
    }

    /// Appends (or reuses an appended) Utf8 entry. `text` must not contain NUL or
    /// supplementary characters (probe names and fixed strings don't).
    pub(crate) fn utf8(&mut self, text: &str) -> Result<u16, RewriteError> {
        if let Some(&(_, i)) = self.utf8s.iter().find(|(b, _)| b == text.as_bytes()) {
            return Ok(i);
        }
        let len = u16::try_from(text.len()).map_err(|_| RewriteError::ConstantPoolOverflow)?;
        let i = self.take_index()?;
        self.bytes.put_u8(UTF8);
        self.bytes.put_u16(len);
        self.bytes.extend_from_slice(text.as_bytes());
        self.utf8s.push((text.as_bytes().to_vec(), i));
        Ok(i)
    }

    pub(crate) fn class(&mut self, name: &str) -> Result<u16, RewriteError> {
        let n = self.utf8(name)?;
        let i = self.take_index()?;
        self.bytes.put_u8(CLASS);
        self.bytes.put_u16(n);
        Ok(i)
    }

    /// A Methodref `class.name:descriptor` where `class` is an appended Class index.
    pub(crate) fn methodref(
        &mut self,
        class: u16,
        name: &str,
        descriptor: &str,
    ) -> Result<u16, RewriteError> {
        let n = self.utf8(name)?;
        let d = self.utf8(descriptor)?;
        let nat = self.take_index()?;
        self.bytes.put_u8(NAME_AND_TYPE);
        self.bytes.put_u16(n);
        self.bytes.put_u16(d);
        let i = self.take_index()?;
        self.bytes.put_u8(METHODREF);
        self.bytes.put_u16(class);
        self.bytes.put_u16(nat);
        Ok(i)
    }

    pub(crate) fn integer(&mut self, value: u32) -> Result<u16, RewriteError> {
        if let Some(&(_, i)) = self.integers.iter().find(|(v, _)| *v == value) {
            return Ok(i);
        }
        let i = self.take_index()?;
        self.bytes.put_u8(INTEGER);
        self.bytes.put_u32(value);
        self.integers.push((value, i));
        Ok(i)
    }

    /// The new `constant_pool_count`.
    pub(crate) fn count(&self) -> u16 {
        self.next as u16
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_appends() {
        // count=4: #1 Utf8 "A", #2 Class #1, #3 Long (takes #3 and #4 -> count 5).
        let mut d = vec![0, 5, UTF8, 0, 1, b'A', CLASS, 0, 1, LONG];
        d.extend_from_slice(&[0; 8]);
        let cp = ConstantPool::parse(&d, 0).unwrap();
        assert_eq!(cp.count(), 5);
        assert_eq!(cp.end, d.len());
        assert_eq!(cp.class_name(2).as_deref(), Some("A"));
        assert_eq!(cp.class_name(1), None);
        assert_eq!(cp.class_name(4), None);
        assert_eq!(cp.class_name(400), None);
        let mut a = Appender::new(cp.count());
        let u = a.utf8("x").unwrap();
        assert_eq!(u, 5);
        assert_eq!(a.utf8("x").unwrap(), 5);
        assert_eq!(a.integer(7).unwrap(), 6);
        assert_eq!(a.integer(7).unwrap(), 6);
        assert_eq!(a.count(), 7);
        // Truncated long.
        assert!(ConstantPool::parse(&d[..d.len() - 1], 0).is_err());
        // Long as last slot overruns the count.
        let bad = [0, 2, LONG, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(ConstantPool::parse(&bad, 0).is_err());
    }

    #[test]
    fn appender_stops_at_the_u16_limit() {
        let mut a = Appender::new(65533);
        assert!(a.integer(1).is_ok());
        assert!(a.integer(2).is_ok());
        assert_eq!(a.integer(3), Err(RewriteError::ConstantPoolOverflow));
    }
}
