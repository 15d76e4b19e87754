//! What killed collectors leave behind, removed by any later sonda command: ftrace
//! instances still tracing into buffers of many MiB per CPU, and buffer files in
//! `/dev/shm` (memory, reserved whole). Both are named after their owner's pid and
//! start time and locked by it while it lives (see [`crate::owner`]), so a leftover is
//! recognised at once and a live recording's never is.
//!
//! A killed attach also leaves the JVM recording for a collector that is gone; the
//! agent sees that at once from the buffer file's lock when the next attach comes, and
//! stops it then (see `sonda_shm::Region::collector_alive`).

/// What [`remove`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// ftrace instances.
    pub instances: usize,
    /// Buffer files in `/dev/shm`.
    pub buffer_files: usize,
}

/// Removes the leftovers of collectors that are gone. Quiet and quick (two directory
/// listings); without root only what is ours can go.
pub fn remove() -> Removed {
    Removed {
        instances: crate::kernel::ftrace_instance::remove_stale(),
        buffer_files: crate::agent::buffer_file::remove_stale(),
    }
}
