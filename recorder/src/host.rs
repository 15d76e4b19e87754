//! Facts about the machine a trace is recorded on.

/// Parses a kernel CPU list (`0-3,5,7-8`), as in `/sys/devices/system/cpu/online`.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u16>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u16, u16) = (a.parse().ok()?, b.parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// The CPUs online now (every CPU the kernel may schedule on).
pub fn online_cpus() -> Vec<u16> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| parse_cpu_list(&t))
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1);
            (0..n as u16).collect()
        })
}

/// The host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Memory available to this process, in bytes: the machine's (`MemAvailable`), or
/// less when our control group (v2 `memory.max`, v1 `memory.limit_in_bytes`, ours or
/// an ancestor's) leaves less room. `None` when the machine does not say.
pub fn available_memory() -> Option<u64> {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_meminfo_available(&t));
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|t| cgroup_headroom(&t, std::path::Path::new("/sys/fs/cgroup")));
    match (machine, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn parse_meminfo_available(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The least room (limit minus usage) of the memory control groups `/proc/self/cgroup`
/// names, from ours up to the root, under the cgroup mount `fs`.
fn cgroup_headroom(self_cgroup: &str, fs: &std::path::Path) -> Option<u64> {
    let read = |p: std::path::PathBuf| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
    };
    let mut least: Option<u64> = None;
    for line in self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (base, limit_file, usage_file) = if controllers.is_empty() {
            (fs.to_path_buf(), "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                fs.join("memory"),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        } else {
            continue;
        };
        let mut dir = Some(std::path::Path::new(path.trim_start_matches('/')));
        while let Some(d) = dir {
            let at = base.join(d);
            // "max" (v2) or a huge number (v1) when unlimited: no bound.
            if let (Some(limit), Some(usage)) =
                (read(at.join(limit_file)), read(at.join(usage_file)))
            {
                if limit < 1 << 60 {
                    let room = limit.saturating_sub(usage);
                    least = Some(least.map_or(room, |l| l.min(room)));
                }
            }
            dir = d.parent();
        }
    }
    least
}

/// CPU time this process used so far (user + system), in ns.
pub fn own_cpu_ns() -> u64 {
    crate::sys::own_cpu_ns()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0-2,4,6-7"), Some(vec![0, 1, 2, 4, 6, 7]));
        assert_eq!(parse_cpu_list("3"), Some(vec![3]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("2-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    #[test]
    fn memory_available_is_the_least_of_the_machine_and_our_groups() {
        let meminfo =
            "MemTotal:       24684000 kB\nMemFree:         1000 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(parse_meminfo_available(meminfo), Some(2 << 20));
        assert!(available_memory().is_some_and(|m| m > 0));
        let fs = tempfile::tempdir().unwrap();
        let group = |rel: &str, limit: &str, usage: u64, v2: bool| {
            let dir = fs.path().join(rel);
            std::fs::create_dir_all(&dir).unwrap();
            let (l, u) = if v2 {
                ("memory.max", "memory.current")
            } else {
                ("memory.limit_in_bytes", "memory.usage_in_bytes")
            };
            std::fs::write(dir.join(l), limit).unwrap();
            std::fs::write(dir.join(u), usage.to_string()).unwrap();
        };
        // v2: our group unlimited, its parent 1 GiB with 900 MiB used.
        group("app", "1073741824\n", 900 << 20, true);
        group("app/job", "max\n", 10, true);
        assert_eq!(cgroup_headroom("0::/app/job\n", fs.path()), Some(124 << 20));
        // v1: the memory line only; an unlimited group bounds nothing.
        group("memory/x", "9223372036854771712", 5, false);
        assert_eq!(cgroup_headroom("4:memory:/x\n1:cpu:/\n", fs.path()), None);
        group("memory/y", "1000", 400, false);
        assert_eq!(
            cgroup_headroom("4:cpuacct,memory:/y\n", fs.path()),
            Some(600)
        );
    }
}
