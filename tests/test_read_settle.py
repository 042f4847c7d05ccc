"""Reads that a clean running at the same time cannot silently empty (shoal.read.settle).

Each test lets another writer commit and clean with ``hoodie.cleaner.commits.retained=1`` at the
worst moment of a read: after the reader loaded its timeline, before it listed or opened the
files. The cleaner then removes slices that timeline points to. The read must return what a read
started after the clean returns (the latest rows, or CleanedInstantError for a range whose slices
are gone), never the rows of another slice or none at all."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

import shoal
import shoal.table
from shoal.errors import CleanedInstantError

TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
# The cleaner keeps only what the latest commit needs; no clean runs but the test's own.
OPTIONS = {"hoodie.clean.automatic": "false", "hoodie.cleaner.commits.retained": "1"}


def _rows(version: int) -> pa.Table:
    return pa.table({"id": [1, 2], "ts": [version, version], "v": [version * 10, version * 10 + 1]})


def _table(tmp_path, table_type: str, versions: int) -> tuple[shoal.Table, list[str]]:
    t = shoal.Table.create(
        str(tmp_path / "t"), "t", table_type=table_type, record_key="id", ordering_field="ts", options=OPTIONS
    )
    instants = [t.upsert(_rows(v)) for v in range(1, versions + 1)]
    if table_type == "MERGE_ON_READ":
        # Each later version in its own base file, so the cleaner has whole slices to remove.
        t.compact()
    return t, instants


def _overwrite_and_clean(path: str, table_type: str) -> Callable[[], None]:
    """Two more versions of every record, each compacted on merge-on-read, then a clean that
    removes every older slice."""

    def run() -> None:
        other = shoal.Table(path, options=OPTIONS)
        for v in (8, 9):
            other.upsert(_rows(v))
            if table_type == "MERGE_ON_READ":
                other.compact()
        assert other.clean(), "the clean removed nothing: the test would prove nothing"

    return run


def _after_first_timeline_load(monkeypatch, action: Callable[[], None]) -> None:
    real = shoal.Table._timeline
    fired = []

    def racing(self: shoal.Table):
        timeline = real(self)
        if not fired:
            fired.append(True)
            action()
        return timeline

    monkeypatch.setattr(shoal.Table, "_timeline", racing)


def _before_first_slice_read(monkeypatch, action: Callable[[], None]) -> None:
    real = shoal.table._read_slice
    fired = []

    def racing(spec, storage):
        if not fired:
            fired.append(True)
            action()
        return real(spec, storage)

    monkeypatch.setattr(shoal.table, "_read_slice", racing)


def _values(table: pa.Table) -> list[int]:
    return sorted(table.column("v").to_pylist())


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_snapshot_read_planned_before_a_clean_returns_the_latest_rows(tmp_path, monkeypatch, table_type):
    t, _ = _table(tmp_path, table_type, 2)
    _after_first_timeline_load(monkeypatch, _overwrite_and_clean(t.path, table_type))
    assert _values(t.read()) == [90, 91]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_file_removed_while_the_read_opens_it_is_read_again_from_the_new_slices(
    tmp_path, monkeypatch, table_type
):
    t, _ = _table(tmp_path, table_type, 2)
    _before_first_slice_read(monkeypatch, _overwrite_and_clean(t.path, table_type))
    assert _values(t.read()) == [90, 91]


def test_a_time_travel_read_whose_slices_a_concurrent_clean_removed_raises(tmp_path, monkeypatch):
    t, instants = _table(tmp_path, "COPY_ON_WRITE", 2)
    _after_first_timeline_load(monkeypatch, _overwrite_and_clean(t.path, "COPY_ON_WRITE"))
    with pytest.raises(CleanedInstantError):
        t.read(as_of=instants[1])


def test_an_incremental_read_whose_slices_a_concurrent_clean_removed_raises(tmp_path, monkeypatch):
    t, instants = _table(tmp_path, "COPY_ON_WRITE", 2)
    _after_first_timeline_load(monkeypatch, _overwrite_and_clean(t.path, "COPY_ON_WRITE"))
    with pytest.raises(CleanedInstantError):
        t.read_incremental(instants[0], instants[1])


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_stream_whose_next_instant_was_cleaned_while_the_consumer_worked_raises(tmp_path, table_type):
    """The stream polled once and read the first change; while the consumer processed it, two
    writes and a clean removed the slice of the second. Handing that change out empty would
    lose its rows for the consumer without a word."""
    t, instants = _table(tmp_path, table_type, 2)
    stream = t.stream(max_polls=1)
    first = next(stream)
    assert first.instant == instants[0] and _values(first.table) == [10, 11]
    _overwrite_and_clean(t.path, table_type)()
    with pytest.raises(CleanedInstantError):
        next(stream)


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_read_batches_planned_before_a_clean_streams_the_latest_rows(tmp_path, monkeypatch, table_type):
    t, _ = _table(tmp_path, table_type, 2)
    _after_first_timeline_load(monkeypatch, _overwrite_and_clean(t.path, table_type))
    assert _values(t.read_batches().read_all()) == [90, 91]


def test_a_spark_read_planned_before_a_clean_returns_the_latest_rows(tmp_path, monkeypatch, spark):
    import shoal.spark

    t, _ = _table(tmp_path, "COPY_ON_WRITE", 2)
    _after_first_timeline_load(monkeypatch, _overwrite_and_clean(t.path, "COPY_ON_WRITE"))
    got = shoal.spark.read(spark, t.path, columns=["v"]).toArrow()
    assert _values(got) == [90, 91]
