//! The type descriptors of a class's or method's annotations, for the selector
//! (filters such as "every method annotated `@GET`").

use std::borrow::Cow;

use crate::bytes::{Reader, Truncated};
use crate::class_file::{Attribute, ClassFile};
use crate::error::{malformed, RewriteError};

/// Nesting deeper than this is refused, so crafted input cannot exhaust the stack.
const MAX_DEPTH: u32 = 32;

/// Appends the type descriptors (`Lpkg/Name;`) of the top-level annotations in every
/// RuntimeVisibleAnnotations / RuntimeInvisibleAnnotations attribute of `attrs`.
pub(crate) fn collect<'a>(
    class: &ClassFile<'a>,
    attrs: &[Attribute],
    out: &mut Vec<Cow<'a, str>>,
) -> Result<(), RewriteError> {
    for a in attrs {
        if !(class.is(a, "RuntimeVisibleAnnotations") || class.is(a, "RuntimeInvisibleAnnotations"))
        {
            continue;
        }
        let mut r = Reader::new(class.info(a));
        let bad = |_: Truncated| malformed("truncated annotation");
        let n = r.u16().map_err(bad)?;
        for _ in 0..n {
            let type_index = r.u16().map_err(bad)?;
            let name = class
                .cp
                .utf8(type_index)
                .ok_or(malformed("annotation type is not a Utf8 constant"))?;
            out.push(name);
            skip_pairs(&mut r, 0).map_err(|_| malformed("bad annotation element"))?;
        }
    }
    Ok(())
}

fn skip_pairs(r: &mut Reader<'_>, depth: u32) -> Result<(), Truncated> {
    let pairs = r.u16()?;
    for _ in 0..pairs {
        r.u16()?;
        skip_value(r, depth)?;
    }
    Ok(())
}

fn skip_value(r: &mut Reader<'_>, depth: u32) -> Result<(), Truncated> {
    if depth > MAX_DEPTH {
        return Err(Truncated);
    }
    match r.u8()? {
        b'B' | b'C' | b'D' | b'F' | b'I' | b'J' | b'S' | b'Z' | b's' | b'c' => r.skip(2),
        b'e' => r.skip(4),
        b'@' => {
            r.u16()?;
            skip_pairs(r, depth + 1)
        }
        b'[' => {
            let n = r.u16()?;
            for _ in 0..n {
                skip_value(r, depth + 1)?;
            }
            Ok(())
        }
        _ => Err(Truncated),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_nested_values_and_refuses_deep_nesting() {
        // pairs=1: name, '[' 2 values: 'I' #1, '@' type #2 pairs=0
        let v = [0, 1, 0, 9, b'[', 0, 2, b'I', 0, 1, b'@', 0, 2, 0, 0];
        let mut r = Reader::new(&v);
        assert!(skip_pairs(&mut r, 0).is_ok());
        assert_eq!(r.pos(), v.len());
        let mut deep = vec![0, 1, 0, 9];
        for _ in 0..100 {
            deep.extend_from_slice(&[b'[', 0, 1]);
        }
        deep.extend_from_slice(&[b'I', 0, 1]);
        assert!(skip_pairs(&mut Reader::new(&deep), 0).is_err());
        assert!(skip_pairs(&mut Reader::new(&[0, 1, 0, 9, b'?']), 0).is_err());
    }
}
