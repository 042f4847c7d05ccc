//! Python bindings of record-key ordering: sort and bounds.

use std::sync::Arc;

use arrow_array::UInt64Array;
use pyo3::prelude::*;
use pyo3_arrow::PyArray;

use super::errors::to_py_err;
use crate::error::Error;

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

/// The least and greatest key of a string array in UTF-16 code-unit order (Java's
/// `String.compareTo`, what Hudi's footer min/max record keys are in), nulls ignored; None if no
/// key is valid.
#[pyfunction]
fn key_bounds(py: Python<'_>, keys: PyArray) -> PyResult<Option<(String, String)>> {
    let bounds = py
        .detach(|| crate::keysort::bounds(keys.as_ref().as_ref()))
        .map_err(to_py_err)?;
    bounds
        .map(|(lo, hi)| {
            let text = |b: Vec<u8>| {
                String::from_utf8(b).map_err(|e| {
                    to_py_err(Error::InvalidArgument(format!("key is not UTF-8: {e}")))
                })
            };
            Ok((text(lo)?, text(hi)?))
        })
        .transpose()
}

/// Whether no two valid keys of a string or binary array are equal (nulls ignored).
#[pyfunction]
fn keys_distinct(py: Python<'_>, keys: PyArray) -> PyResult<bool> {
    py.detach(|| crate::keysort::all_distinct(keys.as_ref().as_ref()))
        .map_err(to_py_err)
}

/// For each key of `probe`, whether `stored` holds it (null keys: false); both string or binary
/// arrays. Returns a `pyarrow.BooleanArray`.
#[pyfunction]
fn keys_held_by<'py>(
    py: Python<'py>,
    probe: PyArray,
    stored: PyArray,
) -> PyResult<Bound<'py, PyAny>> {
    let held = py
        .detach(|| crate::keysort::held_by(probe.as_ref().as_ref(), stored.as_ref().as_ref()))
        .map_err(to_py_err)?;
    let exported = Bound::new(py, PyArray::from_array_ref(Arc::new(held)))?;
    py.import("pyarrow")?.getattr("array")?.call1((exported,))
}

/// The stable 64-bit hash of every key of a string or binary array (`crate::keyhash`); returns a
/// `pyarrow.UInt64Array`.
#[pyfunction]
fn key_hashes<'py>(py: Python<'py>, keys: PyArray) -> PyResult<Bound<'py, PyAny>> {
    let hashes = py
        .detach(|| crate::keyhash::key_hashes(keys.as_ref().as_ref()))
        .map_err(to_py_err)?;
    let exported = Bound::new(
        py,
        PyArray::from_array_ref(Arc::new(UInt64Array::from(hashes))),
    )?;
    py.import("pyarrow")?.getattr("array")?.call1((exported,))
}

/// For each key of a string or binary array, whether it lies within `[lo, hi]` in UTF-16
/// code-unit order, as Hudi's bloom index tests keys against a footer's min/max record key (null
/// keys give null). Returns a `pyarrow.BooleanArray`.
#[pyfunction]
fn keys_in_range<'py>(
    py: Python<'py>,
    keys: PyArray,
    lo: &str,
    hi: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let (lo, hi) = (lo.as_bytes(), hi.as_bytes());
    let inside = py
        .detach(|| crate::keysort::in_range(keys.as_ref().as_ref(), lo, hi))
        .map_err(to_py_err)?;
    let exported = Bound::new(py, PyArray::from_array_ref(Arc::new(inside)))?;
    py.import("pyarrow")?.getattr("array")?.call1((exported,))
}

/// Adds record-key ordering to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sort_key_indices, m)?)?;
    m.add_function(wrap_pyfunction!(key_bounds, m)?)?;
    m.add_function(wrap_pyfunction!(keys_distinct, m)?)?;
    m.add_function(wrap_pyfunction!(keys_held_by, m)?)?;
    m.add_function(wrap_pyfunction!(keys_in_range, m)?)?;
    m.add_function(wrap_pyfunction!(key_hashes, m)?)?;
    Ok(())
}
