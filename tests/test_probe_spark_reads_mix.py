"""Spark reads of tables in states production tables reach, against the local reads."""

from __future__ import annotations

import importlib

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.spark.datasource import register

spark_read = importlib.import_module("shoal.spark.read")


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_incremental_with_deletes_of_a_table_whose_only_commit_deleted_nothing_has_no_columns(
    spark, tmp_path, table_type
):
    # The only commit deletes keys the table never had: no schema, so the local read returns
    # no columns; the Spark reads declared a lone _hoodie_is_deleted column.
    path = str(tmp_path / "t")
    table = shoal.Table.create(
        path, name="t", table_type=table_type, record_key="id", partition_by="part", ordering_field="ts"
    )
    table.delete(pa.table({"id": ["a"], "part": ["x"]}))
    local = table.read_incremental(include_deletes=True)
    assert local.column_names == []
    register(spark)
    df = (
        spark.read.format("shoal")
        .option("hoodie.datasource.query.type", "incremental")
        .option("include_deletes", "true")
        .load(path)
    )
    assert df.columns == local.column_names
    assert df.count() == 0
    fast = spark_read.read(spark, path, query_type="incremental", include_deletes=True)
    assert fast.columns == local.column_names
    assert fast.count() == 0
