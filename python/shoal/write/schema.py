"""Reconciling incoming data with the table schema.

Evolution that every Hudi reader handles is allowed: new nullable columns and struct fields, and
numeric widening (int -> long, float -> double), also within structs, lists and maps. Anything
else is a :class:`SchemaMismatchError`, raised before the timeline changes.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.errors import InvalidArgumentError, SchemaMismatchError, UnsupportedError

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
IS_DELETED_COLUMN = "_hoodie_is_deleted"

_WIDENINGS = {
    (pa.int8(), pa.int16()),
    (pa.int8(), pa.int32()),
    (pa.int8(), pa.int64()),
    (pa.int16(), pa.int32()),
    (pa.int16(), pa.int64()),
    (pa.int32(), pa.int64()),
    (pa.float32(), pa.float64()),
    (pa.int32(), pa.float64()),
    (pa.int64(), pa.float64()),
    (pa.string(), pa.large_string()),
    (pa.large_string(), pa.string()),
    (pa.binary(), pa.large_binary()),
    (pa.large_binary(), pa.binary()),
}


def strip_meta_columns(table: pa.Table) -> pa.Table:
    """``table`` without Hudi's meta columns. Raises InvalidArgumentError when two columns (or
    two fields of a struct) share a name: a record cannot hold both, and selecting by name would
    fail with a bare KeyError."""
    check_unique_names(table.schema)
    keep = [n for n in table.column_names if n not in META_COLUMNS]
    return table.select(keep)


def check_unique_names(fields: pa.Schema | pa.StructType, path: str = "") -> None:
    """Raises InvalidArgumentError naming the first column or struct field whose name repeats."""
    names = [f.name for f in fields]
    repeated = [n for n, count in Counter(names).items() if count > 1]
    if repeated:
        what = f"struct column {path!r} has two fields" if path else "the data has two columns"
        raise InvalidArgumentError(f"{what} named {repeated[0]!r}; column names must be unique")
    for f in fields:
        for struct in _structs_in(f.type):
            check_unique_names(struct, f"{path}.{f.name}" if path else f.name)


def _structs_in(t: pa.DataType) -> list[pa.StructType]:
    """The struct types directly within ``t``: itself, or its list items, map values or
    dictionary values (looking through those containers)."""
    if pa.types.is_struct(t):
        return [t]
    if _is_list_like(t):
        return _structs_in(t.value_type)
    if pa.types.is_map(t):
        return _structs_in(t.item_type)
    if pa.types.is_dictionary(t):
        return _structs_in(t.value_type)
    return []


def normalize_types(table: pa.Table) -> pa.Table:
    """Maps types Hudi cannot store to ones it can: views to plain strings and lists, unsigned
    integers to the signed types that hold them (Avro has no unsigned types), timestamps to UTC
    instants in micros (or millis), dictionaries to their values (Avro has no dictionary or
    nanosecond types).

    A timestamp without a zone is taken as UTC, as Spark with a UTC session zone takes it: hudi-rs
    cannot read Avro's ``local-timestamp-*`` types, so every timestamp is an instant
    (``timestamp-micros``), and a base file must store it that way for later writes to merge.

    A column of a type with no mapping is left as it is: :func:`reconcile` refuses it when its
    records are written, while a delete, which only reads the key columns, ignores it."""
    columns = []
    changed = False
    for f, col in zip(table.schema, table.columns, strict=True):
        t = _storable(f.type)
        if t != f.type and unsupported_reason(t) is None:
            col = _cast_column(f.name, col, t)
            changed = True
        columns.append(col)
    if not changed and all(f.nullable for f in table.schema):
        return table
    schema = pa.schema([pa.field(f.name, c.type) for f, c in zip(table.schema, columns, strict=True)])
    return pa.Table.from_arrays(columns, schema=schema)


def _cast_column(name: str, col: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    try:
        if not _has_list_view(col.type):
            return col.cast(target)
        return pa.chunked_array([_cast_views(chunk, target) for chunk in col.chunks], type=target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaMismatchError(f"cannot store column {name!r} of type {col.type} as {target}: {e}") from e


def _has_list_view(t: pa.DataType) -> bool:
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_list_view(f.type) for f in t)
    if pa.types.is_map(t):
        return _has_list_view(t.key_type) or _has_list_view(t.item_type)
    if _is_list_like(t) or pa.types.is_dictionary(t):
        return _has_list_view(t.value_type)
    return False


def _cast_views(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """``arr.cast(target)`` for an array holding list views. pyarrow 26 casts a list view to a
    list wrongly (an invalid array, or empty lists), so lists are rebuilt from their values and
    lengths here, and containers around them child by child."""
    t = arr.type
    if not _has_list_view(t):
        return arr.cast(target)
    if pa.types.is_dictionary(t):
        return _cast_views(arr.dictionary_decode(), target)
    if pa.types.is_map(t):
        # A map is a list of key/value structs: convert it as one and view the result back.
        entries = pa.struct([t.key_field, t.item_field])
        as_list = arr.view(pa.list_(pa.field("entries", entries, nullable=False)))
        target_entries = pa.struct([target.key_field, target.item_field])
        converted = _cast_views(as_list, pa.list_(pa.field("entries", target_entries, nullable=False)))
        return converted.view(target)
    if pa.types.is_struct(t):
        children = [_cast_views(c, f.type) for c, f in zip(arr.flatten(), target, strict=True)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=arr.is_null())
    # A list or list view: flatten() yields exactly the values the lists show, in order.
    values = _cast_views(arr.flatten(), target.value_type)
    lengths = pc.fill_null(pc.list_value_length(arr), 0).cast(pa.int64())
    offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(lengths)])
    if pa.types.is_large_list(target):
        return pa.LargeListArray.from_arrays(offsets, values, type=target, mask=arr.is_null())
    return pa.ListArray.from_arrays(offsets.cast(pa.int32()), values, type=target, mask=arr.is_null())


def _is_list_like(t: pa.DataType) -> bool:
    return (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
        or pa.types.is_fixed_size_list(t)
    )


def _storable(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _storable(t.value_type)
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    # The types the Avro schema records them as (int, long), so that the next write of the same
    # input matches the table schema; every value fits.
    if pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return pa.int32()
    if pa.types.is_uint32(t):
        return pa.int64()
    if pa.types.is_timestamp(t):
        return pa.timestamp("ms" if t.unit == "ms" else "us", tz="UTC")
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(_storable(t.value_type))
    if pa.types.is_list(t):
        return pa.list_(_storable(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _storable(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_storable(t.key_type), _storable(t.item_type))
    if pa.types.is_null(t):
        return pa.string()
    return t


def unsupported_reason(t: pa.DataType) -> str | None:
    """Why a column of (normalized) type ``t`` cannot be written, or None when it can: the types
    the Avro mapping of the Rust core (``arrow_to_avro_schema``) knows, which are also those a
    parquet base file and a log block store."""
    if isinstance(t, pa.BaseExtensionType):
        return f"{t} is an extension type; cast the column to its storage type {t.storage_type}"
    if (
        pa.types.is_boolean(t)
        or pa.types.is_int8(t)
        or pa.types.is_int16(t)
        or pa.types.is_int32(t)
        or pa.types.is_int64(t)
        or pa.types.is_float32(t)
        or pa.types.is_float64(t)
        or pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_date32(t)
    ):
        return None
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        if t in (pa.time32("ms"), pa.time64("us")):
            return None
        return f"{t} has no Avro type (time-millis is time32[ms], time-micros is time64[us])"
    if pa.types.is_timestamp(t):
        return None if t.unit in ("ms", "us") else f"{t}: timestamps are stored in ms or us"
    if pa.types.is_decimal128(t):
        if 1 <= t.precision <= 38 and t.scale >= 0:
            return None
        return f"{t}: a decimal's precision must be 1 to 38 and its scale non-negative"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return unsupported_reason(t.value_type)
    if pa.types.is_struct(t):
        if t.num_fields == 0:
            return f"{t} has no fields"
        return next((r for r in (unsupported_reason(f.type) for f in t) if r is not None), None)
    if pa.types.is_map(t):
        if not pa.types.is_string(t.key_type):
            return f"{t}: Avro map keys are strings"
        return unsupported_reason(t.item_type)
    return f"{t} has no Avro type"


def check_storable(schema: pa.Schema) -> None:
    """Raises UnsupportedError naming the first column of ``schema`` (normalized by
    :func:`normalize_types`) whose type shoal cannot write, and InvalidArgumentError for a name
    that is not a valid Avro name; both before any instant is created."""
    for f in schema:
        reason = unsupported_reason(f.type)
        if reason is not None:
            raise UnsupportedError(f"column {f.name!r} has type {f.type}, which shoal cannot store: {reason}")
    # The Avro schema each base file and log block records is derived from exactly this; its
    # name checks fail here rather than in a write task, after the write has started.
    _native.arrow_to_avro_schema(schema, "record", "")


def is_widening(stored: pa.DataType, wider: pa.DataType) -> bool:
    """Whether a write may change a column stored as ``stored`` to ``wider`` (``int`` to ``long``,
    ``float`` to ``double``, ...): the schema evolution Hudi allows."""
    return (stored, wider) in _WIDENINGS


def reads_as(held: pa.DataType, latest: pa.DataType) -> bool:
    """Whether values a file holds as ``held`` read as ``latest``, a type a later write evolved
    the column to: a widening (``int`` to ``long``, ...), or a struct that gained fields (at any
    depth, also within lists and maps), whose missing fields read as nulls."""
    if is_widening(held, latest):
        return True
    if pa.types.is_struct(held) and pa.types.is_struct(latest):
        later = {f.name: f.type for f in latest}
        return held != latest and all(
            f.name in later and (f.type == later[f.name] or reads_as(f.type, later[f.name])) for f in held
        )
    if pa.types.is_list(held) and pa.types.is_list(latest):
        return reads_as(held.value_type, latest.value_type)
    if pa.types.is_map(held) and pa.types.is_map(latest):
        return held.key_type == latest.key_type and reads_as(held.item_type, latest.item_type)
    return False


def widened_columns(table_schema: pa.Schema | None, data_schema: pa.Schema) -> list[str]:
    """The columns whose stored type a write of (reconciled) ``data_schema`` changes from
    ``table_schema``'s: widened (``int`` to ``long``, ``float`` to ``double``, ...) or evolved
    within (a struct gaining fields, also within lists and maps)."""
    if table_schema is None:
        return []
    stored = {f.name: f.type for f in table_schema}
    return [
        f.name
        for f in data_schema
        if f.name in stored
        and not _stores_as(f.type, stored[f.name])
        and _storable(stored[f.name]) != _storable(f.type)
    ]


def reconcile(incoming: pa.Table, table_schema: pa.Schema | None, fill_missing: bool = False) -> pa.Table:
    """Casts ``incoming`` (without meta columns) to the table schema plus any new nullable columns.

    Columns of the table missing from the batch are an error unless ``fill_missing``; then they
    are filled with nulls (Hudi's ``reconcile.schema``). A column of a type shoal cannot store is
    an UnsupportedError (see :func:`check_storable`).
    """
    check_storable(incoming.schema)
    if table_schema is None:
        return incoming
    incoming = _null_fields_as_stored(incoming, table_schema)
    target_fields = []
    by_name = {f.name: f for f in incoming.schema}
    for f in table_schema:
        if f.name in META_COLUMNS:
            continue
        src = by_name.get(f.name)
        if src is None:
            if not fill_missing:
                raise _missing(f"column {f.name!r}")
            target_fields.append(f)
            continue
        # A column of nulls only fits any type: it changes nothing in the table's schema.
        if src.type != f.type and not _all_null(incoming.column(f.name)):
            f = f.with_type(_evolved(f.type, src.type, fill_missing, f.name))
        target_fields.append(f)
    known = {f.name for f in table_schema}
    target_fields.extend(pa.field(f.name, f.type) for f in incoming.schema if f.name not in known)
    target = pa.schema(target_fields)
    columns = []
    for f in target:
        if f.name in by_name:
            col = incoming.column(f.name)
            if col.type != f.type and _all_null(col):
                col = pa.chunked_array([pa.nulls(len(col), f.type)])
            elif col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaMismatchError(f"column {f.name!r}: {e}") from e
            columns.append(col)
        else:
            columns.append(pa.nulls(incoming.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=target)


def _null_fields_as_stored(incoming: pa.Table, table_schema: pa.Schema) -> pa.Table:
    """``incoming`` with every nested field (of a struct, also within lists and maps) whose values
    are all null given the type the table stores it in, as a column of nulls only is taken at
    the top level (see :func:`_all_null`): pyarrow types a field that holds only None (``{"a": 1,
    "in": None}``) ``null``, which :func:`normalize_types` made ``string``, and the write would
    otherwise be refused as changing the field's type."""
    stored = {f.name: f.type for f in table_schema}
    for i, f in enumerate(incoming.schema):
        target = stored.get(f.name)
        col = incoming.column(i)
        if target is None or col.num_chunks == 0 or not _strings_for_other_types(col.type, target):
            continue
        arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        filled = _fill_null_fields(arr, target)
        if filled is not arr:
            incoming = incoming.set_column(i, pa.field(f.name, filled.type), pa.chunked_array([filled]))
    return incoming


def _strings_for_other_types(src: pa.DataType, stored: pa.DataType) -> bool:
    """Whether ``src`` has, within a struct (also in lists and maps), a ``string`` field (the
    type :func:`normalize_types` gives a field of None) where ``stored`` holds another type."""
    if pa.types.is_struct(src) and pa.types.is_struct(stored):
        by_name = {f.name: f.type for f in stored}
        return any(
            f.name in by_name
            and (
                (pa.types.is_string(f.type) and not _stores_as(f.type, by_name[f.name]))
                or _strings_for_other_types(f.type, by_name[f.name])
            )
            for f in src
        )
    if pa.types.is_list(src) and pa.types.is_list(stored):
        if pa.types.is_string(src.value_type) and not _stores_as(src.value_type, stored.value_type):
            return True
        return _strings_for_other_types(src.value_type, stored.value_type)
    if pa.types.is_map(src) and pa.types.is_map(stored):
        if pa.types.is_string(src.item_type) and not _stores_as(src.item_type, stored.item_type):
            return True
        return _strings_for_other_types(src.item_type, stored.item_type)
    return False


def _fill_null_fields(arr: pa.Array, stored: pa.DataType) -> pa.Array:
    """``arr`` (of a struct, list or map type) with each field within that holds only nulls, in a
    type ``stored`` does not take, replaced by nulls of the type ``stored`` has for it; ``arr``
    itself when there is none. A field of an empty batch is left as it is: its type is all the
    batch says (Spark checks its input's schema on one)."""
    t = arr.type
    if pa.types.is_struct(t) and pa.types.is_struct(stored):
        by_name = {f.name: f.type for f in stored}
        children = arr.flatten()
        filled = []
        for f, child in zip(t, children, strict=True):
            target = by_name.get(f.name)
            if target is None or child.type == target:
                filled.append(child)
            elif len(child) and child.null_count == len(child) and not _stores_as(child.type, target):
                filled.append(pa.nulls(len(child), target))
            else:
                filled.append(_fill_null_fields(child, target))
        if all(x is y for x, y in zip(filled, children, strict=True)):
            return arr
        fields = [f.with_type(c.type) for f, c in zip(t, filled, strict=True)]
        return pa.StructArray.from_arrays(filled, fields=fields, mask=arr.is_null())
    if pa.types.is_map(t) and pa.types.is_map(stored):
        # A map is a list of key/value structs: fill it as one and view the result back.
        entries = pa.list_(pa.field("entries", pa.struct([t.key_field, t.item_field]), nullable=False))
        stored_entries = pa.list_(pa.struct([t.key_field.with_type(stored.key_type), stored.item_field]))
        as_list = arr.view(entries)
        filled_list = _fill_null_fields(as_list, stored_entries)
        if filled_list is as_list:
            return arr
        item = filled_list.type.value_type.field(1)
        return filled_list.view(pa.map_(t.key_field, t.item_field.with_type(item.type)))
    if pa.types.is_list(t) and pa.types.is_list(stored):
        values = arr.flatten()
        target = stored.value_type
        if values.type == target:
            return arr
        if len(values) and values.null_count == len(values) and not _stores_as(values.type, target):
            filled = pa.nulls(len(values), target)
        else:
            filled = _fill_null_fields(values, target)
        if filled is values:
            return arr
        lengths = pc.fill_null(pc.list_value_length(arr), 0).cast(pa.int32())
        offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths)])
        value_field = t.value_field.with_type(filled.type)
        return pa.ListArray.from_arrays(offsets, filled, type=pa.list_(value_field), mask=arr.is_null())
    return arr


def _missing(what: str) -> SchemaMismatchError:
    """The error for a column or nested field of the table that a write lacks."""
    return SchemaMismatchError(
        f"{what} of the table is missing from the data "
        "(set hoodie.datasource.write.reconcile.schema=true to write nulls)"
    )


def _evolved(stored: pa.DataType, src: pa.DataType, fill_missing: bool, name: str) -> pa.DataType:
    """The type of a column (or nested field) ``name`` stored as ``stored`` once a write of
    ``src`` values has gone in, as Hudi evolves a table's schema: ``stored`` when it takes the
    values as they are (see :func:`_stores_as`), the wider type when the write widens it, and,
    within structs (also in lists and maps), the stored fields in their order, evolved the same
    way, then the write's new fields as nullable ones. A stored field the write lacks is a
    SchemaMismatchError unless ``fill_missing`` (Hudi's ``reconcile.schema``), which keeps it
    for nulls. Anything else is a SchemaMismatchError."""
    if _stores_as(src, stored):
        return stored
    if is_widening(stored, src):
        return src
    if pa.types.is_struct(stored) and pa.types.is_struct(src):
        incoming = {f.name: f for f in src}
        fields = []
        for f in stored:
            g = incoming.get(f.name)
            if g is None:
                if not fill_missing:
                    raise _missing(f"field {name}.{f.name}")
                fields.append(f)
            else:
                fields.append(f.with_type(_evolved(f.type, g.type, fill_missing, f"{name}.{f.name}")))
        known = {f.name for f in stored}
        fields += [g.with_nullable(True) for g in src if g.name not in known]
        return pa.struct(fields)
    if pa.types.is_list(stored) and pa.types.is_list(src):
        item = _evolved(stored.value_type, src.value_type, fill_missing, f"{name}.element")
        return pa.list_(stored.value_field.with_type(item))
    if pa.types.is_map(stored) and pa.types.is_map(src) and _stores_as(src.key_type, stored.key_type):
        item = _evolved(stored.item_type, src.item_type, fill_missing, f"{name}.value")
        return pa.map_(stored.key_field, stored.item_field.with_type(item))
    raise SchemaMismatchError(f"column {name!r} has type {src} but the table stores {stored}")


def _stores_as(src: pa.DataType, stored: pa.DataType) -> bool:
    """Whether values of type ``src`` can be written into a column stored as ``stored`` without
    changing the table's schema: the same type up to field nullability and list item naming,
    a type ``stored`` widens (``int`` into ``long``, also within structs, lists and maps, as at
    the top level), a decimal with no more digits before or after the point, or a timestamp in
    another unit (the cast that follows refuses one that would lose precision, such as micros
    into a millis column)."""
    if src == stored or (src, stored) in _WIDENINGS:
        return True
    if pa.types.is_struct(src) and pa.types.is_struct(stored):
        return [f.name for f in src] == [f.name for f in stored] and all(
            _stores_as(x.type, y.type) for x, y in zip(src, stored, strict=True)
        )
    if pa.types.is_list(src) and pa.types.is_list(stored):
        return _stores_as(src.value_type, stored.value_type)
    if pa.types.is_map(src) and pa.types.is_map(stored):
        return _stores_as(src.key_type, stored.key_type) and _stores_as(src.item_type, stored.item_type)
    if pa.types.is_decimal(src) and pa.types.is_decimal(stored):
        # Fewer digits on both sides of the point (Spark infers decimal(37,10) where a table
        # has decimal(38,10)): every value is one of the stored type.
        return src.scale <= stored.scale and src.precision - src.scale <= stored.precision - stored.scale
    return pa.types.is_timestamp(src) and pa.types.is_timestamp(stored)


def _all_null(col: pa.ChunkedArray) -> bool:
    """Whether every value of ``col`` is null, as in a batch in which an optional column
    happens to be empty (pandas and pyarrow type it null, which :func:`normalize_types` makes
    string). An empty column is not: the schema check of an empty batch (a Spark write checks
    its input's schema on one before any job) must still see a type the table cannot take."""
    return len(col) > 0 and col.null_count == len(col)
