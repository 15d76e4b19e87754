//! Writing names and facts to the shared file's metadata log (`sonda_trace::Meta`
//! records, encoded with `sonda_trace::codec::encode_meta`). Off the hot path: called at
//! thread start, class load, first contention on a class, and at the end.

use sonda_trace::codec::encode_meta;
use sonda_trace::Meta;

use crate::buffers;

/// Appends one metadata record. False when there is no region or the log is full (the
/// region counts that loss itself).
pub fn write(meta: &Meta) -> bool {
    let Some(region) = buffers::region() else {
        return false;
    };
    let mut bytes = Vec::with_capacity(64);
    encode_meta(&mut bytes, meta);
    region.meta_append(&bytes)
}

/// Writes a `Meta::Warning`: how the agent reports problems once it has a region.
pub fn warning(text: impl Into<String>) {
    crate::counters::WARNINGS.incr();
    write(&Meta::Warning { text: text.into() });
}

/// Writes a `Meta::Counter` named `agent.<name>`.
pub fn counter(name: &str, value: u64) {
    write(&Meta::Counter {
        name: format!("agent.{name}"),
        value,
    });
}

/// A class name from internal (`java/util/Map$Entry`) to source form
/// (`java.util.Map$Entry`, `$` kept as the JVM has it).
pub fn dotted(internal: &str) -> String {
    internal.replace('/', ".")
}
