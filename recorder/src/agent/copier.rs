//! The ring copier: a thread that does nothing but move bytes out of the agents' rings
//! into staging buffers when a ring passes a quarter full (the doorbell), so that a
//! busy thread's ring is emptied within microseconds of asking, whatever the cycle's
//! thread is busy with.
//!
//! The cycle's thread turns drained bytes into trace records (tens of nanoseconds
//! each): at ten million events a second it is busy most of the time, and on a loaded
//! machine the scheduler gives a busy thread its fair share in slices, so it waited up
//! to 5 ms for a CPU, while a 1 MiB ring fills in 6.5 ms at that rate. A thread that
//! sleeps between short copies (a quarter of a ring is a 256 KiB copy, about 20 µs) is
//! run as soon as it wakes. The cycle's drain ([`super::AgentSource::drain`]) takes the
//! staged bytes first, then what is left in the ring: the same order as written.
//!
//! A slot's staging is locked while the copier fills it and while the cycle takes
//! from it (it decodes outside the lock) or drains the ring and frees the slot, so that
//! staged bytes are always taken before the slot is freed (a new owner never inherits
//! them). The staged bytes are bounded ([`MAX_STAGED`]): past that the copier leaves
//! the rings alone, and agents drop and count as they would without it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use sonda_shm::{Region, SlotState};

/// Staged bytes at most (then the rings fill and agents drop, counted).
pub const MAX_STAGED: usize = 256 << 20;
/// A slot is worth copying from this fill on (an eighth of its ring).
const WORTH_COPYING_SHIFT: u32 = 3;
/// Longest sleep without a doorbell. The cycle drains every ring at its own period
/// anyway, so this look is only a safety net; at 20 ms its wakes and its scan of every
/// slot's header (each on its own page) were a third of the collector's CPU on an idle
/// Tomcat (docs/overhead.md). Stopping rings the doorbell, so it does not wait this.
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// How soon the copier looks again when its last look left a ring it should have
/// copied: one the cycle held (it takes the staged bytes, or drains, under the slot's
/// lock), or all of them with the staging full. The producer rings once per drain of
/// its ring, so a bell answered by a look that could not copy is not rung again until
/// something drains that ring: waiting [`IDLE_WAIT`] then left the ring to fill up
/// until the cycle's next drain (up to 50 ms, where a 1 MiB ring lasts 13 ms at five
/// million events a second: two threads at 2.5 M calls a second dropped 8-42 k events
/// in one run of two, each time on such a miss).
const RETRY_WAIT: Duration = Duration::from_millis(1);
/// The copier's real-time priority, when permitted (root or CAP_SYS_NICE): the lowest
/// `SCHED_FIFO` one. At nice -10 it still waited up to 2.4 ms for a CPU behind the
/// cycle's thread (perf sched timehist, 10M events/s), as long as a quarter ring takes
/// to fill; a real-time thread runs as soon as it wakes. It runs for microseconds per
/// wake (a copy) and sleeps on the doorbell or a timeout, so it cannot hold a CPU;
/// the kernel's real-time throttling bounds it anyway.
const FIFO_PRIORITY: i32 = 1;
/// Its nice value when a real-time priority is refused.
const NICE: i32 = -10;
/// Empty buffers kept for the copier.
const POOL: usize = 64;

/// What the copier and the cycle share.
pub struct Staging {
    /// Per slot: bytes copied from its ring, oldest first.
    slots: Vec<Mutex<Vec<Vec<u8>>>>,
    /// Empty buffers to copy into.
    pool: Mutex<Vec<Vec<u8>>>,
    /// Bytes staged now.
    bytes: AtomicUsize,
    /// The slots in use lie below this (the cycle's scan limit).
    scan_limit: AtomicU32,
    /// Times the copier woke to a doorbell.
    bells: AtomicU64,
    /// Times the copier looked again soon ([`RETRY_WAIT`]) after a look that left a
    /// ring it should have copied.
    retries: AtomicU64,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Neither side panics while holding a lock; if one did, the data is still whole.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Staging {
    /// Locks slot `i`'s staging (the cycle's drain holds it while it takes the staged
    /// bytes, and again while it drains the ring and frees the slot).
    pub fn slot(&self, i: u32) -> MutexGuard<'_, Vec<Vec<u8>>> {
        lock(&self.slots[i as usize])
    }

    /// Moves the buffers of a locked slot's staging (`staged`, from [`Staging::slot`])
    /// to the end of `into`, no longer counted as staged.
    pub fn take(&self, staged: &mut Vec<Vec<u8>>, into: &mut Vec<Vec<u8>>) {
        let n: usize = staged.iter().map(Vec::len).sum();
        self.bytes.fetch_sub(n, Ordering::Relaxed);
        into.append(staged);
    }

    /// Tells the copier where the slots in use end.
    pub fn set_scan_limit(&self, limit: u32) {
        self.scan_limit.store(limit, Ordering::Relaxed);
    }

    /// Gives the copier empty buffers from `spare`, up to its pool's size.
    pub fn refill(&self, spare: &mut Vec<Vec<u8>>) {
        let mut pool = lock(&self.pool);
        while pool.len() < POOL {
            match spare.pop() {
                Some(b) => pool.push(b),
                None => break,
            }
        }
    }

    /// Times the copier woke to a doorbell.
    pub fn bells(&self) -> u64 {
        self.bells.load(Ordering::Relaxed)
    }

    /// Times the copier looked again soon after a look that could not copy a ring.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }
}

/// The running copier; stops and joins when dropped.
pub struct Copier {
    staging: Arc<Staging>,
    /// To ring the doorbell when stopping.
    region: Arc<Region>,
    thread: Option<JoinHandle<()>>,
}

impl Copier {
    /// Starts the copier on `region`'s rings.
    pub fn start(region: Arc<Region>) -> std::io::Result<Copier> {
        let slots = region.slots();
        let staging = Arc::new(Staging {
            slots: (0..slots).map(|_| Mutex::new(Vec::new())).collect(),
            pool: Mutex::new(Vec::new()),
            bytes: AtomicUsize::new(0),
            scan_limit: AtomicU32::new(slots),
            bells: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let shared = Arc::clone(&staging);
        let watched = Arc::clone(&region);
        let thread = std::thread::Builder::new()
            .name("sonda-copier".into())
            .spawn(move || run(&watched, &shared))?;
        Ok(Copier {
            staging,
            region,
            thread: Some(thread),
        })
    }

    /// What the cycle's drain shares with the copier.
    pub fn staging(&self) -> &Arc<Staging> {
        &self.staging
    }

    /// Stops the thread; what it staged stays, for the last drain.
    pub fn stop(&mut self) {
        self.staging.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // Wakes it from its wait (the stop flag is set before the ring it sees).
            self.region.wake_doorbell_waiters();
            let _ = t.join();
        }
    }
}

impl Drop for Copier {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(region: &Region, staging: &Staging) {
    if crate::sys::set_thread_fifo(FIFO_PRIORITY).is_err() {
        let _ = crate::sys::set_thread_nice(NICE);
    }
    let worth = u64::from(region.geometry().ring_len) >> WORTH_COPYING_SHIFT;
    // Not the doorbell's count now: a ring rung before this thread ran rings once per
    // drain only, so it must be answered.
    let mut seen = 0;
    // The last look left a ring it should have copied (see RETRY_WAIT).
    let mut left = false;
    while !staging.stop.load(Ordering::Acquire) {
        let wait = if left {
            staging.retries.fetch_add(1, Ordering::Relaxed);
            RETRY_WAIT
        } else {
            IDLE_WAIT
        };
        left = false;
        let now = region.wait_doorbell(seen, wait);
        if staging.stop.load(Ordering::Acquire) {
            // Woken to stop: the cycle's last drain takes what is left.
            break;
        }
        if now != seen {
            staging.bells.fetch_add(1, Ordering::Relaxed);
        }
        // Without a ring (timed out) a look anyway: agents of builds without the
        // doorbell, and any ring whose bell went unanswered.
        seen = now;
        let limit = staging
            .scan_limit
            .load(Ordering::Relaxed)
            .min(region.slots());
        for i in 0..limit {
            let pending = region.pending_bytes(i);
            if pending < worth {
                continue;
            }
            if staging.bytes.load(Ordering::Relaxed) >= MAX_STAGED {
                left = true;
                break;
            }
            if !matches!(
                region.slot_info(i).state,
                SlotState::Owned | SlotState::Retired
            ) {
                continue;
            }
            // The cycle is draining this slot now: it takes the bytes itself.
            let Ok(mut staged) = staging.slots[i as usize].try_lock() else {
                left = true;
                continue;
            };
            let mut buffer = lock(&staging.pool).pop().unwrap_or_default();
            buffer.clear();
            // At once, rather than growing (and copying) while the ring is read.
            buffer.reserve(pending.min(u64::from(region.geometry().ring_len)) as usize);
            let n = region.drain(i, &mut buffer);
            if n > 0 {
                staging.bytes.fetch_add(n, Ordering::Relaxed);
                staged.push(buffer);
            } else {
                lock(&staging.pool).push(buffer);
            }
        }
    }
}
