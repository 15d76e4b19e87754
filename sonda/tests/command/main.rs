//! The sonda command's tests, one test binary (one link step): each module was a test file of its own; `common` holds what they share.

mod bounds;
mod cli;
mod common;
mod ftrace_instance;
mod kernel_cost;
mod kill;
mod messages;
mod outputs;
mod procfs_fallback;
mod record_jvm;
mod record_kernel;
mod signals;
