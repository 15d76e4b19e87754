//! What a reader skipped: the damaged stretches of a trace, and where a cut-short file
//! ends. Readers go on after damage (they resynchronise at the next intact block), so a
//! tool needs this list to say how much of the trace it did not see.

use std::fmt;

/// One stretch of the file the reader skipped: damaged bytes, or an intact block it
/// refused (one that goes back in time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedRegion {
    /// Byte offset in the file of the first byte skipped.
    pub offset: u64,
    /// Bytes skipped, up to the next block read (or the end of the file).
    pub bytes: u64,
    /// Blocks skipped, when known: the damaged blocks' headers still chain from
    /// `offset` to the next intact block (each header's length leads to the next). `None`
    /// when the damage hit the framing itself. `Some(0)` for the rest of one block whose
    /// records stopped decoding.
    pub blocks: Option<u64>,
    /// Timed records lost, when known: the record counts of the skipped events blocks'
    /// headers when `blocks` is known (a damaged header may lie; the count is what it
    /// says), or the records of an intact block not delivered.
    pub records: Option<u64>,
    /// What was wrong at `offset`, in a few words.
    pub reason: String,
}

impl fmt::Display for SkippedRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "skipped {} bytes at byte {} ({}",
            self.bytes, self.offset, self.reason
        )?;
        let s = |n: u64| if n == 1 { "" } else { "s" };
        match (self.blocks, self.records) {
            (Some(b), Some(r)) => write!(f, "; {b} block{}, {r} record{})", s(b), s(r)),
            (Some(b), None) => write!(f, "; {b} block{})", s(b)),
            (None, Some(r)) => write!(f, "; {r} record{})", s(r)),
            (None, None) => write!(f, ")"),
        }
    }
}

/// Everything a reader skipped, in file order (see [`SkippedRegion`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Damage {
    /// The skipped stretches, in file order.
    pub regions: Vec<SkippedRegion>,
    /// Where the file ends inside a block (a recording cut short), if it does: the
    /// offset of that last, partial block. Not a region: nothing follows it.
    pub truncated: Option<u64>,
}

impl Damage {
    /// Whether nothing was skipped and the file does not end inside a block.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty() && self.truncated.is_none()
    }

    /// Bytes skipped in all regions (not counting a truncated tail).
    pub fn bytes(&self) -> u64 {
        self.regions.iter().map(|r| r.bytes).sum()
    }

    /// Timed records lost in the regions whose count is known, and whether every
    /// region's count is known.
    pub fn records(&self) -> (u64, bool) {
        let known = self.regions.iter().filter_map(|r| r.records).sum();
        (known, self.regions.iter().all(|r| r.records.is_some()))
    }
}

/// One line: the region when there is one, else the totals and the first; then the
/// truncated end. Empty when nothing was skipped.
impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.regions.as_slice() {
            [] => {}
            [one] => write!(f, "{one}")?,
            [first, ..] => {
                let (records, all_known) = self.records();
                write!(
                    f,
                    "skipped {} bytes in {} places ({}{records} records lost; the first {first})",
                    self.bytes(),
                    self.regions.len(),
                    if all_known { "" } else { "at least " },
                )?;
            }
        }
        if let Some(at) = self.truncated {
            if !self.regions.is_empty() {
                write!(f, "; ")?;
            }
            write!(f, "cut short at byte {at} (an incomplete last block)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(offset: u64, bytes: u64, records: Option<u64>) -> SkippedRegion {
        SkippedRegion {
            offset,
            bytes,
            blocks: records.map(|_| 1),
            records,
            reason: "checksum mismatch".into(),
        }
    }

    #[test]
    fn damage_reads_as_one_line() {
        let mut d = Damage::default();
        assert_eq!(d.to_string(), "");
        d.truncated = Some(900);
        assert_eq!(
            d.to_string(),
            "cut short at byte 900 (an incomplete last block)"
        );
        d.regions.push(region(100, 50, Some(4)));
        assert_eq!(
            d.to_string(),
            "skipped 50 bytes at byte 100 (checksum mismatch; 1 block, 4 records); cut short at byte 900 (an incomplete last block)"
        );
        d.truncated = None;
        d.regions.push(region(300, 20, None));
        assert_eq!(
            d.to_string(),
            "skipped 70 bytes in 2 places (at least 4 records lost; the first skipped 50 bytes at byte 100 (checksum mismatch; 1 block, 4 records))"
        );
    }
}
