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
//! Modules, one concern each: `jvmti` (all JVM glue and its `unsafe`), `buffers`
//! (per-thread rings), `clock`, `events` (what each JVMTI event does), `threads`
//! (naming), `probe` (the hot-path natives), `transform` (ClassFileLoadHook and
//! retransformation, with `class_files` to look into classes before), `stop` (the
//! collector's stop request), `budget` (the overhead budget: per-method call rates
//! sampled by the probes, and removing the costliest methods' probes), `monitors`, `meta` and `counters` (the metadata log), `os`
//! (system calls), `agent` (start-up and state). The option string and the collector's
//! configuration are decoded by `sonda_shm::config`, beside their encoders.
//!
//! The same library is sonda's C API (`include/sonda.h`, module `capi`) and the target
//! of the compiler's function hooks (`-finstrument-functions`): `hooks` (with
//! `hooks.c`, the hot path in C), `native` (recording a process that is not a JVM, on
//! the buffer file `SONDA_SHM` names), `mappings` (the executable mappings that name
//! function addresses).

mod agent;
mod budget;
mod buffers;
pub mod capi;
mod class_files;
mod clock;
mod constant_pool;
mod counters;
mod events;
mod hooks;
pub mod jvmti;
mod mappings;
mod meta;
mod monitors;
mod native;
mod os;
mod probe;
mod stop;
mod threads;
mod transform;

pub use probe::PROBE;
