//! `sonda export TRACE --parquet DIR`: writes the trace's tables into the Parquet
//! dataset at `DIR` with `sonda-parquet`, in the trace's own partition directories
//! (`DIR/<table>/host=H/trace=T/`), and says in one line what it wrote.
//!
//! The files are created here, in [`Files`]: each one new, readable by its owner only,
//! under a hidden temporary name that no Parquet reader picks up, and renamed into
//! place only when every table is complete; a failed export removes them. The
//! partition's directories are made for this export: a trace already exported into
//! `DIR` is refused, so an export never replaces a file, an input least of all.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, BufWriter, ErrorKind};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use sonda_parquet::{export, ExportOptions, OutputFile, Outputs, Partition, Table};
use sonda_timeline::Trace;

use crate::cli::ExportArgs;
use crate::progress::ExportBar;

/// Exports; fails (after writing what it could) when the trace is damaged.
pub fn run(args: ExportArgs) -> anyhow::Result<i32> {
    let root = &args.parquet;
    let trace = Trace::open(&args.trace)?;
    if is_the_trace(root, &args.trace) {
        bail!(
            "{}: is the trace to export; --parquet takes the dataset's directory",
            root.display()
        );
    }
    let partition = Partition::of(&args.trace, trace.meta());
    let mut files = Files::make(root, partition)?;
    let mut opts = ExportOptions::default();
    let (bar, progress) = ExportBar::start();
    if let Some(progress) = progress {
        opts = opts.with_progress(progress);
    }
    let started = Instant::now();
    let result = export(trace, &mut files, &opts);
    bar.finish();
    let s = match result {
        Ok(s) => s,
        Err(e) => {
            files.abandon();
            return Err(e.into());
        }
    };
    files.commit()?;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let rows = |t| s.counts(t).rows;
    say!(
        "sonda: wrote {} tables to {} (host={}, trace={}): {} calls, {} states, {} wakeups, {} GCs, {} monitor waits; {} trace records in {:.2} s ({:.2} M/s)",
        Table::ALL.len(),
        root.display(),
        s.partition.host,
        s.partition.trace,
        rows(Table::Calls),
        rows(Table::States),
        rows(Table::Wakeups),
        rows(Table::Gcs),
        rows(Table::MonitorWaits),
        s.trace_records,
        secs,
        s.trace_records as f64 / secs / 1e6
    );
    if !s.complete && s.damage.is_none() {
        say!("sonda: note: the recording did not finish (sonda was killed): the trace ends early");
    }
    if let Some(damage) = s.damage {
        bail!(
            "{}: {}; exported every intact block",
            args.trace.display(),
            sonda_timeline::damage_line(&damage, &s.unread)
        );
    }
    Ok(0)
}

/// Whether `dir` names the trace file itself.
fn is_the_trace(dir: &Path, trace: &Path) -> bool {
    match (dir.canonicalize(), trace.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The export's files in the dataset (see the module docs).
struct Files {
    root: PathBuf,
    partition: Partition,
    /// The partition directories made by this export.
    made: Vec<PathBuf>,
    /// Every file created: (temporary path, final path).
    created: Vec<(PathBuf, PathBuf)>,
}

impl Files {
    /// The files of `partition` in the dataset at `root`; refuses when any table
    /// already has that partition (or `root` is not a directory). Makes nothing yet:
    /// [`Outputs::create`] makes the directories, after the trace was checked.
    fn make(root: &Path, partition: Partition) -> anyhow::Result<Files> {
        if root.exists() && !root.is_dir() {
            bail!("{}: not a directory", root.display());
        }
        for table in Table::ALL {
            let dir = partition.table_dir(root, table);
            if dir.exists() {
                bail!(
                    "{}: exists: this trace was exported into {} already (remove its trace={} directories to export it again)",
                    dir.display(),
                    root.display(),
                    partition.trace
                );
            }
        }
        Ok(Files {
            root: root.to_path_buf(),
            partition,
            made: Vec::new(),
            created: Vec::new(),
        })
    }

    /// Makes `dir`, a table's partition directory, owner-only, with its parents; a
    /// partition directory that appeared meanwhile is an error (another export).
    fn make_dir(&mut self, dir: &Path) -> io::Result<()> {
        if self.made.iter().any(|d| d == dir) {
            return Ok(());
        }
        if let Some(host) = dir.parent() {
            DirBuilder::new().recursive(true).mode(0o700).create(host)?;
        }
        DirBuilder::new().mode(0o700).create(dir)?;
        self.made.push(dir.to_path_buf());
        Ok(())
    }

    /// Puts every file in place under its final name.
    fn commit(&mut self) -> anyhow::Result<()> {
        for (temporary, path) in std::mem::take(&mut self.created) {
            std::fs::rename(&temporary, &path).with_context(|| {
                format!(
                    "cannot rename {} to {}",
                    temporary.display(),
                    path.display()
                )
            })?;
        }
        Ok(())
    }

    /// Removes the files created and the directories made (a failed export leaves
    /// nothing behind; what other exports put in the dataset stays).
    fn abandon(&mut self) {
        for (temporary, _) in self.created.drain(..) {
            let _ = std::fs::remove_file(temporary);
        }
        for dir in self.made.drain(..) {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Creates a new file at `path`, readable and writable by its owner only; never
/// replaces one.
fn create_output(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

impl Outputs for Files {
    type Writer = BufWriter<File>;

    fn create(&mut self, file: &OutputFile) -> io::Result<BufWriter<File>> {
        let path = file.path(&self.root, &self.partition);
        let Some(dir) = path.parent() else {
            return Err(io::Error::new(ErrorKind::InvalidInput, "no directory"));
        };
        self.make_dir(dir)?;
        let temporary = dir.join(format!(".{}.tmp", file.file_name()));
        let f = create_output(&temporary)?;
        self.created.push((temporary, path));
        Ok(BufWriter::new(f))
    }

    fn name(&self, file: &OutputFile) -> String {
        file.path(&self.root, &self.partition).display().to_string()
    }
}
