"""Where a copy-on-write merge puts each record in the new base file, and which column chunks of
the replaced file it can keep.

Like Hudi's merge handle, the merge keeps the stored records in their order: an update takes the
place of the record it replaces, a deleted record drops out, and new records follow the stored
ones. Each row group of the replaced file then has a row group in the new file with the same
records, and a column whose values no update changed in that row group is the same column chunk,
byte for byte: the writer copies it instead of encoding it again (write/base_file.py,
``write_spliced_base_file``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.write.base_file import constant_column
from shoal.write.schema import META_COLUMNS

FILE_NAME = "_hoodie_file_name"
RECORD_KEY = "_hoodie_record_key"
# A trailing row group of the replaced file smaller than this share of a full row group is
# written again with the new records instead of kept: a table taking inserts commit after commit
# then keeps a short tail of row groups rather than one more per commit.
_TAIL_SHARE = 4


@dataclass(frozen=True)
class RowGroupSource:
    """One row group of the new file: ``num_rows`` rows of ``MergeLayout.rows`` from ``start``,
    and per field the replaced file's row group whose chunk it keeps (-1: encode it)."""

    start: int
    num_rows: int
    sources: list[int]


@dataclass(frozen=True)
class MergeLayout:
    """The new base file's rows (meta columns included) and its row groups."""

    rows: pa.Table
    row_groups: list[RowGroupSource]

    @property
    def copied_chunks(self) -> int:
        return sum(s >= 0 for g in self.row_groups for s in g.sources)


def merge_in_place(
    old: pa.Table,
    old_group_rows: list[int],
    hit: pa.ChunkedArray | pa.Array,
    records: pa.Table,
    is_upsert: np.ndarray | None,
    new_rows: pa.Table,
    file_name: str,
    group_target_rows: int,
) -> MergeLayout | None:
    """Lays out a merge of ``records`` into the replaced file's rows ``old`` (without
    ``_hoodie_file_name``; ``old_group_rows`` rows per row group) in place.

    ``hit``: per stored row, whether an incoming record names its key. ``is_upsert``: per
    incoming record, whether it is written (else it deletes); None when all are. ``new_rows``:
    the written records, in their order, with meta columns. ``file_name``: the new file's name.
    A key stored twice may have each copy named: each then takes the record's place. None when
    the stored rows cannot be merged in place: no stored rows, a named row whose record is
    missing, or columns whose types differ from the new rows'."""
    n_old = old.num_rows
    names = list(old.column_names)
    if not n_old or sum(old_group_rows) != n_old:
        return None
    if new_rows.num_rows == 0:
        # Deletes alone: the stored columns, and the new file name.
        name_type = pa.dictionary(pa.int32(), pa.string())
        at = min(META_COLUMNS.index(FILE_NAME), len(old.schema))
        schema = old.schema.insert(at, pa.field(FILE_NAME, name_type))
    else:
        if set(names) != set(new_rows.column_names) - {FILE_NAME}:
            return None
        if any(old.schema.field(c).type != new_rows.schema.field(c).type for c in names):
            return None
        schema = new_rows.schema
    hit_rows = np.flatnonzero(as_bools(hit))
    incoming = pc.index_in(
        old.column(RECORD_KEY).take(pa.array(hit_rows)), value_set=records.column(RECORD_KEY)
    )
    if incoming.null_count:
        return None  # a stored row said to be named by a record that is not there
    record_of_hit = incoming.to_numpy(zero_copy_only=False)
    if is_upsert is None:
        writes = np.ones(len(record_of_hit), dtype=bool)
        upsert_index = np.arange(records.num_rows)
    else:
        writes = is_upsert[record_of_hit]
        upsert_index = np.cumsum(is_upsert) - 1
    updated_at = hit_rows[writes]
    update_from = upsert_index[record_of_hit[writes]]
    deleted_at = hit_rows[~writes]
    is_insert = np.ones(new_rows.num_rows, dtype=bool)
    is_insert[update_from] = False
    inserted = np.flatnonzero(is_insert)

    bounds = np.cumsum(old_group_rows)
    changed = _groups_changed(old, new_rows, names, updated_at, update_from, bounds)
    deleted_groups = set(np.searchsorted(bounds, deleted_at, side="right").tolist())

    keep = np.ones(n_old, dtype=bool)
    keep[deleted_at] = False
    take = np.arange(n_old)
    take[updated_at] = n_old + update_from
    head_take = pa.array(take[keep]) if len(deleted_at) or len(updated_at) else None
    tail_take = pa.array(inserted)
    columns = []
    for field in schema:
        name = field.name
        if name == FILE_NAME:
            n = int(keep.sum()) + len(inserted)
            names_column: pa.Array = constant_column(file_name, n)
            if not pa.types.is_dictionary(field.type):
                names_column = pa.repeat(pa.scalar(file_name, field.type), n)
            columns.append(pa.chunked_array([names_column], field.type))
            continue
        stored = old.column(name)
        if head_take is None or (not changed.get(name) and not len(deleted_at)):
            head = stored.chunks
        else:
            parts = stored.chunks + (new_rows.column(name).chunks if len(updated_at) else [])
            head = [pa.chunked_array(parts, field.type).take(head_take).combine_chunks()]
        tail = new_rows.column(name).take(tail_take).chunks if len(inserted) else []
        columns.append(pa.chunked_array(head + tail, field.type))
    rows = pa.Table.from_arrays(columns, schema=schema)

    groups: list[RowGroupSource] = []
    kept_before = np.concatenate([[0], np.cumsum(keep)])
    starts = np.concatenate([[0], bounds[:-1]])
    last = len(old_group_rows) - 1
    absorb_last = last >= 1 and old_group_rows[last] * _TAIL_SHARE < group_target_rows
    for g, (lo, hi) in enumerate(zip(starts, bounds, strict=True)):
        if g == last and absorb_last:
            break
        start, end = int(kept_before[lo]), int(kept_before[hi])
        if end == start:
            continue
        sources = [
            -1 if name == FILE_NAME or g in deleted_groups or g in changed.get(name, ()) else g
            for name in rows.column_names
        ]
        groups.append(RowGroupSource(start, end - start, sources))
    tail_start = groups[-1].start + groups[-1].num_rows if groups else 0
    step = max(1, group_target_rows)
    for start in range(tail_start, rows.num_rows, step):
        n = min(step, rows.num_rows - start)
        groups.append(RowGroupSource(start, n, [-1] * rows.num_columns))
    return MergeLayout(rows, groups)


def as_bools(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A boolean Arrow column as a numpy array (nulls as False)."""
    array = mask.combine_chunks() if isinstance(mask, pa.ChunkedArray) else mask
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=bool)


def _groups_changed(
    old: pa.Table,
    new_rows: pa.Table,
    names: list[str],
    updated_at: np.ndarray,
    update_from: np.ndarray,
    bounds: np.ndarray,
) -> dict[str, set[int]]:
    """Per field, the replaced file's row groups where an update changed a value of it."""
    if not len(updated_at):
        return {}
    group_of = np.searchsorted(bounds, updated_at, side="right")
    at, src = pa.array(updated_at), pa.array(update_from)
    changed: dict[str, set[int]] = {}
    for name in names:
        before = _decoded(old.column(name).take(at))
        after = _decoded(new_rows.column(name).take(src))
        differs = _differs(before, after)
        if differs is None:
            changed[name] = set(group_of.tolist())
        elif differs.any():
            changed[name] = set(group_of[differs].tolist())
    return changed


def _decoded(column: pa.ChunkedArray) -> pa.Array:
    array = column.combine_chunks()
    return array.dictionary_decode() if isinstance(array, pa.DictionaryArray) else array


def _differs(before: pa.Array, after: pa.Array) -> np.ndarray | None:
    """Per row, whether the two values differ (two nulls are the same); None when the type has
    no comparison here (nested values), which counts every row as changed."""
    if pa.types.is_nested(before.type) or before.type != after.type:
        return None
    if pa.types.is_floating(before.type):
        # Bit for bit: -0.0 equals 0.0 and NaN differs from itself under comparison, and a kept
        # chunk holds the stored bits.
        bits = pa.int64() if before.type.bit_width == 64 else pa.int32()
        if before.type.bit_width == 16:
            bits = pa.int16()
        before, after = before.view(bits), after.view(bits)
    try:
        equal = pc.equal(before, after)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return None
    both_null = pc.and_(pc.is_null(before), pc.is_null(after))
    same = pc.or_(pc.fill_null(equal, False), both_null)
    return ~np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)
