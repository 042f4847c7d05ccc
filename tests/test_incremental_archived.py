"""Incremental reads and streams whose range reaches archived instants: an error naming the
earliest instant still available by default, or Hudi's full-table-scan fallback
(``hoodie.datasource.read.incr.fallback.fulltablescan.enable``) checked against hudi-rs."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shoal
from shoal.errors import InstantNotFoundError, UnsupportedError
from shoal.read.incremental import predecessor
from tests.hudi_oracle import hudi_rs_read

OPTS = {
    "hoodie.archive.automatic": "false",
    "hoodie.clean.automatic": "false",
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.keep.min.commits": "3",
    "hoodie.keep.max.commits": "5",
    "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",
}
FALLBACK = {"hoodie.datasource.read.incr.fallback.fulltablescan.enable": "true"}
COLUMNS = ["_hoodie_commit_time", "id", "p", "v"]


def _build(tmp_path, table_type: str) -> tuple[str, list[str]]:
    """Eight commits (a new key in partition a, an update of key 0 in b, and in every other
    commit an update of key 1), the first five archived."""
    t = shoal.Table.create(
        tmp_path / "t", "incr", table_type=table_type, record_key="id", partition_by="p", options=OPTS
    )
    times = []
    for i in range(8):
        ids, parts = [i + 10, 0], ["a", "b"]
        if i % 2:
            ids.append(1)
            parts.append("b")
        times.append(t.upsert(pa.table({"id": ids, "p": parts, "v": [f"v{i}"] * len(ids)})))
    assert [i.requested_time for i in t.archive().archived] == times[:5]
    return t.path, times


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.select(COLUMNS).to_pylist())


def _expected(path: str, lo: str | None, hi: str) -> list[tuple]:
    """The latest snapshot as hudi-rs reads it, rows with commit time in (lo, hi]."""
    snap = hudi_rs_read(path)
    times = snap["_hoodie_commit_time"]
    keep = pc.less_equal(times, hi)
    if lo is not None:
        keep = pc.and_(keep, pc.greater(times, lo))
    return _rows(snap.filter(keep))


@pytest.fixture(params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def built(request, tmp_path):
    return _build(tmp_path, request.param)


def test_by_default_a_range_into_archived_instants_names_the_earliest_available(built):
    path, times = built
    t = shoal.Table(path)
    for start in (None, "0", times[2], predecessor(predecessor(times[5]))):
        with pytest.raises(
            InstantNotFoundError, match=re.escape(f"earliest instant still available is {times[5]}")
        ):
            t.read_incremental(start)
    # From just before the first active instant on, the active timeline serves the read.
    assert (
        sorted(set(t.read_incremental(predecessor(times[5]))["_hoodie_commit_time"].to_pylist())) == times[5:]
    )


@pytest.mark.parametrize("bounds", [(None, None), ("0", 2), (1, 4), (2, 6), (None, 7)])
def test_fallback_reads_the_latest_snapshot_filtered_by_commit_time(built, bounds):
    path, times = built
    lo = bounds[0] if bounds[0] in (None, "0") else times[bounds[0]]
    hi = None if bounds[1] is None else times[bounds[1]]
    t = shoal.Table(path, options=FALLBACK)

    got = t.read_incremental(lo, hi)

    assert _rows(got) == _expected(path, lo, hi or times[-1])
    assert got.num_rows > 0


def test_fallback_limits_are_hudis(built):
    path, times = built
    t = shoal.Table(path, options=FALLBACK)
    got = t.read_incremental("0", times[2])
    ids = set(got["id"].to_pylist())
    # Keys 0 and 1 were written in the range but overwritten later: their latest versions are
    # outside it, so the fallback cannot return them.
    assert ids == {10, 11, 12}
    with pytest.raises(UnsupportedError, match="deletes"):
        t.read_incremental("0", times[2], include_deletes=True)


def test_fallback_is_not_used_for_ranges_within_the_active_timeline(built):
    path, times = built
    plain = shoal.Table(path).read_incremental(times[5], times[7], include_deletes=True)
    fallback = shoal.Table(path, options=FALLBACK).read_incremental(times[5], times[7], include_deletes=True)
    assert plain.equals(fallback)
    # Key 0's version of times[6] was overwritten at times[7]: a range ending at times[6] sees
    # it only because the active timeline serves it (the latest snapshot no longer holds it).
    early = shoal.Table(path, options=FALLBACK).read_incremental(times[5], times[6])
    assert (times[6], 0, "v6") in {(r["_hoodie_commit_time"], r["id"], r["v"]) for r in early.to_pylist()}


def test_stream_from_an_archived_checkpoint(built):
    path, times = built
    checkpoint = times[1]
    with pytest.raises(InstantNotFoundError, match=re.escape(times[5])):
        next(iter(shoal.Table(path).stream(checkpoint, max_polls=1, poll_interval=0)))

    changes = list(shoal.Table(path, options=FALLBACK).stream(checkpoint, max_polls=1, poll_interval=0))

    assert [c.instant for c in changes] == times[5:]
    # The first change covers everything from the checkpoint to its own instant, from the
    # latest snapshot; the others are read from the active timeline.
    assert _rows(changes[0].table) == _expected(path, checkpoint, times[5])
    for change in changes[1:]:
        assert set(change.table["_hoodie_commit_time"].to_pylist()) == {change.instant}
    assert changes[-1].checkpoint == times[7]
