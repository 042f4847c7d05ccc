//! Python binding of meta column values.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3_arrow::PyArray;

/// `_hoodie_commit_seqno` values `<prefix><index>` for indices `start..start + n`, as a
/// `pyarrow.StringArray`.
#[pyfunction]
fn commit_seqnos<'py>(
    py: Python<'py>,
    prefix: &str,
    start: u64,
    n: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let values = py.detach(|| crate::meta::commit_seqnos(prefix, start, n));
    let exported = Bound::new(py, PyArray::from_array_ref(Arc::new(values)))?;
    py.import("pyarrow")?.getattr("array")?.call1((exported,))
}

/// Adds meta column values to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(commit_seqnos, m)?)?;
    Ok(())
}
