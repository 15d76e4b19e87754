//! Synthetic sonda traces for tests and benchmarks: a builder that writes exactly the
//! records it is given, complete or cut short the way a killed recording is
//! ([`TraceBuilder`]); a small trace exercising every record kind and the timeline's
//! edge cases ([`showcase`]); and a long, busy trace of any size streamed to a file
//! ([`Busy`], behind `scripts/gen-trace`).
//!
//! Not shipped (`publish = false`): a dev-dependency of the crates whose tests read
//! traces. It depends only on `sonda-trace`, so that the crates it tests
//! (`sonda-timeline` and above) are not compiled twice.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod builder;
mod busy;
mod showcase;

pub use builder::{TraceBuilder, START};
pub use busy::Busy;
pub use showcase::showcase;
