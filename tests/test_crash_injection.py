"""Crash injection: a writer in a subprocess killed (``os._exit``) at each step of an upsert, a
delete, an insert_overwrite and a compaction. Afterwards shoal and hudi-rs both read exactly the
last committed state; the next write rolls the failure back (or the next compaction run redoes
it), and the table equals the model again, with no file of the failed attempt left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
from tests.hudi_oracle import hudi_rs_read, rows_by

WORKER = Path(__file__).with_name("crash_worker.py")
CRASH_CODE = 17
COLUMNS = ["id", "city", "ts", "fare"]
CITIES = ["sf", "nyc"]
WRITE_POINTS = [
    "after_requested",
    "after_inflight",
    "after_first_file",
    "mid_file",
    "before_complete",
    "during_complete",
    "after_complete",
]
# Small files so that a write touches several file groups (several tasks).
OPTIONS = {
    "hoodie.parquet.max.file.size": "8000",
    "hoodie.parquet.small.file.limit": "2000",
    "hoodie.index.bloom.num_entries": "100",
    "hoodie.bloom.index.filter.dynamic.max.entries": "200",
}


def _batch(ids, ts: int) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": [CITIES[i % 2] for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "fare": [round(i * 1.5 + ts, 2) for i in ids],
        }
    )


class Model:
    def __init__(self) -> None:
        self.rows: dict[int, dict] = {}

    def upsert(self, batch: pa.Table) -> None:
        for row in batch.to_pylist():
            self.rows[row["id"]] = row

    def delete(self, ids) -> None:
        for i in ids:
            self.rows.pop(i, None)

    def expected(self) -> list[dict]:
        return [self.rows[k] for k in sorted(self.rows)]


def _check(table: shoal.Table, model: Model, when: str) -> None:
    assert rows_by(table.read(), COLUMNS, ["id"]) == model.expected(), f"shoal, {when}"
    assert rows_by(hudi_rs_read(table.path), COLUMNS, ["id"]) == model.expected(), f"hudi-rs, {when}"


def _crash(path: str, operation: str, point: str, batch: pa.Table | None, tmp: Path) -> int:
    args = [sys.executable, str(WORKER), path, operation, point]
    if batch is not None:
        data = tmp / f"{operation}-{point}.parquet"
        pq.write_table(batch, data)
        args.append(str(data))
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1])
    assert done.returncode in (0, CRASH_CODE), done.stderr
    return done.returncode


def _data_files(path: str) -> set[str]:
    out = set()
    for p in Path(path).rglob("*"):
        if ".hoodie" in p.parts or not p.is_file():
            continue
        if parse_base_file_name(p.name) is not None or parse_log_file_name(p.name) is not None:
            out.add(str(p.relative_to(path)))
    return out


def _committed_files(table: shoal.Table) -> set[str]:
    """Every data file some completed instant on the timeline wrote (base files and logs)."""
    timeline = table._timeline()
    files = set()
    for inst in timeline.completed_data_instants():
        for stat in timeline.commit_metadata(inst).write_stats():
            if stat.path:
                files.add(stat.path)
    return files


def _table(tmp_path: Path, table_type: str) -> tuple[shoal.Table, Model]:
    table = shoal.Table.create(
        str(tmp_path / "t"),
        name="crash",
        table_type=table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options=OPTIONS,
    )
    model = Model()
    first = _batch(range(120), ts=1)
    table.bulk_insert(first)
    model.upsert(first)
    return table, model


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("point", WRITE_POINTS)
def test_killed_upsert(tmp_path, table_type, point):
    table, model = _table(tmp_path, table_type)
    update = _batch(list(range(0, 120, 3)) + list(range(120, 150)), ts=2)
    code = _crash(table.path, "upsert", point, update, tmp_path)
    assert code == CRASH_CODE
    if point == "after_complete":
        model.upsert(update)  # the completed file is the commit point
    _check(table, model, f"after a crash {point}")
    _next_write_recovers(table, model)


def _next_write_recovers(table: shoal.Table, model: Model) -> None:
    """The next write rolls the failed attempt back, then commits; nothing of it is left."""
    follow = _batch(range(1, 150, 4), ts=3)
    table.upsert(follow)
    model.upsert(follow)
    _check(table, model, "after the next write")
    assert _data_files(table.path) <= _committed_files(table), "files of the failed write remain"
    assert not any(i.state.name != "COMPLETED" for i in table.instants()), "a pending instant remains"
    assert not list(Path(table.path, ".hoodie").glob("*.tmp")), "a temp file of the failed commit remains"


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("point", WRITE_POINTS)
def test_killed_insert_overwrite(tmp_path, table_type, point):
    """A replace commit killed at each step: until its completed file is published, readers see
    every replaced file group; the next write rolls it back."""
    table, model = _table(tmp_path, table_type)
    overwrite = _batch(range(200, 260, 2), ts=2)  # all in partition sf
    code = _crash(table.path, "insert_overwrite", point, overwrite, tmp_path)
    assert code == CRASH_CODE
    if point == "after_complete":
        model.rows = {k: r for k, r in model.rows.items() if r["city"] != "sf"}
        model.upsert(overwrite)
    _check(table, model, f"after a crash {point}")
    _next_write_recovers(table, model)


@pytest.mark.parametrize("point", ["after_first_file", "mid_file", "before_complete"])
def test_killed_delete_on_merge_on_read(tmp_path, point):
    table, model = _table(tmp_path, "MERGE_ON_READ")
    victims = list(range(0, 120, 7))
    keys = _batch(victims, ts=0).select(["id", "city"])
    assert _crash(table.path, "delete", point, keys, tmp_path) == CRASH_CODE
    _check(table, model, f"after a crash {point}")
    table.delete(keys)
    model.delete(victims)
    _check(table, model, "after the delete is retried")
    assert _data_files(table.path) <= _committed_files(table)


@pytest.mark.parametrize(
    "point", ["after_inflight", "after_first_file", "mid_file", "before_complete", "during_complete"]
)
def test_killed_compaction(tmp_path, point):
    table, model = _table(tmp_path, "MERGE_ON_READ")
    for ts, ids in ((2, range(0, 120, 2)), (3, range(0, 120, 5))):
        batch = _batch(ids, ts=ts)
        table.upsert(batch)
        model.upsert(batch)
    instant = table.schedule_compaction()
    assert instant is not None
    assert _crash(table.path, "compaction", point, None, tmp_path) == CRASH_CODE
    _check(table, model, f"after a compaction crash {point}")

    # Writers go on while the compaction is pending, then the compaction is run again.
    more = _batch(range(3, 120, 9), ts=4)
    table.upsert(more)
    model.upsert(more)
    assert rows_by(table.read(), COLUMNS, ["id"]) == model.expected()
    commit = table.run_compaction(instant)
    assert commit.write_stats(), "the re-run compaction wrote its base files"
    assert table.pending_compactions() == []
    _check(table, model, "after the compaction is run again")
    assert _data_files(table.path) <= _committed_files(table), "files of the killed attempt remain"
    assert not list(Path(table.path, ".hoodie").glob("*.tmp")), "a temp file of the killed attempt remains"


@pytest.mark.parametrize("point", ["before_complete", "mid_file"])
def test_failed_log_appends_are_neutralised_with_rollback_blocks(tmp_path, point):
    """Hudi's way: the failed instant's whole blocks stay and a ROLLBACK command block targeting
    it follows them; a torn block is cut off first, so no reader meets a damaged tail."""
    from shoal import _native

    table, model = _table(tmp_path, "MERGE_ON_READ")
    table.upsert(_batch(range(0, 120, 2), ts=2))  # every file group gets a log file
    model.upsert(_batch(range(0, 120, 2), ts=2))
    sizes = {lf.path: lf.size for s in table.file_slices() for lf in s.log_files}
    assert _crash(table.path, "upsert", point, _batch(range(0, 120, 3), ts=3), tmp_path) == CRASH_CODE
    (failed,) = [i.requested_time for i in table.instants() if i.state.name != "COMPLETED"]
    follow = _batch([1, 2], ts=4)
    table.upsert(follow)
    model.upsert(follow)
    _check(table, model, "after the rollback")
    commands = []
    for path, before in sizes.items():
        blocks = _native.read_log_file(f"{table.path}/{path}")
        assert not any(b.is_corrupt for b in blocks), f"a damaged block remains in {path}"
        tail = [b for b in blocks if b.offset >= before]
        failed_blocks = [b for b in tail if b.instant_time == failed and b.block_type != "COMMAND_BLOCK"]
        rollbacks = [b for b in tail if b.block_type == "COMMAND_BLOCK"]
        if failed_blocks:
            assert rollbacks and rollbacks[0].header["TARGET_INSTANT_TIME"] == failed
            assert rollbacks[0].offset > failed_blocks[-1].offset
        commands += rollbacks
        if point == "mid_file":  # the only append was torn: cut back, nothing left to neutralise
            assert not failed_blocks and not rollbacks
    if point == "before_complete":
        assert commands, "the failed write appended whole blocks: command blocks must follow them"


def test_rolling_back_the_last_delta_commit_keeps_earlier_appends(tmp_path):
    """Table.rollback of a completed delta commit that appended to a log file earlier commits
    wrote to: only its own blocks are neutralised (its markers are replayed from its write stats),
    the earlier commits' updates stay."""
    from shoal import _native

    table, model = _table(tmp_path, "MERGE_ON_READ")
    first = _batch(range(0, 120, 2), ts=2)
    table.upsert(first)
    model.upsert(first)
    logs_before = {lf.path for s in table.file_slices() for lf in s.log_files}
    last = table.upsert(_batch(range(0, 120, 4), ts=3))
    assert {lf.path for s in table.file_slices() for lf in s.log_files} == logs_before  # appended
    table.rollback(last)
    _check(table, model, "after rolling back the last delta commit")
    for path in logs_before:
        blocks = _native.read_log_file(f"{table.path}/{path}")
        assert blocks[-1].block_type == "COMMAND_BLOCK" and blocks[-1].header["TARGET_INSTANT_TIME"] == last
    follow = _batch([1, 3], ts=4)
    table.upsert(follow)
    model.upsert(follow)
    _check(table, model, "after the next write")
