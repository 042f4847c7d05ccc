"""A write may widen the ordering field (int to long, long to double): merges then compare every
version of a record in the widened type, in reads and in compaction."""

from __future__ import annotations

import pyarrow as pa
import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "ts", "v"]

WIDENINGS = [
    # (first write's type, later write's values): the later value for key 1 wins, key 2's
    # later version is older than the stored one and loses.
    (pa.int32(), pa.array([2**40, 2], pa.int64())),
    (pa.int64(), pa.array([2.5, 2.5], pa.float64())),
]


def _write(tmp_path, table_type: str, first_type: pa.DataType, later: pa.Array) -> shoal.Table:
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type=table_type, record_key="id", ordering_field="ts"
    )
    t.upsert(pa.table({"id": [1, 2], "ts": pa.array([1, 3], first_type), "v": [1, 2]}))
    t.upsert(pa.table({"id": [1, 2], "ts": later, "v": [10, 20]}))
    return t


def _expected(later: pa.Array) -> list[dict]:
    # Key 2 keeps its stored version (3 compares equal to 3.0).
    return [{"id": 1, "ts": later[0].as_py(), "v": 10}, {"id": 2, "ts": 3, "v": 2}]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize(("first_type", "later"), WIDENINGS, ids=["int-to-long", "long-to-double"])
def test_reads_merge_versions_in_the_widened_type(tmp_path, table_type, first_type, later):
    t = _write(tmp_path, table_type, first_type, later)
    assert t.schema().field("ts").type == later.type
    expected = _expected(later)
    assert rows_by(hudi_rs_read(t.path), COLUMNS, ["id"]) == expected
    assert rows_by(t.read(columns=COLUMNS), COLUMNS, ["id"]) == expected
    batches = pa.Table.from_batches(list(t.read_batches(columns=COLUMNS)))
    assert rows_by(batches, COLUMNS, ["id"]) == expected
    changed = t.read_incremental(start=t.timeline[0].time, columns=COLUMNS)
    assert rows_by(changed, COLUMNS, ["id"]) == [expected[0]]


@pytest.mark.parametrize(("first_type", "later"), WIDENINGS, ids=["int-to-long", "long-to-double"])
def test_compaction_merges_versions_in_the_widened_type(tmp_path, first_type, later):
    t = _write(tmp_path, "MERGE_ON_READ", first_type, later)
    t.compact()
    (only,) = t.file_slices()
    assert not only.log_files
    expected = _expected(later)
    assert rows_by(t.read(columns=COLUMNS), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), COLUMNS, ["id"]) == expected


def test_ordering_types_that_do_not_merge_raise_a_schema_mismatch():
    from shoal.errors import SchemaMismatchError
    from shoal.read.mor import _widest

    assert _widest([pa.int32(), pa.int64(), pa.int32()]) == pa.int64()
    assert _widest([pa.int64(), pa.float64()]) == pa.float64()
    with pytest.raises(SchemaMismatchError, match="ordering field"):
        _widest([pa.int64(), pa.string()])
