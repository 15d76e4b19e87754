//! How large the buffer file is made: the sizes the user gave, else defaults scaled
//! down to the room there is.
//!
//! All of the file is reserved before any agent maps it (see
//! [`sonda_shm::Region::create_on`]), so its size is memory taken for the whole
//! recording: slots × (ring + slot header) + the metadata log + 68 KiB of header and
//! configuration. Without explicit sizes sonda takes at most half of the file system's
//! free space (the traced program may need the rest: `/dev/shm` is its too), a quarter
//! of the memory available to us, and [`AUTO_CAP`]; within that it keeps the defaults
//! if it can, else halves the ring down to [`MIN_RING`] first (more drops under load),
//! then gives fewer slots down to [`MIN_SLOTS`] (threads beyond record nothing). A
//! Docker container's default 64 MiB `/dev/shm` gets 256 rings of 64 KiB. Sizes the
//! user gave are kept as given: with both given, they only have to fit in the free
//! space; with one, the other is chosen as above.

use sonda_shm::layout::{CONFIG_LEN, HEADER_LEN, SLOT_HEADER_LEN};
use sonda_shm::Geometry;

/// Threads that can record at once, by default.
pub const DEFAULT_SLOTS: u32 = 256;
/// Bytes of ring per thread, by default.
pub const DEFAULT_RING: u32 = 1 << 20;
/// Bytes of metadata log (names of methods, threads, classes), by default.
pub const DEFAULT_META: u64 = 16 << 20;
/// The fewest slots sonda chooses by itself.
pub const MIN_SLOTS: u32 = 16;
/// The smallest ring sonda chooses by itself (a smaller one drops most events of a
/// busy thread between two drains, 50 ms apart).
pub const MIN_RING: u32 = 16 << 10;
/// The smallest metadata log.
pub const MIN_META: u64 = 256 << 10;
/// The most memory sonda reserves for the buffer unless both sizes are given.
pub const AUTO_CAP: u64 = 1 << 30;

/// The sizes the user asked for (`--agent-slots`, `--agent-buffer`), if any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wanted {
    /// Slots.
    pub slots: Option<u32>,
    /// Bytes of ring per slot (a power of two).
    pub ring: Option<u32>,
}

/// The room there is for the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    /// Free bytes of the file system (for us).
    pub free: u64,
    /// Memory available to us (the machine's, or our control group's if less).
    pub memory: Option<u64>,
}

/// What bounded the size chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Half of the free space.
    Space,
    /// All of the free space (both sizes given).
    AllSpace,
    /// A quarter of the memory available.
    Memory,
    /// [`AUTO_CAP`].
    Cap,
}

/// The sizes chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizing {
    /// The geometry to create.
    pub geometry: Geometry,
    /// What the defaults (with the user's sizes) would have been, when the room made
    /// them smaller; `None` when nothing had to give.
    pub reduced_from: Option<Geometry>,
    /// What limited it.
    pub bound: Bound,
}

/// Even the least buffer does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooSmall {
    /// The least geometry sonda would make with the user's sizes.
    pub least: Geometry,
    /// The bytes sonda would take at most.
    pub limit: u64,
    /// What limited it.
    pub bound: Bound,
}

/// The file's size for `geo`, as a u64.
pub fn bytes(geo: &Geometry) -> u64 {
    geo.file_len() as u64
}

/// Chooses the geometry (see the module documentation).
pub fn choose(wanted: Wanted, room: Room) -> Result<Sizing, TooSmall> {
    let explicit = wanted.slots.is_some() && wanted.ring.is_some();
    // What must not be exceeded, and what sonda aims below when it chooses.
    let (hard, hard_bound) = if explicit {
        (room.free, Bound::AllSpace)
    } else {
        match room.memory {
            Some(m) if m / 4 < room.free / 2 => (m / 4, Bound::Memory),
            _ => (room.free / 2, Bound::Space),
        }
    };
    let (soft, soft_bound) = if explicit || hard <= AUTO_CAP {
        (hard, hard_bound)
    } else {
        (AUTO_CAP, Bound::Cap)
    };
    let mut geo = Geometry {
        slots: wanted.slots.unwrap_or(DEFAULT_SLOTS),
        ring_len: wanted.ring.unwrap_or(DEFAULT_RING),
        meta_len: DEFAULT_META,
    };
    let default = geo;
    let within = |g: &Geometry, limit: u64| bytes(g) <= limit;
    // The log first, down to an eighth of the room: a small program names few methods.
    while !within(&geo, soft) && geo.meta_len > MIN_META && (explicit || geo.meta_len > soft / 8) {
        geo.meta_len /= 2;
    }
    if wanted.ring.is_none() {
        while !within(&geo, soft) && geo.ring_len > MIN_RING {
            geo.ring_len /= 2;
        }
    }
    if !within(&geo, soft) && wanted.slots.is_none() {
        let fixed = (HEADER_LEN + CONFIG_LEN) as u64 + geo.meta_len;
        let per_slot = u64::from(geo.ring_len) + SLOT_HEADER_LEN as u64;
        let fit = soft.saturating_sub(fixed) / per_slot;
        geo.slots = fit.clamp(u64::from(MIN_SLOTS), u64::from(DEFAULT_SLOTS)) as u32;
    }
    while !within(&geo, hard) && geo.meta_len > MIN_META {
        geo.meta_len /= 2;
    }
    if !within(&geo, hard) {
        return Err(TooSmall {
            least: Geometry {
                slots: wanted.slots.unwrap_or(MIN_SLOTS),
                ring_len: wanted.ring.unwrap_or(MIN_RING),
                meta_len: MIN_META,
            },
            limit: hard,
            bound: hard_bound,
        });
    }
    let reduced = geo != default;
    Ok(Sizing {
        geometry: geo,
        reduced_from: reduced.then_some(default),
        bound: if reduced { soft_bound } else { hard_bound },
    })
}

/// `n` bytes for people: `64 KiB`, `20.1 MiB`.
pub fn human(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `256 rings of 64 KiB and a 4 MiB log`.
pub fn describe(geo: &Geometry) -> String {
    format!(
        "{} rings of {} and a {} log",
        geo.slots,
        human(u64::from(geo.ring_len)),
        human(geo.meta_len)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn room(free: u64) -> Room {
        Room {
            free,
            memory: Some(64 << 30),
        }
    }

    fn auto(free: u64) -> Result<Sizing, TooSmall> {
        choose(Wanted::default(), room(free))
    }

    #[test]
    fn the_defaults_when_they_fit() {
        let s = auto(24 << 30).unwrap();
        assert_eq!(
            s.geometry,
            Geometry {
                slots: DEFAULT_SLOTS,
                ring_len: DEFAULT_RING,
                meta_len: DEFAULT_META
            }
        );
        assert_eq!(s.reduced_from, None);
        assert!(bytes(&s.geometry) < 300 * MIB);
    }

    /// Docker's default /dev/shm: every thread keeps a slot, with smaller rings.
    #[test]
    fn a_docker_shm_gets_smaller_rings() {
        let s = auto(64 * MIB).unwrap();
        assert_eq!(s.geometry.slots, DEFAULT_SLOTS);
        assert_eq!(s.geometry.ring_len, 64 << 10);
        assert_eq!(s.geometry.meta_len, 4 * MIB);
        assert!(bytes(&s.geometry) <= 32 * MIB);
        assert_eq!(s.bound, Bound::Space);
        assert_eq!(describe(&s.geometry), "256 rings of 64 KiB and a 4 MiB log");
        assert!(s.reduced_from.is_some());
    }

    /// 4 MiB: the smallest rings, and as many slots as fit in half of it.
    #[test]
    fn a_tiny_shm_gets_fewer_slots_and_a_full_one_none() {
        let s = auto(4 * MIB).unwrap();
        assert_eq!(s.geometry.ring_len, MIN_RING);
        assert_eq!(s.geometry.meta_len, MIN_META);
        assert!(s.geometry.slots >= 64 && s.geometry.slots < DEFAULT_SLOTS);
        assert!(bytes(&s.geometry) <= 2 * MIB);
        let e = auto(MIB).unwrap_err();
        assert_eq!(e.limit, MIB / 2);
        assert!(bytes(&e.least) > e.limit);
        assert_eq!(e.least.slots, MIN_SLOTS);
        assert!(auto(0).is_err());
    }

    /// Sizes the user gave stay; only the other one gives.
    #[test]
    fn explicit_sizes_are_kept() {
        // Both: all the free space may go, not half.
        let both = Wanted {
            slots: Some(32),
            ring: Some(16 << 10),
        };
        let s = choose(both, room(MIB)).unwrap();
        assert_eq!((s.geometry.slots, s.geometry.ring_len), (32, 16 << 10));
        assert!(bytes(&s.geometry) <= MIB);
        assert_eq!(s.bound, Bound::AllSpace);
        let too_big = Wanted {
            slots: Some(64),
            ring: Some(1 << 20),
        };
        let e = choose(too_big, room(32 * MIB)).unwrap_err();
        assert_eq!((e.least.slots, e.least.ring_len), (64, 1 << 20));
        // The ring: slots give, within the cap (big rings for a few threads).
        let ring = Wanted {
            slots: None,
            ring: Some(64 << 20),
        };
        let s = choose(ring, room(24 << 30)).unwrap();
        assert_eq!(s.geometry.ring_len, 64 << 20);
        assert_eq!(s.geometry.slots, MIN_SLOTS);
        assert_eq!(s.bound, Bound::Cap);
        // The fewest slots sonda gives, even a little over the cap.
        assert!(bytes(&s.geometry) <= AUTO_CAP + 2 * DEFAULT_META);
        // The slots: the ring gives.
        let slots = Wanted {
            slots: Some(1024),
            ring: None,
        };
        let s = choose(slots, room(64 * MIB)).unwrap();
        assert_eq!(s.geometry.slots, 1024);
        assert_eq!(s.geometry.ring_len, MIN_RING);
        assert!(choose(slots, room(8 * MIB)).is_err());
    }

    #[test]
    fn memory_bounds_it_too() {
        let s = choose(
            Wanted::default(),
            Room {
                free: 24 << 30,
                memory: Some(256 * MIB),
            },
        )
        .unwrap();
        assert_eq!(s.bound, Bound::Memory);
        assert!(bytes(&s.geometry) <= 64 * MIB);
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human(64 << 10), "64 KiB");
        assert_eq!(human(20 * MIB + MIB / 10), "20.1 MiB");
        assert_eq!(human(1 << 30), "1 GiB");
        assert_eq!(human(100), "100 bytes");
    }
}
