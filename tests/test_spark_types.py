"""Column types through the Spark write: structs of structs, lists, maps, decimals, dates and
UTC timestamps go from Spark rows through the packed shuffle into base files and log blocks,
and come back as written, from shoal and from hudi-rs."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("pyspark")

import shoal
import shoal.spark
from tests.hudi_oracle import hudi_rs_read

N = 3_000


def _records(n: int, ts: int) -> pa.Table:
    inner = pa.StructArray.from_arrays(
        [pa.array([i / 4 for i in range(n)]), pa.array([i % 3 == 0 for i in range(n)])], names=["a", "b"]
    )
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    nested = pa.StructArray.from_arrays([pa.array([f"s{i}" for i in range(n)]), inner], names=["s", "inner"])
    moments = [start + dt.timedelta(seconds=i * ts) for i in range(n)]
    return pa.table(
        {
            "id": pa.array([f"id{i:06d}" for i in range(n)]),
            "part": pa.array([f"p{i % 3}" for i in range(n)]),
            "ts": pa.array([ts] * n, pa.int64()),
            "nested": nested,
            "tags": pa.array([[f"t{i}", None] if i % 5 else [] for i in range(n)], pa.list_(pa.string())),
            "attrs": pa.array([[("k", i), ("ts", ts)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
            "amount": pa.array([decimal.Decimal(i * ts) / 100 for i in range(n)], pa.decimal128(12, 2)),
            "day": pa.array([dt.date(2024, 1, 1 + i % 28) for i in range(n)]),
            "at": pa.array(moments, pa.timestamp("us", tz="UTC")),
        }
    )


def _maps_sorted(table: pa.Table) -> list[dict]:
    rows = table.sort_by("id").to_pylist()
    for r in rows:
        r["attrs"] = sorted(r["attrs"])
    return rows


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_nested_and_logical_types_round_trip_through_a_spark_upsert(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    first = _records(N, 1)
    shoal.spark.write(
        spark.createDataFrame(first),
        path,
        "bulk_insert",
        table_name="t",
        record_key="id",
        partition_by="part",
        ordering_field="ts",
        table_type=table_type,
    )
    # Every other record updated: base files (copy-on-write) or log blocks (merge-on-read).
    second = _records(N, 2).filter(pc.equal(pc.bit_wise_and(pa.array(range(N)), 1), 0))
    shoal.spark.write(spark.createDataFrame(second), path, "upsert")

    updated = set(second.column("id").to_pylist())
    kept = first.filter(pc.invert(pc.is_in(first.column("id"), pa.array(sorted(updated)))))
    expected = _maps_sorted(pa.concat_tables([kept, second]))
    columns = first.column_names

    ours = shoal.Table(path).read(columns=columns)
    assert _maps_sorted(ours.cast(first.schema)) == expected
    theirs = hudi_rs_read(path).select(columns)
    assert _maps_sorted(theirs.cast(first.schema)) == expected
