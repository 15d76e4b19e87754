//! Finding out, from /proc alone, whether and how a process can be attached to.
//!
//! Nothing here signals or writes anything: a process that is not a HotSpot JVM must
//! never get SIGQUIT (its default action kills), so the check comes first.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::AttachError;
use crate::sys;

/// A HotSpot JVM we may attach to, as seen at [`Target::inspect`] time.
///
/// Paths are ours (they go through `/proc/<pid>/root`, which works across mount
/// namespaces); [`Target::ns_pid`] is the pid the JVM sees itself as, which names its
/// socket and trigger files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pid: u32,
    ns_pid: u32,
    uid: u32,
    gid: u32,
    root: PathBuf,
    tmp: PathBuf,
    start_time: u64,
    same_view: bool,
}

/// The fields of `/proc/<pid>/status` the attach needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub(crate) tgid: u32,
    pub(crate) euid: u32,
    pub(crate) egid: u32,
    /// Last value of `NStgid:` (innermost pid namespace); `None` on kernels < 4.1.
    pub(crate) ns_tgid: Option<u32>,
    /// Signals with a handler (`SigCgt:`).
    pub(crate) caught: u64,
}

impl Status {
    /// Whether the process has a SIGQUIT handler (HotSpot installs one at start, unless
    /// run with `-Xrs`).
    pub(crate) fn catches_sigquit(&self) -> bool {
        self.caught & (1 << (libc::SIGQUIT - 1)) != 0
    }
}

/// What kind of JVM `/proc/<pid>/maps` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VmKind {
    HotSpot,
    /// OpenJ9 ships a `libjvm.so` too, but attaches through another protocol.
    OpenJ9,
    None,
}

impl Target {
    /// Inspects process `pid`: its credentials, namespace pid and temp directory, and
    /// whether it is a HotSpot JVM we are allowed to attach to. Sends nothing.
    ///
    /// A thread id is accepted and stands for its process.
    pub fn inspect(pid: u32) -> Result<Target, AttachError> {
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        if pid == 0 || i32::try_from(pid).is_err() {
            return Err(AttachError::NoSuchProcess(pid));
        }
        let status = read_status(pid)?;
        if status.tgid != pid {
            return Target::inspect(status.tgid);
        }
        let our_uid = sys::effective_uid();
        if our_uid != 0 && our_uid != status.euid {
            return Err(AttachError::PermissionDenied {
                pid,
                target_uid: status.euid,
                our_uid,
            });
        }
        let start_time = read_start_time(pid)?.ok_or(AttachError::NoSuchProcess(pid))?;
        let maps = fs::read(proc_dir.join("maps")).map_err(|e| proc_error(pid, "maps", e))?;
        match vm_kind(&String::from_utf8_lossy(&maps)) {
            VmKind::HotSpot => {}
            VmKind::OpenJ9 | VmKind::None => return Err(AttachError::NotAJvm(pid)),
        }
        // The pid may have been reused while we read: the start time must not move.
        if read_start_time(pid)? != Some(start_time) {
            return Err(AttachError::NoSuchProcess(pid));
        }
        let root = proc_dir.join("root");
        let tmp = resolve_tmp(&root);
        let same_view = same_file(Path::new("/proc/self/ns/mnt"), &proc_dir.join("ns/mnt"))
            && same_file(Path::new("/proc/self/root"), &root);
        Ok(Target {
            pid,
            ns_pid: status.ns_tgid.unwrap_or(pid),
            uid: status.euid,
            gid: status.egid,
            root,
            tmp,
            start_time,
            same_view,
        })
    }

    /// The pid in our pid namespace.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The pid the JVM sees itself as (differs from [`Target::pid`] in a container).
    pub fn ns_pid(&self) -> u32 {
        self.ns_pid
    }

    /// The JVM's effective uid (as seen from our user namespace).
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The JVM's effective gid (as seen from our user namespace).
    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// The JVM's root directory, from our side: `/proc/<pid>/root`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The JVM's `/tmp`, from our side: where its attach socket lives. Usually
    /// `/proc/<pid>/root/tmp`; plain `/tmp` when that cannot be reached.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// Whether the JVM sees the same files as we do at the same paths (same mount
    /// namespace and same root). When not, an agent library must be copied into its
    /// view first ([`crate::stage_agent`]).
    pub fn shares_our_filesystem(&self) -> bool {
        self.same_view
    }

    /// The attach socket, from our side.
    pub(crate) fn socket_path(&self) -> PathBuf {
        self.tmp.join(format!(".java_pid{}", self.ns_pid))
    }

    /// The process start time (clock ticks after boot): with the pid, names the process.
    pub(crate) fn start_time(&self) -> u64 {
        self.start_time
    }

    /// Translates a path of ours under [`Target::root`] (as [`Target::tmp`] is) into
    /// the path the JVM sees: `/proc/<pid>/root/dev/shm/x` is its `/dev/shm/x`. A path
    /// elsewhere is returned as is (the JVM shares our view, or cannot see it at all).
    pub fn path_in_target(&self, ours: &Path) -> PathBuf {
        match ours.strip_prefix(&self.root) {
            Ok(rest) => Path::new("/").join(rest),
            Err(_) => ours.to_path_buf(),
        }
    }
}

/// Reads and parses `/proc/<pid>/status`.
pub(crate) fn read_status(pid: u32) -> Result<Status, AttachError> {
    let bytes =
        fs::read(format!("/proc/{pid}/status")).map_err(|e| proc_error(pid, "status", e))?;
    parse_status(&String::from_utf8_lossy(&bytes))
        .map_err(|why| AttachError::Protocol(format!("unexpected /proc/{pid}/status: {why}")))
}

/// The start time of `pid`, or `None` if it exited (or is a zombie).
pub(crate) fn read_start_time(pid: u32) -> Result<Option<u64>, AttachError> {
    match fs::read(format!("/proc/{pid}/stat")) {
        Ok(bytes) => {
            let (state, start) = parse_stat(&String::from_utf8_lossy(&bytes)).map_err(|why| {
                AttachError::Protocol(format!("unexpected /proc/{pid}/stat: {why}"))
            })?;
            Ok(if matches!(state, 'Z' | 'X' | 'x') {
                None
            } else {
                Some(start)
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            Ok(None)
        }
        Err(e) => Err(proc_error(pid, "stat", e)),
    }
}

fn proc_error(pid: u32, file: &str, e: io::Error) -> AttachError {
    if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
        AttachError::NoSuchProcess(pid)
    } else if e.kind() == io::ErrorKind::PermissionDenied {
        // /proc/<pid>/maps needs ptrace-read access: another user, or not dumpable.
        let target_uid = read_status(pid).map(|s| s.euid).unwrap_or(u32::MAX);
        AttachError::PermissionDenied {
            pid,
            target_uid,
            our_uid: sys::effective_uid(),
        }
    } else {
        AttachError::io(format!("reading /proc/{pid}/{file}"), e)
    }
}

pub(crate) fn parse_status(text: &str) -> Result<Status, String> {
    let mut tgid = None;
    let mut euid = None;
    let mut egid = None;
    let mut ns_tgid = None;
    let mut caught = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let mut fields = value.split_whitespace();
        match key {
            "Tgid" => tgid = fields.next().and_then(|v| v.parse().ok()),
            // Real, effective, saved, filesystem: HotSpot checks the effective id.
            "Uid" => euid = fields.nth(1).and_then(|v| v.parse().ok()),
            "Gid" => egid = fields.nth(1).and_then(|v| v.parse().ok()),
            // One pid per nested namespace, outermost first.
            "NStgid" => ns_tgid = fields.last().and_then(|v| v.parse().ok()),
            "SigCgt" => caught = fields.next().and_then(|v| u64::from_str_radix(v, 16).ok()),
            _ => {}
        }
    }
    Ok(Status {
        tgid: tgid.ok_or("no Tgid")?,
        euid: euid.ok_or("no effective Uid")?,
        egid: egid.ok_or("no effective Gid")?,
        ns_tgid,
        caught: caught.ok_or("no SigCgt")?,
    })
}

/// State and start time (field 22) from `/proc/<pid>/stat`. The command name, in
/// parentheses, may itself contain spaces and parentheses: fields start after the last `)`.
pub(crate) fn parse_stat(text: &str) -> Result<(char, u64), String> {
    let rest = &text[text.rfind(')').ok_or("no ')'")? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields
        .first()
        .and_then(|s| s.chars().next())
        .ok_or("no state")?;
    // Field 3 (state) is fields[0], so field 22 (starttime) is fields[19].
    let start = fields
        .get(19)
        .and_then(|v| v.parse().ok())
        .ok_or("no start time")?;
    Ok((state, start))
}

pub(crate) fn vm_kind(maps: &str) -> VmKind {
    let mut hotspot = false;
    for line in maps.lines() {
        // The path is the 6th column; it may contain spaces, and ends with " (deleted)"
        // when the JDK was upgraded under a running JVM.
        let Some(path) = line.splitn(6, char::is_whitespace).nth(5).map(str::trim) else {
            continue;
        };
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.starts_with("libj9vm") {
            return VmKind::OpenJ9;
        }
        hotspot |= name == "libjvm.so";
    }
    if hotspot {
        VmKind::HotSpot
    } else {
        VmKind::None
    }
}

/// The JVM's `/tmp` from our side. HotSpot always uses `/tmp` (not `java.io.tmpdir`).
/// If the target's `/tmp` is a symlink, an absolute target would be resolved against
/// *our* root, so it is resolved by hand against the JVM's root (a few hops).
fn resolve_tmp(root: &Path) -> PathBuf {
    let mut path = root.join("tmp");
    for _ in 0..8 {
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => match fs::read_link(&path) {
                Ok(link) if link.is_absolute() => {
                    path = root.join(link.strip_prefix("/").unwrap_or(&link));
                }
                Ok(link) => path = path.parent().unwrap_or(root).join(link),
                Err(_) => break,
            },
            Ok(m) if m.is_dir() => return path,
            _ => break,
        }
    }
    PathBuf::from("/tmp")
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tjava\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n\
        Ngid:\t0\nPid:\t4242\nPPid:\t1\nTracerPid:\t0\nUid:\t1000\t1001\t1002\t1003\n\
        Gid:\t2000\t2001\t2002\t2003\nNStgid:\t4242\t17\t1\nNSpid:\t4242\t17\t1\n\
        SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t2000000181005ccf\n";

    #[test]
    fn status_gives_effective_ids_and_innermost_pid() {
        let s = parse_status(STATUS).unwrap();
        assert_eq!(s.tgid, 4242);
        assert_eq!((s.euid, s.egid), (1001, 2001));
        assert_eq!(s.ns_tgid, Some(1));
        assert!(s.catches_sigquit()); // 0x...cf has bit 2 (SIGQUIT = 3)
        let no_quit = STATUS.replace("2000000181005ccf", "2000000181005cc3");
        assert!(!parse_status(&no_quit).unwrap().catches_sigquit());
        let old_kernel = STATUS.replace("NStgid:\t4242\t17\t1\n", "");
        assert_eq!(parse_status(&old_kernel).unwrap().ns_tgid, None);
        assert!(parse_status("Name:\tx\n").is_err());
    }

    #[test]
    fn our_own_status_parses() {
        let s = parse_status(&fs::read_to_string("/proc/self/status").unwrap()).unwrap();
        assert_eq!(s.tgid, std::process::id());
        assert_eq!(s.euid, sys::effective_uid());
        assert_eq!(s.egid, sys::effective_gid());
    }

    #[test]
    fn stat_survives_odd_command_names() {
        let line = "77 (a) b (c) S 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 \
                    1000 100 18446744073709551615\n";
        assert_eq!(parse_stat(line).unwrap(), ('S', 987654));
        assert!(parse_stat("77 (x) S 1").is_err());
        let (state, _) =
            parse_stat(&fs::read_to_string("/proc/thread-self/stat").unwrap()).unwrap();
        assert_eq!(state, 'R');
    }

    #[test]
    fn maps_tell_hotspot_from_openj9_and_others() {
        let hs = "7f00-7f01 r-xp 00000000 08:01 123  /usr/lib/jvm/java-17/lib/server/libjvm.so\n";
        assert_eq!(vm_kind(hs), VmKind::HotSpot);
        let deleted =
            "7f00-7f01 r-xp 00000000 08:01 123  /opt/my jdk/lib/server/libjvm.so (deleted)\n";
        assert_eq!(vm_kind(deleted), VmKind::HotSpot);
        let j9 =
            format!("{hs}7f02-7f03 r-xp 00000000 08:01 124  /opt/j9/lib/default/libj9vm29.so\n");
        assert_eq!(vm_kind(&j9), VmKind::OpenJ9);
        let other = "7f00-7f01 r-xp 00000000 08:01 123  /usr/lib/libjvm.so.old\n\
                     7f00-7f01 rw-p 00000000 00:00 0 \n7f00-7f01 r-xp 0 08:01 1 /x/notlibjvm.so\n";
        assert_eq!(vm_kind(other), VmKind::None);
        assert_eq!(
            vm_kind(&fs::read_to_string("/proc/self/maps").unwrap()),
            VmKind::None
        );
    }

    #[test]
    fn a_test_binary_is_not_a_jvm() {
        assert!(matches!(
            Target::inspect(std::process::id()),
            Err(AttachError::NotAJvm(_))
        ));
        assert!(matches!(
            Target::inspect(0),
            Err(AttachError::NoSuchProcess(0))
        ));
    }
}
