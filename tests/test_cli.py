"""The ``shoal`` command on a small table: every subcommand runs and reports what it should."""

from __future__ import annotations

import pyarrow as pa

import shoal
from shoal.cli import main


def _table(tmp_path) -> shoal.Table:
    t = shoal.Table.create(
        str(tmp_path / "t"), name="cli_t", record_key="id", partition_by="city", ordering_field="ts"
    )
    t.upsert(pa.table({"id": [1, 2], "city": ["a", "b"], "ts": [1, 1]}))
    t.upsert(pa.table({"id": [2], "city": ["b"], "ts": [2]}))
    return t


def test_info_timeline_files_show(tmp_path, capsys):
    t = _table(tmp_path)
    assert main(["info", t.path]) == 0
    out = capsys.readouterr().out
    assert "cli_t" in out and "COPY_ON_WRITE" in out and "EVENT_TIME_ORDERING" in out
    assert main(["timeline", t.path]) == 0
    out = capsys.readouterr().out
    assert out.count("COMPLETED") == 2
    assert main(["files", t.path]) == 0
    assert capsys.readouterr().out.count("cli_t") == 0  # files lists slices, not the name
    assert main(["show", t.path, "--columns", "id,ts"]) == 0
    assert "2 rows" in capsys.readouterr().out


def test_rollback_and_errors(tmp_path, capsys):
    t = _table(tmp_path)
    assert main(["rollback", t.path]) == 0
    assert sorted(t.read()["ts"].to_pylist()) == [1, 1]
    assert main(["info", str(tmp_path / "missing")]) == 2
    assert "TableNotFoundError" in capsys.readouterr().err


def test_compact(tmp_path, capsys):
    t = shoal.Table.create(
        str(tmp_path / "m"), name="m", table_type="MERGE_ON_READ", record_key="id", ordering_field="ts"
    )
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1]}))
    assert main(["compact", t.path]) == 0
    assert "nothing to compact" in capsys.readouterr().out
    t.upsert(pa.table({"id": [2], "ts": [2]}))
    assert main(["compact", t.path, "--if-due"]) == 0  # one delta commit: not due by default
    assert "nothing to compact" in capsys.readouterr().out
    assert main(["compact", t.path, "--schedule"]) == 0
    (pending,) = t.pending_compactions()
    assert f"scheduled compaction {pending}" in capsys.readouterr().out
    assert main(["compact", t.path, "--run", pending]) == 0
    assert f"compaction {pending} completed: 1 file groups" in capsys.readouterr().out
    assert t.pending_compactions() == [] and not any(s.log_files for s in t.file_slices())
    assert sorted(t.read()["ts"].to_pylist()) == [1, 2]
    t.upsert(pa.table({"id": [1], "ts": [3]}))
    assert main(["compact", t.path]) == 0
    assert "completed" in capsys.readouterr().out
    assert main(["compact", t.path, "--run", "20200101000000000"]) == 2


def test_commit_shows_the_files_written_and_the_extra_metadata(tmp_path, capsys):
    t = _table(tmp_path)
    first = t.latest_instant()
    t.upsert(pa.table({"id": [3], "city": ["c"], "ts": [1]}), options={"_checkpoint": "kafka:0:42"})
    assert main(["commit", t.path]) == 0
    out = capsys.readouterr().out
    assert "UPSERT" in out and "_checkpoint = kafka:0:42" in out
    assert "schema =" not in out
    # The partition written and its one insert.
    assert any(line.split("│")[1].strip() == "c" for line in out.splitlines() if line.count("│") > 6)
    assert main(["commit", t.path, "--instant", first]) == 0
    out = capsys.readouterr().out
    assert first in out and "_checkpoint" not in out
    assert main(["commit", t.path, "--instant", "20000101000000000"]) == 2
    assert "InstantNotFoundError" in capsys.readouterr().err


def test_option_passes_write_options(tmp_path, capsys):
    """--option KEY=VALUE reaches the table: under optimistic concurrency `compact` will not roll
    back a compaction whose runner still beats elsewhere."""
    from shoal.timeline.heartbeat import heartbeat_path
    from shoal.timeline.instant import State
    from shoal.timeline.timeline import Timeline

    t = shoal.Table.create(
        str(tmp_path / "m"), name="m", table_type="MERGE_ON_READ", record_key="id", ordering_field="ts"
    )
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1]}))
    t.upsert(pa.table({"id": [2], "ts": [2]}))
    pending = t.schedule_compaction()
    timeline = Timeline.load(t.storage, t.config)
    timeline.transition_to_inflight(timeline.get(pending))  # a runner elsewhere started it
    beat = tmp_path / "m" / heartbeat_path(pending)
    beat.parent.mkdir(parents=True)
    beat.touch()
    occ = "hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL"
    assert main(["compact", t.path, "--run", pending, "-o", occ]) == 2
    assert "running in another process" in capsys.readouterr().err
    assert Timeline.load(t.storage, t.config).get(pending).state == State.INFLIGHT
    assert main(["compact", t.path, "--run", pending, "--option", "no-equals-sign"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main(["compact", t.path, "--run", pending, "-o", "hoodie.no.such.option=1"]) == 2
    assert "InvalidOptionError" in capsys.readouterr().err
    beat.unlink()  # that runner died: its attempt is rolled back and run again
    assert main(["compact", t.path, "--run", pending, "-o", occ]) == 0
    assert sorted(t.read()["ts"].to_pylist()) == [1, 2]


def test_info_shows_pending_writes_and_the_lock(tmp_path, capsys, monkeypatch):
    import importlib
    import os
    import time

    from shoal.timeline.heartbeat import heartbeat_path
    from shoal.timeline.instant import Action
    from shoal.timeline.timeline import Timeline

    # shoal.cli's ``main`` is the function; its module holds the console. One line per row:
    monkeypatch.setattr(importlib.import_module("shoal.cli.main").console, "width", 200)
    t = _table(tmp_path)
    assert main(["info", t.path]) == 0
    out = capsys.readouterr().out
    assert "heartbeat" not in out and "free" in out
    timeline = Timeline.load(t.storage, t.config)
    alive = timeline.new_instant_time()
    timeline.create_requested(alive, Action.COMMIT)
    dead = timeline.new_instant_time()
    timeline.create_requested(dead, Action.COMMIT)
    beat = tmp_path / "t" / heartbeat_path(alive)
    beat.parent.mkdir(parents=True)
    beat.touch()
    then = time.time() - 42
    os.utime(beat, (then, then))
    (tmp_path / "t" / ".hoodie" / "lock").write_text('{"lockThreadName": "ingest-7"}')
    assert main(["info", t.path]) == 0
    out = capsys.readouterr().out
    assert f"commit {alive} (requested, last heartbeat 42 s ago)" in out
    assert f"commit {dead} (requested, no heartbeat)" in out
    assert "ingest-7" in out


def test_stats_reports_write_amplification_and_file_sizes(tmp_path, capsys):
    """Copy-on-write rewrites a whole file for a few updates: 100 records written for 20
    updated is a write amplification of 5; merge-on-read logs the 20 alone. File sizes are
    those of the newest files on disk."""
    import os
    from pathlib import Path

    from shoal.cli.stats import commit_writes, partition_files
    from shoal.timeline.timeline import Timeline

    ids = list(range(100))
    first = pa.table({"id": ids, "city": ["a"] * 50 + ["b"] * 50, "ts": [1] * 100})
    updates = pa.table({"id": ids[::5], "city": ["a"] * 10 + ["b"] * 10, "ts": [2] * 20})
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        t = shoal.Table.create(
            str(tmp_path / table_type),
            name="s",
            table_type=table_type,
            record_key="id",
            partition_by="city",
            ordering_field="ts",
        )
        t.insert(first)
        t.upsert(updates)
        writes = commit_writes(Timeline.load(t.storage, t.config))
        assert [(w.written, w.updated, w.inserted) for w in writes] == (
            [(100, 0, 100), (100, 20, 0)] if table_type == "COPY_ON_WRITE" else [(100, 0, 100), (20, 20, 0)]
        )
        files = {p.partition: p for p in partition_files(t.file_slices())}
        for city in ("a", "b"):
            on_disk = sorted(Path(t.path, city).glob("*.parquet"))
            newest = max(on_disk, key=lambda f: f.name.rsplit("_", 1)[-1])
            assert files[city].base_sizes == (os.path.getsize(newest),)
            logs = list(Path(t.path, city).glob(".*.log.*"))
            assert files[city].log_files == len(logs) == (1 if table_type == "MERGE_ON_READ" else 0)
            assert files[city].log_bytes == sum(os.path.getsize(f) for f in logs)
        assert files[None].base_sizes == tuple(sorted(files["a"].base_sizes + files["b"].base_sizes))
        assert main(["stats", t.path]) == 0
        out = capsys.readouterr().out
        assert ("5.00" in out) == (table_type == "COPY_ON_WRITE")
        assert ("1.00" in out) == (table_type == "MERGE_ON_READ")
