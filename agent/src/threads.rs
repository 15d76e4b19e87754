//! Naming Java threads: each needs its Java name and its kernel thread id (the tid the
//! scheduler events carry), written as `Meta::JavaThread`.
//!
//! A thread that starts while the agent runs is easy: JVMTI ThreadStart runs on the new
//! thread, so `gettid()` there is its tid. Threads alive when the agent starts (at
//! VMInit: main, Reference Handler, Finalizer, Signal Dispatcher, ...; at attach: all of
//! them) are the hard part, because JVMTI has no function that gives a thread's tid.
//! The agent asks the JVM itself: the `Thread.print` diagnostic command (what `jcmd
//! <pid> Thread.print` runs), invoked in-process through JNI, prints every thread as
//! `"<name>" #<java id> [daemon] ... nid=0x<tid> ...`. Each JVMTI-visible thread is
//! found there by its exact name *and* Java id (read from `Thread.tid`), so odd names
//! (quotes, duplicates) cannot confuse the match; threads JVMTI hides (compiler
//! threads) are named from the dump line itself. Only if the command is unavailable
//! does the agent fall back to matching kernel names (`comm`, the first 15 bytes of the
//! Java name), and then only where the match is unique.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use sonda_shm::records;
use sonda_trace::{Meta, Pid, Tid};

use crate::jvmti::{Jni, JniError, Jvmti, Local};
use crate::{buffers, clock, counters, meta, os};

thread_local! {
    /// The recording (generation) in which this OS thread was named by its own
    /// ThreadStart; 0: not named that way. Each recording names threads afresh.
    static NAMED_HERE: Cell<u32> = const { Cell::new(0) };
}

fn named_here() -> bool {
    let now = buffers::generation();
    NAMED_HERE
        .try_with(Cell::get)
        .is_ok_and(|g| g != 0 && g == now)
}

fn set_named_here() {
    let now = buffers::generation();
    let _ = NAMED_HERE.try_with(|n| n.set(now));
}

/// The set of tids already named, so that a thread seen both by ThreadStart and by the
/// enumeration of live threads is named once. A tid leaves the set at ThreadEnd (the
/// kernel may reuse it).
pub struct Threads {
    named: Mutex<BTreeSet<u32>>,
}

impl Default for Threads {
    fn default() -> Self {
        Self::new()
    }
}

impl Threads {
    /// No thread named yet.
    pub const fn new() -> Threads {
        Threads {
            named: Mutex::new(BTreeSet::new()),
        }
    }

    /// JVMTI ThreadStart, on the new thread. In the start phase (before VMInit) JVMTI
    /// cannot tell the thread's name yet; the thread is then named at VMInit.
    ///
    /// An OS thread that was already a named Java thread and attaches again (the
    /// launcher's main thread detaches and comes back as "DestroyJavaVM" to shut the JVM
    /// down; native code may attach and detach repeatedly) keeps its first name: one
    /// kernel thread, one name in the trace.
    pub fn started(&self, jvmti: Jvmti, jni: &Jni<'_>, thread: Local<'_>) {
        if buffers::is_muted() {
            return; // one of the agent's own threads
        }
        let time = clock::now();
        let tid = buffers::current_tid();
        buffers::record(time, records::THREAD_START, 0);
        if named_here() {
            return;
        }
        if let Ok(info) = jvmti.thread_info(jni, thread) {
            self.name(tid, info.name, info.daemon);
            set_named_here();
        }
    }

    /// JVMTI ThreadEnd, on the ending thread: its last record, then its slot goes back.
    pub fn ended(&self) {
        if buffers::is_muted() {
            return;
        }
        let time = clock::now();
        let tid = buffers::current_tid();
        buffers::record(time, records::THREAD_END, 0);
        buffers::retire_current();
        if let Ok(mut named) = self.named.lock() {
            named.remove(&tid);
        }
    }

    /// Writes `Meta::JavaThread` for `tid` unless already done.
    fn name(&self, tid: u32, name: String, daemon: bool) {
        let fresh = self.named.lock().map(|mut n| n.insert(tid)).unwrap_or(true);
        if fresh {
            counters::THREADS_NAMED.incr();
            meta::write(&Meta::JavaThread {
                pid: Pid(buffers::pid()),
                tid: Tid(tid),
                name,
                daemon,
            });
        }
    }

    /// Names every thread alive now (VMInit, or attach). `current` is the calling
    /// thread. ThreadStart must already be enabled, so that a thread starting meanwhile
    /// is named by its own event.
    pub fn name_live_threads(&self, jvmti: Jvmti, jni: &Jni<'_>, current: Option<Local<'_>>) {
        let threads = match jvmti.all_threads(jni) {
            Ok(t) => t,
            Err(e) => {
                meta::warning(format!("cannot list live Java threads to name them: {e}"));
                return;
            }
        };
        let thread_class = jni.find_class(c"java/lang/Thread").ok();
        // (java id, name, daemon) of threads whose tid is still to be found.
        let mut pending: Vec<(Option<i64>, String, bool)> = Vec::new();
        for t in threads {
            if let Ok(info) = jvmti.thread_info(jni, t) {
                if current.is_some_and(|c| jni.same_object(c, t)) {
                    self.name(buffers::current_tid(), info.name, info.daemon);
                    set_named_here();
                } else {
                    let java_id = thread_class.and_then(|c| jni.long_field(t, c, c"tid").ok());
                    pending.push((java_id, info.name, info.daemon));
                }
            }
            jni.delete_local(t);
        }
        let dump = match thread_dump(jni) {
            Ok(d) => Some(d),
            Err(e) => {
                meta::warning(format!("Thread.print diagnostic command unavailable ({e}): naming live threads by kernel name"));
                None
            }
        };
        let mut unnamed = Vec::new();
        if let Some(dump) = &dump {
            let entries = parse_dump(dump);
            let known_ids: BTreeSet<i64> = pending.iter().filter_map(|p| p.0).collect();
            for (java_id, name, daemon) in pending {
                match java_id.and_then(|id| find_nid(dump, &name, id)) {
                    Some(tid) => self.name(tid, name, daemon),
                    None => unnamed.push((name, daemon)),
                }
            }
            // Threads JVMTI does not show (compiler threads): named from the dump.
            // (A thread started after the listing is also here; `name` keeps whichever
            // of this and its own ThreadStart comes first.)
            for e in entries
                .into_iter()
                .filter(|e| !known_ids.contains(&e.java_id))
            {
                self.name(e.nid, e.name, e.daemon);
            }
        } else {
            unnamed = pending.into_iter().map(|(_, n, d)| (n, d)).collect();
        }
        if !unnamed.is_empty() {
            self.name_by_comm(unnamed);
        }
    }

    /// Last resort: a live thread whose Java name, cut to 15 bytes as the JVM does for
    /// the kernel name, equals exactly one unnamed task's `comm`.
    fn name_by_comm(&self, unnamed: Vec<(String, bool)>) {
        let named = self.named.lock().map(|n| n.clone()).unwrap_or_default();
        let mut by_comm: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for (tid, comm) in os::task_comms() {
            if !named.contains(&tid) {
                by_comm.entry(comm).or_default().push(tid);
            }
        }
        let mut wanted: BTreeMap<String, usize> = BTreeMap::new();
        for (name, _) in &unnamed {
            *wanted.entry(comm_of(name)).or_default() += 1;
        }
        let mut left = 0;
        for (name, daemon) in unnamed {
            let comm = comm_of(&name);
            match by_comm.get(&comm) {
                Some(tids) if tids.len() == 1 && wanted[&comm] == 1 => {
                    self.name(tids[0], name, daemon)
                }
                _ => left += 1,
            }
        }
        if left > 0 {
            counters::THREADS_UNNAMED.add(left);
            meta::warning(format!("{left} live Java thread(s) left unnamed: their kernel thread id could not be found"));
        }
    }
}

/// The kernel name HotSpot gives a Java thread: its name cut to 15 bytes.
fn comm_of(name: &str) -> String {
    let bytes = name.as_bytes();
    String::from_utf8_lossy(&bytes[..bytes.len().min(15)]).into_owned()
}

/// Runs the JVM's `Thread.print` diagnostic command in-process and returns its text.
///
/// `DiagnosticCommandImpl.executeDiagnosticCommand` is a private native of the
/// `jdk.management` module whose library (`libmanagement_ext`) is loaded by the static
/// initialiser of `PlatformMBeanProviderImpl`; JNI ignores access checks and module
/// encapsulation, so the agent can call it directly.
fn thread_dump(jni: &Jni<'_>) -> Result<String, JniError> {
    let provider = jni.find_class(c"com/sun/management/internal/PlatformMBeanProviderImpl")?;
    jni.initialise_via_static_method(
        provider,
        c"getDiagnosticMXBean",
        c"()Lcom/sun/management/HotSpotDiagnosticMXBean;",
    )?;
    let class = jni.find_class(c"com/sun/management/internal/DiagnosticCommandImpl")?;
    let bean = jni.call_static_object_noarg(
        class,
        c"getDiagnosticCommandMBean",
        c"()Lcom/sun/management/DiagnosticCommandMBean;",
    )?;
    if bean.is_null() {
        return Err(JniError::Failed(
            "getDiagnosticCommandMBean (remote diagnostic commands disabled)",
        ));
    }
    let text =
        jni.call_string_to_string(bean, class, c"executeDiagnosticCommand", "Thread.print")?;
    jni.delete_local(bean);
    jni.delete_local(class);
    jni.delete_local(provider);
    text.ok_or(JniError::Failed("Thread.print returned nothing"))
}

/// One thread line of a thread dump.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DumpThread {
    /// The name as printed (may be wrong for names containing `" #`).
    pub name: String,
    /// The Java thread id (`#N`).
    pub java_id: i64,
    /// Whether `daemon` is printed.
    pub daemon: bool,
    /// The kernel thread id (`nid`).
    pub nid: u32,
}

/// The kernel tid of the thread printed as `"<name>" #<java_id> ...` in `dump`.
pub fn find_nid(dump: &str, name: &str, java_id: i64) -> Option<u32> {
    let key = format!("\"{name}\" #{java_id} ");
    let at = dump.find(&key)? + key.len();
    let line = dump[at..].lines().next()?;
    parse_nid(line)
}

/// The value of `nid=` in a dump line: hex `0x..` (JDK 17) or decimal (newer JDKs).
fn parse_nid(line: &str) -> Option<u32> {
    let v = line.split(' ').find_map(|w| w.strip_prefix("nid="))?;
    match v.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Every Java thread line (those with a `#<java id>`) of a thread dump. VM-internal
/// threads (`"VM Thread" os_prio=...`) have no Java id and are skipped.
pub fn parse_dump(dump: &str) -> Vec<DumpThread> {
    dump.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix('"')?;
            // The name ends at the last `" #<digits> ` before the VM-printed fields.
            let prio = rest.find(" prio=")?;
            let head = &rest[..prio];
            let cut = head.rfind("\" #")?;
            let name = &head[..cut];
            let mut words = head[cut + 3..].split(' ');
            let java_id = words.next()?.parse().ok()?;
            let daemon = words.next() == Some("daemon");
            Some(DumpThread {
                name: name.to_string(),
                java_id,
                daemon,
                nid: parse_nid(&rest[prio..])?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as JDK 17.0.15 prints them (trimmed stack traces).
    const DUMP: &str = r#"2026-11-29 14:33:49
Full thread dump OpenJDK 64-Bit Server VM (17.0.15+6-Debian-1deb12u1 mixed mode, sharing):

"main" #1 prio=5 os_prio=0 cpu=46.42ms elapsed=0.12s tid=0x00007ff594018020 nid=0x3042 waiting on condition  [0x00007ff59bb1e000]
   java.lang.Thread.State: RUNNABLE

"Reference Handler" #2 daemon prio=10 os_prio=0 cpu=0.12ms elapsed=0.06s tid=0x00007ff5940f6c10 nid=0x3049 waiting on condition  [0x00007ff5985ee000]
   java.lang.Thread.State: RUNNABLE

"C2 CompilerThread0" #6 daemon prio=9 os_prio=0 cpu=3.10ms elapsed=0.05s tid=0x00007ff594103c80 nid=0x304d waiting on condition  [0x0000000000000000]
   No compile task

"odd "quoted" #9 name" #14 prio=5 os_prio=0 cpu=0.10ms elapsed=0.01s tid=0x00007ff59415d060 nid=0x3060 runnable  [0x0000000000000000]

"VM Thread" os_prio=0 cpu=1.08ms elapsed=0.07s tid=0x00007ff5940f2bd0 nid=0x3047 runnable
"#;

    #[test]
    fn finds_tid_by_exact_name_and_java_id() {
        assert_eq!(find_nid(DUMP, "main", 1), Some(0x3042));
        assert_eq!(find_nid(DUMP, "Reference Handler", 2), Some(0x3049));
        assert_eq!(find_nid(DUMP, "odd \"quoted\" #9 name", 14), Some(0x3060));
        assert_eq!(find_nid(DUMP, "main", 2), None);
        assert_eq!(find_nid(DUMP, "VM Thread", 0), None);
    }

    #[test]
    fn parses_java_threads_only() {
        let t = parse_dump(DUMP);
        let names: Vec<_> = t
            .iter()
            .map(|t| (t.name.as_str(), t.java_id, t.daemon, t.nid))
            .collect();
        assert_eq!(
            names,
            vec![
                ("main", 1, false, 0x3042),
                ("Reference Handler", 2, true, 0x3049),
                ("C2 CompilerThread0", 6, true, 0x304d),
                ("odd \"quoted\" #9 name", 14, false, 0x3060),
            ]
        );
    }

    #[test]
    fn decimal_nid_of_newer_jdks() {
        assert_eq!(
            parse_nid("prio=5 os_prio=0 tid=0x1 nid=12345 runnable"),
            Some(12345)
        );
    }

    #[test]
    fn comm_is_cut_to_15_bytes() {
        assert_eq!(comm_of("Reference Handler"), "Reference Handl");
        assert_eq!(comm_of("main"), "main");
    }
}
