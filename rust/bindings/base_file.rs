//! Python handle over base-file decoding: an iterator of pyarrow record batches.

use std::sync::Mutex;

use parquet::file::reader::ChunkReader;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3_arrow::{PyArray, PyRecordBatch, PySchema};

use super::errors::{io_error, to_py_err};
use super::file_bytes::file_bytes;
use crate::base_file::BaseFileBatches;

/// The record batches of a base file, decoded with the GIL released.
///
/// ``BaseFileReader(path, columns=None, batch_size=65536)`` reads a local file, and
/// ``BaseFileReader.from_bytes(data, columns=None, batch_size=65536)`` a file in memory (``data``
/// a ``pyarrow.UInt8Array`` over its bytes, not copied). ``columns`` are the top-level columns
/// to decode (file order; names the file lacks are skipped). Raises UnsupportedError at open for
/// a file compressed with a codec this build lacks, CorruptDataError for bytes that are not a
/// readable parquet file, and OSError when the file cannot be opened.
#[pyclass(module = "shoal._native", name = "BaseFileReader")]
pub struct PyBaseFileReader {
    // Python objects are shared between threads; the decoder is not, so one at a time.
    inner: Mutex<BaseFileBatches>,
}

#[pymethods]
impl PyBaseFileReader {
    #[new]
    #[pyo3(signature = (path, columns = None, batch_size = 65536))]
    fn new(
        py: Python<'_>,
        path: String,
        columns: Option<Vec<String>>,
        batch_size: usize,
    ) -> PyResult<Self> {
        let file = py
            .detach(|| std::fs::File::open(&path))
            .map_err(|e| io_error(&path, &e))?;
        Self::open(py, file, columns, batch_size)
    }

    /// A reader over a base file's bytes in memory (a ``pyarrow.UInt8Array``).
    #[staticmethod]
    #[pyo3(signature = (data, columns = None, batch_size = 65536))]
    fn from_bytes(
        py: Python<'_>,
        data: PyArray,
        columns: Option<Vec<String>>,
        batch_size: usize,
    ) -> PyResult<Self> {
        let bytes = file_bytes(&data, "base file bytes")?;
        Self::open(py, bytes, columns, batch_size)
    }

    /// The batches' ``pyarrow.Schema``.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let schema = py.detach(|| self.with_batches(|b| b.schema()))?;
        PySchema::new(schema).into_pyarrow(py)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let next = py.detach(|| self.with_batches(|b| b.next_batch()))?;
        match next.map_err(to_py_err)? {
            Some(batch) => Ok(Some(PyRecordBatch::new(batch).into_pyarrow(py)?)),
            None => Ok(None),
        }
    }
}

impl PyBaseFileReader {
    /// Opens the decoder over `file` without the GIL (it reads and parses the footer).
    fn open<R: ChunkReader + 'static>(
        py: Python<'_>,
        file: R,
        columns: Option<Vec<String>>,
        batch_size: usize,
    ) -> PyResult<Self> {
        let inner = py
            .detach(|| BaseFileBatches::open(file, columns.as_deref(), batch_size))
            .map_err(to_py_err)?;
        Ok(Self {
            inner: Mutex::new(inner),
        })
    }

    /// Runs `f` on the decoder. Called without the GIL, and `f` must not take it: a thread
    /// waiting for the lock while holding the GIL would otherwise wait forever.
    fn with_batches<T>(&self, f: impl FnOnce(&mut BaseFileBatches) -> T) -> PyResult<T> {
        // A poisoned lock means a decode panicked midway: the reader's state is unknown. The
        // error is built lazily, without the GIL.
        let mut batches = self
            .inner
            .lock()
            .map_err(|_| PyOSError::new_err("base file reader failed earlier and cannot go on"))?;
        Ok(f(&mut batches))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBaseFileReader>()?;
    Ok(())
}
