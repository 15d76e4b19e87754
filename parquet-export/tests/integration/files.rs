//! Exporting to files as the command does, and reading the tables back.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use sonda_parquet::{
    export as export_trace, ExportError, ExportOptions, ExportSummary, OutputFile, Outputs,
    Partition, Table,
};
use sonda_timeline::Trace;

/// Every file at its place in the dataset at `root`.
pub struct Files {
    pub root: PathBuf,
    pub partition: Partition,
}

impl Outputs for Files {
    type Writer = File;

    fn create(&mut self, file: &OutputFile) -> io::Result<File> {
        let path = file.path(&self.root, &self.partition);
        std::fs::create_dir_all(path.parent().unwrap())?;
        File::create(path)
    }

    fn name(&self, file: &OutputFile) -> String {
        file.path(&self.root, &self.partition).display().to_string()
    }
}

/// An export and where it went.
pub struct Exported {
    pub summary: ExportSummary,
    pub root: PathBuf,
    pub partition: Partition,
}

/// Exports the trace at `path` into the dataset at `root`.
pub fn export(path: &Path, root: &Path, opts: &ExportOptions) -> Result<Exported, ExportError> {
    let trace = Trace::open(path)?;
    let partition = Partition::of(path, trace.meta());
    let mut files = Files {
        root: root.to_path_buf(),
        partition: partition.clone(),
    };
    let summary = export_trace(trace, &mut files, opts)?;
    assert_eq!(summary.partition, partition);
    Ok(Exported {
        summary,
        root: root.to_path_buf(),
        partition,
    })
}

/// One row: column name to value.
pub type Row = BTreeMap<String, Field>;

impl Exported {
    /// The table's part files, in order.
    pub fn files(&self, table: Table) -> Vec<PathBuf> {
        let dir = self.partition.table_dir(&self.root, table);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
    }

    /// Every row of `table`, from all its files.
    pub fn rows(&self, table: Table) -> Vec<Row> {
        let mut rows = Vec::new();
        for f in self.files(table) {
            let reader = SerializedFileReader::new(File::open(&f).unwrap()).unwrap();
            for row in reader.get_row_iter(None).unwrap() {
                let row = row.unwrap();
                rows.push(
                    row.get_column_iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                );
            }
        }
        rows
    }
}

/// The value of an `INT64` column.
pub fn long(row: &Row, col: &str) -> i64 {
    match &row[col] {
        Field::Long(v) => *v,
        other => panic!("{col}: {other:?}"),
    }
}

/// The value of an `INT64` column that may be null.
pub fn opt_long(row: &Row, col: &str) -> Option<i64> {
    match &row[col] {
        Field::Long(v) => Some(*v),
        Field::Null => None,
        other => panic!("{col}: {other:?}"),
    }
}

/// The value of an `INT32` column.
pub fn int(row: &Row, col: &str) -> Option<i32> {
    match &row[col] {
        Field::Int(v) => Some(*v),
        Field::Null => None,
        other => panic!("{col}: {other:?}"),
    }
}

/// The value of a string column.
pub fn text<'a>(row: &'a Row, col: &str) -> Option<&'a str> {
    match &row[col] {
        Field::Str(v) => Some(v),
        Field::Null => None,
        other => panic!("{col}: {other:?}"),
    }
}

/// The value of a boolean column.
pub fn boolean(row: &Row, col: &str) -> bool {
    match &row[col] {
        Field::Bool(v) => *v,
        other => panic!("{col}: {other:?}"),
    }
}
