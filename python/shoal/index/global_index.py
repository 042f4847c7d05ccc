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

from shoal.fs.view import FileSlice
from shoal.index.bloom import BloomIndex
from shoal.tasks.cow_write import OP_COLUMN, OP_HARD_DELETE, OP_UPSERT, stale_ordering
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY

# Reads the stored records of a file slice as its readers see them (logs merged): at least the
# record key column, and the ordering field's when the table has one.
StoredRecords = Callable[[FileSlice], pa.Table]


def tag_globally(
    records: pa.Table,
    index: BloomIndex,
    slices: Sequence[FileSlice],
    update_partition_path: bool,
    stored: StoredRecords,
    ordering_field: str | None,
) -> tuple[pa.Table, pa.Array]:
    """Looks ``records`` (keyed, one per key) up in ``slices`` (the latest of every partition).

    Returns the records to plan with and, per record, the file id of the file group it goes to
    (null: an insert into its partition). Records found elsewhere carry the partition path of
    the file group they update; a moving record adds a hard delete there. ``ordering_field``:
    the field that orders records under event-time ordering, else None (the incoming record
    always wins)."""
    n = records.num_rows
    located = index.locate(records.column(RECORD_KEY).combine_chunks(), slices)
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
        present, stale = _stored_state(located, hit_slice, hit_records, checked, stored, ordering_field)
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


def _stored_state(
    located: Sequence[tuple[FileSlice, np.ndarray]],
    hit_slice: pa.Array,
    hit_records: pa.Table,
    checked: np.ndarray,
    stored: StoredRecords,
    ordering_field: str | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per hit, for the ``checked`` ones: whether the file slice still holds the key once its
    logs are merged, and whether the incoming record loses to the stored one."""
    present = np.zeros(len(checked), dtype=bool)
    stale = np.zeros(len(checked), dtype=bool)
    slice_of_hit = hit_slice.to_numpy()
    for i in np.unique(slice_of_hit[checked]):
        hits = np.nonzero(checked & (slice_of_hit == i))[0]
        incoming = hit_records.take(pa.array(hits))
        held = stored(located[i][0])
        position = pc.index_in(incoming.column(RECORD_KEY), value_set=held.column(RECORD_KEY))
        present[hits] = pc.is_valid(position).to_numpy(zero_copy_only=False)
        if ordering_field and ordering_field in held.column_names and ordering_field in incoming.column_names:
            held_ordering = held.column(ordering_field).take(position)
            losing = stale_ordering(incoming.column(ordering_field), held_ordering)
            stale[hits] = pc.fill_null(losing, False).to_numpy(zero_copy_only=False)
    return present, stale
