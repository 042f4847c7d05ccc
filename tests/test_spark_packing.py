"""Packed records (shoal.spark.packing): what the route pass of a Spark write hands the shuffle,
and what write tasks take back, whatever the batches the pieces arrive in."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from shoal.spark import packing
from shoal.spark.packing import (
    MAX_BATCH_BYTES,
    PAYLOAD_COLUMN,
    PIECE_COLUMN,
    ROUTE_COLUMN,
    VALUE_COLUMN,
    pack,
    packed_values,
    piece_bytes,
    unpack,
)


def _records(n: int, rng: np.random.Generator) -> pa.Table:
    keys = pa.array([f"key-{i:06d}" for i in range(n)])
    table = pa.table(
        {
            "key": keys,
            "value": rng.normal(size=n),
            "tags": pa.array([[i, i + 1] if i % 3 else None for i in range(n)], pa.list_(pa.int64())),
            # The record key column of a string key field is the same array: packed once.
            "_hoodie_record_key": keys,
        }
    )
    return table.cast(table.schema.set(3, pa.field("_hoodie_record_key", pa.string(), nullable=False)))


def _shuffled(batches: list[pa.RecordBatch], rows_per_batch: int) -> list[pa.RecordBatch]:
    """The rows of ``batches`` as a write task gets them: sorted by (route, value, piece), in
    batches of ``rows_per_batch`` rows, cut anywhere."""
    rows = pa.Table.from_batches(batches)
    order = pc.sort_indices(
        rows,
        sort_keys=[(ROUTE_COLUMN, "ascending"), (VALUE_COLUMN, "ascending"), (PIECE_COLUMN, "ascending")],
    )
    return rows.take(order).combine_chunks().to_batches(max_chunksize=rows_per_batch)


@pytest.mark.parametrize("rows_per_batch", [1, 7, 100_000])
def test_each_route_gets_its_records_in_input_order(rows_per_batch):
    rng = np.random.default_rng(7)
    n = 5_000
    records = _records(n, rng)
    route_values = rng.integers(0, 40, size=n).astype(np.int32)
    dropped = rng.random(n) < 0.1
    # Two chunks of one task, as the route pass packs them, with small pieces.
    ids = itertools.count(0)
    half = n // 2
    batches = [
        *pack(records.slice(0, half), pa.array(route_values[:half], mask=dropped[:half]), 1_000, ids),
        *pack(records.slice(half), pa.array(route_values[half:], mask=dropped[half:]), 1_000, ids),
    ]
    assert max(len(p.as_buffer()) for b in batches for p in b.column(PAYLOAD_COLUMN)) <= 1_000
    by_route: dict[int, list[pa.Buffer]] = {}
    for route, value in packed_values(iter(_shuffled(batches, rows_per_batch))):
        by_route.setdefault(route, []).append(value)
    assert sorted(by_route) == sorted(set(route_values[~dropped].tolist()))
    for route, values in by_route.items():
        rows = np.flatnonzero((route_values == route) & ~dropped)
        unpacked = unpack(values)
        assert unpacked.schema.equals(records.schema), route
        assert unpacked.equals(records.take(pa.array(rows))), route
    # The repeated column travels once.
    _, first = next(packed_values(iter(batches[:1])))
    assert pa.ipc.open_stream(first).schema.names == ["key", "value", "tags"]


def test_the_route_pass_output_comes_in_bounded_batches(monkeypatch):
    rng = np.random.default_rng(3)
    records = _records(20_000, rng)
    monkeypatch.setattr(packing, "PACKED_BATCH_BYTES", 50_000)
    routes = pa.array(rng.integers(0, 8, 20_000).astype(np.int32))
    batches = list(pack(records, routes, 4_096, itertools.count()))
    assert len(batches) > 1
    # A batch closes once it passes the bound: by at most one value.
    largest_value = max(len(v) for _, v in packed_values(iter(_shuffled(batches, 64))))
    assert all(len(b.column(PAYLOAD_COLUMN).buffers()[2]) < 50_000 + largest_value for b in batches)
    unpacked = [unpack([v]) for _, v in packed_values(iter(_shuffled(batches, 64)))]
    assert sum(t.num_rows for t in unpacked) == records.num_rows


def test_nothing_to_pack_when_no_row_has_a_route():
    records = _records(100, np.random.default_rng(1))
    assert list(pack(records, pa.nulls(100, pa.int32()), 1_000, itertools.count())) == []
    assert list(packed_values(iter([]))) == []


def test_a_missing_piece_fails():
    records = _records(2_000, np.random.default_rng(2))
    (batch,) = pack(records, pa.array(np.zeros(2_000, np.int32)), 1_000, itertools.count())
    assert batch.num_rows > 2
    broken = pa.Table.from_batches([batch]).filter(pc.not_equal(batch.column(PIECE_COLUMN), 1))
    with pytest.raises(ValueError, match="pieces missing or out of order"):
        list(packed_values(iter(broken.to_batches())))


@pytest.mark.parametrize("batch_rows", [1, 10_000, 100_000, 3_000_000])
def test_pieces_keep_any_batch_under_the_bound(batch_rows):
    assert 0 < piece_bytes(batch_rows) * batch_rows <= MAX_BATCH_BYTES
