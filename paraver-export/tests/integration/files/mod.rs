//! The tests' outputs: files `STEM.prv`, `STEM.pcf`, ... as `sonda paraver` writes
//! them (the library never opens a path), and the paths of what was written.
//! Shared by two test targets, each of which uses only part of it.
#![allow(dead_code)]

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use sonda_paraver::{ExportError, ExportOptions, ExportSummary, Output, Outputs};
use sonda_timeline::Trace;

/// Every output as the file `STEM.EXT`.
pub struct Files<'a>(pub &'a Path);

impl Outputs for Files<'_> {
    type Writer = File;

    fn create(&mut self, output: Output) -> io::Result<File> {
        File::create(output.path(self.0))
    }

    fn name(&self, output: Output) -> String {
        output.path(self.0).display().to_string()
    }
}

/// An export's summary with the paths of its files.
#[derive(Debug)]
pub struct Exported {
    pub summary: ExportSummary,
    pub prv: PathBuf,
    pub pcf: PathBuf,
    pub row: PathBuf,
    pub cfgs: Vec<PathBuf>,
}

impl Deref for Exported {
    type Target = ExportSummary;

    fn deref(&self) -> &ExportSummary {
        &self.summary
    }
}

/// Exports the trace at `trace` to files `STEM.*`.
pub fn export(trace: &Path, stem: &Path, opts: &ExportOptions) -> Result<Exported, ExportError> {
    let summary = sonda_paraver::export(Trace::open(trace)?, &mut Files(stem), opts)?;
    Ok(Exported {
        prv: Output::Prv.path(stem),
        pcf: Output::Pcf.path(stem),
        row: Output::Row.path(stem),
        cfgs: summary.cfgs.iter().map(|c| c.path(stem)).collect(),
        summary,
    })
}
