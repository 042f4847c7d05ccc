"""``df.writeStream.format("shoal")`` as a CDC pipeline uses it: upserts with late events and soft
deletes on every table type, partitioning and index, a batch whose tasks all fail, a commit that
the embedded write refuses, and a query restarted with a new checkpoint location.

Expected rows come from a model of Hudi's upsert rules (event-time ordering: a key's greatest
ordering value wins, within a batch and across batches; a winning ``_hoodie_is_deleted`` row
deletes the key; a global index keys records by record key alone, so a record moves partitions),
and are checked after every batch (time travel to the batch's commit) with shoal and hudi-rs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.spark import register
from shoal.spark.stream_sink import SINK_CHECKPOINT_KEY
from tests.hudi_oracle import hudi_rs_read, rows_by

SCHEMA = "id STRING, part STRING, ts LONG, v LONG, _hoodie_is_deleted BOOLEAN"
COLUMNS = ["id", "part", "ts", "v"]
_EPOCH = int(time.time()) - 3600
Row = tuple  # (id, part, ts, v) or (id, part, ts, v, is_deleted)

# Three micro-batches of changes: duplicates of a key in one batch, a late update (b), a record
# that moves partitions with a newer event (c), a soft delete (e), a late soft delete (d, ignored).
CDC_BATCHES: list[list[Row]] = [
    [("a", "p1", 1, 10), ("b", "p1", 1, 20), ("c", "p2", 1, 30), ("a", "p1", 2, 11), ("e", "p2", 3, 50)],
    [("b", "p1", 0, 99), ("c", "p1", 5, 31), ("d", "p2", 1, 40), ("a", "p1", 3, 12)],
    [("e", "p2", 4, 0, True), ("d", "p2", 0, 0, True), ("f", "p1", 1, 60), ("f", "p1", 2, 61)],
]


def _full(row: Row) -> Row:
    return row if len(row) == 5 else (*row, False)


def _changes(rows: list[Row]) -> pa.Table:
    ids, parts, ts, v, deleted = zip(*[_full(r) for r in rows], strict=True)
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "part": pa.array(parts, pa.string()),
            "ts": pa.array(ts, pa.int64()),
            "v": pa.array(v, pa.int64()),
            "_hoodie_is_deleted": pa.array(deleted, pa.bool_()),
        }
    )


def _model_after_each_batch(batches: list[list[Row]], keyed_by_partition: bool) -> list[list[dict]]:
    """Hudi's upsert with event-time ordering, batch by batch."""
    held: dict[tuple, Row] = {}
    states = []
    for rows in batches:
        combined: dict[tuple, Row] = {}
        for row in map(_full, rows):
            key = (row[1], row[0]) if keyed_by_partition else (row[0],)
            if key not in combined or row[2] >= combined[key][2]:
                combined[key] = row
        for key, row in combined.items():
            if key not in held or row[2] >= held[key][2]:
                if row[4]:
                    held.pop(key, None)
                else:
                    held[key] = row
        states.append(sorted((dict(zip(COLUMNS, r[:4], strict=True)) for r in held.values()), key=_order))
    return states


def _order(row: dict) -> tuple:
    return (row["id"], row["part"])


def _options(table_type: str, partitioned: bool, index: str, **extra: str) -> dict[str, str]:
    options = {
        "hoodie.table.name": "cdc",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.index.type": index,
    }
    if partitioned:
        options["hoodie.datasource.write.partitionpath.field"] = "part"
    if index == "BUCKET":
        options["hoodie.bucket.index.num.buckets"] = "2"
    return {**options, **extra}


def _start(spark, source: Path, table: Path, checkpoint: Path, options: dict[str, str], transform=None):
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    if transform is not None:
        stream = transform(stream)
    writer = stream.writeStream.format("shoal").option("checkpointLocation", str(checkpoint))
    return writer.options(**options).trigger(availableNow=True).start(str(table))


def _finish(query) -> Exception | None:
    try:
        query.awaitTermination()
    except Exception as e:  # the query's failure, as Spark reports it
        return e
    return query.exception()


def _run(spark, source: Path, table: Path, checkpoint: Path, options: dict[str, str], transform=None):
    error = _finish(_start(spark, source, table, checkpoint, options, transform))
    assert error is None, error


def _write_source(source: Path, batches: list[list[Row]], first: int = 0) -> None:
    """One file per micro-batch. The file source takes files in modification time order: files
    written within one clock tick would make batches in any order."""
    source.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(batches, start=first):
        path = source / f"{i:03d}.parquet"
        pq.write_table(_changes(rows), path)
        os.utime(path, (_EPOCH + i, _EPOCH + i))


def _sink_commits(path: Path) -> list[tuple[str, dict]]:
    """(instant, recorded sink checkpoint) of each data commit, oldest first."""
    timeline = shoal.Table(str(path))._timeline()
    out = []
    for instant in timeline.completed_data_instants():
        extra = timeline.commit_metadata(instant).extra_metadata
        if SINK_CHECKPOINT_KEY in extra:
            out.append((instant.requested_time, json.loads(extra[SINK_CHECKPOINT_KEY])))
    return out


def _rows(path: Path, as_of: str | None = None) -> tuple[list[dict], list[dict]]:
    """The table's rows as shoal and as hudi-rs read them."""
    ours = shoal.Table(str(path)).read(as_of=as_of)
    theirs = hudi_rs_read(str(path), as_of=as_of)
    return rows_by(ours, COLUMNS, ["id", "part"]), rows_by(theirs, COLUMNS, ["id", "part"])


def _staged(path: Path) -> list[Path]:
    return sorted((path / ".hoodie" / ".temp").glob("stream-sink-*/**/*"))


def _table_files(path: Path) -> list[str]:
    """The table's files, its timeline's included, but not its temp directory."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and ".temp" not in p.parts)


def test_cdc_upserts_on_every_table_layout_match_the_model_after_each_batch(spark, tmp_path):
    register(spark)
    layouts = [
        ("COPY_ON_WRITE", True, "BLOOM"),
        ("MERGE_ON_READ", True, "BUCKET"),
        ("COPY_ON_WRITE", False, "SIMPLE"),
        ("MERGE_ON_READ", True, "GLOBAL_SIMPLE"),
        ("MERGE_ON_READ", False, "GLOBAL_BLOOM"),
    ]
    for table_type, partitioned, index in layouts:
        base = tmp_path / f"{table_type}-{partitioned}-{index}"
        _write_source(base / "in", CDC_BATCHES)
        _run(spark, base / "in", base / "t", base / "ck", _options(table_type, partitioned, index))
        states = _model_after_each_batch(CDC_BATCHES, partitioned and not index.startswith("GLOBAL"))
        commits = _sink_commits(base / "t")
        assert [c for _, c in commits] == [{"default_single_writer": str(i)} for i in range(3)]
        for (instant, _), expected in zip(commits, states, strict=True):
            assert _rows(base / "t", as_of=instant) == (expected, expected), (base.name, instant)
        assert _rows(base / "t") == (states[-1], states[-1])
        assert _staged(base / "t") == []


def test_a_query_with_a_new_checkpoint_location_writes_its_batches(spark, tmp_path):
    """Batch ids restart at 0 with a new checkpoint location. Hudi's sink compares them with the
    last batch id the table recorded for the identifier and skips them, losing the new query's
    data; the sink tells the queries apart by Spark's query id, and still skips a replay."""
    register(spark)
    table = tmp_path / "t"
    options = _options("MERGE_ON_READ", True, "BLOOM")
    first = [[("a", "p1", 1, 10), ("b", "p1", 1, 20)], [("c", "p2", 1, 30)], [("d", "p2", 1, 40)]]
    _write_source(tmp_path / "in1", first)
    _run(spark, tmp_path / "in1", table, tmp_path / "ck1", options)
    # Another identifier's query on the same table: its batches do not hide the first's.
    other = [[("x", "p1", 1, 1)]]
    _write_source(tmp_path / "in2", other)
    with_other = {**options, "hoodie.datasource.write.streaming.checkpoint.identifier": "other"}
    _run(spark, tmp_path / "in2", table, tmp_path / "ck2", with_other)

    # The first pipeline restarted with a new checkpoint location (the old one was lost): its
    # batches 0 and 1 are at or below the table's last batch (2) for the identifier.
    later = [[("a", "p1", 5, 11), ("e", "p1", 1, 50)], [("b", "p1", 0, 99), ("f", "p2", 1, 60)]]
    _write_source(tmp_path / "in3", later)
    _run(spark, tmp_path / "in3", table, tmp_path / "ck3", options)
    expected = _model_after_each_batch(first + other + later, keyed_by_partition=True)[-1]
    assert _rows(table) == (expected, expected)
    recorded = [c for _, c in _sink_commits(table)]
    assert recorded == [
        {"default_single_writer": "0"},
        {"default_single_writer": "1"},
        {"default_single_writer": "2"},
        {"other": "0"},
        {"default_single_writer": "0"},
        {"default_single_writer": "1"},
    ]

    # The new query's own replay of its batch 1 is still skipped.
    for name in ("1", ".1.crc"):
        (tmp_path / "ck3" / "commits" / name).unlink(missing_ok=True)
    _run(spark, tmp_path / "in3", table, tmp_path / "ck3", options)
    assert len(_sink_commits(table)) == len(recorded)
    assert _rows(table) == (expected, expected)


def test_failed_tasks_and_a_refused_commit_leave_nothing_behind_and_a_restart_continues(spark, tmp_path):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    register(spark)
    table, checkpoint, source = tmp_path / "t", tmp_path / "ck", tmp_path / "in"
    options = _options("COPY_ON_WRITE", True, "BLOOM")
    # A batch of 100,000 rows in 37 partitions, read by one task with more rows than one Arrow
    # batch (10,000): the sink stages the first batches before the last row fails.
    n = 100_000
    rows = [(f"k{i:05d}", f"p{i % 37}", 1, i) for i in range(n)]
    _write_source(source, [rows])
    last = rows[-1][0]

    def always(key):
        if key == last:
            raise RuntimeError("poison record")
        return key

    def first_attempt(key):
        from pyspark import TaskContext

        if key == last and TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("transient failure")
        return key

    # Every attempt of the task fails: the batch is aborted and the table has no commit. The
    # staged files of all attempts go with the abort, or with the next commit when the Python
    # worker of an attempt Spark gave up on was still writing.
    failing = F.udf(always, StringType())
    error = _finish(
        _start(spark, source, table, checkpoint, options, lambda s: s.withColumn("id", failing("id")))
    )
    assert error is not None and "poison record" in str(error)
    assert _sink_commits(table) == []

    # Restarted with a query whose first task attempt fails: the retry's rows are written once.
    flaky = F.udf(first_attempt, StringType())
    _run(spark, source, table, checkpoint, options, lambda s: s.withColumn("id", flaky("id")))
    model = _model_after_each_batch([rows], keyed_by_partition=True)[-1]
    ours, theirs = _rows(table)
    assert len(ours) == n and ours == model and theirs == model

    # A batch with a null record key: the commit's write refuses it, naming the problem, and
    # leaves the timeline and the table's files as they were.
    files = _table_files(table)
    bad = [("k00001", "p1", 2, -1), (None, "p2", 2, -2)]
    _write_source(source, [bad], first=1)
    error = _finish(_start(spark, source, table, checkpoint, options))
    assert error is not None and "InvalidRecordKeyError" in str(error) and "'id'" in str(error)
    assert _table_files(table) == files
    assert _staged(table) == []

    # The input fixed (the batch's file rewritten), the restarted query writes batch 1.
    fixed = [("k00001", "p1", 2, -1), ("new", "p2", 2, -2)]
    _write_source(source, [fixed], first=1)
    _run(spark, source, table, checkpoint, options)
    model = _model_after_each_batch([rows, fixed], keyed_by_partition=True)[-1]
    assert _rows(table) == (model, model)
    assert [c for _, c in _sink_commits(table)] == [
        {"default_single_writer": "0"},
        {"default_single_writer": "1"},
    ]
    assert _staged(table) == []


def test_a_sink_whose_path_is_a_file_fails_with_a_typed_error(spark, tmp_path):
    register(spark)
    _write_source(tmp_path / "in", [[("a", "p1", 1, 10)]])
    path = tmp_path / "events.parquet"
    pq.write_table(_changes([("z", "p1", 1, 1)]), path)
    before = path.read_bytes()
    options = _options("COPY_ON_WRITE", True, "BLOOM")
    try:
        error = _finish(_start(spark, tmp_path / "in", path, tmp_path / "ck", options))
    except Exception as e:  # raised by start() or by the query
        error = e
    assert error is not None and "InvalidArgumentError" in str(error) and "is a file" in str(error)
    assert path.read_bytes() == before


def test_insert_bulk_insert_and_delete_streams(spark, tmp_path):
    """insert and bulk_insert write every row (no combining by default, as Hudi: a key sent twice
    in one batch is kept twice); a delete stream removes the keys it sends, whatever its values."""
    register(spark)
    inserts = [[("a", "p1", 1, 10), ("b", "p2", 1, 20), ("a", "p1", 2, 11)], [("c", "p1", 1, 30)]]
    expected = sorted((dict(zip(COLUMNS, r, strict=True)) for b in inserts for r in b), key=_order)
    for operation, table_type, partitioned in (
        ("insert", "MERGE_ON_READ", True),
        ("bulk_insert", "COPY_ON_WRITE", False),
    ):
        base = tmp_path / operation
        _write_source(base / "in", inserts)
        options = _options(table_type, partitioned, "BLOOM")
        options["hoodie.datasource.write.operation"] = operation
        _run(spark, base / "in", base / "t", base / "ck", options)
        assert _rows(base / "t") == (expected, expected), operation

    # Deletes on the bucket-indexed merge-on-read table the CDC batches built.
    base = tmp_path / "delete"
    _write_source(base / "in", CDC_BATCHES)
    options = _options("MERGE_ON_READ", True, "BUCKET")
    _run(spark, base / "in", base / "t", base / "ck", options)
    deletes = [[("a", "p1", 0, 0), ("zz", "p1", 1, 1)], [("c", "p1", 9, 0)]]
    _write_source(base / "deletes", deletes)
    as_deletes = {**options, "hoodie.datasource.write.operation": "delete"}
    _run(spark, base / "deletes", base / "t", base / "ck-delete", as_deletes)
    # Keys are (partition, id) with a non-global index: c's record in p2 stays.
    gone = {("a", "p1"), ("c", "p1")}
    expected = [r for r in _model_after_each_batch(CDC_BATCHES, True)[-1] if (r["id"], r["part"]) not in gone]
    assert _rows(base / "t") == (expected, expected)
    assert _staged(base / "t") == []
