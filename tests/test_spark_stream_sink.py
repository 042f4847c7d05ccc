"""``df.writeStream.format("shoal")``: each micro-batch is one upsert (by default) of the rows the
query read, exactly once across a restart that replays a batch. The model applies Hudi's
upsert rules to the change files: the greatest ordering value of a key wins, across batches
too, so a late event older than the stored record changes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.spark import register
from shoal.spark.stream_sink import SINK_CHECKPOINT_KEY
from tests.hudi_oracle import hudi_rs_read, rows_by

SCHEMA = "id STRING, part STRING, ts LONG, v LONG"
SINK = {
    "hoodie.table.name": "sink",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
}


def _changes(rows: list[tuple[str, str, int, int]]) -> pa.Table:
    ids, parts, ts, v = zip(*rows, strict=True)
    return pa.table(
        {
            "id": pa.array(ids),
            "part": pa.array(parts),
            "ts": pa.array(ts, pa.int64()),
            "v": pa.array(v, pa.int64()),
        }
    )


def _write_input(rows: pa.Table, path: Path, order: int) -> None:
    """An input file the file source takes in ``order``: it orders files by modification time,
    and files written within one clock tick would come in any order."""
    pq.write_table(rows, path)
    os.utime(path, (1_700_000_000 + order, 1_700_000_000 + order))


def _apply(model: dict[str, dict], rows: list[tuple[str, str, int, int]]) -> None:
    for key, part, ts, v in rows:
        held = model.get(key)
        if held is None or ts >= held["ts"]:
            model[key] = {"id": key, "part": part, "ts": ts, "v": v}


def _run(spark, source: Path, table: Path, checkpoint: Path, options: dict[str, str]) -> None:
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    writer = stream.writeStream.format("shoal").option("checkpointLocation", str(checkpoint))
    query = writer.options(**options).trigger(availableNow=True).start(str(table))
    query.awaitTermination()
    assert query.exception() is None


def _read(path: Path) -> list[dict]:
    return rows_by(shoal.Table(str(path)).read(), ["id", "part", "ts", "v"], ["id"])


def _batches_committed(path: Path) -> list[dict]:
    """The sink checkpoint each data commit recorded, oldest first."""
    table = shoal.Table(str(path))
    timeline = table._timeline()
    return [
        json.loads(timeline.commit_metadata(i).extra_metadata[SINK_CHECKPOINT_KEY])
        for i in timeline.completed_data_instants()
        if SINK_CHECKPOINT_KEY in timeline.commit_metadata(i).extra_metadata
    ]


def test_micro_batches_are_upserted_in_order_and_a_replayed_one_is_skipped(spark, tmp_path):
    register(spark)
    source, table, checkpoint = tmp_path / "in", tmp_path / "t", tmp_path / "ck"
    source.mkdir()
    batches = [
        [("a", "p1", 1, 10), ("b", "p1", 1, 20), ("c", "p2", 1, 30), ("a", "p1", 2, 11)],
        # A late event for b (older than the stored one) and an update of c.
        [("b", "p1", 0, 99), ("c", "p2", 5, 31), ("d", "p2", 1, 40)],
    ]
    model: dict[str, dict] = {}
    for i, rows in enumerate(batches):
        _write_input(_changes(rows), source / f"{i:03d}.parquet", i)
        _apply(model, rows)
    _run(spark, source, table, checkpoint, SINK)

    expected = [model[k] for k in sorted(model)]
    assert _read(table) == expected
    assert rows_by(hudi_rs_read(str(table)), ["id", "part", "ts", "v"], ["id"]) == expected
    assert _batches_committed(table) == [{"default_single_writer": "0"}, {"default_single_writer": "1"}]
    staged = list((table / ".hoodie" / ".temp").glob("stream-sink-*/*"))
    assert staged == []

    # The driver died after the sink committed batch 1 but before Spark logged it: the restarted
    # query runs batch 1 again, which the sink must not write twice.
    (checkpoint / "commits" / "1").unlink()
    for crc in (checkpoint / "commits").glob(".1.crc"):
        crc.unlink()
    _run(spark, source, table, checkpoint, SINK)
    assert len(_batches_committed(table)) == 2
    assert _read(table) == expected

    # A new file is the next batch.
    rows = [("a", "p1", 9, 12), ("e", "p1", 1, 50)]
    _write_input(_changes(rows), source / "002.parquet", 2)
    _apply(model, rows)
    _run(spark, source, table, checkpoint, SINK)
    expected = [model[k] for k in sorted(model)]
    assert _read(table) == expected
    assert rows_by(hudi_rs_read(str(table)), ["id", "part", "ts", "v"], ["id"]) == expected
    assert _batches_committed(table)[-1] == {"default_single_writer": "2"}


def test_a_sink_whose_options_the_table_cannot_take_fails_before_any_batch(spark, tmp_path):
    register(spark)
    source, table = tmp_path / "in", tmp_path / "t"
    source.mkdir()
    pq.write_table(_changes([("a", "p1", 1, 10)]), source / "000.parquet")
    # The table is created from the options, then the input's schema fails against it.
    other_ordering = {**SINK, "hoodie.datasource.write.precombine.field": "updated_at"}
    with pytest.raises(Exception, match="updated_at"):
        _run(spark, source, table, tmp_path / "ck1", other_ordering)
    # The path that held nothing still holds nothing.
    assert not (table / ".hoodie").exists()
    with pytest.raises(Exception, match="not a streaming write"):
        overwrite = {**SINK, "hoodie.datasource.write.operation": "insert_overwrite"}
        _run(spark, source, table, tmp_path / "ck2", overwrite)
    assert not (table / ".hoodie").exists()
