//! Python binding of the merge-on-read kernel.

use arrow_array::{cast::AsArray, Array, BooleanArray, StringArray, UInt32Array};
use arrow_schema::DataType;
use pyo3::prelude::*;
use pyo3_arrow::PyArray;

use crate::error::Error;
use crate::merge::{merge_records as core_merge, EntryKind, MergeMode};

fn err(e: Error) -> PyErr {
    super::errors::to_py_err(e)
}

fn strings(a: &PyArray, what: &str) -> PyResult<StringArray> {
    let arr = a.as_ref();
    match arr.data_type() {
        DataType::Utf8 => Ok(arr.as_string::<i32>().clone()),
        other => Err(err(Error::InvalidArgument(format!(
            "{what} must be utf8, got {other}"
        )))),
    }
}

fn ranks(a: Option<&PyArray>) -> PyResult<Option<Vec<u64>>> {
    let Some(a) = a else { return Ok(None) };
    let arr = a.as_ref();
    match arr.data_type() {
        DataType::UInt64 => Ok(Some(
            arr.as_primitive::<arrow_array::types::UInt64Type>()
                .values()
                .to_vec(),
        )),
        other => Err(err(Error::InvalidArgument(format!(
            "ranks must be uint64, got {other}"
        )))),
    }
}

/// Decides which versions survive a merge-on-read merge.
///
/// Returns ``(base_keep: BooleanArray, log_take: UInt32Array)``: the base rows to keep and the
/// indices of the log entries that are the final version of their key, ascending. ``kinds`` is
/// int8: 0 record, 1 delete ordered by ``log_rank``, 2 delete that always applies.
#[pyfunction]
#[pyo3(signature = (base_keys, base_rank, log_keys, log_rank, kinds, event_time))]
fn merge_records<'py>(
    py: Python<'py>,
    base_keys: PyArray,
    base_rank: Option<PyArray>,
    log_keys: PyArray,
    log_rank: Option<PyArray>,
    kinds: PyArray,
    event_time: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let base = strings(&base_keys, "base_keys")?;
    let log = strings(&log_keys, "log_keys")?;
    if base.null_count() > 0 || log.null_count() > 0 {
        return Err(err(Error::InvalidArgument(
            "record keys must not be null".into(),
        )));
    }
    let base_rank = ranks(base_rank.as_ref())?;
    let log_rank = ranks(log_rank.as_ref())?;
    let kinds_arr = kinds.as_ref();
    if kinds_arr.data_type() != &DataType::Int8 {
        return Err(err(Error::InvalidArgument("kinds must be int8".into())));
    }
    let kinds: Vec<EntryKind> = kinds_arr
        .as_primitive::<arrow_array::types::Int8Type>()
        .values()
        .iter()
        .map(|k| EntryKind::try_from(*k))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let mode = if event_time {
        MergeMode::EventTime
    } else {
        MergeMode::CommitTime
    };
    let outcome = py
        .detach(|| {
            core_merge(
                base.iter().map(|k| k.unwrap_or_default()),
                base_rank.as_deref(),
                log.iter().map(|k| k.unwrap_or_default()),
                log_rank.as_deref(),
                &kinds,
                mode,
            )
        })
        .map_err(err)?;
    let keep = PyArray::from_array_ref(std::sync::Arc::new(BooleanArray::from(outcome.base_keep)));
    let take = PyArray::from_array_ref(std::sync::Arc::new(UInt32Array::from(outcome.log_take)));
    // to_pyarrow borrows the handle; unbind so the pyarrow objects outlive it.
    let keep = keep.to_pyarrow(py)?.unbind();
    let take = take.to_pyarrow(py)?.unbind();
    Ok((keep.into_bound(py), take.into_bound(py)))
}

/// Registers the merge kernel on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(merge_records, m)?)?;
    Ok(())
}
