"""Spark writes (shoal.spark.write) racing table services that delete files: a clean, an
archival or a rollback run by another process after the driver loaded the timeline and before
the route pass read the base files it planned with makes the write plan again on the newer
timeline and commit; a file missing with no such service to explain it fails typed, unretried;
and a file missing once the write tasks run ends in CommitConflictError with the table unchanged.

The race is staged at a driver-side step between the timeline's load and the route pass
(``SparkWrite._tag_context``): the service runs there in a child process, as another process's
``shoal.Table(path).clean()`` would.
"""

from __future__ import annotations

import importlib
import inspect
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.errors import CommitConflictError
from shoal.spark.write import SparkWrite
from shoal.spark.write import write as spark_write
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by

# Writers in several processes: optimistic concurrency, as the racing service's writes need.
OCC = {
    "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
    "hoodie.write.lock.wait_time_ms": "20000",
    "hoodie.write.lock.wait_time_ms_between_retry": "20",
    "hoodie.client.heartbeat.interval_in_ms": "100",
}
# The cleaner keeps one version of each file group; archival keeps 2 to 3 commits.
SERVICES = {
    **OCC,
    "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
    "hoodie.cleaner.fileversions.retained": "1",
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
}
COLUMNS = ["id", "city", "ts", "v"]


def _rows(ids, ts: int) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": [("a", "b")[i % 2] for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "v": pa.array([ts * 1000 + i for i in ids], pa.int64()),
        }
    )


class Model:
    """The expected rows: the latest ``ts`` of each key wins (every batch here is newer)."""

    def __init__(self) -> None:
        self.rows: dict[int, dict] = {}

    def upsert(self, batch: pa.Table) -> None:
        for row in batch.to_pylist():
            self.rows[row["id"]] = row

    def expected(self) -> list[dict]:
        return [self.rows[k] for k in sorted(self.rows)]


def _create(path: Path, table_type: str) -> shoal.Table:
    return shoal.Table.create(
        path,
        name="replan",
        table_type=table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options=OCC,
    )


def _assert_reads(path: Path, model: Model) -> None:
    """shoal and hudi-rs read the model's rows, and no packed records of a write are left."""
    for got in (shoal.Table(path).read(), hudi_rs_read(str(path))):
        assert rows_by(got, COLUMNS, ["id"]) == model.expected()
    assert not list((path / ".hoodie" / ".temp").glob("shoal-packed-*"))


def _timeline(path: Path) -> Timeline:
    table = shoal.Table(path)
    return Timeline.load(table.storage, table.config)


def _service(path: Path, code: str, options: dict[str, str] = SERVICES) -> None:
    """Runs ``code`` in another process, with ``t``: the table at ``path`` opened with
    ``options`` (by default, the service options), ``options``, and ``_rows``."""
    script = textwrap.dedent(
        f"""
        import json, shoal
        import pyarrow as pa
        options = json.loads({json.dumps(json.dumps(options))})
        t = shoal.Table({str(path)!r}, options=options)
        """
    )
    script += inspect.getsource(_rows) + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _race(monkeypatch: pytest.MonkeyPatch, service) -> list[int]:
    """Runs ``service()`` once, when the first plan has listed the base files it tags against
    and before its route pass reads them. Returns the list the plans append to (one per plan)."""
    original = SparkWrite._tag_context
    plans: list[int] = []

    def tag_context(self, timeline):
        context = original(self, timeline)
        plans.append(1)
        if len(plans) == 1:
            service()
        return context

    monkeypatch.setattr(SparkWrite, "_tag_context", tag_context)
    return plans


TABLE_TYPES = pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"], ids=["cow", "mor"])


@TABLE_TYPES
def test_an_upsert_racing_a_clean_plans_again_and_commits(spark, tmp_path, monkeypatch, table_type):
    path = tmp_path / "t"
    model = Model()
    first = _rows(range(20), 1)
    _create(path, table_type).upsert(first, options=OCC)
    model.upsert(first)
    # Another writer rewrites every file group (merge-on-read: compacts them), then a clean
    # deletes the versions the first plan listed.
    rewrite = "t.upsert(_rows(range(10), 2), options=options)\n"
    compact = "t.compact(options=options)\n" if table_type == "MERGE_ON_READ" else ""
    # (The writer cleans inline after its commit already.)
    service = rewrite + compact + "t.clean(options=options)\n"
    plans = _race(monkeypatch, lambda: _service(path, service))
    model.upsert(_rows(range(10), 2))

    update = _rows([1, 2, 21], 3)
    spark_write(spark.createDataFrame(update), str(path), "upsert", OCC)
    model.upsert(update)
    assert len(plans) == 2
    _assert_reads(path, model)


def test_an_upsert_racing_an_archival_plans_again_and_commits(spark, tmp_path, monkeypatch):
    path = tmp_path / "t"
    model = Model()
    _create(path, "COPY_ON_WRITE")
    # Another process wrote the commits: none is known to this one before the write reads it.
    _service(path, "for ts in range(1, 8):\n    t.upsert(_rows(range(10), ts), options=options)\n", OCC)
    model.upsert(_rows(range(10), 7))
    # The archival moves commits the first plan's timeline names, and reads to size records
    # after the route pass, off the active timeline.
    service = "t.clean(options=options)\nassert t.archive(options=options).archived\n"
    plans = _race(monkeypatch, lambda: _service(path, service))

    update = _rows([1, 12], 9)
    spark_write(spark.createDataFrame(update), str(path), "upsert", OCC)
    model.upsert(update)
    assert len(plans) == 2
    _assert_reads(path, model)


def test_an_upsert_racing_a_rollback_plans_again_and_commits(spark, tmp_path, monkeypatch):
    # Copy-on-write: the rollback deletes the base files the plan tags against. (On
    # merge-on-read it deletes log files, which no plan reads: the commit's conflict check
    # finds the rolled-back commit instead.)
    path = tmp_path / "t"
    model = Model()
    first = _rows(range(20), 1)
    table = _create(path, "COPY_ON_WRITE")
    table.upsert(first, options=OCC)
    model.upsert(first)
    # The last commit (the one whose files the first plan tags against) is rolled back.
    table.upsert(_rows(range(10), 2), options=OCC)
    plans = _race(monkeypatch, lambda: _service(path, "t.rollback()\n"))

    update = _rows([1, 2, 21], 3)
    spark_write(spark.createDataFrame(update), str(path), "upsert", OCC)
    model.upsert(update)
    assert len(plans) == 2
    _assert_reads(path, model)


def test_a_missing_file_no_service_explains_fails_typed_without_planning_again(spark, tmp_path, monkeypatch):
    """Files deleted behind the table's back between the listing a plan made and the reads of
    its lookups. (A partitioned index's route tasks list each partition right before they read
    its footers; a global index's plan lists every partition on the driver first.)"""
    path = tmp_path / "t"
    _create(path, "COPY_ON_WRITE").upsert(_rows(range(20), 1), options=OCC)
    base_files = list((path / "a").glob("*.parquet"))
    assert base_files
    # The package's write() shadows its module's name.
    spark_write_module = importlib.import_module("shoal.spark.write")
    original = spark_write_module.plan_global
    plans: list[int] = []

    def plan_global(*args, **kwargs):
        plans.append(1)
        for f in base_files:
            f.unlink()
        return original(*args, **kwargs)

    monkeypatch.setattr(spark_write_module, "plan_global", plan_global)
    with pytest.raises(FileNotFoundError):
        spark_write(
            spark.createDataFrame(_rows([1, 2], 2)),
            str(path),
            "upsert",
            {**OCC, "hoodie.index.type": "GLOBAL_BLOOM"},
        )
    assert len(plans) == 1
    assert not list((path / ".hoodie" / ".temp").glob("shoal-packed-*"))


@TABLE_TYPES
def test_a_file_missing_while_the_write_tasks_run_is_a_conflict(spark, tmp_path, monkeypatch, table_type):
    path = tmp_path / "t"
    model = Model()
    first = _rows(range(20), 1)
    _create(path, table_type).upsert(first, options=OCC)
    model.upsert(first)
    before = _timeline(path)
    base_files = list((path / "a").glob("*.parquet"))
    aside = tmp_path / "aside"
    aside.mkdir()
    original = SparkWrite._write_tasks

    def write_tasks(self, *args):
        # The instant started: the partition's base file goes missing while the tasks run.
        for f in base_files:
            shutil.move(f, aside / f.name)
        try:
            return original(self, *args)
        finally:
            for f in base_files:
                shutil.move(aside / f.name, f)

    monkeypatch.setattr(SparkWrite, "_write_tasks", write_tasks)
    # Keys of the partition updated: the task reads its base file (merge-on-read: its keys).
    update = _rows([2, 4], 2)
    with pytest.raises(CommitConflictError):
        spark_write(spark.createDataFrame(update), str(path), "upsert", OCC)
    after = _timeline(path)
    assert after.completed() == before.completed()
    # The write's instant is left pending, for the next write to roll back.
    assert len(after.pending_data_instants()) == 1 and not before.pending_data_instants()
    _assert_reads(path, model)

    # The next write commits.
    monkeypatch.setattr(SparkWrite, "_write_tasks", original)
    spark_write(spark.createDataFrame(update), str(path), "upsert", OCC)
    model.upsert(update)
    _assert_reads(path, model)


def _lose_file(_):
    Path("/nonexistent/shoal-replan-test").read_bytes()
    return iter([])


def _lose_file_then_fail(_):
    try:
        Path("/nonexistent/shoal-replan-test").read_bytes()
    except FileNotFoundError as e:
        raise ValueError("not a missing file") from e
    return iter([])


def test_a_tasks_missing_file_is_recognised_in_rdd_and_dataframe_jobs(spark):
    from shoal.spark.missing_files import missing_file

    rdd = spark.sparkContext.parallelize([1], 1)
    frame = spark.range(1, numPartitions=1)
    for job in (
        lambda: rdd.mapPartitions(_lose_file).collect(),
        lambda: frame.mapInArrow(_lose_file, frame.schema).collect(),
    ):
        with pytest.raises(Exception) as info:
            job()
        found = missing_file(info.value)
        assert isinstance(found, FileNotFoundError)
        assert "/nonexistent/shoal-replan-test" in str(found)
    # A task that handled a missing file and failed otherwise did not fail for it.
    with pytest.raises(Exception) as info:
        rdd.mapPartitions(_lose_file_then_fail).collect()
    assert missing_file(info.value) is None
    assert missing_file(RuntimeError("FileNotFoundError: x")) is None


def test_a_global_index_upsert_racing_a_clean_plans_again_and_commits(spark, tmp_path, monkeypatch):
    """Under a global index the driver looks the keys up in Spark tasks after the key pass: a
    clean between the two deletes the files the lookup reads, and the write plans again (its
    passes reading the input it evaluated once)."""
    path = tmp_path / "t"
    model = Model()
    first = _rows(range(20), 1)
    _create(path, "COPY_ON_WRITE").upsert(first, options=OCC)
    model.upsert(first)
    rewrite = "t.upsert(_rows(range(20), 2), options=options)\nt.clean(options=options)\n"
    original = SparkWrite._key_pass
    plans: list[int] = []

    def key_pass(self, source, spec):
        keyed = original(self, source, spec)
        plans.append(1)
        if len(plans) == 1:
            _service(path, rewrite)
        return keyed

    monkeypatch.setattr(SparkWrite, "_key_pass", key_pass)
    model.upsert(_rows(range(20), 2))
    # A key that moves partition: the global index finds it where the table holds it.
    update = _rows([1, 2, 21], 3).set_column(1, "city", pa.array(["b", "a", "a"]))
    spark_write(
        spark.createDataFrame(update), str(path), "upsert", {**OCC, "hoodie.index.type": "GLOBAL_BLOOM"}
    )
    model.upsert(update)
    _assert_reads(path, model)
    assert len(plans) == 2


def test_a_bucket_index_upsert_racing_a_write_and_clean_plans_again(spark, tmp_path, monkeypatch):
    """With the bucket index the driver lists the buckets' file groups after the route pass: a
    concurrent write and clean in between leave it no version of them, and a plan made on that
    listing would open a second file group per bucket. The write plans again instead."""
    path = tmp_path / "t"
    model = Model()
    buckets = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}
    first = _rows(range(20), 1)
    _create(path, "MERGE_ON_READ").upsert(first, options={**OCC, **buckets})
    model.upsert(first)
    rewrite = (
        f"options.update(json.loads({json.dumps(buckets)!r}))\n"
        "t = shoal.Table(t.path, options=options)\n"
        "t.upsert(_rows(range(20), 2), options=options)\n"
        "t.compact(options=options)\n"
        "t.clean(options=options)\n"
    )
    original = SparkWrite._route_pass
    plans: list[int] = []

    def route_pass(self, *args, **kwargs):
        rows = original(self, *args, **kwargs)
        plans.append(1)
        if len(plans) == 1:
            _service(path, rewrite)
        return rows

    monkeypatch.setattr(SparkWrite, "_route_pass", route_pass)
    model.upsert(_rows(range(20), 2))
    update = _rows([1, 2, 21], 3)
    spark_write(spark.createDataFrame(update), str(path), "upsert", {**OCC, **buckets})
    model.upsert(update)
    _assert_reads(path, model)
    # Still one file group per bucket and partition.
    assert len(shoal.Table(path).file_slices()) <= 2 * 2
    assert len(plans) == 2
