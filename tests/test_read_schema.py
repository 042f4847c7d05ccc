"""Reads return the table's latest schema, as hudi-rs does: columns no file read holds (a
later write added them, or wrote them only in records it deleted) come back as nulls, in full,
filtered, time-travel, streamed and incremental reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

import shoal
from shoal.write.schema import META_COLUMNS
from tests.hudi_oracle import hudi_rs_read, rows_by

DATA = ["id", "ts", "v", "w", "_hoodie_is_deleted"]
TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


def _data_columns(table: pa.Table) -> list[str]:
    return [c for c in table.column_names if c not in META_COLUMNS]


def _deleting_write_adds_columns(tmp_path, table_type: str) -> tuple[shoal.Table, str]:
    """Three records, then an upsert whose only record deletes key 3 and brings two new
    columns; returns the table and the first instant."""
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type=table_type, record_key="id", ordering_field="ts"
    )
    first = t.upsert(pa.table({"id": [1, 2, 3], "ts": [1, 1, 1], "v": [1, 2, 3]}))
    t.upsert(pa.table({"id": [3], "ts": [5], "v": [30], "w": ["new"], "_hoodie_is_deleted": [True]}))
    return t, first


EXPECTED = [
    {"id": 1, "ts": 1, "v": 1, "w": None, "_hoodie_is_deleted": None},
    {"id": 2, "ts": 1, "v": 2, "w": None, "_hoodie_is_deleted": None},
]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_columns_only_deleted_records_brought_are_read_as_nulls(tmp_path, table_type):
    t, _ = _deleting_write_adds_columns(tmp_path, table_type)
    assert [f.name for f in t.schema() if f.name not in META_COLUMNS] == DATA
    oracle = hudi_rs_read(t.path)
    assert _data_columns(oracle) == DATA
    assert rows_by(oracle, DATA, ["id"]) == EXPECTED
    for got in (t.read(), pa.Table.from_batches(list(t.read_batches())), t.read(filters=[("v", "<", 3)])):
        assert _data_columns(got) == DATA
        assert rows_by(got, DATA, ["id"]) == EXPECTED
    streamed = t.read_batches()
    assert [f.name for f in streamed.schema if f.name not in META_COLUMNS] == DATA


def test_compaction_keeps_the_columns_in_reads(tmp_path):
    t, _ = _deleting_write_adds_columns(tmp_path, "MERGE_ON_READ")
    t.compact()
    got = t.read()
    assert _data_columns(got) == DATA
    assert rows_by(got, DATA, ["id"]) == EXPECTED
    assert rows_by(hudi_rs_read(t.path), DATA, ["id"]) == EXPECTED


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_time_travel_reads_in_the_latest_schema(tmp_path, table_type):
    t, first = _deleting_write_adds_columns(tmp_path, table_type)
    oracle = hudi_rs_read(t.path, as_of=first)
    expected = [
        {**row, "w": None, "_hoodie_is_deleted": None}
        for row in ({"id": i, "ts": 1, "v": i} for i in (1, 2, 3))
    ]
    assert rows_by(oracle, DATA, ["id"]) == expected
    got = t.read(as_of=first)
    assert _data_columns(got) == DATA
    assert rows_by(got, DATA, ["id"]) == expected


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_incremental_reads_in_the_latest_schema(tmp_path, table_type):
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type=table_type, record_key="id", ordering_field="ts"
    )
    first = t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "v": [1, 2]}))
    second = t.upsert(pa.table({"id": [2], "ts": [2], "v": [20]}))
    t.upsert(pa.table({"id": [3], "ts": [5], "v": [30], "w": ["x"]}))
    changed = t.read_incremental(start=first, end=second)
    assert _data_columns(changed) == ["id", "ts", "v", "w"]
    assert rows_by(changed, ["id", "ts", "v", "w"], ["id"]) == [{"id": 2, "ts": 2, "v": 20, "w": None}]
