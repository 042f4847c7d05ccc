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
from tests.test_insert_dup_policy import DROP, FAIL, INCOMING, KEPT, STORED, _batch, _check, _table, _timeline

OPTIONS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.bucket.index.num.buckets": "2",
}


def _stored_table(tmp_path: Path, table_type: str, index: str) -> str:
    t = _table(tmp_path, table_type, **{"hoodie.index.type": index, "hoodie.bucket.index.num.buckets": "2"})
    t.insert(_batch(STORED))
    return t.path


def _check_path(path: str, rows: list[tuple[str, str, int, int]]) -> None:
    _check(shoal.Table(path), rows)


@pytest.mark.parametrize(
    ("table_type", "index"),
    [("COPY_ON_WRITE", "BLOOM"), ("MERGE_ON_READ", "BUCKET"), ("MERGE_ON_READ", "GLOBAL_SIMPLE")],
)
def test_spark_write_drops_records_of_held_keys(spark, tmp_path, table_type, index):
    path = _stored_table(tmp_path, table_type, index)
    df = spark.createDataFrame(_batch(INCOMING).to_pandas()).repartition(2)
    spark_write(df, path, "insert", {**OPTIONS, "hoodie.index.type": index, **DROP})
    _check_path(path, STORED + KEPT)


def test_spark_write_fails_on_held_keys_and_changes_nothing(spark, tmp_path):
    path = _stored_table(tmp_path, "MERGE_ON_READ", "BLOOM")
    before = _timeline(shoal.Table(path))
    df = spark.createDataFrame(_batch(INCOMING).to_pandas())
    with pytest.raises(shoal.DuplicateKeyError, match="'b', 'c'"):
        spark_write(df, path, "insert", {**OPTIONS, **FAIL})
    assert _timeline(shoal.Table(path)) == before
    _check_path(path, STORED)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_data_source_write_drops_records_of_held_keys(spark, tmp_path, table_type):
    register(spark)
    path = _stored_table(tmp_path, table_type, "BLOOM")
    df = spark.createDataFrame(_batch(INCOMING).to_pandas()).repartition(2)
    (
        df.write.format("shoal")
        .options(**OPTIONS, **DROP)
        .option("hoodie.datasource.write.operation", "insert")
        .mode("append")
        .save(path)
    )
    _check_path(path, STORED + KEPT)


def test_data_source_write_fails_on_held_keys(spark, tmp_path):
    register(spark)
    path = _stored_table(tmp_path, "COPY_ON_WRITE", "BLOOM")
    df = spark.createDataFrame(_batch(INCOMING).to_pandas())
    with pytest.raises(Exception, match="DuplicateKeyError"):
        (
            df.write.format("shoal")
            .options(**OPTIONS, **FAIL)
            .option("hoodie.datasource.write.operation", "insert")
            .mode("append")
            .save(path)
        )
    _check_path(path, STORED)
    # The failed write was rolled back: the next one commits.
    spark.createDataFrame(_batch(KEPT).to_pandas()).write.format("shoal").options(**OPTIONS, **FAIL).option(
        "hoodie.datasource.write.operation", "insert"
    ).mode("append").save(path)
    _check_path(path, STORED + KEPT)
