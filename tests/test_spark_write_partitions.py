"""A Spark write under a partitioned index lists only the partitions its records fall in: the
route tasks list each partition they meet (``LatestSlices``), and the driver lists none of the
others, as Hudi's partitioned indexes load only the affected partitions' files. The rows are a
model's, read by shoal and by hudi-rs."""

from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.fs.storage import Storage
from shoal.spark.write import write as spark_write
from tests.hudi_oracle import hudi_rs_read, rows_by

PARTITIONS = [f"p{i}" for i in range(12)]
COLUMNS = ["id", "city", "ts", "v"]


def _rows(rows: list[tuple[int, str, int, str]]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in rows])


def _listed_on_the_driver(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every (directory, recursive) listing this process makes from now on."""
    listed: list[tuple[str, bool]] = []
    original = Storage.list_files

    def list_files(self, rel, recursive=False):
        listed.append((rel, recursive))
        return original(self, rel, recursive)

    monkeypatch.setattr(Storage, "list_files", list_files)
    return listed


def _data_dirs(listed: list[tuple[str, bool]]) -> set[str]:
    return {rel for rel, _ in listed if not rel.startswith(".hoodie")}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_an_upsert_and_a_deduplicating_insert_list_only_their_partitions(
    spark, tmp_path, monkeypatch, table_type
):
    path = str(tmp_path / "t")
    stored = [(i, PARTITIONS[i % 12], 1, "old") for i in range(48)]
    shoal.Table.create(
        path, name="t", table_type=table_type, record_key="id", partition_by="city", ordering_field="ts"
    ).bulk_insert(_rows(stored))
    model = {r[0]: r for r in stored}

    listed = _listed_on_the_driver(monkeypatch)
    # Updates in p3 and p7, a new key in p3, a new partition.
    upsert = [(3, "p3", 2, "new"), (19, "p7", 2, "new"), (100, "p3", 2, "new"), (101, "p99", 2, "new")]
    spark_write(spark.createDataFrame(_rows(upsert)), path, "upsert")
    model |= {r[0]: r for r in upsert}
    assert _data_dirs(listed) <= {"p3", "p7", "p99"}
    assert not any(recursive and not rel.startswith(".hoodie") for rel, recursive in listed)

    # An insert that drops the records of keys the table holds: 15 is held (in p3), 102 is not.
    listed.clear()
    insert = [(15, "p3", 3, "dup"), (102, "p5", 3, "new")]
    options = {"hoodie.datasource.insert.dup.policy": "drop"}
    spark_write(spark.createDataFrame(_rows(insert)), path, "insert", options)
    model[102] = insert[1]
    assert _data_dirs(listed) <= {"p3", "p5"}

    expected = [dict(zip(COLUMNS, r, strict=True)) for _, r in sorted(model.items())]
    assert rows_by(shoal.Table(path).read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == expected
