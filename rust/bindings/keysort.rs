//! Python binding of the record-key sort.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3_arrow::PyArray;

use super::errors::to_py_err;

/// Row indices that sort a string or binary array ascending by bytes, stably, nulls last;
/// returns a `pyarrow.UInt64Array` (what `pyarrow.compute.sort_indices` gives for one key).
#[pyfunction]
fn sort_key_indices<'py>(py: Python<'py>, keys: PyArray) -> PyResult<Bound<'py, PyAny>> {
    let indices = py
        .detach(|| crate::keysort::sort_indices(keys.as_ref().as_ref()))
        .map_err(to_py_err)?;
    let exported = Bound::new(py, PyArray::from_array_ref(Arc::new(indices)))?;
    py.import("pyarrow")?.getattr("array")?.call1((exported,))
}

/// Adds the key sort to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sort_key_indices, m)?)?;
    Ok(())
}
