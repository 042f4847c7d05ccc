"""Spark paths against the embedded engine, where a user moving a pipeline to Spark would see
them differ: float filters on zeros in the native scan, and deduplicating inserts through the
data source writer."""

from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
import shoal.spark
from shoal.spark.datasource import register


@pytest.fixture
def ss(spark):
    register(spark)
    return spark


# ---- the native scan: -0.0 and 0.0 --------------------------------------------------------------

ZERO_FILTERS = [
    [("v", "=", 0.0)],
    [("v", "=", 0)],
    [("v", "=", -0.0)],
    [("v", ">=", 0.0)],
    [("v", "<=", -0.0)],
    [("v", "in", [0.0])],
    [("v", "in", [-0.0, 7.5])],
    [("v", "not in", [0.0])],
    [("v", "!=", -0.0)],
]


@pytest.fixture(scope="module")
def zeros(tmp_path_factory) -> str:
    """A partition per file whose float column holds -0.0 or 0.0 (a dictionary of one zero)."""
    path = str(tmp_path_factory.mktemp("probe") / "zeros")
    table = shoal.Table.create(path, "zeros", record_key="id", partition_by="p", ordering_field="ts")
    values = {"neg": [-0.0, -0.0, float("nan")], "pos": [0.0, 0.0], "mixed": [-0.0, 0.0, 7.5, None]}
    rows = [(p, v) for p, vs in values.items() for v in vs]
    table.bulk_insert(
        pa.table(
            {
                "id": pa.array(range(len(rows)), pa.int64()),
                "p": [p for p, _ in rows],
                "ts": pa.array([1] * len(rows), pa.int64()),
                "v": pa.array([v for _, v in rows], pa.float64()),
            }
        )
    )
    return path


@pytest.mark.parametrize("filters", ZERO_FILTERS, ids=str)
def test_float_filters_on_zeros_keep_the_rows_the_local_reader_keeps(spark, zeros, filters):
    expected = sorted(shoal.Table(zeros).read(columns=["id"], filters=filters)["id"].to_pylist())
    got = shoal.spark.read(spark, zeros, columns=["id"], filters=filters).toArrow()
    assert sorted(got["id"].to_pylist()) == expected


# ---- the data source writer: combine before insert ----------------------------------------------

CREATE = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}


def _repeating(n: int) -> pa.Table:
    """``n`` records of 5 keys, the greatest ``ts`` last."""
    return pa.table(
        {
            "id": pa.array([i % 5 for i in range(n)], pa.int64()),
            "p": ["a"] * n,
            "ts": pa.array(range(n), pa.int64()),
            "v": [f"v{i}" for i in range(n)],
        }
    )


@pytest.mark.parametrize("operation", ["insert", "bulk_insert", "insert_overwrite_table"])
def test_data_source_deduplicates_an_insert_as_the_embedded_engine_does(ss, tmp_path, operation):
    data = _repeating(40)
    combine = {"hoodie.combine.before.insert": "true"}
    paths = {engine: str(tmp_path / engine) for engine in ("local", "source", "spark")}
    for path in paths.values():
        shoal.Table.create(path, "t", record_key="id", partition_by="p", ordering_field="ts").insert(data)
    shoal.Table(paths["local"], options=combine).write(data, operation)
    # Rows of one key in several Spark partitions: no task sees all of them, the staged
    # write's commit does.
    df = ss.createDataFrame(data).repartition(4)
    writer = df.write.format("shoal").mode("append").options(**CREATE, **combine)
    writer.option("hoodie.datasource.write.operation", operation).save(paths["source"])
    # shoal.spark.write deduplicates the whole input too.
    shoal.spark.write(df, paths["spark"], operation, {**CREATE, **combine})

    def rows(path: str) -> list[dict]:
        return (
            shoal.Table(path)
            .read(columns=["id", "ts", "v"])
            .sort_by([("id", "ascending"), ("ts", "ascending")])
            .to_pylist()
        )

    expected = rows(paths["local"])
    # The initial 40 rows (kept by an insert, replaced by an overwrite) and one row per key.
    assert len(expected) == (5 if operation == "insert_overwrite_table" else 45)
    assert rows(paths["source"]) == expected
    assert rows(paths["spark"]) == expected


# ---- streams: a projection keeps the commit time -------------------------------------------------


def _stream_rows(ss, path: str, checkpoint: str, **options: str) -> list[dict]:
    batches: list[list[dict]] = []
    stream = ss.readStream.format("shoal").options(**options).load(path)
    query = (
        stream.writeStream.foreachBatch(lambda df, _: batches.append([r.asDict() for r in df.collect()]))
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return [row for batch in batches for row in batch]


def test_a_streams_projection_has_the_commit_time_of_table_stream(ss, tmp_path):
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, "t", record_key="id", partition_by="p", ordering_field="ts")
    table.insert(_repeating(5))
    table.upsert(_repeating(5).set_column(2, "ts", pa.array([9] * 5, pa.int64())))
    expected = sorted(
        (r["_hoodie_commit_time"], r["v"])
        for change in table.stream(columns=["v"], timeout=0)
        for r in change.table.to_pylist()
    )
    assert len(expected) == 10
    # Without the query type, Spark takes the schema of a snapshot's projection: refused, as
    # include_deletes is, rather than a stream without commit times.
    with pytest.raises(Exception, match=r"InvalidOptionError: a stream's columns option needs query_type"):
        _stream_rows(ss, path, str(tmp_path / "ck1"), columns="v")
    # One commit per micro-batch, as Table.stream yields them.
    options = {"columns": "v", "query_type": "incremental", "max_instants_per_trigger": "1"}
    rows = _stream_rows(ss, path, str(tmp_path / "ck2"), **options)
    assert sorted((r["_hoodie_commit_time"], r["v"]) for r in rows) == expected
