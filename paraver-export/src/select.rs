//! Which threads an export shows: a thread filter (by tid or by name glob) and whether
//! JVM-internal threads are in.
//!
//! **JVM-internal** (what `--no-jvm-internal` leaves out) is, in a process the trace
//! says runs Java (`Meta::Process` with runtime Java): every thread without a Java name
//! (`Meta::JavaThread`), i.e. the VM's native threads (`VM Thread`, `GC Thread#0`,
//! `C2 CompilerThread0`, the launcher's primordial thread, ...), plus the JDK's own
//! daemon Java threads, recognised by name ([`JDK_SYSTEM_THREADS`]: `Reference Handler`,
//! `Finalizer`, `Signal Dispatcher`, ...). The agent does not report thread groups, so
//! the names are the rule; an application daemon thread with another name stays in.
//! Threads of native processes are never JVM-internal.

use sonda_trace::{Runtime, ThreadInfo, TraceMeta};

/// Names of the daemon threads the JDK itself starts (JDK 17), as prefixes.
pub const JDK_SYSTEM_THREADS: [&str; 10] = [
    "Reference Handler",
    "Finalizer",
    "Signal Dispatcher",
    "Common-Cleaner",
    "Notification Thread",
    "Attach Listener",
    "Service Thread",
    "Monitor Deflation Thread",
    "Sweeper thread",
    "process reaper",
];

/// One thread pattern: a tid (all digits) or a glob on the thread's name (`*` any run
/// of characters, `?` one character), matched against the Java name and the kernel
/// name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThreadPattern {
    /// A kernel thread id.
    Tid(u32),
    /// A name glob.
    Name(String),
}

impl ThreadPattern {
    /// Parses a pattern: digits are a tid, anything else a name glob.
    pub fn parse(text: &str) -> ThreadPattern {
        match text.parse::<u32>() {
            Ok(tid) if text.bytes().all(|b| b.is_ascii_digit()) => ThreadPattern::Tid(tid),
            _ => ThreadPattern::Name(text.to_string()),
        }
    }

    /// Whether `t` matches.
    pub fn matches(&self, t: &ThreadInfo) -> bool {
        match self {
            ThreadPattern::Tid(tid) => t.tid.0 == *tid,
            ThreadPattern::Name(glob) => {
                t.java_name.as_deref().is_some_and(|n| glob_match(glob, n))
                    || glob_match(glob, &t.comm)
            }
        }
    }
}

impl std::fmt::Display for ThreadPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThreadPattern::Tid(t) => write!(f, "{t}"),
            ThreadPattern::Name(n) => f.write_str(n),
        }
    }
}

/// Whether `t` is a JVM-internal thread of the trace (see the module documentation).
pub fn is_jvm_internal(meta: &TraceMeta, t: &ThreadInfo) -> bool {
    let java_process = meta
        .processes
        .get(&t.pid)
        .is_some_and(|p| p.runtime == Runtime::Java);
    if !java_process {
        return false;
    }
    match &t.java_name {
        None => true,
        Some(name) => t.daemon && JDK_SYSTEM_THREADS.iter().any(|s| name.starts_with(s)),
    }
}

/// Whether thread `t` is selected by `patterns` (none: every thread) and the
/// JVM-internal rule.
pub fn selected(
    meta: &TraceMeta,
    t: &ThreadInfo,
    patterns: &[ThreadPattern],
    jvm_internal: bool,
) -> bool {
    (patterns.is_empty() || patterns.iter().any(|p| p.matches(t)))
        && (jvm_internal || !is_jvm_internal(meta, t))
}

/// Glob match with `*` and `?`, on characters; iterative with one backtrack point.
fn glob_match(glob: &str, text: &str) -> bool {
    let p: Vec<char> = glob.chars().collect();
    let s: Vec<char> = text.chars().collect();
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < s.len() {
        if i < p.len() && (p[i] == '?' || p[i] == s[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{Meta, Pid, Tid};

    #[test]
    fn globs() {
        assert!(glob_match("worker-*", "worker-12"));
        assert!(glob_match("*", ""));
        assert!(glob_match("w?rker", "worker"));
        assert!(glob_match("*-1*", "http-nio-1-exec"));
        assert!(!glob_match("worker-*", "main"));
        assert!(!glob_match("a*b", "a-c"));
        assert!(glob_match("GC Thread#*", "GC Thread#0"));
    }

    #[test]
    fn patterns_and_the_jvm_internal_rule() {
        let mut meta = TraceMeta::default();
        meta.add(Meta::Process {
            pid: Pid(1),
            ppid: Pid(0),
            name: "java".into(),
            runtime: Runtime::Java,
        });
        meta.add(Meta::Process {
            pid: Pid(9),
            ppid: Pid(1),
            name: "dd".into(),
            runtime: Runtime::Native,
        });
        meta.add(Meta::Thread {
            pid: Pid(1),
            tid: Tid(2),
            comm: "VM Thread".into(),
        });
        meta.add(Meta::JavaThread {
            pid: Pid(1),
            tid: Tid(3),
            name: "main".into(),
            daemon: false,
        });
        meta.add(Meta::JavaThread {
            pid: Pid(1),
            tid: Tid(4),
            name: "Reference Handler".into(),
            daemon: true,
        });
        meta.add(Meta::JavaThread {
            pid: Pid(1),
            tid: Tid(5),
            name: "pool-1-thread-1".into(),
            daemon: true,
        });
        meta.add(Meta::Thread {
            pid: Pid(9),
            tid: Tid(9),
            comm: "dd".into(),
        });
        let internal: Vec<u32> = meta
            .threads
            .values()
            .filter(|t| is_jvm_internal(&meta, t))
            .map(|t| t.tid.0)
            .collect();
        assert_eq!(internal, vec![2, 4]);
        let pick = |pats: &[&str], jvm| -> Vec<u32> {
            let pats: Vec<_> = pats.iter().map(|p| ThreadPattern::parse(p)).collect();
            meta.threads
                .values()
                .filter(|t| selected(&meta, t, &pats, jvm))
                .map(|t| t.tid.0)
                .collect()
        };
        assert_eq!(pick(&[], true), vec![2, 3, 4, 5, 9]);
        assert_eq!(pick(&[], false), vec![3, 5, 9]);
        assert_eq!(pick(&["9", "main"], true), vec![3, 9]);
        assert_eq!(pick(&["*Thread*"], true), vec![2]);
        assert_eq!(pick(&["*Thread*"], false), Vec::<u32>::new());
        assert_eq!(ThreadPattern::parse("12"), ThreadPattern::Tid(12));
        assert_eq!(ThreadPattern::parse("1a"), ThreadPattern::Name("1a".into()));
    }
}
