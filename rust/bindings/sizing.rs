//! Python binding of record-size sampling.

use pyo3::prelude::*;
use pyo3_arrow::PyRecordBatch;

use super::errors::{guarded_import, to_py_err};
use crate::sizing::DEFAULT_SAMPLE_EVERY;

/// Average record size in bytes of a record batch, measuring rows 0, every, 2*every, ...;
/// returns `(average_bytes, sampled_rows)`.
#[pyfunction]
#[pyo3(signature = (record_batch, every = DEFAULT_SAMPLE_EVERY))]
fn estimate_record_size(
    py: Python<'_>,
    record_batch: &Bound<'_, PyAny>,
    every: usize,
) -> PyResult<(f64, u64)> {
    let batch = guarded_import("the record batch", || {
        Ok(record_batch.extract::<PyRecordBatch>()?.into_inner())
    })?;
    py.detach(|| crate::sizing::estimate_record_size(&batch, every))
        .map_err(to_py_err)
}

/// Adds record-size sampling to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(estimate_record_size, m)?)?;
    Ok(())
}
