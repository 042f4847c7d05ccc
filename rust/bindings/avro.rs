//! Python bindings of Avro container files and the Arrow <-> Avro schema mapping.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::PySchema;

use super::errors::to_py_err;
use crate::avro;

/// Decodes an Avro object container file to JSON text: an array of its records.
#[pyfunction]
fn avro_container_decode(py: Python<'_>, data: &[u8]) -> PyResult<String> {
    py.detach(|| avro::container_to_json(data))
        .map_err(to_py_err)
}

/// Encodes records (JSON text, an array) with a writer schema (JSON text) into an Avro object
/// container file, codec null.
#[pyfunction]
fn avro_container_encode<'py>(
    py: Python<'py>,
    schema_json: &str,
    records_json: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = py
        .detach(|| avro::json_to_container(schema_json, records_json))
        .map_err(to_py_err)?;
    Ok(PyBytes::new(py, &bytes))
}

/// The Avro writer schema (JSON text) Spark/Hudi would write for an Arrow schema.
#[pyfunction]
fn arrow_to_avro_schema(schema: PySchema, record_name: &str, namespace: &str) -> PyResult<String> {
    avro::arrow_to_avro_schema(schema.as_ref(), record_name, namespace).map_err(to_py_err)
}

/// The `pyarrow.Schema` of an Avro record schema given as JSON text.
#[pyfunction]
fn avro_to_arrow_schema<'py>(py: Python<'py>, schema_json: &str) -> PyResult<Bound<'py, PyAny>> {
    let schema = avro::avro_to_arrow_schema(schema_json).map_err(to_py_err)?;
    PySchema::new(Arc::new(schema)).into_pyarrow(py)
}

/// Adds the Avro functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(avro_container_decode, m)?)?;
    m.add_function(wrap_pyfunction!(avro_container_encode, m)?)?;
    m.add_function(wrap_pyfunction!(arrow_to_avro_schema, m)?)?;
    m.add_function(wrap_pyfunction!(avro_to_arrow_schema, m)?)?;
    Ok(())
}
