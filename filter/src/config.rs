//! The filter in the agent configuration text (docs/architecture.md, "Agent ↔ collector
//! contract"): one `methods=<pattern>` line per pattern, in order, excludes with their
//! `!`. The collector writes it; the agent reads it back with the same grammar.
//!
//! Patterns cannot contain whitespace, so a pattern never spans lines.

use crate::error::FilterError;
use crate::filter::MethodFilter;

/// The configuration key.
pub const KEY: &str = "methods";

impl MethodFilter {
    /// One `methods=<pattern>\n` line per pattern, in the given order.
    pub fn to_config_lines(&self) -> String {
        let mut out = String::new();
        for p in self.patterns() {
            out.push_str(KEY);
            out.push('=');
            out.push_str(p);
            out.push('\n');
        }
        out
    }

    /// Parses the `methods=` lines of an agent configuration text, ignoring the other
    /// keys (`gc=1`, `mode=attach`, ...) and blank lines.
    pub fn from_config_lines(text: &str) -> Result<MethodFilter, FilterError> {
        let patterns: Vec<&str> = text
            .lines()
            .filter_map(|line| {
                let (key, value) = line.split_once('=')?;
                (key.trim() == KEY).then_some(value)
            })
            .collect();
        MethodFilter::parse(&patterns)
    }
}
