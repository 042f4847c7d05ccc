//! Writing a merged base file that reuses the column chunks a merge left unchanged.
//!
//! A copy-on-write merge rewrites a whole base file to change a few percent of its rows, and
//! most of its columns hold, row for row, the values they held before (the record keys, the
//! partition path, every field an update did not touch). Those column chunks are copied byte
//! for byte from the replaced file; only the columns that changed are encoded and compressed.
//! The new file has the replaced file's parquet schema, so a copied chunk is valid in it as is.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnWriter, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowSchemaConverter;
use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{KeyValue, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesPtr};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{SchemaDescriptor, Type};

use crate::error::{Error, Result};

/// Where each top-level field of one output row group comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkSource {
    /// Encode the field's values from the row group's batches.
    Encode,
    /// Copy the field's column chunks from this row group of the replaced file.
    Copy(usize),
}

/// One row group of the new file: its rows (every field, in the file's field order; fields
/// that are copied are not read) and where each field's chunks come from.
pub struct RowGroupPlan {
    pub batches: Vec<RecordBatch>,
    pub sources: Vec<ChunkSource>,
}

/// Encoding settings for the chunks that are written afresh.
#[derive(Debug, Clone)]
pub struct EncodeOptions {
    /// `snappy`, `gzip`, `zstd` or `none`.
    pub compression: String,
    /// Top-level fields to try dictionary encoding on; the others are written plain.
    pub dictionary_fields: Vec<String>,
    /// Top-level fields written without column statistics.
    pub no_statistics_fields: Vec<String>,
    pub dictionary_page_limit: usize,
    pub data_page_size: usize,
    /// The footer's key-value metadata (bloom filter, record-key bounds, Avro schema).
    pub key_value: Vec<(String, String)>,
}

/// The replaced base file: its bytes and parsed footer.
pub struct ReplacedFile {
    bytes: Bytes,
    metadata: ParquetMetaData,
}

impl ReplacedFile {
    /// Parses the footer of a parquet file held in memory.
    pub fn parse(bytes: Bytes) -> Result<Self> {
        let metadata = ParquetMetaDataReader::new()
            .parse_and_finish(&bytes)
            .map_err(|e| Error::Corrupt(format!("replaced base file footer: {e}")))?;
        Ok(Self { bytes, metadata })
    }

    /// Rows of each row group.
    pub fn row_group_rows(&self) -> Vec<i64> {
        self.metadata
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect()
    }

    fn schema(&self) -> &SchemaDescriptor {
        self.metadata.file_metadata().schema_descr()
    }

    /// Whether rows of ``schema`` are stored exactly as this file stores its columns: the same
    /// parquet types, repetition and annotations, field for field. Only then can a chunk of
    /// this file stand in a row group of the new one.
    pub fn holds(&self, schema: &Schema) -> bool {
        let decoded = decoded_schema(schema);
        match ArrowSchemaConverter::new().convert(&decoded) {
            // The root's name is the writer's choice ("schema", "arrow_schema", a record name).
            Ok(descr) => same_fields(descr.root_schema(), self.schema().root_schema()),
            Err(_) => false,
        }
    }
}

fn same_fields(a: &Type, b: &Type) -> bool {
    let (fa, fb) = (a.get_fields(), b.get_fields());
    fa.len() == fb.len() && fa.iter().zip(fb).all(|(x, y)| same_types(x, y))
}

/// Compares two parquet schema trees by name, physical and logical types and repetition,
/// ignoring field ids (a writer may or may not assign them).
fn same_types(a: &Type, b: &Type) -> bool {
    let (ia, ib) = (a.get_basic_info(), b.get_basic_info());
    if ia.name() != ib.name()
        || ia.logical_type_ref() != ib.logical_type_ref()
        || ia.converted_type() != ib.converted_type()
        || (ia.has_repetition() && ib.has_repetition() && ia.repetition() != ib.repetition())
        || a.is_primitive() != b.is_primitive()
    {
        return false;
    }
    match (a, b) {
        (
            Type::PrimitiveType {
                physical_type: pa,
                type_length: la,
                scale: sa,
                precision: pa_,
                ..
            },
            Type::PrimitiveType {
                physical_type: pb,
                type_length: lb,
                scale: sb,
                precision: pb_,
                ..
            },
        ) => pa == pb && la == lb && sa == sb && pa_ == pb_,
        (Type::GroupType { .. }, Type::GroupType { .. }) => same_fields(a, b),
        _ => false,
    }
}

/// ``schema`` with dictionary fields as their value type, as parquet stores them.
fn decoded_schema(schema: &Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Dictionary(_, value) => f.as_ref().clone().with_data_type(*value.clone()),
            _ => f.as_ref().clone(),
        })
        .collect();
    Schema::new(fields)
}

fn leaf_count(t: &Type) -> usize {
    match t {
        Type::PrimitiveType { .. } => 1,
        Type::GroupType { fields, .. } => fields.iter().map(|f| leaf_count(f)).sum(),
    }
}

fn compression(name: &str) -> Result<Compression> {
    Ok(match name {
        "snappy" => Compression::SNAPPY,
        "gzip" => Compression::GZIP(GzipLevel::default()),
        "zstd" => Compression::ZSTD(ZstdLevel::default()),
        "none" => Compression::UNCOMPRESSED,
        other => {
            return Err(Error::Unsupported(format!(
                "codec {other} for spliced base files"
            )))
        }
    })
}

fn properties(schema: &SchemaDescriptor, opts: &EncodeOptions) -> Result<WriterPropertiesPtr> {
    let dictionary: HashSet<&str> = opts.dictionary_fields.iter().map(String::as_str).collect();
    let no_stats: HashSet<&str> = opts
        .no_statistics_fields
        .iter()
        .map(String::as_str)
        .collect();
    let mut builder = WriterProperties::builder()
        .set_compression(compression(&opts.compression)?)
        .set_dictionary_page_size_limit(opts.dictionary_page_limit)
        .set_data_page_size_limit(opts.data_page_size)
        // Chunk statistics, as the other base files carry, and no page index: a copied chunk
        // comes without its page locations, and a file has them for every chunk or for none.
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_offset_index_disabled(true)
        .set_key_value_metadata(Some(
            opts.key_value
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                .collect(),
        ));
    for column in schema.columns() {
        let path = column.path().clone();
        let top = path.parts()[0].as_str();
        builder = builder.set_column_dictionary_enabled(path.clone(), dictionary.contains(top));
        if no_stats.contains(top) {
            builder = builder.set_column_statistics_enabled(path, EnabledStatistics::None);
        }
    }
    Ok(Arc::new(builder.build()))
}

fn parquet_err(e: parquet::errors::ParquetError) -> Error {
    Error::InvalidArgument(format!("writing spliced base file: {e}"))
}

/// Writes the new base file: each row group of ``plan`` in order, each field either encoded
/// from the plan's rows or copied from the replaced file. ``schema`` is the rows' Arrow schema
/// (dictionary fields allowed). None when the replaced file does not store those columns the
/// way this writer would (``ReplacedFile::holds``): the caller writes the rows another way.
pub fn write_spliced(
    old: &ReplacedFile,
    schema: &SchemaRef,
    plan: &[RowGroupPlan],
    opts: &EncodeOptions,
) -> Result<Option<Vec<u8>>> {
    if !old.holds(schema) {
        return Ok(None);
    }
    let descr = old.schema();
    let root = descr.root_schema_ptr();
    let fields = root.get_fields();
    let props = properties(descr, opts)?;
    // Room for the copied chunks and the encoded rows (at most their in-memory size, most of
    // the time): no regrowth of the buffer while chunks go in.
    let encoded: usize = plan
        .iter()
        .flat_map(|g| g.batches.iter())
        .map(|b| b.get_array_memory_size())
        .sum();
    let capacity = old.bytes.len() + encoded;
    let mut writer =
        SerializedFileWriter::new(Vec::with_capacity(capacity), root.clone(), props.clone())
            .map_err(parquet_err)?;
    let factory = ArrowRowGroupWriterFactory::new(&writer, schema.clone());
    let old_groups = old.metadata.row_groups();
    for (index, group) in plan.iter().enumerate() {
        if group.sources.len() != fields.len() {
            return Err(Error::InvalidArgument(format!(
                "{} chunk sources for {} fields",
                group.sources.len(),
                fields.len()
            )));
        }
        let rows: usize = group.batches.iter().map(|b| b.num_rows()).sum();
        let mut column_writers: Vec<Option<ArrowColumnWriter>> = factory
            .create_column_writers(index)
            .map_err(parquet_err)?
            .into_iter()
            .map(Some)
            .collect();
        let mut row_group = writer.next_row_group().map_err(parquet_err)?;
        let mut leaf = 0;
        for (i, (field, source)) in schema.fields().iter().zip(&group.sources).enumerate() {
            let leaves = leaf_count(&fields[i]);
            match *source {
                ChunkSource::Copy(g) => {
                    let from = old_groups.get(g).ok_or_else(|| {
                        Error::InvalidArgument(format!("no row group {g} in the replaced file"))
                    })?;
                    if from.num_rows() as usize != rows {
                        return Err(Error::InvalidArgument(format!(
                            "row group {g} of the replaced file has {} rows, the new one {rows}",
                            from.num_rows()
                        )));
                    }
                    for c in leaf..leaf + leaves {
                        let chunk = from.column(c).clone();
                        let close = ColumnCloseResult {
                            bytes_written: chunk.compressed_size() as u64,
                            rows_written: rows as u64,
                            metadata: chunk,
                            bloom_filter: None,
                            column_index: None,
                            offset_index: None,
                        };
                        row_group
                            .append_column(&old.bytes, close)
                            .map_err(parquet_err)?;
                    }
                }
                ChunkSource::Encode => {
                    for batch in &group.batches {
                        let array = batch.column(i);
                        let parts = compute_leaves(field, array).map_err(parquet_err)?;
                        for (c, part) in (leaf..leaf + leaves).zip(parts) {
                            let w = column_writers[c].as_mut().ok_or_else(|| {
                                Error::InvalidArgument("column writer used twice".into())
                            })?;
                            w.write(&part).map_err(parquet_err)?;
                        }
                    }
                    for w in column_writers[leaf..leaf + leaves].iter_mut() {
                        let w = w.take().ok_or_else(|| {
                            Error::InvalidArgument("column writer used twice".into())
                        })?;
                        w.close()
                            .map_err(parquet_err)?
                            .append_to_row_group(&mut row_group)
                            .map_err(parquet_err)?;
                    }
                }
            }
            leaf += leaves;
        }
        row_group.close().map_err(parquet_err)?;
    }
    writer.into_inner().map(Some).map_err(parquet_err)
}

#[cfg(test)]
mod tests;
