"""A table path that names a file: every write that would create a table there raises
InvalidArgumentError saying so, and leaves the file as it was (it used to fail with an untyped
NotADirectoryError, after the local create had begun)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import shoal
from shoal.errors import InvalidArgumentError

OPTIONS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
}


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "not-a-table"
    path.write_bytes(b"someone's data")
    yield path
    assert path.read_bytes() == b"someone's data"


def test_table_create(a_file):
    with pytest.raises(InvalidArgumentError, match="is a file"):
        shoal.Table.create(str(a_file), "t", record_key="id")


def test_spark_writes(a_file, spark):
    from shoal.spark import register
    from shoal.spark import write as spark_write

    register(spark)
    df = spark.createDataFrame(pa.table({"id": [1], "ts": [1]}))
    with pytest.raises(InvalidArgumentError, match="is a file"):
        spark_write(df, str(a_file), operation="upsert", **OPTIONS)
    with pytest.raises(Exception, match=r"InvalidArgumentError.*is a file"):
        df.write.format("shoal").options(**OPTIONS).option(
            "hoodie.datasource.write.operation", "insert"
        ).mode("append").save(str(a_file))
