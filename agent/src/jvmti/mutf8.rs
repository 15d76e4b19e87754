//! The JVM's "modified UTF-8" (JNI/JVMTI strings, class-file names): like UTF-8, except
//! that U+0000 is two bytes (`C0 80`) and characters above U+FFFF are two 3-byte
//! surrogates. Pure functions, no unsafe.

/// Decodes modified UTF-8; malformed bytes become U+FFFD (never fails, never panics).
pub fn decode(bytes: &[u8]) -> String {
    if bytes.is_ascii() {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut units: Vec<u16> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let cont = |k: usize| {
            bytes
                .get(i + k)
                .copied()
                .filter(|c| c & 0xc0 == 0x80)
                .map(|c| u16::from(c & 0x3f))
        };
        if b < 0x80 {
            units.push(u16::from(b));
            i += 1;
        } else if b & 0xe0 == 0xc0 {
            match cont(1) {
                Some(c1) => {
                    units.push((u16::from(b & 0x1f) << 6) | c1);
                    i += 2;
                }
                None => {
                    units.push(0xfffd);
                    i += 1;
                }
            }
        } else if b & 0xf0 == 0xe0 {
            match (cont(1), cont(2)) {
                (Some(c1), Some(c2)) => {
                    units.push((u16::from(b & 0x0f) << 12) | (c1 << 6) | c2);
                    i += 3;
                }
                _ => {
                    units.push(0xfffd);
                    i += 1;
                }
            }
        } else {
            // 4-byte UTF-8 sequences do not occur in modified UTF-8: be lenient and take
            // them as standard UTF-8 when well formed.
            match std::str::from_utf8(&bytes[i..(i + 4).min(bytes.len())]) {
                Ok(s) if s.chars().count() == 1 => {
                    let mut buf = [0u16; 2];
                    units.extend_from_slice(
                        s.chars()
                            .next()
                            .unwrap_or('\u{fffd}')
                            .encode_utf16(&mut buf),
                    );
                    i += 4;
                }
                _ => {
                    units.push(0xfffd);
                    i += 1;
                }
            }
        }
    }
    String::from_utf16_lossy(&units)
}

/// Encodes text as modified UTF-8 (no terminating NUL; a NUL char becomes `C0 80`).
pub fn encode(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for unit in text.encode_utf16() {
        match unit {
            0x0001..=0x007f => out.push(unit as u8),
            0x0000 | 0x0080..=0x07ff => {
                out.push(0xc0 | (unit >> 6) as u8);
                out.push(0x80 | (unit & 0x3f) as u8);
            }
            _ => {
                out.push(0xe0 | (unit >> 12) as u8);
                out.push(0x80 | ((unit >> 6) & 0x3f) as u8);
                out.push(0x80 | (unit & 0x3f) as u8);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_bmp_supplementary_and_nul() {
        for s in [
            "main",
            "Thread-0",
            "café",
            "日本語",
            "emoji 😀 end",
            "nul\0inside",
            "",
        ] {
            let m = encode(s);
            assert!(!m.contains(&0), "no raw NUL in {s:?}");
            assert_eq!(decode(&m), s);
        }
    }

    #[test]
    fn supplementary_is_surrogate_pair() {
        assert_eq!(encode("😀"), vec![0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]);
        assert_eq!(encode("\0"), vec![0xc0, 0x80]);
    }

    #[test]
    fn malformed_input_never_panics() {
        assert_eq!(decode(&[0x61, 0xc3]), "a\u{fffd}");
        assert_eq!(decode(&[0xe6, 0x97]), "\u{fffd}\u{fffd}");
        assert_eq!(decode(&[0xff, 0x62]), "\u{fffd}b");
        assert_eq!(decode("😀".as_bytes()), "😀");
    }
}
