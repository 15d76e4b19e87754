//! The records agents put in their rings: one or two 16-byte units, cheap to write on a
//! probe's hot path. Unit 0 is `time: u64, head: u32, arg: u32`, where `head` packs the
//! kind (bits 0-7), the number of extra units (bits 8-15) and a 16-bit `aux` field.
//! The collector turns them into `sonda_trace` records.

/// Entered method or region `arg`.
pub const ENTER: u8 = 1;
/// Left method or region `arg` normally.
pub const LEAVE: u8 = 2;
/// Left method `arg` by throwing.
pub const LEAVE_EXCEPTION: u8 = 3;
/// A Java thread started (its name is in the metadata log).
pub const THREAD_START: u8 = 4;
/// A Java thread ended.
pub const THREAD_END: u8 = 5;
/// The JVM (or C API) of the slot's process is ready.
pub const VM_INIT: u8 = 6;
/// The JVM is shutting down.
pub const VM_DEATH: u8 = 7;
/// A garbage collection started.
pub const GC_START: u8 = 8;
/// A garbage collection finished.
pub const GC_END: u8 = 9;
/// Contended monitor enter; `arg` is the monitor class id.
pub const MONITOR_CONTENDED: u8 = 10;
/// Contended monitor entered; `arg` is the monitor class id.
pub const MONITOR_ENTERED: u8 = 11;
/// Entered native function at an address: one extra unit holds it, or (short form, no
/// extra unit) its low 48 bits are `aux << 32 | arg` — every user-space address of
/// x86-64 and AArch64 with 48-bit virtual addresses. See [`func_addr`].
pub const FUNC_ENTER: u8 = 12;
/// Left native function; its address as for [`FUNC_ENTER`].
pub const FUNC_LEAVE: u8 = 13;
/// Typed user event: `arg` is the type; one extra unit holds the value.
pub const USER: u8 = 14;

/// Packs a record head.
#[inline(always)]
pub const fn head(kind: u8, extra_units: u8, aux: u16) -> u32 {
    kind as u32 | (extra_units as u32) << 8 | (aux as u32) << 16
}

/// Whether `addr` fits the short (one-unit) form of [`FUNC_ENTER`]/[`FUNC_LEAVE`].
#[inline(always)]
pub const fn func_addr_is_short(addr: u64) -> bool {
    addr >> 48 == 0
}

/// The `(head, arg)` of a short-form function record of `kind` (`FUNC_ENTER` or
/// `FUNC_LEAVE`) for `addr` (which must be [`func_addr_is_short`]).
#[inline(always)]
pub const fn func_short(kind: u8, addr: u64) -> (u32, u32) {
    (head(kind, 0, (addr >> 32) as u16), addr as u32)
}

/// The function address of a `FUNC_ENTER`/`FUNC_LEAVE` record, in either form.
#[inline]
pub fn func_addr(rec: &RingRecord) -> u64 {
    if rec.extra_units > 0 {
        rec.extra
    } else {
        u64::from(rec.aux) << 32 | u64::from(rec.arg)
    }
}

/// One decoded ring record.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RingRecord {
    /// Raw timestamp, on the clock the header names.
    pub time: u64,
    /// Record kind.
    pub kind: u8,
    /// The `aux` field.
    pub aux: u16,
    /// The `arg` field.
    pub arg: u32,
    /// The first extra unit's first 8 bytes, if any.
    pub extra: u64,
    /// How many extra units the record has.
    pub extra_units: u8,
}

/// Decodes drained ring bytes (whole units). Stops at a record whose extra units are
/// not all there, which a correct producer never leaves.
pub fn decode(bytes: &[u8]) -> impl Iterator<Item = RingRecord> + '_ {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        let (rec, next) = decode_at(bytes, pos)?;
        pos = next;
        Some(rec)
    })
}

/// Decodes the record at byte `pos` of drained ring bytes (a record boundary), with
/// the position of the next one; `None` past the end or for a record whose extra units
/// are not all there. For readers that keep their place in the bytes between records.
#[inline]
pub fn decode_at(bytes: &[u8], pos: usize) -> Option<(RingRecord, usize)> {
    let u = bytes.get(pos..pos.checked_add(16)?)?;
    let time = u64::from_le_bytes(u[0..8].try_into().unwrap());
    let h = u32::from_le_bytes(u[8..12].try_into().unwrap());
    let arg = u32::from_le_bytes(u[12..16].try_into().unwrap());
    let extra_units = ((h >> 8) & 0xff) as usize;
    let end = pos + 16 * (1 + extra_units);
    if end > bytes.len() {
        return None;
    }
    let extra = if extra_units > 0 {
        u64::from_le_bytes(bytes[pos + 16..pos + 24].try_into().unwrap())
    } else {
        0
    };
    Some((
        RingRecord {
            time,
            kind: (h & 0xff) as u8,
            aux: (h >> 16) as u16,
            arg,
            extra,
            extra_units: extra_units as u8,
        },
        end,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(time: u64, head: u32, arg: u32) -> Vec<u8> {
        let mut u = time.to_le_bytes().to_vec();
        u.extend_from_slice(&head.to_le_bytes());
        u.extend_from_slice(&arg.to_le_bytes());
        u
    }

    #[test]
    fn function_addresses_in_both_forms() {
        let addr = 0x7f12_3456_789a_u64;
        assert!(func_addr_is_short(addr) && !func_addr_is_short(1 << 48));
        let (h, a) = func_short(FUNC_ENTER, addr);
        let mut bytes = unit(5, h, a);
        bytes.extend(unit(6, head(FUNC_LEAVE, 1, 0), 0));
        bytes.extend_from_slice(&(1u64 << 50).to_le_bytes());
        bytes.extend_from_slice(&[0; 8]);
        let recs: Vec<RingRecord> = decode(&bytes).collect();
        assert_eq!(recs.len(), 2);
        assert_eq!((recs[0].kind, func_addr(&recs[0])), (FUNC_ENTER, addr));
        assert_eq!((recs[1].kind, func_addr(&recs[1])), (FUNC_LEAVE, 1 << 50));
    }
}
