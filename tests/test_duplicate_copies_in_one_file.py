"""A base file holding a record key twice: an ``insert`` keeps duplicate keys by default
(``hoodie.merge.allow.duplicate.on.inserts``), within one batch and in a small file it fills.

What an upsert or delete of such a key does follows Hudi:
- copy-on-write (Hudi's merge handle): every stored copy merges with the incoming record on its
  own, so under event-time ordering one copy may lose while another wins;
- merge-on-read (Hudi's file group reader, and hudi-rs): the log's version of the key meets the
  first copy in the base file only; later copies read as stored. Compaction writes what a
  snapshot read returns.

The expected rows are worked out by hand from those rules; hudi-rs reads every table too."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "v"]
DELETED = "_hoodie_is_deleted"


def _batch(rows: list[tuple[str, int]], deleted: bool = False) -> pa.Table:
    """Records ``(id, ts)``; ``v`` is the ts, so each row says which version it is."""
    return pa.table(
        {
            "id": [r[0] for r in rows],
            "ts": pa.array([r[1] for r in rows], pa.int64()),
            "v": pa.array([r[1] for r in rows], pa.int64()),
            DELETED: pa.array([deleted] * len(rows), pa.bool_()),
        }
    )


def _table(path: Path, table_type: str, ordering: str, codec: str = "snappy") -> shoal.Table:
    """A table whose one base file holds a at ts 1 and 3 (in that order) and b at ts 1."""
    shoal.Table.create(
        str(path),
        name="t",
        table_type=table_type,
        record_key="id",
        ordering_field="ts",
        merge_ordering=ordering,
    )
    table = shoal.Table(str(path), options={"hoodie.parquet.compression.codec": codec})
    table.insert(_batch([("a", 1), ("a", 3), ("b", 1)]))
    (only,) = table.file_slices()
    assert only.base_file is not None
    stored = pq.read_table(str(path / only.base_file.path), columns=["id", "v"]).to_pylist()
    assert stored == [{"id": "a", "v": 1}, {"id": "a", "v": 3}, {"id": "b", "v": 1}]
    return table


def _rows(*pairs: tuple[str, int]) -> list[dict]:
    return sorted(({"id": i, "v": v} for i, v in pairs), key=lambda r: (r["id"], r["v"]))


def _check(path: Path, want: list[dict]) -> None:
    assert rows_by(shoal.Table(str(path)).read(columns=COLUMNS), COLUMNS, COLUMNS) == want
    assert rows_by(hudi_rs_read(str(path)), COLUMNS, COLUMNS) == want


def _counts(result) -> tuple[int, int, int]:
    stats = result.metadata.write_stats()
    return (
        sum(s.numUpdateWrites for s in stats),
        sum(s.numInserts for s in stats),
        sum(s.numDeletes for s in stats),
    )


EVENT, COMMIT = "EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"
# snappy merges in place (copying unchanged column chunks), lz4 rewrites the kept rows whole.
CODECS = ["snappy", "lz4"]


# ---- copy-on-write ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_event_time_upsert_merges_each_copy_on_its_own(tmp_path, codec):
    path = tmp_path / "t"
    table = _table(path, "COPY_ON_WRITE", EVENT, codec)
    result = table.write(_batch([("a", 2), ("b", 2), ("c", 2)]), "upsert")
    # a@1 loses to a@2, a@3 wins over it; b is updated and c inserted.
    _check(path, _rows(("a", 2), ("a", 3), ("b", 2), ("c", 2)))
    assert _counts(result) == (2, 1, 0)


@pytest.mark.parametrize("codec", CODECS)
def test_commit_time_upsert_replaces_every_copy(tmp_path, codec):
    path = tmp_path / "t"
    table = _table(path, "COPY_ON_WRITE", COMMIT, codec)
    result = table.write(_batch([("a", 2), ("c", 2)]), "upsert")
    _check(path, _rows(("a", 2), ("a", 2), ("b", 1), ("c", 2)))
    assert _counts(result) == (2, 1, 0)


def test_an_upsert_older_than_every_copy_changes_nothing(tmp_path):
    path = tmp_path / "t"
    table = _table(path, "COPY_ON_WRITE", EVENT)
    result = table.write(_batch([("a", 0)]), "upsert")
    _check(path, _rows(("a", 1), ("a", 3), ("b", 1)))
    assert _counts(result) == (0, 0, 0)


@pytest.mark.parametrize("codec", CODECS)
def test_delete_removes_every_copy(tmp_path, codec):
    path = tmp_path / "t"
    table = _table(path, "COPY_ON_WRITE", EVENT, codec)
    result = table.write(_batch([("a", 0)]), "delete")
    _check(path, _rows(("b", 1)))
    assert _counts(result) == (0, 0, 2)


@pytest.mark.parametrize("codec", CODECS)
def test_event_time_soft_delete_removes_the_copies_it_beats(tmp_path, codec):
    path = tmp_path / "t"
    table = _table(path, "COPY_ON_WRITE", EVENT, codec)
    result = table.write(_batch([("a", 2), ("b", 2)], deleted=True), "upsert")
    _check(path, _rows(("a", 3)))
    assert _counts(result) == (0, 0, 2)


def test_copies_stay_two_through_later_upserts(tmp_path):
    path = tmp_path / "t"
    table = _table(path, "COPY_ON_WRITE", EVENT)
    table.write(_batch([("a", 2)]), "upsert")
    table.write(_batch([("a", 5), ("b", 0)]), "upsert")
    _check(path, _rows(("a", 5), ("a", 5), ("b", 1)))


# ---- merge-on-read ---------------------------------------------------------------------------


def _commit_stats(path: Path, instant: str) -> list[dict]:
    commit = json.loads(Path(path, ".hoodie", f"{instant}.commit").read_text())
    return [s for stats in commit["partitionToWriteStats"].values() for s in stats]


@pytest.mark.parametrize("ordering", [EVENT, COMMIT])
def test_merge_on_read_log_version_meets_the_first_copy_only(tmp_path, ordering):
    path = tmp_path / "t"
    table = _table(path, "MERGE_ON_READ", ordering)
    table.write(_batch([("a", 4), ("b", 2), ("c", 2)]), "upsert")
    assert any(s.log_files for s in table.file_slices()), "the upsert went to a log file"
    want = _rows(("a", 4), ("a", 3), ("b", 2), ("c", 2))
    _check(path, want)

    (instant,) = table.compact()
    _check(path, want)
    (stat,) = _commit_stats(path, instant)
    # a@1 and b@1 met their log versions and a@3 was carried over (c, a new key, went to a base
    # file of its own, which had no log to compact).
    assert len(table.file_slices()) == 2
    assert (stat["numWrites"], stat["numUpdateWrites"], stat["numInserts"], stat["numDeletes"]) == (
        3,
        2,
        0,
        0,
    )


def test_merge_on_read_event_time_a_first_copy_that_wins_keeps_the_others(tmp_path):
    path = tmp_path / "t"
    table = _table(path, "MERGE_ON_READ", EVENT)
    table.write(_batch([("a", 0)]), "upsert")
    want = _rows(("a", 1), ("a", 3), ("b", 1))
    _check(path, want)
    table.compact()
    _check(path, want)


def test_merge_on_read_delete_removes_the_first_copy(tmp_path):
    path = tmp_path / "t"
    table = _table(path, "MERGE_ON_READ", EVENT)
    table.write(_batch([("a", 0)]), "delete")
    want = _rows(("a", 3), ("b", 1))
    _check(path, want)
    (instant,) = table.compact()
    _check(path, want)
    (stat,) = _commit_stats(path, instant)
    assert (stat["numWrites"], stat["numUpdateWrites"], stat["numDeletes"]) == (2, 0, 1)


def test_spark_cow_upsert_merges_each_copy_like_the_local_writer(spark, tmp_path):
    import shoal.spark

    path = tmp_path / "t"
    _table(path, "COPY_ON_WRITE", EVENT)
    data = spark.createDataFrame(_batch([("a", 2), ("b", 2), ("c", 2)])).repartition(2)
    result = shoal.spark.write(data, str(path), "upsert")
    _check(path, _rows(("a", 2), ("a", 3), ("b", 2), ("c", 2)))
    assert _counts(result) == (2, 1, 0)
