//! Where things are in the shared file. The collector creates the file and writes the
//! header; agents (one per traced process) map it and only ever touch atomics in the
//! header, their own slots, and the metadata log.
//!
//! ```text
//! 0                 HEADER_LEN          +CONFIG_LEN            +meta_len
//! | header (atomics) | config (text)     | metadata log         | slot 0 | slot 1 | ...
//!                                                                 | SlotHeader | ring data |
//! ```

/// First bytes of the file.
pub const MAGIC: [u8; 8] = *b"SONDASHM";
/// Layout version; an agent refuses a file of another version.
pub const VERSION: u32 = 1;
/// Bytes reserved for the header.
pub const HEADER_LEN: usize = 4096;
/// Bytes reserved for the configuration text the collector hands to agents.
pub const CONFIG_LEN: usize = 64 << 10;
/// Bytes of a slot header (two cache lines: producer's, consumer's).
pub const SLOT_HEADER_LEN: usize = 128;
/// Size of one ring unit: every record is a whole number of units.
pub const UNIT: usize = 16;

/// Offsets of header fields (all naturally aligned).
pub mod hdr {
    /// The file's magic bytes.
    pub const MAGIC: usize = 0;
    /// u32: the layout version.
    pub const VERSION: usize = 8;
    /// u32: the number of per-thread slots.
    pub const SLOT_COUNT: usize = 12;
    /// u32: bytes of each slot's ring (a power of two).
    pub const RING_LEN: usize = 16;
    /// u32: the clock records are stamped with.
    pub const CLOCK: usize = 20;
    /// u64: bytes of the metadata log.
    pub const META_LEN: usize = 24;
    /// u32: bytes of the configuration text in use.
    pub const CONFIG_USED: usize = 32;
    /// AtomicU64: events lost because no slot was free.
    pub const NO_SLOT_DROPS: usize = 64;
    /// AtomicU64: next free byte of the metadata log.
    pub const META_NEXT: usize = 72;
    /// AtomicU64: metadata records lost because the log was full.
    pub const META_DROPS: usize = 80;
    /// AtomicU32: next method (or region) id to hand out.
    pub const NEXT_METHOD_ID: usize = 88;
    /// AtomicU32: next monitor-class id to hand out.
    pub const NEXT_CLASS_ID: usize = 92;
    /// AtomicU32: set to 1 when the collector asks agents to stop recording.
    pub const STOP: usize = 96;
    /// AtomicU32: number of processes that mapped the file.
    pub const ATTACHED: usize = 100;
    /// AtomicU64: collector heartbeat (its clock, ns); agents may treat silence as death.
    pub const HEARTBEAT: usize = 104;
    /// AtomicU32: the collector's pid.
    pub const COLLECTOR_PID: usize = 112;
    /// AtomicU32: [`super::AgentState`], written by the agent of an attach (one process
    /// per file) so that the collector knows when the instrumentation is in place and
    /// when it was taken out again. Zero in files of older agents.
    pub const AGENT_STATE: usize = 116;
    /// AtomicU32, a futex word: bumped (and the futex woken) by a producer whose ring
    /// passed a quarter full, so that the collector drains at once instead of at its next
    /// period (see `Producer::push`). Zero and unused with older agents, whose rings are
    /// drained every period only.
    pub const DOORBELL: usize = 120;
}

/// Offsets of slot header fields.
pub mod slot {
    /// AtomicU32: [`super::SlotState`].
    pub const STATE: usize = 0;
    /// AtomicU32: owner's pid.
    pub const PID: usize = 4;
    /// AtomicU32: owner's tid.
    pub const TID: usize = 8;
    /// AtomicU32: bumped at each claim, so the consumer notices reuse.
    pub const GENERATION: usize = 12;
    /// AtomicU64: bytes written ever (producer).
    pub const WRITE: usize = 16;
    /// AtomicU64: records dropped because the ring was full (producer).
    pub const DROPPED: usize = 24;
    /// AtomicU64: of those, method or region entries (producer), so that recorded
    /// entries plus dropped entries equal the calls made.
    pub const DROPPED_ENTERS: usize = 32;
    /// AtomicU64: one more than the consumer's `READ` when the producer last rang the
    /// doorbell (producer): it rings once per drain at most.
    pub const RUNG: usize = 40;
    /// AtomicU64: bytes read ever (consumer).
    pub const READ: usize = 64;
}

/// Life cycle of a slot.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum SlotState {
    /// Nobody owns it.
    Free = 0,
    /// A thread is taking it (pid/tid not yet valid).
    Claiming = 1,
    /// A thread writes into it.
    Owned = 2,
    /// Its thread ended; the consumer drains it, then frees it.
    Retired = 3,
}

impl SlotState {
    /// Decodes a state word.
    pub fn from_u32(v: u32) -> SlotState {
        match v {
            1 => SlotState::Claiming,
            2 => SlotState::Owned,
            3 => SlotState::Retired,
            _ => SlotState::Free,
        }
    }
}

/// Where an attached agent is in its recording (header word [`hdr::AGENT_STATE`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum AgentState {
    /// Not reported yet: starting, or an agent that does not report.
    Starting = 0,
    /// Recording: probes linked and already-loaded classes instrumented (or found
    /// impossible to instrument, with a warning in the metadata log).
    Recording = 1,
    /// Stopped on the collector's request: events off, original classes restored, end
    /// counters written. Nothing more will be written.
    Stopped = 2,
}

impl AgentState {
    /// Decodes a state word (unknown values read as `Starting`).
    pub fn from_u32(v: u32) -> AgentState {
        match v {
            1 => AgentState::Recording,
            2 => AgentState::Stopped,
            _ => AgentState::Starting,
        }
    }
}

/// Which clock agents stamp records with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum Clock {
    /// `clock_gettime(CLOCK_MONOTONIC)` nanoseconds: already the trace's clock.
    Monotonic = 0,
    /// Raw `rdtsc` ticks: half the cost; the collector converts them to the trace's clock
    /// by calibrating the TSC against `CLOCK_MONOTONIC` (invariant TSC only).
    Tsc = 1,
}

/// The sizes the collector chose; everything else follows from them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Geometry {
    /// Number of per-thread slots.
    pub slots: u32,
    /// Bytes of ring data per slot (a power of two, a multiple of [`UNIT`]).
    pub ring_len: u32,
    /// Bytes of the metadata log.
    pub meta_len: u64,
}

impl Geometry {
    /// Offset of the metadata log.
    pub fn meta_offset(&self) -> usize {
        HEADER_LEN + CONFIG_LEN
    }
    /// Offset of slot `i`'s header.
    pub fn slot_offset(&self, i: u32) -> usize {
        self.meta_offset()
            + self.meta_len as usize
            + i as usize * (SLOT_HEADER_LEN + self.ring_len as usize)
    }
    /// Total file size.
    pub fn file_len(&self) -> usize {
        self.slot_offset(self.slots)
    }
    /// Whether the geometry is usable.
    pub fn valid(&self) -> bool {
        self.slots > 0
            && self.ring_len.is_power_of_two()
            && self.ring_len as usize >= 4 * UNIT
            && self.meta_len.is_multiple_of(8)
            && self.meta_len >= 4096
    }
}
