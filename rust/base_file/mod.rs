//! Decoding base files (parquet) into Arrow record batches: snapshot and merge-on-read reads,
//! Spark tasks that hand every row to the JVM and so wait on the decode, and compactions (from
//! the replaced file's bytes in memory). The Python side uses it where it gives each column
//! exactly the type pyarrow would, and reads the file with pyarrow otherwise.
//!
//! Only column chunks compressed with a codec this build carries are read here; a file with any
//! other codec is `Unsupported` at open, before a batch is decoded, so the caller can read it
//! another way. A column the file stores twice is decoded once ([`twins`]).

mod twins;

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions, RecordBatchReader};
use arrow_schema::{Schema, SchemaRef};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::basic::Compression;
use parquet::file::reader::ChunkReader;

use crate::error::{Error, Result};

/// The record batches of one base file, in file order.
pub struct BaseFileBatches {
    reader: ParquetRecordBatchReader,
    /// The batches' schema: every column asked for, twins included.
    schema: SchemaRef,
    /// Per column of `schema`, the column of the decoded batch holding its values; None when
    /// no column is a twin and the decoded batches are the batches.
    sources: Option<Vec<usize>>,
}

impl BaseFileBatches {
    /// Opens `file` for batches of at most `batch_size` rows. `columns`: the top-level columns
    /// to decode (in the file's order; names the file lacks are skipped), or all of them.
    pub fn open<R: ChunkReader + 'static>(
        file: R,
        columns: Option<&[String]>,
        batch_size: usize,
    ) -> Result<Self> {
        if batch_size == 0 {
            return Err(Error::InvalidArgument("batch size must be positive".into()));
        }
        let loaded =
            ArrowReaderMetadata::load(&file, ArrowReaderOptions::default()).map_err(corrupt)?;
        let metadata = loaded.metadata().clone();
        for row_group in metadata.row_groups() {
            for chunk in row_group.columns() {
                if !decodable(chunk.compression()) {
                    return Err(Error::Unsupported(format!(
                        "column {} is compressed with {}",
                        chunk.column_path(),
                        chunk.compression()
                    )));
                }
            }
        }
        let fields = loaded.parquet_schema().root_schema().get_fields();
        let roots: Vec<usize> = fields
            .iter()
            .enumerate()
            .filter(|(_, f)| columns.is_none_or(|names| names.iter().any(|n| n == f.name())))
            .map(|(i, _)| i)
            .collect();
        let arrow = loaded.schema().clone();
        let twins = twins::twin_sources(&file, &metadata, &arrow, &roots)?;
        let decoded: Vec<usize> = roots
            .iter()
            .zip(&twins)
            .filter(|(_, source)| source.is_none())
            .map(|(&root, _)| root)
            .collect();
        let schema = Arc::new(Schema::new_with_metadata(
            roots
                .iter()
                .map(|&r| arrow.field(r).clone())
                .collect::<Vec<_>>(),
            arrow.metadata().clone(),
        ));
        // Each column's position among the decoded ones: its own, or its source's.
        let sources = twins.iter().any(Option::is_some).then(|| {
            roots
                .iter()
                .zip(&twins)
                .map(|(&root, source)| {
                    let own = source.unwrap_or(root);
                    decoded.iter().position(|&d| d == own).unwrap_or(0)
                })
                .collect()
        });
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, loaded);
        if columns.is_some() || sources.is_some() {
            let mask = ProjectionMask::roots(builder.parquet_schema(), decoded);
            builder = builder.with_projection(mask);
        }
        let reader = builder
            .with_batch_size(batch_size)
            .build()
            .map_err(corrupt)?;
        let schema = if sources.is_some() {
            schema
        } else {
            reader.schema()
        };
        Ok(Self {
            reader,
            schema,
            sources,
        })
    }

    /// The Arrow schema of the batches.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The next batch, or None after the last.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        let Some(batch) = self
            .reader
            .next()
            .transpose()
            .map_err(|e| Error::Corrupt(format!("decoding base file: {e}")))?
        else {
            return Ok(None);
        };
        let Some(sources) = &self.sources else {
            return Ok(Some(batch));
        };
        let columns: Vec<ArrayRef> = sources.iter().map(|&i| batch.column(i).clone()).collect();
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)
            .map(Some)
            .map_err(|e| Error::Corrupt(format!("decoding base file: {e}")))
    }
}

fn decodable(codec: Compression) -> bool {
    matches!(
        codec,
        Compression::UNCOMPRESSED
            | Compression::SNAPPY
            | Compression::GZIP(_)
            | Compression::ZSTD(_)
    )
}

fn corrupt(e: parquet::errors::ParquetError) -> Error {
    Error::Corrupt(format!("reading base file: {e}"))
}

#[cfg(test)]
mod tests;
