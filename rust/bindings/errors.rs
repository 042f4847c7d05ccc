//! Mapping of core errors to the Python exception hierarchy of `shoal.errors`.

use pyo3::prelude::*;

use crate::error::Error;

/// Raises a core error as the matching `shoal.errors` class (CorruptDataError,
/// InvalidArgumentError, UnsupportedError), so Python callers catch one hierarchy.
pub fn to_py_err(e: Error) -> PyErr {
    let (class, message) = match &e {
        Error::Corrupt(m) => ("CorruptDataError", m.clone()),
        Error::InvalidArgument(m) => ("InvalidArgumentError", m.clone()),
        Error::Unsupported(m) => ("UnsupportedError", m.clone()),
    };
    Python::attach(|py| {
        match py
            .import("shoal.errors")
            .and_then(|m| m.getattr(class))
            .and_then(|c| c.call1((message,)))
        {
            Ok(exc) => PyErr::from_value(exc),
            Err(import_failed) => import_failed,
        }
    })
}

/// Raises a failed file access as Python's own type for it: FileNotFoundError for a missing
/// file (a concurrent clean or rollback deletes files a read planned with, and callers retry on
/// that type), OSError otherwise; the message names the file.
pub fn io_error(path: &str, e: &std::io::Error) -> PyErr {
    let message = format!("{path}: {e}");
    match e.kind() {
        std::io::ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(message),
        _ => pyo3::exceptions::PyOSError::new_err(message),
    }
}

/// Runs `import` (turning Python Arrow objects into arrow-rs values) and returns its result; a
/// panic inside it becomes InvalidArgumentError. arrow-rs checks imported arrays with
/// assertions, so arrays it cannot take (some it imports wrongly, see `shoal.arrays.importable`)
/// would otherwise surface as a PanicException, which `except Exception` does not catch.
pub fn guarded_import<T>(what: &str, import: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(import)).unwrap_or_else(|payload| {
        let reason = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        Err(to_py_err(Error::InvalidArgument(format!(
            "cannot import {what} from Arrow: {reason}"
        ))))
    })
}
