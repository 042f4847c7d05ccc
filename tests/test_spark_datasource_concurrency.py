"""``df.write.format("shoal")`` beside other writers (optimistic concurrency, LAZY failed-write
cleaning): the write is planned and committed in short-lived driver-side processes, and a
detached keeper (shoal.timeline.heartbeat_keeper) keeps its heartbeat while the Spark job runs.

The other writer is another process, started from inside the Spark job after the heartbeat
interval has passed several times, so that a write kept alive by its first beat alone would be
taken for a failed one and rolled back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.timeline.heartbeat import heartbeat_age, heartbeat_path
from shoal.timeline.heartbeat_keeper import start_keeper
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline
from tests.test_concurrency import OCC, _apply, _check, _create, _no_stray_files, _other_writer, _rows

# Beats every 500 ms: without a keeper, the write's heartbeat expires after a second.
FAST = {**OCC, "hoodie.client.heartbeat.interval_in_ms": "500"}


def _keepers() -> list[str]:
    """Command lines of the heartbeat keepers running now."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "shoal.timeline.heartbeat_keeper" in command:
            found.append(command)
    return found


def _zombie_children() -> list[int]:
    zombies = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            zombies.append(int(pid))
    return zombies


def _until(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _slow_input(spark, rows: pa.Table, path: Path, theirs: pa.Table, done: Path):
    """``rows`` as a DataFrame whose evaluation waits 3 s (six heartbeat intervals), has
    another process upsert ``theirs`` into the table, and waits another half second."""

    def slow(batches):
        batches = list(batches)
        if batches and not done.exists():
            time.sleep(3.0)
            done.write_text(_other_writer(path, theirs, FAST))
            time.sleep(0.5)
        yield from batches

    frame = spark.createDataFrame(rows.to_pandas()).coalesce(1)
    return frame.mapInArrow(slow, "id long, city string, ts long, v long")


def _writer(df, operation: str):
    writer = df.write.format("shoal").mode("append").option("hoodie.datasource.write.operation", operation)
    return writer.options(**FAST)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_long_job_keeps_its_write_alive_beside_another_writer(spark, tmp_path, table_type):
    from shoal.spark.datasource import register

    register(spark)
    path = tmp_path / "t"
    model = _create(path, table_type)
    mine, theirs = _rows(range(200, 210), "c", 2), _rows(range(0, 40, 4), "a", 3)
    done = tmp_path / "other-writer-ran"
    _writer(_slow_input(spark, mine, path, theirs, done), "insert").save(str(path))
    # The other writer committed beside the pending write instead of rolling it back.
    assert done.read_text() == "ok"
    _check(path, _apply(_apply(model, theirs), mine))
    assert _until(lambda: not _keepers())
    _no_stray_files(path)


def test_an_overwrite_that_lost_to_a_concurrent_write_is_rolled_back(spark, tmp_path):
    """insert_overwrite of partition "a" while another writer updates file groups of "a": the
    overwrite would replace what that writer committed after the overwrite was planned, so it
    fails with CommitConflictError and is rolled back; the other write stays."""
    from shoal.spark.datasource import register

    register(spark)
    path = tmp_path / "t"
    model = _create(path, "COPY_ON_WRITE")
    mine, theirs = _rows(range(300, 305), "a", 2), _rows(range(0, 40, 4), "a", 3)
    done = tmp_path / "other-writer-ran"
    with pytest.raises(Exception, match="CommitConflictError") as failure:
        _writer(_slow_input(spark, mine, path, theirs, done), "insert_overwrite").save(str(path))
    assert "conflicts with writes that completed while it ran" in str(failure.value)
    assert done.read_text() == "ok"
    _check(path, _apply(model, theirs))
    assert _until(lambda: not _keepers())
    _no_stray_files(path)
    table = shoal.Table(path)
    assert [i for i in Timeline.load(table.storage, table.config).instants if not i.is_completed] == []


def test_a_failed_job_is_rolled_back_and_leaves_no_heartbeat(spark, tmp_path):
    from shoal.spark.datasource import register

    register(spark)
    path = tmp_path / "t"
    model = _create(path, "MERGE_ON_READ")

    def failing(batches):
        for batch in batches:
            time.sleep(0.3)
            raise ValueError("the source broke")
            yield batch

    df = spark.createDataFrame(_rows(range(500, 505), "c", 2).to_pandas()).mapInArrow(
        failing, "id long, city string, ts long, v long"
    )
    with pytest.raises(Exception, match="the source broke"):
        _writer(df, "insert").save(str(path))
    _check(path, model)
    assert _until(lambda: not _keepers())
    _no_stray_files(path)


def _pending_instant(path: Path) -> str:
    table = shoal.Table(path)
    timeline = Timeline.load(table.storage, table.config)
    instant_time = timeline.new_instant_time()
    timeline.transition_to_inflight(timeline.create_requested(instant_time, Action.COMMIT))
    return instant_time


def test_the_keeper_beats_while_the_watched_process_lives(tmp_path):
    path = tmp_path / "t"
    _create(path, "COPY_ON_WRITE")
    instant_time = _pending_instant(path)
    storage = shoal.Table(path).storage
    watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        assert start_keeper(storage.base_uri, instant_time, 100, watched.pid)

        def fresh() -> bool:
            age = heartbeat_age(storage, instant_time)
            return age is not None and age < 1.0

        # Never a second old for two seconds on end: the keeper beats every 100 ms.
        assert _until(fresh)
        for _ in range(20):
            time.sleep(0.1)
            assert fresh()
    finally:
        watched.kill()
        watched.wait()
    # The driver died: the keeper is gone, and the heartbeat is left to expire.
    assert _until(lambda: not _keepers())
    time.sleep(0.5)
    age = heartbeat_age(storage, instant_time)
    assert age is not None and age > 0.4


def test_the_keeper_stops_when_the_write_completes(tmp_path):
    path = tmp_path / "t"
    _create(path, "COPY_ON_WRITE")
    instant_time = _pending_instant(path)
    table = shoal.Table(path)
    assert start_keeper(table.storage.base_uri, instant_time, 100, os.getpid())
    assert _until(lambda: (path / heartbeat_path(instant_time)).exists())
    timeline = Timeline.load(table.storage, table.config)
    timeline.complete(timeline.get(instant_time), b"{}")
    (path / heartbeat_path(instant_time)).unlink(missing_ok=True)
    assert _until(lambda: not _keepers())
    assert not (path / heartbeat_path(instant_time)).exists()
    # The keeper was started through a launcher: no child of this process is left a zombie.
    assert not _zombie_children()


def test_no_keeper_without_a_process_to_watch(tmp_path):
    assert not start_keeper(str(tmp_path), "20260101000000000", 100, 2**22 + 12345)
