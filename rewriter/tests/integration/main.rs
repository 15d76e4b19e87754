//! The rewriter's integration tests, one test binary (one link step) for all: each
//! module was a test file of its own; `support` holds what they share.

mod support;

mod fuzz;
mod hand_assembled;
mod jdk_base;
mod jvm_corpus;
