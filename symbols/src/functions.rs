//! The names of a trace's native functions ([`sonda_trace::Meta::NativeFunction`]): each
//! function id resolved against its process's mappings.

use std::collections::HashMap;

use sonda_trace::{Meta, Pid, TraceMeta};

use crate::resolve::{Mapping, Symbolizer};

/// The executable mappings of each process of the trace, as its `Meta::Mapping`
/// records say (duplicates, which the C API and the collector may both write, once).
pub fn mappings_by_process(meta: &TraceMeta) -> HashMap<Pid, Vec<Mapping>> {
    let mut by_pid: HashMap<Pid, Vec<Mapping>> = HashMap::new();
    for m in &meta.mappings {
        if let Meta::Mapping {
            pid,
            start,
            end,
            offset,
            path,
        } = m
        {
            let list = by_pid.entry(*pid).or_default();
            let mapping = Mapping {
                start: *start,
                end: *end,
                offset: *offset,
                path: path.clone(),
            };
            if !list.contains(&mapping) {
                list.push(mapping);
            }
        }
    }
    by_pid
}

/// A label for every native function id of the trace: its source-level name when the
/// mapped file's symbols have it (see [`crate::Resolved::label`] otherwise). Reads each
/// mapped binary that holds a function once.
pub fn native_function_labels(meta: &TraceMeta) -> HashMap<u32, String> {
    if meta.native_functions.is_empty() {
        return HashMap::new();
    }
    let mappings = mappings_by_process(meta);
    let mut symbolizer = Symbolizer::new();
    meta.native_functions
        .iter()
        .map(|(&id, f)| {
            let maps = mappings.get(&f.pid).map(Vec::as_slice).unwrap_or_default();
            (id, symbolizer.resolve(maps, f.addr).label(f.addr))
        })
        .collect()
}
