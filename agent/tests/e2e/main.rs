//! The agent's integration tests, one test binary (one link step) for all: each
//! module was a test file of its own; `common` holds what they share. None of them
//! times anything the other tests' JVMs could disturb (they count records), so they
//! run on parallel threads as before.

mod common;

mod attach;
mod events;
mod methods;
mod native;
mod probes;
mod reattach;
