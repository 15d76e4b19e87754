//! Following the recorded command's process tree, in time order.
//!
//! The command's process is the root. Every task that a followed task creates
//! (`task_newtask`: a thread or a child process) is followed from then on, so threads,
//! children and grandchildren (a JVM started by `catalina.sh`) are all in the trace.
//! Kernel events are kept when they concern a followed thread: a switch where `prev` or
//! `next` is followed, a wakeup or a migration of a followed thread (the waker may be
//! anyone), the creation, exec, rename and exit of a followed thread.
//!
//! Per-CPU rings are read out of order, so this runs on the merged, time-ordered stream:
//! a thread's creation is always seen before its first switch.
//!
//! Names: a followed process gets a [`Meta::Process`] when it is created and again when
//! it execs (its new name); a followed thread gets a [`Meta::Thread`] the first time it
//! is seen and again when renamed, so the trace's metadata holds its last name. Every
//! metadata record is handed out *before* the event that needed it.

use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

use sonda_trace::{Event, Meta, Pid, Record, Runtime, SwitchOut, Tid};

/// What the follower may ask the system about a task it did not see created (after
/// kernel records were lost, or for a thread reported only by an agent).
pub trait TaskLookup {
    /// The process a thread belongs to, if it still exists.
    fn tgid(&self, tid: Tid) -> Option<Pid>;
    /// A thread's current name.
    fn comm(&self, pid: Pid, tid: Tid) -> Option<String>;
}

/// Reads `/proc`.
pub struct ProcLookup;

impl TaskLookup for ProcLookup {
    fn tgid(&self, tid: Tid) -> Option<Pid> {
        let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("Tgid:"))?;
        line["Tgid:".len()..].trim().parse().ok().map(Pid)
    }

    fn comm(&self, pid: Pid, tid: Tid) -> Option<String> {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
        Some(comm.trim_end_matches('\n').to_string())
    }
}

#[derive(Clone, Debug)]
struct Thread {
    pid: Pid,
    /// Whether its [`Meta::Thread`] was handed out.
    announced: bool,
    /// It passed `sched_process_exit`: its next switch-out is its last.
    exiting: bool,
}

#[derive(Clone, Debug)]
struct Process {
    ppid: Pid,
    name: String,
}

/// The follower's state.
pub struct Follow<L: TaskLookup> {
    lookup: L,
    threads: FxHashMap<Tid, Thread>,
    processes: FxHashMap<Pid, Process>,
    /// Threads an agent reported (pid known from its slot), not necessarily seen created.
    agent_threads: FxHashMap<Tid, Pid>,
    /// Tids asked about after a loss and found not to be ours (asked once each).
    strangers: FxHashMap<Tid, ()>,
    /// Kernel records were lost: a thread's creation may be missing.
    lost: bool,
    /// The thread of the last agent event, known and announced (see `touch_agent`);
    /// forgotten whenever a thread is removed or replaced.
    last_agent: Option<Tid>,
}

impl<L: TaskLookup> Follow<L> {
    /// Follows process `root` (its main thread has tid = pid), started by `parent`
    /// under `name`. Returns the metadata of the root process.
    pub fn new(lookup: L, root: Pid, parent: Pid, name: &str) -> (Follow<L>, Meta) {
        let mut f = Follow {
            lookup,
            threads: FxHashMap::default(),
            processes: FxHashMap::default(),
            agent_threads: FxHashMap::default(),
            strangers: FxHashMap::default(),
            lost: false,
            last_agent: None,
        };
        f.processes.insert(
            root,
            Process {
                ppid: parent,
                name: name.to_string(),
            },
        );
        f.threads.insert(
            Tid(root.0),
            Thread {
                pid: root,
                announced: false,
                exiting: false,
            },
        );
        let meta = Meta::Process {
            pid: root,
            ppid: parent,
            name: name.to_string(),
            runtime: Runtime::Native,
        };
        (f, meta)
    }

    /// Whether `tid` is followed now.
    pub fn is_followed(&self, tid: Tid) -> bool {
        self.threads.contains_key(&tid)
    }

    /// Notes that an agent owns a ring for `tid` of `pid` (learned when draining, which
    /// runs ahead of the time-ordered stream).
    pub fn note_agent_thread(&mut self, pid: Pid, tid: Tid) {
        self.agent_threads.insert(tid, pid);
    }

    /// Adopts a thread found by other means (the /proc sampler), announcing it and, if
    /// new, its process.
    pub fn adopt(
        &mut self,
        pid: Pid,
        ppid: Pid,
        tid: Tid,
        comm: &str,
        process_name: &str,
        metas: &mut Vec<Meta>,
    ) {
        if let Entry::Vacant(e) = self.processes.entry(pid) {
            e.insert(Process {
                ppid,
                name: process_name.to_string(),
            });
            metas.push(Meta::Process {
                pid,
                ppid,
                name: process_name.to_string(),
                runtime: Runtime::Native,
            });
        }
        let t = self.threads.entry(tid).or_insert(Thread {
            pid,
            announced: false,
            exiting: false,
        });
        if !t.announced {
            t.announced = true;
            metas.push(Meta::Thread {
                pid,
                tid,
                comm: comm.to_string(),
            });
        }
    }

    /// Notes that process `pid` now runs `name` (an exec seen by other means).
    pub fn rename_process(&mut self, pid: Pid, name: &str, metas: &mut Vec<Meta>) {
        if let Some(p) = self.processes.get_mut(&pid) {
            p.name = name.to_string();
            metas.push(Meta::Process {
                pid,
                ppid: p.ppid,
                name: name.to_string(),
                runtime: Runtime::Native,
            });
        }
    }

    /// Decides whether `r` goes into the trace, updating the followed set; metadata the
    /// trace needs before `r` is appended to `metas`. A switch kept for the thread it
    /// switches to loses the charge it carries of a thread not followed (that charge,
    /// a record of its own, would not be kept).
    pub fn process(&mut self, r: &mut Record, metas: &mut Vec<Meta>) -> bool {
        match &mut r.event {
            Event::NewTask {
                parent,
                child,
                pid,
                comm,
            } => self.new_task(*parent, *child, *pid, comm, metas),
            Event::Switch {
                prev,
                next,
                prev_state,
                charge,
                ..
            } => {
                let keep_prev = self.touch(*prev, metas);
                let keep_next = self.touch(*next, metas);
                if !keep_prev {
                    *charge = None;
                }
                let dead = SwitchOut::from_prev_state(*prev_state) == SwitchOut::Dead;
                if keep_prev && dead && self.threads.get(prev).is_some_and(|t| t.exiting) {
                    // The last switch-out of an exited thread: its tid may be reused.
                    self.threads.remove(prev);
                    self.last_agent = None;
                }
                keep_prev || keep_next
            }
            Event::Waking { wakee, .. } | Event::Wakeup { wakee, .. } => self.touch(*wakee, metas),
            Event::Migrate { tid, .. } | Event::CpuTime { tid, .. } => self.touch(*tid, metas),
            Event::TaskExit { tid } => {
                let keep = self.touch(*tid, metas);
                if let Some(t) = self.threads.get_mut(tid) {
                    t.exiting = true;
                }
                keep
            }
            Event::Exec { pid, tid, filename } => {
                if !self.touch(*tid, metas) {
                    return false;
                }
                let name = filename.rsplit('/').next().unwrap_or(filename).to_string();
                let ppid = self.processes.get(pid).map(|p| p.ppid).unwrap_or_default();
                self.processes.insert(
                    *pid,
                    Process {
                        ppid,
                        name: name.clone(),
                    },
                );
                metas.push(Meta::Process {
                    pid: *pid,
                    ppid,
                    name,
                    runtime: Runtime::Native,
                });
                true
            }
            Event::Rename { tid, comm } => {
                if !self.touch(*tid, metas) {
                    return false;
                }
                let pid = self.threads[tid].pid;
                metas.push(Meta::Thread {
                    pid,
                    tid: *tid,
                    comm: comm.clone(),
                });
                true
            }
            Event::ProcSample { tid, .. } => self.touch(*tid, metas),
            Event::KernelLost { .. } => {
                self.lost = true;
                true
            }
            // Agent events: every agent in the trace was started by the recording; make
            // sure their threads are named.
            Event::VmInit { .. } | Event::VmDeath { .. } => true,
            other => {
                if let Some(tid) = other.tid() {
                    self.touch_agent(tid, metas);
                }
                true
            }
        }
    }

    fn new_task(
        &mut self,
        parent: Tid,
        child: Tid,
        pid: Pid,
        comm: &str,
        metas: &mut Vec<Meta>,
    ) -> bool {
        let parent_followed = self.touch(parent, metas);
        let ours = parent_followed
            || self.threads.contains_key(&child)
            || self.processes.contains_key(&pid);
        if !ours {
            // A reused tid that belonged to a thread of ours is someone else's now.
            self.threads.remove(&child);
            self.last_agent = None;
            return false;
        }
        if pid.0 == child.0 && !self.processes.contains_key(&pid) {
            let ppid = self.threads.get(&parent).map(|t| t.pid).unwrap_or_default();
            self.processes.insert(
                pid,
                Process {
                    ppid,
                    name: comm.to_string(),
                },
            );
            metas.push(Meta::Process {
                pid,
                ppid,
                name: comm.to_string(),
                runtime: Runtime::Native,
            });
        }
        self.last_agent = None;
        self.threads.insert(
            child,
            Thread {
                pid,
                announced: true,
                exiting: false,
            },
        );
        metas.push(Meta::Thread {
            pid,
            tid: child,
            comm: comm.to_string(),
        });
        true
    }

    /// Whether `tid` is followed, announcing it first if it was not yet. After a loss of
    /// kernel records, a thread never seen created is looked up once in /proc.
    fn touch(&mut self, tid: Tid, metas: &mut Vec<Meta>) -> bool {
        if tid.0 == 0 {
            return false; // the idle task
        }
        if !self.threads.contains_key(&tid) {
            if !self.lost || self.strangers.contains_key(&tid) {
                return false;
            }
            match self.lookup.tgid(tid) {
                Some(pid) if self.processes.contains_key(&pid) => {
                    self.threads.insert(
                        tid,
                        Thread {
                            pid,
                            announced: false,
                            exiting: false,
                        },
                    );
                }
                _ => {
                    self.strangers.insert(tid, ());
                    return false;
                }
            }
        }
        self.announce(tid, metas);
        true
    }

    /// Makes sure a thread named by an agent event has its metadata. A busy thread
    /// sends millions of events a second, one after the other: the thread of the
    /// previous one is remembered, announced, and costs no lookup.
    fn touch_agent(&mut self, tid: Tid, metas: &mut Vec<Meta>) {
        if self.last_agent == Some(tid) {
            return;
        }
        if !self.threads.contains_key(&tid) {
            let Some(&pid) = self.agent_threads.get(&tid) else {
                return;
            };
            self.threads.insert(
                tid,
                Thread {
                    pid,
                    announced: false,
                    exiting: false,
                },
            );
            if !self.processes.contains_key(&pid) {
                let name = self.lookup.comm(pid, Tid(pid.0)).unwrap_or_default();
                self.processes.insert(
                    pid,
                    Process {
                        ppid: Pid(0),
                        name: name.clone(),
                    },
                );
                metas.push(Meta::Process {
                    pid,
                    ppid: Pid(0),
                    name,
                    runtime: Runtime::Native,
                });
            }
        }
        self.announce(tid, metas);
        if self.threads.get(&tid).is_some_and(|t| t.announced) {
            self.last_agent = Some(tid);
        }
    }

    fn announce(&mut self, tid: Tid, metas: &mut Vec<Meta>) {
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        if t.announced {
            return;
        }
        t.announced = true;
        let pid = t.pid;
        let comm = self
            .lookup
            .comm(pid, tid)
            .or_else(|| self.processes.get(&pid).map(|p| p.name.clone()));
        metas.push(Meta::Thread {
            pid,
            tid,
            comm: comm.unwrap_or_default(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{ChargedBy, SwitchCharge};
    use sonda_trace::{Cpu, Time};
    use std::collections::HashMap;

    /// A fake /proc: tid → (tgid, comm).
    #[derive(Default)]
    struct Fake(HashMap<u32, (u32, &'static str)>);

    impl TaskLookup for Fake {
        fn tgid(&self, tid: Tid) -> Option<Pid> {
            self.0.get(&tid.0).map(|&(p, _)| Pid(p))
        }
        fn comm(&self, _pid: Pid, tid: Tid) -> Option<String> {
            self.0.get(&tid.0).map(|&(_, c)| c.to_string())
        }
    }

    fn r(event: Event) -> Record {
        Record {
            time: Time(1),
            event,
        }
    }

    fn switch(prev: u32, next: u32) -> Record {
        r(Event::Switch {
            cpu: Cpu(0),
            prev: Tid(prev),
            prev_state: 1,
            next: Tid(next),
            charge: None,
        })
    }

    fn new_task(parent: u32, child: u32, pid: u32, comm: &str) -> Record {
        r(Event::NewTask {
            parent: Tid(parent),
            child: Tid(child),
            pid: Pid(pid),
            comm: comm.into(),
        })
    }

    fn follow(fake: Fake) -> Follow<Fake> {
        let (f, meta) = Follow::new(fake, Pid(100), Pid(1), "sh");
        assert_eq!(
            meta,
            Meta::Process {
                pid: Pid(100),
                ppid: Pid(1),
                name: "sh".into(),
                runtime: Runtime::Native
            }
        );
        f
    }

    #[test]
    fn follows_threads_children_and_grandchildren() {
        let mut f = follow(Fake::default());
        let mut metas = Vec::new();
        // The collector (tid 50) forks the root.
        assert!(f.process(&mut new_task(50, 100, 100, "sonda"), &mut metas));
        assert_eq!(
            metas,
            [Meta::Thread {
                pid: Pid(100),
                tid: Tid(100),
                comm: "sonda".into()
            }]
        );
        metas.clear();
        // The root forks a child process, which creates a thread, which forks again.
        assert!(f.process(&mut new_task(100, 101, 101, "sh"), &mut metas));
        assert!(f.process(&mut new_task(101, 102, 101, "sh"), &mut metas));
        assert!(f.process(&mut new_task(102, 103, 103, "sh"), &mut metas));
        assert_eq!(
            metas,
            [
                Meta::Process {
                    pid: Pid(101),
                    ppid: Pid(100),
                    name: "sh".into(),
                    runtime: Runtime::Native
                },
                Meta::Thread {
                    pid: Pid(101),
                    tid: Tid(101),
                    comm: "sh".into()
                },
                Meta::Thread {
                    pid: Pid(101),
                    tid: Tid(102),
                    comm: "sh".into()
                },
                Meta::Process {
                    pid: Pid(103),
                    ppid: Pid(101),
                    name: "sh".into(),
                    runtime: Runtime::Native
                },
                Meta::Thread {
                    pid: Pid(103),
                    tid: Tid(103),
                    comm: "sh".into()
                },
            ]
        );
        metas.clear();
        // Someone else's tasks are not followed.
        assert!(!f.process(&mut new_task(7, 8, 8, "cron"), &mut metas));
        assert!(!f.process(&mut switch(8, 0), &mut metas));
        // A switch with one followed side is kept; wakeups of followed threads only.
        assert!(f.process(&mut switch(8, 103), &mut metas));
        // It carries the switch-out's charge of a followed thread only (that of another,
        // a record of its own, would be left out).
        let carrying = |prev, next| {
            let mut s = switch(prev, next);
            if let Event::Switch { charge, .. } = &mut s.event {
                *charge = Some(SwitchCharge {
                    ns: 900,
                    before_ns: 2,
                });
            }
            s
        };
        let mut s = carrying(8, 103);
        assert!(f.process(&mut s, &mut metas));
        assert!(matches!(s.event, Event::Switch { charge: None, .. }));
        let mut s = carrying(103, 8);
        assert!(f.process(&mut s, &mut metas));
        assert!(matches!(
            s.event,
            Event::Switch {
                charge: Some(_),
                ..
            }
        ));
        assert!(f.process(
            &mut r(Event::Wakeup {
                target: Cpu(1),
                wakee: Tid(102),
                new_task: false,
                waking: None,
            }),
            &mut metas
        ));
        assert!(!f.process(
            &mut r(Event::Waking {
                cpu: Cpu(1),
                waker: Tid(102),
                wakee: Tid(8)
            }),
            &mut metas
        ));
        // Migrations of followed threads only.
        let migrate = |tid| {
            r(Event::Migrate {
                tid: Tid(tid),
                from: Cpu(0),
                to: Cpu(1),
            })
        };
        assert!(f.process(&mut migrate(102), &mut metas));
        assert!(!f.process(&mut migrate(8), &mut metas));
        // CPU-time charges of followed threads only, and they name no new thread.
        let charge = |tid| {
            r(Event::CpuTime {
                tid: Tid(tid),
                ns: 4_000_000,
                by: ChargedBy::Itself,
            })
        };
        assert!(f.process(&mut charge(102), &mut metas));
        assert!(!f.process(&mut charge(8), &mut metas));
        assert!(metas.is_empty());
    }

    #[test]
    fn exec_and_rename_refresh_names() {
        let mut f = follow(Fake::default());
        let mut metas = Vec::new();
        f.process(&mut new_task(50, 100, 100, "sonda"), &mut metas);
        metas.clear();
        assert!(f.process(
            &mut r(Event::Exec {
                pid: Pid(100),
                tid: Tid(100),
                filename: "/usr/bin/java".into()
            }),
            &mut metas
        ));
        assert!(f.process(
            &mut r(Event::Rename {
                tid: Tid(100),
                comm: "java".into()
            }),
            &mut metas
        ));
        assert_eq!(
            metas,
            [
                Meta::Process {
                    pid: Pid(100),
                    ppid: Pid(1),
                    name: "java".into(),
                    runtime: Runtime::Native
                },
                Meta::Thread {
                    pid: Pid(100),
                    tid: Tid(100),
                    comm: "java".into()
                },
            ]
        );
        assert!(!f.process(
            &mut r(Event::Rename {
                tid: Tid(9),
                comm: "x".into()
            }),
            &mut metas
        ));
    }

    #[test]
    fn an_exited_tid_reused_by_a_stranger_is_dropped() {
        let mut f = follow(Fake::default());
        let mut metas = Vec::new();
        f.process(&mut new_task(100, 101, 100, "w"), &mut metas);
        assert!(f.process(&mut r(Event::TaskExit { tid: Tid(101) }), &mut metas));
        let mut last = r(Event::Switch {
            cpu: Cpu(0),
            prev: Tid(101),
            prev_state: 0x10,
            next: Tid(0),
            charge: None,
        });
        assert!(f.process(&mut last, &mut metas));
        assert!(!f.is_followed(Tid(101)));
        assert!(!f.process(&mut new_task(7, 101, 101, "cron"), &mut metas));
        assert!(!f.process(&mut switch(101, 0), &mut metas));
    }

    #[test]
    fn an_exiting_thread_stays_followed_until_its_last_switch() {
        let mut f = follow(Fake::default());
        let mut metas = Vec::new();
        f.process(&mut new_task(100, 101, 100, "w"), &mut metas);
        f.process(&mut r(Event::TaskExit { tid: Tid(101) }), &mut metas);
        // Preempted, or asleep while closing its files: it will run again.
        for state in [0x100, 0x1, 0x2] {
            let mut out = r(Event::Switch {
                cpu: Cpu(0),
                prev: Tid(101),
                prev_state: state,
                next: Tid(0),
                charge: None,
            });
            assert!(f.process(&mut out, &mut metas));
            assert!(f.is_followed(Tid(101)), "state {state:#x}");
        }
        let mut dead = r(Event::Switch {
            cpu: Cpu(0),
            prev: Tid(101),
            prev_state: 0x20,
            next: Tid(0),
            charge: None,
        });
        assert!(f.process(&mut dead, &mut metas));
        assert!(!f.is_followed(Tid(101)));
    }

    #[test]
    fn after_a_loss_unknown_threads_are_looked_up_once() {
        let mut fake = Fake::default();
        fake.0.insert(105, (100, "worker"));
        fake.0.insert(200, (200, "other"));
        let mut f = follow(fake);
        let mut metas = Vec::new();
        f.process(&mut new_task(50, 100, 100, "sonda"), &mut metas);
        metas.clear();
        // Before a loss, an unknown thread is not ours even if /proc says so.
        assert!(!f.process(&mut switch(105, 0), &mut metas));
        assert!(f.process(
            &mut r(Event::KernelLost {
                cpu: Cpu(0),
                count: 3
            }),
            &mut metas
        ));
        assert!(f.process(&mut switch(105, 0), &mut metas));
        assert_eq!(
            metas,
            [Meta::Thread {
                pid: Pid(100),
                tid: Tid(105),
                comm: "worker".into()
            }]
        );
        assert!(!f.process(&mut switch(200, 0), &mut metas));
        assert!(!f.process(&mut switch(200, 0), &mut metas));
    }

    #[test]
    fn agent_threads_get_metadata_before_their_events() {
        let mut fake = Fake::default();
        fake.0.insert(300, (300, "java"));
        fake.0.insert(301, (300, "main"));
        let mut f = follow(fake);
        let mut metas = Vec::new();
        f.note_agent_thread(Pid(300), Tid(301));
        assert!(f.process(
            &mut r(Event::Enter {
                tid: Tid(301),
                method: 1
            }),
            &mut metas
        ));
        assert_eq!(
            metas,
            [
                Meta::Process {
                    pid: Pid(300),
                    ppid: Pid(0),
                    name: "java".into(),
                    runtime: Runtime::Native
                },
                Meta::Thread {
                    pid: Pid(300),
                    tid: Tid(301),
                    comm: "main".into()
                },
            ]
        );
        metas.clear();
        assert!(f.process(
            &mut r(Event::Leave {
                tid: Tid(301),
                method: 1,
                exception: false
            }),
            &mut metas
        ));
        assert!(metas.is_empty());
    }
}
