"""Global indexes (Hudi's ``GLOBAL_BLOOM`` and ``GLOBAL_SIMPLE``): a record key names one record
in the whole table, whatever partition path an incoming record computes.

Each incoming key is looked up in the latest file slices of every partition (with the bloom or
the simple index's lookup). A record found in its own partition updates it there. A record found
in another partition:

* with ``update.partition.path=false`` updates the record where it is: it keeps its old
  partition path;
* with ``update.partition.path=true`` (Hudi's default) moves: a delete goes to the file group
  holding it, and the record is inserted into its new partition. It moves only if it beats the
  stored record: under event-time ordering, a record whose ordering value is lower goes to the
  old file group as an update instead, where the write keeps the stored record. A stored record
  that its file slice's logs delete is gone, so the incoming record is an insert.

Deletes, hard and soft, apply in the partition that holds their key. These are the rules of
Hudi's ``HoodieIndexUtils.tagGlobalLocationBackToRecords``. Where a record could go more than
one way (found in another partition, or in several file groups), only the file slices that still
hold its key once their logs are merged count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice
from shoal.read.mor import MorSliceSpec, merge_mor_slice
from shoal.read.snapshot import read_base_file
from shoal.tasks.cow_write import OP_COLUMN, OP_HARD_DELETE, OP_UPSERT, stale_ordering
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY

# Per file slice, incoming records (keyed) that the slice's base file holds: whether the slice
# still holds each record's key once its logs are merged, and whether the record loses to the
# stored one under event-time ordering (``check_stored_slices``, run as an executor's tasks).
CheckStored = Callable[[Sequence[tuple[FileSlice, pa.Table]]], list[tuple[np.ndarray, np.ndarray]]]
# Looks keys up in file slices: every slice holding some of them, with the indices of the keys
# it holds (``BloomIndex.locate``, or ``shoal.index.locate.locate_keys`` on an executor).
Locate = Callable[[pa.Array, Sequence[FileSlice]], list[tuple[FileSlice, np.ndarray]]]


def tag_globally(
    records: pa.Table,
    locate: Locate,
    slices: Sequence[FileSlice],
    update_partition_path: bool,
    check: CheckStored,
) -> tuple[pa.Table, pa.Array]:
    """Looks ``records`` (keyed, one per key) up in ``slices`` (the latest of every partition)
    with ``locate``.

    Returns the records to plan with and, per record, the file id of the file group it goes to
    (null: an insert into its partition). Records found elsewhere carry the partition path of
    the file group they update; a moving record adds a hard delete there. ``check`` reads the
    stored records where a record could go more than one way."""
    n = records.num_rows
    located = locate(records.column(RECORD_KEY).combine_chunks(), slices)
    if not located:
        return records, pa.nulls(n, pa.string())
    rows = np.concatenate([found for _, found in located])
    hit_slice = pa.array(np.repeat(np.arange(len(located)), [len(found) for _, found in located]))
    partition_type = records.schema.field(PARTITION_PATH).type
    file_ids = pa.array([sl.file_id for sl, _ in located], pa.string()).take(hit_slice)
    partitions = pa.array([sl.partition_path for sl, _ in located], partition_type).take(hit_slice)
    hit_records = records.take(pa.array(rows))
    same = pc.equal(partitions, hit_records.column(PARTITION_PATH).combine_chunks()).to_numpy(
        zero_copy_only=False
    )
    is_upsert = pc.equal(hit_records.column(OP_COLUMN), OP_UPSERT).to_numpy()
    # A merge-on-read slice's logs may have deleted a key its base file holds: where a record
    # could go more than one way, only the slices that still hold its key count.
    several = np.bincount(rows, minlength=n)[rows] > 1
    checked = is_upsert & (~same | several)
    update = np.ones(len(rows), dtype=bool)
    delete = np.zeros(len(rows), dtype=bool)
    if checked.any():
        present, stale = _stored_state(located, hit_slice, hit_records, checked, check)
        held = ~checked | present
        if update_partition_path:
            # A record that beats the stored one elsewhere moves: a delete there, an insert here.
            delete = held & ~same & is_upsert & ~stale
            update = held & ~delete
        else:
            update = held
    # A record stays where the table holds it, or is inserted into its own partition.
    stays = np.zeros(n, dtype=bool)
    stays[rows[update]] = True
    inserted = np.nonzero(~stays)[0]
    pieces = [records.take(pa.array(inserted))]
    tags = [pa.nulls(len(inserted), pa.string())]
    for chosen, op in ((update, None), (delete, OP_HARD_DELETE)):
        at = pa.array(np.nonzero(chosen)[0])
        if len(at) == 0:
            continue
        moved = _at_partition(hit_records.take(at), partitions.take(at))
        if op is not None:
            column = moved.schema.get_field_index(OP_COLUMN)
            moved = moved.set_column(column, OP_COLUMN, pa.repeat(pa.scalar(op, pa.int8()), moved.num_rows))
        pieces.append(moved)
        tags.append(file_ids.take(at))
    return pa.concat_tables(pieces), pa.concat_arrays(tags)


def _at_partition(records: pa.Table, partitions: pa.Array) -> pa.Table:
    column = records.schema.get_field_index(PARTITION_PATH)
    return records.set_column(column, PARTITION_PATH, partitions)


def check_stored_slices(work: Sequence[tuple[MorSliceSpec, pa.Table]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """A task of ``CheckStored``: :func:`check_stored_slice` of each (slice, incoming records)."""
    return [check_stored_slice(spec, incoming) for spec, incoming in work]


def check_stored_slice(spec: MorSliceSpec, incoming: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Per record of ``incoming`` (its keys, and its ordering values when ``spec`` orders by
    event time), whether the slice ``spec`` still holds its key once its logs are merged, and
    whether it loses to the stored record."""
    # The merge of the slice reads the ordering values whatever the ordering; only event-time
    # ordering compares them with the incoming ones.
    wanted = [RECORD_KEY] + ([spec.ordering_field] if spec.ordering_field else [])
    ordering = spec.ordering_field if spec.event_time_ordering else None
    assert spec.base_file_path is not None
    storage = Storage(spec.base_uri)
    held = read_base_file(storage, spec.base_file_path, wanted)
    if spec.log_file_paths:
        merged = merge_mor_slice(spec, storage, held).table()
        held = merged.select([c for c in wanted if c in merged.column_names])
    position = pc.index_in(incoming.column(RECORD_KEY), value_set=held.column(RECORD_KEY))
    present = pc.is_valid(position).to_numpy(zero_copy_only=False)
    stale = np.zeros(incoming.num_rows, dtype=bool)
    if ordering and ordering in held.column_names and ordering in incoming.column_names:
        losing = stale_ordering(incoming.column(ordering), held.column(ordering).take(position))
        stale = pc.fill_null(losing, False).to_numpy(zero_copy_only=False)
    return present, stale


def _stored_state(
    located: Sequence[tuple[FileSlice, np.ndarray]],
    hit_slice: pa.Array,
    hit_records: pa.Table,
    checked: np.ndarray,
    check: CheckStored,
) -> tuple[np.ndarray, np.ndarray]:
    """Per hit, for the ``checked`` ones: whether the file slice still holds the key once its
    logs are merged, and whether the incoming record loses to the stored one."""
    present = np.zeros(len(checked), dtype=bool)
    stale = np.zeros(len(checked), dtype=bool)
    slice_of_hit = hit_slice.to_numpy()
    work = []
    for i in np.unique(slice_of_hit[checked]):
        hits = np.nonzero(checked & (slice_of_hit == i))[0]
        work.append((hits, located[i][0], hit_records.take(pa.array(hits))))
    states = check([(sl, incoming) for _, sl, incoming in work])
    for (hits, _, _), (slice_present, slice_stale) in zip(work, states, strict=True):
        present[hits] = slice_present
        stale[hits] = slice_stale
    return present, stale
