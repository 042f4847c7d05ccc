"""The copy-on-write write task: create a new file group, or merge records into a new slice of an
existing one (Hudi's create and merge handles)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shoal.fs.markers import create_marker
from shoal.fs.naming import base_file_name, write_token
from shoal.fs.storage import Storage
from shoal.read.mor import MorSliceSpec, read_mor_slice
from shoal.timeline.commit_metadata import NULL_COMMIT, WriteStat
from shoal.write.base_file import BaseFileOptions, set_file_name, with_meta_columns, write_base_file

RECORD_KEY = "_hoodie_record_key"
# Internal column routing each incoming record: an upsert, a delete that respects ordering
# (``_hoodie_is_deleted``), or a hard delete (the delete operation).
OP_COLUMN = "_shoal_op"
OP_UPSERT, OP_SOFT_DELETE, OP_HARD_DELETE = 0, 1, 2


@dataclass(frozen=True)
class CowWriteSpec:
    """One bucket of a COW write: plain data only, so any executor can ship it."""

    base_uri: str
    instant: str
    partition_path: str
    file_id: str
    task_id: int
    old_base_path: str | None
    prev_commit: str
    ordering_field: str | None
    event_time_ordering: bool
    options: BaseFileOptions
    attempt: int = 0
    # Merge-on-read: the slice to rewrite (base merged with its logs) instead of the base file.
    old_slice: MorSliceSpec | None = None


def run_cow_write(spec: CowWriteSpec, records: pa.Table, storage: Storage | None = None) -> WriteStat:
    """Writes one base file for the bucket and returns its write stat."""
    started = time.monotonic()
    storage = storage or Storage(spec.base_uri)
    name = base_file_name(spec.file_id, write_token(spec.task_id, 0, spec.attempt), spec.instant)
    path = f"{spec.partition_path}/{name}" if spec.partition_path else name
    rewrite = spec.old_base_path is not None or spec.old_slice is not None
    create_marker(storage, spec.instant, path, "MERGE" if rewrite else "CREATE")
    ops = records.column(OP_COLUMN) if OP_COLUMN in records.column_names else None
    if spec.old_base_path or spec.old_slice:
        old = _read_old(spec, storage)
        if spec.event_time_ordering and spec.ordering_field:
            records = _drop_stale(records, old, spec.ordering_field)
            ops = records.column(OP_COLUMN) if OP_COLUMN in records.column_names else None
        touched = records.column(RECORD_KEY).combine_chunks()
        old_keys = old.column(RECORD_KEY)
        replaced = pc.is_in(old_keys, value_set=touched)
        kept = old.filter(pc.invert(replaced))
        num_deletes_hit = _count_deletes_hitting(records, ops, old_keys)
    else:
        old_keys = None
        kept = None
        num_deletes_hit = 0
    upserts = records if ops is None else records.filter(pc.equal(ops, OP_UPSERT))
    if OP_COLUMN in upserts.column_names:
        upserts = upserts.drop_columns([OP_COLUMN])
    new_rows = with_meta_columns(upserts, spec.instant, spec.task_id, name)
    if old_keys is not None:
        num_updates = (
            pc.sum(pc.is_in(upserts.column(RECORD_KEY), value_set=old_keys.combine_chunks())).as_py() or 0
        )
    else:
        num_updates = 0
    if kept is not None and kept.num_rows:
        out = pa.concat_tables([set_file_name(kept, name), new_rows], promote_options="permissive")
    else:
        out = new_rows
    size = write_base_file(storage, path, out, spec.options)
    return WriteStat(
        fileId=spec.file_id,
        path=path,
        prevCommit=spec.prev_commit if rewrite else NULL_COMMIT,
        numWrites=out.num_rows,
        numDeletes=num_deletes_hit,
        numUpdateWrites=num_updates,
        numInserts=upserts.num_rows - num_updates,
        totalWriteBytes=size,
        partitionPath=spec.partition_path,
        fileSizeInBytes=size,
        runtimeStats={
            "totalScanTime": 0,
            "totalUpsertTime": int((time.monotonic() - started) * 1000),
            "totalCreateTime": 0,
        },
    )


def _read_old(spec: CowWriteSpec, storage: Storage) -> pa.Table:
    if spec.old_slice is not None:
        return read_mor_slice(spec.old_slice, storage)
    assert spec.old_base_path is not None
    with storage.open_input_file(spec.old_base_path) as f:
        return pq.read_table(f)


def _drop_stale(records: pa.Table, old: pa.Table, ordering_field: str) -> pa.Table:
    """Event-time ordering: incoming upserts and soft deletes whose ordering value is lower than
    the stored record's lose and are dropped; hard deletes always apply."""
    if ordering_field not in old.column_names or ordering_field not in records.column_names:
        return records  # hard deletes carry no ordering value: they always apply
    n = records.num_rows
    inc = pa.table(
        {
            RECORD_KEY: records.column(RECORD_KEY),
            "__inc_ord": records.column(ordering_field),
            "__row": pa.array(range(n), pa.int64()),
        }
    )
    stored = pa.table({RECORD_KEY: old.column(RECORD_KEY), "__old_ord": old.column(ordering_field)})
    joined = inc.join(stored, RECORD_KEY, join_type="inner")
    if joined.num_rows == 0:
        return records
    old_ord = joined.column("__old_ord")
    inc_ord = joined.column("__inc_ord")
    if old_ord.type != inc_ord.type:
        old_ord = old_ord.cast(inc_ord.type)
    stale = pc.fill_null(pc.greater(old_ord, inc_ord), False)
    # A null incoming ordering value never beats a stored non-null one.
    stale = pc.or_(stale, pc.and_(pc.is_null(inc_ord), pc.is_valid(old_ord)))
    stale_rows = pc.filter(joined.column("__row"), stale)
    if len(stale_rows) == 0:
        return records
    keep = pc.invert(pc.is_in(pa.array(range(n), pa.int64()), value_set=stale_rows.combine_chunks()))
    if OP_COLUMN in records.column_names:
        keep = pc.or_(keep, pc.equal(records.column(OP_COLUMN), OP_HARD_DELETE))
    return records.filter(keep)


def _count_deletes_hitting(records: pa.Table, ops: pa.ChunkedArray | None, old_keys: pa.ChunkedArray) -> int:
    if ops is None:
        return 0
    deleted = records.filter(pc.not_equal(ops, OP_UPSERT)).column(RECORD_KEY)
    if len(deleted) == 0:
        return 0
    return int(pc.sum(pc.is_in(deleted, value_set=old_keys.combine_chunks())).as_py() or 0)
