//! sonda's service-demand model: per-call CPU, waiting-for-CPU and blocked time joined
//! from a trace ([`join`]), per-method statistics and fitted distributions
//! ([`analyze`], [`figures`], [`fit`]), their table, JSON and CSV outputs, and a JMT
//! queueing model ([`jmt`]), and SVG pictures of the demands ([`plot`]). See
//! docs/services-schema.md.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod analyze;
mod collect;
pub mod csv;
pub mod figures;
pub mod fit;
mod foreign;
pub mod jmt;
pub mod join;
pub mod json;
pub mod parts;
pub mod plot;
pub mod summary;
pub mod table;
pub mod units;
