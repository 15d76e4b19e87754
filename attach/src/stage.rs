//! Making an agent library visible inside the JVM's view of the file system.
//!
//! The JVM opens the library itself, with its own uid and mount namespace. A path that
//! only we can see (another mount namespace, a container, a chroot) or read (a JVM of
//! another user, an agent under root's home) must be copied first. The copy goes to
//! `<JVM's /tmp>/sonda-<uid>-<content hash>/<file name>`, mode 0600 in a 0700
//! directory (only the JVM's user, who loads it, may read it), created as the JVM's
//! user (root acting as that user, see `identity`): a container's tmpfs may not even
//! accept files owned by a user it cannot map, and the JVM's user can change its own
//! JVM anyway, while other users cannot change the copy.
//!
//! The JVM's `/tmp` may be controlled by hostile processes in the container, so nothing
//! there is trusted: the directory is opened without following symlinks and must belong
//! to the expected user and not be writable by others, and the file is written under a
//! fresh name (`O_EXCL`) and renamed into place. A directory of that name that fails
//! the check (another user planted it, or a symlink) does not stop the attach: the copy
//! goes to a fresh directory of an unpredictable name (`sonda-<uid>-<hash>-<random>`)
//! instead. The copy is left behind: a loaded agent stays mapped until the JVM exits,
//! and a later attach loads the same path again (HotSpot then finds the library it
//! already has): the copy this JVM already maps, wherever it is, else the usual
//! directory.
//!
//! Limits: the copy only helps if the library's own dependencies (glibc) exist in the
//! container, and if its `/tmp` is not mounted `noexec` (then `dlopen` fails and
//! [`crate::load_agent`] reports the JVM's message).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::AttachError;
use crate::identity::Identity;
use crate::sys;
use crate::target::Target;

/// Returns the path under which the JVM can open `agent`, copying it into the JVM's
/// `/tmp` when the JVM would not see or be able to read our file.
///
/// The file is used in place (canonical path) when the JVM shares our file system view
/// and runs as our user; otherwise it is copied. Pass the returned path to
/// [`crate::load_agent`].
pub fn stage_agent(target: &Target, agent: &Path) -> Result<PathBuf, AttachError> {
    let canonical = fs::canonicalize(agent)
        .map_err(|e| AttachError::io(format!("agent library {}", agent.display()), e))?;
    let identity = Identity::for_target(target)?;
    if target.shares_our_filesystem() && target.uid() == sys::effective_uid() {
        return Ok(canonical);
    }
    let bytes = fs::read(&canonical)
        .map_err(|e| AttachError::io(format!("reading {}", canonical.display()), e))?;
    let name = canonical.file_name().ok_or_else(|| {
        AttachError::InvalidRequest(format!("{} is not a file", canonical.display()))
    })?;
    let owner = identity.file_owner();
    let dir_name = format!("sonda-{owner}-{:016x}", fnv1a(&bytes));
    let tmp_seen = target.path_in_target(target.tmp());
    // Read as ourselves: the JVM's memory map needs ptrace access.
    let loaded = loaded_copies(target.pid(), &tmp_seen, &dir_name, Path::new(name));
    let _switched = identity
        .assume()
        .map_err(|e| AttachError::io("acting as the JVM's user", e))?;
    // The copy this JVM loaded at an earlier attach, if it is still sound.
    if let Some(loaded) = loaded.into_iter().find_map(|theirs| {
        let ours = target.tmp().join(theirs.strip_prefix(&tmp_seen).ok()?);
        let dir = ours.parent()?.file_name()?.to_str()?.to_owned();
        copy_into(
            target.tmp(),
            &dir,
            Path::new(name),
            &bytes,
            owner,
            Existing::Reuse,
        )
        .ok()
        .map(|_| theirs)
    }) {
        return Ok(loaded);
    }
    let ours = match copy_into(
        target.tmp(),
        &dir_name,
        Path::new(name),
        &bytes,
        owner,
        Existing::Reuse,
    ) {
        Ok(ours) => ours,
        // Someone else's, or not a directory: a fresh one nobody can have planted.
        Err(Staging::Untrusted(_)) => fresh_copy(target.tmp(), &dir_name, name, &bytes, owner)?,
        Err(Staging::Failed(e)) => return Err(e),
    };
    Ok(target.path_in_target(&ours))
}

/// Copies into a new directory `<dir_name>-<random>`.
fn fresh_copy(
    tmp: &Path,
    dir_name: &str,
    name: &std::ffi::OsStr,
    bytes: &[u8],
    owner: u32,
) -> Result<PathBuf, AttachError> {
    let mut last = None;
    for _ in 0..8 {
        let fresh = format!("{dir_name}-{:016x}", random_u64());
        match copy_into(tmp, &fresh, Path::new(name), bytes, owner, Existing::Refuse) {
            Ok(ours) => return Ok(ours),
            Err(Staging::Untrusted(e) | Staging::Failed(e)) => last = Some(e),
        }
    }
    Err(last.expect("tried at least once"))
}

/// The paths (as the JVM sees them) of copies of the agent that process `pid` maps:
/// `<tmp>/<dir_name>[-<random>]/<name>`.
fn loaded_copies(pid: u32, tmp: &Path, dir_name: &str, name: &Path) -> Vec<PathBuf> {
    mapped_files(pid)
        .into_iter()
        .filter(|path| {
            let dir_ok = path.parent().is_some_and(|d| {
                d.parent() == Some(tmp)
                    && d.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n == dir_name
                            || n.strip_prefix(dir_name)
                                .and_then(|r| r.strip_prefix('-'))
                                .is_some_and(|r| {
                                    r.len() == 16 && r.bytes().all(|b| b.is_ascii_hexdigit())
                                })
                    })
            });
            dir_ok && path.file_name() == Some(name.as_os_str())
        })
        .collect()
}

/// The files process `pid` maps (`/proc/<pid>/maps`, in its mount namespace's view),
/// each once, in the order of the map; none when the map cannot be read.
fn mapped_files(pid: u32) -> Vec<PathBuf> {
    let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.splitn(6, char::is_whitespace).nth(5).map(str::trim) else {
            continue;
        };
        let path = Path::new(path);
        if !found.iter().any(|f| f == path) {
            found.push(path.to_path_buf());
        }
    }
    found
}

/// Other copies of the agent library that the JVM maps, when it does not map `agent`
/// itself (as [`stage_agent`] returned it, in the JVM's view): files of its name at
/// another path. Each is an agent loaded by an earlier attach of another sonda build
/// (or from another place); the JVM keeps it until it exits, with the probe class it
/// defined, which a new copy cannot define again. Empty when `agent` is loaded already:
/// that copy is the one a new attach talks to, whatever else is loaded.
pub fn other_agents(target: &Target, agent: &Path) -> Vec<PathBuf> {
    let mut others = Vec::new();
    for path in mapped_files(target.pid()) {
        // A file replaced since it was mapped: it is still the one loaded.
        let path = match path.to_str().and_then(|p| p.strip_suffix(" (deleted)")) {
            Some(p) => PathBuf::from(p),
            None => path,
        };
        if path == agent {
            return Vec::new();
        }
        if path.file_name() == agent.file_name() && !others.contains(&path) {
            others.push(path);
        }
    }
    others
}

/// What to do with a directory that already exists.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Existing {
    /// Use it if it is trustworthy.
    Reuse,
    /// It must be new.
    Refuse,
}

/// Why a copy was not made.
#[derive(Debug)]
enum Staging {
    /// The directory exists and is not ours to trust (or not a directory).
    Untrusted(AttachError),
    /// Anything else.
    Failed(AttachError),
}

impl std::fmt::Display for Staging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Staging::Untrusted(e) | Staging::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// Copies `bytes` to `<tmp>/<dir_name>/<name>` safely (unless the file there already
/// holds them); returns that path. The directory must end up owned by `owner`.
fn copy_into(
    tmp: &Path,
    dir_name: &str,
    name: &Path,
    bytes: &[u8],
    owner: u32,
    existing: Existing,
) -> Result<PathBuf, Staging> {
    let failed = |what: String| move |e: io::Error| Staging::Failed(AttachError::io(what, e));
    let tmp_dir = open_dir_nofollow(tmp).map_err(failed(format!("opening {}", tmp.display())))?;
    let dir_path = tmp.join(dir_name);
    // Through /proc/self/fd: the directory we opened, whatever happens to its path.
    let via_tmp = fd_path(&tmp_dir).join(dir_name);
    match DirBuilder::new().mode(0o700).create(&via_tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && existing == Existing::Reuse => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(Staging::Untrusted(AttachError::io(
                format!("creating {}", dir_path.display()),
                e,
            )))
        }
        Err(e) => return Err(failed(format!("creating {}", dir_path.display()))(e)),
    }
    let untrusted = |what: String| move |e: io::Error| Staging::Untrusted(AttachError::io(what, e));
    // A symlink or a file at that name: not ours.
    let dir = open_dir_nofollow(&via_tmp)
        .map_err(untrusted(format!("opening {}", dir_path.display())))?;
    let meta = dir
        .metadata()
        .map_err(failed(format!("inspecting {}", dir_path.display())))?;
    if meta.uid() != owner || meta.mode() & 0o022 != 0 {
        return Err(Staging::Untrusted(AttachError::io(
            format!(
                "refusing {}: owned by uid {} with mode {:o}, expected uid {owner} and no \
                 write access for others",
                dir_path.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ),
            io::Error::from(io::ErrorKind::PermissionDenied),
        )));
    }
    // Only the JVM's user may read the copy (older sondas made the directory 0755).
    dir.set_permissions(fs::Permissions::from_mode(0o700))
        .map_err(failed(format!("chmod {}", dir_path.display())))?;

    let via_dir = fd_path(&dir);
    let target = via_dir.join(name);
    if fs::symlink_metadata(&target).is_ok_and(|m| m.is_file() && m.uid() == owner)
        && fs::read(&target).is_ok_and(|old| old == bytes)
    {
        let _ = fs::set_permissions(&target, fs::Permissions::from_mode(0o600));
        return Ok(dir_path.join(name));
    }
    let temp_name = format!(".{}.{}.tmp", name.display(), std::process::id());
    let temp = via_dir.join(&temp_name);
    let _ = fs::remove_file(&temp);
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
        file.sync_all()?;
        fs::rename(&temp, &target)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(failed(format!("writing {}", dir_path.join(name).display()))(e));
    }
    Ok(dir_path.join(name))
}

fn open_dir_nofollow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn fd_path(file: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// 64-bit FNV-1a: names the copy after its content, so different builds never share a
/// directory and the same build reuses it. Not a security measure (the directory's
/// ownership check is).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// 64 bits nobody can guess in advance, for the fresh directory's name.
fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    if File::open("/dev/urandom")
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut bytes))
        .is_err()
    {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return now ^ u64::from(std::process::id()).rotate_left(32);
    }
    u64::from_ne_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn me() -> u32 {
        sys::effective_uid()
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sonda-attach-stage-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn fnv1a_matches_reference_values() {
        assert_eq!(fnv1a(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x85944171f73967e8);
    }

    fn copy(tmp: &Path, dir: &str, bytes: &[u8]) -> Result<PathBuf, Staging> {
        copy_into(tmp, dir, Path::new("libx.so"), bytes, me(), Existing::Reuse)
    }

    #[test]
    fn copies_for_the_owner_alone_and_reuses_the_directory() {
        let tmp = scratch("copy");
        let out = copy(&tmp, "sonda-1", b"hello").unwrap();
        assert_eq!(out, tmp.join("sonda-1/libx.so"));
        assert_eq!(fs::read(&out).unwrap(), b"hello");
        assert_eq!(fs::metadata(&out).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            fs::metadata(tmp.join("sonda-1")).unwrap().mode() & 0o777,
            0o700
        );
        let inode = fs::metadata(&out).unwrap().ino();
        let again = copy(&tmp, "sonda-1", b"hello").unwrap();
        assert_eq!(again, out);
        assert_eq!(fs::metadata(&out).unwrap().ino(), inode, "left as it was");
        copy(&tmp, "sonda-1", b"other").unwrap();
        assert_eq!(fs::read(&out).unwrap(), b"other");
        assert_eq!(
            fs::read_dir(tmp.join("sonda-1")).unwrap().count(),
            1,
            "no temp file left"
        );
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn refuses_planted_symlinks_and_foreign_directories() {
        let tmp = scratch("hostile");
        let elsewhere = scratch("elsewhere");
        symlink(&elsewhere, tmp.join("sonda-2")).unwrap();
        assert!(matches!(
            copy(&tmp, "sonda-2", b"x"),
            Err(Staging::Untrusted(_))
        ));
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);

        DirBuilder::new()
            .mode(0o777)
            .create(tmp.join("sonda-3"))
            .unwrap();
        fs::set_permissions(tmp.join("sonda-3"), fs::Permissions::from_mode(0o777)).unwrap();
        let e = copy(&tmp, "sonda-3", b"x").unwrap_err();
        assert!(matches!(e, Staging::Untrusted(_)));
        assert!(e.to_string().contains("refusing"), "{e}");
        // A fresh directory of its own instead.
        let fresh = fresh_copy(&tmp, "sonda-3", "libx.so".as_ref(), b"x", me()).unwrap();
        let dir = fresh
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        assert!(
            dir.starts_with("sonda-3-") && dir.len() == "sonda-3-".len() + 16,
            "{dir}"
        );
        assert_eq!(fs::read(&fresh).unwrap(), b"x");
        fs::remove_dir_all(&tmp).unwrap();
        fs::remove_dir_all(&elsewhere).unwrap();
    }

    #[test]
    fn finds_the_copies_a_process_maps() {
        // This test binary maps itself; pretend its directory is "/tmp" of a JVM.
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap();
        let name = dir.file_name().unwrap().to_str().unwrap();
        let found = loaded_copies(
            std::process::id(),
            dir.parent().unwrap(),
            name,
            Path::new(exe.file_name().unwrap()),
        );
        // `deps` is no `<name>-<16 hex>` either way: found by its exact name only.
        assert_eq!(found, std::slice::from_ref(&exe));
        assert!(loaded_copies(
            std::process::id(),
            dir.parent().unwrap(),
            "x",
            Path::new("y")
        )
        .is_empty());
    }
}
