"""Packed records: how the route pass of a Spark write hands records to the shuffle, and how
write tasks take them back.

Spark moves a row at a cost per row (a conversion from Arrow and back, a serialisation), and a
large value at the cost of copying its bytes. So the route pass cuts its records by route value
and writes each route's records as one Arrow IPC stream (a *packed value*); the shuffle moves
those streams. A packed value travels in pieces of at most ``piece_bytes`` each, one row per
piece: a write task's ``mapInArrow`` input batch holds up to ``maxRecordsPerBatch`` rows, and
Spark cannot build an Arrow batch over 2 GiB, so pieces no larger than
``MAX_BATCH_BYTES / maxRecordsPerBatch`` keep any batch of them under that bound, however much
data a task receives. Rows are sorted by (route, value, piece) before the write task, which
joins each value's pieces again (without a copy when they arrive in one batch).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from shoal.write.gather import column_identity, take_rows

ROUTE_COLUMN = "_shoal_route"
VALUE_COLUMN = "_shoal_value"
PIECE_COLUMN = "_shoal_piece"
# The input position of a record in its route pass task (what Spark's monotonically_increasing_id
# would give it), carried in the packed records when deduplication needs the input order.
SEQ_COLUMN = "_shoal_seq"
PAYLOAD_COLUMN = "_shoal_records"
PACKED_SCHEMA = f"{ROUTE_COLUMN} int, {VALUE_COLUMN} long, {PIECE_COLUMN} int, {PAYLOAD_COLUMN} binary"
PACKED_ARROW_SCHEMA = pa.schema(
    [
        (ROUTE_COLUMN, pa.int32()),
        (VALUE_COLUMN, pa.int64()),
        (PIECE_COLUMN, pa.int32()),
        (PAYLOAD_COLUMN, pa.binary()),
    ]
)
# Bytes of pieces one Arrow batch of a write task may hold: well below Spark's 2 GiB limit.
MAX_BATCH_BYTES = 1 << 30
# Bytes of packed values one batch of the route pass's output holds (32-bit binary offsets).
PACKED_BATCH_BYTES = 256 * 1024 * 1024
# Route values, value names and piece numbers of the rows of a batch being packed.
_Rows = tuple[list[int], list[int], list[int]]
# Schema metadata of a packed stream naming the columns it leaves out because they repeat another.
_REPEATS_KEY = b"shoal.repeated_columns"


def piece_bytes(batch_rows: int) -> int:
    """The largest piece such that ``batch_rows`` of them stay within MAX_BATCH_BYTES."""
    return max(1, MAX_BATCH_BYTES // max(1, batch_rows))


def runs(values: np.ndarray) -> list[tuple[int, int, int]]:
    """(value, start, length) of each run of equal values of a sorted int array."""
    if not len(values):
        return []
    cuts = np.flatnonzero(values[1:] != values[:-1]) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(values)]])
    return [(int(values[a]), int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)]


def pack(
    records: pa.Table, routes: pa.Array, pieces_of: int, value_ids: Iterator[int]
) -> Iterator[pa.RecordBatch]:
    """``records`` cut by route value (rows of a null route dropped), in input order within a
    route, each route's records one packed value named by the next of ``value_ids``, in pieces
    of at most ``pieces_of`` bytes. Batches of the packed schema, each of at most about
    PACKED_BATCH_BYTES."""
    values = routes.fill_null(-1).to_numpy(zero_copy_only=False)
    kept = np.flatnonzero(routes.is_valid().to_numpy(zero_copy_only=False))
    order = kept[np.argsort(values[kept], kind="stable")]
    in_place = len(order) == records.num_rows and bool(np.all(order == np.arange(len(order))))
    ordered = _without_repeats(records if in_place else take_rows(records, pa.array(order)))
    sink = pa.BufferOutputStream()
    rows: _Rows = ([], [], [])
    offsets = [0]
    for value, start, length in runs(values[order]):
        begin = sink.tell()
        with pa.ipc.new_stream(sink, ordered.schema) as stream:
            stream.write_table(ordered.slice(start, length))
        end = sink.tell()
        value_id = next(value_ids)
        ends = np.minimum(np.arange(begin, end, pieces_of) + pieces_of, end)
        rows[0].extend([value] * len(ends))
        rows[1].extend([value_id] * len(ends))
        rows[2].extend(range(len(ends)))
        offsets.extend(ends.tolist())
        if end >= PACKED_BATCH_BYTES:
            yield _batch(rows, offsets, sink.getvalue())
            sink, rows, offsets = pa.BufferOutputStream(), ([], [], []), [0]
    if rows[0]:
        yield _batch(rows, offsets, sink.getvalue())


def _batch(
    rows: tuple[list[int], list[int], list[int]], offsets: list[int], data: pa.Buffer
) -> pa.RecordBatch:
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"{offsets[-1]} bytes of packed records in one batch: more than 32-bit offsets hold")
    payload = pa.Array.from_buffers(
        pa.binary(), len(rows[0]), [None, pa.py_buffer(np.asarray(offsets, dtype=np.int32)), data]
    )
    route, value, piece = rows
    return pa.RecordBatch.from_arrays(
        [pa.array(route, pa.int32()), pa.array(value, pa.int64()), pa.array(piece, pa.int32()), payload],
        schema=PACKED_ARROW_SCHEMA,
    )


def packed_values(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.Buffer]]:
    """(route value, packed value) of the rows of ``batches``, sorted by (route, value, piece):
    each value's pieces joined, in the order the values arrive.

    Raises:
        ValueError: a value's pieces are missing or out of order.
    """
    key: tuple[int, int] | None = None
    parts: list[pa.Buffer] = []
    next_piece = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        route = batch.column(ROUTE_COLUMN).to_numpy(zero_copy_only=False)
        value = batch.column(VALUE_COLUMN).to_numpy(zero_copy_only=False)
        piece = batch.column(PIECE_COLUMN).to_numpy(zero_copy_only=False)
        payload = batch.column(PAYLOAD_COLUMN)
        _, offset_buffer, data = payload.buffers()
        offsets = np.frombuffer(
            offset_buffer, dtype=np.int32, count=len(payload) + 1, offset=4 * payload.offset
        )
        # A run of rows of one (route, value) is one contiguous slice of the batch's data.
        boundaries = np.flatnonzero((route[1:] != route[:-1]) | (value[1:] != value[:-1])) + 1
        for start, end in zip(
            np.concatenate([[0], boundaries]), np.concatenate([boundaries, [len(route)]]), strict=True
        ):
            run_key = (int(route[start]), int(value[start]))
            if run_key != key:
                if key is not None:
                    yield key[0], _joined(parts)
                key, parts, next_piece = run_key, [], 0
            if not np.array_equal(piece[start:end], np.arange(next_piece, next_piece + end - start)):
                raise ValueError(f"packed value {run_key[1]} arrived with its pieces missing or out of order")
            next_piece += int(end - start)
            size = int(offsets[end] - offsets[start])
            parts.append(data.slice(int(offsets[start]), size) if data is not None else pa.py_buffer(b""))
    if key is not None:
        yield key[0], _joined(parts)


def _joined(parts: list[pa.Buffer]) -> pa.Buffer:
    if len(parts) == 1:
        return parts[0]
    joined = pa.allocate_buffer(sum(p.size for p in parts))
    writer = pa.FixedSizeBufferWriter(joined)
    for part in parts:
        writer.write(part)
    return joined


def unpack(values: Sequence[pa.Buffer]) -> pa.Table:
    """The records of packed values, in one table."""
    return pa.concat_tables([_with_repeats(pa.ipc.open_stream(v).read_all()) for v in values])


def _without_repeats(records: pa.Table) -> pa.Table:
    """``records`` without the columns that repeat an earlier column's memory (a string record
    key field and ``_hoodie_record_key`` are one array), each named in the schema's metadata
    with the column it repeats and its nullability, so :func:`_with_repeats` puts it back."""
    first: dict[tuple[Any, ...], str] = {}
    repeats: dict[str, tuple[str, bool]] = {}
    for field, column in zip(records.schema, records.columns, strict=True):
        identity = column_identity(column)
        if identity in first:
            repeats[field.name] = (first[identity], field.nullable)
        else:
            first[identity] = field.name
    if not repeats:
        return records
    kept = records.drop_columns(list(repeats))
    layout = {"columns": records.column_names, "repeats": repeats}
    return kept.replace_schema_metadata({**(kept.schema.metadata or {}), _REPEATS_KEY: json.dumps(layout)})


def _with_repeats(records: pa.Table) -> pa.Table:
    """The inverse of :func:`_without_repeats`."""
    metadata = dict(records.schema.metadata or {})
    layout = metadata.pop(_REPEATS_KEY, None)
    if layout is None:
        return records
    spec = json.loads(layout)
    fields, columns = [], []
    for name in spec["columns"]:
        if name in spec["repeats"]:
            source, nullable = spec["repeats"][name]
            field = records.schema.field(source).with_name(name).with_nullable(nullable)
            column = records.column(source)
        else:
            field, column = records.schema.field(name), records.column(name)
        fields.append(field)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=metadata or None))
