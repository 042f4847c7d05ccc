"""Deletes on merge-on-read tables: delete blocks in the log, as Apache Hudi writes them, and the
slice rewrite that keeps event-time ordering right when a record follows a logged delete."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal import _native
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "city", "ts", "fare"]


def _rows(ids, ts, deleted=None, city="sf") -> pa.Table:
    ids = list(ids)
    data = {
        "id": pa.array(ids, pa.int64()),
        "city": [city] * len(ids),
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "fare": [float(i) + ts / 100 for i in ids],
    }
    if deleted is not None:
        data["_hoodie_is_deleted"] = [deleted] * len(ids)
    return pa.table(data)


def _table(
    tmp_path, ordering: str = "EVENT_TIME_ORDERING", options: dict[str, str] | None = None
) -> shoal.Table:
    return shoal.Table.create(
        str(tmp_path / "m"),
        name="m",
        table_type="MERGE_ON_READ",
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        merge_ordering=ordering,
        options=options,
    )


def _log_blocks(t: shoal.Table) -> list:
    (sl,) = t.file_slices()
    blocks = []
    for lf in sl.log_files:
        blocks += _native.read_log_file(f"{t.path}/{lf.path}")
    return blocks


def _both_readers(t: shoal.Table) -> list[dict]:
    ours = rows_by(t.read(), COLUMNS, ["id"])
    assert rows_by(hudi_rs_read(t.path), COLUMNS, ["id"]) == ours, "hudi-rs disagrees with shoal"
    return ours


def test_delete_appends_a_delete_block_hudi_rs_applies(tmp_path):
    t = _table(tmp_path)
    t.bulk_insert(_rows(range(10), ts=5))
    (before,) = t.file_slices()
    instant = t.delete(pa.table({"id": pa.array([2, 7], pa.int64()), "city": ["sf", "sf"]}))
    (after,) = t.file_slices()
    assert after.base_file.name == before.base_file.name, "a delete must not rewrite the base file"
    (block,) = _log_blocks(t)
    assert block.block_type == "DELETE_BLOCK"
    # Header keys in Hudi's order (the fixture delete block: SCHEMA, then INSTANT_TIME).
    assert list(block.header) == ["SCHEMA", "INSTANT_TIME"]
    assert block.header["INSTANT_TIME"] == instant
    assert '"name":"_hoodie_record_key"' in block.header["SCHEMA"].replace(" ", "")
    entries = block.deletes().to_pylist()
    assert [(e["record_key"], e["partition_path"]) for e in entries] == [("2", "sf"), ("7", "sf")]
    # The delete operation carries Java's default ordering value IntWrapper(0): it always applies.
    assert block.deletes().column("ordering_value").type_codes.to_pylist() == [2, 2]
    assert [e["ordering_value"] for e in entries] == [0, 0]
    assert [r["id"] for r in _both_readers(t)] == [0, 1, 3, 4, 5, 6, 8, 9]
    stats = t._timeline().commit_metadata(instant).write_stats()
    assert [(s.numDeletes, s.totalLogRecords, s.totalLogBlocks) for s in stats] == [(2, 2, 1)]


def test_is_deleted_rows_go_to_a_delete_block_with_their_ordering_value(tmp_path):
    t = _table(tmp_path)
    t.bulk_insert(_rows(range(6), ts=5))
    # An update and two deletes in one upsert: a data block, then a delete block.
    t.upsert(pa.concat_tables([_rows([0], ts=9, deleted=False), _rows([1, 2], ts=8, deleted=True)]))
    data, deletes = _log_blocks(t)
    assert (data.block_type, deletes.block_type) == ("AVRO_DATA_BLOCK", "DELETE_BLOCK")
    assert data.record_count == 1
    assert [e["ordering_value"] for e in deletes.deletes().to_pylist()] == [8, 8]
    # LongWrapper: the ordering field's own type, so the delete competes on ordering.
    assert deletes.deletes().column("ordering_value").type_codes.to_pylist() == [3, 3]
    # A late delete (ts 4 < 5) loses to the stored version, in every reader.
    t.upsert(_rows([3], ts=4, deleted=True))
    rows = _both_readers(t)
    assert [(r["id"], r["ts"]) for r in rows] == [(0, 9), (3, 5), (4, 5), (5, 5)]


@pytest.mark.parametrize("late", [True, False])
def test_record_after_a_logged_delete_under_event_time(tmp_path, late):
    """A deleted key written again: a copy-on-write table holds the new record whatever its event
    time. Logged after the delete, Hudi's readers would collapse the two log entries first and let
    the deleted base version (ts 5) beat a late record (ts 3); the slice is rewritten instead."""
    t = _table(tmp_path)
    t.bulk_insert(_rows(range(4), ts=5))
    t.delete(pa.table({"id": pa.array([1], pa.int64()), "city": ["sf"]}))
    ts = 3 if late else 7
    t.upsert(_rows([1], ts=ts))
    rows = _both_readers(t)
    assert [(r["id"], r["ts"]) for r in rows] == [(0, 5), (1, ts), (2, 5), (3, 5)]
    (sl,) = t.file_slices()
    assert not sl.log_files, "the slice with a logged delete is rewritten into a new base file"
    # A delete after a delete is rewritten too when it competes on ordering (_hoodie_is_deleted).
    t.delete(pa.table({"id": pa.array([2], pa.int64()), "city": ["sf"]}))
    t.upsert(_rows([2], ts=1, deleted=True))
    assert [(r["id"], r["ts"]) for r in _both_readers(t)] == [(0, 5), (1, ts), (3, 5)]


def test_updates_without_deletes_in_the_log_stay_appends(tmp_path):
    t = _table(tmp_path)
    t.bulk_insert(_rows(range(4), ts=5))
    t.upsert(_rows([0], ts=6))
    t.delete(pa.table({"id": pa.array([1], pa.int64()), "city": ["sf"]}))
    (sl,) = t.file_slices()
    logs_before = {lf.name for lf in sl.log_files}
    # Another hard delete always applies, whatever came before: still an append.
    t.delete(pa.table({"id": pa.array([2], pa.int64()), "city": ["sf"]}))
    (sl,) = t.file_slices()
    assert {lf.name for lf in sl.log_files} == logs_before
    assert [b.block_type for b in _log_blocks(t)] == ["AVRO_DATA_BLOCK", "DELETE_BLOCK", "DELETE_BLOCK"]
    assert [(r["id"], r["ts"]) for r in _both_readers(t)] == [(0, 6), (3, 5)]


def test_commit_time_ordering_logs_records_after_deletes(tmp_path):
    """Under commit-time ordering the later entry always wins, in the log and against the base:
    a record after a delete stays an append."""
    t = _table(tmp_path, ordering="COMMIT_TIME_ORDERING")
    t.bulk_insert(_rows(range(4), ts=5))
    t.delete(pa.table({"id": pa.array([1], pa.int64()), "city": ["sf"]}))
    t.upsert(_rows([1], ts=2))
    assert [b.block_type for b in _log_blocks(t)] == ["DELETE_BLOCK", "AVRO_DATA_BLOCK"]
    assert [(r["id"], r["ts"]) for r in _both_readers(t)] == [(0, 5), (1, 2), (2, 5), (3, 5)]


def test_compaction_applies_logged_deletes(tmp_path):
    t = _table(tmp_path)
    t.bulk_insert(_rows(range(6), ts=5))
    t.upsert(_rows([0], ts=6))
    t.delete(pa.table({"id": pa.array([4, 5], pa.int64()), "city": ["sf", "sf"]}))
    expected = _both_readers(t)
    (instant,) = t.compact()
    (sl,) = t.file_slices()
    assert sl.base_instant == instant and not sl.log_files
    assert _both_readers(t) == expected
    assert [r["id"] for r in expected] == [0, 1, 2, 3]


def test_incremental_read_reports_logged_deletes(tmp_path):
    t = _table(tmp_path)
    first = t.bulk_insert(_rows(range(4), ts=5))
    deleting = t.delete(pa.table({"id": pa.array([3], pa.int64()), "city": ["sf"]}))
    changes = t.read_incremental(first, include_deletes=True)
    assert changes.select(["id", "_hoodie_commit_time", "_hoodie_is_deleted"]).to_pylist() == [
        {"id": 3, "_hoodie_commit_time": deleting, "_hoodie_is_deleted": True}
    ]


def test_records_of_other_keys_stay_appends_after_a_logged_delete(tmp_path):
    """Only a key the logs delete needs the rewrite: CDC streams mostly delete keys for good."""
    t = _table(tmp_path)
    t.bulk_insert(_rows(range(6), ts=5))
    t.delete(pa.table({"id": pa.array([1], pa.int64()), "city": ["sf"]}))
    t.upsert(_rows([2, 3], ts=3))  # late events of other keys: appended, and they lose
    t.upsert(_rows([4], ts=9, deleted=True))
    (sl,) = t.file_slices()
    assert [b.block_type for b in _log_blocks(t)] == ["DELETE_BLOCK", "AVRO_DATA_BLOCK", "DELETE_BLOCK"]
    assert [(r["id"], r["ts"]) for r in _both_readers(t)] == [(0, 5), (2, 5), (3, 5), (5, 5)]
    t.upsert(_rows([4], ts=2, deleted=False))  # names a key the logs delete: the slice is rewritten
    (sl,) = t.file_slices()
    assert not sl.log_files
    assert [(r["id"], r["ts"]) for r in _both_readers(t)] == [(0, 5), (2, 5), (3, 5), (4, 2), (5, 5)]


def test_a_slice_rewrite_that_keeps_no_record_leaves_a_file_later_writes_merge(tmp_path):
    """A soft delete of a key a log already deleted rewrites the slice into a base file without
    records. The next insert that the small-file rule sends into that file group merges it: a
    file without rows once made that merge fail, and every later write into the partition."""
    table = _table(tmp_path)
    table.upsert(_rows([1], 10, deleted=False))
    table.delete(pa.table({"id": [1], "city": ["sf"]}))
    table.upsert(_rows([1], 30, deleted=True))
    empty = [f for f in (tmp_path / "m" / "sf").glob("*.parquet") if pq.read_metadata(f).num_rows == 0]
    assert empty and all(pq.read_metadata(f).num_row_groups == 0 for f in empty)
    table.upsert(_rows([2, 3], 5, deleted=False))
    want = rows_by(_rows([2, 3], 5), COLUMNS, ["id"])
    assert rows_by(table.read(), COLUMNS, ["id"]) == want
    assert rows_by(hudi_rs_read(str(tmp_path / "m")), COLUMNS, ["id"]) == want


def test_a_merge_reads_a_base_file_whose_only_row_group_is_empty(tmp_path):
    """Base files written before the fix above hold one empty row group: merges read them."""
    table = _table(tmp_path)
    table.upsert(_rows([1], 10, deleted=False))
    (base,) = (tmp_path / "m" / "sf").glob("*.parquet")
    rows = pq.read_table(base)
    footer = pq.read_metadata(base).metadata
    writer = pq.ParquetWriter(base, rows.schema.remove_metadata(), store_schema=False)
    writer.write_table(rows.slice(0, 0))
    writer.add_key_value_metadata({k.decode(): v.decode() for k, v in footer.items()})
    writer.close()
    assert pq.read_metadata(base).num_row_groups == 1 and pq.read_metadata(base).num_rows == 0
    table.upsert(_rows([2], 11, deleted=False))
    want = rows_by(_rows([2], 11), COLUMNS, ["id"])
    assert rows_by(table.read(), COLUMNS, ["id"]) == want
    assert rows_by(hudi_rs_read(str(tmp_path / "m")), COLUMNS, ["id"]) == want


@pytest.mark.parametrize(
    ("ordering_type", "survives"),
    [
        # A Long 0 is an ordering value: the late soft delete loses to the stored ts 10.
        (pa.int64(), True),
        # An Integer 0 stands for "no ordering value" in Java: that delete always applies.
        (pa.int32(), False),
    ],
)
def test_a_soft_delete_with_ordering_value_zero(tmp_path, ordering_type, survives):
    """Java's rule for logged deletes (processNextDeletedRecord: ``!val.equals(0) &&
    isSameClass``) tells an Integer 0 from a Long 0; shoal and hudi-rs agree on both."""
    table = _table(tmp_path)

    def rows(ts, deleted):
        data = _rows([1], ts, deleted=deleted)
        return data.set_column(data.schema.get_field_index("ts"), "ts", pa.array([ts], ordering_type))

    table.upsert(rows(10, False))
    table.upsert(rows(0, True))
    want = rows_by(rows(10, False).drop_columns(["_hoodie_is_deleted"]), COLUMNS, ["id"]) if survives else []
    assert rows_by(table.read(), COLUMNS, ["id"]) == want
    assert rows_by(hudi_rs_read(str(tmp_path / "m")), COLUMNS, ["id"]) == want


@pytest.mark.parametrize("deleted", [False, True])
def test_record_after_an_archived_logged_delete_under_event_time(tmp_path, deleted):
    """The rewrite also happens when the commit that logged the delete has been archived: its
    delete block still counts (its instant predates the active timeline), so a late record, or
    a late ``_hoodie_is_deleted`` delete, logged after it would let the deleted base version
    come back in Hudi's readers."""
    t = _table(
        tmp_path,
        options={
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1",
            "hoodie.archive.automatic": "false",
            # Compaction's trigger counts no delta commits, so it holds none back from archival.
            "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",
        },
    )
    t.bulk_insert(_rows(range(4), ts=5))
    deleting = t.delete(pa.table({"id": pa.array([1], pa.int64()), "city": ["sf"]}))
    for ts in (6, 7, 8, 9):  # updates of another key, appended to the same log file
        t.upsert(_rows([0], ts=ts))
    t.archive()
    active = {i.requested_time for i in t.instants()}
    assert deleting not in active, "the delete's commit is archived"
    (sl,) = t.file_slices()
    assert sl.log_files, "the delete block is still in the slice's log"
    t.upsert(_rows([1], ts=3, deleted=deleted))
    want = [(0, 9), (2, 5), (3, 5)] if deleted else [(0, 9), (1, 3), (2, 5), (3, 5)]
    assert [(r["id"], r["ts"]) for r in _both_readers(t)] == want
    (sl,) = t.file_slices()
    assert not sl.log_files, "the slice with a logged delete is rewritten into a new base file"
