"""Inserts that allow duplicates (``hoodie.merge.allow.duplicate.on.inserts``, true by default)
keep stored records of the same keys, whether the records go to a new file group or into a small
file that the insert rewrites (Hudi's concat handle)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "ts", "v"]
FIRST = pa.table({"id": [1, 2], "ts": [5, 5], "v": [1, 2]})
# Key 1 with a lower ordering value, key 2 with a higher one, and a new key.
SECOND = pa.table({"id": [1, 2, 3], "ts": [0, 9, 0], "v": [10, 20, 30]})
BOTH = rows_by(pa.concat_tables([FIRST, SECOND]), COLUMNS, COLUMNS)


def _table(tmp_path, table_type: str, **options: str) -> shoal.Table:
    return shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        table_type=table_type,
        record_key="id",
        ordering_field="ts",
        options=options,
    )


def _rows(t: shoal.Table) -> list[dict]:
    return rows_by(t.read(columns=COLUMNS), COLUMNS, COLUMNS)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("small_file_limit", [None, "0"])
def test_insert_keeps_stored_records_of_its_keys(tmp_path, table_type, small_file_limit):
    options = {} if small_file_limit is None else {"hoodie.parquet.small.file.limit": small_file_limit}
    t = _table(tmp_path, table_type, **options)
    t.insert(FIRST)
    t.insert(SECOND)
    assert _rows(t) == BOTH
    assert rows_by(hudi_rs_read(t.path), COLUMNS, COLUMNS) == BOTH
    slices = t.file_slices()
    # By default the second insert fills the first one's small file; without small files it
    # starts a file group of its own.
    assert len(slices) == (1 if small_file_limit is None else 2)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_insert_into_a_small_file_reports_every_record_as_an_insert(tmp_path, table_type):
    t = _table(tmp_path, table_type)
    t.insert(FIRST)
    result = t.write(SECOND, "insert")
    (stat,) = result.metadata.write_stats()
    assert (stat.numInserts, stat.numUpdateWrites, stat.numWrites) == (3, 0, 5)


def test_insert_beside_a_merge_on_read_slice_with_logs_keeps_its_merged_records(tmp_path):
    """A slice with logs is no small file for inserts (they go to a file group of their own),
    and its merged records stay as they are."""
    t = _table(tmp_path, "MERGE_ON_READ")
    t.insert(FIRST)
    # Logged to the file group: key 2 updated, key 1 deleted.
    t.upsert(pa.table({"id": [2], "ts": [7], "v": [200]}))
    t.delete(pa.table({"id": [1]}))
    assert t.file_slices()[0].log_files
    t.insert(SECOND)
    expected = rows_by(
        pa.concat_tables([pa.table({"id": [2], "ts": [7], "v": [200]}), SECOND]), COLUMNS, COLUMNS
    )
    assert _rows(t) == expected
    assert rows_by(hudi_rs_read(t.path), COLUMNS, COLUMNS) == expected
    assert len(t.file_slices()) == 2


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_insert_without_duplicates_merges_with_stored_records(tmp_path, table_type):
    t = _table(tmp_path, table_type, **{"hoodie.merge.allow.duplicate.on.inserts": "false"})
    t.insert(FIRST)
    t.insert(SECOND)
    # Looked up like an upsert under event-time ordering: key 1's stored record (ts 5) beats
    # the incoming ts 0, key 2's incoming ts 9 beats the stored ts 5.
    expected = [{"id": 1, "ts": 5, "v": 1}, {"id": 2, "ts": 9, "v": 20}, {"id": 3, "ts": 0, "v": 30}]
    assert _rows(t) == expected
    assert rows_by(hudi_rs_read(t.path), COLUMNS, COLUMNS) == expected
