//! The shared-memory buffers between sonda's agents and its collector.
//!
//! The collector creates one file (in `/dev/shm`) per recording; every traced process
//! maps it. Each recording thread gets a slot with a lock-free single-producer ring
//! ([`Producer`]): writing a record is two loads, three stores and a release store, with
//! no lock, no allocation and no system call, and a full ring drops and counts. Names
//! (methods, threads, classes) go to an append-only metadata log that is never
//! overwritten. See [`layout`] for the byte layout, and [`config`] for what the collector
//! tells agents (the configuration in the file's header, the agent option string).
//!
//! The file can never fault a process that maps it: the collector reserves all of its
//! memory before anyone maps it ([`Region::create_on`]), and agents refuse a file that
//! is not fully allocated ([`Region::open`]). The collector holds a lock on the file
//! for its life ([`lock`]), so that agents and later collectors tell a live recording
//! from a killed one at once.

pub mod attach_codes;
pub mod config;
pub mod layout;
pub mod lock;
pub mod records;
mod region;

pub use layout::{AgentState, Clock, Geometry, SlotState};
pub use region::{CreateError, OpenError, Producer, Region, SlotInfo};
