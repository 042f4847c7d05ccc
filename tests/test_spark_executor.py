"""The Spark executor: one Spark task per work item, results in order, typed errors, attempts
named in task specs; the planner's reads, writes and compaction run through it unchanged and
give what the local executor gives; routing values land bucket b in Spark partition b."""

from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from pyspark import TaskContext

import shoal
from shoal.errors import InvalidArgumentError
from shoal.spark.executor import SparkExecutor
from shoal.spark.services import compact, spark_table
from shoal.spark.task_layout import pack_buckets, write_task_count
from shoal.tasks.mor_append import LogAppendSpec
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import committed_paths, data_files


def test_buckets_pack_onto_tasks_by_records():
    # Light buckets: two tasks per core; work for more tasks gets them, in whole waves of the
    # cores, up to one per bucket.
    assert write_task_count([50_000] * 30, 2) == 8
    assert write_task_count([20_000] * 30, 2) == 4
    assert write_task_count([100_000] * 30, 2) == 16
    assert write_task_count([100_000] * 30, 4) == 16
    assert write_task_count([100_000] * 50, 3) == 27
    assert write_task_count([600_000] * 10, 2) == 10
    assert write_task_count([1] * 3, 8) == 3
    assert write_task_count([], 8) == 1
    task_of = pack_buckets([100, 10, 10, 60, 40, 0], 2)
    loads = [0, 0]
    for b, t in enumerate(task_of):
        loads[t] += [100, 10, 10, 60, 40, 0][b]
    assert sorted(loads) == [110, 110]
    assert sorted(pack_buckets([5, 5, 5], 3)) == [0, 1, 2]


def test_map_runs_one_task_per_item_in_order(spark):
    def where(x: int) -> tuple[int, int]:
        return x * 10, TaskContext.get().partitionId()

    results = SparkExecutor(spark).map(where, [(i,) for i in range(5)])
    assert [r[0] for r in results] == [0, 10, 20, 30, 40]
    assert [r[1] for r in results] == [0, 1, 2, 3, 4]
    assert SparkExecutor(spark).map(where, []) == []


def test_map_raises_the_tasks_shoal_error_type(spark):
    def bad(x: int) -> int:
        raise InvalidArgumentError(f"item {x} is bad")

    with pytest.raises(InvalidArgumentError, match="item 1 is bad"):
        SparkExecutor(spark).map(bad, [(1,)])


def test_task_specs_get_the_attempt_that_runs_them(spark):
    spec = LogAppendSpec("file:///nowhere", "1", "", "f", 0, "1", "", None, 0, 0, 1, "t", None)

    def token(s: LogAppendSpec) -> tuple[int, int, int]:
        context = TaskContext.get()
        return s.stage_id, s.attempt, context.taskAttemptId()

    ((stage, attempt, task_attempt),) = SparkExecutor(spark).map(token, [(spec,)])
    assert attempt == task_attempt and stage >= 0
    assert (spec.stage_id, spec.attempt) == (0, 0)  # the driver's spec is left alone


class FlakyExecutor(SparkExecutor):
    """Fails the first attempt of the first task of every job, after the task did its work."""

    def map(self, fn, items):
        def flaky(*args):
            result = fn(*args)
            context = TaskContext.get()
            if context.partitionId() == 0 and context.attemptNumber() == 0:
                raise RuntimeError("injected failure after the task wrote its file")
            return result

        return super().map(flaky, items)


def _rows(n: int, start: int, ts: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": [f"p{i % 3}" for i in ids],
            "ts": pa.array([ts] * n, pa.int64()),
            "v": [f"v{i}-{ts}" for i in ids],
        }
    )


def test_planned_tasks_run_on_spark_like_on_threads(spark, tmp_path):
    """Reads (snapshot, read-optimized, incremental), writes of in-memory data and compaction of
    a merge-on-read table, with a Spark task per slice / bucket / operation and the first
    attempt of one task failing in every job: same rows as the local executor, no files left."""
    path = str(tmp_path / "t")
    local = shoal.Table.create(
        path, name="t", table_type="MERGE_ON_READ", record_key="id", partition_by="part", ordering_field="ts"
    )
    local.bulk_insert(_rows(30, 0, 1))
    first = local.latest_instant()
    local.upsert(_rows(12, 20, 2))  # updates (log appends) and inserts

    on_spark = spark_table(spark, path)
    on_spark.executor = FlakyExecutor(spark)
    columns = ["id", "part", "ts", "v"]
    for query_type in ("snapshot", "read_optimized"):
        assert rows_by(on_spark.read(query_type=query_type), columns, ["id"]) == rows_by(
            local.read(query_type=query_type), columns, ["id"]
        )
    assert rows_by(on_spark.read_incremental(first), columns, ["id"]) == rows_by(
        local.read_incremental(first), columns, ["id"]
    )

    on_spark.upsert(_rows(10, 35, 3))  # write tasks as Spark tasks, one retried
    assert data_files(path) == committed_paths(path)
    # New keys only: a bulk insert does not look keys up. Its rows are gathered on the driver
    # and shipped to the tasks.
    on_spark.bulk_insert(_rows(6, 50, 4))
    assert data_files(path) == committed_paths(path)
    expected = {r["id"]: r for r in _rows(30, 0, 1).to_pylist()}
    expected.update({r["id"]: r for r in _rows(12, 20, 2).to_pylist()})
    expected.update({r["id"]: r for r in _rows(10, 35, 3).to_pylist()})
    expected.update({r["id"]: r for r in _rows(6, 50, 4).to_pylist()})
    want = [expected[k] for k in sorted(expected)]
    assert rows_by(hudi_rs_read(path), columns, ["id"]) == want

    table = spark_table(spark, path)
    table.executor = FlakyExecutor(spark)
    assert len(table.compact()) == 1  # one task per compaction operation, one retried
    assert data_files(path) == committed_paths(path)
    assert rows_by(local.read(), columns, ["id"]) == want
    assert rows_by(hudi_rs_read(path, read_optimized=True), columns, ["id"]) == want
    assert compact(spark, path) == []  # nothing left to compact


def test_clean_and_archive_from_spark(spark, tmp_path):
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, name="t", record_key="id", partition_by="part", ordering_field="ts")
    for ts in range(1, 5):  # every upsert rewrites the same file groups
        table.upsert(_rows(12, 0, ts))
    versions = len(data_files(path))
    cleaned = shoal.spark.clean(spark, path, options={"hoodie.cleaner.commits.retained": "1"})
    assert len(cleaned) == 1
    remaining = data_files(path)
    assert len(remaining) < versions
    latest = {s.base_file.path for s in shoal.Table(path).file_slices() if s.base_file}
    assert latest <= remaining
    columns = ["id", "part", "ts", "v"]
    assert rows_by(hudi_rs_read(path), columns, ["id"]) == rows_by(_rows(12, 0, 4), columns, ["id"])
    assert shoal.spark.archive(spark, path).archived == []  # nothing old enough to archive yet


def test_a_log_and_its_stray_target_share_a_task_and_the_log_comes_first():
    from shoal.spark.task_layout import pack_with_targets, write_order

    weights = [50, 40, 30, 20, 10, 5]
    # Log bucket 0 gives its bloom false positives to bucket 5, log bucket 2 to bucket 1.
    targets = [5, None, 1, None, None, None]
    for tasks in (1, 2, 3, 10):
        task_of, used = pack_with_targets(weights, targets, tasks)
        assert used == min(tasks, 4)
        assert set(task_of) <= set(range(used))
        assert task_of[0] == task_of[5] and task_of[2] == task_of[1]
    order = write_order(targets)
    assert sorted(order) == list(range(len(weights)))
    assert order.index(0) < order.index(5) and order.index(2) < order.index(1)
