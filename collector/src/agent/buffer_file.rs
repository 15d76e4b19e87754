//! The agent buffer file's name and life: `/dev/shm/sonda-<collector pid>-<n>.buf`,
//! removed at the end of the recording. A collector that was killed leaves its file
//! behind; the next collector removes the files of collectors that are gone.

use std::io;
use std::path::{Path, PathBuf};

/// Where buffer files live (a tmpfs: the file is memory, pages used only when touched).
pub const SHM_DIR: &str = "/dev/shm";

/// The collector pid in a buffer file name, if it is one.
pub fn owner_of(file_name: &str) -> Option<u32> {
    let rest = file_name.strip_prefix("sonda-")?.strip_suffix(".buf")?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Whether process `pid` exists.
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Removes buffer files in `dir` whose collector is gone. Returns how many.
pub fn remove_stale(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_of) else {
            continue;
        };
        if !alive(pid) && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// A path for a new buffer file of this collector: the first `n` not taken.
pub fn fresh_path(dir: &Path) -> PathBuf {
    let me = std::process::id();
    (0u32..)
        .map(|n| dir.join(format!("sonda-{me}-{n}.buf")))
        .find(|p| !p.exists())
        .expect("some buffer file name is free")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_buffer_file_names() {
        assert_eq!(owner_of("sonda-1234-0.buf"), Some(1234));
        assert_eq!(owner_of("sonda-1234-17.buf"), Some(1234));
        assert_eq!(owner_of("sonda-1234.buf"), None);
        assert_eq!(owner_of("sonda-x-0.buf"), None);
        assert_eq!(owner_of("other-1-0.buf"), None);
        assert_eq!(owner_of("sonda-1-0.buf.tmp"), None);
    }

    #[test]
    fn removes_only_files_of_dead_collectors() {
        let dir = tempfile::tempdir().unwrap();
        // A pid above pid_max is never alive; our own pid is.
        let dead = dir.path().join("sonda-99999999-0.buf");
        let ours = dir
            .path()
            .join(format!("sonda-{}-0.buf", std::process::id()));
        let other = dir.path().join("notes.txt");
        for p in [&dead, &ours, &other] {
            std::fs::write(p, b"x").unwrap();
        }
        assert_eq!(remove_stale(dir.path()), 1);
        assert!(!dead.exists());
        assert!(ours.exists() && other.exists());
        let fresh = fresh_path(dir.path());
        assert_eq!(
            fresh.file_name().unwrap().to_str().unwrap(),
            format!("sonda-{}-1.buf", std::process::id())
        );
    }
}
