"""``df.write.format("shoal")`` writes that must bring a key's records together (upsert, delete,
deduplicating and looked-up inserts) are staged by the tasks and written by the commit with the
embedded engine: the rows are a model's (shoal and hudi-rs read them), the timeline does not
change before the commit, a failure leaves the table (or the empty path) as it was, and no
staged file stays behind."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.errors import SchemaMismatchError
from shoal.spark.datasource import begin_write, commit_staged, register
from shoal.spark.read import spark_schema
from shoal.spark.staging import StagedRows, stage_rows
from tests.hudi_oracle import hudi_rs_read, rows_by

CREATE = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}
SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
COLUMNS = ["id", "city", "ts", "v"]


@pytest.fixture(scope="module")
def ss(spark):
    register(spark)
    return spark


def _rows(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in rows], schema=SCHEMA)


def _write(spark, rows: list[tuple], path: str, operation: str, partitions: int = 3, **options) -> None:
    df = spark.createDataFrame(_rows(rows)).repartition(partitions)
    writer = df.write.format("shoal").option("hoodie.datasource.write.operation", operation)
    writer.options(**options).mode("append").save(path)


class Model:
    """The table's rows by key: the greatest ``ts`` wins, a delete removes the key."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple] = {}

    def upsert(self, rows: list[tuple]) -> None:
        for row in rows:
            held = self.rows.get(row[0])
            if held is None or row[2] >= held[2]:
                self.rows[row[0]] = row

    def delete(self, keys: list[int]) -> None:
        for key in keys:
            self.rows.pop(key, None)

    def expected(self) -> list[dict]:
        return [dict(zip(COLUMNS, self.rows[k], strict=True)) for k in sorted(self.rows)]


def _staging_left(path: str) -> list[str]:
    temp = os.path.join(path, ".hoodie", ".temp")
    return os.listdir(temp) if os.path.exists(temp) else []


def _assert_rows(path: str, model: Model) -> None:
    assert rows_by(shoal.Table(path).read(), COLUMNS, ["id"]) == model.expected()
    assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == model.expected()
    assert _staging_left(path) == []


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_upserts_and_deletes_through_the_data_source(ss, tmp_path, table_type):
    path = str(tmp_path / "t")
    model = Model()
    first = [(i, ["sf", "nyc", "la"][i % 3], 10, f"a{i}") for i in range(30)]
    # The first write creates the table (an upsert, staged like every upsert).
    _write(ss, first, path, "upsert", **CREATE, **{"hoodie.datasource.write.table.type": table_type})
    model.upsert(first)
    _assert_rows(path, model)
    # Updates, new keys, a key twice in the batch (spread over the tasks: the later ts wins)
    # and late events (an older ts than the stored one loses).
    batch = [(3, "sf", 11, "b3"), (4, "nyc", 5, "late4"), (40, "la", 1, "new40"), (5, "la", 12, "b5")]
    batch += [(40, "la", 3, "new40-later"), (3, "sf", 15, "b3-later"), (41, "sf", 1, "new41")]
    _write(ss, batch, path, "upsert", partitions=4)
    model.upsert(batch)
    _assert_rows(path, model)
    deletes = [(6, "sf", 0, ""), (7, "nyc", 0, ""), (999, "la", 0, "")]
    _write(ss, deletes, path, "delete")
    model.delete([6, 7, 999])
    _assert_rows(path, model)
    table = shoal.Table(path)
    action = "commit" if table_type == "COPY_ON_WRITE" else "deltacommit"
    assert [(t.action, t.state) for t in table.timeline] == [(action, "COMPLETED")] * 3


def test_inserts_that_deduplicate_or_look_up_keys(ss, tmp_path):
    path = str(tmp_path / "t")
    model = Model()
    first = [(i, "sf", 1, f"a{i}") for i in range(10)]
    _write(ss, first, path, "bulk_insert", **CREATE)
    model.upsert(first)
    # Deduplicated over the whole input: each key once, the greatest ts.
    dupes = [(20, "sf", 1, "x"), (20, "sf", 3, "y"), (21, "nyc", 2, "z"), (20, "sf", 2, "w")]
    _write(ss, dupes, path, "insert", partitions=4, **{"hoodie.combine.before.insert": "true"})
    model.upsert(dupes)
    _assert_rows(path, model)
    # The duplicate policy drops the incoming records of stored keys.
    again = [(1, "sf", 9, "dropped"), (30, "la", 1, "kept")]
    _write(ss, again, path, "insert", **{"hoodie.datasource.insert.dup.policy": "drop"})
    model.upsert(again[1:])
    _assert_rows(path, model)


def test_a_failed_staged_write_changes_nothing(ss, tmp_path):
    path = str(tmp_path / "t")
    _write(ss, [(1, "sf", 1, "a")], path, "bulk_insert", **CREATE)
    before = shoal.Table(path).instants()
    # A null record key fails the commit's write: the staged rows go, the timeline stays.
    df = ss.createDataFrame(
        pa.table(
            {
                "id": pa.array([2, None], pa.int64()),
                "city": ["sf", "sf"],
                "ts": pa.array([1, 1], pa.int64()),
                "v": ["b", "c"],
            }
        )
    )
    with pytest.raises(Exception, match="InvalidRecordKeyError"):
        df.write.format("shoal").option("hoodie.datasource.write.operation", "upsert").mode("append").save(
            path
        )
    assert shoal.Table(path).instants() == before
    model = Model()
    model.upsert([(1, "sf", 1, "a")])
    _assert_rows(path, model)
    # A first write into an empty path that fails leaves no table behind.
    fresh = str(tmp_path / "fresh")
    with pytest.raises(Exception, match="InvalidRecordKeyError"):
        writer = df.write.format("shoal").options(**CREATE)
        writer.option("hoodie.datasource.write.operation", "upsert").mode("append").save(fresh)
    assert not os.path.exists(fresh)


def test_the_commit_writes_only_the_files_its_messages_name(tmp_path):
    """A task attempt that failed staged a file no message names: the commit leaves its rows out
    and deletes it with the staging directory."""
    path = str(tmp_path / "t")
    options = {"path": path, "hoodie.datasource.write.operation": "upsert", **CREATE}
    job = begin_write(options, spark_schema(SCHEMA), overwrite=False)
    assert job.staging is not None
    assert shoal.Table(path).instants() == []  # no instant until the commit
    lost = stage_rows(job.base_uri, job.staging + "/0", iter(_rows([(1, "sf", 1, "lost")]).to_batches()))
    kept = stage_rows(job.base_uri, job.staging + "/1", iter(_rows([(2, "sf", 1, "kept")]).to_batches()))
    assert lost.files and kept.files
    commit_staged(job, [kept, None])
    model = Model()
    model.upsert([(2, "sf", 1, "kept")])
    _assert_rows(path, model)
    # Nothing staged: nothing is written.
    job = begin_write(options, spark_schema(SCHEMA), overwrite=False)
    assert commit_staged(job, [StagedRows(), None]) is None
    assert len(shoal.Table(path).timeline) == 1


def test_a_staged_write_checks_its_schema_before_any_task(tmp_path):
    path = str(tmp_path / "t")
    options = {"path": path, "hoodie.datasource.write.operation": "upsert", **CREATE}
    begin_write(options, spark_schema(SCHEMA), overwrite=False)
    with pytest.raises(SchemaMismatchError):
        begin_write(options, spark_schema(SCHEMA.remove(SCHEMA.get_field_index("ts"))), overwrite=False)


def test_a_staged_write_deletes_staging_its_driver_abandoned(tmp_path):
    """Rows staged by a write whose driver died before the commit are deleted by a later staged
    write once a week has passed; younger staging, and other scratch directories, stay."""
    path = str(tmp_path / "t")
    options = {"path": path, "hoodie.datasource.write.operation": "upsert", **CREATE}
    begin_write(options, spark_schema(SCHEMA), overwrite=False)
    temp = os.path.join(path, ".hoodie", ".temp")
    week_ago = time.time() - 7 * 24 * 3600
    for name, age in [("ds-write-old", week_ago - 60), ("ds-write-young", week_ago + 600)]:
        os.makedirs(os.path.join(temp, name))
        with open(os.path.join(temp, name, "0-0-0.arrow"), "wb") as f:
            f.write(b"rows")
        os.utime(os.path.join(temp, name), (age, age))
    os.makedirs(os.path.join(temp, "stream-sink-old"))
    os.utime(os.path.join(temp, "stream-sink-old"), (week_ago - 60, week_ago - 60))
    begin_write(options, spark_schema(SCHEMA), overwrite=False)
    assert sorted(_staging_left(path)) == ["ds-write-young", "stream-sink-old"]
