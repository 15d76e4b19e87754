//! The filter's integration tests, one test binary (one link step) for both: each
//! module was a test file of its own.

mod grammar;
mod properties;
