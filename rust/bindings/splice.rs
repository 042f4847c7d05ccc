//! Python binding of spliced base-file writes (copy-on-write merges).

use std::sync::Arc;

use arrow_array::UInt8Array;
use arrow_buffer::Buffer;
use pyo3::prelude::*;
use pyo3_arrow::{PyArray, PySchema, PyTable};

use super::errors::{guarded_import, to_py_err};
use super::file_bytes::file_bytes;
use crate::splice::{ChunkSource, EncodeOptions, ReplacedFile, RowGroupPlan};

/// Writes a merged base file that copies unchanged column chunks from the replaced one.
///
/// ``old``: the replaced file's bytes as a ``pyarrow.UInt8Array`` (zero-copy over a buffer).
/// ``row_groups``: for each row group of the new file, its rows (a ``pyarrow.Table`` of
/// ``schema``) and, per top-level field, the replaced file's row group to copy the field's
/// chunks from, or -1 to encode them from the rows. Returns the new file's bytes as a
/// ``pyarrow.UInt8Array``, or None when the replaced file does not store ``schema``'s columns
/// the way this writer would (the caller then writes the rows another way).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (old, schema, row_groups, compression, dictionary_fields, no_statistics_fields, dictionary_page_limit, data_page_size, key_value))]
fn splice_base_file<'py>(
    py: Python<'py>,
    old: PyArray,
    schema: PySchema,
    row_groups: Vec<(Bound<'py, PyAny>, Vec<i64>)>,
    compression: String,
    dictionary_fields: Vec<String>,
    no_statistics_fields: Vec<String>,
    dictionary_page_limit: usize,
    data_page_size: usize,
    key_value: Vec<(String, String)>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let old_bytes = file_bytes(&old, "old file bytes")?;
    let schema = Arc::new(schema.into_inner().as_ref().clone());
    let mut plan = Vec::with_capacity(row_groups.len());
    for (table, sources) in row_groups {
        let (batches, _) = guarded_import("a row group's table", || {
            Ok(table.extract::<PyTable>()?.into_inner())
        })?;
        let sources = sources
            .into_iter()
            .map(|s| match usize::try_from(s) {
                Ok(g) => ChunkSource::Copy(g),
                Err(_) => ChunkSource::Encode,
            })
            .collect();
        plan.push(RowGroupPlan { batches, sources });
    }
    let opts = EncodeOptions {
        compression,
        dictionary_fields,
        no_statistics_fields,
        dictionary_page_limit,
        data_page_size,
        key_value,
    };
    let written = py
        .detach(|| -> crate::Result<Option<Vec<u8>>> {
            let old = ReplacedFile::parse(old_bytes)?;
            crate::splice::write_spliced(&old, &schema, &plan, &opts)
        })
        .map_err(to_py_err)?;
    written
        .map(|b| {
            let array = UInt8Array::new(Buffer::from_vec(b).into(), None);
            let exported = Bound::new(py, PyArray::from_array_ref(Arc::new(array)))?;
            py.import("pyarrow")?.getattr("array")?.call1((exported,))
        })
        .transpose()
}

/// Adds spliced base-file writes to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(splice_base_file, m)?)?;
    Ok(())
}
