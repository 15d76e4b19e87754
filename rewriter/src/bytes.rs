//! Bounds-checked big-endian reading and writing, so that no input can make the
//! rewriter index out of range (the function must be total over arbitrary bytes).

/// A cursor over a byte slice; every read fails cleanly at the end of the data.
#[derive(Clone, Copy)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

/// The one error a read can have: not enough bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Truncated;

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    pub(crate) fn at(data: &'a [u8], pos: usize) -> Self {
        Reader { data, pos }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Truncated> {
        let b = *self.data.get(self.pos).ok_or(Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, Truncated> {
        let s = self.bytes(2)?;
        Ok(u16::from_be_bytes([s[0], s[1]]))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Truncated> {
        let s = self.bytes(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        let end = self.pos.checked_add(n).ok_or(Truncated)?;
        let s = self.data.get(self.pos..end).ok_or(Truncated)?;
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn skip(&mut self, n: usize) -> Result<(), Truncated> {
        self.bytes(n).map(|_| ())
    }
}

/// Big-endian appends to a byte vector.
pub(crate) trait Put {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_i16(&mut self, v: i16) {
        self.put_u16(v as u16)
    }
    fn put_i32(&mut self, v: i32) {
        self.put_u32(v as u32)
    }
}

impl Put for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v)
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes())
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes())
    }
}

/// Reads a u16 at `pos` of `data`, if there.
pub(crate) fn u16_at(data: &[u8], pos: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*data.get(pos)?, *data.get(pos + 1)?]))
}

/// Reads an i16 at `pos` of `data`, if there.
pub(crate) fn i16_at(data: &[u8], pos: usize) -> Option<i16> {
    u16_at(data, pos).map(|v| v as i16)
}

/// Reads an i32 at `pos` of `data`, if there.
pub(crate) fn i32_at(data: &[u8], pos: usize) -> Option<i32> {
    let s = data.get(pos..pos.checked_add(4)?)?;
    Some(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16(), Ok(0x0102));
        assert_eq!(r.u16(), Err(Truncated));
        assert_eq!(r.u8(), Ok(3));
        assert_eq!(r.u8(), Err(Truncated));
        assert_eq!(r.bytes(usize::MAX), Err(Truncated));
        assert_eq!(i32_at(&[0xff, 0xff, 0xff, 0xfe], 0), Some(-2));
        assert_eq!(i32_at(&[0xff, 0xff, 0xff], 0), None);
        assert_eq!(i16_at(&[0x80, 0], 0), Some(i16::MIN));
        assert_eq!(u16_at(&[0x80, 0], usize::MAX), None);
    }
}
