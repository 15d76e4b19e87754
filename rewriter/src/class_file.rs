//! The top-level layout of a class file (JVMS 4.1): where the constant pool,
//! methods and attributes are, as byte ranges of the original bytes. Nothing is
//! copied; the writer reassembles the class from these ranges.

use std::ops::Range;

use crate::bytes::Reader;
use crate::constant_pool::ConstantPool;
use crate::error::{malformed, RewriteError};

pub(crate) const ACC_NATIVE: u16 = 0x0100;
pub(crate) const ACC_ABSTRACT: u16 = 0x0400;

/// An attribute: its name index and the range of its `info` bytes.
#[derive(Debug, Clone)]
pub(crate) struct Attribute {
    pub(crate) name: u16,
    pub(crate) info: Range<usize>,
}

/// A method_info: where it is and what it says.
#[derive(Debug, Clone)]
pub(crate) struct Method {
    /// The whole method_info.
    pub(crate) span: Range<usize>,
    pub(crate) access: u16,
    pub(crate) name: u16,
    pub(crate) descriptor: u16,
    pub(crate) attributes: Vec<Attribute>,
}

/// The parsed outline of a class file.
pub(crate) struct ClassFile<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) major: u16,
    pub(crate) cp: ConstantPool<'a>,
    pub(crate) this_class: u16,
    /// From access_flags through the end of the fields (copied as is).
    pub(crate) middle: Range<usize>,
    pub(crate) methods: Vec<Method>,
    /// The class attributes (attributes_count through the end).
    pub(crate) tail: Range<usize>,
    pub(crate) attributes: Vec<Attribute>,
}

fn t<T>(_: T) -> RewriteError {
    malformed("truncated class file")
}

/// Reads the header and constant pool only: enough for `this_class`.
pub(crate) fn parse_head(data: &[u8]) -> Result<(u16, ConstantPool<'_>), RewriteError> {
    let mut r = Reader::new(data);
    if r.u32().map_err(t)? != 0xCAFE_BABE {
        return Err(malformed("bad magic"));
    }
    let _minor = r.u16().map_err(t)?;
    let major = r.u16().map_err(t)?;
    let cp = ConstantPool::parse(data, r.pos())?;
    Ok((major, cp))
}

fn attributes(r: &mut Reader<'_>) -> Result<Vec<Attribute>, RewriteError> {
    let n = r.u16().map_err(t)?;
    let mut v = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let name = r.u16().map_err(t)?;
        let len = r.u32().map_err(t)? as usize;
        let start = r.pos();
        r.skip(len).map_err(t)?;
        v.push(Attribute {
            name,
            info: start..start + len,
        });
    }
    Ok(v)
}

impl<'a> ClassFile<'a> {
    pub(crate) fn parse(data: &'a [u8]) -> Result<Self, RewriteError> {
        let (major, cp) = parse_head(data)?;
        let mut r = Reader::at(data, cp.end);
        let middle_start = r.pos();
        let _access = r.u16().map_err(t)?;
        let this_class = r.u16().map_err(t)?;
        let _super = r.u16().map_err(t)?;
        let interfaces = r.u16().map_err(t)? as usize;
        r.skip(interfaces * 2).map_err(t)?;
        let fields = r.u16().map_err(t)?;
        for _ in 0..fields {
            r.skip(6).map_err(t)?;
            attributes(&mut r)?;
        }
        let middle = middle_start..r.pos();
        let n = r.u16().map_err(t)?;
        let mut methods = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let start = r.pos();
            let access = r.u16().map_err(t)?;
            let name = r.u16().map_err(t)?;
            let descriptor = r.u16().map_err(t)?;
            let attributes = attributes(&mut r)?;
            methods.push(Method {
                span: start..r.pos(),
                access,
                name,
                descriptor,
                attributes,
            });
        }
        let tail_start = r.pos();
        let attributes = attributes(&mut r)?;
        if r.pos() != data.len() {
            return Err(malformed("extra bytes after the class attributes"));
        }
        Ok(ClassFile {
            data,
            major,
            cp,
            this_class,
            middle,
            methods,
            tail: tail_start..r.pos(),
            attributes,
        })
    }

    /// Whether attribute `a` is named `name`.
    pub(crate) fn is(&self, a: &Attribute, name: &str) -> bool {
        self.cp.utf8_bytes(a.name) == Some(name.as_bytes())
    }

    pub(crate) fn info(&self, a: &Attribute) -> &'a [u8] {
        &self.data[a.info.clone()]
    }
}
