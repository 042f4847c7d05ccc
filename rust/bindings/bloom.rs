//! Python handle over `bloom::BloomFilter`.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::PyArray;

use super::errors::to_py_err;
use crate::bloom::{
    footer_for_keys, BloomFilter, BloomFilterType, DEFAULT_FPP, DEFAULT_MAX_ENTRIES,
    DEFAULT_NUM_ENTRIES,
};

/// A Hudi bloom filter (SIMPLE or DYNAMIC_V0), byte-compatible with Hudi's footer filters.
#[pyclass(name = "BloomFilter", module = "shoal._native")]
pub struct PyBloomFilter {
    inner: BloomFilter,
}

#[pymethods]
impl PyBloomFilter {
    /// An empty DYNAMIC_V0 filter (Hudi's default type and sizing).
    #[staticmethod]
    #[pyo3(signature = (num_entries = DEFAULT_NUM_ENTRIES, fpp = DEFAULT_FPP, max_entries = DEFAULT_MAX_ENTRIES))]
    fn dynamic_v0(num_entries: i32, fpp: f64, max_entries: i32) -> PyResult<Self> {
        let inner = BloomFilter::dynamic_v0(num_entries, fpp, max_entries).map_err(to_py_err)?;
        Ok(PyBloomFilter { inner })
    }

    /// An empty SIMPLE filter sized for `num_entries` keys at false-positive rate `fpp`.
    #[staticmethod]
    #[pyo3(signature = (num_entries = DEFAULT_NUM_ENTRIES, fpp = DEFAULT_FPP))]
    fn simple(num_entries: i32, fpp: f64) -> PyResult<Self> {
        let inner = BloomFilter::simple(num_entries, fpp).map_err(to_py_err)?;
        Ok(PyBloomFilter { inner })
    }

    /// Parses a footer value (`org.apache.hudi.bloomfilter`); `type_code` is the
    /// `hoodie_bloom_filter_type_code` value, None meaning SIMPLE.
    #[staticmethod]
    #[pyo3(signature = (value, type_code = None))]
    fn from_footer(py: Python<'_>, value: &str, type_code: Option<&str>) -> PyResult<Self> {
        let inner = py
            .detach(|| BloomFilter::from_footer(value, type_code))
            .map_err(to_py_err)?;
        Ok(PyBloomFilter { inner })
    }

    /// Adds one key.
    fn add(&mut self, key: &str) {
        self.inner.add(key.as_bytes());
    }

    /// Adds every key of a string array (nulls are an error and add nothing).
    fn add_keys(&mut self, py: Python<'_>, keys: PyArray) -> PyResult<()> {
        let inner = &mut self.inner;
        py.detach(|| inner.add_array(keys.as_ref().as_ref()))
            .map_err(to_py_err)
    }

    /// Whether the key may be in the filter.
    fn might_contain(&self, key: &str) -> bool {
        self.inner.might_contain(key.as_bytes())
    }

    /// Probes every key of a string array; returns a `pyarrow.BooleanArray` (null for null keys).
    fn might_contain_batch<'py>(
        &self,
        py: Python<'py>,
        keys: PyArray,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = &self.inner;
        let result = py
            .detach(|| inner.might_contain_array(keys.as_ref().as_ref()))
            .map_err(to_py_err)?;
        // `PyArray::to_pyarrow` borrows the array for the result's lifetime; hand pyarrow an
        // owned capsule-exporting object instead (same conversion, no copy).
        let exported = Bound::new(py, PyArray::from_array_ref(Arc::new(result)))?;
        py.import("pyarrow")?.getattr("array")?.call1((exported,))
    }

    /// The footer value: base64 of the serialized filter.
    fn to_footer(&self, py: Python<'_>) -> String {
        let inner = &self.inner;
        py.detach(|| inner.to_footer())
    }

    /// The serialized filter bytes (Hadoop `Writable` layout).
    fn serialize<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let inner = &self.inner;
        let bytes = py.detach(|| inner.serialize());
        PyBytes::new(py, &bytes)
    }

    /// "DYNAMIC_V0" or "SIMPLE".
    #[getter]
    fn type_code(&self) -> &'static str {
        self.inner.filter_type().code()
    }

    /// Number of hash functions.
    #[getter]
    fn num_hashes(&self) -> u32 {
        self.inner.num_hashes()
    }

    /// Bits per row.
    #[getter]
    fn vector_size(&self) -> u32 {
        self.inner.vector_size()
    }

    fn __repr__(&self) -> String {
        format!(
            "BloomFilter(type_code={:?}, num_hashes={}, vector_size={})",
            self.type_code(),
            self.num_hashes(),
            self.vector_size()
        )
    }
}

/// Builds a filter over a string array of record keys and returns its footer value.
#[pyfunction]
#[pyo3(signature = (keys, num_entries = DEFAULT_NUM_ENTRIES, fpp = DEFAULT_FPP, max_entries = DEFAULT_MAX_ENTRIES, type_code = "DYNAMIC_V0"))]
fn bloom_footer_for_keys(
    py: Python<'_>,
    keys: PyArray,
    num_entries: i32,
    fpp: f64,
    max_entries: i32,
    type_code: &str,
) -> PyResult<String> {
    let ty = BloomFilterType::from_code(Some(type_code)).map_err(to_py_err)?;
    py.detach(|| footer_for_keys(keys.as_ref().as_ref(), num_entries, fpp, max_entries, ty))
        .map_err(to_py_err)
}

/// Adds the bloom filter API to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBloomFilter>()?;
    m.add_function(wrap_pyfunction!(bloom_footer_for_keys, m)?)?;
    Ok(())
}
