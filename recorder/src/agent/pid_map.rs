//! Thread ids of an agent in another pid namespace (a JVM in a container), translated
//! to ours.
//!
//! An agent knows its process and threads by the ids of its own pid namespace (the JVM
//! is often pid 1 there), which its slots, ring records and metadata carry; the kernel
//! events carry ours. `/proc/<pid>/task/<tid>/status` gives both: its `NSpid:` line
//! lists a thread's id in each namespace from ours inwards, the last one being the
//! agent's. The map is built from every thread of the attached process and read again
//! when an id it does not know comes (a thread started since), at most once per
//! [`REFRESH_EVERY`]. An id that cannot be translated (a thread that lived and ended
//! between two reads) is kept as it is and counted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sonda_trace::{Meta, Pid, Tid};

/// Shortest time between two reads of the process's threads.
const REFRESH_EVERY: Duration = Duration::from_millis(20);

/// Ids of one process's pid namespace → ours.
pub struct PidMap {
    /// `/proc/<pid>` of the process, from our side.
    dir: PathBuf,
    /// The process's pid in its namespace, and in ours.
    pid: (u32, u32),
    threads: HashMap<u32, u32>,
    last_read: Option<Instant>,
    unmapped: u64,
}

/// The innermost and outermost ids of an `NSpid:`/`NStgid:` line, if it has more than
/// one (the task lives in a nested pid namespace).
pub fn parse_ns_ids(status: &str, key: &str) -> Option<(u32, u32)> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let ids: Vec<u32> = line[key.len()..]
        .split_whitespace()
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    match ids.as_slice() {
        [ours, .., theirs] => Some((*theirs, *ours)),
        _ => None,
    }
}

impl PidMap {
    /// The map for process `pid` (ours), or `None` when it lives in our pid namespace
    /// (or in one whose ids equal ours), where nothing needs translating.
    pub fn for_process(pid: Pid) -> Option<PidMap> {
        PidMap::under(Path::new("/proc"), pid)
    }

    fn under(proc: &Path, pid: Pid) -> Option<PidMap> {
        let dir = proc.join(pid.0.to_string());
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let (theirs, ours) = parse_ns_ids(&status, "NStgid:")?;
        let mut map = PidMap {
            dir,
            pid: (theirs, ours),
            threads: HashMap::new(),
            last_read: None,
            unmapped: 0,
        };
        map.read();
        Some(map)
    }

    /// Reads the ids of every thread of the process.
    fn read(&mut self) {
        self.last_read = Some(Instant::now());
        let Ok(tasks) = std::fs::read_dir(self.dir.join("task")) else {
            return;
        };
        for task in tasks.flatten() {
            if let Some((theirs, ours)) = std::fs::read_to_string(task.path().join("status"))
                .ok()
                .and_then(|s| parse_ns_ids(&s, "NSpid:"))
            {
                self.threads.insert(theirs, ours);
            }
        }
    }

    /// Our id of the agent's thread `tid`.
    pub fn tid(&mut self, tid: Tid) -> Tid {
        if let Some(&ours) = self.threads.get(&tid.0) {
            return Tid(ours);
        }
        if self.last_read.is_none_or(|t| t.elapsed() >= REFRESH_EVERY) {
            self.read();
            if let Some(&ours) = self.threads.get(&tid.0) {
                return Tid(ours);
            }
        }
        self.unmapped += 1;
        tid
    }

    /// Our id of the agent's process `pid` (its parent, outside the namespace, is 0
    /// there and stays 0).
    pub fn pid(&self, pid: Pid) -> Pid {
        if pid.0 == self.pid.0 {
            Pid(self.pid.1)
        } else {
            pid
        }
    }

    /// Ids that could not be translated so far.
    pub fn unmapped(&self) -> u64 {
        self.unmapped
    }

    /// `meta` with our ids.
    pub fn meta(&mut self, meta: Meta) -> Meta {
        match meta {
            Meta::Process {
                pid,
                ppid,
                name,
                runtime,
            } => Meta::Process {
                pid: self.pid(pid),
                ppid: if pid.0 == self.pid.0 {
                    Pid(0)
                } else {
                    self.pid(ppid)
                },
                name,
                runtime,
            },
            Meta::JavaThread {
                pid,
                tid,
                name,
                daemon,
            } => Meta::JavaThread {
                pid: self.pid(pid),
                tid: self.tid(tid),
                name,
                daemon,
            },
            Meta::Thread { pid, tid, comm } => Meta::Thread {
                pid: self.pid(pid),
                tid: self.tid(tid),
                comm,
            },
            Meta::Mapping {
                pid,
                start,
                end,
                offset,
                path,
            } => Meta::Mapping {
                pid: self.pid(pid),
                start,
                end,
                offset,
                path,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ns_lines_give_innermost_and_ours() {
        let status = "Name:\tjava\nNStgid:\t4242\t1\nNSpid:\t4250\t9\n";
        assert_eq!(parse_ns_ids(status, "NStgid:"), Some((1, 4242)));
        assert_eq!(parse_ns_ids(status, "NSpid:"), Some((9, 4250)));
        let nested = "NSpid:\t4250\t77\t9\n";
        assert_eq!(parse_ns_ids(nested, "NSpid:"), Some((9, 4250)));
        assert_eq!(parse_ns_ids("NSpid:\t4250\n", "NSpid:"), None);
        assert_eq!(parse_ns_ids("Name:\tx\n", "NSpid:"), None);
        assert_eq!(parse_ns_ids("NSpid:\tx\t1\n", "NSpid:"), None);
    }

    /// A fake /proc of a process that is pid 1 in its namespace, 500 in ours.
    fn fake_proc(threads: &[(u32, u32)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("500");
        std::fs::create_dir_all(p.join("task")).unwrap();
        std::fs::write(p.join("status"), "NStgid:\t500\t1\nNSpid:\t500\t1\n").unwrap();
        for (ours, theirs) in threads {
            let t = p.join("task").join(ours.to_string());
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("status"), format!("NSpid:\t{ours}\t{theirs}\n")).unwrap();
        }
        dir
    }

    #[test]
    fn translates_ids_and_metadata_and_reads_new_threads() {
        let proc = fake_proc(&[(500, 1), (503, 4)]);
        let mut map = PidMap::under(proc.path(), Pid(500)).unwrap();
        assert_eq!(map.tid(Tid(4)), Tid(503));
        assert_eq!(map.tid(Tid(1)), Tid(500));
        assert_eq!(map.pid(Pid(1)), Pid(500));
        assert_eq!(
            map.meta(Meta::Process {
                pid: Pid(1),
                ppid: Pid(0),
                name: "Main".into(),
                runtime: sonda_trace::Runtime::Java
            }),
            Meta::Process {
                pid: Pid(500),
                ppid: Pid(0),
                name: "Main".into(),
                runtime: sonda_trace::Runtime::Java
            }
        );
        // A thread started since the last read is found by reading again.
        let t = proc.path().join("500/task/510");
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("status"), "NSpid:\t510\t11\n").unwrap();
        std::thread::sleep(REFRESH_EVERY);
        assert_eq!(
            map.meta(Meta::JavaThread {
                pid: Pid(1),
                tid: Tid(11),
                name: "worker".into(),
                daemon: false
            }),
            Meta::JavaThread {
                pid: Pid(500),
                tid: Tid(510),
                name: "worker".into(),
                daemon: false
            }
        );
        // One that is gone cannot be translated: kept, counted.
        assert_eq!(map.tid(Tid(99)), Tid(99));
        assert_eq!(map.unmapped(), 1);
    }

    #[test]
    fn a_process_of_our_namespace_needs_no_map() {
        assert!(PidMap::for_process(Pid(std::process::id())).is_none());
    }
}
