//! The names in a class's constant pool (JVMS 4.4), from the bytes JVMTI's
//! `GetConstantPool` returns: every `CONSTANT_Utf8` entry. A class declares a method
//! only if the method's name is among them, so a pattern's method names can rule a
//! class out without its class file. Pure; malformed input gives `None`.

/// Every `CONSTANT_Utf8` entry (as stored: modified UTF-8) of a pool of `count`
/// entries (the class file's `constant_pool_count`, entry 0 unused), or `None` when the
/// bytes do not parse.
pub fn utf8_entries(count: u16, bytes: &[u8]) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut index = 1u16;
    let u16_at = |at: usize| -> Option<usize> {
        Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]) as usize)
    };
    while index < count {
        let tag = *bytes.get(at)?;
        at += 1;
        let (len, slots) = match tag {
            1 => {
                let n = u16_at(at)?;
                out.push(bytes.get(at + 2..at + 2 + n)?);
                (2 + n, 1)
            }
            // Integer, Float.
            3 | 4 => (4, 1),
            // Long, Double: two slots.
            5 | 6 => (8, 2),
            // Class, String, MethodType, Module, Package.
            7 | 8 | 16 | 19 | 20 => (2, 1),
            // Field/Method/InterfaceMethod refs, NameAndType, Dynamic, InvokeDynamic.
            9..=12 | 17 | 18 => (4, 1),
            // MethodHandle.
            15 => (3, 1),
            _ => return None,
        };
        at += len;
        index = index.checked_add(slots)?;
    }
    (at <= bytes.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_utf8_entries_between_others() {
        let mut pool = Vec::new();
        pool.extend([1, 0, 3]);
        pool.extend(b"foo");
        pool.extend([7, 0, 1]); // Class #1
        pool.extend([5, 0, 0, 0, 0, 0, 0, 0, 9]); // Long: two slots
        pool.extend([12, 0, 1, 0, 6]); // NameAndType
        pool.extend([1, 0, 3]);
        pool.extend(b"()V");
        pool.extend([15, 5, 0, 2]); // MethodHandle
                                    // 1 Utf8, 2 Class, 3-4 Long, 5 NameAndType, 6 Utf8, 7 MethodHandle: count 8.
        let names = utf8_entries(8, &pool).unwrap();
        assert_eq!(names, [b"foo".as_slice(), b"()V".as_slice()]);
    }

    #[test]
    fn malformed_pools_give_none() {
        assert_eq!(utf8_entries(2, &[1, 0, 9, b'a']), None);
        assert_eq!(utf8_entries(2, &[99]), None);
        assert_eq!(utf8_entries(3, &[7, 0, 1]), None);
        assert_eq!(utf8_entries(1, &[]), Some(Vec::new()));
    }

    /// A real class file's pool: the probe class the rewriter generates.
    #[test]
    fn the_probe_class_pool_holds_its_method_names() {
        let class = sonda_rewriter::probe_class_bytes(&crate::probe::PROBE);
        // class file: magic u4, minor u2, major u2, constant_pool_count u2, pool...
        let count = u16::from_be_bytes([class[8], class[9]]);
        let names = utf8_entries(count, &class[10..]).unwrap();
        for name in [b"enter".as_slice(), b"exit", b"exitByException"] {
            assert!(names.contains(&name), "{name:?} not in {names:?}");
        }
    }
}
