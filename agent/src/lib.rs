//! sonda's JVMTI agent, `libsonda.so`.
//!
//! Loaded with `-agentpath:/abs/libsonda.so=shm=/dev/shm/sonda-<pid>-<n>.buf` (or by
//! dynamic attach with the same options), it maps the collector's shared buffer file
//! (`sonda-shm`) and records into it: JVM life (VMInit/VMDeath), Java threads (start,
//! end, Java name and kernel tid), garbage collections, contended monitors, and entries
//! and exits of the methods the collector's `methods=` filter selects, which it
//! rewrites (`sonda-rewriter`) to call native probes. The agent never prints to stdout
//! and never stops the JVM: when something is wrong it says so in one `sonda:` line on
//! stderr (or a warning in the trace) and the application runs unchanged.
//!
//! Modules, one concern each: `jvmti` (all JVM glue and its `unsafe`), `options`,
//! `buffers` (per-thread rings), `clock`, `events` (what each JVMTI event does),
//! `threads` (naming), `probe` (the hot-path natives), `transform` (ClassFileLoadHook
//! and retransformation), `stop` (the collector's stop request), `monitors`, `meta` and
//! `counters` (the metadata log), `os` (system calls), `agent` (start-up and state).

mod agent;
mod buffers;
mod clock;
mod counters;
mod events;
pub mod jvmti;
mod meta;
mod monitors;
pub mod options;
mod os;
mod probe;
mod stop;
mod threads;
mod transform;

pub use probe::PROBE;
