"""Reconciling incoming data with the table schema.

Evolution that every Hudi reader handles is allowed: new nullable columns, and numeric widening
(int -> long, float -> double). Anything else is a :class:`SchemaMismatchError`, raised before the
timeline changes.
"""

from __future__ import annotations

import pyarrow as pa

from shoal.errors import SchemaMismatchError

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
    keep = [n for n in table.column_names if n not in META_COLUMNS]
    return table.select(keep)


def normalize_types(table: pa.Table) -> pa.Table:
    """Maps types Hudi cannot store to ones it can: views to plain strings, timestamps to UTC
    instants in micros (or millis), dictionaries to their values (Avro has no dictionary or
    nanosecond types).

    A timestamp without a zone is taken as UTC, as Spark with a UTC session zone takes it: hudi-rs
    cannot read Avro's ``local-timestamp-*`` types, so every timestamp is an instant
    (``timestamp-micros``), and a base file must store it that way for later writes to merge."""
    fields = []
    changed = False
    for f in table.schema:
        t = _storable(f.type)
        changed |= t != f.type
        fields.append(pa.field(f.name, t, nullable=True))
    schema = pa.schema(fields)
    if not changed and all(f.nullable for f in table.schema):
        return table
    try:
        return table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaMismatchError(f"cannot store these column types: {e}") from e


def _storable(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _storable(t.value_type)
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
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
    if pa.types.is_null(t):
        return pa.string()
    return t


def widened_columns(table_schema: pa.Schema | None, data_schema: pa.Schema) -> list[str]:
    """The columns whose stored type ``data_schema`` widens from ``table_schema``'s (``int`` to
    ``long``, ``float`` to ``double``, ...)."""
    if table_schema is None:
        return []
    stored = {f.name: f.type for f in table_schema}
    return [
        f.name
        for f in data_schema
        if f.name in stored
        and (stored[f.name], f.type) in _WIDENINGS
        and _storable(stored[f.name]) != _storable(f.type)
    ]


def reconcile(incoming: pa.Table, table_schema: pa.Schema | None, fill_missing: bool = False) -> pa.Table:
    """Casts ``incoming`` (without meta columns) to the table schema plus any new nullable columns.

    Columns of the table missing from the batch are an error unless ``fill_missing``; then they
    are filled with nulls (Hudi's ``reconcile.schema``).
    """
    if table_schema is None:
        return incoming
    target_fields = []
    by_name = {f.name: f for f in incoming.schema}
    for f in table_schema:
        if f.name in META_COLUMNS:
            continue
        src = by_name.get(f.name)
        if src is None:
            if not fill_missing:
                raise SchemaMismatchError(
                    f"column {f.name!r} of the table is missing from the data "
                    "(set hoodie.datasource.write.reconcile.schema=true to write nulls)"
                )
            target_fields.append(f)
            continue
        if src.type != f.type and (src.type, f.type) not in _WIDENINGS:
            if (f.type, src.type) in _WIDENINGS:
                # The table column is narrower: evolve it to the wider incoming type.
                target_fields.append(pa.field(f.name, src.type))
                continue
            if not _same_shape(src.type, f.type):
                raise SchemaMismatchError(
                    f"column {f.name!r} has type {src.type} but the table stores {f.type}"
                )
        target_fields.append(f)
    known = {f.name for f in table_schema}
    target_fields.extend(pa.field(f.name, f.type) for f in incoming.schema if f.name not in known)
    target = pa.schema(target_fields)
    columns = []
    for f in target:
        if f.name in by_name:
            col = incoming.column(f.name)
            if col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaMismatchError(f"column {f.name!r}: {e}") from e
            columns.append(col)
        else:
            columns.append(pa.nulls(incoming.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=target)


def _same_shape(a: pa.DataType, b: pa.DataType) -> bool:
    """Nested types whose leaves only differ in field nullability or list item naming."""
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return [f.name for f in a] == [f.name for f in b] and all(
            _same_shape(x.type, y.type) for x, y in zip(a, b, strict=False)
        )
    if pa.types.is_list(a) and pa.types.is_list(b):
        return _same_shape(a.value_type, b.value_type)
    if pa.types.is_map(a) and pa.types.is_map(b):
        return _same_shape(a.key_type, b.key_type) and _same_shape(a.item_type, b.item_type)
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return a.unit == b.unit
    return a == b
