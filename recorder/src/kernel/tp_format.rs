//! Parsing of tracefs `format` files, which describe the raw payload of a tracepoint
//! (`/sys/kernel/tracing/events/<sys>/<name>/format`). Field offsets change between
//! kernels (a field added, a type widened), so sonda reads them at run time instead of
//! hard-coding them. Pure functions over text and bytes: no I/O here.
//!
//! A format file looks like this (tabs at line starts):
//!
//! ```text
//! name: sched_switch
//! ID: 372
//! format:
//!     field:unsigned short common_type;   offset:0;   size:2; signed:0;
//!     ...
//!     field:char prev_comm[16];   offset:8;   size:16;    signed:0;
//!     field:__data_loc char[] filename;   offset:8;   size:4; signed:0;
//!
//! print fmt: "..."
//! ```

use std::fmt;

/// Where a field's bytes are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Placement {
    /// The field's bytes are at its offset (numbers and fixed `char[N]` arrays).
    Inline,
    /// `__data_loc`: a u32 at the offset holds the data's offset from the start of the
    /// payload (low 16 bits) and its length (high 16 bits).
    DataLoc,
    /// `__rel_loc`: like `DataLoc`, but the offset counts from the end of this field.
    RelLoc,
}

/// One field of a tracepoint payload.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Field {
    /// The field's name, without array brackets.
    pub name: String,
    /// Byte offset in the payload.
    pub offset: usize,
    /// Size in bytes (of the location word for `__data_loc` fields).
    pub size: usize,
    /// Whether a number field is signed.
    pub signed: bool,
    /// Where its bytes are.
    pub placement: Placement,
}

/// A parsed format file.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Format {
    /// The tracepoint's name (`sched_switch`).
    pub name: String,
    /// Its id: what `perf_event_attr.config` takes and what `common_type` holds.
    pub id: u64,
    /// Every field, common ones included, in file order.
    pub fields: Vec<Field>,
}

/// Why a format file does not parse.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FormatError {
    /// Line number (from 1), 0 for a problem with the whole file.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.what)
        } else {
            write!(f, "line {}: {}", self.line, self.what)
        }
    }
}

impl Format {
    /// Parses the text of a format file.
    pub fn parse(text: &str) -> Result<Format, FormatError> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let err = |what: String| FormatError {
                line: line_no,
                what,
            };
            let t = line.trim();
            if let Some(rest) = t.strip_prefix("name:") {
                name = Some(rest.trim().to_string());
            } else if let Some(rest) = t.strip_prefix("ID:") {
                id = Some(
                    rest.trim()
                        .parse::<u64>()
                        .map_err(|_| err(format!("bad ID {:?}", rest.trim())))?,
                );
            } else if t.starts_with("field:") {
                fields.push(parse_field(t).map_err(err)?);
            }
        }
        let name = name.ok_or_else(|| FormatError {
            line: 0,
            what: "no `name:` line".into(),
        })?;
        let id = id.ok_or_else(|| FormatError {
            line: 0,
            what: "no `ID:` line".into(),
        })?;
        if fields.is_empty() {
            return Err(FormatError {
                line: 0,
                what: "no fields".into(),
            });
        }
        Ok(Format { name, id, fields })
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Parses `field:char prev_comm[16]; offset:8; size:16; signed:0;`.
pub(crate) fn parse_field(line: &str) -> Result<Field, String> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once(':')
            .ok_or_else(|| format!("bad field part {part:?}"))?;
        let number = || {
            value
                .trim()
                .parse::<usize>()
                .map_err(|_| format!("bad {key} {value:?}"))
        };
        match key.trim() {
            "field" => decl = Some(value.trim()),
            "offset" => offset = Some(number()?),
            "size" => size = Some(number()?),
            "signed" => signed = number()? != 0,
            _ => {} // Unknown attributes of newer kernels are ignored.
        }
    }
    let decl = decl.ok_or("field without declaration")?;
    let placement = if decl.starts_with("__data_loc") {
        Placement::DataLoc
    } else if decl.starts_with("__rel_loc") {
        Placement::RelLoc
    } else {
        Placement::Inline
    };
    // The name is the last word of the declaration, without `[N]`.
    let last = decl
        .split_whitespace()
        .last()
        .ok_or("empty field declaration")?;
    let name = last
        .split('[')
        .next()
        .unwrap_or(last)
        .trim_start_matches('*');
    if name.is_empty() {
        return Err(format!("no name in field declaration {decl:?}"));
    }
    Ok(Field {
        name: name.to_string(),
        offset: offset.ok_or("field without offset")?,
        size: size.ok_or("field without size")?,
        signed,
        placement,
    })
}

impl Field {
    /// Reads an integer field (1, 2, 4 or 8 bytes, host byte order), sign-extending
    /// signed fields. `None` when the payload is too short or the size is odd.
    pub fn read_u64(&self, raw: &[u8]) -> Option<u64> {
        let b = raw.get(self.offset..self.offset.checked_add(self.size)?)?;
        Some(match (self.size, self.signed) {
            (1, false) => u64::from(b[0]),
            (1, true) => b[0] as i8 as i64 as u64,
            (2, false) => u64::from(u16::from_ne_bytes(b.try_into().ok()?)),
            (2, true) => i16::from_ne_bytes(b.try_into().ok()?) as i64 as u64,
            (4, false) => u64::from(u32::from_ne_bytes(b.try_into().ok()?)),
            (4, true) => i32::from_ne_bytes(b.try_into().ok()?) as i64 as u64,
            (8, _) => u64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }

    /// Reads a 32-bit id field (`pid_t`, `int`): the low 32 bits of [`Field::read_u64`].
    pub fn read_u32(&self, raw: &[u8]) -> Option<u32> {
        self.read_u64(raw).map(|v| v as u32)
    }

    /// Reads a string field: a fixed `char[N]` array up to its first NUL, or a
    /// `__data_loc`/`__rel_loc` string. Invalid UTF-8 is replaced, not refused: a thread
    /// may name itself with any bytes.
    pub fn read_str(&self, raw: &[u8]) -> Option<String> {
        let bytes = match self.placement {
            Placement::Inline => raw.get(self.offset..self.offset.checked_add(self.size)?)?,
            Placement::DataLoc | Placement::RelLoc => {
                let loc =
                    u32::from_ne_bytes(raw.get(self.offset..self.offset + 4)?.try_into().ok()?);
                let mut start = (loc & 0xffff) as usize;
                let len = (loc >> 16) as usize;
                if self.placement == Placement::RelLoc {
                    start += self.offset + self.size;
                }
                raw.get(start..start.checked_add(len)?)?
            }
        };
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = include_str!("../../testdata/sched_switch.format");
    const EXEC: &str = include_str!("../../testdata/sched_process_exec.format");
    const NEWTASK: &str = include_str!("../../testdata/task_newtask.format");

    #[test]
    fn parses_a_real_sched_switch_format() {
        let f = Format::parse(SWITCH).unwrap();
        assert_eq!(f.name, "sched_switch");
        assert_eq!(f.id, 372);
        let names: Vec<_> = f.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "common_type",
                "common_flags",
                "common_preempt_count",
                "common_pid",
                "prev_comm",
                "prev_pid",
                "prev_prio",
                "prev_state",
                "next_comm",
                "next_pid",
                "next_prio"
            ]
        );
        let prev_state = f.field("prev_state").unwrap();
        assert_eq!(
            (prev_state.offset, prev_state.size, prev_state.signed),
            (32, 8, true)
        );
        let next_comm = f.field("next_comm").unwrap();
        assert_eq!(
            (next_comm.offset, next_comm.size, next_comm.placement),
            (40, 16, Placement::Inline)
        );
        assert_eq!(f.field("next_pid").unwrap().offset, 56);
    }

    #[test]
    fn parses_data_loc_fields() {
        let f = Format::parse(EXEC).unwrap();
        let filename = f.field("filename").unwrap();
        assert_eq!(filename.placement, Placement::DataLoc);
        assert_eq!((filename.offset, filename.size), (8, 4));
        assert_eq!(f.field("old_pid").unwrap().offset, 16);
    }

    #[test]
    fn reads_fields_from_a_payload() {
        let f = Format::parse(NEWTASK).unwrap();
        let mut raw = vec![0u8; 48];
        raw[8..12].copy_from_slice(&4242i32.to_ne_bytes());
        raw[12..17].copy_from_slice(b"java\0");
        raw[32..40].copy_from_slice(&0x3d0f00u64.to_ne_bytes());
        raw[40..42].copy_from_slice(&(-17i16).to_ne_bytes());
        assert_eq!(f.field("pid").unwrap().read_u32(&raw), Some(4242));
        assert_eq!(
            f.field("comm").unwrap().read_str(&raw).as_deref(),
            Some("java")
        );
        assert_eq!(
            f.field("clone_flags").unwrap().read_u64(&raw),
            Some(0x3d0f00)
        );
        assert_eq!(
            f.field("oom_score_adj").unwrap().read_u64(&raw),
            Some(-17i64 as u64)
        );
        // A payload cut short reads as nothing rather than garbage.
        assert_eq!(f.field("clone_flags").unwrap().read_u64(&raw[..36]), None);
    }

    #[test]
    fn reads_data_loc_and_rel_loc_strings() {
        let data_loc = Field {
            name: "s".into(),
            offset: 8,
            size: 4,
            signed: false,
            placement: Placement::DataLoc,
        };
        let mut raw = vec![0u8; 12];
        raw.extend_from_slice(b"/bin/true\0");
        raw[8..12].copy_from_slice(&(12u32 | 10 << 16).to_ne_bytes());
        assert_eq!(data_loc.read_str(&raw).as_deref(), Some("/bin/true"));
        let rel_loc = Field {
            placement: Placement::RelLoc,
            ..data_loc.clone()
        };
        raw[8..12].copy_from_slice(&(10u32 << 16).to_ne_bytes());
        assert_eq!(rel_loc.read_str(&raw).as_deref(), Some("/bin/true"));
        // A location past the payload's end reads as nothing.
        raw[8..12].copy_from_slice(&(200u32 | 10 << 16).to_ne_bytes());
        assert_eq!(data_loc.read_str(&raw), None);
    }

    #[test]
    fn rejects_broken_files() {
        assert!(Format::parse("name: x\nformat:\n").is_err());
        let e = Format::parse(
            "name: x\nID: 1\nformat:\n\tfield:int a;\toffset:zz;\tsize:4;\tsigned:1;\n",
        )
        .unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.to_string().contains("offset"), "{e}");
    }
}
