"""Records with structs of structs, sliced, reach the Rust core intact.

arrow-rs (59) imports a struct array with an offset wrongly through the C data interface when it
has a struct child: it slices the grandchildren twice and panics ("end <= self.len()"). pyarrow
slices freely: a table's later batches, a sample, a row group of a spliced file. So
``shoal.arrays.importable`` copies those columns to offset 0 before the Rust core sees them.
These tests fail with a PanicException without it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shoal
from shoal import _native
from shoal.arrays import importable, importable_table
from shoal.errors import InvalidArgumentError
from tests.hudi_oracle import hudi_rs_read
from tests.table_files import data_columns
from tests.test_fixture_writes import KEY, _canonical


def _nested(n: int) -> pa.StructArray:
    inner = pa.StructArray.from_arrays(
        [pa.array([float(i) for i in range(n)]), pa.array([i % 2 == 0 for i in range(n)])], names=["a", "b"]
    )
    return pa.StructArray.from_arrays([pa.array([f"s{i}" for i in range(n)]), inner], names=["s", "inner"])


def _cases() -> dict[str, pa.Array]:
    outer = _nested(5)
    return {
        "struct of structs": outer.slice(2, 3),
        "list of it": pa.ListArray.from_arrays(pa.array([0, 1, 3]), outer.slice(1, 3)),
        "three levels": pa.StructArray.from_arrays([outer], names=["o"]).slice(1, 3),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_sliced_nested_structs_are_measured_like_their_copy(name):
    column = _cases()[name]
    batch = pa.RecordBatch.from_arrays([column, pa.array(range(len(column)))], names=["c", "n"])
    fixed = importable(batch)
    assert fixed.equals(batch)
    assert fixed.column(0).offset == 0
    copy = pa.RecordBatch.from_arrays([pa.concat_arrays([column]), batch.column(1)], names=["c", "n"])
    assert _native.estimate_record_size(fixed, 1) == _native.estimate_record_size(copy, 1)


def test_unsliced_columns_pass_through_and_sliced_tables_are_copied():
    batch = pa.RecordBatch.from_arrays([_nested(4), pa.array(range(4))], names=["c", "n"])
    assert importable(batch) is batch
    table = pa.Table.from_batches([batch, batch])
    assert importable_table(table) is table
    sliced = table.slice(2, 4)
    fixed = importable_table(sliced)
    assert fixed.equals(sliced)
    assert all(chunk.offset == 0 for chunk in fixed.column("c").chunks)
    assert _native.estimate_record_size(fixed.to_batches()[0], 1)[1] > 0


def test_large_merge_on_read_upsert_of_nested_records(tmp_path):
    """More than one Avro data block (100k records each): the second batch of a log append is a
    slice of the records."""
    n = 100_050
    ids, ones = pa.array(range(n), pa.int64()), pa.array([1] * n, pa.int64())
    data = pa.table({"id": ids, "ts": ones, "c": _nested(n)})
    table = shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type="MERGE_ON_READ", record_key="id", ordering_field="ts"
    )
    table.bulk_insert(data)
    updated = data.set_column(1, "ts", pa.array([2] * n, pa.int64()))
    table.upsert(updated)
    assert any(p.name.startswith(".") and ".log." in p.name for p in (tmp_path / "t").iterdir())

    ours = shoal.Table(str(tmp_path / "t")).read(columns=["id", "ts", "c"]).sort_by("id")
    assert ours.column("ts").to_pylist() == [2] * n
    assert ours.column("c").equals(updated.column("c"))
    theirs = hudi_rs_read(str(tmp_path / "t")).select(["id", "ts", "c"]).sort_by("id")
    assert theirs.num_rows == n and pc.all(pc.equal(theirs.column("ts"), 2)).as_py()
    assert theirs.column("c").to_pylist()[-3:] == updated.column("c").to_pylist()[-3:]


def test_schema_evolution_into_a_hudi_table_with_nested_columns(fixture_table):
    """A new column in an upsert into the Hudi fixture with struct, array and map columns: the
    record size sample of the evolved records is sliced."""
    root = fixture_table("cow_v6_complexkeygen_hivestyle")
    table = shoal.Table(str(root))
    before = table.read()
    evolved = before.slice(1, 2).select(data_columns(before))
    evolved = evolved.append_column("extra_col", pa.array(["x", "y"]))
    table.upsert(evolved)

    ours = shoal.Table(str(root)).read()
    theirs = hudi_rs_read(str(root))
    columns = [KEY, *data_columns(before), "extra_col"]
    assert _canonical(ours.select(columns), [KEY]) == _canonical(
        theirs.select(columns).cast(ours.select(columns).schema), [KEY]
    )
    got = dict(zip(ours.column(KEY).to_pylist(), ours.column("extra_col").to_pylist(), strict=True))
    changed = before.slice(1, 2).column(KEY).to_pylist()
    assert sorted(v for k, v in got.items() if k in changed) == ["x", "y"]
    assert all(v is None for k, v in got.items() if k not in changed)


def test_the_rust_core_refuses_what_it_cannot_import_with_a_typed_error():
    """Without ``importable``, the Rust core's own guard turns the import's panic into
    InvalidArgumentError (a PanicException escapes ``except Exception``)."""
    batch = pa.RecordBatch.from_arrays([_cases()["struct of structs"]], names=["c"])
    with pytest.raises(InvalidArgumentError, match="cannot import the record batch from Arrow"):
        _native.estimate_record_size(batch, 1)
    schema = '{"type": "record", "name": "r", "fields": []}'
    with pytest.raises(InvalidArgumentError, match="cannot import the records from Arrow"):
        _native.encode_avro_data_block(batch, schema, "20240101000000000")
