"""Listing many partitions on a remote file system: concurrently, with the same result as one
after another (``Storage.list_files_of``). A local table stands in for the remote one, with a
delay per listing and a count of the listings under way."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa
import pytest

import shoal
from shoal.fs import storage as storage_module
from shoal.fs.storage import Storage
from shoal.fs.view import FileSystemView
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by


class _SlowListings:
    """Wraps ``Storage._list`` with a delay, counting the listings under way at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, delay: float = 0.01) -> None:
        self.delay = delay
        self.running = 0
        self.most = 0
        self.lock = threading.Lock()
        original = Storage._list

        def slow(storage: Storage, rel: str, recursive: bool) -> Any:
            with self.lock:
                self.running += 1
                self.most = max(self.most, self.running)
            try:
                time.sleep(self.delay)
                return list(original(storage, rel, recursive))
            finally:
                with self.lock:
                    self.running -= 1

        monkeypatch.setattr(Storage, "_list", slow)


def _remote(path: str) -> Storage:
    storage = Storage(path)
    storage.is_local = False  # as an object store's would be
    return storage


def _partitioned_table(tmp_path: Any) -> shoal.Table:
    t = shoal.Table.create(
        tmp_path / "t",
        "t",
        table_type="MERGE_ON_READ",
        record_key="id",
        partition_by="p",
        ordering_field="ts",
    )
    rows = pa.table(
        {
            "id": [f"k{i:03d}" for i in range(120)],
            "ts": [1] * 120,
            "p": [f"day={i % 40:02d}" for i in range(120)],
        }
    )
    t.write(rows, operation="upsert")
    t.write(rows.slice(0, 60).set_column(1, "ts", pa.array([2] * 60, pa.int64())), operation="upsert")
    return t


def test_partitions_are_listed_concurrently_in_order(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _partitioned_table(tmp_path)
    partitions = [f"day={i:02d}" for i in range(39, -1, -1)] + ["day=missing"]
    expected = [f for p in partitions for f in t.storage.list_files(p)]
    slow = _SlowListings(monkeypatch)
    listed = _remote(t.path).list_files_of(partitions)
    assert listed == expected
    assert [f.path.split("/")[0] for f in listed] == [p for p in partitions for _ in t.storage.list_files(p)]
    assert slow.most > 1
    assert slow.most <= storage_module.LISTING_PARALLELISM


def test_a_local_file_system_lists_one_after_another(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _partitioned_table(tmp_path)
    slow = _SlowListings(monkeypatch, delay=0.001)
    assert len(Storage(t.path).list_files_of([f"day={i:02d}" for i in range(40)])) > 40
    assert slow.most == 1


def test_a_view_of_listed_partitions_on_a_remote_file_system(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _partitioned_table(tmp_path)
    partitions = [f"day={i:02d}" for i in range(0, 40, 3)]
    timeline = Timeline.load(t.storage, t.config)
    local = FileSystemView(t.storage, timeline, partitions=partitions).latest_file_slices()
    slow = _SlowListings(monkeypatch)
    remote = FileSystemView(_remote(t.path), timeline, partitions=partitions).latest_file_slices()
    assert slow.most > 1
    assert [(s.partition_path, s.file_id, s.base_file, s.log_files) for s in remote] == [
        (s.partition_path, s.file_id, s.base_file, s.log_files) for s in local
    ]
    assert {s.partition_path for s in remote} == set(partitions)
    monkeypatch.undo()
    # The table the listings were of: the second write's ordering values on its 60 keys.
    expected = [{"id": f"k{i:03d}", "ts": 2 if i < 60 else 1} for i in range(120)]
    assert rows_by(hudi_rs_read(t.path), ["id", "ts"], ["id"]) == expected


def test_a_failed_listing_raises(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _partitioned_table(tmp_path)
    original = Storage._list

    def failing(storage: Storage, rel: str, recursive: bool) -> Any:
        if rel == "day=07":
            raise PermissionError(f"denied: {rel}")
        return original(storage, rel, recursive)

    monkeypatch.setattr(Storage, "_list", failing)
    with pytest.raises(PermissionError, match="day=07"):
        _remote(t.path).list_files_of([f"day={i:02d}" for i in range(40)])


def test_the_listing_parallelism_option_bounds_the_listings_at_once(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _partitioned_table(tmp_path)
    partitions = [f"day={i:02d}" for i in range(40)]
    opened = shoal.Table(t.path, options={"hoodie.file.listing.parallelism": "3"})
    assert opened.storage.listing_parallelism == 3
    opened.storage.is_local = False
    slow = _SlowListings(monkeypatch)
    assert opened.storage.list_files_of(partitions) == [
        f for p in partitions for f in t.storage.list_files(p)
    ]
    assert slow.most == 3
    opened.storage.listing_parallelism = 1
    slow.most = 0
    opened.storage.list_files_of(partitions)
    assert slow.most == 1
    with pytest.raises(shoal.InvalidOptionError, match=r"hoodie\.file\.listing\.parallelism"):
        shoal.Table(t.path, options={"hoodie.file.listing.parallelism": "0"})
