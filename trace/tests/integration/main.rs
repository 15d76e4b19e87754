//! sonda-trace's integration tests, one test binary (one link step): each module was a test file of its own; `mutate` holds the mutation engine.

mod mutate;
mod mutations;
mod roundtrip;
