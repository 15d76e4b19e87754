//! StackMapTable (JVMS 4.7.4): decode frames to absolute offsets, move them to the
//! relocated offsets, and re-encode, choosing each frame's compact form anew since
//! the offset deltas change (a `same_frame` whose delta grows past 63 becomes
//! `same_frame_extended`). `Uninitialized(offset)` verification types point at
//! `new` instructions and are relocated too. The frame for the catch-all handler is
//! appended last (it is at the end of the code) as a `full_frame` with no locals and
//! `java/lang/Throwable` on the stack; a full frame does not depend on the previous
//! one, so appending it never changes the meaning of the others.

use crate::bytes::{Put, Reader, Truncated};
use crate::error::MethodError;

const SAME_LOCALS_1_EXTENDED: u8 = 247;
const SAME_EXTENDED: u8 = 251;
const FULL: u8 = 255;
const ITEM_OBJECT: u8 = 7;
const ITEM_UNINITIALIZED: u8 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Same,
    SameLocals1,
    Chop(u8),
    Append(u8),
    Full,
}

/// One frame: its absolute offset in the original code and the bytes after its
/// offset_delta (verification types; for full frames with their counts).
#[derive(Debug, Clone)]
struct Frame<'a> {
    off: u32,
    kind: Kind,
    body: &'a [u8],
}

/// The decoded table.
pub(crate) struct StackMap<'a> {
    frames: Vec<Frame<'a>>,
}

fn bad(_: Truncated) -> MethodError {
    MethodError::Malformed("truncated StackMapTable")
}

fn skip_types(r: &mut Reader<'_>, n: u32) -> Result<(), MethodError> {
    for _ in 0..n {
        match r.u8().map_err(bad)? {
            0..=6 => {}
            ITEM_OBJECT | ITEM_UNINITIALIZED => r.skip(2).map_err(bad)?,
            _ => return Err(MethodError::Malformed("bad verification type")),
        }
    }
    Ok(())
}

/// Copies `n` verification types from `r` to `out`, relocating `Uninitialized`.
fn copy_types(
    r: &mut Reader<'_>,
    n: u32,
    out: &mut Vec<u8>,
    new_insn: &dyn Fn(u32) -> Option<u32>,
) -> Result<(), MethodError> {
    for _ in 0..n {
        let tag = r.u8().map_err(bad)?;
        out.put_u8(tag);
        match tag {
            0..=6 => {}
            ITEM_OBJECT => out.put_u16(r.u16().map_err(bad)?),
            ITEM_UNINITIALIZED => {
                let old = r.u16().map_err(bad)? as u32;
                let new = new_insn(old).ok_or(MethodError::Malformed(
                    "Uninitialized offset not at an instruction",
                ))?;
                out.put_u16(new as u16);
            }
            _ => return Err(MethodError::Malformed("bad verification type")),
        }
    }
    Ok(())
}

impl<'a> StackMap<'a> {
    /// Decodes the attribute's info bytes.
    pub(crate) fn parse(info: &'a [u8]) -> Result<Self, MethodError> {
        let mut r = Reader::new(info);
        let n = r.u16().map_err(bad)?;
        let mut frames = Vec::with_capacity(n as usize);
        let mut prev: i64 = -1;
        for _ in 0..n {
            let tag = r.u8().map_err(bad)?;
            let (kind, delta) = match tag {
                0..=63 => (Kind::Same, tag as u32),
                64..=127 => (Kind::SameLocals1, (tag - 64) as u32),
                SAME_LOCALS_1_EXTENDED => (Kind::SameLocals1, r.u16().map_err(bad)? as u32),
                248..=250 => (Kind::Chop(251 - tag), r.u16().map_err(bad)? as u32),
                SAME_EXTENDED => (Kind::Same, r.u16().map_err(bad)? as u32),
                252..=254 => (Kind::Append(tag - 251), r.u16().map_err(bad)? as u32),
                FULL => (Kind::Full, r.u16().map_err(bad)? as u32),
                _ => return Err(MethodError::Malformed("reserved stack map frame type")),
            };
            let start = r.pos();
            match kind {
                Kind::Same | Kind::Chop(_) => {}
                Kind::SameLocals1 => skip_types(&mut r, 1)?,
                Kind::Append(k) => skip_types(&mut r, k as u32)?,
                Kind::Full => {
                    let l = r.u16().map_err(bad)?;
                    skip_types(&mut r, l as u32)?;
                    let s = r.u16().map_err(bad)?;
                    skip_types(&mut r, s as u32)?;
                }
            }
            let off = prev + 1 + delta as i64;
            prev = off;
            frames.push(Frame {
                off: off as u32,
                kind,
                body: &info[start..r.pos()],
            });
        }
        if r.pos() != info.len() {
            return Err(MethodError::Malformed(
                "bytes after the last stack map frame",
            ));
        }
        Ok(StackMap { frames })
    }

    /// An empty table (a method that had none).
    pub(crate) fn empty() -> Self {
        StackMap { frames: Vec::new() }
    }

    /// Original offsets of the frames.
    #[cfg(test)]
    fn offsets(&self) -> Vec<u32> {
        self.frames.iter().map(|f| f.off).collect()
    }

    /// Encodes the table with frames moved by `new_target` (frame offsets are branch
    /// targets) and `Uninitialized` types moved by `new_insn`, plus, when given, a
    /// full frame `{locals: [], stack: [Object(throwable)]}` at `handler`.
    pub(crate) fn encode(
        &self,
        new_target: &dyn Fn(u32) -> Option<u32>,
        new_insn: &dyn Fn(u32) -> Option<u32>,
        handler: Option<(u32, u16)>,
    ) -> Result<Vec<u8>, MethodError> {
        let count = self.frames.len() + usize::from(handler.is_some());
        let count = u16::try_from(count).map_err(|_| MethodError::Malformed("too many frames"))?;
        let mut out = Vec::with_capacity(2 + self.frames.len() * 4 + 10);
        out.put_u16(count);
        let mut prev: i64 = -1;
        let delta_to = |off: u32, prev: &mut i64| -> Result<u16, MethodError> {
            let d = off as i64 - *prev - 1;
            *prev = off as i64;
            u16::try_from(d).map_err(|_| MethodError::Malformed("stack map frames out of order"))
        };
        for f in &self.frames {
            let off = new_target(f.off).ok_or(MethodError::Malformed(
                "stack map frame not at an instruction",
            ))?;
            let delta = delta_to(off, &mut prev)?;
            let mut r = Reader::new(f.body);
            match f.kind {
                Kind::Same if delta <= 63 => out.put_u8(delta as u8),
                Kind::Same => {
                    out.put_u8(SAME_EXTENDED);
                    out.put_u16(delta);
                }
                Kind::SameLocals1 => {
                    if delta <= 63 {
                        out.put_u8(64 + delta as u8);
                    } else {
                        out.put_u8(SAME_LOCALS_1_EXTENDED);
                        out.put_u16(delta);
                    }
                    copy_types(&mut r, 1, &mut out, new_insn)?;
                }
                Kind::Chop(k) => {
                    out.put_u8(251 - k);
                    out.put_u16(delta);
                }
                Kind::Append(k) => {
                    out.put_u8(251 + k);
                    out.put_u16(delta);
                    copy_types(&mut r, k as u32, &mut out, new_insn)?;
                }
                Kind::Full => {
                    out.put_u8(FULL);
                    out.put_u16(delta);
                    let l = r.u16().map_err(bad)?;
                    out.put_u16(l);
                    copy_types(&mut r, l as u32, &mut out, new_insn)?;
                    let s = r.u16().map_err(bad)?;
                    out.put_u16(s);
                    copy_types(&mut r, s as u32, &mut out, new_insn)?;
                }
            }
        }
        if let Some((off, throwable)) = handler {
            let delta = delta_to(off, &mut prev)?;
            out.put_u8(FULL);
            out.put_u16(delta);
            out.put_u16(0);
            out.put_u16(1);
            out.put_u8(ITEM_OBJECT);
            out.put_u16(throwable);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relocates_and_recompacts() {
        // frames: same@5, same_locals_1(Uninitialized 2)@10, append(int)@80, full@90
        let mut t = vec![0, 4, 5, 64 + 4, ITEM_UNINITIALIZED, 0, 2, 252, 0, 69, 1];
        t.extend_from_slice(&[FULL, 0, 9, 0, 1, 1, 0, 1, ITEM_OBJECT, 0, 3]);
        let m = StackMap::parse(&t).unwrap();
        assert_eq!(m.offsets(), [5, 10, 80, 90]);
        // Identity keeps the encoding byte for byte.
        let same = m.encode(&|o| Some(o), &|o| Some(o), None).unwrap();
        assert_eq!(same, t);
        // Shift by 100: the first frames need extended forms; uninit offset 2 -> 102.
        let moved = m
            .encode(&|o| Some(o + 100), &|o| Some(o + 100), Some((300, 7)))
            .unwrap();
        let back = StackMap::parse(&moved).unwrap();
        assert_eq!(back.offsets(), [105, 110, 180, 190, 300]);
        assert_eq!(&moved[2..5], &[SAME_EXTENDED, 0, 105]);
        assert_eq!(&moved[5..9], &[64 + 4, ITEM_UNINITIALIZED, 0, 102]);
        assert_eq!(
            moved[moved.len() - 10..],
            [FULL, 0, 109, 0, 0, 0, 1, ITEM_OBJECT, 0, 7]
        );
        // Unmappable frame offset is an error, not a panic.
        assert!(m.encode(&|_| None, &|o| Some(o), None).is_err());
        assert!(StackMap::parse(&t[..t.len() - 1]).is_err());
        assert!(StackMap::parse(&[0, 1, 200]).is_err());
    }
}
