//! The `.attach_pid<nspid>` file that makes HotSpot start its attach listener when it
//! gets SIGQUIT (without it, SIGQUIT only prints a thread dump).
//!
//! HotSpot looks in its working directory, then in `/tmp`; it trusts the file only if
//! owned by its euid or by root. The file is removed when the [`TriggerFile`] drops, so
//! it never outlives the attach, whatever the outcome.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::AttachError;
use crate::identity::Identity;
use crate::target::Target;

/// A trigger file we created; removed on drop.
#[derive(Debug)]
pub(crate) struct TriggerFile {
    path: PathBuf,
}

impl TriggerFile {
    /// Creates the trigger in the JVM's working directory, or failing that in its `/tmp`.
    pub(crate) fn create(target: &Target, identity: &Identity) -> Result<TriggerFile, AttachError> {
        let name = format!(".attach_pid{}", target.ns_pid());
        let candidates = [
            PathBuf::from(format!("/proc/{}/cwd", target.pid())).join(&name),
            target.tmp().join(&name),
        ];
        let mut failures = Vec::new();
        let mut last_error = None;
        for path in candidates {
            match create_trusted(&path, identity) {
                Ok(()) => return Ok(TriggerFile { path }),
                Err(e) => {
                    failures.push(format!("{}: {e}", path.display()));
                    last_error = Some(e);
                }
            }
        }
        Err(AttachError::io(
            format!(
                "cannot create an attach trigger file ({})",
                failures.join("; ")
            ),
            last_error.unwrap_or_else(|| io::Error::other("no candidate")),
        ))
    }
}

impl Drop for TriggerFile {
    fn drop(&mut self) {
        // We created it (as ourselves, or as root acting as the JVM's user): we may
        // remove it. Nothing sensible remains to do if removal fails.
        let _ = fs::remove_file(&self.path);
    }
}

/// Creates `path` exclusively (never following a planted symlink) with the identity's
/// owner, and checks the owner stuck: some file systems (NFS with root squash, some
/// FUSE mounts) hand new files to another user, and HotSpot would ignore them.
/// Whatever is at the name already (a stale trigger left by a crashed attacher, or a
/// file or symlink another user planted, which HotSpot would not trust) is removed
/// first (removing a name never follows a symlink): as the JVM's user, or as root when
/// that user may not (another user's file in a sticky `/tmp`).
fn create_trusted(path: &Path, identity: &Identity) -> io::Result<()> {
    let create = || {
        identity.run(|| {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
        })
    };
    let mut tries = 0;
    let file = loop {
        match create() {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 3 => {
                tries += 1;
                if let Err(e) = identity.run(|| fs::remove_file(path)) {
                    if crate::sys::effective_uid() != 0 {
                        return Err(e);
                    }
                    fs::remove_file(path)?;
                }
            }
            other => break other?,
        }
    };
    let owner = file.metadata()?.uid();
    drop(file);
    if owner != identity.file_owner() {
        let _ = identity.run(|| fs::remove_file(path));
        return Err(io::Error::other(format!(
            "the file system gave it to uid {owner}, which the JVM would not trust"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn scratch(tag: &str, mode: u32) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sonda-attach-trigger-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
        dir
    }

    #[test]
    fn created_owned_and_removed_on_drop() {
        let dir = scratch("drop", 0o755);
        let path = dir.join(".attach_pid1");
        create_trusted(&path, &Identity::Ours).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().uid(), sys::effective_uid());
        drop(TriggerFile { path: path.clone() });
        assert!(!path.exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_planted_symlink_is_replaced_not_followed() {
        let dir = scratch("symlink", 0o755);
        let victim = dir.join("victim");
        fs::write(&victim, b"keep me").unwrap();
        let path = dir.join(".attach_pid2");
        symlink(&victim, &path).unwrap();
        create_trusted(&path, &Identity::Ours).unwrap();
        assert!(fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(fs::read(&victim).unwrap(), b"keep me");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Another user's file at the name, in a sticky directory where the JVM's user may
    /// not remove it: root removes it, and the trigger is the JVM user's.
    #[test]
    fn a_file_planted_by_another_user_does_not_stop_root() {
        if !sonda_tests::require_root() {
            return;
        }
        let open = scratch("planted", 0o1777);
        let path = open.join(".attach_pid4");
        fs::write(&path, b"").unwrap();
        std::os::unix::fs::chown(&path, Some(12345), Some(12345)).unwrap();
        let nobody = Identity::Target {
            uid: 65534,
            gid: 65534,
        };
        create_trusted(&path, &nobody).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().uid(), 65534);
        fs::remove_dir_all(&open).unwrap();
    }

    #[test]
    fn root_creates_it_as_the_jvm_user() {
        if !sonda_tests::require_root() {
            return;
        }
        let nobody = Identity::Target {
            uid: 65534,
            gid: 65534,
        };
        let open = scratch("open", 0o1777);
        let path = open.join(".attach_pid3");
        create_trusted(&path, &nobody).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
        // A directory only root may write: the JVM's user cannot create it there.
        let closed = scratch("closed", 0o755);
        let e = create_trusted(&closed.join(".attach_pid3"), &nobody).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(sys::effective_uid(), 0, "credentials restored");
        fs::remove_dir_all(&open).unwrap();
        fs::remove_dir_all(&closed).unwrap();
    }
}
