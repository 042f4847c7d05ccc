"""A copy-on-write merge carries the stored records over in the table's schema: a file written
before a later write added a column or widened a type, rewritten by a write whose records do not
carry them (a delete, or soft deletes alone), comes out in the schema its commit records, as Hudi
writes it (the latest commit's schema), not in the file's old columns."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal.write.schema import META_COLUMNS
from tests.hudi_oracle import hudi_rs_read, rows_by


def _rows(
    ids: list[int], n: pa.DataType | None = None, extra: bool = False, deleted: bool = False
) -> pa.Table:
    columns = {
        "id": pa.array(ids, pa.int64()),
        "part": ["a" if i < 100 else "b" for i in ids],
        "ts": pa.array([1] * len(ids), pa.int64()),
        "n": pa.array(ids, n or pa.int32()),
    }
    if extra:
        columns["extra"] = pa.array([f"x{i}" for i in ids])
    if deleted:
        columns["_hoodie_is_deleted"] = pa.array([True] * len(ids))
    return pa.table(columns)


def _create(path: Path) -> shoal.Table:
    return shoal.Table.create(
        str(path),
        name="c",
        table_type="COPY_ON_WRITE",
        record_key="id",
        partition_by="part",
        ordering_field="ts",
    )


def _latest_file(path: Path, partition: str, instant: str) -> Path:
    (file,) = (path / partition).glob(f"*_{instant}.parquet")
    return file


def _commit_schema(path: Path, instant: str) -> list[tuple[str, object]]:
    commit = json.loads((path / ".hoodie" / f"{instant}.commit").read_text())
    fields = json.loads(commit["extraMetadata"]["schema"])["fields"]
    return [(f["name"], f["type"]) for f in fields]


CHANGES = {
    "add": (dict(extra=True), ["id", "part", "ts", "n", "extra"], pa.int32()),
    "widen": (dict(n=pa.int64()), ["id", "part", "ts", "n"], pa.int64()),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("how", ["delete", "soft_delete"])
def test_a_rewrite_by_deletes_alone_writes_the_tables_schema(tmp_path, change, how):
    path = tmp_path / "t"
    table = _create(path)
    table.insert(_rows([1, 2, 101, 102]))
    kwargs, columns, n_type = CHANGES[change]
    table.upsert(_rows([2], **kwargs))  # reaches partition a only
    if how == "delete":
        instant = table.delete(pa.table({"id": pa.array([102], pa.int64()), "part": ["b"]}))
    else:
        instant = table.write(_rows([102], deleted=True, **kwargs), "upsert").instant

    if how == "soft_delete":
        columns = [*columns, "_hoodie_is_deleted"]  # a column of the write, so of its commit
    written = pq.read_schema(_latest_file(path, "b", instant))
    assert [f.name for f in written if f.name not in META_COLUMNS] == columns
    assert written.field("n").type == n_type
    # The file's columns are the table's, which its commit records.
    assert [name for name, _ in _commit_schema(path, instant)] == columns
    assert shoal.Table(str(path)).schema().field("n").type == n_type
    extra = {"extra": None} if change == "add" else {}
    want = [{"id": 1, "n": 1, **extra}, {"id": 2, "n": 2, **({"extra": "x2"} if extra else {})}]
    want.append({"id": 101, "n": 101, **extra})
    cols = ["id", "n", *extra]
    assert rows_by(pq.read_table(_latest_file(path, "b", instant)), cols, ["id"]) == [want[2]]
    assert rows_by(shoal.Table(str(path)).read(), cols, ["id"]) == want
    assert rows_by(hudi_rs_read(str(path)), cols, ["id"]) == want


def test_a_merge_without_a_schema_change_keeps_the_files_own_schema(tmp_path):
    """No schema change: the stored columns are kept as they are (an ``int`` stays ``int``)."""
    path = tmp_path / "t"
    table = _create(path)
    first = table.insert(_rows([1, 2, 3]))
    instant = table.delete(pa.table({"id": pa.array([3], pa.int64()), "part": ["a"]}))
    before, after = (
        pq.ParquetFile(_latest_file(path, "a", first)),
        pq.ParquetFile(_latest_file(path, "a", instant)),
    )
    assert after.schema_arrow.equals(before.schema_arrow)
    assert after.read().column("n").type == pa.int32()


def test_soft_deletes_that_add_a_column_write_it_into_the_file_they_rewrite(tmp_path):
    path = tmp_path / "t"
    table = _create(path)
    table.insert(_rows([101, 102]))
    instant = table.write(_rows([102], extra=True, deleted=True), "upsert").instant
    columns = ["id", "part", "ts", "n", "extra", "_hoodie_is_deleted"]
    assert [name for name, _ in _commit_schema(path, instant)] == columns
    written = pq.read_table(_latest_file(path, "b", instant))
    assert [f for f in written.column_names if f not in META_COLUMNS] == columns
    assert rows_by(written, ["id", "extra"], ["id"]) == [{"id": 101, "extra": None}]
