//! Fixed-width words read from the byte buffers the kernel fills (ftrace pages, perf
//! records, the BPF programs' records), in the machine's byte order; `None` past the
//! end, so that a short record is an error and never a panic.

pub(super) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

pub(super) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

pub(super) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_inside_the_buffer_only() {
        let b = 0x0807_0605_0403_0201u64.to_ne_bytes();
        assert_eq!(u64_at(&b, 0), Some(0x0807_0605_0403_0201));
        assert_eq!(u32_at(&b, 4), Some(0x0807_0605));
        assert_eq!(u16_at(&b, 6), Some(0x0807));
        assert_eq!(u16_at(&b, 7), None);
        assert_eq!(u64_at(&b, usize::MAX), None);
    }
}
