//! sonda-timeline's integration tests, one test binary (one link step): each module was a test file of its own.

mod drive;
mod migrations;
mod procfs;
mod removals;
mod report;
mod showcase;
mod switch_clock;
