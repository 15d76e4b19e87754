//! The mapped file and the lock-free protocol on it.
//!
//! Each thread that records owns one slot: a single-producer single-consumer ring of
//! bytes with monotonically increasing `write` and `read` counters. The producer never
//! waits: when the ring lacks room it counts a drop and returns. The consumer (the
//! collector) copies `[read, write)` out and then advances `read`. Release/acquire on the
//! counters orders the data bytes, which each side touches only in its own range.
//!
//! The metadata log is append-only: writers reserve space with one `fetch_add` and
//! publish a record by storing its length last; the reader stops at the first record not
//! yet published. It never wraps, so nothing in it is lost once written, and it is never
//! on a probe's hot path (class loading, thread start).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::MmapRaw;

use crate::config::{AgentConfig, ConfigError};
use crate::layout::{
    hdr, slot, AgentState, Clock, Geometry, SlotState, CONFIG_LEN, HEADER_LEN, MAGIC,
    SLOT_HEADER_LEN, UNIT, VERSION,
};
use crate::lock;

/// Why an agent could not use a shared file.
#[derive(Debug)]
pub enum OpenError {
    /// It could not be opened or mapped.
    Io(io::Error),
    /// It is not a sonda buffer file, or of another layout version.
    Layout(&'static str),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Io(e) => write!(f, "{e}"),
            OpenError::Layout(what) => write!(f, "not a usable sonda buffer file: {what}"),
        }
    }
}

impl std::error::Error for OpenError {}

/// Why the collector could not make a buffer file.
#[derive(Debug)]
pub enum CreateError {
    /// The geometry or the configuration cannot be used.
    Invalid(&'static str),
    /// The file system could not reserve the file's `bytes` (a full tmpfs, a quota):
    /// nothing was mapped.
    Reserve {
        /// The file's size.
        bytes: u64,
        /// What the file system said.
        error: io::Error,
    },
    /// Creating, locking, sizing or mapping the file failed.
    Io(io::Error),
}

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CreateError::Invalid(what) => f.write_str(what),
            CreateError::Reserve { bytes, error } => {
                write!(
                    f,
                    "cannot reserve {bytes} bytes for the buffer file: {error}"
                )
            }
            CreateError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CreateError {}

impl From<io::Error> for CreateError {
    fn from(e: io::Error) -> CreateError {
        CreateError::Io(e)
    }
}

/// A mapped buffer file.
pub struct Region {
    map: MmapRaw,
    geo: Geometry,
    /// The file itself, open for as long as the region lives: the collector's holds
    /// its lock ([`crate::lock`]); an agent's is what it tests the collector's with.
    file: File,
}

// SAFETY: all shared mutation goes through atomics or through ring ranges that the
// SPSC protocol gives to exactly one side at a time.
unsafe impl Sync for Region {}
// SAFETY: as above; the mapping itself may move between threads.
unsafe impl Send for Region {}

impl Region {
    /// Creates the file at `path` (which must not exist; mode 0600, never through a
    /// symlink) and makes it the buffer ([`Region::create_on`]). On failure nothing is
    /// left at `path`.
    pub fn create(
        path: &Path,
        geo: Geometry,
        clock: Clock,
        config: &AgentConfig,
    ) -> Result<Region, CreateError> {
        let text = config
            .encode()
            .map_err(|_| CreateError::Invalid("the agent configuration cannot be encoded"))?;
        Region::create_with_config_text(path, geo, clock, &text)
    }

    /// Like [`Region::create`], with `config` written verbatim as the configuration text:
    /// what a collector of another version, or a damaged file, may hold. Agents must
    /// refuse such a text cleanly; their tests use this to check that they do.
    pub fn create_with_config_text(
        path: &Path,
        geo: Geometry,
        clock: Clock,
        config: &str,
    ) -> Result<Region, CreateError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)?;
        let made = Region::init(file, geo, clock, config);
        if made.is_err() {
            let _ = std::fs::remove_file(path);
        }
        made
    }

    /// Makes `file`, just created by the caller and still empty, the buffer for `geo`
    /// with the given clock and configuration for agents (the collector's side).
    ///
    /// The file's whole memory, slots and metadata log included, is reserved
    /// (`fallocate`) before it is mapped: a mapping of a sparse file on a full tmpfs
    /// faults (SIGBUS) the first time a page is touched, in whichever process touches
    /// it, a traced JVM included. So once this returns, no access of any agent to the
    /// file can fault; when the reservation fails, [`CreateError::Reserve`] says so and
    /// nothing was mapped. The caller's descriptor then holds the owner's lock
    /// ([`crate::lock`]) for the region's life.
    pub fn create_on(
        file: File,
        geo: Geometry,
        clock: Clock,
        config: &AgentConfig,
    ) -> Result<Region, CreateError> {
        let text = config
            .encode()
            .map_err(|_| CreateError::Invalid("the agent configuration cannot be encoded"))?;
        Region::init(file, geo, clock, &text)
    }

    fn init(file: File, geo: Geometry, clock: Clock, config: &str) -> Result<Region, CreateError> {
        if !geo.valid() {
            return Err(CreateError::Invalid("invalid buffer geometry"));
        }
        if config.len() > CONFIG_LEN {
            return Err(CreateError::Invalid(
                "agent configuration too long (over 64 KiB)",
            ));
        }
        lock::hold(&file)?;
        let len = geo.file_len() as u64;
        file.set_len(len)
            .and_then(|()| reserve(&file, len))
            .map_err(|error| CreateError::Reserve { bytes: len, error })?;
        let map = MmapRaw::map_raw(&file)?;
        let region = Region { map, geo, file };
        // SAFETY: the file was just created by us and is not yet shared; the ranges are
        // inside the mapping (HEADER_LEN + CONFIG_LEN <= file_len).
        unsafe {
            let base = region.map.as_mut_ptr();
            std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), base.add(hdr::MAGIC), 8);
            std::ptr::copy_nonoverlapping(config.as_ptr(), base.add(HEADER_LEN), config.len());
        }
        region.u32(hdr::VERSION).store(VERSION, Ordering::Relaxed);
        region
            .u32(hdr::SLOT_COUNT)
            .store(geo.slots, Ordering::Relaxed);
        region
            .u32(hdr::RING_LEN)
            .store(geo.ring_len, Ordering::Relaxed);
        region
            .u32(hdr::CLOCK)
            .store(clock as u32, Ordering::Relaxed);
        region
            .u64(hdr::META_LEN)
            .store(geo.meta_len, Ordering::Relaxed);
        region
            .u32(hdr::CONFIG_USED)
            .store(config.len() as u32, Ordering::Relaxed);
        region.u32(hdr::NEXT_METHOD_ID).store(1, Ordering::Relaxed);
        region.u32(hdr::NEXT_CLASS_ID).store(1, Ordering::Relaxed);
        region
            .u32(hdr::COLLECTOR_PID)
            .store(std::process::id(), Ordering::Release);
        Ok(region)
    }

    /// Maps an existing file (an agent's side) and checks its layout.
    ///
    /// The file must be a regular file (the last component is never followed as a
    /// symlink) whose every byte the file system has allocated: a sparse file, which
    /// no sonda collector makes, could fault this process on first touch, so it is
    /// refused before anything is mapped.
    pub fn open(path: &Path) -> Result<Region, OpenError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
            .map_err(OpenError::Io)?;
        let meta = file.metadata().map_err(OpenError::Io)?;
        if !meta.file_type().is_file() {
            return Err(OpenError::Layout("not a regular file"));
        }
        let len = meta.len() as usize;
        if len < HEADER_LEN + CONFIG_LEN {
            return Err(OpenError::Layout("file too short"));
        }
        if meta.blocks().saturating_mul(512) < meta.len() {
            return Err(OpenError::Layout(
                "its memory is not reserved (a sparse file could crash this process when a page is first touched)",
            ));
        }
        let map = MmapRaw::map_raw(&file).map_err(OpenError::Io)?;
        // SAFETY: the mapping is at least HEADER_LEN long; reading 8 bytes at offset 0.
        let magic = unsafe { std::slice::from_raw_parts(map.as_ptr(), 8) };
        if magic != MAGIC {
            return Err(OpenError::Layout("bad magic"));
        }
        let probe = Region {
            map,
            geo: Geometry {
                slots: 0,
                ring_len: 0,
                meta_len: 0,
            },
            file,
        };
        if probe.u32(hdr::VERSION).load(Ordering::Acquire) != VERSION {
            return Err(OpenError::Layout(
                "layout version differs: agent and collector are different builds",
            ));
        }
        let geo = Geometry {
            slots: probe.u32(hdr::SLOT_COUNT).load(Ordering::Relaxed),
            ring_len: probe.u32(hdr::RING_LEN).load(Ordering::Relaxed),
            meta_len: probe.u64(hdr::META_LEN).load(Ordering::Relaxed),
        };
        if !geo.valid() || geo.file_len() > len {
            return Err(OpenError::Layout("geometry does not fit the file"));
        }
        let region = Region {
            map: probe.map,
            geo,
            file: probe.file,
        };
        region.u32(hdr::ATTACHED).fetch_add(1, Ordering::AcqRel);
        Ok(region)
    }

    /// Whether the collector that made this file still runs: its lock on the file
    /// ([`crate::lock`]) is held. For an agent (or another collector) that opened the
    /// file itself, never for the collector's own region. Exact at once, whatever the
    /// pid namespaces, unlike the heartbeat.
    pub fn collector_alive(&self) -> bool {
        lock::is_held(&self.file)
    }

    /// The sizes of this file.
    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// The clock agents must stamp records with.
    pub fn clock(&self) -> Clock {
        match self.u32(hdr::CLOCK).load(Ordering::Relaxed) {
            1 => Clock::Tsc,
            _ => Clock::Monotonic,
        }
    }

    /// The configuration the collector left for agents; an error when its text does not
    /// decode (see [`AgentConfig::decode`]).
    pub fn config(&self) -> Result<AgentConfig, ConfigError> {
        let used = (self.u32(hdr::CONFIG_USED).load(Ordering::Acquire) as usize).min(CONFIG_LEN);
        // SAFETY: the config area is inside the mapping and written only by `create`.
        let bytes = unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(HEADER_LEN), used) };
        AgentConfig::decode(&String::from_utf8_lossy(bytes))
    }

    fn u32(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off.is_multiple_of(4) && off + 4 <= self.map.len());
        // SAFETY: `off` is a 4-aligned offset inside the mapping (page-aligned base), and
        // the word is only ever accessed atomically by every process sharing the file.
        unsafe { &*(self.map.as_mut_ptr().add(off) as *const AtomicU32) }
    }

    fn u64(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off.is_multiple_of(8) && off + 8 <= self.map.len());
        // SAFETY: as in `u32`, with 8-byte alignment.
        unsafe { &*(self.map.as_mut_ptr().add(off) as *const AtomicU64) }
    }

    // ---- agent side -------------------------------------------------------------------

    /// Takes a free slot for thread `tid` of process `pid`. `None` when every slot is
    /// taken; the caller then counts its events with [`Region::count_no_slot_drop`].
    /// Scans the slot table: called once per thread, never on a probe's hot path.
    pub fn claim(&'static self, pid: u32, tid: u32) -> Option<Producer> {
        for i in 0..self.geo.slots {
            let base = self.geo.slot_offset(i);
            let state = self.u32(base + slot::STATE);
            if state
                .compare_exchange(
                    SlotState::Free as u32,
                    SlotState::Claiming as u32,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                self.u32(base + slot::PID).store(pid, Ordering::Relaxed);
                self.u32(base + slot::TID).store(tid, Ordering::Relaxed);
                self.u32(base + slot::GENERATION)
                    .fetch_add(1, Ordering::Relaxed);
                state.store(SlotState::Owned as u32, Ordering::Release);
                return Some(Producer {
                    // SAFETY: the slot header and ring lie inside the mapping (geometry
                    // checked at open); the region is 'static so the pointers stay valid.
                    header: unsafe { self.map.as_mut_ptr().add(base) },
                    // SAFETY: as above: the ring follows the slot header inside the mapping.
                    data: unsafe { self.map.as_mut_ptr().add(base + SLOT_HEADER_LEN) },
                    mask: u64::from(self.geo.ring_len) - 1,
                    doorbell: self.u32(hdr::DOORBELL),
                });
            }
        }
        None
    }

    /// Counts one event lost because its thread has no slot.
    pub fn count_no_slot_drop(&self) {
        self.u64(hdr::NO_SLOT_DROPS).fetch_add(1, Ordering::Relaxed);
    }

    /// Hands out a new method (or region) id, dense and below 2^31; `None` when exhausted.
    pub fn next_method_id(&self) -> Option<u32> {
        let id = self
            .u32(hdr::NEXT_METHOD_ID)
            .fetch_add(1, Ordering::Relaxed);
        (id < 1 << 31).then_some(id)
    }

    /// Makes every method id handed out from now on at least `floor`: an agent that
    /// recorded into an earlier file keeps its old ids out of this one's range, so
    /// that a probe still running old code (a method entered before its class was
    /// restored) can be told apart. Returns the first id of this file's range.
    pub fn raise_method_ids_to(&self, floor: u32) -> u32 {
        let before = self
            .u32(hdr::NEXT_METHOD_ID)
            .fetch_max(floor, Ordering::Relaxed);
        before.max(floor)
    }

    /// Hands out a new monitor class id.
    pub fn next_class_id(&self) -> u32 {
        self.u32(hdr::NEXT_CLASS_ID).fetch_add(1, Ordering::Relaxed)
    }

    /// Whether the collector asked agents to stop recording.
    pub fn stop_requested(&self) -> bool {
        self.u32(hdr::STOP).load(Ordering::Acquire) != 0
    }

    /// The collector's last heartbeat (its `CLOCK_MONOTONIC` ns; 0 before the first).
    pub fn last_heartbeat(&self) -> u64 {
        self.u64(hdr::HEARTBEAT).load(Ordering::Acquire)
    }

    /// The collector's pid, as the collector sees it (another pid namespace may give
    /// it another number, or none).
    pub fn collector_pid(&self) -> u32 {
        self.u32(hdr::COLLECTOR_PID).load(Ordering::Acquire)
    }

    /// Reports where the agent is (attach: one agent per file).
    pub fn set_agent_state(&self, state: AgentState) {
        self.u32(hdr::AGENT_STATE)
            .store(state as u32, Ordering::Release);
    }

    /// Appends one metadata record (opaque bytes, at most 16 MiB). Returns false, and
    /// counts it, when the log is full.
    pub fn meta_append(&self, bytes: &[u8]) -> bool {
        let need = (8 + bytes.len()).next_multiple_of(8) as u64;
        let at = self.u64(hdr::META_NEXT).fetch_add(need, Ordering::Relaxed);
        if bytes.len() >= 1 << 24 || at + need > self.geo.meta_len {
            self.u64(hdr::META_DROPS).fetch_add(1, Ordering::Relaxed);
            if at + need > self.geo.meta_len && at < self.geo.meta_len {
                // Mark the rest of the log as a hole so the reader stops cleanly.
                self.u32(self.geo.meta_offset() + at as usize + 4)
                    .store(u32::MAX, Ordering::Relaxed);
                self.u32(self.geo.meta_offset() + at as usize)
                    .store(u32::MAX, Ordering::Release);
            }
            return false;
        }
        let off = self.geo.meta_offset() + at as usize;
        // SAFETY: [off + 8, off + 8 + len) was reserved for us alone by the fetch_add and
        // lies inside the log (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.as_mut_ptr().add(off + 8),
                bytes.len(),
            );
        }
        self.u32(off + 4)
            .store(bytes.len() as u32, Ordering::Relaxed);
        // Publish: the reader takes a non-zero word at `off` as "complete".
        self.u32(off).store(need as u32, Ordering::Release);
        true
    }

    // ---- collector side ---------------------------------------------------------------

    /// Number of slots.
    pub fn slots(&self) -> u32 {
        self.geo.slots
    }

    /// A consistent-enough look at slot `i` (its owner may change right after).
    pub fn slot_info(&self, i: u32) -> SlotInfo {
        let base = self.geo.slot_offset(i);
        let state = SlotState::from_u32(self.u32(base + slot::STATE).load(Ordering::Acquire));
        SlotInfo {
            state,
            pid: self.u32(base + slot::PID).load(Ordering::Relaxed),
            tid: self.u32(base + slot::TID).load(Ordering::Relaxed),
            generation: self.u32(base + slot::GENERATION).load(Ordering::Relaxed),
            dropped: self.u64(base + slot::DROPPED).load(Ordering::Relaxed),
            dropped_enters: self
                .u64(base + slot::DROPPED_ENTERS)
                .load(Ordering::Relaxed),
        }
    }

    /// Bytes written to slot `i`'s ring and not drained yet.
    pub fn pending_bytes(&self, i: u32) -> u64 {
        let base = self.geo.slot_offset(i);
        let write = self.u64(base + slot::WRITE).load(Ordering::Acquire);
        let read = self.u64(base + slot::READ).load(Ordering::Relaxed);
        write.wrapping_sub(read)
    }

    /// Copies every complete record of slot `i` into `out` (appending) and releases the
    /// space to the producer. Returns the number of bytes copied.
    pub fn drain(&self, i: u32, out: &mut Vec<u8>) -> usize {
        let base = self.geo.slot_offset(i);
        let write = self.u64(base + slot::WRITE).load(Ordering::Acquire);
        let read_word = self.u64(base + slot::READ);
        let read = read_word.load(Ordering::Relaxed);
        let n = write.wrapping_sub(read) as usize;
        if n == 0 || n > self.geo.ring_len as usize {
            return 0;
        }
        let mask = self.geo.ring_len as usize - 1;
        let start = read as usize & mask;
        let first = n.min(self.geo.ring_len as usize - start);
        // SAFETY: [read, write) belongs to the consumer until `read` is advanced below;
        // both pieces lie inside the slot's ring.
        unsafe {
            let data = self.map.as_ptr().add(base + SLOT_HEADER_LEN);
            out.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            out.extend_from_slice(std::slice::from_raw_parts(data, n - first));
        }
        read_word.store(write, Ordering::Release);
        n
    }

    /// Frees slot `i` if its thread retired and everything it wrote was drained.
    pub fn free_if_drained(&self, i: u32) -> bool {
        let base = self.geo.slot_offset(i);
        self.pending_bytes(i) == 0
            && self
                .u32(base + slot::STATE)
                .compare_exchange(
                    SlotState::Retired as u32,
                    SlotState::Free as u32,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Frees slot `i` whatever its state: for slots of a process that is gone.
    pub fn force_free(&self, i: u32) {
        let base = self.geo.slot_offset(i);
        let write = self.u64(base + slot::WRITE).load(Ordering::Acquire);
        self.u64(base + slot::READ).store(write, Ordering::Release);
        self.u32(base + slot::STATE)
            .store(SlotState::Free as u32, Ordering::Release);
    }

    /// Reads metadata records published since `*cursor`, advancing it. Stops at the
    /// first record still being written.
    pub fn read_meta(&self, cursor: &mut u64, mut each: impl FnMut(&[u8])) {
        while *cursor + 8 <= self.geo.meta_len {
            let off = self.geo.meta_offset() + *cursor as usize;
            let total = self.u32(off).load(Ordering::Acquire);
            if total == 0 {
                return;
            }
            if total == u32::MAX {
                *cursor = self.geo.meta_len;
                return;
            }
            let len = self.u32(off + 4).load(Ordering::Relaxed) as usize;
            if total < 8
                || len + 8 > total as usize
                || *cursor + u64::from(total) > self.geo.meta_len
            {
                // Corrupt (a writer died mid-way): nothing after it can be trusted.
                *cursor = self.geo.meta_len;
                return;
            }
            // SAFETY: the record was published (acquire above) and lies inside the log.
            let bytes = unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off + 8), len) };
            each(bytes);
            *cursor += u64::from(total);
        }
    }

    /// Events lost because no slot was free.
    pub fn no_slot_drops(&self) -> u64 {
        self.u64(hdr::NO_SLOT_DROPS).load(Ordering::Relaxed)
    }

    /// Metadata records lost because the log was full.
    pub fn meta_drops(&self) -> u64 {
        self.u64(hdr::META_DROPS).load(Ordering::Relaxed)
    }

    /// Number of agents that mapped the file.
    pub fn attached(&self) -> u32 {
        self.u32(hdr::ATTACHED).load(Ordering::Acquire)
    }

    /// Asks agents to stop recording (and, after an attach, to restore classes).
    pub fn request_stop(&self) {
        self.u32(hdr::STOP).store(1, Ordering::Release);
    }

    /// Where the (attached) agent is; `Starting` until it says.
    pub fn agent_state(&self) -> AgentState {
        AgentState::from_u32(self.u32(hdr::AGENT_STATE).load(Ordering::Acquire))
    }

    /// Records that the collector is alive at `now`.
    pub fn heartbeat(&self, now: u64) {
        self.u64(hdr::HEARTBEAT).store(now, Ordering::Release);
    }

    // ---- doorbell -----------------------------------------------------------------------

    /// The doorbell's count: how many times producers rang it.
    pub fn doorbell(&self) -> u32 {
        self.u32(hdr::DOORBELL).load(Ordering::Acquire)
    }

    /// Rings the doorbell from the collector's side, waking whoever waits on it: how a
    /// waiter that sleeps long between rings is told to look at something else (to
    /// stop). Counted like a producer's ring, so that a waiter about to sleep on the
    /// count it last saw returns at once instead of missing the wake.
    pub fn wake_doorbell_waiters(&self) {
        let bell = self.u32(hdr::DOORBELL);
        bell.fetch_add(1, Ordering::Release);
        let _ = rustix::thread::futex::wake(bell, rustix::thread::futex::Flags::empty(), u32::MAX);
    }

    /// Waits up to `timeout` for the doorbell to ring past `seen` (a value of
    /// [`Region::doorbell`]); returns its count then (`seen` when it did not ring). A
    /// shared (not process-private) futex: the producers are other processes.
    pub fn wait_doorbell(&self, seen: u32, timeout: std::time::Duration) -> u32 {
        let bell = self.u32(hdr::DOORBELL);
        let now = bell.load(Ordering::Acquire);
        if now != seen {
            return now;
        }
        let timeout = rustix::thread::futex::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        // Woken, timed out, interrupted or the value already changed: all end the wait.
        let _ = rustix::thread::futex::wait(
            bell,
            rustix::thread::futex::Flags::empty(),
            seen,
            Some(&timeout),
        );
        bell.load(Ordering::Acquire)
    }
}

/// What the consumer sees of a slot.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SlotInfo {
    /// Free, owned by a thread, or released.
    pub state: SlotState,
    /// The owning thread's process.
    pub pid: u32,
    /// The owning thread.
    pub tid: u32,
    /// Bumped each time the slot is claimed, so a reused slot is told apart.
    pub generation: u32,
    /// Events the producer could not write because the ring was full.
    pub dropped: u64,
    /// Of `dropped`, how many were method or region entries.
    pub dropped_enters: u64,
}

/// A thread's handle on its slot: two raw pointers, cheap to keep in thread-local storage.
/// Only the thread that claimed the slot may use it.
#[derive(Clone, Copy)]
pub struct Producer {
    header: *mut u8,
    data: *mut u8,
    mask: u64,
    /// The header's doorbell (in the same 'static mapping).
    doorbell: &'static AtomicU32,
}

impl Producer {
    #[inline(always)]
    fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `header` points at a live slot header (see `claim`); off is 8-aligned.
        unsafe { &*(self.header.add(off) as *const AtomicU64) }
    }

    /// Writes a one-unit record; counts a drop instead when the ring is full. The line
    /// [`PREFETCH_AHEAD`] bytes on is fetched for writing meanwhile (see
    /// [`prefetch_for_write`]).
    #[inline(always)]
    pub fn push(&self, time: u64, head: u32, arg: u32) -> bool {
        let write = self.word(slot::WRITE).load(Ordering::Relaxed);
        let read = self.word(slot::READ).load(Ordering::Acquire);
        let used = write.wrapping_sub(read) + UNIT as u64;
        if used > bell_at(self.mask + 1) {
            self.bell(read);
        }
        if used > self.mask + 1 {
            self.count_drop(head);
            return false;
        }
        let at = (write & self.mask) as usize;
        // SAFETY: the ring has room for one unit at `at` (checked above); units never
        // straddle the end because the ring length is a multiple of UNIT.
        unsafe {
            prefetch_for_write(
                self.data
                    .add(((write + PREFETCH_AHEAD) & self.mask) as usize),
            );
            let p = self.data.add(at);
            (p as *mut u64).write(time.to_le());
            (p.add(8) as *mut u32).write(head.to_le());
            (p.add(12) as *mut u32).write(arg.to_le());
        }
        self.word(slot::WRITE)
            .store(write + UNIT as u64, Ordering::Release);
        true
    }

    /// Writes a two-unit record (`extra` in the second unit).
    #[inline(always)]
    pub fn push2(&self, time: u64, head: u32, arg: u32, extra: u64) -> bool {
        let write = self.word(slot::WRITE).load(Ordering::Relaxed);
        let read = self.word(slot::READ).load(Ordering::Acquire);
        let used = write.wrapping_sub(read) + 2 * UNIT as u64;
        if used > bell_at(self.mask + 1) {
            self.bell(read);
        }
        if used > self.mask + 1 {
            self.count_drop(head);
            return false;
        }
        let at = (write & self.mask) as usize;
        let at2 = ((write + UNIT as u64) & self.mask) as usize;
        // SAFETY: room for two units was checked; each unit is written within the ring.
        unsafe {
            let p = self.data.add(at);
            (p as *mut u64).write(time.to_le());
            (p.add(8) as *mut u32).write(head.to_le());
            (p.add(12) as *mut u32).write(arg.to_le());
            let q = self.data.add(at2);
            (q as *mut u64).write(extra.to_le());
            (q.add(8) as *mut u64).write(0);
        }
        self.word(slot::WRITE)
            .store(write + 2 * UNIT as u64, Ordering::Release);
        true
    }

    /// Rings the doorbell unless it was rung since the last drain: the check inline
    /// (a load of a word of this slot's header), the call only when it rings.
    #[inline(always)]
    fn bell(&self, read: u64) {
        if self.word(slot::RUNG).load(Ordering::Relaxed) != read.wrapping_add(1) {
            self.ring_doorbell(read);
        }
    }

    /// The ring is more than a quarter full ([`bell_at`]): tells the collector, once
    /// per drain (the collector's `read` moves when it drains), so that it drains now
    /// rather than at the end of its period. Off the hot path: at most once per
    /// quarter of a ring of records, a futex wake (a system call of about a
    /// microsecond, no lock of ours).
    #[cold]
    #[inline(never)]
    fn ring_doorbell(&self, read: u64) {
        // Only this thread writes `RUNG` (and `bell` checked it): a plain store.
        self.word(slot::RUNG)
            .store(read.wrapping_add(1), Ordering::Relaxed);
        self.doorbell.fetch_add(1, Ordering::Release);
        // A failed wake (no collector waiting) changes nothing: it sees the count.
        let _ =
            rustix::thread::futex::wake(self.doorbell, rustix::thread::futex::Flags::empty(), 1);
    }

    /// Off the hot path: only when the ring is full.
    #[cold]
    fn count_drop(&self, head: u32) {
        // Only this thread writes the counters: a plain load and store avoid a locked op.
        let d = self.word(slot::DROPPED);
        d.store(d.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if head & 0xff == u32::from(crate::records::ENTER) {
            let e = self.word(slot::DROPPED_ENTERS);
            e.store(e.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }

    /// The slot header's and the ring data's addresses and the ring's length, for a
    /// producer written in another language (the agent's C hooks), which must follow
    /// this protocol exactly: whole units at `write & (len - 1)` in the data, room
    /// checked against the consumer's `read` (acquire), `write` advanced with a release
    /// store, drops counted in the header's `DROPPED` (and `DROPPED_ENTERS`) by the
    /// owning thread alone (see [`crate::layout::slot`]).
    pub fn raw_parts(&self) -> (*mut u8, *mut u8, u64) {
        (self.header, self.data, self.mask + 1)
    }

    /// Gives the slot back: the collector drains what is left and frees it.
    pub fn retire(self) {
        // SAFETY: as in `word`, the state word is the slot's first field.
        let state = unsafe { &*(self.header as *const AtomicU32) };
        state.store(SlotState::Retired as u32, Ordering::Release);
    }
}

/// How far ahead of the write position [`Producer::push`] asks for the ring's line:
/// 8 lines, about 32 records, a few hundred ns of probes ahead of their stores.
const PREFETCH_AHEAD: u64 = 512;

/// How full a ring of `len` bytes is when its producer rings the doorbell: a quarter.
/// At ten million events a second a 1 MiB ring fills in 6.5 ms; ringing at half full
/// left the collector 3.3 ms to get a CPU and drain, which a loaded machine sometimes
/// did not give it; at a quarter it has 4.9 ms, for twice as many wake-ups (a few
/// thousand a second at that rate).
#[inline(always)]
const fn bell_at(len: u64) -> u64 {
    len / 4
}

/// Asks the CPU for the cache line at `p` in the state for writing (`prefetchw`), so that
/// the ownership request for a ring line the collector last read is under way before
/// the producer stores there. Why it matters: a Java probe returns through the JNI
/// wrapper's thread-state transition, whose fence waits for the probe's stores; each
/// store to a line not owned yet made that fence wait for the other CPU. Measured with
/// `scripts/bench-probe.sh` (TSC, JNI natives): 53-55 ns per enter+exit pair before,
/// 49-52 ns after. The C hooks (no fence after their stores) showed no difference, so
/// they do without. A hint only: it never faults and changes no data; `p` lies in the
/// ring.
#[inline(always)]
fn prefetch_for_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetchw reads no data and cannot fault; it only moves a cache line.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Makes the file system allocate all `len` bytes of `file` (a file of ours, just made,
/// that nobody else has yet). `fallocate` does it at once on tmpfs and the usual disk
/// file systems; where it is not supported (some network and FUSE file systems),
/// writing zeros over the whole file does the same, more slowly.
fn reserve(file: &File, len: u64) -> io::Result<()> {
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => return Ok(()),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {}
        Err(e) => return Err(e.into()),
    }
    let zeros = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    file.sync_data()
}
