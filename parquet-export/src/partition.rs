//! Where a trace's tables go in a dataset: Hive-style partition directories
//! `host=H/trace=T` under each table's directory, so that many traces (hosts, days)
//! sit side by side and a reader that understands Hive partitioning (DuckDB's
//! `hive_partitioning`, Spark's partition discovery, Trino) reads each table of all
//! of them as one, with `host` and `trace` as columns.
//!
//! `T` names the trace: its file's stem, made safe for a directory name, and eight
//! hexadecimal digits of a checksum of what identifies the recording (host, origin,
//! command, sonda version). The same trace exported again gets the same name (so the
//! command can refuse to export it twice into one dataset); two recordings that share
//! a file name (`demo.trace` yesterday and today) get different ones.

use std::path::{Path, PathBuf};

use sonda_trace::TraceMeta;

use crate::schema::Table;

/// The partition of one trace: the values of the `host` and `trace` directories.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Partition {
    /// The host the trace was recorded on (`unknown` when the trace does not say).
    pub host: String,
    /// The trace's name in the dataset (see the module docs).
    pub trace: String,
}

impl Partition {
    /// The partition of the trace at `path` with metadata `meta`.
    pub fn of(path: &Path, meta: &TraceMeta) -> Partition {
        let mut sum = crc32fast::Hasher::new();
        let host = match &meta.info {
            Some(info) => {
                for part in [info.host.as_bytes(), info.tool.as_bytes()] {
                    sum.update(&(part.len() as u64).to_le_bytes());
                    sum.update(part);
                }
                sum.update(&info.start.0.to_le_bytes());
                for word in &info.command {
                    sum.update(&(word.len() as u64).to_le_bytes());
                    sum.update(word.as_bytes());
                }
                info.host.clone()
            }
            None => String::new(),
        };
        // Without a TraceInfo, what the scan saw stands in for the recording.
        sum.update(&meta.first_time.map_or(0, |t| t.0).to_le_bytes());
        sum.update(&(meta.threads.len() as u64).to_le_bytes());
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let stem = if stem.is_empty() {
            "trace".into()
        } else {
            stem
        };
        Partition {
            host: if host.is_empty() {
                "unknown".into()
            } else {
                host
            },
            trace: format!("{stem}-{:08x}", sum.finalize()),
        }
    }

    /// The partition's directories below a table's: `host=H/trace=T`, each value
    /// escaped as Hive escapes partition values (`%XX` for every byte but ASCII
    /// letters, digits, `-`, `_` and `.`; a leading `.` too, which would hide it).
    pub fn dirs(&self) -> PathBuf {
        Path::new(&format!("host={}", escape(&self.host)))
            .join(format!("trace={}", escape(&self.trace)))
    }

    /// The directory of `table`'s files of this partition under the dataset `root`:
    /// `root/<table>/host=H/trace=T`.
    pub fn table_dir(&self, root: &Path, table: Table) -> PathBuf {
        root.join(table.name()).join(self.dirs())
    }
}

/// A partition value as a directory name (see [`Partition::dirs`]).
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, b) in value.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{Source, Time, TraceInfo};

    fn meta(host: &str, start: u64) -> TraceMeta {
        TraceMeta {
            info: Some(TraceInfo {
                source: Source::Tracepoints,
                start: Time(start),
                host: host.into(),
                cpus: 2,
                command: vec!["java".into(), "Demo".into()],
                tool: "sonda 0.1.0".into(),
            }),
            ..TraceMeta::default()
        }
    }

    #[test]
    fn the_same_recording_has_one_name_and_others_another() {
        let a = Partition::of(Path::new("/x/demo.trace"), &meta("web-1", 5));
        assert_eq!(
            a,
            Partition::of(Path::new("/y/demo.trace"), &meta("web-1", 5))
        );
        assert_eq!(a.host, "web-1");
        assert!(a.trace.starts_with("demo-") && a.trace.len() == "demo-".len() + 8);
        // Recorded again (another origin), or on another host: another name.
        assert_ne!(
            a.trace,
            Partition::of(Path::new("demo.trace"), &meta("web-1", 6)).trace
        );
        assert_ne!(
            a.trace,
            Partition::of(Path::new("demo.trace"), &meta("web-2", 5)).trace
        );
        assert_eq!(
            a.dirs(),
            PathBuf::from(format!("host=web-1/trace={}", a.trace))
        );
    }

    #[test]
    fn names_are_safe_directory_names() {
        let p = Partition::of(Path::new("/t/my run=1 ü.trace"), &meta("a/b=c", 1));
        assert!(p.trace.starts_with("my_run_1__-"), "{}", p.trace);
        let dirs = p.dirs();
        let host = dirs.components().next().unwrap();
        assert_eq!(host.as_os_str(), "host=a%2Fb%3Dc");
        assert_eq!(escape(".hidden"), "%2Ehidden");
        assert_eq!(
            Partition::of(Path::new("/"), &TraceMeta::default()).host,
            "unknown"
        );
        assert!(Partition::of(Path::new("/"), &TraceMeta::default())
            .trace
            .starts_with("trace-"));
    }
}
