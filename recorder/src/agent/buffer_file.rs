//! The agent buffer file's place, name and life.
//!
//! The file lives in a directory every traced process can reach: `/dev/shm` (a tmpfs:
//! the file is memory), the user's `--buffer-dir`, or, for a JVM in a container, the
//! container's own `/dev/shm` (or `/tmp`). Those are shared places where anyone may
//! create files, so:
//! - the name is `sonda-<pid>-<start>-<random>.buf` ([`Owner::fresh_name`]): nobody
//!   can plant a file or symlink at a name sonda will use, and a later sonda can tell
//!   from the name alone whose file it is;
//! - the file is created `O_EXCL | O_NOFOLLOW`, mode 0600, so it is never written
//!   through a symlink and only its owner (and root) can read what the program does;
//!   after an attach it is given to the JVM's user, who must map it;
//! - a container's directory is found inside the container's root
//!   (`openat2(RESOLVE_IN_ROOT)` from `/proc/<pid>/root`): a symlink there leads where
//!   it leads for the JVM, never out of the container into our file system;
//! - everything afterwards goes through the directory's descriptor, whatever happens
//!   to its path.
//!
//! The file is removed at the end of the recording. A collector that was killed leaves
//! its file behind; the next sonda removes the files of collectors that are gone: no
//! process with the name's pid and start time, and nobody holds the file's lock
//! ([`sonda_shm::lock`]).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Dir, Mode, OFlags, ResolveFlags};

use crate::owner::Owner;
use crate::sys;

/// Where buffer files live by default (a tmpfs: the file is memory).
pub const SHM_DIR: &str = "/dev/shm";
const PREFIX: &str = "sonda-";
const SUFFIX: &str = ".buf";

/// Where to make the buffer file, and for whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferPlace {
    /// The root the directory is found in: `/`, or `/proc/<pid>/root` for a JVM that
    /// sees a file system of its own (a container).
    pub root: PathBuf,
    /// The directory, as seen from `root` (and so by the traced process).
    pub dir: PathBuf,
    /// Who the file is given to (uid, gid), when the traced process runs as another
    /// user than we do (root attaching to a JVM of another user).
    pub owner: Option<(u32, u32)>,
}

impl BufferPlace {
    /// `dir` in our own file system, for processes of our user.
    pub fn here(dir: impl Into<PathBuf>) -> BufferPlace {
        BufferPlace {
            root: PathBuf::from("/"),
            dir: dir.into(),
            owner: None,
        }
    }

    /// The directory as we see it, for messages.
    pub fn shown(&self) -> PathBuf {
        if self.root == Path::new("/") {
            return self.dir.clone();
        }
        let inside = self.dir.strip_prefix("/").unwrap_or(&self.dir);
        self.root.join(inside)
    }

    /// Opens the directory: in our file system as any path, or inside the traced
    /// process's root, where every symlink is resolved as the process would resolve it.
    pub fn open_dir(&self) -> io::Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        if self.root == Path::new("/") {
            return Ok(rustix::fs::open(&self.dir, flags, Mode::empty())?);
        }
        let root = rustix::fs::open(&self.root, flags, Mode::empty())?;
        let inside = self.dir.strip_prefix("/").unwrap_or(&self.dir);
        let inside = if inside.as_os_str().is_empty() {
            Path::new(".")
        } else {
            inside
        };
        match rustix::fs::openat2(
            &root,
            inside,
            flags,
            Mode::empty(),
            ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
        ) {
            Err(rustix::io::Errno::NOSYS) => walk_without_symlinks(root, inside),
            other => Ok(other?),
        }
    }
}

/// Without `openat2` (kernels before 5.6): one component at a time, refusing symlinks
/// and `..` (which could lead out of the root).
fn walk_without_symlinks(root: OwnedFd, inside: &Path) -> io::Result<OwnedFd> {
    let mut dir = root;
    for part in inside.components() {
        match part {
            Component::Normal(name) => {
                dir = rustix::fs::openat(
                    &dir,
                    name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
            }
            Component::CurDir => {}
            _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }
    Ok(dir)
}

/// A buffer file this process made. It is removed by name through the directory's
/// descriptor.
#[derive(Debug)]
pub struct BufferFile {
    dir: OwnedFd,
    name: String,
    /// Its path as the traced process sees it, for the agent's `shm=` option.
    pub agent_path: PathBuf,
    /// Its path as we see it, for messages.
    pub shown: PathBuf,
}

impl BufferFile {
    /// Creates a fresh, empty file in `dir` (the descriptor of `place`'s directory),
    /// mode 0600, given to `place.owner` if set. Returns it with the file, which the
    /// caller makes the buffer ([`sonda_shm::Region::create_on`]).
    pub fn create(dir: OwnedFd, place: &BufferPlace) -> io::Result<(BufferFile, File)> {
        let mut tries = 0;
        let (name, fd) = loop {
            let name = Owner::fresh_name(PREFIX, SUFFIX);
            match rustix::fs::openat(
                &dir,
                name.as_str(),
                OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            ) {
                Ok(fd) => break (name, fd),
                // A random name taken: chance alone (nobody can know it in advance).
                Err(rustix::io::Errno::EXIST) if tries < 8 => tries += 1,
                Err(e) => return Err(e.into()),
            }
        };
        let made = BufferFile {
            agent_path: place.dir.join(&name),
            shown: place.shown().join(&name),
            dir,
            name,
        };
        if let Some((uid, gid)) = place.owner {
            if let Err(e) = rustix::fs::fchown(
                &fd,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            ) {
                let _ = made.remove();
                return Err(e.into());
            }
        }
        Ok((made, File::from(fd)))
    }

    /// Removes the file (agents still mapping it keep their mapping).
    pub fn remove(&self) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(
            &self.dir,
            self.name.as_str(),
            AtFlags::empty(),
        )?)
    }
}

/// Whether `name` in `dir` is a buffer file of a collector that is gone.
fn is_stale(dir: impl AsFd, name: &str) -> bool {
    if let Some(owner) = Owner::of_name(name, PREFIX, SUFFIX) {
        if owner.is_alive() {
            return false;
        }
        // Gone by its pid, or of another pid namespace: its lock decides.
        let Ok(fd) = rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return false;
        };
        let regular = rustix::fs::fstat(&fd)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file());
        return regular && !sonda_shm::lock::is_held(&fd);
    }
    // `sonda-<pid>-<n>.buf`, the names of collectors before owner start times and
    // locks: gone when the pid is.
    legacy_owner(name).is_some_and(|pid| !sys::process_exists(pid))
}

/// The collector pid in a buffer file name of earlier collectors (`sonda-<pid>-<n>.buf`).
fn legacy_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Removes the buffer files in `dir` whose collectors are gone. Returns how many.
pub fn remove_stale_in(dir: impl AsFd) -> usize {
    let dir = dir.as_fd();
    let Ok(entries) = Dir::read_from(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if name.starts_with(PREFIX)
            && name.ends_with(SUFFIX)
            && is_stale(dir, name)
            && rustix::fs::unlinkat(dir, name, AtFlags::empty()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Removes the buffer files of collectors that are gone from [`SHM_DIR`]: what any
/// sonda command does first. Returns how many.
pub fn remove_stale() -> usize {
    BufferPlace::here(SHM_DIR)
        .open_dir()
        .map_or(0, remove_stale_in)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn recognises_earlier_collectors_names() {
        assert_eq!(legacy_owner("sonda-1234-0.buf"), Some(1234));
        assert_eq!(legacy_owner("sonda-1234-17.buf"), Some(1234));
        assert_eq!(legacy_owner("sonda-1234.buf"), None);
        assert_eq!(legacy_owner("sonda-x-0.buf"), None);
        assert_eq!(legacy_owner("other-1-0.buf"), None);
        assert_eq!(legacy_owner("sonda-1-0.buf.tmp"), None);
    }

    #[test]
    fn fresh_files_are_private_unpredictable_and_removed_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let place = BufferPlace::here(dir.path());
        let (a, file) = BufferFile::create(place.open_dir().unwrap(), &place).unwrap();
        let (b, _) = BufferFile::create(place.open_dir().unwrap(), &place).unwrap();
        assert_ne!(a.agent_path, b.agent_path);
        assert_eq!(a.agent_path, a.shown);
        assert!(a.agent_path.starts_with(dir.path()));
        let meta = file.metadata().unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.uid(), sys_uid());
        // Removed through the directory, even after the directory was renamed.
        let moved = dir.path().with_extension("moved");
        std::fs::rename(dir.path(), &moved).unwrap();
        a.remove().unwrap();
        assert_eq!(std::fs::read_dir(&moved).unwrap().count(), 1);
        std::fs::rename(&moved, dir.path()).unwrap();
    }

    fn sys_uid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }

    /// Files of dead collectors go, live ones (ours, one whose lock is held) and other
    /// files stay.
    #[test]
    fn removes_only_files_of_collectors_that_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = |n: &str| dir.path().join(n);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();
        let dead = format!("sonda-{dead_pid}-12345-0123456789abcdef.buf");
        let locked = format!("sonda-{dead_pid}-12345-fedcba9876543210.buf");
        let legacy_dead = "sonda-99999999-0.buf".to_string();
        let legacy_ours = format!("sonda-{}-0.buf", std::process::id());
        let ours = Owner::fresh_name(PREFIX, SUFFIX);
        for n in [&dead, &locked, &legacy_dead, &legacy_ours, &ours] {
            std::fs::write(path(n), b"x").unwrap();
        }
        std::fs::write(path("notes.txt"), b"x").unwrap();
        // Its owner may live in another pid namespace: the lock says it does.
        let owner = File::open(path(&locked)).unwrap();
        sonda_shm::lock::hold(&owner).unwrap();
        // A symlink with a stale name is not followed nor judged.
        let victim = path("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = format!("sonda-{dead_pid}-1-0000000000000000.buf");
        std::os::unix::fs::symlink(&victim, path(&link)).unwrap();

        let place = BufferPlace::here(dir.path());
        assert_eq!(remove_stale_in(place.open_dir().unwrap()), 2);
        assert!(!path(&dead).exists() && !path(&legacy_dead).exists());
        for n in [&locked, &legacy_ours, &ours, &link] {
            assert!(path(n).symlink_metadata().is_ok(), "{n} removed");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        drop(owner);
        assert_eq!(remove_stale_in(place.open_dir().unwrap()), 1);
        assert!(!path(&locked).exists());
    }

    /// Inside another root, a symlink on the way resolves within that root, as the
    /// traced process would resolve it, never in ours.
    #[test]
    fn a_directory_inside_a_root_never_leads_out_of_it() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("root");
        std::fs::create_dir_all(root.join("real/shm")).unwrap();
        // An absolute symlink: in our file system it would lead to our /real/shm.
        std::os::unix::fs::symlink("/real", root.join("dev")).unwrap();
        let place = BufferPlace {
            root: root.clone(),
            dir: PathBuf::from("/dev/shm"),
            owner: None,
        };
        assert_eq!(place.shown(), root.join("dev/shm"));
        let (made, _file) = BufferFile::create(place.open_dir().unwrap(), &place).unwrap();
        assert!(made.agent_path.starts_with("/dev/shm/"));
        let name = made.agent_path.file_name().unwrap();
        assert!(root.join("real/shm").join(name).exists());
        // `..` does not climb out either.
        let up = BufferPlace {
            root: root.clone(),
            dir: PathBuf::from("/../../.."),
            owner: None,
        };
        let fd = up.open_dir().unwrap();
        let (escaped, _f) = BufferFile::create(fd, &up).unwrap();
        let name = escaped.agent_path.file_name().unwrap();
        assert!(root.join(name).exists(), "the root's own top");
    }
}
