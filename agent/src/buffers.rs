//! Each thread's producer on its ring in the shared file, kept in thread-local storage.
//!
//! A thread's first record claims a slot (`Region::claim`, a scan of the slot table,
//! plus one `gettid`); later records are a thread-local read and `Producer::push`: no
//! lock, no allocation, no system call. When no slot is free, events are counted in the
//! region's `no_slot_drops` instead, and the thread tries again every
//! [`RETRY_CLAIM_AFTER`] events.
//!
//! JVMTI ThreadEnd retires the slot (the collector drains and frees it). The OS thread
//! may still record afterwards, as another Java thread (the launcher's main thread
//! detaches, then re-attaches as "DestroyJavaVM") or for the VM (VMDeath): its next
//! record claims a new slot. A thread that exits without ThreadEnd (a VM-internal or
//! an attached native thread) retires its slot from a thread-local destructor.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use sonda_shm::records::head;
use sonda_shm::{Producer, Region};

use crate::os;

/// Events a thread without a slot counts as lost before it scans for a free slot again.
pub const RETRY_CLAIM_AFTER: u32 = 4096;

static REGION: OnceLock<Region> = OnceLock::new();
static PID: AtomicU32 = AtomicU32::new(0);

/// A thread's relation to its slot.
#[derive(Clone, Copy)]
enum Slot {
    /// No record yet: the next one claims a slot.
    Unclaimed,
    /// Records go here.
    Owned(Producer),
    /// No slot was free when the thread last tried: its events are counted lost, and it
    /// tries again after this many more (slots free up as other threads end).
    Unavailable(u32),
    /// Records are ignored, uncounted (see [`muted`]).
    Muted,
    /// The OS thread is exiting (its thread-local destructors run): nothing more may
    /// be claimed, since nothing would retire it.
    Exited,
}

thread_local! {
    static SLOT: Cell<Slot> = const { Cell::new(Slot::Unclaimed) };
    static TID: Cell<u32> = const { Cell::new(0) };
    /// Touched only when a slot is claimed: its destructor retires the slot when the
    /// thread exits without a ThreadEnd event.
    static RETIRE_AT_EXIT: RetireAtExit = const { RetireAtExit };
}

struct RetireAtExit;

impl Drop for RetireAtExit {
    fn drop(&mut self) {
        retire_current();
        let _ = SLOT.try_with(|slot| slot.set(Slot::Exited));
    }
}

/// Keeps the mapped region for the life of the process (it is never unmapped: threads
/// may record until the very end). Returns false if one was already set.
pub fn set_region(region: Region) -> bool {
    PID.store(std::process::id(), Ordering::Relaxed);
    REGION.set(region).is_ok()
}

/// The mapped region, once set.
pub fn region() -> Option<&'static Region> {
    REGION.get()
}

/// This process's id (cached).
pub fn pid() -> u32 {
    PID.load(Ordering::Relaxed)
}

/// The calling thread's kernel id, cached after the first call.
pub fn current_tid() -> u32 {
    TID.try_with(|t| {
        if t.get() == 0 {
            t.set(os::gettid());
        }
        t.get()
    })
    .unwrap_or_else(|_| os::gettid())
}

/// Writes a one-unit record of `kind` with `arg` to the calling thread's ring.
#[inline(always)]
pub fn record(time: u64, kind: u8, arg: u32) {
    let done = SLOT.try_with(|slot| match slot.get() {
        Slot::Owned(p) => {
            p.push(time, head(kind, 0, 0), arg);
            true
        }
        _ => false,
    });
    if done != Ok(true) {
        record_slow(time, kind, arg);
    }
}

/// First record of a thread (claims a slot), or a thread without one.
#[cold]
#[inline(never)]
fn record_slow(time: u64, kind: u8, arg: u32) {
    let Some(region) = region() else { return };
    let target = SLOT.try_with(|slot| match slot.get() {
        Slot::Owned(p) => Some(Some(p)),
        Slot::Unclaimed | Slot::Unavailable(0) => match region.claim(pid(), current_tid()) {
            Some(p) => {
                slot.set(Slot::Owned(p));
                let _ = RETIRE_AT_EXIT.try_with(|_| ());
                Some(Some(p))
            }
            None => {
                slot.set(Slot::Unavailable(RETRY_CLAIM_AFTER));
                Some(None)
            }
        },
        Slot::Unavailable(n) => {
            slot.set(Slot::Unavailable(n - 1));
            Some(None)
        }
        Slot::Exited => Some(None),
        Slot::Muted => None,
    });
    match target {
        Ok(Some(Some(p))) => {
            p.push(time, head(kind, 0, 0), arg);
        }
        Ok(None) => {}
        _ => region.count_no_slot_drop(),
    }
}

/// Runs `f` with the calling thread's records ignored (not recorded, not counted):
/// for the agent's own calls of the probes.
pub fn muted<T>(f: impl FnOnce() -> T) -> T {
    let saved = SLOT.try_with(|slot| slot.replace(Slot::Muted)).ok();
    let result = f();
    if let Some(saved) = saved {
        let _ = SLOT.try_with(|slot| slot.set(saved));
    }
    result
}

/// Gives the calling thread's slot back (after its last record, THREAD_END); a later
/// record claims a new one.
pub fn retire_current() {
    let _ = SLOT.try_with(|slot| {
        if let Slot::Owned(p) = slot.get() {
            slot.set(Slot::Unclaimed);
            p.retire();
        }
    });
}
