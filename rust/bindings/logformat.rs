//! Python handles over `crate::logformat`: encode blocks, read and scan log files.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use pyo3_arrow::input::{AnyArray, AnyRecordBatch};
use pyo3_arrow::PyRecordBatch;

use crate::avro::log_block::{decode_json_content, encode_json_block};
use crate::error::Error;
use crate::logformat::avro_data::{
    avro_data_record_count, decode_avro_data_content, encode_avro_data_block as core_encode_avro,
};
use crate::logformat::block::{encode_command_block, rollback_header, Header, HeaderKey};
use crate::logformat::delete::{
    decode_delete_content, deletes_to_arrow, encode_delete_block as core_encode_delete,
};
use crate::logformat::reader::read_blocks;
use crate::logformat::scanner::{scan_log_files as core_scan, ScanOptions};
use crate::logformat::{BlockType, LogBlock};

use super::errors::{guarded_import, io_error, to_py_err};

/// One block of a log file, holding its file's bytes so content decodes lazily.
#[pyclass(name = "LogBlock", module = "shoal._native", frozen)]
pub struct PyLogBlock {
    file: Arc<[u8]>,
    file_index: usize,
    block: LogBlock,
}

fn header_dict<'py>(py: Python<'py>, entries: &Header) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in entries {
        d.set_item(k.name(), v)?;
    }
    Ok(d)
}

impl PyLogBlock {
    fn content_bytes(&self) -> &[u8] {
        self.block.content(&self.file)
    }

    fn expect_type(&self, wanted: BlockType, what: &str) -> PyResult<()> {
        let got = self.block.block_type;
        if got == wanted {
            return Ok(());
        }
        let message = format!(
            "{what}() needs a {} but this is a {}",
            wanted.name(),
            got.name()
        );
        // HFile and CDC blocks hold records we do not decode (yet): say so, rather than
        // blaming the caller, and point at the raw bytes.
        Err(to_py_err(match got {
            BlockType::HFileData | BlockType::CdcData => {
                Error::Unsupported(format!("{message}; content() returns its raw bytes"))
            }
            _ => Error::InvalidArgument(message),
        }))
    }
}

#[pymethods]
impl PyLogBlock {
    /// Java's block type name, e.g. ``AVRO_DATA_BLOCK``; ``CORRUPT_BLOCK`` for damaged bytes.
    #[getter]
    fn block_type(&self) -> &'static str {
        self.block.block_type.name()
    }

    /// Byte offset of the block in its file.
    #[getter]
    fn offset(&self) -> usize {
        self.block.offset
    }

    /// Bytes the block occupies (magic through trailing length, or the damaged span).
    #[getter]
    fn size(&self) -> usize {
        self.block.size
    }

    /// Index of the block's file in the input of ``scan_log_files`` (0 for ``read_log_blocks``).
    #[getter]
    fn file_index(&self) -> usize {
        self.file_index
    }

    /// Log format version of the block (1; 0 for corrupt blocks).
    #[getter]
    fn format_version(&self) -> i32 {
        self.block.format_version
    }

    /// Header entries by Hudi key name (``INSTANT_TIME``, ``SCHEMA``, ...), in file order.
    #[getter]
    fn header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        header_dict(py, &self.block.header)
    }

    /// Footer entries (empty in every file Hudi writes today).
    #[getter]
    fn footer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        header_dict(py, &self.block.footer)
    }

    /// The ``INSTANT_TIME`` header, if present.
    #[getter]
    fn instant_time(&self) -> Option<&str> {
        self.block.instant_time()
    }

    /// True for bytes that do not frame as a sound block.
    #[getter]
    fn is_corrupt(&self) -> bool {
        self.block.is_corrupt()
    }

    /// Why a corrupt block was judged corrupt.
    #[getter]
    fn corrupt_reason(&self) -> Option<&str> {
        self.block.corrupt_reason.as_deref()
    }

    /// Record count an Avro data block declares, without decoding; None for other blocks.
    #[getter]
    fn record_count(&self) -> PyResult<Option<usize>> {
        if self.block.block_type != BlockType::AvroData {
            return Ok(None);
        }
        avro_data_record_count(self.content_bytes())
            .map(Some)
            .map_err(to_py_err)
    }

    /// The raw content bytes (a whole Parquet file for PARQUET_DATA_BLOCK, an HFile for
    /// HFILE_DATA_BLOCK, the damaged bytes for CORRUPT_BLOCK).
    fn content<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.content_bytes())
    }

    /// Decodes an AVRO_DATA_BLOCK into a ``pyarrow.RecordBatch`` using the block's SCHEMA
    /// header, resolved to ``reader_schema_json`` when given (fields the writer lacks come
    /// back null or with their default).
    #[pyo3(signature = (reader_schema_json = None))]
    fn records<'py>(
        &self,
        py: Python<'py>,
        reader_schema_json: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.expect_type(BlockType::AvroData, "records")?;
        let schema = self.block.header_value(HeaderKey::Schema).ok_or_else(|| {
            to_py_err(Error::Corrupt(
                "Avro data block has no SCHEMA header".into(),
            ))
        })?;
        let content = self.content_bytes();
        let batch = py
            .detach(|| decode_avro_data_content(content, schema, reader_schema_json))
            .map_err(to_py_err)?;
        PyRecordBatch::new(batch).into_pyarrow(py)
    }

    /// Decodes an AVRO_DATA_BLOCK into JSON text: an array with one value per record, decoded
    /// with the block's SCHEMA header (unions as the bare value of their branch, bytes as
    /// latin-1 strings). For records Arrow cannot hold, such as the archived timeline's.
    fn records_json(&self, py: Python<'_>) -> PyResult<String> {
        self.expect_type(BlockType::AvroData, "records_json")?;
        let schema = self.block.header_value(HeaderKey::Schema).ok_or_else(|| {
            to_py_err(Error::Corrupt(
                "Avro data block has no SCHEMA header".into(),
            ))
        })?;
        let content = self.content_bytes();
        py.detach(|| {
            decode_json_content(content, schema).and_then(|records| {
                serde_json::to_string(&records)
                    .map_err(|e| Error::Unsupported(format!("records do not serialize: {e}")))
            })
        })
        .map_err(to_py_err)
    }

    /// Decodes a DELETE_BLOCK into a ``pyarrow.RecordBatch`` of ``record_key`` (utf8),
    /// ``partition_path`` (utf8) and ``ordering_value``: a dense union whose type ids are the
    /// Avro branches of Java's wrapper union (0 null, 1 boolean, 2 int32, 3 int64, 4 float32,
    /// 5 float64, 6 binary, 7 utf8, 8 date32, 9 decimal128(30,15), 10 time64[us],
    /// 11 timestamp[us, UTC]).
    fn deletes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.expect_type(BlockType::Delete, "deletes")?;
        let content = self.content_bytes();
        let batch = py
            .detach(|| decode_delete_content(content).and_then(|r| deletes_to_arrow(&r)))
            .map_err(to_py_err)?;
        PyRecordBatch::new(batch).into_pyarrow(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "LogBlock({}, offset={}, size={}, instant_time={:?})",
            self.block.block_type.name(),
            self.block.offset,
            self.block.size,
            self.block.instant_time().unwrap_or("")
        )
    }
}

/// Builds a header: the caller's entries first, in their order, then the entries the
/// arguments define that the caller did not place. A caller entry for a key the arguments
/// define must carry the same value (it only fixes the key's position).
fn build_header(
    defined: Vec<(HeaderKey, String)>,
    header: Option<&Bound<'_, PyDict>>,
) -> PyResult<Header> {
    let mut out: Header = Vec::new();
    if let Some(h) = header {
        for (k, v) in h.iter() {
            let name: String = k.extract()?;
            let value: String = v.extract()?;
            let key = HeaderKey::from_name(&name).map_err(to_py_err)?;
            if let Some((_, dv)) = defined.iter().find(|(dk, _)| *dk == key) {
                if *dv != value {
                    return Err(to_py_err(Error::InvalidArgument(format!(
                        "header {name} = {value:?} contradicts the argument {dv:?}"
                    ))));
                }
            }
            out.push((key, value));
        }
    }
    for (k, v) in defined {
        if !out.iter().any(|(ok, _)| *ok == k) {
            out.push((k, v));
        }
    }
    Ok(out)
}

/// One array from a pyarrow Array or ChunkedArray (chunks concatenated).
fn one_array(input: AnyArray) -> PyResult<ArrayRef> {
    let (chunks, field) = input.into_chunked_array()?.into_inner();
    match chunks.len() {
        0 => Ok(arrow_array::new_empty_array(field.data_type())),
        1 => Ok(chunks.into_iter().next().expect("one chunk")),
        _ => {
            let refs: Vec<&dyn Array> = chunks.iter().map(|c| c.as_ref()).collect();
            arrow_select::concat::concat(&refs)
                .map_err(|e| to_py_err(Error::InvalidArgument(e.to_string())))
        }
    }
}

/// One batch from a pyarrow RecordBatch, Table or reader (batches concatenated).
fn one_batch(input: AnyRecordBatch) -> PyResult<RecordBatch> {
    let reader = input.into_reader()?;
    let schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| to_py_err(Error::InvalidArgument(e.to_string())))?;
    arrow_select::concat::concat_batches(&schema, &batches)
        .map_err(|e| to_py_err(Error::InvalidArgument(e.to_string())))
}

/// Encodes an AVRO_DATA_BLOCK (log format 1, content version 3) from a record batch (or a
/// table / batch reader, whose rows all go into the one block).
///
/// Each row becomes one Avro binary datum of ``schema_json`` (an Avro record whose fields
/// are matched to batch columns by name; nullable fields may be missing). The header is
/// ``INSTANT_TIME``, ``SCHEMA`` unless ``header`` (an ordered dict by Hudi key name) places
/// keys first or adds more.
#[pyfunction]
#[pyo3(signature = (batch, schema_json, instant_time, header = None))]
fn encode_avro_data_block<'py>(
    py: Python<'py>,
    batch: &Bound<'py, PyAny>,
    schema_json: &str,
    instant_time: &str,
    header: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let header = build_header(
        vec![
            (HeaderKey::InstantTime, instant_time.to_string()),
            (HeaderKey::Schema, schema_json.to_string()),
        ],
        header,
    )?;
    let batch = guarded_import("the records", || {
        one_batch(batch.extract::<AnyRecordBatch>()?)
    })?;
    let bytes = py
        .detach(|| core_encode_avro(&batch, schema_json, &header))
        .map_err(to_py_err)?;
    Ok(PyBytes::new(py, &bytes))
}

/// Encodes an AVRO_DATA_BLOCK of records given as JSON text (an array), each one Avro datum
/// of ``schema_json`` (JSON conventions as ``avro_container_encode``; missing fields take their
/// defaults). The header is ``SCHEMA``, preceded by ``INSTANT_TIME`` when given, unless
/// ``header`` places keys first or adds more. Hudi's archived timeline writes ``SCHEMA`` only.
#[pyfunction]
#[pyo3(signature = (records_json, schema_json, instant_time = None, header = None))]
fn encode_avro_json_block<'py>(
    py: Python<'py>,
    records_json: &str,
    schema_json: &str,
    instant_time: Option<&str>,
    header: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut defined = Vec::new();
    if let Some(t) = instant_time {
        defined.push((HeaderKey::InstantTime, t.to_string()));
    }
    defined.push((HeaderKey::Schema, schema_json.to_string()));
    let header = build_header(defined, header)?;
    let bytes = py
        .detach(|| {
            let records: serde_json::Value = serde_json::from_str(records_json)
                .map_err(|e| Error::InvalidArgument(format!("records are not JSON: {e}")))?;
            let serde_json::Value::Array(records) = records else {
                return Err(Error::InvalidArgument(
                    "records JSON must be an array".into(),
                ));
            };
            encode_json_block(schema_json, &records, &header)
        })
        .map_err(to_py_err)?;
    Ok(PyBytes::new(py, &bytes))
}

/// Encodes a DELETE_BLOCK (content version 3, Java's ``HoodieDeleteRecordList``).
///
/// ``record_keys`` and ``partition_paths`` are Arrow string arrays; ``ordering_values`` any
/// Arrow array (ints, longs, floats, strings, dates, decimals, timestamps, ... or the dense
/// union ``LogBlock.deletes()`` returns), or None for Spark's default ``IntWrapper(0)``.
/// The header is ``INSTANT_TIME`` then ``SCHEMA`` (when given), unless ``header`` orders them.
#[pyfunction]
#[pyo3(signature = (record_keys, partition_paths, ordering_values, instant_time, schema_json = None, header = None))]
fn encode_delete_block<'py>(
    py: Python<'py>,
    record_keys: AnyArray,
    partition_paths: AnyArray,
    ordering_values: Option<AnyArray>,
    instant_time: &str,
    schema_json: Option<&str>,
    header: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut defined = vec![(HeaderKey::InstantTime, instant_time.to_string())];
    if let Some(s) = schema_json {
        defined.push((HeaderKey::Schema, s.to_string()));
    }
    let header = build_header(defined, header)?;
    let keys = one_array(record_keys)?;
    let parts = one_array(partition_paths)?;
    let ordering = ordering_values.map(one_array).transpose()?;
    let bytes = py
        .detach(|| core_encode_delete(keys.as_ref(), parts.as_ref(), ordering.as_deref(), &header))
        .map_err(to_py_err)?;
    Ok(PyBytes::new(py, &bytes))
}

/// Encodes a ROLLBACK command block for ``target_instant_time``, written at ``instant_time``.
/// Header order defaults to Hudi's observed ``INSTANT_TIME, COMMAND_BLOCK_TYPE,
/// TARGET_INSTANT_TIME``; ``header`` may reorder or extend it.
#[pyfunction]
#[pyo3(signature = (instant_time, target_instant_time, header = None))]
fn encode_rollback_block<'py>(
    py: Python<'py>,
    instant_time: &str,
    target_instant_time: &str,
    header: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let header = build_header(rollback_header(instant_time, target_instant_time), header)?;
    let bytes = encode_command_block(&header).map_err(to_py_err)?;
    Ok(PyBytes::new(py, &bytes))
}

fn blocks_of(file: Arc<[u8]>, file_index: usize) -> Vec<PyLogBlock> {
    read_blocks(&file)
        .into_iter()
        .map(|block| PyLogBlock {
            file: file.clone(),
            file_index,
            block,
        })
        .collect()
}

/// Splits a log file's bytes into blocks, in file order. Damaged spans come back as
/// ``CORRUPT_BLOCK`` entries (the scan resyncs on the next ``#HUDI#``); this never raises
/// for bad bytes.
#[pyfunction]
fn read_log_blocks(py: Python<'_>, data: &[u8]) -> Vec<PyLogBlock> {
    let file: Arc<[u8]> = Arc::from(data);
    py.detach(|| blocks_of(file, 0))
}

/// Bytes of each input: ``bytes`` as is, anything else as a path (``str`` / ``os.PathLike``).
fn load_files(py: Python<'_>, files: &[Bound<'_, PyAny>]) -> PyResult<Vec<Arc<[u8]>>> {
    let mut paths = Vec::new();
    let mut out: Vec<Option<Arc<[u8]>>> = Vec::new();
    for f in files {
        if let Ok(b) = f.cast::<PyBytes>() {
            out.push(Some(Arc::from(b.as_bytes())));
        } else {
            let os = py.import("os")?;
            let path: String = os
                .call_method1("fspath", (f,))
                .and_then(|p| p.extract())
                .map_err(|_| PyTypeError::new_err("log files must be bytes or paths"))?;
            paths.push((out.len(), path));
            out.push(None);
        }
    }
    let read = py.detach(|| {
        paths
            .into_iter()
            .map(|(i, p)| {
                std::fs::read(&p)
                    .map(|d| (i, Arc::<[u8]>::from(d)))
                    .map_err(|e| (p, e))
            })
            .collect::<Result<Vec<_>, _>>()
    });
    let read = read.map_err(|(p, e)| io_error(&p, &e))?;
    for (i, d) in read {
        out[i] = Some(d);
    }
    Ok(out
        .into_iter()
        .map(|d| d.expect("every slot filled"))
        .collect())
}

/// Reads a log file from a path and splits it into blocks (see ``read_log_blocks``).
#[pyfunction]
fn read_log_file(py: Python<'_>, path: Bound<'_, PyAny>) -> PyResult<Vec<PyLogBlock>> {
    let file = load_files(py, &[path])?.remove(0);
    Ok(py.detach(|| blocks_of(file, 0)))
}

/// The data and delete blocks that count for a file slice, oldest first, with Hudi's rules
/// (``scanInternalV1``): blocks of instants not in ``completed_instants`` (unless older than
/// all of them, i.e. archived) or in ``inflight_instants`` are skipped; ROLLBACK blocks remove
/// every queued block of their target instant and queued corrupt blocks; the scan stops at the
/// first block after ``max_instant``; ``instant_range`` is ``(start, end]`` with either bound
/// None. ``files`` are the slice's log files (bytes or paths) in log-file order.
#[pyfunction]
#[pyo3(signature = (files, completed_instants, max_instant = None, inflight_instants = None, instant_range = None))]
fn scan_log_files(
    py: Python<'_>,
    files: Vec<Bound<'_, PyAny>>,
    completed_instants: Vec<String>,
    max_instant: Option<String>,
    inflight_instants: Option<Vec<String>>,
    instant_range: Option<(Option<String>, Option<String>)>,
) -> PyResult<Vec<PyLogBlock>> {
    let data = load_files(py, &files)?;
    let options = ScanOptions {
        completed_instants: completed_instants.into_iter().collect(),
        inflight_instants: inflight_instants.unwrap_or_default().into_iter().collect(),
        max_instant,
        instant_range,
    };
    Ok(py.detach(|| {
        let slices: Vec<&[u8]> = data.iter().map(|d| d.as_ref()).collect();
        core_scan(&slices, &options)
            .blocks
            .into_iter()
            .map(|s| PyLogBlock {
                file: data[s.file_index].clone(),
                file_index: s.file_index,
                block: s.block,
            })
            .collect()
    }))
}

/// Registers the log-format API on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLogBlock>()?;
    m.add_function(wrap_pyfunction!(encode_avro_data_block, m)?)?;
    m.add_function(wrap_pyfunction!(encode_avro_json_block, m)?)?;
    m.add_function(wrap_pyfunction!(encode_delete_block, m)?)?;
    m.add_function(wrap_pyfunction!(encode_rollback_block, m)?)?;
    m.add_function(wrap_pyfunction!(read_log_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(read_log_file, m)?)?;
    m.add_function(wrap_pyfunction!(scan_log_files, m)?)?;
    Ok(())
}
