//! A private ftrace instance: a ring buffer of sonda's own under
//! `<tracefs>/instances/sonda-<pid>-<start>-<random>`, with its own clock, size and events, that no
//! other tool sees or changes (and that changes nothing for them: the top-level
//! instance and other instances are never touched).
//!
//! Why ftrace and not perf for the tracepoints: on some kernels perf does not deliver
//! tracepoint samples while the idle task runs, which hides every wakeup done from an
//! interrupt on an idle CPU (a timer expiring, a disk completing), while the same
//! tracepoint reaches ftrace buffers. See [`super`] for how both are used.
//!
//! Lifecycle: [`Instance::create`] removes the instances of collectors that died
//! without cleaning up, makes a new one with tracing off, sets `trace_clock` to `mono`
//! (CLOCK_MONOTONIC, the clock of perf records and of `System.nanoTime`), the buffer
//! size, overwrite mode, and enables the events; [`Instance::start`] turns tracing on;
//! dropping the instance turns it off, closes the pipes and removes the directory.
//!
//! A collector killed (SIGKILL) leaves its instance tracing, a buffer of many MiB per
//! CPU, until someone removes it. The instance's name carries its owner's pid and
//! start time, and the owner holds a lock on the instance's directory for its life
//! (see [`crate::owner`]): any later sonda command removes the instances of owners that
//! are gone ([`remove_stale`]), at once.
//!
//! Reading: `per_cpu/cpuN/trace_pipe_raw`, opened non-blocking, returns one whole page
//! (sub-buffer) per read, consuming it, or `EAGAIN` when nothing is left. Pages are
//! decoded by [`super::ftrace_page`].

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::tracefs::Tracefs;
use crate::owner::Owner;

/// Instance names start with this, then `<collector pid>-<start>-<random>`.
const PREFIX: &str = "sonda-";

/// Where tracefs may be mounted, for [`remove_stale`] (which never mounts it).
const TRACEFS_PLACES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Why the instance could not be made.
#[derive(Debug)]
pub enum InstanceError {
    /// Not allowed to create or configure it (tracefs not writable).
    Permission(String),
    /// Anything else (no instances on this kernel, no `mono` clock, out of memory).
    Other(String),
}

impl std::fmt::Display for InstanceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstanceError::Permission(s) | InstanceError::Other(s) => f.write_str(s),
        }
    }
}

fn error(path: &Path, what: &str, e: io::Error) -> InstanceError {
    let text = format!("cannot {what} {}: {e}", path.display());
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => {
            InstanceError::Permission(text)
        }
        _ => InstanceError::Other(text),
    }
}

/// Loss counters of one CPU's buffer (`per_cpu/cpuN/stats`), totals since creation.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct CpuLoss {
    /// Events overwritten before they were read (overwrite mode, buffer full).
    pub overrun: u64,
    /// Events lost because nested writes filled the buffer during a commit.
    pub commit_overrun: u64,
    /// Events dropped (buffer full without overwrite, or an event too large).
    pub dropped: u64,
}

impl CpuLoss {
    /// Parses the text of a `stats` file; `None` if a counter is missing.
    pub fn parse(text: &str) -> Option<CpuLoss> {
        let value = |key: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().parse::<u64>().ok())?
            })
        };
        Some(CpuLoss {
            overrun: value("overrun")?,
            commit_overrun: value("commit overrun")?,
            dropped: value("dropped events")?,
        })
    }
}

/// One CPU's pipe.
struct CpuPipe {
    cpu: u16,
    pipe: File,
}

/// A private instance, removed when dropped.
pub struct Instance {
    dir: PathBuf,
    pipes: Vec<CpuPipe>,
    page_size: usize,
    /// Bytes of one CPU's buffer, as asked for.
    buffer_bytes: usize,
    /// The instance's directory, open with the owner's lock held on it.
    _lock: Option<File>,
}

impl Instance {
    /// Creates an instance for this process with a `buffer_bytes` ring per CPU (rounded
    /// up to KiB), recording `events` (`(subsystem, name)`) on the CPUs `cpus` once
    /// [`Instance::start`] is called. `page_size` is what one read returns unless the
    /// instance says otherwise (`buffer_subbuf_size_kb`).
    pub fn create(
        tracefs: &Tracefs,
        events: &[(&str, &str)],
        buffer_bytes: usize,
        cpus: &[u16],
        page_size: usize,
    ) -> Result<Instance, InstanceError> {
        let instances = tracefs.root().join("instances");
        remove_stale_in(&instances);
        let mut tries = 0;
        let dir = loop {
            let dir = instances.join(Owner::fresh_name(PREFIX, ""));
            match fs::create_dir(&dir) {
                Ok(()) => break dir,
                // A random name taken: chance alone.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
                Err(e) => return Err(error(&dir, "create the tracefs instance", e)),
            }
        };
        // From here on, dropping `instance` removes the directory.
        let mut instance = Instance {
            dir,
            pipes: Vec::new(),
            page_size,
            buffer_bytes,
            _lock: None,
        };
        let lock = open_dir(&instance.dir)
            .and_then(|d| sonda_shm::lock::hold(&d).map(|()| d))
            .map_err(|e| error(&instance.dir, "lock", e))?;
        instance._lock = Some(lock);
        instance.configure(events, buffer_bytes, cpus)?;
        Ok(instance)
    }

    fn write(&self, rel: &str, value: &str) -> Result<(), InstanceError> {
        let path = self.dir.join(rel);
        fs::write(&path, value).map_err(|e| error(&path, &format!("write {value:?} to"), e))
    }

    fn configure(
        &mut self,
        events: &[(&str, &str)],
        buffer_bytes: usize,
        cpus: &[u16],
    ) -> Result<(), InstanceError> {
        // A new instance records at once; nothing until the command starts.
        self.write("tracing_on", "0")?;
        self.write("trace_clock", "mono")?;
        // Overwrite mode (the default, set in case it is not): a full buffer loses its
        // oldest events, and the first page read after the loss says so.
        self.write("options/overwrite", "1")?;
        self.write("buffer_size_kb", &buffer_bytes.div_ceil(1024).to_string())?;
        for (sys, name) in events {
            self.write(&format!("events/{sys}/{name}/enable"), "1")?;
        }
        if let Ok(kb) = fs::read_to_string(self.dir.join("buffer_subbuf_size_kb")) {
            if let Ok(kb) = kb.trim().parse::<usize>() {
                self.page_size = kb * 1024;
            }
        }
        for &cpu in cpus {
            let path = self.dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let pipe = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .map_err(|e| error(&path, "open", e))?;
            self.pipes.push(CpuPipe { cpu, pipe });
        }
        Ok(())
    }

    /// The instance's task filter (off until tids are given to it).
    pub fn task_filter(&self) -> super::task_filter::TaskFilter {
        super::task_filter::TaskFilter::new(self.dir.clone())
    }

    /// Bytes of one page, what one read of a CPU's pipe returns.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Bytes of one CPU's buffer.
    pub fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    /// The CPUs read, in the order [`Instance::read_page`] takes their index.
    pub fn cpus(&self) -> impl Iterator<Item = u16> + '_ {
        self.pipes.iter().map(|p| p.cpu)
    }

    /// Starts recording.
    pub fn start(&self) -> io::Result<()> {
        fs::write(self.dir.join("tracing_on"), "1")
    }

    /// Stops recording; what is in the buffers can still be read.
    pub fn stop(&self) -> io::Result<()> {
        fs::write(self.dir.join("tracing_on"), "0")
    }

    /// Reads the next page of the `index`th CPU into `page` (`page_size` bytes).
    /// Returns false when the CPU has nothing more now.
    pub fn read_page(&mut self, index: usize, page: &mut [u8]) -> io::Result<bool> {
        let Some(p) = self.pipes.get_mut(index) else {
            return Ok(false);
        };
        let mut filled = 0;
        while filled < page.len() {
            match p.pipe.read(&mut page[filled..]) {
                // A page is handed out whole; a short read is finished by the next.
                Ok(0) if filled == 0 => return Ok(false),
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && filled == 0 => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        page[filled..].fill(0);
        Ok(true)
    }

    /// The loss counters of `cpu`.
    pub fn loss(&self, cpu: u16) -> io::Result<CpuLoss> {
        let path = self.dir.join(format!("per_cpu/cpu{cpu}/stats"));
        let text = fs::read_to_string(&path)?;
        CpuLoss::parse(&text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} lacks a loss counter", path.display()),
            )
        })
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.stop();
        // An instance with open files cannot be removed (the lock's directory is no
        // such file).
        self.pipes.clear();
        let _ = fs::remove_dir(&self.dir);
    }
}

fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Whether the instance at `path` (named `name`) is a collector's that is gone: no
/// process with its owner's pid and start time, and nobody holds its lock.
fn is_stale(path: &Path, name: &str) -> bool {
    match Owner::of_name(name, PREFIX, "") {
        Some(owner) => {
            !owner.is_alive() && open_dir(path).is_ok_and(|d| !sonda_shm::lock::is_held(&d))
        }
        None => {
            let comm = |pid: u32| fs::read_to_string(format!("/proc/{pid}/comm")).ok();
            is_stale_legacy(name, comm)
        }
    }
}

/// Whether `name` is an instance of an earlier collector (before owner start times and
/// locks) that is gone: `sonda-<pid>-<n>` where no process `pid` runs, or it is not a
/// sonda any more (the pid was reused).
fn is_stale_legacy(name: &str, proc_comm: impl Fn(u32) -> Option<String>) -> bool {
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return false;
    };
    let Some((pid, n)) = rest.split_once('-') else {
        return false;
    };
    let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u32>()) else {
        return false;
    };
    if pid == std::process::id() {
        return false;
    }
    match proc_comm(pid) {
        None => true,
        Some(comm) => !comm.trim_end().starts_with("sonda"),
    }
}

/// Removes the instances of dead collectors in `instances` (an instance is a kernel
/// buffer of many MiB per CPU, kept until someone removes it). Returns how many.
fn remove_stale_in(instances: &Path) -> usize {
    let Ok(entries) = fs::read_dir(instances) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if name.starts_with(PREFIX) && is_stale(&entry.path(), name) {
            // Off first: should a reader still hold one of its files open (so that it
            // cannot be removed), at least it no longer traces.
            if let Ok(mut on) = OpenOptions::new()
                .write(true)
                .open(entry.path().join("tracing_on"))
            {
                let _ = io::Write::write_all(&mut on, b"0");
            }
            if fs::remove_dir(entry.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// Removes the ftrace instances of collectors that are gone, wherever tracefs is
/// mounted (it is never mounted for this; without root nothing can be removed, and
/// nothing is). Returns how many.
pub fn remove_stale() -> usize {
    TRACEFS_PLACES
        .iter()
        .map(|root| remove_stale_in(&Path::new(root).join("instances")))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On plain directories standing in for instances: dead owners' go, a live
    /// owner's (by pid and start time, or by its lock) stays.
    #[test]
    fn instances_of_owners_that_are_gone_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let gone = format!("sonda-{dead}-77-0123456789abcdef");
        let locked = format!("sonda-{dead}-77-fedcba9876543210");
        let ours = Owner::fresh_name(PREFIX, "");
        for n in [&gone, &locked, &ours, &"perf-1".to_string()] {
            fs::create_dir(dir.path().join(n)).unwrap();
        }
        let lock = open_dir(&dir.path().join(&locked)).unwrap();
        sonda_shm::lock::hold(&lock).unwrap();
        assert_eq!(remove_stale_in(dir.path()), 1);
        assert!(!dir.path().join(&gone).exists());
        for n in [&locked, &ours] {
            assert!(dir.path().join(n).exists(), "{n}");
        }
        drop(lock);
        assert_eq!(remove_stale_in(dir.path()), 1);
        assert!(dir.path().join(&ours).exists() && dir.path().join("perf-1").exists());
    }

    #[test]
    fn parses_a_real_stats_file() {
        let text = "entries: 194\noverrun: 468\ncommit overrun: 2\nbytes: 11152\n\
                    oldest event ts:  3801.721474\nnow ts:  3825.151028\n\
                    dropped events: 7\nread events: 0\n";
        assert_eq!(
            CpuLoss::parse(text),
            Some(CpuLoss {
                overrun: 468,
                commit_overrun: 2,
                dropped: 7
            })
        );
        assert_eq!(CpuLoss::parse("entries: 1\noverrun: 2\n"), None);
    }

    #[test]
    fn only_instances_of_gone_earlier_collectors_are_stale() {
        let procs = |pid: u32| match pid {
            10 => Some("sonda\n".to_string()),
            11 => Some("bash\n".to_string()),
            _ => None,
        };
        assert!(is_stale_legacy("sonda-99-0", procs)); // no such process
        assert!(is_stale_legacy("sonda-11-3", procs)); // pid reused by another program
        assert!(!is_stale_legacy("sonda-10-0", procs)); // a live collector
        let own = format!("sonda-{}-0", std::process::id());
        assert!(!is_stale_legacy(&own, |_| None));
        for other in [
            "x",
            "sonda",
            "sonda-",
            "sonda-1",
            "sonda-a-1",
            "perf-1-1",
            "sondax-1-1",
        ] {
            assert!(!is_stale_legacy(other, procs), "{other}");
        }
    }
}
