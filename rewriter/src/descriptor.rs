//! Sizes (in JVM stack/local slots) of field and method descriptors (JVMS 4.3).

/// Slots taken by one field type at `d[i..]`; returns (slots, index after it).
fn field(d: &[u8], mut i: usize) -> Option<(u32, usize)> {
    let mut array = false;
    while d.get(i) == Some(&b'[') {
        array = true;
        i += 1;
    }
    let slots = match *d.get(i)? {
        b'B' | b'C' | b'F' | b'I' | b'S' | b'Z' => 1,
        b'J' | b'D' => 2,
        b'L' => {
            let semi = d[i..].iter().position(|&c| c == b';')?;
            i += semi;
            1
        }
        _ => return None,
    };
    Some((if array { 1 } else { slots }, i + 1))
}

/// Slots of a field descriptor such as `J` or `Ljava/lang/String;`.
pub(crate) fn field_slots(d: &[u8]) -> Option<u32> {
    match field(d, 0)? {
        (s, end) if end == d.len() => Some(s),
        _ => None,
    }
}

/// (argument slots, return slots) of a method descriptor such as `(IJ)D`.
pub(crate) fn method_slots(d: &[u8]) -> Option<(u32, u32)> {
    if d.first() != Some(&b'(') {
        return None;
    }
    let mut i = 1;
    let mut args = 0;
    while *d.get(i)? != b')' {
        let (s, next) = field(d, i)?;
        args += s;
        i = next;
    }
    let ret = if d.get(i + 1) == Some(&b'V') && d.len() == i + 2 {
        0
    } else {
        field_slots(d.get(i + 1..)?)?
    };
    Some((args, ret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(method_slots(b"()V"), Some((0, 0)));
        assert_eq!(method_slots(b"(IJ[J[[Ljava/lang/String;D)J"), Some((7, 2)));
        assert_eq!(
            method_slots(b"(Ljava/lang/Object;)Ljava/lang/Object;"),
            Some((1, 1))
        );
        assert_eq!(method_slots(b"(I"), None);
        assert_eq!(method_slots(b"(L)V"), None);
        assert_eq!(method_slots(b"()VV"), None);
        assert_eq!(method_slots(b"I"), None);
        assert_eq!(field_slots(b"D"), Some(2));
        assert_eq!(field_slots(b"[D"), Some(1));
        assert_eq!(field_slots(b"V"), None);
        assert_eq!(field_slots(b"II"), None);
    }
}
