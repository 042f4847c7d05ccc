"""Gathering a write's rows into the tables its tasks write: row takes that share work between
columns, key-ordered gathers, and gathers left to the write task itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.arrays import contiguous

RECORD_KEY = "_hoodie_record_key"


@dataclass(frozen=True)
class RowGather:
    """Rows of ``data`` that a local write task gathers itself, so that one worker gathers
    (bound by memory) while another encodes and compresses a file (bound by CPU), instead of
    every gather finishing before the first file starts.

    ``rows``: row ids of ``data`` (ascending ones gather fastest). ``order``: the positions into
    ``rows`` to write, in writing order; None writes ``rows`` as they are, and ``sort_by_key`` has
    the task order them by record key itself."""

    data: pa.Table
    rows: pa.Array
    order: pa.Array | None = None
    sort_by_key: bool = False

    @property
    def num_rows(self) -> int:
        return len(self.rows)

    def table(self) -> pa.Table:
        """The gathered rows."""
        if self.sort_by_key:
            return sorted_by_key(self.data, self.rows)
        part = take_rows(self.data, self.rows)
        return part if self.order is None else take_rows(part, self.order)


def key_ordered_gathers(data: pa.Table, rows: pa.Array, rows_per_gather: int) -> list[RowGather]:
    """``rows`` of ``data`` (ascending) in record-key order, cut into gathers of at most
    ``rows_per_gather``; equal keys keep their input order, as one stable sort by (partition
    path, key) would."""
    if len(rows) <= rows_per_gather:
        return [RowGather(data, rows, sort_by_key=True)]
    keys = pc.take(data.column(RECORD_KEY), rows, boundscheck=False)
    order = _native.sort_key_indices(contiguous(keys))
    positions = order.to_numpy()
    gathers = []
    for lo in range(0, len(positions), rows_per_gather):
        wanted = positions[lo : lo + rows_per_gather]
        # Each gather reads its rows in row order (cache friendly) and then puts them in key
        # order within its own, smaller, copy; positions are distinct, so searchsorted inverts.
        ascending = np.sort(wanted)
        within = np.searchsorted(ascending, wanted).astype(np.int64)
        gathers.append(RowGather(data, rows.take(pa.array(ascending)), pa.array(within)))
    return gathers


def sorted_by_key(data: pa.Table, rows: pa.Array) -> pa.Table:
    """The ``rows`` of ``data`` sorted by record key; equal keys (duplicates allowed on insert)
    keep their input order, as one stable sort by (partition path, key) would."""
    # Gathering the rows in row order first keeps the key-order gather within the (smaller, more
    # cache-friendly) copy: measured faster than one gather in key order from all of ``data``.
    part = take_rows(data, rows)
    keys = part.column(RECORD_KEY)
    order = _native.sort_key_indices(contiguous(keys))
    return take_rows(part, order)


def take_rows(table: pa.Table, indices: pa.Array) -> pa.Table:
    """``table.take(indices)``, gathering columns that share their data once: a string record
    key field and ``_hoodie_record_key`` are the same array. ``indices`` must be rows of
    ``table``: they are not bounds-checked."""
    taken: dict[tuple[Any, ...], pa.ChunkedArray] = {}
    columns = []
    for column in table.columns:
        identity = column_identity(column)
        if identity not in taken:
            # Callers pass indices from sorts and groupings of the table's own rows.
            taken[identity] = pc.take(column, indices, boundscheck=False)
        columns.append(taken[identity])
    return pa.Table.from_arrays(columns, schema=table.schema)


def column_identity(column: pa.ChunkedArray) -> tuple[Any, ...]:
    """Equal for two columns exactly when they are views of the same memory."""

    def addresses(array: pa.Array) -> tuple[int, ...]:
        own = tuple(b.address if b else 0 for b in array.buffers())
        # A dictionary array's buffers are its indices only.
        return own + addresses(array.dictionary) if isinstance(array, pa.DictionaryArray) else own

    return (column.type, tuple((c.offset, len(c), addresses(c)) for c in column.chunks))
