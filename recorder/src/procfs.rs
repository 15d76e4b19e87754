//! The fallback when kernel tracepoints cannot be opened (not root, no CAP_PERFMON):
//! sampling `/proc/<pid>/task/<tid>/{stat,schedstat}` of the followed processes
//! periodically. Coarse (a thread that sleeps and wakes between two samples is not
//! seen doing so; a child that lives shorter than the period may be missed), but
//! the cumulative run and wait times of `schedstat` are exact at each sample.
//!
//! A sample is written as [`Event::ProcSample`] only when something changed since the
//! previous one of that thread; a thread that disappears gets an [`Event::TaskExit`].
//! Child processes are found through `/proc/<pid>/task/<tid>/children`, or by scanning
//! every process's parent when the kernel lacks that file.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use sonda_trace::{Cpu, Event, Meta, Pid, Record, Tid, Time};

use crate::follow::{Follow, TaskLookup};

/// The fields of `/proc/<pid>/task/<tid>/stat` sonda uses.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Stat {
    /// `comm` (field 2, between the outer parentheses).
    pub comm: String,
    /// One-letter state (field 3).
    pub state: u8,
    /// Parent process (field 4).
    pub ppid: u32,
    /// CPU last run on (field 39).
    pub cpu: u16,
}

/// Parses a `stat` line. The name may hold spaces and parentheses, so it is taken up to
/// the *last* `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // fields[0] is field 3 of the man page.
    Some(Stat {
        comm,
        state: *fields.first()?.as_bytes().first()?,
        ppid: fields.get(1)?.parse().ok()?,
        cpu: fields.get(36)?.parse().ok()?,
    })
}

/// Parses `schedstat`: ns on a CPU, ns runnable waiting, timeslices.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_whitespace().map(|s| s.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// Parses a `children` file: pids separated by spaces.
pub fn parse_children(text: &str) -> Vec<Pid> {
    text.split_whitespace()
        .filter_map(|s| s.parse().ok())
        .map(Pid)
        .collect()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Last {
    state: u8,
    cpu: u16,
    run: u64,
    wait: u64,
}

/// The sampler's state.
pub struct ProcSampler {
    proc: PathBuf,
    /// Processes followed and still alive.
    procs: BTreeSet<Pid>,
    threads: HashMap<Tid, Last>,
    /// Last known names, to notice renames and execs.
    comms: HashMap<Tid, String>,
    process_names: HashMap<Pid, String>,
    samples: u64,
}

impl ProcSampler {
    /// Samples process `root` and its descendants.
    pub fn new(root: Pid) -> ProcSampler {
        ProcSampler::with_proc(Path::new("/proc"), root)
    }

    fn with_proc(proc: &Path, root: Pid) -> ProcSampler {
        ProcSampler {
            proc: proc.to_path_buf(),
            procs: BTreeSet::from([root]),
            threads: HashMap::new(),
            comms: HashMap::new(),
            process_names: HashMap::new(),
            samples: 0,
        }
    }

    /// Samples written so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Takes one sample at `now`: new processes and threads are adopted by `follow`
    /// (their metadata goes to `metas`), changed threads become records in `out`, a
    /// changed thread name a [`Event::Rename`], a changed process name (an exec) new
    /// process metadata.
    pub fn sample<L: TaskLookup>(
        &mut self,
        now: Time,
        out: &mut Vec<Record>,
        follow: &mut Follow<L>,
        metas: &mut Vec<Meta>,
    ) {
        self.discover_children();
        let mut present = BTreeSet::new();
        let procs: Vec<Pid> = self.procs.iter().copied().collect();
        for pid in procs {
            let (Ok(tasks), Some(process)) = (
                std::fs::read_dir(self.proc.join(pid.0.to_string()).join("task")),
                read(&self.proc.join(format!("{pid}/stat"))).and_then(|s| parse_stat(&s)),
            ) else {
                self.procs.remove(&pid);
                self.process_names.remove(&pid);
                continue;
            };
            let ppid = Pid(process.ppid);
            match self.process_names.insert(pid, process.comm.clone()) {
                Some(old) if old != process.comm => {
                    follow.rename_process(pid, &process.comm, metas)
                }
                _ => {}
            }
            for task in tasks.flatten() {
                let Some(tid) = task
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse().ok())
                    .map(Tid)
                else {
                    continue;
                };
                let dir = task.path();
                let (Some(stat), Some((run, wait))) = (
                    read(&dir.join("stat")).and_then(|s| parse_stat(&s)),
                    read(&dir.join("schedstat")).and_then(|s| parse_schedstat(&s)),
                ) else {
                    continue; // it ended while we looked
                };
                present.insert(tid);
                if !self.threads.contains_key(&tid) {
                    follow.adopt(pid, ppid, tid, &stat.comm, &process.comm, metas);
                }
                match self.comms.insert(tid, stat.comm.clone()) {
                    Some(old) if old != stat.comm => out.push(Record {
                        time: now,
                        event: Event::Rename {
                            tid,
                            comm: stat.comm.clone(),
                        },
                    }),
                    _ => {}
                }
                let now_state = Last {
                    state: stat.state,
                    cpu: stat.cpu,
                    run,
                    wait,
                };
                if self.threads.insert(tid, now_state) != Some(now_state) {
                    self.samples += 1;
                    out.push(Record {
                        time: now,
                        event: Event::ProcSample {
                            tid,
                            cpu: Cpu(stat.cpu),
                            state: stat.state,
                            run_ns: run,
                            wait_ns: wait,
                        },
                    });
                }
            }
        }
        let gone: Vec<Tid> = self
            .threads
            .keys()
            .filter(|t| !present.contains(t))
            .copied()
            .collect();
        for tid in gone {
            self.threads.remove(&tid);
            self.comms.remove(&tid);
            out.push(Record {
                time: now,
                event: Event::TaskExit { tid },
            });
        }
    }

    /// Adds the children of every followed process.
    fn discover_children(&mut self) {
        let mut found = Vec::new();
        let mut have_children_files = true;
        for pid in &self.procs {
            let Ok(tasks) = std::fs::read_dir(self.proc.join(pid.0.to_string()).join("task"))
            else {
                continue;
            };
            for task in tasks.flatten() {
                match std::fs::read_to_string(task.path().join("children")) {
                    Ok(text) => found.extend(parse_children(&text)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound && task.path().exists() => {
                        have_children_files = false;
                    }
                    Err(_) => {}
                }
            }
        }
        if !have_children_files {
            found.extend(self.scan_for_children());
        }
        self.procs.extend(found);
    }

    /// Every process whose parent is followed (a full scan of /proc).
    fn scan_for_children(&self) -> Vec<Pid> {
        let Ok(entries) = std::fs::read_dir(&self.proc) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
            .filter(|&pid| {
                read(&self.proc.join(format!("{pid}/stat")))
                    .and_then(|s| parse_stat(&s))
                    .is_some_and(|s| self.procs.contains(&Pid(s.ppid)))
            })
            .map(Pid)
            .collect()
    }
}

/// One thread of a process as `/proc` shows it at one moment.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Task {
    /// The thread.
    pub tid: Tid,
    /// Its `stat` fields (name, state, CPU).
    pub stat: Stat,
    /// Cumulative ns on a CPU (`schedstat`).
    pub run_ns: u64,
    /// Cumulative ns runnable, waiting for a CPU (`schedstat`).
    pub wait_ns: u64,
}

impl Task {
    /// The thread's state as a trace event: a sample taken at some moment.
    pub fn sample(&self) -> Event {
        Event::ProcSample {
            tid: self.tid,
            cpu: Cpu(self.stat.cpu),
            state: self.stat.state,
            run_ns: self.run_ns,
            wait_ns: self.wait_ns,
        }
    }
}

/// Process `pid`'s own `stat` and every one of its threads now (a thread that ends
/// while we look is left out). `None` when the process is gone.
pub fn tasks_of(pid: Pid) -> Option<(Stat, Vec<Task>)> {
    let dir = Path::new("/proc").join(pid.0.to_string());
    let process = read(&dir.join("stat")).and_then(|s| parse_stat(&s))?;
    let mut tasks = Vec::new();
    for entry in std::fs::read_dir(dir.join("task")).ok()?.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let path = entry.path();
        if let (Some(stat), Some((run_ns, wait_ns))) = (
            read(&path.join("stat")).and_then(|s| parse_stat(&s)),
            read(&path.join("schedstat")).and_then(|s| parse_schedstat(&s)),
        ) {
            tasks.push(Task {
                tid: Tid(tid),
                stat,
                run_ns,
                wait_ns,
            });
        }
    }
    tasks.sort_by_key(|t| t.tid);
    Some((process, tasks))
}

/// The start time of process `pid` (field 22 of `stat`, clock ticks after boot): with
/// the pid, it names the process. `None` when it is gone or a zombie.
pub fn start_time(pid: Pid) -> Option<u64> {
    let text = read(&Path::new("/proc").join(pid.0.to_string()).join("stat"))?;
    let rest = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    fields.get(19)?.parse().ok()
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines_with_awkward_names() {
        let line = "4242 (my (odd) name) S 4000 4242 4000 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 2 0 \
                    100 2000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                comm: "my (odd) name".into(),
                state: b'S',
                ppid: 4000,
                cpu: 1
            })
        );
        assert_eq!(parse_stat("4242 (x) R"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn parses_a_real_stat_of_this_process() {
        let text = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let s = parse_stat(&text).unwrap();
        assert_eq!(s.state, b'R');
        assert!(u32::from(s.cpu) < 4096);
    }

    #[test]
    fn lists_the_threads_of_a_live_process_and_its_start_time() {
        let me = Pid(std::process::id());
        let worker =
            std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(300)));
        let (process, tasks) = tasks_of(me).unwrap();
        assert_eq!(process.ppid, std::os::unix::process::parent_id());
        assert!(tasks.len() >= 2, "{tasks:?}");
        assert!(tasks.iter().any(|t| t.tid.0 == me.0));
        let own = tasks.iter().find(|t| t.tid.0 == me.0).unwrap();
        assert!(own.run_ns > 0);
        assert!(matches!(own.sample(), Event::ProcSample { tid, .. } if tid.0 == me.0));
        worker.join().unwrap();
        let start = start_time(me).unwrap();
        assert!(start > 0);
        assert_eq!(start_time(me), Some(start));
        assert_eq!(start_time(Pid(u32::MAX)), None);
        assert!(tasks_of(Pid(u32::MAX)).is_none());
    }

    #[test]
    fn parses_schedstat_and_children() {
        assert_eq!(parse_schedstat("123456 7890 12\n"), Some((123456, 7890)));
        assert_eq!(parse_schedstat("x"), None);
        assert_eq!(parse_children("12 13 \n"), [Pid(12), Pid(13)]);
        assert!(parse_children("").is_empty());
    }
}
