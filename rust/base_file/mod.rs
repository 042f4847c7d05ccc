//! Decoding base files (parquet) into Arrow record batches: snapshot and merge-on-read reads,
//! Spark tasks that hand every row to the JVM and so wait on the decode, and compactions (from
//! the replaced file's bytes in memory). The Python side uses it where it gives each column
//! exactly the type pyarrow would, and reads the file with pyarrow otherwise.
//!
//! Only column chunks compressed with a codec this build carries are read here; a file with any
//! other codec is `Unsupported` at open, before a batch is decoded, so the caller can read it
//! another way.

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;
use parquet::basic::Compression;
use parquet::file::reader::ChunkReader;

use crate::error::{Error, Result};

/// The record batches of one base file, in file order.
pub struct BaseFileBatches {
    reader: ParquetRecordBatchReader,
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
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(corrupt)?;
        let metadata = builder.metadata().clone();
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
        let builder = match columns {
            None => builder,
            Some(names) => {
                let fields = builder.parquet_schema().root_schema().get_fields();
                let roots = fields
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| names.iter().any(|n| n == f.name()))
                    .map(|(i, _)| i);
                let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
                builder.with_projection(mask)
            }
        };
        let reader = builder
            .with_batch_size(batch_size)
            .build()
            .map_err(corrupt)?;
        Ok(Self { reader })
    }

    /// The Arrow schema of the batches.
    pub fn schema(&self) -> SchemaRef {
        self.reader.schema()
    }

    /// The next batch, or None after the last.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        self.reader
            .next()
            .transpose()
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
