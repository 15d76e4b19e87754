//! Decoding of ftrace ring-buffer pages from byte slices (no I/O, no `unsafe`).
//!
//! `per_cpu/cpuN/trace_pipe_raw` hands out the ring buffer one page (sub-buffer) at a
//! time. Its layout is described by tracefs, which this module reads instead of
//! assuming (`events/header_page` and `events/header_event`):
//!
//! ```text
//! page:   u64 timestamp | local_t commit | data[commit & LENGTH] | (missed count)
//! commit: bit 31 = events were lost before this page, bit 30 = their count is stored
//!         as an unsigned long right after the data
//! event:  u32 header = type_len:5 | time_delta:27 (bit-field order of the host), then
//!   type_len 1..=28 (data max): a payload of type_len * 4 bytes
//!   type_len 0:                 u32 len, then a payload of len - 4 bytes
//!   padding (29):               time_delta 0: the rest of the page is unused;
//!                               otherwise a discarded event of 4 + u32 len bytes
//!   time_extend (30):           u32 high; the time moves on by high << 27 | time_delta
//!   time_stamp (31):            u32 high; the time is high << 27 | time_delta
//!                               (absolute, 59 bits: the top bits come from the page)
//! ```
//!
//! Times are the page's timestamp plus the deltas of the events before, on the clock
//! chosen with `trace_clock` (sonda picks `mono`, CLOCK_MONOTONIC). Like the kernel's
//! own reader, a discarded event does not move the time on. The payload of a data event
//! is a tracepoint record as its `format` file describes it, beginning with
//! `common_type`, the tracepoint id.

use std::fmt;

use super::bytes::{u32_at, u64_at};
use super::tp_format;

/// Commit flag: events were lost (overwritten or dropped) before this page.
const MISSED_EVENTS: u64 = 1 << 31;
/// Commit flag: the number lost is stored right after the data.
const MISSED_STORED: u64 = 1 << 30;
/// The data length part of the commit word.
const COMMIT_LENGTH: u64 = MISSED_STORED - 1;
/// Time deltas are 27 bits; longer ones go into a time-extend event.
const DELTA_BITS: u32 = 27;
/// An absolute time stamp keeps 59 bits; the top 5 come from the page's time stamp.
const ABS_TS_TOP: u64 = 0xf8 << 56;

/// The page and event header layout of this kernel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PageLayout {
    timestamp_offset: usize,
    commit_offset: usize,
    /// Size of `local_t` (and of the stored missed count, an `unsigned long`).
    commit_size: usize,
    data_offset: usize,
    /// Bytes of data a page holds (header_page's `data` field).
    pub data_size: usize,
    padding: u32,
    time_extend: u32,
    time_stamp: u32,
    data_max: u32,
}

/// A header file that does not describe a layout this module can read.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LayoutError(pub String);

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PageLayout {
    /// Reads the texts of `events/header_page` and `events/header_event`.
    pub fn parse(header_page: &str, header_event: &str) -> Result<PageLayout, LayoutError> {
        let mut fields = Vec::new();
        for line in header_page.lines().map(str::trim) {
            if line.starts_with("field:") {
                let f = tp_format::parse_field(line)
                    .map_err(|e| LayoutError(format!("header_page: {e}")))?;
                fields.push(f);
            }
        }
        let field = |name: &str| {
            fields
                .iter()
                .find(|f| f.name == name)
                .ok_or_else(|| LayoutError(format!("header_page has no field {name}")))
        };
        let timestamp = field("timestamp")?;
        let commit = field("commit")?;
        let data = field("data")?;
        if timestamp.size != 8 || !matches!(commit.size, 4 | 8) {
            return Err(LayoutError(format!(
                "header_page: unexpected sizes (timestamp {}, commit {})",
                timestamp.size, commit.size
            )));
        }
        let mut bits = (None, None);
        let mut kinds = [None; 4]; // padding, time_extend, time_stamp, data max
        for line in header_event.lines().map(str::trim) {
            let number = |s: &str| s.split_whitespace().next().and_then(|n| n.parse().ok());
            if let Some(rest) = line.strip_prefix("type_len") {
                bits.0 = rest
                    .trim_start_matches([' ', ':'])
                    .strip_suffix("bits")
                    .and_then(number);
            } else if let Some(rest) = line.strip_prefix("time_delta") {
                bits.1 = rest
                    .trim_start_matches([' ', ':'])
                    .strip_suffix("bits")
                    .and_then(number);
            } else if let Some((name, value)) = line.split_once("==") {
                let slot = match name.split(':').next().unwrap_or("").trim() {
                    "padding" => 0,
                    "time_extend" => 1,
                    "time_stamp" => 2,
                    "data max type_len" => 3,
                    _ => continue,
                };
                kinds[slot] = number(value.trim());
            }
        }
        if bits != (Some(5u32), Some(DELTA_BITS)) {
            return Err(LayoutError(format!(
                "header_event: event headers are not type_len:5/time_delta:27 ({bits:?})"
            )));
        }
        let [Some(padding), Some(time_extend), Some(time_stamp), Some(data_max)] = kinds else {
            return Err(LayoutError(format!(
                "header_event: missing event kinds ({kinds:?})"
            )));
        };
        Ok(PageLayout {
            timestamp_offset: timestamp.offset,
            commit_offset: commit.offset,
            commit_size: commit.size,
            data_offset: data.offset,
            data_size: data.size,
            padding,
            time_extend,
            time_stamp,
            data_max,
        })
    }

    /// The size of a whole page (header and data): what one read returns.
    pub fn page_size(&self) -> usize {
        self.data_offset + self.data_size
    }

    /// The same layout with pages of `page_size` bytes (tracefs' `buffer_subbuf_size_kb`
    /// may make sub-buffers larger than a memory page).
    pub fn with_page_size(self, page_size: usize) -> PageLayout {
        PageLayout {
            data_size: page_size.saturating_sub(self.data_offset),
            ..self
        }
    }
}

/// Whether events were lost before a page.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Missed {
    /// None.
    No,
    /// Some, but the page had no room to say how many.
    Unknown,
    /// This many.
    Count(u64),
}

/// A page, or an event in it, that breaks the layout.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PageError {
    /// Byte offset in the page.
    pub offset: usize,
    /// What is wrong.
    pub what: &'static str,
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ftrace page: {} at byte {}", self.what, self.offset)
    }
}

/// One page.
#[derive(Clone, Copy, Debug)]
pub struct Page<'a> {
    /// Time of the page's first event (the base its deltas add to).
    pub timestamp: u64,
    /// Events lost just before this page.
    pub missed: Missed,
    /// The committed data.
    data: &'a [u8],
    layout: &'a PageLayout,
}

/// A data event of a page.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RawEvent<'a> {
    /// When it was written.
    pub time: u64,
    /// The tracepoint record (may end with alignment padding).
    pub payload: &'a [u8],
}

/// An unsigned `size`-byte word (4 or 8).
fn word_at(b: &[u8], at: usize, size: usize) -> Option<u64> {
    if size == 4 {
        u32_at(b, at).map(u64::from)
    } else {
        u64_at(b, at)
    }
}

/// Splits an event header word into `(type_len, time_delta)`. The kernel declares it as
/// C bit-fields `u32 type_len:5, time_delta:27`, allocated from the low bits on
/// little-endian hosts and from the high bits on big-endian ones.
fn split_header(word: u32) -> (u32, u32) {
    if cfg!(target_endian = "little") {
        (word & 0x1f, word >> 5)
    } else {
        (word >> DELTA_BITS, word & ((1 << DELTA_BITS) - 1))
    }
}

impl<'a> Page<'a> {
    /// Reads the header of `page` (one whole page as read from `trace_pipe_raw`).
    pub fn parse(layout: &'a PageLayout, page: &'a [u8]) -> Result<Page<'a>, PageError> {
        let header_err = |what| PageError { offset: 0, what };
        let timestamp = u64_at(page, layout.timestamp_offset)
            .ok_or_else(|| header_err("page shorter than its header"))?;
        let commit = word_at(page, layout.commit_offset, layout.commit_size)
            .ok_or_else(|| header_err("page shorter than its header"))?;
        let length = (commit & COMMIT_LENGTH) as usize;
        let data = page
            .get(layout.data_offset..)
            .and_then(|d| d.get(..length))
            .ok_or(PageError {
                offset: layout.commit_offset,
                what: "commit length beyond the page",
            })?;
        let missed = if commit & MISSED_EVENTS == 0 {
            Missed::No
        } else if commit & MISSED_STORED == 0 {
            Missed::Unknown
        } else {
            let at = layout.data_offset + length;
            Missed::Count(word_at(page, at, layout.commit_size).ok_or(PageError {
                offset: at,
                what: "missed-events count beyond the page",
            })?)
        };
        Ok(Page {
            timestamp,
            missed,
            data,
            layout,
        })
    }

    /// The page's data events, in order, with their times.
    pub fn events(&self) -> Events<'a> {
        Events {
            data: self.data,
            pos: 0,
            time: self.timestamp,
            layout: self.layout,
            data_offset: self.layout.data_offset,
        }
    }
}

/// Iterator over a page's data events; stops at the first error.
pub struct Events<'a> {
    data: &'a [u8],
    pos: usize,
    time: u64,
    layout: &'a PageLayout,
    data_offset: usize,
}

impl<'a> Events<'a> {
    fn error(&mut self, what: &'static str) -> Option<Result<RawEvent<'a>, PageError>> {
        let offset = self.data_offset + self.pos;
        self.pos = self.data.len(); // nothing after a broken event can be trusted
        Some(Err(PageError { offset, what }))
    }
}

impl<'a> Iterator for Events<'a> {
    type Item = Result<RawEvent<'a>, PageError>;

    fn next(&mut self) -> Option<Self::Item> {
        let l = self.layout;
        loop {
            if self.pos + 4 > self.data.len() {
                return None;
            }
            let at = self.pos;
            let (type_len, delta) = split_header(u32_at(self.data, at)?);
            // The word after the header, when the event has one.
            let array0 = u32_at(self.data, at + 4);
            if type_len == l.padding {
                if delta == 0 {
                    return None; // the rest of the page is padding
                }
                let Some(len) = array0 else {
                    return self.error("discarded event cut short");
                };
                self.pos = match at.checked_add(4 + len as usize) {
                    Some(end) if end <= self.data.len() && len >= 4 => end,
                    _ => return self.error("discarded event longer than the page"),
                };
            } else if type_len == l.time_extend || type_len == l.time_stamp {
                let Some(high) = array0 else {
                    return self.error("time stamp cut short");
                };
                let value = u64::from(high) << DELTA_BITS | u64::from(delta);
                self.time = if type_len == l.time_extend {
                    self.time.wrapping_add(value)
                } else {
                    fix_absolute(value, self.time)
                };
                self.pos = at + 8;
            } else if type_len == 0 {
                let Some(len) = array0 else {
                    return self.error("event length cut short");
                };
                let (start, end) = (at + 8, at + 4 + len as usize);
                if len < 4 || end > self.data.len() {
                    return self.error("event longer than the page");
                }
                self.time = self.time.wrapping_add(u64::from(delta));
                self.pos = end;
                return Some(Ok(RawEvent {
                    time: self.time,
                    payload: &self.data[start..end],
                }));
            } else if type_len <= l.data_max {
                let (start, end) = (at + 4, at + 4 + 4 * type_len as usize);
                if end > self.data.len() {
                    return self.error("event longer than the page");
                }
                self.time = self.time.wrapping_add(u64::from(delta));
                self.pos = end;
                return Some(Ok(RawEvent {
                    time: self.time,
                    payload: &self.data[start..end],
                }));
            } else {
                return self.error("unknown event type");
            }
        }
    }
}

/// An absolute time stamp keeps only 59 bits; the top bits are those of the time
/// before it (the kernel's `rb_fix_abs_ts`), carried over if the low part wrapped.
fn fix_absolute(abs: u64, before: u64) -> u64 {
    if before & ABS_TS_TOP == 0 {
        return abs;
    }
    let full = abs | (before & ABS_TS_TOP);
    if full < before {
        full.wrapping_add(1 << 59)
    } else {
        full
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn real_layout() -> PageLayout {
        PageLayout::parse(
            include_str!("../../testdata/ftrace/header_page"),
            include_str!("../../testdata/ftrace/header_event"),
        )
        .unwrap()
    }

    /// Builds pages the way the kernel writes them (x86-64 layout).
    pub(crate) struct PageBuilder {
        data: Vec<u8>,
        timestamp: u64,
    }

    pub(crate) fn header(type_len: u32, delta: u32) -> u32 {
        assert!(type_len < 32 && delta < 1 << 27);
        if cfg!(target_endian = "little") {
            type_len | delta << 5
        } else {
            type_len << 27 | delta
        }
    }

    impl PageBuilder {
        pub(crate) fn new(timestamp: u64) -> PageBuilder {
            PageBuilder {
                data: Vec::new(),
                timestamp,
            }
        }

        fn word(&mut self, w: u32) -> &mut Self {
            self.data.extend_from_slice(&w.to_ne_bytes());
            self
        }

        /// A data event; long payloads (over 112 bytes) get a length word.
        pub(crate) fn event(&mut self, delta: u32, payload: &[u8]) -> &mut Self {
            let padded = payload.len().div_ceil(4) * 4;
            if padded <= 28 * 4 {
                self.word(header((padded / 4) as u32, delta));
            } else {
                self.word(header(0, delta)).word(padded as u32 + 4);
            }
            self.data.extend_from_slice(payload);
            self.data
                .resize(self.data.len() + padded - payload.len(), 0);
            self
        }

        pub(crate) fn extend(&mut self, delta: u64) -> &mut Self {
            self.word(header(30, (delta & ((1 << 27) - 1)) as u32))
                .word((delta >> 27) as u32)
        }

        pub(crate) fn stamp(&mut self, abs: u64) -> &mut Self {
            self.word(header(31, (abs & ((1 << 27) - 1)) as u32))
                .word(((abs >> 27) & 0xffff_ffff) as u32)
        }

        pub(crate) fn discarded(&mut self, delta: u32, bytes: usize) -> &mut Self {
            self.word(header(29, delta)).word(bytes as u32 + 4);
            self.data.resize(self.data.len() + bytes, 0xaa);
            self
        }

        pub(crate) fn end_padding(&mut self) -> &mut Self {
            self.word(header(29, 0))
        }

        /// The 4096-byte page, with `missed` events flagged (and stored if `Some`).
        pub(crate) fn page(&self, missed: Option<Option<u64>>) -> Vec<u8> {
            let mut commit = self.data.len() as u64;
            let mut p = Vec::with_capacity(4096);
            p.extend_from_slice(&self.timestamp.to_ne_bytes());
            let mut tail = Vec::new();
            match missed {
                None => {}
                Some(None) => commit |= MISSED_EVENTS,
                Some(Some(n)) => {
                    commit |= MISSED_EVENTS | MISSED_STORED;
                    tail.extend_from_slice(&n.to_ne_bytes());
                }
            }
            p.extend_from_slice(&commit.to_ne_bytes());
            p.extend_from_slice(&self.data);
            p.extend_from_slice(&tail);
            p.resize(4096, 0);
            p
        }
    }

    fn all(layout: &PageLayout, page: &[u8]) -> Vec<(u64, Vec<u8>)> {
        Page::parse(layout, page)
            .unwrap()
            .events()
            .map(|e| e.map(|e| (e.time, e.payload.to_vec())).unwrap())
            .collect()
    }

    #[test]
    fn reads_this_kernels_layout() {
        let l = real_layout();
        assert_eq!(l.page_size(), 4096);
        assert_eq!((l.commit_offset, l.commit_size, l.data_offset), (8, 8, 16));
        assert_eq!(
            (l.padding, l.time_extend, l.time_stamp, l.data_max),
            (29, 30, 31, 28)
        );
        assert_eq!(l.with_page_size(8192).page_size(), 8192);
    }

    #[test]
    fn refuses_layouts_it_cannot_read() {
        let page = include_str!("../../testdata/ftrace/header_page");
        let event = include_str!("../../testdata/ftrace/header_event");
        let e = PageLayout::parse(page, &event.replace("27 bits", "26 bits")).unwrap_err();
        assert!(e.0.contains("type_len:5/time_delta:27"), "{e}");
        let e = PageLayout::parse(page, &event.replace("time_extend", "x")).unwrap_err();
        assert!(e.0.contains("missing event kinds"), "{e}");
        let e = PageLayout::parse(&page.replace("commit", "c"), event).unwrap_err();
        assert_eq!(e.0, "header_page has no field commit");
    }

    #[test]
    fn decodes_every_header_kind() {
        let l = real_layout();
        let small = [1u8, 2, 3, 4, 5, 6];
        let big = [7u8; 150];
        let page = PageBuilder::new(1_000)
            .event(0, &small) // type_len 2 (6 bytes padded to 8)
            .event(5, &big) // type_len 0, length word
            .discarded(9, 20) // padding with a length: skipped, time unchanged
            .extend(3 << 27 | 11) // time extend
            .event(0, &small)
            .stamp(1 << 40 | 77) // absolute time stamp
            .event(2, &small)
            .end_padding()
            .event(1, &small) // after the end padding: never read
            .page(None);
        let events = all(&l, &page);
        // Payloads come with their alignment padding.
        let mut padded_small = small.to_vec();
        padded_small.extend([0, 0]);
        let mut padded_big = big.to_vec();
        padded_big.extend([0, 0]);
        assert_eq!(
            events,
            vec![
                (1_000, padded_small.clone()),
                (1_005, padded_big),
                (1_005 + (3 << 27 | 11), padded_small.clone()),
                ((1 << 40 | 77) + 2, padded_small),
            ]
        );
        assert_eq!(Page::parse(&l, &page).unwrap().missed, Missed::No);
    }

    #[test]
    fn reads_the_missed_events_flag_and_count() {
        let l = real_layout();
        let mut b = PageBuilder::new(50);
        b.event(1, &[0; 8]);
        let unknown = b.page(Some(None));
        assert_eq!(Page::parse(&l, &unknown).unwrap().missed, Missed::Unknown);
        let counted = b.page(Some(Some(1234)));
        let p = Page::parse(&l, &counted).unwrap();
        assert_eq!(p.missed, Missed::Count(1234));
        // The stored count is not read as an event.
        assert_eq!(p.events().count(), 1);
    }

    #[test]
    fn absolute_stamps_take_their_top_bits_from_the_time_before() {
        let top = 0x08u64 << 56;
        assert_eq!(fix_absolute(5, 100), 5);
        assert_eq!(fix_absolute(500, top | 100), top | 500);
        // The low 59 bits wrapped since.
        assert_eq!(fix_absolute(5, top | 100), (top | 5) + (1 << 59));
    }

    #[test]
    fn broken_pages_are_errors_not_panics() {
        let l = real_layout();
        let mut page = PageBuilder::new(1).event(0, &[1; 16]).page(None);
        // A commit length past the page.
        let mut bad = page.clone();
        bad[8..16].copy_from_slice(&5000u64.to_ne_bytes());
        assert!(Page::parse(&l, &bad).is_err());
        assert!(Page::parse(&l, &page[..10]).is_err());
        // An event that claims more bytes than were committed.
        page[16..20].copy_from_slice(&header(20, 0).to_ne_bytes());
        let errors: Vec<_> = Page::parse(&l, &page).unwrap().events().collect();
        assert_eq!(
            errors,
            vec![Err(PageError {
                offset: 16,
                what: "event longer than the page"
            })]
        );
        // Every truncation and every corrupted byte of a valid page parses or fails
        // cleanly.
        let good = PageBuilder::new(9)
            .event(1, &[3; 150])
            .extend(1 << 30)
            .discarded(1, 8)
            .stamp(99)
            .event(1, &[4; 12])
            .page(Some(Some(3)));
        for cut in 0..200 {
            if let Ok(p) = Page::parse(&l, &good[..cut]) {
                p.events().for_each(drop);
            }
        }
        for at in 16..220 {
            for v in [0u8, 0x1d, 0x1e, 0x1f, 0xff] {
                let mut g = good.clone();
                g[at] = v;
                if let Ok(p) = Page::parse(&l, &g) {
                    p.events().for_each(drop);
                }
            }
        }
    }
}
