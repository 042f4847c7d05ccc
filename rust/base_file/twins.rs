//! Columns a base file stores twice, decoded once.
//!
//! A Hudi base file of a table keyed by one string field holds every key twice: in the field
//! and in `_hoodie_record_key`. Both column chunks are written from the same values with the
//! same settings, so their bytes are the same, and decoding the second repeats the work of the
//! first (a fifth of a typical file's decode). Two top-level primitive columns whose schema
//! types and column chunk bytes are equal in every row group decode to equal arrays, so the
//! second can share the first's. Anything short of byte equality is decoded as usual.

use arrow_schema::Schema;
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use parquet::file::reader::ChunkReader;
use parquet::schema::types::{ColumnDescPtr, SchemaDescriptor};

use crate::error::{Error, Result};

/// For each of `roots` (top-level column indices, ascending), the earlier root among them
/// whose values it repeats, if any: a twin is decoded from its source's array. A source is
/// never itself a twin.
pub fn twin_sources<R: ChunkReader>(
    file: &R,
    metadata: &ParquetMetaData,
    arrow: &Schema,
    roots: &[usize],
) -> Result<Vec<Option<usize>>> {
    let schema = metadata.file_metadata().schema_descr();
    let leaves = primitive_leaves(schema);
    let mut sources = vec![None; roots.len()];
    for (j, &twin) in roots.iter().enumerate() {
        let Some(twin_leaf) = leaves.get(twin).copied().flatten() else {
            continue;
        };
        for (i, &source) in roots[..j].iter().enumerate() {
            if sources[i].is_some() {
                continue;
            }
            let Some(source_leaf) = leaves.get(source).copied().flatten() else {
                continue;
            };
            let same_type = arrow.fields().get(source).map(|f| f.data_type())
                == arrow.fields().get(twin).map(|f| f.data_type());
            if same_type
                && same_column_type(&schema.column(source_leaf), &schema.column(twin_leaf))
                && same_chunks(file, metadata, source_leaf, twin_leaf)?
            {
                sources[j] = Some(source);
                break;
            }
        }
    }
    Ok(sources)
}

/// Per top-level column, its leaf column when it is a primitive column (nested ones have
/// several leaves and are never twins).
fn primitive_leaves(schema: &SchemaDescriptor) -> Vec<Option<usize>> {
    let roots = schema.root_schema().get_fields();
    let mut leaves = vec![None; roots.len()];
    for leaf in 0..schema.num_columns() {
        let root = schema.get_column_root_idx(leaf);
        if roots.get(root).is_some_and(|r| r.is_primitive()) {
            leaves[root] = Some(leaf);
        }
    }
    leaves
}

fn same_column_type(a: &ColumnDescPtr, b: &ColumnDescPtr) -> bool {
    a.physical_type() == b.physical_type()
        && a.logical_type_ref() == b.logical_type_ref()
        && a.converted_type() == b.converted_type()
        && a.type_length() == b.type_length()
        && a.type_precision() == b.type_precision()
        && a.type_scale() == b.type_scale()
        && a.max_def_level() == b.max_def_level()
        && a.max_rep_level() == b.max_rep_level()
}

/// Whether the two leaves' column chunks hold the same bytes in every row group. The cheap
/// footer fields are compared in all row groups before any byte is read.
fn same_chunks<R: ChunkReader>(
    file: &R,
    metadata: &ParquetMetaData,
    a: usize,
    b: usize,
) -> Result<bool> {
    let mut ranges = Vec::with_capacity(metadata.num_row_groups());
    for row_group in metadata.row_groups() {
        let (Some(x), Some(y)) = (row_group.columns().get(a), row_group.columns().get(b)) else {
            return Ok(false);
        };
        let same_footer = x.compression() == y.compression()
            && x.num_values() == y.num_values()
            && x.compressed_size() == y.compressed_size()
            && x.uncompressed_size() == y.uncompressed_size();
        let (Some(rx), Some(ry)) = (chunk_range(x), chunk_range(y)) else {
            return Ok(false);
        };
        if !same_footer {
            return Ok(false);
        }
        ranges.push((rx, ry));
    }
    for ((start_x, len), (start_y, _)) in ranges {
        let read = |start| {
            file.get_bytes(start, len)
                .map_err(|e| Error::Corrupt(format!("reading base file: {e}")))
        };
        if read(start_x)? != read(start_y)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A column chunk's byte range (start, length), or None for offsets a valid footer never has.
fn chunk_range(chunk: &ColumnChunkMetaData) -> Option<(u64, usize)> {
    let start = chunk
        .dictionary_page_offset()
        .unwrap_or(chunk.data_page_offset());
    Some((
        u64::try_from(start).ok()?,
        usize::try_from(chunk.compressed_size()).ok()?,
    ))
}
