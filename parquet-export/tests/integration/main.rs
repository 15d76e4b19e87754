//! sonda-parquet's integration tests, one test binary: exports of synthetic traces
//! (`sonda-testdata`) to files, read back with the `parquet` crate's reader.

mod docs;
mod export;
mod files;
mod scale;
