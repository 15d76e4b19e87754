//! The shared-memory buffers between sonda's agents and its collector.
//!
//! The collector creates one file (in `/dev/shm`) per recording; every traced process
//! maps it. Each recording thread gets a slot with a lock-free single-producer ring
//! ([`Producer`]): writing a record is two loads, three stores and a release store, with
//! no lock, no allocation and no system call, and a full ring drops and counts. Names
//! (methods, threads, classes) go to an append-only metadata log that is never
//! overwritten. See [`layout`] for the byte layout.

pub mod attach_codes;
pub mod layout;
pub mod records;
mod region;

pub use layout::{AgentState, Clock, Geometry, SlotState};
pub use region::{OpenError, Producer, Region, SlotInfo};
