//! Reads the labels of one event type from a `.pcf` file.

use std::collections::BTreeMap;
use std::path::Path;

/// The `value → label` list of event `type` in `stem.pcf` (empty when absent).
pub fn values(stem: &Path, event_type: u64) -> BTreeMap<i64, String> {
    let pcf = std::fs::read_to_string(stem.with_extension("pcf")).expect("read .pcf");
    let mut out = BTreeMap::new();
    let mut in_type = false;
    let mut in_values = false;
    for line in pcf.lines() {
        let l = line.trim();
        if l == "EVENT_TYPE" {
            in_type = false;
            in_values = false;
            continue;
        }
        if l == "VALUES" {
            in_values = in_type;
            continue;
        }
        if l.is_empty() || l.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            in_values = false;
            continue;
        }
        let mut f = l.split_whitespace();
        if !in_values {
            // "color type label"
            if let (Some(_), Some(t)) = (f.next(), f.next()) {
                if t.parse::<u64>().ok() == Some(event_type) {
                    in_type = true;
                }
            }
        } else if let (Some(v), Some(rest)) = (f.next(), l.split_once(char::is_whitespace)) {
            if let Ok(v) = v.parse::<i64>() {
                out.insert(v, rest.1.trim().to_string());
            }
        }
    }
    out
}
