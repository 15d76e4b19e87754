//! Modified UTF-8 (JVMS 4.4.7) to Rust strings.
//!
//! Class files encode NUL as `C0 80` and supplementary characters as two 3-byte
//! surrogates. Nearly all names are plain ASCII and valid UTF-8 as they are, so the
//! common case borrows; the rest is decoded, with U+FFFD for anything ill-formed.

use std::borrow::Cow;

/// Decodes modified UTF-8; never fails.
pub(crate) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    // Valid UTF-8 without NUL-as-C0-80 or surrogates is identical in both encodings
    // (surrogates make from_utf8 fail; C0 80 too).
    if let Ok(s) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(s);
    }
    let mut units: Vec<u16> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b & 0x80 == 0 {
            units.push(b as u16);
            i += 1;
        } else if b & 0xe0 == 0xc0 && i + 1 < bytes.len() && bytes[i + 1] & 0xc0 == 0x80 {
            units.push((((b & 0x1f) as u16) << 6) | (bytes[i + 1] & 0x3f) as u16);
            i += 2;
        } else if b & 0xf0 == 0xe0
            && i + 2 < bytes.len()
            && bytes[i + 1] & 0xc0 == 0x80
            && bytes[i + 2] & 0xc0 == 0x80
        {
            units.push(
                (((b & 0x0f) as u16) << 12)
                    | (((bytes[i + 1] & 0x3f) as u16) << 6)
                    | (bytes[i + 2] & 0x3f) as u16,
            );
            i += 3;
        } else {
            units.push(0xfffd);
            i += 1;
        }
    }
    Cow::Owned(String::from_utf16_lossy(&units))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_nul_and_surrogates() {
        assert!(matches!(decode(b"java/lang/Object"), Cow::Borrowed(_)));
        assert_eq!(decode(&[b'a', 0xc0, 0x80, b'b']), "a\0b");
        // U+1F600 as CESU-8 surrogate pair.
        assert_eq!(decode(&[0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]), "\u{1F600}");
        assert_eq!(decode(&[0xff, b'x']), "\u{fffd}x");
        assert_eq!(decode(&[0xe0, 0x80]), "\u{fffd}\u{fffd}");
    }
}
