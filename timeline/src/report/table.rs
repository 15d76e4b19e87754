//! Aligned text columns and compact durations for the terminal report.

use std::io::{self, Write};

/// How a column's cells line up.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Align {
    Left,
    Right,
}

/// A table: a header row, then rows; every column as wide as its widest cell.
pub(crate) struct Table {
    columns: Vec<(&'static str, Align)>,
    header: bool,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(columns: &[(&'static str, Align)]) -> Table {
        Table {
            columns: columns.to_vec(),
            header: true,
            rows: Vec::new(),
        }
    }

    /// A table without a header line (a list of `name  value` lines).
    pub fn headless(aligns: &[Align]) -> Table {
        Table {
            columns: aligns.iter().map(|&a| ("", a)).collect(),
            header: false,
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len());
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Writes the table, each line indented by `indent` spaces, with no trailing blanks.
    pub fn write(&self, out: &mut dyn Write, indent: usize) -> io::Result<()> {
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.0.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let header: Vec<String> = self.columns.iter().map(|c| c.0.to_string()).collect();
        let header = self.header.then_some(&header);
        for row in header.into_iter().chain(&self.rows) {
            let mut line = " ".repeat(indent);
            for (i, ((cell, &(_, align)), &w)) in
                row.iter().zip(&self.columns).zip(&widths).enumerate()
            {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(w - cell.chars().count());
                match align {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// A duration in ns as three significant digits with a unit: `0`, `850 ns`, `12.3 µs`,
/// `4.56 ms`, `1.23 s`, `754 s`.
pub(crate) fn duration(ns: u64) -> String {
    if ns == 0 {
        return "0".to_string();
    }
    let (value, unit) = match ns {
        0..=999 => return format!("{ns} ns"),
        // Bounds so that rounding never shows `1000` of a unit.
        1_000..=999_499 => (ns as f64 / 1e3, "µs"),
        999_500..=999_499_999 => (ns as f64 / 1e6, "ms"),
        _ => (ns as f64 / 1e9, "s"),
    };
    let text = if value >= 99.95 {
        format!("{value:.0}")
    } else if value >= 9.995 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    };
    format!("{text} {unit}")
}

/// A share of a total as a percentage with one decimal.
pub(crate) fn percent(part: u64, total: u64) -> String {
    if total == 0 {
        return "-".to_string();
    }
    format!("{:.1}%", part as f64 * 100.0 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_keep_three_digits() {
        assert_eq!(duration(0), "0");
        assert_eq!(duration(850), "850 ns");
        assert_eq!(duration(12_345), "12.3 µs");
        assert_eq!(duration(4_561_000), "4.56 ms");
        assert_eq!(duration(999_999_999), "1.00 s");
        assert_eq!(duration(999_600), "1.00 ms");
        assert_eq!(duration(1_234_000_000), "1.23 s");
        assert_eq!(duration(754_000_000_000), "754 s");
    }

    #[test]
    fn columns_align() {
        let mut t = Table::new(&[("name", Align::Left), ("n", Align::Right)]);
        t.row(vec!["main".into(), "7".into()]);
        t.row(vec!["worker-10".into(), "1234".into()]);
        let mut out = Vec::new();
        t.write(&mut out, 2).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "  name          n\n  main          7\n  worker-10  1234\n"
        );
        let mut t = Table::headless(&[Align::Left, Align::Right]);
        t.row(vec!["a".into(), "1".into()]);
        let mut out = Vec::new();
        t.write(&mut out, 0).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a  1\n");
        assert_eq!(percent(1, 3), "33.3%");
        assert_eq!(percent(1, 0), "-");
    }
}
