//! Making an agent library visible inside the JVM's view of the file system.
//!
//! The JVM opens the library itself, with its own uid and mount namespace. A path that
//! only we can see (another mount namespace, a container, a chroot) or read (a JVM of
//! another user, an agent under root's home) must be copied first. The copy goes to
//! `<JVM's /tmp>/sonda-<uid>-<content hash>/<file name>`, mode 0644 in a 0755
//! directory, created as the JVM's user (root acting as that user, see `identity`): a
//! container's tmpfs may not even accept files owned by a user it cannot map, and the
//! JVM's user can change its own JVM anyway, while other users cannot change the copy.
//!
//! The JVM's `/tmp` may be controlled by hostile processes in the container, so nothing
//! there is trusted: the directory is opened without following symlinks and must belong
//! to the expected user and not be writable by others, and the file is written under a
//! fresh name (`O_EXCL`) and renamed into place. The copy is left behind: a loaded agent
//! stays mapped until the JVM exits, and a later attach reuses the directory.
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
    let dir_name = format!("sonda-{}-{:016x}", identity.file_owner(), fnv1a(&bytes));
    let _switched = identity
        .assume()
        .map_err(|e| AttachError::io("acting as the JVM's user", e))?;
    let ours = copy_into(
        target.tmp(),
        &dir_name,
        Path::new(name),
        &bytes,
        identity.file_owner(),
    )?;
    Ok(target.path_in_target(&ours))
}

/// Copies `bytes` to `<tmp>/<dir_name>/<name>` safely; returns that path. The
/// directory must end up owned by `owner`.
fn copy_into(
    tmp: &Path,
    dir_name: &str,
    name: &Path,
    bytes: &[u8],
    owner: u32,
) -> Result<PathBuf, AttachError> {
    let err = |what: String| move |e: io::Error| AttachError::io(what, e);
    let tmp_dir = open_dir_nofollow(tmp).map_err(err(format!("opening {}", tmp.display())))?;
    let dir_path = tmp.join(dir_name);
    // Through /proc/self/fd: the directory we opened, whatever happens to its path.
    let via_tmp = fd_path(&tmp_dir).join(dir_name);
    match DirBuilder::new().mode(0o755).create(&via_tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(err(format!("creating {}", dir_path.display()))(e)),
    }
    let dir =
        open_dir_nofollow(&via_tmp).map_err(err(format!("opening {}", dir_path.display())))?;
    let meta = dir
        .metadata()
        .map_err(err(format!("inspecting {}", dir_path.display())))?;
    if meta.uid() != owner || meta.mode() & 0o022 != 0 {
        return Err(AttachError::io(
            format!(
                "refusing {}: owned by uid {} with mode {:o}, expected uid {owner} and no \
                 write access for others",
                dir_path.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ),
            io::Error::from(io::ErrorKind::PermissionDenied),
        ));
    }
    // The umask may have narrowed the mode; the JVM's user needs to search it.
    dir.set_permissions(fs::Permissions::from_mode(0o755))
        .map_err(err(format!("chmod {}", dir_path.display())))?;

    let via_dir = fd_path(&dir);
    let temp_name = format!(".{}.{}.tmp", name.display(), std::process::id());
    let temp = via_dir.join(&temp_name);
    let _ = fs::remove_file(&temp);
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.set_permissions(fs::Permissions::from_mode(0o644))?;
        file.sync_all()?;
        fs::rename(&temp, via_dir.join(name))
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(err(format!("writing {}", dir_path.join(name).display()))(e));
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

    #[test]
    fn copies_with_readable_modes_and_reuses_the_directory() {
        let tmp = scratch("copy");
        let out = copy_into(&tmp, "sonda-1", Path::new("libx.so"), b"hello", me()).unwrap();
        assert_eq!(out, tmp.join("sonda-1/libx.so"));
        assert_eq!(fs::read(&out).unwrap(), b"hello");
        assert_eq!(fs::metadata(&out).unwrap().mode() & 0o777, 0o644);
        assert_eq!(
            fs::metadata(tmp.join("sonda-1")).unwrap().mode() & 0o777,
            0o755
        );
        let again = copy_into(&tmp, "sonda-1", Path::new("libx.so"), b"hello", me()).unwrap();
        assert_eq!(again, out);
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
        assert!(copy_into(&tmp, "sonda-2", Path::new("libx.so"), b"x", me()).is_err());
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);

        DirBuilder::new()
            .mode(0o777)
            .create(tmp.join("sonda-3"))
            .unwrap();
        fs::set_permissions(tmp.join("sonda-3"), fs::Permissions::from_mode(0o777)).unwrap();
        let e = copy_into(&tmp, "sonda-3", Path::new("libx.so"), b"x", me()).unwrap_err();
        assert!(e.to_string().contains("refusing"), "{e}");
        fs::remove_dir_all(&tmp).unwrap();
        fs::remove_dir_all(&elsewhere).unwrap();
    }
}
