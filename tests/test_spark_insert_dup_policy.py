"""The insert duplicate policy (``hoodie.datasource.insert.dup.policy``) through Spark: the route
tasks of ``shoal.spark.write`` and the tasks of ``df.write.format("shoal")`` leave out records
of keys the table holds, or fail the write before the timeline changes; the table then equals
what a local write under the same policy gives (tests/test_insert_dup_policy.py), and hudi-rs
reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.spark.datasource import register
from shoal.spark.write import write as spark_write
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.test_insert_dup_policy import COLUMNS, DROP, FAIL, INCOMING, KEPT, STORED, _batch

OPTIONS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.bucket.index.num.buckets": "2",
}


def _stored_table(path: Path, table_type: str, index: str) -> str:
    t = shoal.Table.create(
        str(path),
        name="t",
        table_type=table_type,
        record_key="id",
        partition_by="part",
        ordering_field="ts",
        options={"hoodie.index.type": index, "hoodie.bucket.index.num.buckets": "2"},
    )
    t.insert(_batch(STORED))
    return str(path)


def _expected(rows: list[tuple[str, str, int, int]]) -> list[dict]:
    return rows_by(_batch(rows), COLUMNS, COLUMNS)


def _check(path: str, rows: list[tuple[str, str, int, int]]) -> None:
    expected = _expected(rows)
    assert rows_by(shoal.Table(path).read(columns=COLUMNS), COLUMNS, COLUMNS) == expected
    assert rows_by(hudi_rs_read(path), COLUMNS, COLUMNS) == expected


def _timeline(path: str) -> list[str]:
    return sorted(p.name for p in (Path(path) / ".hoodie").iterdir() if p.is_file())


@pytest.mark.parametrize(
    ("table_type", "index"),
    [("COPY_ON_WRITE", "BLOOM"), ("MERGE_ON_READ", "BUCKET"), ("MERGE_ON_READ", "GLOBAL_SIMPLE")],
)
def test_spark_write_drops_records_of_held_keys(spark, tmp_path, table_type, index):
    path = _stored_table(tmp_path / "t", table_type, index)
    df = spark.createDataFrame(_batch(INCOMING).to_pandas()).repartition(2)
    spark_write(df, path, "insert", {**OPTIONS, "hoodie.index.type": index, **DROP})
    _check(path, STORED + KEPT)


def test_spark_write_fails_on_held_keys_and_changes_nothing(spark, tmp_path):
    path = _stored_table(tmp_path / "t", "MERGE_ON_READ", "BLOOM")
    before = _timeline(path)
    df = spark.createDataFrame(_batch(INCOMING).to_pandas())
    with pytest.raises(shoal.DuplicateKeyError, match="'b', 'c'"):
        spark_write(df, path, "insert", {**OPTIONS, **FAIL})
    assert _timeline(path) == before
    _check(path, STORED)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_data_source_write_drops_records_of_held_keys(spark, tmp_path, table_type):
    register(spark)
    path = _stored_table(tmp_path / "t", table_type, "BLOOM")
    df = spark.createDataFrame(_batch(INCOMING).to_pandas()).repartition(2)
    (
        df.write.format("shoal")
        .options(**OPTIONS, **DROP)
        .option("hoodie.datasource.write.operation", "insert")
        .mode("append")
        .save(path)
    )
    _check(path, STORED + KEPT)


def test_data_source_write_fails_on_held_keys(spark, tmp_path):
    register(spark)
    path = _stored_table(tmp_path / "t", "COPY_ON_WRITE", "BLOOM")
    df = spark.createDataFrame(_batch(INCOMING).to_pandas())
    with pytest.raises(Exception, match="DuplicateKeyError"):
        (
            df.write.format("shoal")
            .options(**OPTIONS, **FAIL)
            .option("hoodie.datasource.write.operation", "insert")
            .mode("append")
            .save(path)
        )
    _check(path, STORED)
    # The failed write was rolled back: the next one commits.
    spark.createDataFrame(_batch(KEPT).to_pandas()).write.format("shoal").options(**OPTIONS, **FAIL).option(
        "hoodie.datasource.write.operation", "insert"
    ).mode("append").save(path)
    _check(path, STORED + KEPT)
