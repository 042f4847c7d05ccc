"""Writers that run at once (shoal.write.concurrency).

A "second writer" here is another process (``python -c``) started from inside the first
writer's write, after its first file: the two then really overlap, as two jobs on one table do.
Single writer mode: the second rolls the first back, and the first then fails instead of
reporting success. Optimistic concurrency: both commit when they changed different file groups,
the later one is rolled back with CommitConflictError when they changed the same one, and
retries make every write land. shoal and hudi-rs must read the model afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
import shoal.write.writer as writer_mod
from shoal.errors import CommitConflictError, InvalidOptionError, UnsupportedError
from shoal.executor.local import LocalExecutor
from shoal.fs.naming import parse_base_file_name
from shoal.timeline.heartbeat import heartbeat_path
from shoal.timeline.instant import State
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "city", "ts", "v"]
OCC = {
    "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
    "hoodie.write.lock.wait_time_ms": "20000",
    "hoodie.write.lock.wait_time_ms_between_retry": "20",
    "hoodie.client.heartbeat.interval_in_ms": "500",
}


def _rows(ids, city: str, ts: int, v: int | None = None) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": [city] * len(ids),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "v": pa.array([v if v is not None else i * 10 + ts for i in ids], pa.int64()),
        }
    )


def _create(path: Path, table_type: str) -> dict[int, dict]:
    t = shoal.Table.create(
        path, name="c", table_type=table_type, record_key="id", partition_by=["city"], ordering_field="ts"
    )
    model: dict[int, dict] = {}
    for city, ids in (("a", range(0, 40)), ("b", range(40, 80))):
        batch = _rows(ids, city, 1)
        t.upsert(batch)
        model.update({r["id"]: r for r in batch.to_pylist()})
    return model


def _apply(model: dict[int, dict], batch: pa.Table) -> dict[int, dict]:
    return {**model, **{r["id"]: r for r in batch.to_pylist()}}


def _check(path: Path, model: dict[int, dict]) -> None:
    expected = sorted(model.values(), key=lambda r: r["id"])
    assert rows_by(shoal.Table(path).read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(path)), COLUMNS, ["id"]) == expected


def _no_stray_files(path: Path) -> None:
    """Every base file belongs to a completed instant, no markers or heartbeats are left, and
    the lock is free."""
    timeline = Timeline.load(shoal.Table(path).storage, shoal.Table(path).config)
    for f in path.rglob("*.parquet"):
        if ".hoodie" not in f.parts:
            assert timeline.is_completed_or_before_start(parse_base_file_name(f.name).instant_time), f
    assert not list((path / ".hoodie" / ".temp").glob("*/**/*.marker.*"))
    assert not list((path / ".hoodie" / ".heartbeat").glob("*"))
    assert not (path / ".hoodie" / "lock").exists()


def _other_writer(path: Path, batch: pa.Table, options: dict[str, str] | None = None) -> str:
    """Upserts ``batch`` from another process; returns "ok" or the error's class name."""
    code = textwrap.dedent(
        f"""
        import json, sys, pyarrow as pa, shoal
        batch = pa.Table.from_pylist(json.loads(sys.argv[1]),
            schema=pa.schema([("id", pa.int64()), ("city", pa.string()),
                              ("ts", pa.int64()), ("v", pa.int64())]))
        try:
            shoal.Table({str(path)!r}, options=json.loads(sys.argv[2])).upsert(batch)
            print("ok")
        except shoal.ShoalError as e:
            print(type(e).__name__)
        """
    )
    args = [sys.executable, "-c", code, json.dumps(batch.to_pylist()), json.dumps(options or {})]
    out = subprocess.run(args, check=True, capture_output=True, text=True, cwd=Path(__file__).parents[1])
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture
def after_first_file(monkeypatch):
    """Runs ``action`` once, right after the first write task of a write finishes."""

    def install(action):
        fired: list[str] = []

        def wrap(original):
            def wrapper(*args, **kwargs):
                result = original(*args, **kwargs)
                if not fired:
                    fired.append(action())
                return result

            return wrapper

        monkeypatch.setattr(writer_mod, "run_cow_write", wrap(writer_mod.run_cow_write))
        monkeypatch.setattr(writer_mod, "run_log_append", wrap(writer_mod.run_log_append))
        return fired

    return install


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_single_writer_rolled_back_by_a_second_fails_instead_of_committing(
    tmp_path, table_type, after_first_file
):
    path = tmp_path / "t"
    model = _create(path, table_type)
    theirs = _rows([100], "c", 1)
    fired = after_first_file(lambda: _other_writer(path, theirs))
    # Updates in both partitions: two tasks, run one after the other, so the second task writes
    # after the other writer rolled this write back.
    mine = pa.concat_tables([_rows(range(0, 40, 4), "a", 2), _rows(range(40, 80, 4), "b", 2)])
    table = shoal.Table(path, executor=LocalExecutor(1))
    with pytest.raises(CommitConflictError, match="rolled back by another writer"):
        table.upsert(mine)
    assert fired == ["ok"]
    # The other writer's rollback, then the second task's file rolled back by this writer.
    timeline = Timeline.load(table.storage, table.config)
    assert [i.action.value for i in timeline.completed()].count("rollback") == 2
    _check(path, _apply(model, theirs))
    _no_stray_files(path)
    # The next write goes through.
    table.upsert(mine)
    _check(path, _apply(_apply(model, theirs), mine))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_optimistic_writers_of_different_file_groups_both_commit(tmp_path, table_type, after_first_file):
    path = tmp_path / "t"
    model = _create(path, table_type)
    theirs = pa.concat_tables([_rows([100, 101], "c", 1), _rows(range(41, 80, 4), "b", 3)])
    fired = after_first_file(lambda: _other_writer(path, theirs, OCC))
    mine = _rows(range(0, 40, 4), "a", 2)
    shoal.Table(path, options=OCC).upsert(mine)
    assert fired == ["ok"]
    _check(path, _apply(_apply(model, theirs), mine))
    _no_stray_files(path)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_optimistic_writer_of_a_file_group_changed_meanwhile_is_rolled_back(
    tmp_path, table_type, after_first_file
):
    path = tmp_path / "t"
    model = _create(path, table_type)
    # Different keys of the same file group: without the check, a copy-on-write commit would
    # drop the other writer's updates (both rewrote the same base file).
    theirs = _rows(range(1, 40, 4), "a", 3)
    fired = after_first_file(lambda: _other_writer(path, theirs, OCC))
    mine = _rows(range(0, 40, 4), "a", 2)
    table = shoal.Table(path, options=OCC)
    with pytest.raises(CommitConflictError, match="also changed file group") as err:
        table.upsert(mine)
    assert "rolled back: retry" in str(err.value)
    assert fired == ["ok"]
    model = _apply(model, theirs)
    _check(path, model)
    _no_stray_files(path)
    table.upsert(mine)
    _check(path, _apply(model, mine))
    _no_stray_files(path)


def _fail(*args, **kwargs):
    raise OSError("disk gone")


def _died_before_commit(table: shoal.Table, batch: pa.Table, monkeypatch) -> str:
    """Runs a write of ``batch`` that dies before its commit; returns its pending instant."""
    with monkeypatch.context() as m:
        m.setattr(Timeline, "complete", _fail)
        with pytest.raises(OSError):
            table.upsert(batch)
    (pending,) = Timeline.load(table.storage, table.config).pending_data_instants()
    return pending.requested_time


def _beat(path: Path, instant_time: str, age_s: float = 0.0) -> Path:
    """Writes the heartbeat of ``instant_time``, ``age_s`` seconds old, as a live writer does."""
    beat = path / heartbeat_path(instant_time)
    beat.parent.mkdir(parents=True, exist_ok=True)
    beat.touch()
    if age_s:
        then = time.time() - age_s
        os.utime(beat, (then, then))
    return beat


def test_lazy_writer_rolls_back_only_writes_whose_heartbeat_stopped(tmp_path, monkeypatch):
    path = tmp_path / "t"
    model = _create(path, "MERGE_ON_READ")
    # Beats every 5 s: a heartbeat counts as stopped after 10 s.
    table = shoal.Table(path, options={**OCC, "hoodie.client.heartbeat.interval_in_ms": "5000"})

    # A write that dies before its commit: its instant stays pending.
    pending = _died_before_commit(table, _rows(range(0, 40, 2), "a", 5), monkeypatch)
    assert not (path / heartbeat_path(pending)).exists()  # its writer stopped beating when it gave up

    # A heartbeat that is fresh: another writer takes the write for a running one.
    _beat(path, pending)
    theirs = _rows([100], "c", 1)
    table.upsert(theirs)
    model = _apply(model, theirs)
    timeline = Timeline.load(table.storage, table.config)
    assert timeline.get(pending).state == State.INFLIGHT
    _check(path, model)

    # Two missed beats later it is a failed write, and the next write rolls it back.
    _beat(path, pending, age_s=11)
    mine = _rows([101], "c", 1)
    table.upsert(mine)
    assert timeline.reload().get(pending) is None
    _check(path, _apply(model, mine))
    _no_stray_files(path)


def test_eager_writer_rolls_back_despite_a_heartbeat(tmp_path, monkeypatch):
    path = tmp_path / "t"
    _create(path, "COPY_ON_WRITE")
    table = shoal.Table(path)
    pending = _died_before_commit(table, _rows([1], "a", 5), monkeypatch)
    _beat(path, pending)
    table.upsert(_rows([100], "c", 1))
    assert Timeline.load(table.storage, table.config).get(pending) is None


def test_commit_waits_for_a_held_lock_then_fails_and_the_next_write_recovers(tmp_path):
    path = tmp_path / "t"
    model = _create(path, "COPY_ON_WRITE")
    lock = path / ".hoodie" / "lock"
    lock.write_text('{"lockCreateTime": "2026-11-22 10:00:00.000", "lockThreadName": "elsewhere"}')
    options = {
        **OCC,
        "hoodie.write.lock.wait_time_ms": "300",
        "hoodie.write.lock.wait_time_ms_between_retry": "50",
    }
    table = shoal.Table(path, options=options)
    started = time.monotonic()
    with pytest.raises(CommitConflictError, match=r"lock .* stayed taken .*elsewhere"):
        table.upsert(_rows([1, 2], "a", 7))
    assert time.monotonic() - started >= 0.3
    assert lock.exists()  # somebody else's lock is never taken away before it expires
    _check(path, model)
    lock.unlink()
    batch = _rows([1, 2], "a", 7)
    table.upsert(batch)
    _check(path, _apply(model, batch))
    _no_stray_files(path)


def test_expired_lock_is_broken(tmp_path):
    path = tmp_path / "t"
    model = _create(path, "MERGE_ON_READ")
    lock = path / ".hoodie" / "lock"
    lock.write_text("{}")
    old = time.time() - 120
    os.utime(lock, (old, old))
    options = {**OCC, "hoodie.write.lock.filesystem.expire": "1", "hoodie.write.lock.wait_time_ms": "300"}
    batch = _rows([1], "a", 7)
    shoal.Table(path, options=options).upsert(batch)
    _check(path, _apply(model, batch))
    _no_stray_files(path)


def test_lock_in_a_directory_of_its_own(tmp_path):
    path = tmp_path / "t"
    model = _create(path, "COPY_ON_WRITE")
    locks = tmp_path / "locks"
    (locks).mkdir()
    (locks / "lock").write_text("{}")
    options = {
        **OCC,
        "hoodie.write.lock.filesystem.path": str(locks),
        "hoodie.write.lock.wait_time_ms": "200",
    }
    with pytest.raises(CommitConflictError, match=str(locks)):
        shoal.Table(path, options=options).upsert(_rows([1], "a", 7))
    (locks / "lock").unlink()
    batch = _rows([1], "a", 8)
    shoal.Table(path, options=options).upsert(batch)
    assert not (locks / "lock").exists()
    _check(path, _apply(model, batch))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({**OCC, "hoodie.cleaner.policy.failed.writes": "EAGER"}, "would roll back the other writers"),
        ({"hoodie.cleaner.policy.failed.writes": "NEVER"}, "expected one of EAGER, LAZY"),
        ({"hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL"}, "expected one of"),
        (
            {
                **OCC,
                "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.ZookeeperLock",
            },
            "only org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
        ),
        ({**OCC, "hoodie.write.lock.filesystem.expire": "-1"}, "non-negative"),
    ],
)
def test_bad_concurrency_options_fail_before_the_timeline_changes(tmp_path, options, message):
    path = tmp_path / "t"
    _create(path, "COPY_ON_WRITE")
    before = sorted(p.name for p in (path / ".hoodie").iterdir())
    with pytest.raises(InvalidOptionError, match=message):
        shoal.Table(path, options=options).upsert(_rows([1], "a", 7))
    assert sorted(p.name for p in (path / ".hoodie").iterdir()) == before


_RACER = textwrap.dedent(
    """
    import json, os, sys, time, pyarrow as pa, shoal
    path, options = sys.argv[1], json.loads(sys.argv[5])
    first, count, rounds = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    retries = 0
    while not os.path.exists(path + ".go"):  # all racers start together
        time.sleep(0.005)
    for r in range(rounds):
        ids = list(range(first, first + count))
        batch = pa.table({"id": pa.array(ids, pa.int64()), "city": ["a"] * count,
                          "ts": pa.array([r + 10] * count, pa.int64()),
                          "v": pa.array([first * 1000 + r] * count, pa.int64())})
        while True:
            try:
                shoal.Table(path, options=options).upsert(batch)
                break
            except shoal.CommitConflictError:
                retries += 1
                if retries > 200:
                    raise
    print(retries)
    """
)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_racing_processes_on_one_file_group_lose_no_update(tmp_path, table_type):
    """Three processes update their own keys of the same file group, four times each, at once,
    retrying on conflicts. Every update lands: none is overwritten by a rewrite from a stale
    base file."""
    path = tmp_path / "t"
    model = _create(path, table_type)
    rounds, count = 4, 5
    starts = [0, 10, 20]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(path), str(s), str(count), str(rounds), json.dumps(OCC)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).parents[1],
        )
        for s in starts
    ]
    time.sleep(1.0)  # the racers import shoal
    Path(f"{path}.go").touch()
    retries = 0
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        retries += int(out.split()[-1])
    print("retries after conflicts:", retries)
    for s in starts:
        for i in range(s, s + count):
            model[i] = {"id": i, "city": "a", "ts": rounds - 1 + 10, "v": s * 1000 + rounds - 1}
    _check(path, model)
    _no_stray_files(path)
    table = shoal.Table(path)
    written = [i for i in Timeline.load(table.storage, table.config).completed_data_instants()]
    assert len(written) == 2 + len(starts) * rounds


class _OtherWriterOnce:
    """A Spark write task hook: the first file written makes another process upsert ``batch``
    (a marker file keeps it to one, whichever task or attempt comes first)."""

    def __init__(self, path: Path, batch: pa.Table, done: Path) -> None:
        self.path, self.batch, self.done = path, batch, done

    def __call__(self, spec, stat) -> None:
        try:
            fd = os.open(self.done, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, _other_writer(self.path, self.batch, OCC).encode())
        os.close(fd)


@pytest.mark.parametrize(("their_city", "conflict"), [("c", False), ("a", True)])
def test_spark_write_under_optimistic_concurrency(spark, tmp_path, their_city, conflict):
    from shoal.spark.write import _write

    path = tmp_path / "t"
    model = _create(path, "MERGE_ON_READ")
    ids = range(1, 40, 4) if their_city == "a" else [100, 101]
    theirs = _rows(ids, their_city, 3)
    mine = _rows(range(0, 40, 4), "a", 2)
    done = tmp_path / "other-writer-ran"
    df = spark.createDataFrame(mine.to_pandas())
    hook = _OtherWriterOnce(path, theirs, done)
    if conflict:
        with pytest.raises(CommitConflictError, match="also changed file group"):
            _write(df, str(path), "upsert", OCC, hook)
    else:
        _write(df, str(path), "upsert", OCC, hook)
        model = _apply(model, mine)
    assert done.read_text() == "ok"
    model = _apply(model, theirs)
    _check(path, model)
    _no_stray_files(path)
    if conflict:
        _write(df, str(path), "upsert", OCC)
        _check(path, _apply(model, mine))


def test_stream_writer_keeps_its_checkpoint_alive_beside_other_writers(tmp_path):
    """A stream writer's checkpoint stays pending for as long as the stream runs: its heartbeat
    keeps other writers from taking it for a failed write."""
    path = tmp_path / "t"
    model = _create(path, "MERGE_ON_READ")
    table = shoal.Table(path, options=OCC)
    mine = _rows(range(0, 40, 4), "a", 2)
    with table.stream_writer(bucket_buffer_bytes=1, options=OCC) as stream:
        stream.write(mine)  # flushed at once: the checkpoint's instant is inflight
        (pending,) = Timeline.load(table.storage, table.config).pending_data_instants()
        beat = path / heartbeat_path(pending.requested_time)
        first = beat.stat().st_mtime
        time.sleep(1.3)  # two intervals of 500 ms: beyond the tolerance without new beats
        assert beat.stat().st_mtime > first
        theirs = _rows([100, 101], "c", 1)
        assert _other_writer(path, theirs, OCC) == "ok"
        assert Timeline.load(table.storage, table.config).get(pending.requested_time).state == State.INFLIGHT
    assert not beat.exists()
    _check(path, _apply(_apply(model, theirs), mine))
    _no_stray_files(path)


def test_rolling_back_a_write_that_lost_the_race_for_a_log_name_keeps_the_winners_file(tmp_path):
    """Two writers name the same new log file; the loser's marker (written before its exclusive
    create failed) names the winner's file. Rolling the loser back must not delete that file."""
    from shoal.fs.markers import create_marker
    from shoal.timeline.instant import Action

    path = tmp_path / "t"
    model = _create(path, "MERGE_ON_READ")
    table = shoal.Table(path)
    winner = _rows(range(0, 40, 4), "a", 2)
    table.upsert(winner)
    model = _apply(model, winner)
    (log,) = (path / "a").glob(".*.log.*")
    timeline = Timeline.load(table.storage, table.config)
    loser = timeline.new_instant_time()
    requested = timeline.create_requested(loser, Action.DELTA_COMMIT)
    timeline.transition_to_inflight(requested, b"")
    create_marker(table.storage, loser, f"a/{log.name}", "APPEND", append_offset=0)
    table.upsert(_rows([100], "c", 1))  # rolls the loser back first
    assert log.exists()
    _check(path, _apply(model, _rows([100], "c", 1)))
    _no_stray_files(path)


def test_compaction_running_elsewhere_is_not_taken_for_a_failed_attempt(tmp_path, monkeypatch):
    """Under optimistic concurrency a compaction run keeps a heartbeat: a second runner refuses
    to roll back one that still beats, and rolls back and reruns one that stopped."""
    import shoal.services.compaction as compaction_mod

    path = tmp_path / "t"
    model = _create(path, "MERGE_ON_READ")
    options = {**OCC, "hoodie.client.heartbeat.interval_in_ms": "5000"}
    table = shoal.Table(path, options=options)
    batch = _rows(range(0, 40, 3), "a", 2)
    table.upsert(batch)
    model = _apply(model, batch)
    instant = table.schedule_compaction()
    assert instant is not None

    # A runner dies after its tasks: the compaction stays inflight, its heartbeat stopped.
    with monkeypatch.context() as m:
        m.setattr(compaction_mod, "check_still_pending", _fail)
        with pytest.raises(OSError):
            table.run_compaction(instant)
    assert Timeline.load(table.storage, table.config).get(instant).state == State.INFLIGHT
    assert not (path / heartbeat_path(instant)).exists()

    _beat(path, instant)  # as if the runner were alive elsewhere
    with pytest.raises(CommitConflictError, match="running in another process"):
        table.run_compaction(instant)
    _beat(path, instant, age_s=11)
    table.run_compaction(instant)
    assert Timeline.load(table.storage, table.config).get(instant).is_completed
    _check(path, model)


def test_inline_compaction_waits_for_other_writers_pending_writes(tmp_path, monkeypatch):
    """A due inline compaction cannot be planned while another writer's earlier write is
    pending: under optimistic concurrency the write that triggered it still succeeds, and a later
    commit schedules it."""
    path = tmp_path / "t"
    model = _create(path, "MERGE_ON_READ")
    options = {
        **OCC,
        "hoodie.compact.inline": "true",
        "hoodie.compact.inline.max.delta.commits": "1",
        "hoodie.client.heartbeat.interval_in_ms": "30000",
    }
    table = shoal.Table(path, options=options)
    pending = _died_before_commit(table, _rows([100], "c", 1), monkeypatch)
    beat = _beat(path, pending)  # another writer, still running
    batch = _rows(range(0, 40, 4), "a", 2)
    table.upsert(batch)
    model = _apply(model, batch)
    timeline = Timeline.load(table.storage, table.config)
    assert not [i for i in timeline.instants if i.action.value == "compaction"]
    _check(path, model)
    beat.unlink()  # that writer died
    batch = _rows(range(1, 40, 4), "a", 3)
    table.upsert(batch)  # rolls it back, then compacts
    model = _apply(model, batch)
    timeline = Timeline.load(table.storage, table.config)
    assert [i.is_completed for i in timeline.instants if i.action.value == "compaction"] == [True]
    _check(path, model)
    _no_stray_files(path)


def test_inline_services_take_the_lock(tmp_path, monkeypatch):
    """Inline clean scheduling and archival take the table's lock under optimistic concurrency.
    With the lock held by another writer, they are skipped (the write has committed), and run
    after a later commit."""
    import shoal.services.archive as archive_mod
    import shoal.services.clean as clean_mod
    from shoal.write.concurrency import Concurrency

    path = tmp_path / "t"
    model = _create(path, "COPY_ON_WRITE")
    options = {
        **OCC,
        "hoodie.cleaner.commits.retained": "1",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
        "hoodie.write.lock.wait_time_ms": "200",
    }
    table = shoal.Table(path, options=options)
    for ts in (2, 3, 4):
        batch = _rows([ts], "a", ts)
        table.upsert(batch)
        model = _apply(model, batch)
    lock = path / ".hoodie" / "lock"

    class Taken(Concurrency):
        """The lock, held by another writer when this service asks for it."""

        def locked(self):
            lock.write_text('{"lockThreadName": "another writer"}')
            return super().locked()

    def archived() -> list[str]:
        return sorted(p.name for p in (path / ".hoodie" / "archived").glob("*"))

    def cleans() -> int:
        timeline = Timeline.load(table.storage, table.config)
        return sum(1 for i in timeline.instants if i.action.value == "clean")

    archived_before, cleans_before = archived(), cleans()
    for module in (archive_mod, clean_mod):
        with monkeypatch.context() as m:
            m.setattr(module, "Concurrency", Taken)
            batch = _rows([5 if module is archive_mod else 6], "a", 7)
            table.upsert(batch)
        model = _apply(model, batch)
        assert lock.read_text() == '{"lockThreadName": "another writer"}'
        lock.unlink()
    assert archived() == archived_before and cleans() == cleans_before + 1
    batch = _rows([8], "a", 8)
    table.upsert(batch)  # cleans and archives now
    assert archived() != archived_before
    _check(path, _apply(model, batch))
    _no_stray_files(path)


def test_optimistic_concurrency_needs_a_lock_file_created_atomically(tmp_path):
    import pyarrow.fs as pafs

    from shoal.config.write_config import WriteConfig
    from shoal.fs.storage import Storage
    from shoal.write.concurrency import Concurrency

    # A file system other than the local one: shoal's exclusive create is check-then-write there.
    remote = Storage(str(tmp_path), filesystem=pafs.SubTreeFileSystem("/", pafs.LocalFileSystem()))
    assert not remote.is_local
    with pytest.raises(UnsupportedError, match="atomically"):
        Concurrency(remote, WriteConfig(OCC))
    Concurrency(remote, WriteConfig({}))  # a single writer needs no lock
    locks = tmp_path / "locks"
    Concurrency(remote, WriteConfig({**OCC, "hoodie.write.lock.filesystem.path": str(locks)}))


def test_a_lock_broken_as_expired_is_not_released_by_its_old_holder(tmp_path):
    from shoal.fs.storage import Storage
    from shoal.timeline.file_lock import FileLock

    storage = Storage(str(tmp_path))
    slow = FileLock(storage, None, expire_minutes=1, wait_ms=100, retry_ms=10)
    slow.acquire()
    lock = tmp_path / ".hoodie" / "lock"
    old = time.time() - 120
    os.utime(lock, (old, old))  # the holder stalled past the expiry
    other = FileLock(storage, None, expire_minutes=1, wait_ms=100, retry_ms=10)
    other.acquire()  # breaks the expired lock and takes it
    taken = lock.read_bytes()
    slow.release()
    assert lock.read_bytes() == taken  # still the other writer's
    other.release()
    assert not lock.exists()


def test_compaction_is_planned_under_the_lock(tmp_path):
    """A plan and its instant time are taken under the lock: while another writer holds it, no
    plan is saved."""
    path = tmp_path / "t"
    model = _create(path, "MERGE_ON_READ")
    options = {**OCC, "hoodie.write.lock.wait_time_ms": "200"}
    table = shoal.Table(path, options=options)
    batch = _rows(range(0, 40, 4), "a", 2)
    table.upsert(batch)
    lock = path / ".hoodie" / "lock"
    lock.write_text('{"lockThreadName": "another writer"}')
    with pytest.raises(CommitConflictError, match="stayed taken"):
        table.schedule_compaction()
    assert table.pending_compactions() == []
    lock.unlink()
    assert table.schedule_compaction() is not None
    table.compact()
    _check(path, _apply(model, batch))
    _no_stray_files(path)


def test_rollback_savepoint_and_restore_by_hand_take_the_lock(tmp_path):
    path = tmp_path / "t"
    model = _create(path, "COPY_ON_WRITE")
    table = shoal.Table(path, options={**OCC, "hoodie.write.lock.wait_time_ms": "200"})
    savepoint = table.savepoint()
    batch = _rows([1], "a", 9)
    table.upsert(batch)
    lock = path / ".hoodie" / "lock"
    lock.write_text('{"lockThreadName": "another writer"}')
    before = sorted(p.name for p in (path / ".hoodie").iterdir())
    for action in (table.rollback, table.savepoint, lambda: table.restore(savepoint)):
        with pytest.raises(CommitConflictError, match="stayed taken"):
            action()
    with pytest.raises(CommitConflictError, match="stayed taken"):
        table.delete_savepoint(savepoint)
    assert sorted(p.name for p in (path / ".hoodie").iterdir()) == before
    _check(path, _apply(model, batch))
    lock.unlink()
    table.rollback()
    _check(path, model)
    table.upsert(batch)
    table.restore(savepoint)
    _check(path, model)
    _no_stray_files(path)
