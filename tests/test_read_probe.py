"""Reads as a demanding user would make them (embedded engine): incremental consumers next to a
write that completes late, time travel while a write is pending, malformed instant times,
repeated columns, filters on nulls, and a consumer at the head of a cleaned and archived table.
Expected values come from the data written (a model), never from the read under test."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import CommitConflictError, InvalidArgumentError
from shoal.read.incremental import predecessor
from tests.hudi_oracle import hudi_rs_read

# ---- a write whose requested time is older than a completed one (a "hollow" commit) ----------


def _rows(ids: list[int], partition: str, version: int) -> pa.Table:
    return pa.table({"id": ids, "p": [partition] * len(ids), "v": [version] * len(ids)})


def _hollow(tmp_path: Path) -> tuple[shoal.Table, list[str], Path]:
    """t1 (partition a), then ``late`` (partition x) and t3 (partition b). ``late`` is turned back
    into a pending write, as if its writer were still running when t3 committed: its completed
    file is moved aside, to be put back when it "completes"."""
    table = shoal.Table.create(tmp_path / "t", "hollow", record_key="id", partition_by="p")
    t1 = table.upsert(_rows([1, 2], "a", 1))
    late = table.upsert(_rows([10, 11], "x", 2))
    t3 = table.upsert(_rows([20], "b", 3))
    done = Path(table.path) / ".hoodie" / f"{late}.commit"
    aside = tmp_path / f"{late}.commit"
    done.rename(aside)
    assert late in {i.requested_time for i in table.instants() if not i.is_completed}
    return table, [t1, late, t3], aside


def _complete(table: shoal.Table, aside: Path, late: str) -> None:
    aside.rename(Path(table.path) / ".hoodie" / f"{late}.commit")


def test_incremental_range_over_a_pending_older_write_fails_instead_of_skipping_it(tmp_path):
    """Table version 6 orders by requested time: a range that holds a write still pending would
    later gain its records, so a consumer checkpointing at its end would never see them. Hudi's
    default (``hoodie.read.timeline.holes.resolution.policy=FAIL``) refuses such a range."""
    table, (t1, late, t3), aside = _hollow(tmp_path)
    for start, end in ((t1, None), (t1, t3), (None, None), ("0", t3)):
        with pytest.raises(CommitConflictError, match=late):
            table.read_incremental(start, end)
    # Ranges that end before the pending write, or start after it, are stable: they read.
    assert table.read_incremental(None, predecessor(late))["id"].to_pylist() == [1, 2]
    assert table.read_incremental(late)["id"].to_pylist() == [20]
    # The stream holds back instead: it hands out t1 and waits for the late write.
    assert [c.instant for c in table.stream(max_polls=1)] == [t1]
    _complete(table, aside, late)
    assert sorted(table.read_incremental(t1)["id"].to_pylist()) == [10, 11, 20]


def test_a_consumer_checkpointing_at_the_latest_instant_never_misses_a_late_write(tmp_path):
    table, (t1, late, _), aside = _hollow(tmp_path)
    seen: list[int] = table.read_incremental(None, t1)["id"].to_pylist()
    checkpoint = t1
    for _ in range(2):
        end = table.latest_instant()
        try:
            seen += table.read_incremental(checkpoint, end)["id"].to_pylist()
            checkpoint = end
        except CommitConflictError:
            _complete(table, aside, late)  # the writer finishes; the consumer retries later
    assert sorted(seen) == [1, 2, 10, 11, 20]


def test_time_travel_to_or_past_a_pending_write_fails(tmp_path):
    """A read as of an instant at or after a pending write would change once it completes;
    Hudi's ``validateTimestampAsOf`` refuses it, and so does shoal."""
    table, (_, late, t3), aside = _hollow(tmp_path)
    for as_of in (late, t3, "99991231235959999"):
        with pytest.raises(CommitConflictError, match=late):
            table.read(as_of=as_of)
        with pytest.raises(CommitConflictError, match=late):
            table.read_batches(as_of=as_of)
    assert sorted(table.read(as_of=predecessor(late))["id"].to_pylist()) == [1, 2]
    assert sorted(table.read()["id"].to_pylist()) == [1, 2, 20]  # the latest snapshot is fine
    _complete(table, aside, late)
    assert sorted(table.read(as_of=t3)["id"].to_pylist()) == [1, 2, 10, 11, 20]


# ---- instant times -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> shoal.Table:
    table = shoal.Table.create(
        tmp_path_factory.mktemp("small") / "t", "small", record_key="id", partition_by="p"
    )
    table.upsert(
        pa.table(
            {
                "id": [1, 2, 3, 4],
                "p": ["a", "b", "b", "a"],
                "s": ["x", None, "z", None],
                "n": pa.array([1, None, 3, 4], pa.int32()),
            }
        )
    )
    return table


@pytest.mark.parametrize(
    "bad",
    [
        "20251301000000000",  # month 13
        "2025-02-30",  # no such day
        "20250101250000000",  # hour 25
        "2025-01-01 12:61:00",
        1.5,  # not an instant time at all
        b"20250101120000000",
    ],
)
def test_malformed_instant_times_are_refused(small, bad):
    with pytest.raises(InvalidArgumentError, match="instant time"):
        small.read(as_of=bad)
    with pytest.raises(InvalidArgumentError, match="instant time"):
        small.read_incremental(start=bad)
    with pytest.raises(InvalidArgumentError, match="instant time"):
        small.read_incremental(end=bad)
    with pytest.raises(InvalidArgumentError, match="instant time"):
        small.stream(start=bad)


def test_instant_time_forms_hudi_accepts_still_read(small):
    latest = small.latest_instant()
    assert latest is not None
    for start in ("000", "0", "00000000000000", dt.date(2000, 1, 1), "2000-01-01 00:00:00"):
        assert small.read_incremental(start).num_rows == 4
    for as_of in (latest, int(latest), dt.datetime(9999, 1, 1), "9999-01-01", "9999-12-31 23:59:59.999"):
        assert small.read(as_of=as_of).num_rows == 4


# ---- columns and filters -----------------------------------------------------------------------


@pytest.fixture(scope="module", params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def two_commits(request, tmp_path_factory) -> shoal.Table:
    table = shoal.Table.create(
        tmp_path_factory.mktemp("cols") / "t",
        "cols",
        table_type=request.param,
        record_key="id",
        partition_by="p",
    )
    table.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "b", "b"], "v": [1.5, None, 3.0]}))
    table.upsert(pa.table({"id": [1], "p": ["a"], "v": [2.5]}))  # a log append on MOR
    return table


def _rows_of(table: pa.Table) -> list[tuple]:
    return sorted(zip(*(c.to_pylist() for c in table.columns), strict=True), key=repr)


@pytest.mark.parametrize("filters", [None, [("id", ">", 0)], [("v", ">", 2.0)]])
@pytest.mark.parametrize("query_type", ["snapshot", "read_optimized"])
def test_a_column_named_twice_comes_back_once(two_commits, filters, query_type):
    once = two_commits.read(columns=["v", "id"], filters=filters, query_type=query_type)
    twice = two_commits.read(columns=["v", "id", "v"], filters=filters, query_type=query_type)
    assert twice.column_names == ["v", "id"]
    assert _rows_of(twice) == _rows_of(once)
    batches = two_commits.read_batches(columns=["v", "v", "id"], filters=filters, query_type=query_type)
    got = batches.read_all()
    assert got.column_names == ["v", "id"]
    assert _rows_of(got) == _rows_of(once)


def test_columns_and_filters_of_the_wrong_shape_are_clear_errors(two_commits):
    with pytest.raises(InvalidArgumentError, match="list of column names"):
        two_commits.read(columns="id")
    with pytest.raises(InvalidArgumentError, match="list of column names"):
        two_commits.read_batches(columns="id")
    with pytest.raises(InvalidArgumentError, match="list of column names"):
        two_commits.read_incremental(columns="id")
    with pytest.raises(InvalidArgumentError, match="list of column names"):
        two_commits.read(columns=["id", 3])
    with pytest.raises(InvalidArgumentError, match=r"list of \(column, op, value\)"):
        two_commits.read(filters=("id", "=", 1))
    with pytest.raises(InvalidArgumentError, match=r"list of \(column, op, value\)"):
        two_commits.read(filters="id = 1")


@pytest.mark.parametrize("column", ["s", "n", "p"])
def test_in_a_set_of_only_nulls_matches_the_null_rows(small, column):
    data = {1: ("a", "x", 1), 2: ("b", None, None), 3: ("b", "z", 3), 4: ("a", None, 4)}
    pos = {"p": 0, "s": 1, "n": 2}[column]
    nulls = sorted(i for i, row in data.items() if row[pos] is None)
    others = sorted(i for i, row in data.items() if row[pos] is not None)
    assert sorted(small.read(filters=[(column, "in", [None])])["id"].to_pylist()) == nulls
    assert sorted(small.read(filters=[(column, "not in", [None])])["id"].to_pylist()) == others
    assert sorted(small.read_incremental(filters=[(column, "in", [None])])["id"].to_pylist()) == nulls


# ---- a consumer at the head of a cleaned and archived table ------------------------------------


def _partition_b_replaced(tmp_path: Path) -> tuple[shoal.Table, str]:
    """A table that keeps few commits, with partition b deleted (a replace commit) after its
    first write; returns it and the replace commit."""
    options = {
        "hoodie.cleaner.commits.retained": "1",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
    }
    table = shoal.Table.create(tmp_path / "t", "arch", record_key="id", partition_by="p", options=options)
    table.upsert(pa.table({"id": [1, 2], "p": ["a", "b"], "v": [0, 0]}))
    return table, table.delete_partitions(["b"])


def test_reads_at_the_latest_instant_after_a_replaced_partition_was_cleaned_and_archived(tmp_path):
    """delete_partitions replaces partition b's file group, the cleaner deletes its files and
    archival later moves the replace commit off the active timeline while the clean stays. The
    latest snapshot needs none of the cleaned files: a time travel to the latest instant and a
    consumer reading up to it must not fail."""
    table, replace = _partition_b_replaced(tmp_path)
    checkpoint = None
    seen: dict[int, int] = {}
    for i in range(4):
        table.upsert(_rows([10 + i], "b", i))  # partition b is written again
        end = table.latest_instant()
        for r in table.read_incremental(checkpoint, end, columns=["id", "v"]).to_pylist():
            seen[r["id"]] = r["v"]
        checkpoint = end
        assert sorted(table.read(as_of=end)["id"].to_pylist()) == sorted([1, *range(10, 11 + i)])
    assert replace not in {i.requested_time for i in table.instants()}  # archived
    assert seen == {1: 0, 10: 0, 11: 1, 12: 2, 13: 3}


def test_time_travel_after_a_replaced_partition_was_cleaned_and_its_replace_commit_archived(tmp_path):
    """As above, and reads as of every instant after the replace, not only the latest: the
    group the archived replace commit retired needs none of its cleaned files then."""
    table, replace = _partition_b_replaced(tmp_path)
    written = []
    for i in range(4):
        written.append(table.upsert(_rows([10 + i], "b", i)))
    assert replace not in {i.requested_time for i in table.instants()}  # archived
    active = {i.requested_time for i in table.instants()}
    checked = [n for n, instant in enumerate(written) if instant in active]
    assert len(checked) >= 2  # one before the latest at least
    for n in checked:
        instant = written[n]
        want = sorted([1, *range(10, 11 + n)])
        assert sorted(table.read(as_of=instant)["id"].to_pylist()) == want
        assert sorted(hudi_rs_read(str(tmp_path / "t"), as_of=instant)["id"].to_pylist()) == want
