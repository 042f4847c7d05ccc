"""Turning whatever the user passes into one ``pyarrow.Table``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shoal.errors import InvalidArgumentError


def to_arrow_table(data: Any) -> pa.Table:
    """Accepts pyarrow Tables, RecordBatches and RecordBatchReaders, pandas and polars frames,
    and any object exporting the Arrow PyCapsule stream or array interface."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    module = type(data).__module__
    if module.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if module.startswith("polars"):
        return data.to_arrow()
    if isinstance(data, (list, dict)):
        try:
            return pa.Table.from_pylist(data) if isinstance(data, list) else pa.table(data)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise InvalidArgumentError(f"cannot convert input to Arrow: {e}") from e
    raise InvalidArgumentError(
        f"unsupported input type {type(data).__name__}: pass a pyarrow Table, RecordBatch, "
        "RecordBatchReader, a pandas or polars DataFrame, or an Arrow stream"
    )
