"""A Spark write whose input is a plain scan of parquet files: the route tasks read the files
themselves (``shoal.spark.file_input``) and write the table a ``mapInArrow`` over the same
records writes. Inputs pyarrow would not read as Spark does go through Spark: decided from the
plan and the first file before any task, or by a task that meets such a file. The rows are a
model's, read by shoal and by hudi-rs."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

import shoal
from shoal.spark.file_input import FileInput, InputMismatch, _reads_as
from shoal.spark.write import write as spark_write
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "city", "ts", "v"]
THROUGH_SPARK = "the write reads its input through Spark"


def _rows(rows: list[tuple[int, str, int, str]]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in rows])


def _create(path: str, table_type: str) -> shoal.Table:
    return shoal.Table.create(
        path, name="t", table_type=table_type, record_key="id", partition_by="city", ordering_field="ts"
    )


def _expected(model: dict[int, tuple[int, str, int, str]]) -> list[dict]:
    return [dict(zip(COLUMNS, r, strict=True)) for _, r in sorted(model.items())]


def _upsert_into_new_table(spark, source: Path, path: str, **create: str) -> None:
    """Upserts the parquet files under ``source`` into a new table at ``path`` keyed by ``id``."""
    reader = spark.read.parquet(str(source))
    spark_write(reader, path, "upsert", table_name="t", record_key="id", ordering_field="ts", **create)


def _all_batches(files: FileInput) -> pa.Table:
    batches = [b for task in range(len(files.tasks)) for b in files.batches(task)]
    return pa.Table.from_batches(batches, schema=files.schema)


def test_plain_parquet_scans_qualify_and_other_plans_do_not(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(_rows([(1, "sf", 1, "a"), (2, "la", 1, "b")]), source / "a.parquet")
    df = spark.read.parquet(str(source))
    files = FileInput.of(df)
    assert files is not None and files.files == 1 and files.schema.names == COLUMNS
    chosen = FileInput.of(df.select("v", "id"))
    assert chosen is not None and chosen.schema.names == ["v", "id"]

    hive = tmp_path / "hive" / "city=sf"
    hive.mkdir(parents=True)
    pq.write_table(_rows([(1, "sf", 1, "a")]).drop(["city"]), hive / "a.parquet")
    partitioned = FileInput.of(spark.read.parquet(str(tmp_path / "hive")))
    assert partitioned is not None and partitioned.partition_columns == ("city",)
    assert list(partitioned.partition_values.values()) == [("sf",)]
    floats = tmp_path / "floats" / "x=1.5"
    floats.mkdir(parents=True)
    pq.write_table(_rows([(1, "sf", 1, "a")]), floats / "a.parquet")
    json_file = tmp_path / "a.json"
    json_file.write_text('{"id": 1}\n')
    not_plain = {
        "filtered": df.where("id > 1"),
        "computed": df.withColumn("v", F.upper("v")),
        "renamed": df.withColumnRenamed("v", "w"),
        "local data": spark.createDataFrame(_rows([(1, "sf", 1, "a")])),
        "a partition column of doubles": spark.read.parquet(str(tmp_path / "floats")),
        "range": spark.range(3),
        "json": spark.read.json(str(json_file)),
        "reader option": spark.read.option("ignoreCorruptFiles", "true").parquet(str(source)),
        "cached": df.cache(),
    }
    try:
        for name, frame in not_plain.items():
            assert FileInput.of(frame) is None, name
    finally:
        df.unpersist()


def test_files_split_into_ranges_read_every_row_group_once(spark, tmp_path):
    data = pa.table({"id": list(range(20_000)), "v": [f"v{i}" for i in range(20_000)]})
    for i in range(3):
        pq.write_table(data.slice(i * 5000, 5000 + 1000 * i), tmp_path / f"f{i}.parquet", row_group_size=700)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "16384")
    spark.conf.set("spark.sql.files.openCostInBytes", "1024")
    try:
        files = FileInput.of(spark.read.parquet(str(tmp_path)))
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("spark.sql.files.openCostInBytes")
    assert files is not None
    # The files were cut into ranges: some tasks read part of a file.
    assert len(files.tasks) > 3
    assert any(r.start > 0 for task in files.tasks for r in task)
    read = _all_batches(files)
    expected = pa.concat_tables(pq.read_table(tmp_path / f"f{i}.parquet") for i in range(3))
    assert read.column("id").to_pylist() == expected.column("id").to_pylist()
    assert read.column("v").to_pylist() == expected.column("v").to_pylist()


def test_type_rules_follow_what_spark_reads():
    assert _reads_as(pa.timestamp("ms", "UTC"), pa.timestamp("us", "Etc/UTC"))
    assert _reads_as(pa.timestamp("us"), pa.timestamp("us"))
    assert not _reads_as(pa.timestamp("ns"), pa.timestamp("us", "UTC"))  # INT96 as pyarrow reads it
    assert not _reads_as(pa.timestamp("us"), pa.timestamp("us", "UTC"))
    assert not _reads_as(pa.uint32(), pa.int64())
    assert _reads_as(pa.dictionary(pa.int32(), pa.string()), pa.large_string())
    assert _reads_as(pa.list_(pa.field("element", pa.int32())), pa.list_(pa.int32()))
    assert not _reads_as(pa.list_(pa.int32()), pa.list_(pa.int64()))
    assert _reads_as(pa.struct([("a", pa.int32())]), pa.struct([("a", pa.int32())]))
    assert not _reads_as(pa.struct([("a", pa.int32())]), pa.struct([("A", pa.int32())]))
    assert _reads_as(pa.map_(pa.string(), pa.int64()), pa.map_(pa.string(), pa.int64()))
    assert not _reads_as(pa.binary(), pa.string())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_an_upsert_read_from_files_writes_what_spark_rows_write(spark, tmp_path, caplog, table_type):
    stored = [(i, ["sf", "la", "ny"][i % 3], 1, "old") for i in range(60)]
    direct, through = str(tmp_path / "direct"), str(tmp_path / "through")
    for path in (direct, through):
        _create(path, table_type).bulk_insert(_rows(stored))
    model = {r[0]: r for r in stored}

    # Updates, new keys, a new partition, and a key twice in a file (the later ordering wins).
    source = tmp_path / "in"
    source.mkdir()
    first = [(3, "sf", 2, "upd"), (100, "la", 2, "new"), (7, "la", 5, "late"), (7, "la", 4, "early")]
    second = [(11, "ny", 2, "upd"), (101, "sea", 2, "new"), (12, "sf", 2, "upd")]
    pq.write_table(_rows(first), source / "a.parquet")
    pq.write_table(_rows(second), source / "b.parquet")
    for r in first + second:
        if r[0] not in model or model[r[0]][2] <= r[2]:
            model[r[0]] = r
    model[7] = (7, "la", 5, "late")

    with caplog.at_level(logging.INFO, logger="shoal"):
        spark_write(spark.read.parquet(str(source)), direct, "upsert")
        assert THROUGH_SPARK not in caplog.text
        off = {"shoal.spark.write.direct.parquet.input": "false"}
        spark_write(spark.read.parquet(str(source)), through, "upsert", off)
        assert THROUGH_SPARK in caplog.text

    expected = _expected(model)
    assert rows_by(shoal.Table(direct).read(), COLUMNS, ["id"]) == expected
    assert rows_by(shoal.Table(through).read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(direct), COLUMNS, ["id"]) == expected


def test_a_file_spark_reads_otherwise_sends_the_pass_through_spark(spark, tmp_path, caplog):
    """The first file qualifies, a later one stores ``v`` as uint32 (Spark reads a long): a task
    finds it, the pass is discarded and runs again through Spark."""
    path = str(tmp_path / "t")
    shoal.Table.create(path, name="t", record_key="id", ordering_field="ts").bulk_insert(
        pa.table({"id": [1, 2], "ts": [1, 1], "v": [10, 20]})
    )
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(
        pa.table({"id": [1, 3], "ts": [2, 2], "v": pa.array([11, 30], pa.int64())}), source / "a.parquet"
    )
    pq.write_table(pa.table({"id": [4], "ts": [2], "v": pa.array([40], pa.uint32())}), source / "b.parquet")
    df = spark.read.schema("id long, ts long, v long").parquet(str(source))
    files = FileInput.of(df)
    assert files is not None
    with pytest.raises(InputMismatch, match="uint32"):
        _all_batches(files)

    with caplog.at_level(logging.INFO, logger="shoal"):
        spark_write(df, path, "upsert")
    assert THROUGH_SPARK in caplog.text and "uint32" in caplog.text
    expected = [{"id": 1, "ts": 2, "v": 11}, {"id": 2, "ts": 1, "v": 20}, {"id": 3, "ts": 2, "v": 30}]
    expected.append({"id": 4, "ts": 2, "v": 40})
    assert rows_by(shoal.Table(path).read(), ["id", "ts", "v"], ["id"]) == expected
    assert rows_by(hudi_rs_read(path), ["id", "ts", "v"], ["id"]) == expected
    # Nothing of the discarded pass is left in the table's temp directory.
    assert not list((tmp_path / "t" / ".hoodie" / ".temp").rglob("*.arrow"))


def test_millisecond_timestamps_are_read_as_spark_reads_them(spark, tmp_path, caplog):
    path = str(tmp_path / "t")
    source = tmp_path / "in"
    source.mkdir()
    at = [
        datetime(2024, 5, 1, 12, 30, 15, 123000, tzinfo=UTC),
        datetime(1999, 1, 2, tzinfo=UTC),
    ]
    pq.write_table(
        pa.table({"id": [1, 2], "ts": [1, 1], "at": pa.array(at, pa.timestamp("ms", "UTC"))}),
        source / "a.parquet",
    )
    with caplog.at_level(logging.INFO, logger="shoal"):
        _upsert_into_new_table(spark, source, path)
    assert THROUGH_SPARK not in caplog.text
    read = shoal.Table(path).read()
    assert read.schema.field("at").type == pa.timestamp("us", "UTC")
    assert read.sort_by("id").column("at").to_pylist() == at
    assert hudi_rs_read(path).sort_by("id").column("at").cast(pa.timestamp("us", "UTC")).to_pylist() == at


@pytest.mark.parametrize("mismatched", [False, True])
def test_a_global_index_write_reads_the_files_in_both_passes_or_in_neither(
    spark, tmp_path, caplog, mismatched
):
    """The key pass and the route pass number the records alike: both read the files, or (a
    file of another type) both go through Spark. A key moves partition under the global index."""
    path = str(tmp_path / "t")
    options = {"hoodie.index.type": "GLOBAL_BLOOM"}
    stored = [(i, ["sf", "la"][i % 2], 1, "old") for i in range(20)]
    _create(path, "MERGE_ON_READ").bulk_insert(_rows(stored))
    model = {r[0]: r for r in stored}
    source = tmp_path / "in"
    source.mkdir()
    first = [(3, "ny", 2, "moved"), (100, "la", 2, "new"), (100, "la", 3, "newer")]
    second = [(4, "sf", 2, "upd"), (101, "sf", 2, "new")]
    # A column the key pass does not read: it checks it all the same.
    pq.write_table(_rows(first).append_column("n", pa.array([1, 2, 3], pa.int64())), source / "a.parquet")
    n_type = pa.uint32() if mismatched else pa.int64()
    pq.write_table(_rows(second).append_column("n", pa.array([4, 5], n_type)), source / "b.parquet")
    for r in first + second:
        if r[0] not in model or model[r[0]][2] <= r[2]:
            model[r[0]] = r

    df = spark.read.schema("id long, city string, ts long, v string, n long").parquet(str(source))
    with caplog.at_level(logging.INFO, logger="shoal"):
        spark_write(df, path, "upsert", options)
    assert (THROUGH_SPARK in caplog.text) == mismatched
    expected = _expected(model)
    assert rows_by(shoal.Table(path).read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == expected


def test_paths_spark_percent_encodes_are_read(spark, tmp_path, caplog):
    """Spark names the files by percent-encoded URIs: a space, ``%`` or ``#`` in a path."""
    source = tmp_path / "in put%20" / "a#b"
    source.mkdir(parents=True)
    pq.write_table(_rows([(1, "sf", 1, "x"), (2, "la", 1, "y")]), source / "part 1%.parquet")
    path = str(tmp_path / "t")
    with caplog.at_level(logging.INFO, logger="shoal"):
        _upsert_into_new_table(spark, source, path, partition_by="city")
    assert THROUGH_SPARK not in caplog.text
    expected = [{"id": 1, "city": "sf", "ts": 1, "v": "x"}, {"id": 2, "city": "la", "ts": 1, "v": "y"}]
    assert rows_by(shoal.Table(path).read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == expected


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_delete_read_from_files(spark, tmp_path, caplog, table_type):
    path = str(tmp_path / "t")
    stored = [(i, ["sf", "la"][i % 2], 1, "old") for i in range(12)]
    _create(path, table_type).bulk_insert(_rows(stored))
    source = tmp_path / "in"
    source.mkdir()
    # Keys of two partitions, and one the table does not hold.
    pq.write_table(_rows([(2, "sf", 2, "x"), (5, "la", 2, "x")]), source / "a.parquet")
    pq.write_table(_rows([(8, "sf", 2, "x"), (99, "la", 2, "x")]), source / "b.parquet")
    with caplog.at_level(logging.INFO, logger="shoal"):
        spark_write(spark.read.parquet(str(source)), path, "delete")
    assert THROUGH_SPARK not in caplog.text
    expected = _expected({r[0]: r for r in stored if r[0] not in (2, 5, 8)})
    assert rows_by(shoal.Table(path).read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == expected


def test_a_plan_that_cannot_be_inspected_goes_through_spark(caplog):
    """No JVM plan to inspect (as with Spark Connect): the write reads through Spark."""
    with caplog.at_level(logging.INFO, logger="shoal"):
        assert FileInput.of(object()) is None  # type: ignore[arg-type]
    assert "its plan cannot be inspected" in caplog.text


def test_partition_columns_from_directory_names(spark, tmp_path, caplog):
    """``day=2024-01-01/n=1/``: the values Spark parses from the directory names (a date, an
    integer, a null for Hive's default partition) are the columns' values, in the DataFrame's
    column order; a string partition column is the table's partition field."""
    source = tmp_path / "in"
    layout = [("2024-01-01", "1", "sf"), ("2024-01-02", "1", "la"), ("__HIVE_DEFAULT_PARTITION__", "3", "sf")]
    for i, (day, n, city) in enumerate(layout):
        directory = source / f"day={day}" / f"n={n}" / f"city={city}"
        directory.mkdir(parents=True)
        pq.write_table(pa.table({"id": [i, i + 10], "ts": [1, 1], "v": ["a", "b"]}), directory / "f.parquet")
    df = spark.read.parquet(str(source))
    assert df.columns == ["id", "ts", "v", "day", "n", "city"]
    direct, through = str(tmp_path / "direct"), str(tmp_path / "through")
    create = {"table_name": "t", "record_key": "id", "partition_by": "city", "ordering_field": "ts"}
    with caplog.at_level(logging.INFO, logger="shoal"):
        spark_write(df, direct, "upsert", **create)
        assert THROUGH_SPARK not in caplog.text
        spark_write(df, through, "upsert", {"shoal.spark.write.direct.parquet.input": "false"}, **create)
    columns = ["id", "ts", "v", "day", "n", "city"]
    expected = sorted(
        (i + k * 10, 1, "ab"[k], day, int(n), city) for i, (day, n, city) in enumerate(layout) for k in (0, 1)
    )
    for read in (shoal.Table(direct).read(), shoal.Table(through).read(), hudi_rs_read(direct)):
        got = sorted(
            (r["id"], r["ts"], r["v"], None if r["day"] is None else r["day"].isoformat(), r["n"], r["city"])
            for r in read.select(columns).to_pylist()
        )
        assert got == [
            (i, ts, v, None if day == "__HIVE_DEFAULT_PARTITION__" else day, n, city)
            for i, ts, v, day, n, city in expected
        ]
    # Only the partition columns: the key pass of a global index write reads no stored column.
    files = FileInput.of(df.select("day", "n"))
    assert files is not None
    only = pa.Table.from_batches([b for t in range(len(files.tasks)) for b in files.batches(t)])
    assert only.num_rows == 6 and only.column_names == ["day", "n"]
