//! The process of a task, for records that name only the task.
//!
//! An ftrace record names the running task by its tid (`common_pid`), where a perf
//! sample also gives its process. Only one event needs the process: `task_newtask` of a
//! thread, which joins the process of the task that created it. Tasks created during the
//! recording are learnt from their own `task_newtask`; for others, `/proc/<tid>/status`
//! says (the creator is alive: it is the task running, a few milliseconds earlier).

use rustc_hash::FxHashMap;

/// tid → process id.
#[derive(Default)]
pub struct Tgids {
    known: FxHashMap<u32, u32>,
}

impl Tgids {
    /// The process of `tid` (its own tid if it cannot be found: a thread whose creator
    /// already ended and was not seen created).
    pub fn of(&mut self, tid: u32) -> u32 {
        if let Some(&pid) = self.known.get(&tid) {
            return pid;
        }
        let pid = proc_tgid(tid).unwrap_or(tid);
        self.known.insert(tid, pid);
        pid
    }

    /// Task `tid` was created in process `pid`.
    pub fn learn(&mut self, tid: u32, pid: u32) {
        self.known.insert(tid, pid);
    }

    /// Task `tid` ended (its tid may be reused).
    pub fn forget(&mut self, tid: u32) {
        self.known.remove(&tid);
    }
}

/// `Tgid:` of `/proc/<tid>/status`.
fn proc_tgid(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    parse_tgid(&status)
}

fn parse_tgid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learnt_tasks_and_proc_lookups() {
        let mut t = Tgids::default();
        t.learn(501, 500);
        assert_eq!(t.of(501), 500);
        t.forget(501);
        // A thread of this test process, looked up in /proc.
        let me = std::process::id();
        let main_tid = crate::sys::gettid();
        assert_eq!(t.of(main_tid), me);
        // No task has this tid (PID_MAX_LIMIT is 2^22): no status, the fallback is the
        // tid itself. (A thread just joined is no such tid: its /proc entry can outlive
        // the join by a moment, which failed this test once in a CI run.)
        let none = (1 << 22) + 1;
        assert_eq!(t.of(none), none);
        assert_eq!(parse_tgid("Name:\tx\nTgid:\t42\nPid:\t43\n"), Some(42));
    }
}
