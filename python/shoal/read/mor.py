"""Merge-on-read slice reads: base file + the log blocks that count, merged by record key
(DESIGN §3.2, HUDI_FORMAT §7.4 and §9.5).

Log blocks are scanned in Rust (completed instants only, rollback blocks applied, corrupt blocks
skipped); records and deletes are turned into one ordered stream of entries, and the Rust merge
kernel decides per key which version survives. Arrow ``take``/``filter`` then builds the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shoal import _native
from shoal.errors import SchemaMismatchError
from shoal.fs.storage import Storage
from shoal.read.filters import Filter, apply_filters
from shoal.read.snapshot import read_base_file
from shoal.write.prepare import java_ordered
from shoal.write.schema import IS_DELETED_COLUMN

if TYPE_CHECKING:
    from shoal.fs.view import FileSlice

RECORD_KEY = "_hoodie_record_key"
# Entry kinds understood by the merge kernel.
KIND_RECORD, KIND_ORDERED_DELETE, KIND_DELETE = 0, 1, 2
# Dense-union type ids of LogBlock.deletes() ordering values (Java's wrapper branches).
_INT_WRAPPER, _LONG_WRAPPER, _DOUBLE_WRAPPER = 2, 3, 5
_WRAPPER_KIND = {
    1: "bool",
    2: "int",
    3: "int",
    4: "float",
    5: "float",
    6: "binary",
    7: "string",
    8: "date",
    9: "decimal",
    10: "time",
    11: "timestamp",
}


@dataclass(frozen=True)
class MorSliceSpec:
    """A file slice to read with its logs, as plain data."""

    base_uri: str
    partition_path: str
    file_id: str
    base_file_path: str | None
    log_file_paths: tuple[str, ...]
    completed_instants: tuple[str, ...]
    max_instant: str | None
    ordering_field: str | None
    event_time_ordering: bool
    columns: tuple[str, ...] | None = None
    filters: tuple[Filter, ...] = ()
    # Incremental reads: only blocks of instants in ``(start, end]`` count.
    instant_range: tuple[str | None, str | None] | None = None
    # Bytes of the files the read opens (base file and logs): Spark reads pack tasks by it.
    size: int = 0

    @classmethod
    def of_slice(
        cls,
        base_uri: str,
        sl: FileSlice,
        completed_instants: tuple[str, ...],
        ordering_field: str | None,
        event_time_ordering: bool,
        **read: Any,
    ) -> MorSliceSpec:
        """The spec of reading the file slice ``sl`` merged; ``read``: the other fields
        (``max_instant``, ``columns``, ...)."""
        return cls(
            base_uri=base_uri,
            partition_path=sl.partition_path,
            file_id=sl.file_id,
            base_file_path=sl.base_file.path if sl.base_file else None,
            log_file_paths=tuple(lf.path for lf in sl.log_files),
            completed_instants=completed_instants,
            max_instant=read.pop("max_instant", None),
            ordering_field=ordering_field,
            event_time_ordering=event_time_ordering,
            **read,
        )


@dataclass(frozen=True)
class SliceMergeStats:
    """What merging a slice read and decided (the numbers a compaction commit reports)."""

    log_blocks: int  # data and delete blocks that counted
    log_records: int  # records and delete keys in them
    log_keys: int  # distinct keys among them (Hudi's "records merged in the log")
    base_records: int
    written: int  # records of the merged slice
    updated: int  # merged records whose key both the base file and the logs hold
    inserted: int  # merged records whose key only the logs hold
    deleted: int  # keys the base file or the logs hold that the merged slice drops


def read_mor_slice(spec: MorSliceSpec, storage: Storage | None = None) -> pa.Table:
    """The merged records of one file slice, projected and filtered."""
    merge = merge_mor_slice(spec, storage)
    return _project(merge.table(), spec.columns, spec.filters)


def read_mor_slice_with_stats(
    spec: MorSliceSpec, storage: Storage | None = None
) -> tuple[pa.Table, SliceMergeStats]:
    """Like :func:`read_mor_slice`, with the merge's statistics (computed before projection)."""
    merge = merge_mor_slice(spec, storage)
    return _project(merge.table(), spec.columns, spec.filters), merge.stats()


@dataclass(frozen=True)
class SliceMerge:
    """A merged slice in its parts: the base file's rows and which of them survive, then the log
    records that survive (in log order; a key's survivor replaces its base row, if any)."""

    base: pa.Table | None
    # Per base row, whether it survives; None when no log entry counts (all of them do).
    base_keep: pa.BooleanArray | None
    survivors: pa.Table | None
    entries: Sequence[tuple[pa.Array, pa.Array | None, pa.Array]]
    num_blocks: int

    def table(self) -> pa.Table:
        """The merged records: surviving base rows in their order, then the surviving log
        records."""
        parts = []
        if self.base is not None:
            parts.append(self.base if self.base_keep is None else self.base.filter(self.base_keep))
        if self.survivors is not None and (self.survivors.num_rows or not parts):
            parts.append(self.survivors)
        if not parts:
            return pa.table({})
        if len(parts) == 1:
            return parts[0]
        return pa.concat_tables(parts, promote_options="permissive")

    def stats(self) -> SliceMergeStats:
        """What the merge read and decided (the numbers a compaction commit reports). Sets are
        built of the log's keys only and probed with the base file's, which are far more."""
        entries = self.entries
        log_keys = (
            pc.unique(pa.concat_arrays([k.cast(pa.string()) for k, _, _ in entries]))
            if entries
            else pa.array([], pa.string())
        )
        base_keys = (
            self.base.column(RECORD_KEY).combine_chunks().cast(pa.string())
            if self.base is not None
            else pa.array([], pa.string())
        )
        named = pc.is_in(base_keys, value_set=log_keys)  # base rows whose key the logs name
        shared = base_keys.filter(named)
        kept = len(base_keys) if self.base_keep is None else int(pc.sum(self.base_keep).as_py() or 0)
        # Only the first base copy of a named key meets its log version (a base file may hold a
        # key twice), and only such a copy is ever dropped: the others were kept as stored.
        kept_named = len(pc.unique(shared)) - (len(base_keys) - kept)
        survivors = (
            self.survivors.column(RECORD_KEY).combine_chunks().cast(pa.string())
            if self.survivors is not None
            else pa.array([], pa.string())
        )
        replacing = int(pc.sum(pc.is_in(survivors, value_set=shared)).as_py() or 0)
        written = kept + len(survivors)
        log_only_keys = len(log_keys) - len(pc.unique(shared))
        return SliceMergeStats(
            log_blocks=self.num_blocks,
            log_records=sum(len(k) for k, _, _ in entries),
            log_keys=len(log_keys),
            base_records=len(base_keys),
            written=written,
            updated=kept_named + replacing,
            inserted=len(survivors) - replacing,
            deleted=len(base_keys) + log_only_keys - written,
        )


def merge_mor_slice(
    spec: MorSliceSpec, storage: Storage | None = None, base: pa.Table | None = None
) -> SliceMerge:
    """Merges a slice's base file (``base`` when the caller has read it already) with the log
    blocks that count; no projection or filter."""
    storage = storage or Storage(spec.base_uri)
    if base is None:
        base = _read_base(storage, spec)
    blocks = _native.scan_log_files(
        storage.native_sources(spec.log_file_paths),
        list(spec.completed_instants),
        spec.max_instant,
        instant_range=spec.instant_range,
    )
    record_tables: list[pa.Table | None] = []
    entries: list[tuple[pa.Array, pa.Array | None, pa.Array]] = []  # keys, ordering, kind
    for block in blocks:
        kind = block.block_type
        if kind in ("AVRO_DATA_BLOCK", "PARQUET_DATA_BLOCK"):
            table = _block_records(block)
            if table.num_rows == 0:
                continue
            record_tables.append(table)
            keys = table.column(RECORD_KEY).combine_chunks()
            kinds = np.full(table.num_rows, KIND_RECORD, dtype=np.int8)
            if IS_DELETED_COLUMN in table.column_names:
                deleted = pc.fill_null(table.column(IS_DELETED_COLUMN), False).to_numpy(zero_copy_only=False)
                kinds[deleted] = KIND_ORDERED_DELETE
            ordering = _column_or_none(table, spec.ordering_field)
            entries.append((keys, ordering, pa.array(kinds)))
        elif kind == "DELETE_BLOCK":
            deletes = block.deletes()
            if deletes.num_rows == 0:
                continue
            ordering, kinds = _delete_ordering(deletes.column("ordering_value"), base, spec.ordering_field)
            entries.append((deletes.column("record_key"), ordering, kinds))
            # Deletes own no record row: pad the record stream with placeholders.
            record_tables.append(None)
    base_keep, survivors = _merge(base, record_tables, entries, spec)
    return SliceMerge(base, base_keep, survivors, entries, len(blocks))


def _read_base(storage: Storage, spec: MorSliceSpec) -> pa.Table | None:
    """The base file's rows, with the columns the read returns or filters on and those the merge
    decides by (all of them when the read projects none)."""
    if spec.base_file_path is None:
        return None
    columns = None
    if spec.columns is not None:
        merge_by = [RECORD_KEY] + ([spec.ordering_field] if spec.ordering_field else [])
        filtered_by = [f[0] for f in spec.filters]
        columns = list(dict.fromkeys([*spec.columns, *merge_by, *filtered_by]))
    return read_base_file(storage, spec.base_file_path, columns)


def _block_records(block: _native.LogBlock) -> pa.Table:
    if block.block_type == "PARQUET_DATA_BLOCK":
        return pq.read_table(pa.BufferReader(block.content()))
    return pa.Table.from_batches([block.records()])


def _column_or_none(table: pa.Table, name: str | None) -> pa.Array | None:
    if name is None or name not in table.column_names:
        return None
    return table.column(name).combine_chunks()


def _delete_ordering(
    union: pa.Array, base: pa.Table | None, ordering_field: str | None
) -> tuple[pa.Array | None, pa.Array]:
    """Delete entries' ordering values in the ordering field's type, and their kinds: a delete
    orders against records only when its wrapper holds the Java class the field's values have
    (an Integer for an Avro int, a Long for a long, ...), and is not the Integer ``0`` that
    stands for "no ordering value" (Java's ``processNextDeletedRecord``: ``!val.equals(0) &&
    isSameClass``); otherwise it always applies. A Long ``0`` is an ordering value."""
    n = len(union)
    kinds = np.full(n, KIND_DELETE, dtype=np.int8)
    if ordering_field is None or base is None or ordering_field not in base.column_names:
        return None, pa.array(kinds)
    target = base.schema.field(ordering_field).type
    type_codes = union.type_codes.to_numpy()
    offsets = union.offsets.to_numpy()
    values = pa.nulls(n, target)
    for code in np.unique(type_codes):
        if code == 0 or not _wrapper_matches(int(code), target):
            continue
        rows = np.nonzero(type_codes == code)[0]
        raw = union.field(int(code)).take(pa.array(offsets[rows]))
        try:
            # Arrow casts integers to time32 from int32 only.
            child = (raw.cast(pa.int32()) if pa.types.is_time32(target) else raw).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        nonzero = pc.fill_null(pc.not_equal(raw, 0), True) if code == _INT_WRAPPER else None
        mask = np.zeros(n, dtype=bool)
        mask[rows] = True if nonzero is None else nonzero.to_numpy(zero_copy_only=False)
        kinds[mask] = KIND_ORDERED_DELETE
        full = np.zeros(n, dtype=np.int64)
        full[rows] = np.arange(len(rows))
        values = pc.if_else(pa.array(mask), child.take(pa.array(full)), values)
    return values, pa.array(kinds)


def _wrapper_matches(code: int, target: pa.DataType) -> bool:
    kind = _WRAPPER_KIND.get(code)
    if kind == "int" and (pa.types.is_timestamp(target) or pa.types.is_time64(target)):
        # Java orders by a timestamp or time-micros field's Avro long as it is (the raw micros
        # or millis; for timestamps unless consistent logical timestamps are on), so its delete
        # blocks carry a Long; a time-millis field's Avro int, an Integer.
        return code == _LONG_WRAPPER
    if kind == "int" and pa.types.is_time32(target):
        return code == _INT_WRAPPER
    if kind == "int":
        # IntWrapper holds an Integer (an Avro int), LongWrapper a Long.
        wide = pa.types.is_integer(target) and target.bit_width == 64
        return pa.types.is_integer(target) and wide == (code == _LONG_WRAPPER)
    if kind == "float":
        return pa.types.is_floating(target) and (target.bit_width == 64) == (code == _DOUBLE_WRAPPER)
    if kind == "string":
        return pa.types.is_string(target) or pa.types.is_large_string(target)
    if kind == "timestamp":
        return pa.types.is_timestamp(target)
    if kind == "date":
        return pa.types.is_date(target)
    if kind == "decimal":
        return pa.types.is_decimal(target)
    if kind == "bool":
        return pa.types.is_boolean(target)
    return False


def _merge(
    base: pa.Table | None,
    record_tables: Sequence[pa.Table | None],
    entries: Sequence[tuple[pa.Array, pa.Array | None, pa.Array]],
    spec: MorSliceSpec,
) -> tuple[pa.BooleanArray | None, pa.Table | None]:
    """Which base rows survive (None: all) and the log records that do."""
    if not entries:
        return None, None
    base_keys = base.column(RECORD_KEY).combine_chunks() if base is not None else pa.array([], pa.string())
    log_keys = pa.concat_arrays([k.cast(pa.string()) for k, _, _ in entries])
    kinds = pa.concat_arrays([k for _, _, k in entries])
    base_rank, log_rank = _ranks(base, entries, spec)
    base_keep, log_take = _native.merge_records(
        base_keys, base_rank, log_keys, log_rank, kinds, spec.event_time_ordering
    )
    # Map the surviving log entries back to rows of the record tables (deletes own no rows).
    starts: list[tuple[int, int, int]] = []
    tables: list[pa.Table] = []
    pos = 0
    for (keys, _, _), table in zip(entries, record_tables, strict=True):
        if table is not None:
            starts.append((pos, pos + len(keys), len(tables)))
            tables.append(table)
        pos += len(keys)
    parts = []
    take = log_take.to_numpy()
    for lo, hi, ti in starts:
        sel = take[(take >= lo) & (take < hi)] - lo
        if len(sel):
            parts.append(tables[ti].take(pa.array(sel)))
    if parts:
        survivors = pa.concat_tables(parts, promote_options="permissive")
    elif base is None and tables:
        # Only tombstones and no base file: an empty slice with the records' columns.
        survivors = tables[0].slice(0, 0)
    else:
        survivors = None
    return (base_keep if base is not None else None), survivors


def _ranks(
    base: pa.Table | None, entries: Sequence[tuple[pa.Array, pa.Array | None, pa.Array]], spec: MorSliceSpec
) -> tuple[pa.Array | None, pa.Array | None]:
    """Dense ranks of the ordering values of base rows and log entries on one scale, so the
    kernel compares integers whatever the field's type (nulls rank lowest)."""
    if not spec.event_time_ordering or spec.ordering_field is None:
        return None, None
    n_base = base.num_rows if base is not None else 0
    pieces = []
    types = [ordering.type for _, ordering, _ in entries if ordering is not None]
    if base is not None and spec.ordering_field in base.column_names:
        types.insert(0, base.schema.field(spec.ordering_field).type)
    if not types:
        return None, None
    # A write may have widened the field (int to long, or to double): every version compares
    # in the widest type the slice's files hold, as the table's schema does.
    target = _widest(types)
    if base is not None:
        col = _column_or_none(base, spec.ordering_field)
        pieces.append(
            pa.nulls(n_base, target) if col is None else col if col.type == target else col.cast(target)
        )
    for _, ordering, kinds in entries:
        if ordering is None:
            pieces.append(pa.nulls(len(kinds), target))
        else:
            pieces.append(ordering.cast(target) if ordering.type != target else ordering)
    allv = pa.concat_arrays(pieces)
    # Dense ranks start at 1; nulls (ranked last by default) become 0, the lowest. Floats rank
    # in Java's Double.compareTo order (-0.0 below 0.0), as Hudi's payloads compare them.
    ranks = pc.rank(java_ordered(allv), sort_keys="ascending", tiebreaker="dense")
    ranks = pc.if_else(pc.is_null(allv), pa.scalar(0, pa.uint64()), ranks.cast(pa.uint64()))
    return ranks.slice(0, n_base), ranks.slice(n_base)


def _widest(types: Sequence[pa.DataType]) -> pa.DataType:
    """The type that values of every one of ``types`` cast to (Arrow's permissive promotion).

    Raises:
        SchemaMismatchError: no type holds them all (the table's schema changed incompatibly).
    """
    fields = [pa.schema([pa.field("v", t)]) for t in dict.fromkeys(types)]
    try:
        return pa.unify_schemas(fields, promote_options="permissive").field("v").type
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise SchemaMismatchError(
            f"the ordering field's types {sorted(map(str, set(types)))} do not merge: {e}"
        ) from e


def _project(table: pa.Table, columns: Sequence[str] | None, filters: Sequence[Filter]) -> pa.Table:
    if filters and table.num_rows:
        table = apply_filters(table, filters)
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    return table
