"""The CDC use case: late and out-of-order change events under both merge orderings, and late data
that lands in an old event-time partition yet is read incrementally by its arrival."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by

TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


def _events(rows: list[tuple[int, int, str]]) -> pa.Table:
    """(id, ts, status) change events."""
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "ts": pa.array([r[1] for r in rows], pa.int64()),
            "status": [r[2] for r in rows],
        }
    )


def _table(tmp_path, table_type: str, ordering: str) -> shoal.Table:
    return shoal.Table.create(
        str(tmp_path / "orders"),
        name="orders",
        table_type=table_type,
        record_key="id",
        ordering_field="ts",
        merge_ordering=ordering,
    )


def _state(t: shoal.Table) -> dict[int, tuple[int, str]]:
    ours = {r["id"]: (r["ts"], r["status"]) for r in t.read().to_pylist()}
    theirs = {r["id"]: (r["ts"], r["status"]) for r in hudi_rs_read(t.path).to_pylist()}
    assert theirs == ours, "hudi-rs and shoal disagree"
    return ours


# Each batch is one micro-batch of a change stream: (id, event time, status).
BATCHES = [
    [(1, 10, "created"), (2, 10, "created"), (3, 10, "created")],
    # Out of order within the batch: id 1's newer event comes first.
    [(1, 30, "shipped"), (1, 20, "paid"), (2, 15, "paid")],
    # Late: id 2's "created" again (older than stored), id 3's newer event.
    [(2, 5, "created-late"), (3, 40, "cancelled")],
    # Late event older than the stored one, arriving last.
    [(1, 25, "paid-late")],
]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_event_time_ordering_keeps_the_newest_event(tmp_path, table_type):
    t = _table(tmp_path, table_type, "EVENT_TIME_ORDERING")
    for batch in BATCHES:
        t.upsert(_events(batch))
    # Greatest event time wins; a late (older) event never overwrites a newer one.
    assert _state(t) == {1: (30, "shipped"), 2: (15, "paid"), 3: (40, "cancelled")}
    if table_type == "MERGE_ON_READ":
        t.compact()
        assert _state(t) == {1: (30, "shipped"), 2: (15, "paid"), 3: (40, "cancelled")}


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_commit_time_ordering_keeps_the_latest_arrival(tmp_path, table_type):
    t = _table(tmp_path, table_type, "COMMIT_TIME_ORDERING")
    for batch in BATCHES:
        t.upsert(_events(batch))
    # Within a batch, duplicates still collapse to the greatest ordering value (precombine);
    # across commits the later arrival wins whatever its event time.
    assert _state(t) == {1: (25, "paid-late"), 2: (5, "created-late"), 3: (40, "cancelled")}
    if table_type == "MERGE_ON_READ":
        t.compact()
        assert _state(t) == {1: (25, "paid-late"), 2: (5, "created-late"), 3: (40, "cancelled")}


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize("ordering", ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"])
def test_late_delete_events(tmp_path, table_type, ordering):
    """A ``_hoodie_is_deleted`` event older than the stored version loses under event-time
    ordering and wins under commit-time ordering."""
    t = _table(tmp_path, table_type, ordering)
    t.upsert(_events([(1, 10, "created"), (2, 10, "created")]))
    t.upsert(_events([(1, 20, "paid")]))
    late_delete = _events([(1, 15, "deleted"), (2, 12, "deleted")]).append_column(
        "_hoodie_is_deleted", pa.array([True, True])
    )
    t.upsert(late_delete)
    state = _state(t)
    if ordering == "EVENT_TIME_ORDERING":
        assert state == {1: (20, "paid")}
    else:
        assert state == {}


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_late_data_lands_in_its_event_time_partition(tmp_path, table_type):
    """Partitioned by event day (timestamp key generator): a late event goes to the old day's
    partition, and an incremental read by arrival still returns it with its commit time."""
    t = shoal.Table.create(
        str(tmp_path / "events"),
        name="events",
        table_type=table_type,
        record_key="id",
        partition_by="event_time",
        ordering_field="event_time",
        key_generator="TIMESTAMP",
        options={
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        },
    )

    def events(rows: list[tuple[int, dt.datetime, str]]) -> pa.Table:
        return pa.table(
            {
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "event_time": pa.array([int(r[1].timestamp() * 1000) for r in rows], pa.int64()),
                "kind": [r[2] for r in rows],
            }
        )

    day = dt.datetime(2026, 11, 1, 12, tzinfo=dt.timezone.utc)
    first = t.upsert(events([(1, day, "a"), (2, day + dt.timedelta(days=1), "b")]))
    t.upsert(events([(3, day + dt.timedelta(days=2), "c")]))
    late = t.upsert(events([(4, day + dt.timedelta(hours=1), "late")]))  # back on Nov 1st

    rows = {r["id"]: r for r in t.read().to_pylist()}
    assert rows[4]["_hoodie_partition_path"] == "2026/11/01" == rows[1]["_hoodie_partition_path"]
    assert rows[3]["_hoodie_partition_path"] == "2026/11/03"
    assert rows[4]["_hoodie_commit_time"] == late
    changes = t.read_incremental(start=t.timeline[1].time)
    assert [(r["id"], r["_hoodie_commit_time"]) for r in changes.to_pylist()] == [(4, late)]
    since_first = t.read_incremental(start=first)
    assert sorted(r["id"] for r in since_first.to_pylist()) == [3, 4]
    assert rows_by(hudi_rs_read(t.path), ["id", "kind"], ["id"]) == rows_by(t.read(), ["id", "kind"], ["id"])
