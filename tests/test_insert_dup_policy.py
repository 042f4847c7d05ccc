"""Hudi's insert duplicate policy (``hoodie.datasource.insert.dup.policy``, and the older
``hoodie.datasource.write.insert.drop.duplicates``): an insert drops, or fails on, incoming
records of keys the table's latest snapshot holds; other operations take no notice.

Expected rows come from a model of the table (dicts), and hudi-rs reads every table written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "part", "ts", "v"]
DROP = {"hoodie.datasource.insert.dup.policy": "drop"}
FAIL = {"hoodie.datasource.insert.dup.policy": "fail"}
DROP_OLD_NAME = {"hoodie.datasource.write.insert.drop.duplicates": "true"}


def _batch(rows: list[tuple[str, str, int, int]]) -> pa.Table:
    ids, parts, ts, v = zip(*rows, strict=True) if rows else ([], [], [], [])
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "part": pa.array(parts, pa.string()),
            "ts": pa.array(ts, pa.int64()),
            "v": pa.array(v, pa.int64()),
        }
    )


def _table(tmp_path, table_type: str, **options: str) -> shoal.Table:
    return shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        table_type=table_type,
        record_key="id",
        partition_by="part",
        ordering_field="ts",
        options=options,
    )


def _expected(rows: list[tuple[str, str, int, int]]) -> list[dict]:
    return rows_by(_batch(rows), COLUMNS, COLUMNS)


def _check(t: shoal.Table, rows: list[tuple[str, str, int, int]]) -> None:
    expected = _expected(rows)
    assert rows_by(t.read(columns=COLUMNS), COLUMNS, COLUMNS) == expected
    assert rows_by(hudi_rs_read(t.path), COLUMNS, COLUMNS) == expected


def _timeline(t: shoal.Table) -> list[str]:
    return sorted(p.name for p in (Path(t.path) / ".hoodie").iterdir() if p.is_file())


STORED = [("a", "p1", 1, 1), ("b", "p1", 1, 2), ("c", "p2", 1, 3)]
# b and c are held, d and e are new.
INCOMING = [("b", "p1", 9, 20), ("c", "p2", 9, 30), ("d", "p1", 9, 40), ("e", "p2", 9, 50)]
KEPT = [("d", "p1", 9, 40), ("e", "p2", 9, 50)]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("index", ["BLOOM", "SIMPLE", "BUCKET", "GLOBAL_BLOOM", "GLOBAL_SIMPLE"])
@pytest.mark.parametrize("policy", [DROP, DROP_OLD_NAME], ids=["dup.policy", "drop.duplicates"])
def test_drop_leaves_out_records_of_held_keys(tmp_path, table_type, index, policy):
    options = {"hoodie.index.type": index, "hoodie.bucket.index.num.buckets": "2"}
    t = _table(tmp_path, table_type, **options)
    t.insert(_batch(STORED))
    result = t.write(_batch(INCOMING), "insert", options=policy)
    _check(t, STORED + KEPT)
    # Only the kept records were written (a small file rewritten carries its records over too).
    stats = result.metadata.write_stats()
    assert sum(s.numInserts + s.numUpdateWrites for s in stats) == len(KEPT)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("index", ["BLOOM", "BUCKET", "GLOBAL_BLOOM"])
def test_fail_raises_and_changes_nothing(tmp_path, table_type, index):
    t = _table(tmp_path, table_type, **{"hoodie.index.type": index, "hoodie.bucket.index.num.buckets": "2"})
    t.insert(_batch(STORED))
    before = _timeline(t)
    with pytest.raises(shoal.DuplicateKeyError, match=r"2 of the inserted keys \('b', 'c'\)"):
        t.insert(_batch(INCOMING), options=FAIL)
    assert _timeline(t) == before
    _check(t, STORED)
    # New keys only: written.
    t.insert(_batch(KEPT), options=FAIL)
    _check(t, STORED + KEPT)


def test_fail_wins_over_drop_duplicates(tmp_path):
    t = _table(tmp_path, "COPY_ON_WRITE")
    t.insert(_batch(STORED))
    with pytest.raises(shoal.DuplicateKeyError):
        t.insert(_batch(INCOMING), options={**FAIL, **DROP_OLD_NAME})
    _check(t, STORED)


def test_partitioned_index_holds_keys_per_partition_and_global_index_anywhere(tmp_path):
    """Under a partitioned index a key is held only in its own partition (the same key in
    another partition is another record); under a global index in any partition."""
    moved = [("a", "p2", 9, 10)]  # key a is stored in p1
    partitioned = _table(tmp_path / "partitioned", "COPY_ON_WRITE")
    partitioned.insert(_batch(STORED))
    partitioned.insert(_batch(moved), options=DROP)
    _check(partitioned, STORED + moved)
    global_ = _table(tmp_path / "global", "COPY_ON_WRITE", **{"hoodie.index.type": "GLOBAL_BLOOM"})
    global_.insert(_batch(STORED))
    global_.insert(_batch(moved), options=DROP)
    _check(global_, STORED)


@pytest.mark.parametrize("index", ["BLOOM", "BUCKET", "GLOBAL_SIMPLE"])
def test_a_key_a_log_deleted_is_not_held(tmp_path, index):
    """On merge-on-read a delete goes to a log while the base file keeps the key: the key is
    gone from the snapshot, so an insert under ``drop`` writes it again."""
    t = _table(
        tmp_path, "MERGE_ON_READ", **{"hoodie.index.type": index, "hoodie.bucket.index.num.buckets": "2"}
    )
    t.insert(_batch(STORED))
    t.delete(_batch([("b", "p1", 2, 0)]))
    assert any(p.name.startswith(".") and ".log." in p.name for p in (Path(t.path) / "p1").iterdir())
    back = [("b", "p1", 5, 22)]
    t.insert(_batch([*back, ("a", "p1", 5, 11)]), options=DROP)
    _check(t, [("a", "p1", 1, 1), ("c", "p2", 1, 3), *back])


def test_a_key_only_a_log_holds_is_held_with_the_bucket_index(tmp_path):
    """With the bucket index on merge-on-read an insert into an existing bucket goes to its
    log: the key is in no base file, and still held."""
    t = _table(
        tmp_path, "MERGE_ON_READ", **{"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "1"}
    )
    t.insert(_batch([("a", "p1", 1, 1)]))
    t.insert(_batch([("x", "p1", 1, 7)]))
    assert any(".log." in p.name for p in (Path(t.path) / "p1").iterdir())
    t.insert(_batch([("x", "p1", 2, 8), ("y", "p1", 2, 9)]), options=DROP)
    _check(t, [("a", "p1", 1, 1), ("x", "p1", 1, 7), ("y", "p1", 2, 9)])


def test_duplicates_within_the_batch_are_left_to_combine_before_insert(tmp_path):
    """The policy looks at keys the table holds; a new key twice in the batch is written twice
    unless ``hoodie.combine.before.insert`` deduplicates the batch, as in Hudi."""
    t = _table(tmp_path, "COPY_ON_WRITE")
    t.insert(_batch(STORED))
    twice = [("e", "p2", 9, 50), ("e", "p2", 8, 51)]
    t.insert(_batch([("a", "p1", 9, 10), *twice]), options=DROP)
    _check(t, STORED + twice)
    t.insert(
        _batch([("a", "p1", 9, 10), ("f", "p2", 9, 60), ("f", "p2", 8, 61)]),
        options={**DROP, "hoodie.combine.before.insert": "true"},
    )
    _check(t, [*STORED, *twice, ("f", "p2", 9, 60)])


def test_a_batch_of_held_keys_only_commits_nothing_new(tmp_path):
    t = _table(tmp_path, "COPY_ON_WRITE")
    t.insert(_batch(STORED))
    t.insert(_batch(STORED[:2]), options=DROP)
    _check(t, STORED)


def test_a_replayed_batch_is_ingested_once(tmp_path):
    t = _table(tmp_path, "MERGE_ON_READ")
    t.insert(_batch(STORED), options=DROP)
    t.insert(_batch(STORED), options=DROP)
    _check(t, STORED)


@pytest.mark.parametrize("operation", ["upsert", "bulk_insert"])
def test_other_operations_take_no_notice(tmp_path, operation):
    t = _table(tmp_path, "COPY_ON_WRITE")
    t.insert(_batch(STORED))
    t.write(_batch([("b", "p1", 9, 20)]), operation, options=FAIL)
    if operation == "upsert":
        _check(t, [("a", "p1", 1, 1), ("b", "p1", 9, 20), ("c", "p2", 1, 3)])
    else:
        _check(t, [*STORED, ("b", "p1", 9, 20)])


@pytest.mark.parametrize(
    "options",
    [
        {"hoodie.datasource.insert.dup.policy": "skip"},
        {"hoodie.datasource.write.insert.drop.duplicates": "yes"},
    ],
)
def test_bad_values_are_invalid_options(tmp_path, options):
    t = _table(tmp_path, "COPY_ON_WRITE")
    t.insert(_batch(STORED))
    before = _timeline(t)
    with pytest.raises(shoal.InvalidOptionError):
        t.insert(_batch(INCOMING), options=options)
    assert _timeline(t) == before
    _check(t, STORED)
