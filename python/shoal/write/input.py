"""Turning whatever the user passes into one ``pyarrow.Table``."""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa

from shoal.errors import InvalidArgumentError


def to_arrow_table(data: Any) -> pa.Table:
    """Accepts pyarrow Tables, RecordBatches and RecordBatchReaders, pandas and polars frames,
    and any object exporting the Arrow PyCapsule stream or array interface.

    A pandas frame's index is not data: it is dropped, as Spark's ``createDataFrame`` drops it."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if _is_pandas_frame(data):
        # Before the stream interface: pandas >= 2.2 exports one too, which keeps a non-default
        # index as a column ("__index_level_0__") that would become part of the table schema.
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowException, ValueError, TypeError) as e:
            raise InvalidArgumentError(f"cannot convert the pandas DataFrame to Arrow: {e}") from e
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    module = type(data).__module__
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


def _is_pandas_frame(data: Any) -> bool:
    # pandas is optional: only an already imported pandas can have made ``data``, so it is
    # looked up rather than imported. isinstance also covers subclasses defined elsewhere
    # (geopandas, ...), whose module name does not start with "pandas".
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(data, pandas.DataFrame)
