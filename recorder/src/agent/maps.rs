//! `/proc/<pid>/maps`: the executable file mappings of a native process, read when a
//! function address of it falls outside every mapping the trace knows (a library it
//! loaded with `dlopen` after the C API wrote its mappings at start-up, or a JNI library
//! of a JVM, whose agent writes none). Parsing is pure; [`read`] is the only I/O.

use sonda_trace::{Meta, Pid};

/// One line of a maps file that maps a file executable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecMapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: String,
}

impl ExecMapping {
    /// As trace metadata of process `pid`.
    pub fn meta(&self, pid: Pid) -> Meta {
        Meta::Mapping {
            pid,
            start: self.start,
            end: self.end,
            offset: self.offset,
            path: self.path.clone(),
        }
    }
}

/// The executable, file-backed mappings of a maps file's text (`[vdso]`, anonymous
/// and deleted files left out). Lines that do not parse are skipped.
pub fn parse(text: &str) -> Vec<ExecMapping> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<ExecMapping> {
    // address perms offset dev inode pathname (the path may hold spaces)
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next()?.trim_start();
    if perms.as_bytes().get(2) != Some(&b'x') || !path.starts_with('/') {
        return None;
    }
    if path.ends_with(" (deleted)") {
        return None;
    }
    Some(ExecMapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        path: path.to_string(),
    })
}

/// The executable file mappings of process `pid` now; empty when it is gone.
pub fn read(pid: Pid) -> Vec<ExecMapping> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map(|t| parse(&t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_executable_file_mappings_only() {
        let text = "\
55d0c8a00000-55d0c8a01000 r--p 00000000 fe:01 1234   /tmp/my prog
55d0c8a01000-55d0c8a02000 r-xp 00001000 fe:01 1234   /tmp/my prog
7f0000000000-7f0000021000 rw-p 00000000 00:00 0
7f1000000000-7f1000150000 r-xp 00026000 fe:01 99     /usr/lib/x86_64-linux-gnu/libc.so.6
7f2000000000-7f2000001000 r-xp 00000000 00:00 0      [vdso]
7f3000000000-7f3000001000 r-xp 00000000 fe:01 7      /tmp/gone.so (deleted)
garbage
";
        assert_eq!(
            parse(text),
            vec![
                ExecMapping {
                    start: 0x55d0c8a01000,
                    end: 0x55d0c8a02000,
                    offset: 0x1000,
                    path: "/tmp/my prog".into()
                },
                ExecMapping {
                    start: 0x7f1000000000,
                    end: 0x7f1000150000,
                    offset: 0x26000,
                    path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into()
                },
            ]
        );
    }

    #[test]
    fn our_own_code_is_mapped() {
        let here = parse as *const () as usize as u64;
        let own = read(Pid(std::process::id()));
        assert!(own.iter().any(|m| (m.start..m.end).contains(&here)));
        assert!(read(Pid(u32::MAX)).is_empty());
    }
}
