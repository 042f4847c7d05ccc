"""How often a write lists the timeline (``.hoodie``): on object stores each listing is a
request per thousand files, paid on every commit.

A single writer lists it three times: to plan, to check before writing that no clean, archival
or rollback removed files the plan needs, and to commit. The post-commit table services plan on
the timeline the commit left (a clean that deletes files lists it again to run). Under optimistic
concurrency they list it again under the lock, since other processes may have changed it.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import shoal
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import record_listings
from tests.test_concurrency import OCC


def _batch(lo: int, hi: int, ts: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table(
        {
            "id": [f"k{i:04d}" for i in ids],
            "ts": [ts] * len(ids),
            "p": [f"p{i % 3}" for i in ids],
            "v": [float(i * ts) for i in ids],
        }
    )


def _table(tmp_path: Any, table_type: str, options: dict[str, str] | None = None) -> shoal.Table:
    t = shoal.Table.create(
        tmp_path / "t",
        "t",
        table_type=table_type,
        record_key="id",
        partition_by="p",
        ordering_field="ts",
        options=options,
    )
    for n in range(3):
        t.write(_batch(50 * n, 50 * n + 80, n + 1), operation="upsert")
    return t


def _timeline_listings(listed: list[tuple[str, bool]]) -> int:
    return sum(1 for rel, _ in listed if rel == ".hoodie")


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_single_writer_lists_the_timeline_three_times_per_write(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, table_type: str
) -> None:
    t = _table(tmp_path, table_type)
    listed = record_listings(monkeypatch)
    t.write(_batch(20, 120, 9), operation="upsert")
    assert _timeline_listings(listed) == 3
    monkeypatch.undo()
    # Batch n wrote keys 50n to 50n + 79 with ts n + 1; the last write, 20 to 119 with ts 9.
    expected = [
        {"id": f"k{i:04d}", "ts": 9 if 20 <= i < 120 else 1 + (i >= 50) + (i >= 100)} for i in range(180)
    ]
    for rows in (t.read(), hudi_rs_read(t.path)):
        assert rows_by(rows, ["id", "ts"], ["id"]) == expected


def test_optimistic_writers_list_again_under_the_lock(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(tmp_path, "COPY_ON_WRITE", OCC)
    listed = record_listings(monkeypatch)
    t.write(_batch(20, 120, 9), operation="upsert")
    # Planning and the freshness check; the instant's start and the commit, under the lock; then
    # the clean's look for pending cleans, and its plan under the lock.
    assert _timeline_listings(listed) == 6


def test_archival_and_clean_after_the_commit_still_run_when_due(tmp_path: Any) -> None:
    t = _table(
        tmp_path,
        "COPY_ON_WRITE",
        {
            "hoodie.keep.min.commits": "3",
            "hoodie.keep.max.commits": "4",
            "hoodie.cleaner.commits.retained": "1",
        },
    )
    for n in range(3, 8):
        t.write(_batch(0, 40, n + 1), operation="upsert")
    timeline = Timeline.load(t.storage, t.config)
    # One slice kept beside the latest in every file group (hoodie.cleaner.commits.retained 1).
    groups: dict[str, int] = {}
    for f in t.storage.list_files("", recursive=True):
        if f.name.endswith(".parquet"):
            groups[f.name.split("_")[0]] = groups.get(f.name.split("_")[0], 0) + 1
    assert groups and max(groups.values()) == 2
    archived = timeline.archived()
    assert archived is not None and archived.instants, "archival never ran after a commit"
    assert len(timeline.completed_data_instants()) <= 4
    for rows in (t.read(), hudi_rs_read(t.path)):
        assert rows_by(rows, ["id", "ts"], ["id"])[:40] == [{"id": f"k{i:04d}", "ts": 8} for i in range(40)]
