"""A rollback of a completed commit that crashes midway: the commit is reverted to inflight before
any of its files goes (Hudi's ``revertToInflight``), so readers see the table as it was before it,
never a commit whose files are half deleted; a retried rollback finishes that rollback (not the
commit before it), and so does the next write, which takes the commit for a failed one."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.fs.storage import Storage
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "p", "v"]


class Crash(Exception):
    """Stands for the process dying."""


def _batch(ids: list[int], v: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": ["a" if i % 2 else "b" for i in ids],
            "ts": pa.array([v] * len(ids), pa.int64()),
            "v": pa.array([v] * len(ids), pa.int64()),
        }
    )


def _rows(model: dict[int, int]) -> list[dict]:
    return [{"id": i, "p": "a" if i % 2 else "b", "v": v} for i, v in sorted(model.items())]


def _check(path: Path, model: dict[int, int]) -> None:
    assert rows_by(shoal.Table(str(path)).read(columns=COLUMNS), COLUMNS, ["id"]) == _rows(model)
    assert rows_by(hudi_rs_read(str(path)), COLUMNS, ["id"]) == _rows(model)


def _table(path: Path, table_type: str) -> tuple[shoal.Table, str, str]:
    """t1 writes ids 0-7 (v=1) into partitions a and b; t2 updates ids 0-3 (v=2) in both."""
    shoal.Table.create(
        str(path), name="t", table_type=table_type, record_key="id", partition_by="p", ordering_field="ts"
    )
    t = shoal.Table(str(path))
    t1 = t.upsert(_batch(list(range(8)), 1))
    t2 = t.upsert(_batch([0, 1, 2, 3], 2))
    return t, t1, t2


def _crash_at_the_second_file_deleted(monkeypatch) -> None:
    deleted = []
    real = Storage.delete

    def delete(self, path, missing_ok=False):
        if path.endswith(".parquet") or ".log." in path:
            deleted.append(path)
            if len(deleted) == 2:
                raise Crash(path)
        return real(self, path, missing_ok=missing_ok)

    monkeypatch.setattr(Storage, "delete", delete)


def _crash_at_the_rollbacks_completion(monkeypatch) -> None:
    real = Timeline.complete

    def complete(self, instant, content):
        if instant.action == Action.ROLLBACK:
            raise Crash(str(instant))
        return real(self, instant, content)

    monkeypatch.setattr(Timeline, "complete", complete)


CRASHES = {
    "mid_delete": _crash_at_the_second_file_deleted,
    "at_completion": _crash_at_the_rollbacks_completion,
}
BEFORE_T2 = {i: 1 for i in range(8)}


@pytest.mark.parametrize("crash", sorted(CRASHES))
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_crashed_rollback_shows_the_table_before_the_commit_and_a_retry_finishes_it(
    tmp_path, monkeypatch, table_type, crash
):
    path = tmp_path / "t"
    t, t1, t2 = _table(path, table_type)
    with monkeypatch.context() as m:
        CRASHES[crash](m)
        with pytest.raises(Crash):
            t.rollback()
    timeline = Timeline.load(t.storage, t.config)
    assert not timeline.get(t2).is_completed
    (pending,) = [i for i in timeline.pending() if i.action == Action.ROLLBACK]
    _check(path, BEFORE_T2)

    assert t.rollback() == pending.requested_time
    timeline = Timeline.load(t.storage, t.config)
    assert timeline.get(t2) is None and timeline.get(t1).is_completed
    assert not timeline.pending()
    _check(path, BEFORE_T2)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_next_write_finishes_a_crashed_rollback(tmp_path, monkeypatch, table_type):
    path = tmp_path / "t"
    t, t1, t2 = _table(path, table_type)
    with monkeypatch.context() as m:
        _crash_at_the_second_file_deleted(m)
        with pytest.raises(Crash):
            t.rollback()
    t3 = t.upsert(_batch([5, 6], 3))
    timeline = Timeline.load(t.storage, t.config)
    assert timeline.get(t2) is None
    assert not timeline.pending()
    _check(path, {**BEFORE_T2, 5: 3, 6: 3})
    # The last commit is now t3: a rollback takes it, and t1's rows stay.
    t.rollback()
    assert Timeline.load(t.storage, t.config).last_completed_data_instant().requested_time == t1
    assert t3 != t1
    _check(path, BEFORE_T2)


def test_a_rollback_of_another_instant_is_refused_while_one_is_unfinished(tmp_path, monkeypatch):
    path = tmp_path / "t"
    t, t1, _ = _table(path, "COPY_ON_WRITE")
    with monkeypatch.context() as m:
        _crash_at_the_rollbacks_completion(m)
        with pytest.raises(Crash):
            t.rollback()
    with pytest.raises(shoal.InvalidArgumentError, match="interrupted"):
        t.rollback(t1)
    assert Timeline.load(t.storage, t.config).get(t1).is_completed
