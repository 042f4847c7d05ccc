"""Arrow arrays in the one shape the Rust core and some compute functions take, and rows grouped
by value."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def contiguous(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``values`` as one array: a chunked array's only chunk as it is (no copy), its chunks
    combined otherwise (an empty array for none)."""
    if not isinstance(values, pa.ChunkedArray):
        return values
    return values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()


def group_rows(values: pa.Array | pa.ChunkedArray) -> list[tuple[Any, pa.Array]]:
    """The distinct non-null values of ``values`` in ascending order, each with the (ascending)
    indices of the rows holding it."""
    encoded = pc.dictionary_encode(contiguous(values))
    codes = encoded.indices.fill_null(-1) if encoded.null_count else encoded.indices
    # A stable sort by code groups the rows and keeps each group in row order.
    order = pc.array_sort_indices(codes)
    counts = np.bincount(codes.to_numpy(zero_copy_only=False) + 1, minlength=len(encoded.dictionary) + 1)
    starts = np.concatenate([[0], np.cumsum(counts)])
    dictionary = encoded.dictionary.to_pylist()
    return [
        (dictionary[code], order.slice(starts[code + 1], counts[code + 1]))
        for code in sorted(range(len(dictionary)), key=dictionary.__getitem__)
    ]


def _nested_struct(t: pa.DataType) -> bool:
    """Whether ``t`` is a struct with a struct field of at least one field of its own."""
    return pa.types.is_struct(t) and any(
        pa.types.is_struct(t.field(i).type) and t.field(i).type.num_fields for i in range(t.num_fields)
    )


def _misimported(array: pa.Array) -> bool:
    """Whether arrow-rs would import ``array`` wrongly through the C data interface: a struct
    array with an offset slices its struct children, and their children again, on import (a
    panic, "end <= self.len()", once the second slice runs past the end)."""
    t = array.type
    if pa.types.is_struct(t):
        if array.offset and _nested_struct(t):
            return True
        # ``field`` gives each child as the parent sees it: its own offset plus the parent's.
        return any(_misimported(array.field(i)) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        return _misimported(array.values)
    return False


def importable(data: pa.RecordBatch) -> pa.RecordBatch:
    """``data`` as the Rust core can import it: a column that arrow-rs would import wrongly
    (:func:`_misimported`, a sliced struct of structs) is copied to offset 0, every other one
    passed as it is. Pass user records through this before handing them to the Rust core."""
    bad = [i for i, column in enumerate(data.columns) if _misimported(column)]
    if not bad:
        return data
    columns = list(data.columns)
    for i in bad:
        columns[i] = pa.concat_arrays([columns[i]])
    return pa.RecordBatch.from_arrays(columns, schema=data.schema)


def importable_table(data: pa.Table) -> pa.Table:
    """:func:`importable` for each chunk of a table."""
    if not any(_misimported(chunk) for column in data.columns for chunk in column.chunks):
        return data
    return pa.Table.from_batches([importable(b) for b in data.to_batches()], schema=data.schema)
