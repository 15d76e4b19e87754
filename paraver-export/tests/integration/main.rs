//! sonda-paraver's integration tests, one test binary (one link step): each module was a test file of its own; `files` holds what they share.

mod export;
mod files;
mod scale;
