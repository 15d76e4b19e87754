//! Paraver's object model for a sonda trace: one application per process, each with
//! one task holding the process's threads; one node with the machine's CPUs.
//!
//! Threads are ordered by (pid, tid): that order is both their Paraver row and their
//! [`ThreadIx`] in the timeline, so a timeline output maps to its row by index.

use std::collections::BTreeMap;
use std::io::{self, Write};

use sonda_timeline::names::{one_line, thread_name};
use sonda_timeline::{ThreadIx, Timeline};
use sonda_trace::{Pid, ThreadInfo, Tid, TraceMeta};

/// A thread's place in Paraver's model: application, task and thread, all 1-based.
/// With a CPU this is the `cpu:appl:task:thread` tuple that begins every record.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Place {
    /// Application (one per process), from 1.
    pub appl: u32,
    /// Task within the application (always 1: a process is one task).
    pub task: u32,
    /// Thread within the task, from 1.
    pub thread: u32,
}

/// One application: a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Application {
    /// Its pid.
    pub pid: Pid,
    /// Its label: `name (pid N)`.
    pub label: String,
    /// Number of threads.
    pub threads: u32,
}

/// The whole model.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Applications in pid order.
    pub applications: Vec<Application>,
    /// Every thread's tid and place, in row order.
    pub threads: Vec<(Tid, Place)>,
    /// Number of CPUs (at least 1).
    pub cpus: u16,
    /// The node's name (the host).
    pub host: String,
}

impl Layout {
    /// The model of the threads and processes `meta` names.
    pub fn new(meta: &TraceMeta) -> Layout {
        Layout::of(meta, |_| true)
    }

    /// The model of the threads of `meta` that `keep` selects (a process without one
    /// has no application).
    pub fn of(meta: &TraceMeta, keep: impl Fn(&ThreadInfo) -> bool) -> Layout {
        let mut by_pid: BTreeMap<Pid, Vec<Tid>> = BTreeMap::new();
        for t in meta.threads.values().filter(|t| keep(t)) {
            by_pid.entry(t.pid).or_default().push(t.tid);
        }
        let mut applications = Vec::new();
        let mut threads = Vec::new();
        for (appl, (pid, tids)) in by_pid.into_iter().enumerate() {
            let name = meta
                .processes
                .get(&pid)
                .map(|p| one_line(&p.name))
                .filter(|n| !n.is_empty());
            let label = format!("{} (pid {pid})", name.as_deref().unwrap_or("process"));
            applications.push(Application {
                pid,
                label,
                threads: tids.len() as u32,
            });
            for (i, tid) in tids.into_iter().enumerate() {
                threads.push((
                    tid,
                    Place {
                        appl: appl as u32 + 1,
                        task: 1,
                        thread: i as u32 + 1,
                    },
                ));
            }
        }
        let info = meta.info.as_ref();
        Layout {
            applications,
            threads,
            cpus: info.map_or(1, |i| i.cpus.max(1)),
            host: info
                .map(|i| one_line(&i.host))
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "node".into()),
        }
    }

    /// Writes the `.row` file: CPU, node, application, task and thread names. Thread
    /// names are the Java name, else the kernel's (after renames), then the tid.
    pub fn write_row(
        &self,
        meta: &TraceMeta,
        timeline: &Timeline,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        writeln!(out, "LEVEL CPU SIZE {}", self.cpus)?;
        for cpu in 0..self.cpus {
            writeln!(out, "CPU {cpu}")?;
        }
        writeln!(out, "\nLEVEL NODE SIZE 1\n{}", self.host)?;
        for level in ["APPL", "TASK"] {
            writeln!(out, "\nLEVEL {level} SIZE {}", self.applications.len())?;
            for a in &self.applications {
                writeln!(out, "{}", a.label)?;
            }
        }
        writeln!(out, "\nLEVEL THREAD SIZE {}", self.threads.len())?;
        for label in self.thread_labels(meta, timeline) {
            writeln!(out, "{label}")?;
        }
        Ok(())
    }

    /// Every thread's label, in row order: the Java name, else the kernel's (after
    /// renames), then the tid.
    pub fn thread_labels(&self, meta: &TraceMeta, timeline: &Timeline) -> Vec<String> {
        self.threads
            .iter()
            .enumerate()
            .map(|(i, (tid, _))| {
                let renamed = timeline.renamed(ThreadIx(i as u32));
                let name = meta
                    .threads
                    .get(tid)
                    .map(|t| one_line(thread_name(t, renamed)))
                    .unwrap_or_default();
                format!("{name} ({tid})")
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{Meta, Runtime, Source, Time};

    #[test]
    fn one_application_per_process_threads_by_tid() {
        let mut meta = TraceMeta::default();
        meta.add(Meta::Process {
            pid: Pid(20),
            ppid: Pid(1),
            name: "java".into(),
            runtime: Runtime::Java,
        });
        for (pid, tid) in [(20, 22), (10, 11), (20, 21), (10, 10)] {
            meta.add(Meta::Thread {
                pid: Pid(pid),
                tid: Tid(tid),
                comm: format!("t{tid}"),
            });
        }
        let layout = Layout::new(&meta);
        assert_eq!(
            layout
                .applications
                .iter()
                .map(|a| (a.label.as_str(), a.threads))
                .collect::<Vec<_>>(),
            vec![("process (pid 10)", 2), ("java (pid 20)", 2)]
        );
        let places: Vec<_> = layout
            .threads
            .iter()
            .map(|(t, p)| (t.0, p.appl, p.thread))
            .collect();
        assert_eq!(places, vec![(10, 1, 1), (11, 1, 2), (21, 2, 1), (22, 2, 2)]);
        assert_eq!(layout.cpus, 1);

        let timeline = Timeline::new(
            Time(0),
            Source::Tracepoints,
            layout.threads.iter().map(|t| t.0),
        );
        let mut row = Vec::new();
        layout.write_row(&meta, &timeline, &mut row).unwrap();
        let row = String::from_utf8(row).unwrap();
        assert!(row.starts_with("LEVEL CPU SIZE 1\nCPU 0\n"), "{row}");
        assert!(
            row.ends_with("LEVEL THREAD SIZE 4\nt10 (10)\nt11 (11)\nt21 (21)\nt22 (22)\n"),
            "{row}"
        );
    }
}
