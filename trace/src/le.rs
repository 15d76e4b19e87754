//! The format's one byte order: little-endian integers at fixed places of the file
//! and block headers. Record bodies read theirs in `codec` (`from_le_bytes` on the
//! next bytes) and write them with `to_le_bytes`: the same std conversions, which
//! compile to plain loads and stores on little-endian machines.

/// The `N` bytes at `at` of `b`. Callers pass fixed places inside headers of a
/// fixed length: `at + N` is always in range.
fn bytes<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&b[at..at + N]);
    a
}

/// The `u16` at `at`.
pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes(b, at))
}

/// The `u32` at `at`.
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes(b, at))
}

/// The `u64` at `at`.
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes(b, at))
}

/// Puts `v` at `at`.
pub(crate) fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

/// Puts `v` at `at`.
pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Puts `v` at `at`.
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_in_little_endian() {
        let mut b = [0u8; 16];
        put_u16(&mut b, 0, 0x0102);
        put_u32(&mut b, 2, 0x0304_0506);
        put_u64(&mut b, 6, 0x0708_090a_0b0c_0d0e);
        assert_eq!(b[..14], [2, 1, 6, 5, 4, 3, 14, 13, 12, 11, 10, 9, 8, 7]);
        assert_eq!(u16_at(&b, 0), 0x0102);
        assert_eq!(u32_at(&b, 2), 0x0304_0506);
        assert_eq!(u64_at(&b, 6), 0x0708_090a_0b0c_0d0e);
    }
}
