//! Recording only the traced tasks' scheduler events, filtered in the kernel.
//!
//! Without a filter the private ftrace instance records every switch and wakeup of
//! every task on the machine, and the recorder decodes them all to keep the few that
//! concern the followed tree. On a loaded server that is most of the collector's CPU:
//! Tomcat under `wrk` on the same two CPUs made 11 M kernel records in 23 s (5.7 per
//! request), and the load generator's own switches were decoded only to be dropped.
//!
//! ftrace can filter by task: `set_event_pid` lists the tids whose events an instance
//! keeps, and with `options/event-fork` every task those tasks create joins the list
//! (and leaves it when it is freed), so the list follows the process tree by itself.
//! The kernel keeps:
//! - `sched_switch` when the task leaving *or* the task arriving is listed;
//! - `sched_waking`, `sched_wakeup`, `sched_wakeup_new` when the running task (the
//!   waker) *or* the task woken is listed;
//! - every other event when the running task is listed.
//!
//! That is what [`crate::follow`] keeps, but for two kinds of record whose running task
//! may be anyone: a `sched_migrate_task` done by an unlisted task (a wakeup by another
//! program that picks another CPU, the load balancer run from an unlisted task's
//! context) and a `sched_stat_runtime` charged from another CPU (a wakeup enqueueing a
//! task there charges the task running there). Those two come from a second instance
//! that is never filtered (`super::ftrace_source`).
//!
//! `set_event_notrace_pid` (kernels since 5.8) lists tasks never to record, and
//! event-fork applies to it too: the collector puts its own threads there after it
//! forked the command, so that its own work is not recorded either.
//!
//! The recovery of unreported switches (`super::cpu_queue`) sees fewer tasks: a switch
//! between two unlisted tasks is not recorded, so the next recorded event on that CPU
//! may reveal a "hole" between two tasks that are not followed; the follower drops it
//! like any switch between tasks it does not follow.
//!
//! The BPF source (`super::bpf_source`) keeps the same tasks with a map its programs
//! look up, filled the same way (given tasks, their creations, excluded tasks and
//! theirs), and needs no second stream: its programs look up the task a migration or
//! charge is about, whatever task's context the kernel writes it from.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::bpf_source::BpfTasks;

/// Pids per write: a write is parsed by the kernel in one piece.
const PIDS_PER_WRITE: usize = 256;

/// The filter of the kernel source; cloned to whoever adds tasks to it.
#[derive(Clone)]
pub struct TaskFilter {
    target: Target,
    listed: Listed,
}

/// Where the filter is kept.
#[derive(Clone)]
enum Target {
    /// An ftrace instance's directory.
    Ftrace(PathBuf),
    /// The BPF programs' map of tasks.
    Bpf(Arc<BpfTasks>),
}

impl TaskFilter {
    pub(super) fn new(dir: PathBuf) -> TaskFilter {
        TaskFilter {
            target: Target::Ftrace(dir),
            listed: Listed::default(),
        }
    }

    pub(super) fn bpf(tasks: Arc<BpfTasks>) -> TaskFilter {
        TaskFilter {
            target: Target::Bpf(tasks),
            listed: Listed::default(),
        }
    }

    /// Records the events of `tids` and, from now on, of every task they create.
    /// The first call turns the filter on: before it the instance records every task.
    pub fn follow(&self, tids: &[u32]) -> std::io::Result<()> {
        match &self.target {
            Target::Ftrace(dir) => {
                write_option(dir, "options/event-fork", "1")?;
                append(dir, "set_event_pid", tids)?;
            }
            Target::Bpf(tasks) => tasks.follow(tids)?,
        }
        self.listed.add(tids);
        Ok(())
    }

    /// The tasks given to [`TaskFilter::follow`], shared with the reader
    /// ([`super::foreign`]).
    pub(super) fn listed(&self) -> Listed {
        self.listed.clone()
    }

    /// Never records `tids` nor what they create from now on (their events already
    /// read are unaffected). Fails on kernels without `set_event_notrace_pid`.
    pub fn exclude(&self, tids: &[u32]) -> std::io::Result<()> {
        match &self.target {
            Target::Ftrace(dir) => append(dir, "set_event_notrace_pid", tids),
            Target::Bpf(tasks) => tasks.exclude(tids),
        }
    }
}

/// The tids given to a filter, with a generation that changes at each addition: the
/// reader takes them in when it changed (an atomic load per read, no lock).
#[derive(Clone, Default)]
pub(super) struct Listed(Arc<(AtomicU32, Mutex<Vec<u32>>)>);

impl Listed {
    pub fn add(&self, tids: &[u32]) {
        let (generation, list) = &*self.0;
        let mut list = list.lock().unwrap_or_else(|e| e.into_inner());
        list.extend_from_slice(tids);
        generation.fetch_add(1, Ordering::Release);
    }

    /// The current generation and, if it is not `seen`, every tid given so far.
    pub fn since(&self, seen: u32) -> (u32, Vec<u32>) {
        let (generation, list) = &*self.0;
        let now = generation.load(Ordering::Acquire);
        if now == seen {
            return (now, Vec::new());
        }
        let list = list.lock().unwrap_or_else(|e| e.into_inner());
        (generation.load(Ordering::Acquire), list.clone())
    }
}

fn write_option(dir: &std::path::Path, rel: &str, value: &str) -> std::io::Result<()> {
    let path = dir.join(rel);
    std::fs::write(&path, value).map_err(|e| annotate(&path, e))
}

/// Adds `tids` to the list in `rel`: opened without `O_TRUNC`, a write adds to it.
fn append(dir: &std::path::Path, rel: &str, tids: &[u32]) -> std::io::Result<()> {
    let path = dir.join(rel);
    let mut file = OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| annotate(&path, e))?;
    for chunk in tids.chunks(PIDS_PER_WRITE) {
        let text: Vec<String> = chunk.iter().map(u32::to_string).collect();
        file.write_all(text.join(" ").as_bytes())
            .map_err(|e| annotate(&path, e))?;
    }
    Ok(())
}

fn annotate(path: &std::path::Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}
