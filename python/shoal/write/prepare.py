"""Key generation, validation and precombine dedup: what happens to a batch before tagging."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.arrays import contiguous
from shoal.errors import InvalidArgumentError, InvalidRecordKeyError, SchemaMismatchError
from shoal.keygen import KeyGenerator
from shoal.write.schema import IS_DELETED_COLUMN

RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"


@dataclass
class PreparedBatch:
    """Records ready for tagging: ``data`` carries the user columns plus the record key and
    partition path columns; ``is_delete`` marks rows that delete their key."""

    data: pa.Table
    is_delete: pa.ChunkedArray | None = None

    @property
    def keys(self) -> pa.ChunkedArray:
        return self.data.column(RECORD_KEY)

    @property
    def partitions(self) -> pa.ChunkedArray:
        return self.data.column(PARTITION_PATH)

    @property
    def num_rows(self) -> int:
        return self.data.num_rows

    def upserts(self) -> pa.Table:
        if self.is_delete is None:
            return self.data
        return self.data.filter(pc.invert(self.is_delete))

    def deletes(self) -> pa.Table:
        if self.is_delete is None:
            return self.data.slice(0, 0)
        return self.data.filter(self.is_delete)


def add_keys(data: pa.Table, keygen: KeyGenerator) -> pa.Table:
    """Appends ``_hoodie_record_key`` and ``_hoodie_partition_path`` computed by the key generator."""
    keys = keygen.record_keys(data)
    partitions = keygen.partition_paths(data)
    data = data.append_column(RECORD_KEY, _as_chunked(keys))
    return data.append_column(PARTITION_PATH, _as_chunked(partitions))


def _as_chunked(arr: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return arr if isinstance(arr, pa.ChunkedArray) else pa.chunked_array([arr])


def check_ordering_field(data: pa.Table, ordering_field: str | None) -> None:
    if ordering_field and ordering_field not in data.column_names:
        raise SchemaMismatchError(f"ordering (precombine) field {ordering_field!r} is missing from the data")


def deleted_mask(data: pa.Table) -> pa.ChunkedArray | None:
    """The ``_hoodie_is_deleted`` column as a non-null boolean mask, or None when absent."""
    if IS_DELETED_COLUMN not in data.column_names:
        return None
    col = data.column(IS_DELETED_COLUMN)
    if not pa.types.is_boolean(col.type):
        raise SchemaMismatchError(f"{IS_DELETED_COLUMN} must be boolean, got {col.type}")
    return pc.fill_null(col, False)


# The decimal type of a delete block's ordering values (Hudi's DecimalWrapper).
_LOGGED_DECIMAL = pa.decimal128(30, 15)


def check_logged_delete_orderings(data: pa.Table, ordering_field: str | None) -> None:
    """For a merge-on-read upsert: raises InvalidArgumentError when a ``_hoodie_is_deleted``
    row's ordering value is a decimal that a delete block cannot carry. Delete blocks hold
    decimals as ``decimal(30,15)``, and Hudi's Java writer refuses others too
    (``tryUpcastDecimal``); checked here, before the timeline changes, instead of in the task
    that writes the block."""
    if not ordering_field or ordering_field not in data.column_names:
        return
    values = data.column(ordering_field)
    deleted = deleted_mask(data)
    if deleted is None or not pa.types.is_decimal(values.type):
        return
    logged = values.filter(deleted)
    try:
        logged.cast(_LOGGED_DECIMAL)
    except pa.ArrowInvalid:
        bad = next(v for v in logged.to_pylist() if not _fits_logged_decimal(v, values.type))
        raise InvalidArgumentError(
            f"a _hoodie_is_deleted row's ordering value {ordering_field}={bad} does not fit "
            "decimal(30,15), the type of a merge-on-read delete block's ordering values"
        ) from None


def _fits_logged_decimal(value: object, kind: pa.DataType) -> bool:
    try:
        pa.array([value], kind).cast(_LOGGED_DECIMAL)
    except pa.ArrowInvalid:
        return False
    return True


# Java's Double.compareTo orders by doubleToLongBits with every NaN made the canonical one.
_CANONICAL_NAN_BITS = 0x7FF8000000000000


def java_ordered(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Ordering values in a form whose Arrow comparisons and sorts order them as Java's
    ``compareTo`` does, which Hudi's payloads compare them with: floating point values become
    int64 keys of ``Double.compareTo``'s total order (``-0.0`` below ``0.0``, NaN above
    everything), where Arrow takes ``-0.0`` equal to ``0.0`` and NaN neither greater nor less.
    Other types are returned as they are."""
    if not pa.types.is_floating(values.type):
        return values
    array = contiguous(values).cast(pa.float64())
    doubles = array.to_numpy(zero_copy_only=False)
    bits = doubles.view(np.int64)
    # Negative values: flipping every bit but the sign reverses their order, below the positives.
    keys = np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)
    keys = np.where(np.isnan(doubles), np.int64(_CANONICAL_NAN_BITS), keys)
    return pa.array(keys, pa.int64(), mask=array.is_null().to_numpy(zero_copy_only=False))


def dedup_by_key(data: pa.Table, ordering_field: str | None, global_keys: bool = False) -> pa.Table:
    """Keeps one record per (partition path, record key), or per record key when
    ``global_keys``: the greatest ordering value, ties to the record that came later in the
    batch (Hudi's preCombine)."""
    if data.num_rows <= 1:
        return data
    keys = data.column(RECORD_KEY)
    partitions = data.column(PARTITION_PATH)
    if _native.keys_distinct(contiguous(keys)):
        return data
    partitioned = not global_keys and len(pc.unique(partitions)) > 1
    group = pc.binary_join_element_wise(partitions, keys, "\x00") if partitioned else keys
    work = data.append_column("__group", group)
    sort_keys = [("__group", "ascending")]
    if ordering_field:
        # Nulls rank lowest: sort on validity first, so placement of nulls never matters.
        ordering = work.column(ordering_field)
        work = work.append_column("__valid", pc.is_valid(ordering))
        work = work.append_column("__ordering", java_ordered(ordering))
        sort_keys += [("__valid", "ascending"), ("__ordering", "ascending")]
    # Arrow's sort is stable, so within equal ordering values the later input row ends up last.
    indices = pc.sort_indices(work, sort_keys=sort_keys)
    ordered = work.take(indices)
    g = ordered.column("__group").combine_chunks()
    n = len(g)
    is_last = pc.not_equal(g.slice(0, n - 1), g.slice(1))
    mask = pa.concat_arrays([is_last, pa.array([True])])
    helpers = [c for c in ("__group", "__valid", "__ordering") if c in ordered.column_names]
    return ordered.filter(mask).drop_columns(helpers)


def validate_keys(keys: pa.ChunkedArray) -> None:
    if keys.null_count:
        raise InvalidRecordKeyError("record key is null")
    # Byte lengths come from the offsets; utf8_length would decode every key.
    if pc.any(pc.equal(pc.binary_length(keys), 0)).as_py():
        raise InvalidRecordKeyError("record key is empty")
