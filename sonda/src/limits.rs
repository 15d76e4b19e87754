//! How far each option that scales sonda's work or memory may go, and the checks that
//! need the machine to tell. A value out of bounds is one clear line before any work
//! starts, never minutes of work or an allocation that aborts. The value parsers of
//! [`crate::cli`] hold the fixed bounds; what depends on the machine (memory) is
//! checked here, and what depends on the trace (the number of `--window`s) where the
//! trace is read (`sonda_model::analyze`).

use std::path::Path;

use anyhow::bail;

/// Smallest and largest kernel event buffer per CPU: a page, and 1 GiB (ftrace and
/// perf rings are unswappable kernel memory, one per CPU).
pub const KERNEL_BUFFER_RANGE: std::ops::RangeInclusive<u64> = 4096..=1 << 30;

/// Longest `--lag` (ms): every record is held in memory that long.
pub const MAX_LAG_MS: u64 = 10_000;

/// Longest `--attach-timeout` (s): a JVM that has not answered in 10 minutes will not.
pub const MAX_ATTACH_TIMEOUT_S: f64 = 600.0;

/// Largest `--reorder-limit` (records): about 32 bytes each, so 1 GiB.
pub const MAX_REORDER_LIMIT: usize = 1 << 25;

/// Most patterns of one option (`--methods`, `--threads`): each is matched against
/// every method or thread.
pub const MAX_PATTERNS: usize = 1000;

/// Longest pattern (bytes).
pub const MAX_PATTERN_LEN: usize = 1000;

/// Most traces one `sonda merge` reads at once: each holds an open file and a block (up
/// to 64 MiB) in memory while the merge runs.
pub const MAX_MERGE_INPUTS: usize = 256;

/// Refuses more than [`MAX_PATTERNS`] patterns, or one longer than
/// [`MAX_PATTERN_LEN`], given to `option`.
pub fn check_patterns(option: &str, patterns: &[String]) -> anyhow::Result<()> {
    if patterns.len() > MAX_PATTERNS {
        bail!(
            "{} {option} patterns: at most {MAX_PATTERNS}",
            patterns.len()
        );
    }
    if let Some(p) = patterns.iter().find(|p| p.len() > MAX_PATTERN_LEN) {
        bail!(
            "{option} pattern of {} bytes (starting {:?}): at most {MAX_PATTERN_LEN}",
            p.len(),
            p.chars().take(20).collect::<String>()
        );
    }
    Ok(())
}

/// Refuses a kernel buffer of `per_cpu` bytes on every online CPU that the machine's
/// available memory cannot hold (the kernel allocates it all at once, unswappable).
pub fn check_kernel_memory(per_cpu: usize) -> anyhow::Result<()> {
    let cpus = online_cpus().unwrap_or(1).max(1);
    let Some(available) = mem_available() else {
        return Ok(());
    };
    let needed = (per_cpu as u64).next_power_of_two().saturating_mul(cpus);
    if needed > available {
        bail!(
            "--buffer-size {} on {cpus} CPUs needs {} of kernel memory and {} is available: use a smaller --buffer-size",
            human(per_cpu as u64),
            human(needed),
            human(available)
        );
    }
    Ok(())
}

/// Online CPUs, from `/sys/devices/system/cpu/online` (`0-3,5`).
fn online_cpus() -> Option<u64> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    count_cpus(text.trim())
}

fn count_cpus(list: &str) -> Option<u64> {
    let mut n = 0;
    for part in list.split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => b.parse::<u64>().ok()? + 1 - a.parse::<u64>().ok()?,
            None => {
                part.parse::<u64>().ok()?;
                1
            }
        };
    }
    Some(n)
}

/// `MemAvailable` of `/proc/meminfo`, bytes.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string(Path::new("/proc/meminfo")).ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Bytes with a binary unit, for messages.
pub fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_count() {
        assert_eq!(count_cpus("0"), Some(1));
        assert_eq!(count_cpus("0-3"), Some(4));
        assert_eq!(count_cpus("0-1,4,6-7"), Some(5));
        assert_eq!(count_cpus("x"), None);
    }

    #[test]
    fn patterns_are_bounded_in_number_and_length() {
        assert!(check_patterns("--threads", &vec!["a".to_string(); 10]).is_ok());
        let many = vec!["a".to_string(); MAX_PATTERNS + 1];
        let err = check_patterns("--threads", &many).unwrap_err().to_string();
        assert!(
            err.contains("1001 --threads patterns: at most 1000"),
            "{err}"
        );
        let long = vec!["x".repeat(MAX_PATTERN_LEN + 1)];
        let err = check_patterns("--methods", &long).unwrap_err().to_string();
        assert!(err.contains("--methods pattern of 1001 bytes"), "{err}");
    }

    #[test]
    fn a_kernel_buffer_beyond_memory_is_refused() {
        let err = check_kernel_memory(1 << 60).unwrap_err().to_string();
        assert!(
            err.contains("kernel memory") && err.contains("is available"),
            "{err}"
        );
        assert!(check_kernel_memory(4096).is_ok());
    }
}
