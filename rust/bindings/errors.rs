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
