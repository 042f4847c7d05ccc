//! A file's bytes handed over from Python as a `pyarrow.UInt8Array`, without a copy.

use arrow_array::{Array, UInt8Array};
use arrow_buffer::Buffer;
use bytes::Bytes;
use pyo3::prelude::*;
use pyo3_arrow::PyArray;

use super::errors::to_py_err;
use crate::error::Error;

/// An Arrow buffer as the owner of `Bytes`: the file's bytes are never copied.
struct Owned(Buffer);

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

/// The bytes of `array`, which must be a uint8 array without nulls (`what` names it in errors).
pub fn file_bytes(array: &PyArray, what: &str) -> PyResult<Bytes> {
    let array = array.as_ref();
    let bytes = array
        .as_any()
        .downcast_ref::<UInt8Array>()
        .ok_or_else(|| to_py_err(Error::InvalidArgument(format!("{what} must be uint8"))))?;
    if bytes.null_count() > 0 {
        return Err(to_py_err(Error::InvalidArgument(format!(
            "{what} hold nulls"
        ))));
    }
    let values = bytes.values();
    let owner: Buffer = values.inner().clone();
    Ok(Bytes::from_owner(Owned(owner)))
}
