//! `sonda services --format json`: the figures as one JSON document, whose schema is
//! `docs/services.schema.json` (described in `docs/services-schema.md`).

use std::io::{self, Write};

use crate::figures::Services;

/// Writes the figures as pretty-printed JSON and a final newline.
pub fn write(s: &Services, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, s).map_err(io::Error::from)?;
    writeln!(out)
}

/// The figures as a JSON value (for tests and embedding).
pub fn to_value(s: &Services) -> serde_json::Value {
    serde_json::to_value(s).unwrap_or(serde_json::Value::Null)
}
