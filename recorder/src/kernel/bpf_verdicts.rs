//! The BPF programs' verdict per tid (`tasks` in `bpf/sched.bpf.c`), mapped into the
//! collector.
//!
//! The programs look up whether a task is traced at every scheduler event, on every
//! task of the machine. A hash map of tids cost about 100 ns a program run on this
//! project's machines (docs/overhead.md, "The BPF programs cost more than the
//! collector"); a byte per possible tid in one array value is one load. The collector
//! writes its bytes through a shared mapping of that value (`BPF_F_MMAPABLE`): a
//! store per tid, no system call, and no read-modify-write that could undo a byte the
//! programs wrote beside it (each tid has its own byte).

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU8, Ordering};

use memmap2::{MmapOptions, MmapRaw};

/// Tids the array has a byte for: `PID_MAX_LIMIT` on 64-bit machines (`MAX_TIDS` in
/// the C file), the most any tid can be.
pub const MAX_TIDS: usize = 1 << 22;

/// The mapped array.
pub struct Verdicts {
    map: MmapRaw,
}

impl Verdicts {
    /// Maps the value of the one-element array map `fd` (created `BPF_F_MMAPABLE`, of
    /// [`MAX_TIDS`] bytes).
    pub fn map(fd: BorrowedFd<'_>) -> io::Result<Verdicts> {
        let map = MmapOptions::new().len(MAX_TIDS).map_raw(&fd)?;
        Ok(Verdicts { map })
    }

    /// Sets `tid`'s byte; a tid beyond [`MAX_TIDS`] (none the kernel gives) is refused.
    pub fn set(&self, tid: u32, value: u8) -> io::Result<()> {
        let byte = self.byte(tid).ok_or_else(|| {
            io::Error::other(format!(
                "tid {tid} is beyond the kernel's limit ({MAX_TIDS})"
            ))
        })?;
        byte.store(value, Ordering::Release);
        Ok(())
    }

    /// `tid`'s byte (0 when not set, or beyond [`MAX_TIDS`]).
    #[cfg(test)]
    pub fn get(&self, tid: u32) -> u8 {
        self.byte(tid).map_or(0, |b| b.load(Ordering::Acquire))
    }

    /// `tid`'s byte in the mapping; `None` beyond [`MAX_TIDS`].
    fn byte(&self, tid: u32) -> Option<&AtomicU8> {
        let i = tid as usize;
        if i >= MAX_TIDS {
            return None;
        }
        // SAFETY: `i` is within the mapping (`MAX_TIDS` bytes, mapped for as long as
        // `self` lives, which the returned borrow cannot outlive); the byte is shared
        // with the BPF programs, which read and write single bytes too, so it is only
        // ever accessed atomically from this side.
        Some(unsafe { AtomicU8::from_ptr(self.map.as_mut_ptr().add(i)) })
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};

    use super::*;

    /// A one-element array map like the programs' `tasks`, or `None` (with a message)
    /// where this process may not create BPF maps; under CI that is a failure.
    fn tasks_map() -> Option<MapHandle> {
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: 1 << 10, // BPF_F_MMAPABLE
            ..Default::default()
        };
        match MapHandle::create(
            MapType::Array,
            Some("verdicts"),
            4,
            MAX_TIDS as u32,
            1,
            &opts,
        ) {
            Ok(map) => Some(map),
            Err(e) if std::env::var_os("CI").is_none_or(|v| v != "true") => {
                eprintln!("skipped: cannot create a BPF map here ({e}); run as root");
                None
            }
            Err(e) => panic!("cannot create a BPF map under CI: {e}"),
        }
    }

    /// What the collector writes through the mapping is what the kernel holds (what the
    /// programs read), byte for byte at the tid's place; neighbours stay untouched.
    #[test]
    fn a_tids_byte_is_set_where_the_programs_read_it() {
        let Some(map) = tasks_map() else { return };
        let verdicts = Verdicts::map(map.as_fd()).unwrap();
        verdicts.set(0, 2).unwrap();
        verdicts.set(12_345, 1).unwrap();
        verdicts.set((MAX_TIDS - 1) as u32, 2).unwrap();
        let value = map
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .unwrap()
            .expect("the one element");
        assert_eq!(value.len(), MAX_TIDS);
        assert_eq!(
            (value[0], value[12_344], value[12_345], value[12_346]),
            (2, 0, 1, 0)
        );
        assert_eq!(value[MAX_TIDS - 1], 2);
        assert_eq!(value.iter().filter(|b| **b != 0).count(), 3);
        // And back: a byte the kernel side holds reads through the mapping.
        let mut changed = value.clone();
        changed[777] = 1;
        map.update(&0u32.to_ne_bytes(), &changed, MapFlags::ANY)
            .unwrap();
        assert_eq!((verdicts.get(777), verdicts.get(12_345)), (1, 1));
    }

    #[test]
    fn a_tid_beyond_the_kernels_limit_is_refused() {
        let Some(map) = tasks_map() else { return };
        let verdicts = Verdicts::map(map.as_fd()).unwrap();
        let e = verdicts.set(MAX_TIDS as u32, 1).unwrap_err();
        assert!(e.to_string().contains("4194304"), "{e}");
    }
}
