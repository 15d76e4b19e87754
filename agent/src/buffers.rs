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
//!
//! # Several recordings in one JVM
//! After an attach, recording stops and may start again later with another buffer file
//! (a second attach). Each recording's file is mapped once and never unmapped (a thread
//! may be inside `push` on it at any moment; the mapping is kept, the collector removes
//! the file), and is identified by the address of its leaked [`Recording`]. A thread's
//! slot handle remembers that address: a handle from an earlier recording no longer
//! matches [`current`] and the thread claims a slot in the new file. Between two
//! recordings, the slow path finds no region and drops records uncounted.

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use sonda_shm::records::head;
use sonda_shm::{Producer, Region};

use crate::os;

/// Events a thread without a slot counts as lost before it scans for a free slot again.
pub const RETRY_CLAIM_AFTER: u32 = 4096;

/// One recording's buffer file, leaked: its address names the recording.
pub struct Recording {
    region: Region,
    generation: u32,
}

/// The recording records go to; null before the first and between two recordings.
static CURRENT: AtomicPtr<Recording> = AtomicPtr::new(std::ptr::null_mut());
/// Recordings started in this process so far.
static GENERATIONS: AtomicU32 = AtomicU32::new(0);
static PID: AtomicU32 = AtomicU32::new(0);

/// A thread's relation to its slot.
#[derive(Clone, Copy)]
enum Slot {
    /// No record yet: the next one claims a slot.
    Unclaimed,
    /// Records go here, while the recording is the current one.
    Owned(Producer, *const Recording),
    /// No slot was free when the thread last tried: its events are counted lost, and it
    /// tries again after this many more (slots free up as other threads end).
    Unavailable(u32, *const Recording),
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

/// Makes `region` the buffer of a new recording and returns the recording's generation
/// (1 for the first). The previous recording's file stays mapped for good (see the
/// module documentation).
pub fn start_recording(region: Region) -> u32 {
    PID.store(std::process::id(), Ordering::Relaxed);
    let generation = GENERATIONS.fetch_add(1, Ordering::AcqRel) + 1;
    let recording = Box::leak(Box::new(Recording { region, generation }));
    CURRENT.store(recording, Ordering::Release);
    crate::hooks::recording_changed();
    generation
}

/// Ends the current recording: records and metadata go nowhere until the next one.
pub fn end_recording() {
    CURRENT.store(std::ptr::null_mut(), Ordering::Release);
    crate::hooks::recording_changed();
}

/// In the child of a `fork`: the calling thread's slot is its parent's, and so are the
/// cached ids. The child's records claim slots of its own.
pub fn after_fork() {
    PID.store(std::process::id(), Ordering::Relaxed);
    let _ = TID.try_with(|t| t.set(0));
    let _ = SLOT.try_with(|slot| slot.set(Slot::Unclaimed));
    crate::hooks::forget_thread();
}

fn current() -> Option<&'static Recording> {
    let p = CURRENT.load(Ordering::Acquire);
    // SAFETY: CURRENT is null or a pointer from Box::leak in `start_recording`, never
    // freed, so it is valid for the rest of the process.
    unsafe { p.as_ref() }
}

/// The current recording's region, if one is running.
pub fn region() -> Option<&'static Region> {
    current().map(|r| &r.region)
}

/// The current recording's generation (1 for the first), 0 when none runs.
pub fn generation() -> u32 {
    current().map_or(0, |r| r.generation)
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
    let done = SLOT.try_with(|slot| {
        // Read in place rather than through `Cell::get`: copying the whole enum costs a
        // store-forwarding stall on every probe (its payload is not 8-byte aligned).
        // SAFETY: the cell is this thread's; nothing mutates it during this borrow
        // (`push` does not touch SLOT), and the reference does not outlive the match.
        match unsafe { &*slot.as_ptr() } {
            // One relaxed load: is the handle's recording still the current one?
            Slot::Owned(p, r) if *r == CURRENT.load(Ordering::Relaxed).cast_const() => {
                p.push(time, head(kind, 0, 0), arg);
                true
            }
            _ => false,
        }
    });
    if done != Ok(true) {
        record_slow(time, kind, arg);
    }
}

/// First record of a thread in this recording (claims a slot), or a thread without one.
#[cold]
#[inline(never)]
fn record_slow(time: u64, kind: u8, arg: u32) {
    if let Some(p) = producer() {
        p.push(time, head(kind, 0, 0), arg);
    }
}

/// The calling thread's producer in the current recording, claiming a slot on its first
/// record; `None` (counted as a lost event when there is a recording) when it has none.
/// Off the hot path: for [`record`]'s first record and for the C hooks' (`hooks`).
pub fn producer() -> Option<Producer> {
    let recording = current()?;
    let this: *const Recording = recording;
    let region = &recording.region;
    let target = SLOT.try_with(|slot| match slot.get() {
        Slot::Owned(p, r) if r == this => Some(Some(p)),
        Slot::Unavailable(n, r) if r == this && n > 0 => {
            slot.set(Slot::Unavailable(n - 1, r));
            Some(None)
        }
        // No slot yet, one of an earlier recording, or time to try again.
        Slot::Unclaimed | Slot::Owned(..) | Slot::Unavailable(..) => {
            match region.claim(pid(), current_tid()) {
                Some(p) => {
                    slot.set(Slot::Owned(p, this));
                    let _ = RETIRE_AT_EXIT.try_with(|_| ());
                    Some(Some(p))
                }
                None => {
                    slot.set(Slot::Unavailable(RETRY_CLAIM_AFTER, this));
                    Some(None)
                }
            }
        }
        Slot::Exited => Some(None),
        Slot::Muted => None,
    });
    match target {
        Ok(Some(Some(p))) => Some(p),
        Ok(None) => None,
        _ => {
            region.count_no_slot_drop();
            None
        }
    }
}

/// Ignores every record of the calling thread from now on: for the agent's own Java
/// threads ("sonda-attach", "sonda-stop"), which are no part of the application (the
/// kernel events still show the CPU they use).
pub fn mute_this_thread() {
    let _ = SLOT.try_with(|slot| slot.set(Slot::Muted));
}

/// Whether the calling thread's records are ignored.
pub fn is_muted() -> bool {
    SLOT.try_with(|slot| matches!(slot.get(), Slot::Muted))
        .unwrap_or(false)
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
    let now = CURRENT.load(Ordering::Acquire).cast_const();
    let _ = SLOT.try_with(|slot| {
        if let Slot::Owned(p, r) = slot.get() {
            slot.set(Slot::Unclaimed);
            crate::hooks::forget_thread();
            // A slot of an earlier recording: its collector is gone, leave it.
            if r == now {
                p.retire();
            }
        }
    });
}
