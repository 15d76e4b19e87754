//! Finding tracefs and reading tracepoint descriptions from it.
//!
//! Tracepoint ids and payload layouts live in `events/<sys>/<name>/{id,format}` under
//! tracefs. On a fresh machine `/sys/kernel/tracing` may exist but be empty (tracefs
//! not mounted); root can mount it there. debugfs (`/sys/kernel/debug/tracing`) is the
//! older place and is tried too.

use std::ffi::CString;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::tp_format::Format;

/// Where tracefs is usually mounted.
const TRACEFS: &str = "/sys/kernel/tracing";
/// The older location under debugfs.
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// Why tracepoint descriptions could not be read.
#[derive(Debug)]
pub enum TracefsError {
    /// No permission to read tracefs (not root): the caller falls back to /proc.
    Permission(PathBuf),
    /// tracefs is not mounted and could not be mounted.
    NotMounted(String),
    /// A tracepoint's files are missing (kernel without it) or unreadable.
    Io(PathBuf, io::Error),
    /// A format file does not parse.
    Format(PathBuf, String),
}

impl std::fmt::Display for TracefsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TracefsError::Permission(p) => write!(f, "no permission to read {}", p.display()),
            TracefsError::NotMounted(why) => {
                write!(f, "tracefs is not mounted at {TRACEFS} ({why})")
            }
            TracefsError::Io(p, e) => write!(f, "cannot read {}: {e}", p.display()),
            TracefsError::Format(p, e) => write!(f, "cannot parse {}: {e}", p.display()),
        }
    }
}

/// A tracefs mount point.
#[derive(Debug, Clone)]
pub struct Tracefs {
    root: PathBuf,
}

impl Tracefs {
    /// Finds tracefs, mounting it at `/sys/kernel/tracing` when that directory exists but
    /// is empty (needs root; without it the error says so).
    pub fn locate() -> Result<Tracefs, TracefsError> {
        for root in [TRACEFS, DEBUGFS_TRACING] {
            let root = Path::new(root);
            match root.join("events").metadata() {
                Ok(_) => {
                    return Ok(Tracefs {
                        root: root.to_path_buf(),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    return Err(TracefsError::Permission(root.to_path_buf()))
                }
                Err(_) => {}
            }
        }
        let root = Path::new(TRACEFS);
        let empty = std::fs::read_dir(root).map(|mut d| d.next().is_none());
        match empty {
            Ok(true) => mount_tracefs(root).map(|()| Tracefs {
                root: root.to_path_buf(),
            }),
            Ok(false) => Err(TracefsError::NotMounted(
                "it holds no events directory".into(),
            )),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                Err(TracefsError::Permission(root.to_path_buf()))
            }
            Err(e) => Err(TracefsError::NotMounted(e.to_string())),
        }
    }

    /// The mount point.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads the text file at `rel` under the mount point. Some tracefs files
    /// (`events/header_page`) only give their text to a read large enough for all of
    /// it, and nothing to a second read: one large read it is.
    pub fn read(&self, rel: &str) -> Result<String, TracefsError> {
        let path = self.root.join(rel);
        let error = |e: io::Error| match e.kind() {
            io::ErrorKind::PermissionDenied => TracefsError::Permission(path.clone()),
            _ => TracefsError::Io(path.clone(), e),
        };
        let mut file = std::fs::File::open(&path).map_err(error)?;
        let mut buf = vec![0u8; 64 << 10];
        let mut len = 0;
        loop {
            match file.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(error(e)),
            }
            if len == buf.len() {
                buf.resize(len * 2, 0);
            }
        }
        buf.truncate(len);
        String::from_utf8(buf)
            .map_err(|_| TracefsError::Format(path.clone(), "not UTF-8 text".into()))
    }

    /// Reads and parses `events/<sys>/<name>/format` (which holds the id too).
    pub fn format(&self, sys: &str, name: &str) -> Result<Format, TracefsError> {
        let path = self.root.join("events").join(sys).join(name).join("format");
        let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => TracefsError::Permission(path.clone()),
            _ => TracefsError::Io(path.clone(), e),
        })?;
        let format =
            Format::parse(&text).map_err(|e| TracefsError::Format(path.clone(), e.to_string()))?;
        // The `id` file is authoritative; the format's ID line repeats it.
        let id_path = self.root.join("events").join(sys).join(name).join("id");
        match std::fs::read_to_string(&id_path) {
            Ok(id) if id.trim().parse::<u64>().ok() == Some(format.id) => Ok(format),
            Ok(id) => Err(TracefsError::Format(
                id_path,
                format!("id {:?} differs from the format's {}", id.trim(), format.id),
            )),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                Err(TracefsError::Permission(id_path))
            }
            Err(e) => Err(TracefsError::Io(id_path, e)),
        }
    }
}

/// `mount -t tracefs nodev <root>`.
fn mount_tracefs(root: &Path) -> Result<(), TracefsError> {
    let target =
        CString::new(root.as_os_str().as_encoded_bytes()).expect("a constant path has no NUL");
    let Err(e) = crate::sys::mount_tracefs(&target) else {
        return Ok(());
    };
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => Err(TracefsError::Permission(root.to_path_buf())),
        _ => Err(TracefsError::NotMounted(format!("mount failed: {e}"))),
    }
}
