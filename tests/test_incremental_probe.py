"""Probes of incremental pipelines: where ``read_incremental`` and Spark's incremental reads put
the delete marker when the range holds only deletes or the table carries ``_hoodie_is_deleted``
as a data column, the order of a moved key's delete and change for consumers keyed by record
key, and Hudi's full-table-scan fallback for a range whose file slices the cleaner removed."""

from __future__ import annotations

import importlib

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shoal
from shoal.errors import CleanedInstantError, InstantNotFoundError, UnsupportedError
from tests.hudi_oracle import hudi_rs_read

MARKER = "_hoodie_is_deleted"
TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
FALLBACK = {"hoodie.datasource.read.incr.fallback.fulltablescan.enable": "true"}
NO_AUTO_SERVICES = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def _batch(ids: list[int], p: str, ts: int, with_w: bool = False) -> pa.Table:
    data = {
        "id": ids,
        "p": [p] * len(ids),
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "v": [f"v{i}-{ts}" for i in ids],
    }
    if with_w:
        data["w"] = [f"w{i}" for i in ids]
    return pa.table(data)


def _spark_plan(path: str, start: str | None, end: str | None) -> list[str]:
    """The columns Spark's incremental read with deletes declares (no Spark job needed)."""
    spark_read = importlib.import_module("shoal.spark.read")
    return spark_read.plan_read(path, None, None, "incremental", None, start, end, True).schema.names


# ---- the delete marker's place ---------------------------------------------------------------------


@pytest.fixture(params=TABLE_TYPES)
def delete_after_new_column(request, tmp_path) -> tuple[str, list[str]]:
    """Keys 1 and 2 written without ``w`` in partition x, key 5 with ``w`` in partition y, then
    key 1 deleted: the delete's range reads only a file written before ``w`` existed (on
    merge-on-read, a delete block on a slice whose base file lacks ``w``)."""
    t = shoal.Table.create(
        tmp_path / "t", "m", table_type=request.param, record_key="id", partition_by="p", ordering_field="ts"
    )
    times = [
        t.upsert(_batch([1, 2], "x", 1)),
        t.upsert(_batch([5], "y", 2, with_w=True)),
        t.delete(_batch([1], "x", 3)),
    ]
    return t.path, times


def test_marker_place_of_a_delete_only_range_is_the_same_locally_and_on_spark(delete_after_new_column):
    pytest.importorskip("pyspark")
    path, times = delete_after_new_column
    table = shoal.Table(path)
    for start, end in ((times[1], times[2]), (times[0], times[2]), (None, times[2]), (None, times[0])):
        local = table.read_incremental(start, end, include_deletes=True)
        assert local.column_names == _spark_plan(path, start, end), (start, end)
    # The delete-only range: the row is key 1's last image, and w (added before the delete)
    # sits ahead of the marker as in every range through the commit that added it.
    only = table.read_incremental(times[1], times[2], include_deletes=True)
    assert only.column_names[-2:] == ["w", MARKER]
    assert only.select(["id", "w", MARKER]).to_pylist() == [{"id": 1, "w": None, MARKER: True}]


def test_spark_frames_of_a_delete_only_range_have_the_local_columns(spark, delete_after_new_column):
    import shoal.spark

    path, times = delete_after_new_column
    shoal.spark.register(spark)
    local = shoal.Table(path).read_incremental(times[1], times[2], include_deletes=True)
    frames = {
        "read": shoal.spark.read(
            spark, path, query_type="incremental", start=times[1], end=times[2], include_deletes=True
        ),
        "source": spark.read.format("shoal")
        .option("query_type", "incremental")
        .option("hoodie.datasource.read.begin.instanttime", times[1])
        .option("hoodie.datasource.read.end.instanttime", times[2])
        .option("include_deletes", "true")
        .load(path),
    }
    for name, frame in frames.items():
        assert frame.columns == local.column_names, name
        rows = [r.asDict() for r in frame.collect()]
        assert [(r["id"], r["w"], r[MARKER]) for r in rows] == [(1, None, True)], name


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_marker_stays_in_place_when_the_table_has_it_as_a_data_column(tmp_path, table_type):
    """A CDC table whose writes carry ``_hoodie_is_deleted`` (between two data columns): the
    incremental read with deletes keeps the column where the table has it, as the read without
    deletes does, and Spark declares the same order."""
    pytest.importorskip("pyspark")
    t = shoal.Table.create(
        tmp_path / "t", "m", table_type=table_type, record_key="id", partition_by="p", ordering_field="ts"
    )

    def write(deleted: list[bool], ts: int) -> str:
        return t.upsert(
            pa.table({"id": [1, 2], MARKER: deleted, "p": ["a", "a"], "ts": [ts, ts], "v": ["x", "y"]})
        )

    times = [write([False, False], 1), write([False, True], 2)]
    expected = [*t.read_incremental().column_names]
    assert expected.index(MARKER) == expected.index("id") + 1
    for start, end in ((None, times[1]), (times[0], times[1]), (None, times[0]), (times[1], None)):
        local = t.read_incremental(start, end, include_deletes=True)
        assert local.column_names == expected, (start, end)
        assert _spark_plan(t.path, start, end) == expected, (start, end)
    deleted = t.read_incremental(times[0], include_deletes=True)
    assert sorted(zip(deleted["id"].to_pylist(), deleted[MARKER].to_pylist(), strict=True)) == [
        (1, False),
        (2, True),
    ]


# ---- a key that moved partitions --------------------------------------------------------------------


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_moved_key_is_deleted_before_it_is_written_again(tmp_path, table_type):
    """Under a global index a record key is one record of the table. When an upsert moves it to
    another partition, its delete (old partition) and change (new one) share a commit time; a
    consumer keyed by record key that applies the rows in order must end with the key."""
    t = shoal.Table.create(
        tmp_path / "t",
        "g",
        table_type=table_type,
        record_key="id",
        partition_by="p",
        ordering_field="ts",
        options={"hoodie.index.type": "GLOBAL_BLOOM"},
    )
    c1 = t.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "ts": [1, 1, 1], "v": ["x", "y", "z"]}))
    t.upsert(pa.table({"id": [1, 3], "p": ["b", "a"], "ts": [2, 2], "v": ["x2", "z2"]}))
    copy = {r["id"]: (r["p"], r["v"]) for r in t.read(as_of=c1).to_pylist()}
    for change in t.stream(c1, max_polls=1, include_deletes=True):
        for r in change.table.to_pylist():
            if r[MARKER]:
                copy.pop(r["id"], None)
            else:
                copy[r["id"]] = (r["p"], r["v"])
    assert copy == {1: ("b", "x2"), 2: ("a", "y"), 3: ("a", "z2")}
    assert copy == {r["id"]: (r["p"], r["v"]) for r in t.read().to_pylist()}


# ---- the full-table-scan fallback over cleaned slices -----------------------------------------------


@pytest.fixture(params=TABLE_TYPES)
def cleaned(request, tmp_path) -> tuple[str, list[str]]:
    """Five upserts of key 1 (and a new key each), on merge-on-read a compaction and one more
    upsert of key 1, then a clean that keeps one commit: the early slices are gone."""
    t = shoal.Table.create(
        tmp_path / "t",
        "c",
        table_type=request.param,
        record_key="id",
        partition_by="p",
        options=NO_AUTO_SERVICES,
    )
    times = [t.upsert(pa.table({"id": [1, 2 + i], "p": ["a", "a"], "v": [f"v{i}", "n"]})) for i in range(5)]
    if request.param == "MERGE_ON_READ":
        times += t.compact()
        times.append(t.upsert(pa.table({"id": [1], "p": ["a"], "v": ["v9"]})))
    assert t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    return t.path, times


def _rows(table: pa.Table) -> list[tuple]:
    return sorted((r["_hoodie_commit_time"], r["id"], r["v"]) for r in table.to_pylist())


def _snapshot_in_range(path: str, lo: str, hi: str) -> list[tuple]:
    """Hudi's full-table-scan fallback: the latest snapshot (as hudi-rs reads it), rows with
    commit time in ``(lo, hi]``."""
    snap = hudi_rs_read(path)
    times = snap["_hoodie_commit_time"]
    snap = snap.filter(pc.and_(pc.greater(times, lo), pc.less_equal(times, hi)))
    return _rows(snap)


def test_fallback_reads_a_range_whose_slices_were_cleaned_from_the_snapshot(cleaned):
    """Hudi falls back to a full table scan when files the range's commits wrote are gone
    (``IncrementalRelation``: "there are files in metadata be deleted"), not only when the range
    reaches archived instants; without the option the read fails with a typed error."""
    path, times = cleaned
    lo, hi = times[0], times[1]
    with pytest.raises(CleanedInstantError):
        shoal.Table(path).read_incremental(lo, hi)
    table = shoal.Table(path, options=FALLBACK)
    got = table.read_incremental(lo, hi)
    rows = _rows(got)
    assert rows == _snapshot_in_range(path, lo, hi)
    assert rows and {r[1] for r in rows} == {3}  # key 1 was overwritten after the range
    with pytest.raises(UnsupportedError):
        table.read_incremental(lo, hi, include_deletes=True)
    # The stream from that checkpoint hands out the same rows for the first instant.
    first = next(iter(table.stream(lo, max_polls=1)))
    assert first.instant == hi
    assert sorted(first.table["id"].to_pylist()) == [3]


# ---- a checkpoint that archival reached -------------------------------------------------------------


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_checkpoint_at_the_latest_archived_instant_reads_on(tmp_path, table_type):
    """A consumer read up to instant k, then archival moved instants 0 to k off the timeline:
    every instant after its checkpoint is still active, so it reads on (deletes included)
    instead of failing, while a checkpoint before an archived instant still fails."""
    options = {
        **NO_AUTO_SERVICES,
        "hoodie.cleaner.commits.retained": "1",
        "hoodie.keep.min.commits": "3",
        "hoodie.keep.max.commits": "5",
    }
    t = shoal.Table.create(
        tmp_path / "t", "a", table_type=table_type, record_key="id", partition_by="p", options=options
    )
    times = [t.upsert(pa.table({"id": [i, 100], "p": ["a", "b"], "v": [f"v{i}"] * 2})) for i in range(5)]
    times.append(t.upsert(pa.table({"id": [0, 100], "p": ["a", "b"], "v": ["w5", "w5"]})))
    times.append(t.delete(pa.table({"id": [1, 2], "p": ["a", "a"]})))
    times.append(t.upsert(pa.table({"id": [7], "p": ["a"], "v": ["w7"]})))
    # What a consumer holds after reading up to each instant (read before archival).
    held = [{(r["p"], r["id"]): r["v"] for r in t.read(as_of=at).to_pylist()} for at in times]
    archived = [i.requested_time for i in t.archive().archived]
    k = len(archived) - 1
    assert k >= 1 and archived == times[: k + 1]
    with pytest.raises(InstantNotFoundError, match="archived"):
        t.read_incremental(times[k - 1], include_deletes=True)
    copy = held[k]
    for change in t.stream(times[k], max_polls=1, include_deletes=True):
        for r in change.table.to_pylist():
            if r[MARKER]:
                copy.pop((r["p"], r["id"]))
            else:
                copy[(r["p"], r["id"])] = r["v"]
    expected = {("a", 0): "w5", ("b", 100): "w5", ("a", 3): "v3", ("a", 4): "v4", ("a", 7): "w7"}
    assert copy == expected
    assert copy == {(r["p"], r["id"]): r["v"] for r in t.read().to_pylist()}
