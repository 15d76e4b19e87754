//! One table's writer: rows are buffered column by column (the Parquet column writer
//! writes a row group one column after the other) and written out as a row group
//! when the buffer reaches its size, so that memory stays bounded whatever the
//! trace's length. A file is closed after a number of row groups and the next rows go
//! to the table's next part file: the footer a writer keeps in memory (one entry per
//! row group and column) stays bounded too.
//!
//! Names are buffered as indices into [`Names`] (four bytes a value) and handed to
//! the Parquet writer, which dictionary-encodes them, one chunk at a time.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesPtr};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnPath, TypePtr};

use crate::schema::{Kind, Table};
use crate::{ExportError, OutputFile, Outputs};

/// Values handed to the Parquet column writer at once.
const CHUNK: usize = 4096;

/// The names the tables' string columns hold, each stored once: a string value is
/// its index here.
#[derive(Debug, Default)]
pub(crate) struct Names {
    values: Vec<ByteArray>,
    index: HashMap<String, u32>,
}

impl Names {
    /// The index of `name`, added if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.values.len() as u32;
        self.values.push(ByteArray::from(name.as_bytes().to_vec()));
        self.index.insert(name.to_string(), i);
        i
    }

    fn get(&self, i: u32) -> ByteArray {
        // Indices come from `intern` alone; the empty string stands in for none.
        self.values.get(i as usize).cloned().unwrap_or_default()
    }
}

/// One column's buffered values.
#[derive(Debug)]
enum Values {
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    Bool(Vec<bool>),
    Text(Vec<u32>),
}

#[derive(Debug)]
struct Buffer {
    values: Values,
    /// Definition levels of a nullable column: 1 present, 0 null.
    defs: Option<Vec<i16>>,
    bytes_per_value: usize,
}

impl Buffer {
    fn clear(&mut self) {
        match &mut self.values {
            Values::Int32(v) => v.clear(),
            Values::Int64(v) => v.clear(),
            Values::Bool(v) => v.clear(),
            Values::Text(v) => v.clear(),
        }
        if let Some(d) = &mut self.defs {
            d.clear();
        }
    }
}

/// Sizes of the output, in the writer's terms.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// A row group is written when its buffered rows reach this many bytes.
    pub row_group_bytes: usize,
    /// A file is closed after this many row groups.
    pub row_groups_per_file: usize,
    /// The most bytes all tables buffer together (a table never buffers more).
    pub buffer_bytes: usize,
}

/// What one table wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableCounts {
    /// Rows written.
    pub rows: u64,
    /// Row groups written.
    pub row_groups: u64,
    /// Files written.
    pub files: u32,
}

/// One table's writer.
pub(crate) struct TableWriter<W: Write + Send> {
    pub table: Table,
    schema: TypePtr,
    props: WriterPropertiesPtr,
    columns: Vec<Buffer>,
    /// The next column of the row being pushed.
    next: usize,
    /// A value pushed to a column of another kind (a bug of this crate).
    mismatch: bool,
    rows: usize,
    bytes: usize,
    limits: Limits,
    file: Option<SerializedFileWriter<W>>,
    name: String,
    groups_in_file: usize,
    pub counts: TableCounts,
}

impl<W: Write + Send> TableWriter<W> {
    /// A writer of `table`, its files' key-value metadata `meta`.
    pub fn new(table: Table, limits: Limits, meta: Vec<KeyValue>) -> TableWriter<W> {
        let columns = table.columns();
        let mut props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            // Min and max per column chunk: enough to skip row groups by time or id,
            // without a page index growing with the file.
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_key_value_metadata(Some(meta));
        for c in &columns {
            let path = ColumnPath::from(c.name.as_str());
            if let Some(encoding) = c.encode.encoding() {
                props = props
                    .set_column_dictionary_enabled(path.clone(), false)
                    .set_column_encoding(path, encoding);
            }
        }
        // Room for a whole row group from the start: buffers that grew by doubling
        // would hold up to twice what they count. Pages are touched (resident) only
        // as rows fill them.
        let row_bytes: usize = columns
            .iter()
            .map(|c| c.kind.buffered_bytes() + if c.nullable { 2 } else { 0 })
            .sum();
        let rows = limits.row_group_bytes.min(limits.buffer_bytes) / row_bytes.max(1) + 64;
        let buffers = columns
            .iter()
            .map(|c| Buffer {
                values: match c.kind {
                    Kind::Int32 => Values::Int32(Vec::with_capacity(rows)),
                    Kind::Int64 => Values::Int64(Vec::with_capacity(rows)),
                    Kind::Bool => Values::Bool(Vec::with_capacity(rows)),
                    Kind::Text => Values::Text(Vec::with_capacity(rows)),
                },
                defs: c.nullable.then(|| Vec::with_capacity(rows)),
                bytes_per_value: c.kind.buffered_bytes() + if c.nullable { 2 } else { 0 },
            })
            .collect();
        TableWriter {
            table,
            schema: table.schema(),
            props: Arc::new(props.build()),
            columns: buffers,
            next: 0,
            mismatch: false,
            rows: 0,
            bytes: 0,
            limits,
            file: None,
            name: String::new(),
            groups_in_file: 0,
            counts: TableCounts::default(),
        }
    }

    /// Bytes of rows buffered.
    pub fn buffered(&self) -> usize {
        self.bytes
    }

    fn column(&mut self) -> Option<&mut Buffer> {
        let i = self.next;
        self.next += 1;
        let c = self.columns.get_mut(i);
        if c.is_none() {
            self.mismatch = true;
        }
        c
    }

    fn present(&mut self) -> Option<&mut Values> {
        let c = self.column()?;
        if let Some(d) = &mut c.defs {
            d.push(1);
        }
        Some(&mut c.values)
    }

    /// The next column's value.
    pub fn i32(&mut self, v: i32) -> &mut Self {
        match self.present() {
            Some(Values::Int32(b)) => b.push(v),
            _ => self.mismatch = true,
        }
        self
    }

    /// The next column's value.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        match self.present() {
            Some(Values::Int64(b)) => b.push(v),
            _ => self.mismatch = true,
        }
        self
    }

    /// The next column's value.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        match self.present() {
            Some(Values::Bool(b)) => b.push(v),
            _ => self.mismatch = true,
        }
        self
    }

    /// The next column's value: a name's index in [`Names`].
    pub fn text(&mut self, v: u32) -> &mut Self {
        match self.present() {
            Some(Values::Text(b)) => b.push(v),
            _ => self.mismatch = true,
        }
        self
    }

    /// A null in the next column.
    pub fn null(&mut self) -> &mut Self {
        match self.column().and_then(|c| c.defs.as_mut()) {
            Some(d) => d.push(0),
            None => self.mismatch = true,
        }
        self
    }

    /// The next column's value, or a null.
    pub fn opt_i32(&mut self, v: Option<i32>) -> &mut Self {
        match v {
            Some(v) => self.i32(v),
            None => self.null(),
        }
    }

    /// The next column's value, or a null.
    pub fn opt_i64(&mut self, v: Option<i64>) -> &mut Self {
        match v {
            Some(v) => self.i64(v),
            None => self.null(),
        }
    }

    /// The next column's value, or a null.
    pub fn opt_text(&mut self, v: Option<u32>) -> &mut Self {
        match v {
            Some(v) => self.text(v),
            None => self.null(),
        }
    }

    /// Ends the row; returns whether the buffer is full (time to [`TableWriter::flush`]).
    pub fn end_row(&mut self) -> bool {
        if self.next != self.columns.len() {
            self.mismatch = true;
        }
        self.next = 0;
        self.rows += 1;
        self.bytes += self
            .columns
            .iter()
            .map(|c| c.bytes_per_value)
            .sum::<usize>();
        self.bytes >= self.limits.row_group_bytes
    }

    fn internal(&self) -> ExportError {
        ExportError::Internal(format!(
            "the {} table's rows do not match its columns",
            self.table.name()
        ))
    }

    /// Creates the table's next file (its first when none was written yet).
    pub fn open<O: Outputs<Writer = W>>(&mut self, outputs: &mut O) -> Result<(), ExportError> {
        let file = OutputFile {
            table: self.table,
            part: self.counts.files,
        };
        self.name = outputs.name(&file);
        let name = self.name.clone();
        let write_error = |source| ExportError::Write { name, source };
        let writer = outputs
            .create(&file)
            .map_err(ParquetError::from)
            .and_then(|w| SerializedFileWriter::new(w, self.schema.clone(), self.props.clone()))
            .map_err(|e| write_error(io_error(e)))?;
        self.file = Some(writer);
        self.counts.files += 1;
        self.groups_in_file = 0;
        Ok(())
    }

    /// Writes the buffered rows as one row group (into a new file if the last one is
    /// full).
    pub fn flush<O: Outputs<Writer = W>>(
        &mut self,
        outputs: &mut O,
        names: &Names,
    ) -> Result<(), ExportError> {
        if self.mismatch {
            return Err(self.internal());
        }
        if self.rows == 0 {
            return Ok(());
        }
        if self.file.is_none() {
            self.open(outputs)?;
        }
        let name = self.name.clone();
        let Some(file) = self.file.as_mut() else {
            return Err(self.internal());
        };
        let written = write_group(file, &self.columns, names).map_err(|e| match e {
            Failure::Io(source) => ExportError::Write { name, source },
            Failure::Schema => ExportError::Internal(format!(
                "the {} table's columns do not match its schema",
                self.table.name()
            )),
        })?;
        if written != self.rows {
            return Err(self.internal());
        }
        for c in &mut self.columns {
            c.clear();
        }
        self.counts.rows += self.rows as u64;
        self.counts.row_groups += 1;
        self.rows = 0;
        self.bytes = 0;
        self.groups_in_file += 1;
        if self.groups_in_file >= self.limits.row_groups_per_file {
            self.close_file()?;
        }
        Ok(())
    }

    fn close_file(&mut self) -> Result<(), ExportError> {
        if let Some(file) = self.file.take() {
            file.close().map_err(|e| ExportError::Write {
                name: self.name.clone(),
                source: io_error(e),
            })?;
        }
        Ok(())
    }

    /// Writes what is buffered and closes the last file (its footer written).
    pub fn finish<O: Outputs<Writer = W>>(
        &mut self,
        outputs: &mut O,
        names: &Names,
    ) -> Result<TableCounts, ExportError> {
        self.flush(outputs, names)?;
        self.close_file()?;
        Ok(self.counts)
    }
}

enum Failure {
    Io(io::Error),
    Schema,
}

impl From<ParquetError> for Failure {
    fn from(e: ParquetError) -> Failure {
        Failure::Io(io_error(e))
    }
}

/// A Parquet error as the I/O error it is (a write that failed), or wrapped.
pub(crate) fn io_error(e: ParquetError) -> io::Error {
    match e {
        ParquetError::External(inner) => match inner.downcast::<io::Error>() {
            Ok(io) => *io,
            Err(other) => io::Error::other(other),
        },
        other => io::Error::other(other),
    }
}

/// Writes `columns` as one row group; returns its rows.
fn write_group<W: Write + Send>(
    file: &mut SerializedFileWriter<W>,
    columns: &[Buffer],
    names: &Names,
) -> Result<usize, Failure> {
    let mut group = file.next_row_group()?;
    let mut scratch: Vec<ByteArray> = Vec::with_capacity(CHUNK);
    let mut rows = None;
    for c in columns {
        let Some(mut column) = group.next_column()? else {
            return Err(Failure::Schema);
        };
        let defs = c.defs.as_deref();
        let n = match (&c.values, column.untyped()) {
            (Values::Int32(v), ColumnWriter::Int32ColumnWriter(w)) => {
                w.write_batch(v, defs, None)?;
                defs.map_or(v.len(), <[i16]>::len)
            }
            (Values::Int64(v), ColumnWriter::Int64ColumnWriter(w)) => {
                w.write_batch(v, defs, None)?;
                defs.map_or(v.len(), <[i16]>::len)
            }
            (Values::Bool(v), ColumnWriter::BoolColumnWriter(w)) => {
                w.write_batch(v, defs, None)?;
                defs.map_or(v.len(), <[i16]>::len)
            }
            (Values::Text(v), ColumnWriter::ByteArrayColumnWriter(w)) => match defs {
                // Values and levels in step: each chunk of levels with the values it
                // makes present.
                Some(defs) => {
                    let mut at = 0;
                    for levels in defs.chunks(CHUNK) {
                        let present = levels.iter().filter(|&&d| d == 1).count();
                        let values = v.get(at..at + present).ok_or(Failure::Schema)?;
                        scratch.clear();
                        scratch.extend(values.iter().map(|&i| names.get(i)));
                        w.write_batch(&scratch, Some(levels), None)?;
                        at += present;
                    }
                    defs.len()
                }
                None => {
                    for chunk in v.chunks(CHUNK) {
                        scratch.clear();
                        scratch.extend(chunk.iter().map(|&i| names.get(i)));
                        w.write_batch(&scratch, None, None)?;
                    }
                    v.len()
                }
            },
            _ => return Err(Failure::Schema),
        };
        column.close()?;
        if *rows.get_or_insert(n) != n {
            return Err(Failure::Schema);
        }
    }
    if group.next_column()?.is_some() {
        return Err(Failure::Schema);
    }
    group.close()?;
    Ok(rows.unwrap_or(0))
}
