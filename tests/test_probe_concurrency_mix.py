"""Writers, readers and table services of one table in several processes, and writers killed.

The stress runs behind these cases (three OCC writers with overlapping keys, a writer SIGKILLed
at random points, two stream writers, a process looping compact/clean/archive, a reader
checking that no write is ever seen in part) lost no committed record and left no stray file.
What they found is below: a heartbeat nobody deletes, and untyped errors of readers and writers
that race a rollback or an archival.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
import shoal.table as table_mod
import shoal.write.writer as writer_mod
from tests.hudi_oracle import hudi_rs_read

ROOT = Path(__file__).parents[1]
WORKER = Path(__file__).with_name("crash_worker.py")
SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
OCC = {
    "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
    "hoodie.write.lock.wait_time_ms": "20000",
    "hoodie.write.lock.wait_time_ms_between_retry": "20",
    "hoodie.client.heartbeat.interval_in_ms": "100",
}


def _rows(ids, ts: int, city: str = "a") -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "city": city, "ts": ts, "v": ts} for i in ids], schema=SCHEMA)


def _create(path: Path, table_type: str, options: dict[str, str] | None = None) -> shoal.Table:
    return shoal.Table.create(
        path,
        name="p",
        table_type=table_type,
        record_key="id",
        partition_by=["city"],
        ordering_field="ts",
        options=options or {},
    )


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_heartbeat_of_a_writer_killed_before_requesting_its_instant_is_deleted(tmp_path):
    """A writer beats once before it requests its instant. Killed in between, it leaves a
    heartbeat of an instant the timeline never shows, which no rollback deletes: the next
    writer deletes it once it has stopped."""
    path = tmp_path / "t"
    _create(path, "MERGE_ON_READ", OCC).upsert(_rows(range(10), 1), options=OCC)
    done = _python(
        f"""
        import json, os, pyarrow as pa, shoal
        from shoal.timeline.timeline import Timeline
        Timeline.create_requested = lambda *a, **k: os._exit(17)
        batch = pa.table({{"id": pa.array([1], pa.int64()), "city": ["a"],
                          "ts": pa.array([5], pa.int64()), "v": pa.array([5], pa.int64())}})
        shoal.Table({str(path)!r}, options=json.loads({json.dumps(json.dumps(OCC))})).upsert(batch)
        """
    )
    assert done.returncode == 17, done.stderr
    heartbeats = path / ".hoodie" / ".heartbeat"
    (orphan,) = heartbeats.iterdir()
    os.utime(orphan, (orphan.stat().st_mtime - 60, orphan.stat().st_mtime - 60))  # it stopped long ago
    # It died holding the lock: the operator deletes it (hoodie.write.lock.filesystem.expire=0).
    (path / ".hoodie" / "lock").unlink()
    shoal.Table(path, options=OCC).upsert(_rows([2], 6), options=OCC)
    assert list(heartbeats.iterdir()) == []
    assert sorted(shoal.Table(path).read(columns=["id", "v"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "v": 6 if i == 2 else 1} for i in range(10)
    ]


def test_merge_on_read_snapshot_read_survives_the_rollback_of_a_failed_write(tmp_path, monkeypatch):
    path = tmp_path / "t"
    _create(path, "MERGE_ON_READ").upsert(_rows(range(10), 1))
    pq.write_table(_rows(range(5), 2), tmp_path / "b.parquet")
    done = subprocess.run(
        [sys.executable, str(WORKER), str(path), "upsert", "before_complete", str(tmp_path / "b.parquet")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 17, done.stderr  # a log file of the failed write is left
    original = table_mod._read_slice
    fired: list[bool] = []

    def read_slice(spec, storage):
        if not fired:
            fired.append(True)
            # Planned: now the next writer (another partition) rolls the failed write back.
            shoal.Table(path).upsert(_rows([99], 3, city="b"))
        return original(spec, storage)

    monkeypatch.setattr(table_mod, "_read_slice", read_slice)
    got = shoal.Table(path).read(columns=["id", "v"]).to_pylist()
    assert fired
    assert {(r["id"], r["v"]) for r in got} >= {(i, 1) for i in range(10)}


def test_a_write_racing_an_archival_plans_again_and_commits(tmp_path, monkeypatch):
    path = tmp_path / "t"
    table = _create(path, "COPY_ON_WRITE", OCC)
    for ts in range(1, 8):
        table.upsert(_rows(range(10), ts), options=OCC)
    services = {
        **OCC,
        "hoodie.cleaner.commits.retained": "1",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
    }
    original = writer_mod.average_record_size_from_commits
    fired: list[bool] = []

    def sizing(timeline, *args):
        if fired:
            return original(timeline, *args)
        fired.append(True)
        done = _python(
            f"""
            import json, shoal
            options = json.loads({json.dumps(json.dumps(services))})
            t = shoal.Table({str(path)!r}, options=options)
            t.clean(options=options)
            print(len(t.archive(options=options).archived))
            """
        )
        assert done.returncode == 0, done.stderr
        assert int(done.stdout.split()[-1]) > 0
        return original(timeline, *args)

    monkeypatch.setattr(writer_mod, "average_record_size_from_commits", sizing)
    # The archival removed commit metadata the sizing was about to read: the write plans again
    # on the newer timeline and commits.
    shoal.Table(path, options=OCC).upsert(_rows([1], 9), options=OCC)
    assert fired
    expected = {**dict.fromkeys(range(10), 7), 1: 9}
    got = {r["id"]: r["ts"] for r in shoal.Table(path).read(columns=["id", "ts"]).to_pylist()}
    assert got == expected
    assert {r["id"]: r["ts"] for r in hudi_rs_read(str(path)).select(["id", "ts"]).to_pylist()} == expected


def test_a_missing_parquet_file_is_not_called_damage():
    """A concurrent clean deletes files: a missing one stays FileNotFoundError (which readers
    and writers plan again on), not CorruptDataError, whatever its message names."""
    from shoal.fs.damage import damaged_parquet

    with pytest.raises(FileNotFoundError), damaged_parquet("p/f.parquet"):
        raise FileNotFoundError("/t/p/f.parquet: No such file or directory (os error 2)")
