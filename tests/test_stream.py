"""Streaming incremental reads (``Table.stream``): one change per completed instant, in commit
order, resumable from its checkpoint with nothing lost and nothing repeated, also while a writer
keeps committing."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import InstantNotFoundError
from shoal.read.incremental import predecessor
from shoal.read.stream import Change, ChangeStream
from tests.test_incremental import Model, _arrow, _build, _changed_keys, _rows, hudi_rs_incremental


def _as_model(change: Change) -> tuple[dict, dict]:
    changed, deleted = {}, {}
    for r in change.table.to_pylist():
        k = (r["p"], r["id"])
        assert k not in changed and k not in deleted
        (deleted if r["_hoodie_is_deleted"] else changed)[k] = (r["_hoodie_commit_time"], r["v"], r["ts"])
    return changed, deleted


@pytest.fixture(scope="module", params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def built(request, tmp_path_factory):
    return _build(tmp_path_factory.mktemp("stream") / "t", request.param)


def test_one_change_per_instant_in_commit_order(built):
    table, model = built
    changes = list(table.stream(max_polls=1, include_deletes=True))
    assert [c.instant for c in changes] == model.instants
    assert [c.checkpoint for c in changes] == model.instants  # v6: the requested time
    assert {c.action for c in changes} == {"deltacommit" if table.table_type == "MERGE_ON_READ" else "commit"}
    for prev, change in zip([None, *model.instants], changes, strict=False):
        assert _as_model(change) == model.changes(prev, change.instant)
        assert sum(b.num_rows for b in change.batches) == change.num_rows


def test_resuming_from_a_checkpoint_skips_and_repeats_nothing(built):
    table, model = built
    stored = None
    seen: list[str] = []
    for stop_after in (3, 1, 2, 100):
        stream = table.stream(start=stored, max_polls=1, include_deletes=True)
        for i, change in enumerate(stream):
            seen.append(change.instant)
            stored = change.checkpoint  # commit the checkpoint after processing
            assert stream.checkpoint == stored
            if i + 1 == stop_after:
                break  # the consumer dies between changes
    assert seen == model.instants
    assert list(table.stream(start=stored, max_polls=1)) == []


def test_consumer_killed_between_changes_while_a_writer_commits(tmp_path):
    path = tmp_path / "t"
    shoal.Table.create(path, "live", table_type="MERGE_ON_READ", record_key="id", partition_by="p")
    model = Model()
    n_commits = 14
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        table = shoal.Table(path)
        rnd = random.Random(7)
        try:
            for c in range(n_commits):
                if c % 5 == 4:
                    ids = rnd.sample(sorted(k[1] for k in model.rows), 3)
                    keys = [("abc"[i % 3], i) for i in ids]
                    model.delete(table.delete(pa.table({"id": ids, "p": [k[0] for k in keys]})), keys)
                else:
                    ids = rnd.sample(range(60), 8)
                    records = _rows(ids, f"c{c}")
                    model.upsert(table.upsert(_arrow(records)), records)
                time.sleep(0.01)  # let the consumer catch up now and then
        except BaseException as e:  # surfaced by the main thread
            errors.append(e)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    rnd = random.Random(11)
    consumed: list[Change] = []
    stored = None
    restarts = 0
    while_writing = 0
    while True:
        finished = done.is_set()
        stream = shoal.Table(path).stream(
            start=stored, poll_interval=0.005, timeout=0.2, include_deletes=True
        )
        budget = rnd.randint(1, 3)
        for change in stream:
            consumed.append(change)
            stored = change.checkpoint
            while_writing += not done.is_set()
            budget -= 1
            if budget == 0:
                break
        restarts += 1
        if finished and stored == (model.instants[-1] if model.instants else None):
            break
        assert restarts < 10_000
    thread.join()
    assert not errors
    assert len(model.instants) == n_commits
    assert [c.instant for c in consumed] == model.instants
    for prev, change in zip([None, *model.instants], consumed, strict=False):
        assert _as_model(change) == model.changes(prev, change.instant)
    assert restarts > 3
    assert while_writing > 0


def test_polling_is_bounded_and_picks_up_new_commits(tmp_path):
    table = shoal.Table.create(tmp_path / "t", "poll", record_key="id", partition_by="p")
    t1 = table.upsert(_arrow(_rows(range(3), "c1")))
    sleeps: list[float] = []
    written: list[str] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:  # a commit lands while the stream waits
            written.append(table.upsert(_arrow(_rows(range(3, 5), "c2"))))

    stream = ChangeStream(table, start=t1, poll_interval=0.25, max_polls=4, sleep=sleep)
    changes = list(stream)
    assert [c.instant for c in changes] == written
    assert sorted(changes[0].table["id"].to_pylist()) == [3, 4]
    # Polls 1 and 2 found nothing (slept), poll 3 found the commit (no sleep), poll 4 nothing.
    assert sleeps == [0.25, 0.25]

    now = [0.0]

    def clock() -> float:
        return now[0]

    def advance(seconds: float) -> None:
        now[0] += seconds

    assert (
        list(
            ChangeStream(table, start=written[0], poll_interval=1.0, timeout=2.5, sleep=advance, clock=clock)
        )
        == []
    )
    assert now[0] == 2.5  # the last wait was cut to the deadline


def test_v6_stream_waits_for_an_older_write_still_pending(tmp_path):
    """Version 6 orders by requested time: an older instant that completes late must not be
    skipped, so the stream holds back what completed after it until it is done."""
    table = shoal.Table.create(tmp_path / "t", "hold", record_key="id", partition_by="p")
    t1 = table.upsert(_arrow(_rows(range(3), "c1")))
    t2 = table.upsert(_arrow(_rows(range(3, 6), "c2")))
    t3 = table.upsert(_arrow(_rows(range(6, 9), "c3")))
    late = predecessor(t2)
    assert t1 < late < t2
    hoodie = Path(table.path) / ".hoodie"
    (hoodie / f"{late}.commit.requested").write_bytes(b"")
    assert [c.instant for c in table.stream(max_polls=1)] == [t1]
    assert list(table.stream(start=t1, max_polls=1)) == []
    # The late writer commits (an empty commit is enough for the timeline).
    (hoodie / f"{late}.commit").write_bytes(
        b'{"partitionToWriteStats": {}, "compacted": false, "extraMetadata": {}, "operationType": "UPSERT"}'
    )
    assert [c.instant for c in table.stream(start=t1, max_polls=1)] == [late, t2, t3]


def test_v8_fixture_stream_by_completion_time_matches_hudi_rs(fixture_table):
    path = str(fixture_table("mor_avro_v8_trips_8i3u1d"))
    table = shoal.Table(path)
    data = [t for t in table.timeline if t.action in ("deltacommit", "commit", "compaction")]
    changes = list(table.stream(max_polls=1))
    assert [c.instant for c in changes] == [t.time for t in data]
    assert [c.checkpoint for c in changes] == [t.completion_time for t in data]
    for prev, change in zip([None, *(c.checkpoint for c in changes)], changes, strict=False):
        assert _changed_keys(change.table) == _changed_keys(
            hudi_rs_incremental(path, prev, change.checkpoint)
        )
    assert sum(c.num_rows for c in changes) == 8 + 3  # the SQL: 8 inserts, then 3 updates


def test_stream_from_before_archived_instants_fails(tmp_path):
    table = shoal.Table.create(tmp_path / "t", "arch", record_key="id", partition_by="p")
    t1 = table.upsert(_arrow(_rows(range(3), "c1")))
    table.upsert(_arrow(_rows(range(3), "c2")))
    hoodie = Path(table.path) / ".hoodie"
    for f in hoodie.iterdir():
        if f.name.startswith(t1):
            f.unlink()
    (hoodie / "archived" / ".commits_.archive.1_1-0-1").write_bytes(b"#HUDI#")
    with pytest.raises(InstantNotFoundError, match="archived"):
        next(shoal.Table(table.path).stream(max_polls=1))
