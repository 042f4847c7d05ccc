"""The columns a base file of the table is written in: the table's schema, which a file written
before a schema change (a column or struct field added since, a type widened since) is brought up to when a
compaction or a copy-on-write merge rewrites its records, as Hudi writes them in the latest
commit's schema."""

from __future__ import annotations

import pyarrow as pa

from shoal import _native
from shoal.write.schema import META_COLUMNS, reads_as


def base_file_schema(table_schema: str | None) -> pa.Schema | None:
    """The columns of a base file of the table whose Avro schema is ``table_schema``: the meta
    columns, then the table's columns."""
    if not table_schema:
        return None
    data = _native.avro_to_arrow_schema(table_schema)
    meta = [pa.field(n, pa.string()) for n in META_COLUMNS]
    return pa.schema(meta + [f for f in data if f.name not in META_COLUMNS])


def written_schema(rows: pa.Schema, target: pa.Schema | None) -> pa.Schema | None:
    """The schema rows of schema ``rows`` are written in to a base file of schema ``target``;
    None when that is ``rows`` itself (the common case: no schema change since the slice's
    files were written). ``target``'s columns come in its order: a column the rows lack as a
    nullable one, a column a later write evolved (``int`` to ``long``, a struct given fields, ...) in
    its latest type,
    others as the rows hold them. A column ``target`` does not name (a meta column such as
    ``_hoodie_operation``) stays, after the column it follows in ``rows``."""
    if target is None:
        return None
    fields = []
    for f in target:
        if f.name not in rows.names:
            fields.append(f.with_nullable(True))
            continue
        held = rows.field(f.name)
        stored = held.type.value_type if pa.types.is_dictionary(held.type) else held.type
        fields.append(held.with_type(f.type) if reads_as(stored, f.type) else held)
    names = [f.name for f in fields]
    for i, f in enumerate(rows):
        if f.name not in target.names:
            at = names.index(rows[i - 1].name) + 1 if i else 0
            fields.insert(at, f)
            names.insert(at, f.name)
    # Without the rows' schema metadata (a base file's footer: its bloom filter among others),
    # which the written file does not take from them.
    schema = pa.schema(fields)
    return None if schema.equals(rows) else schema


def in_schema(rows: pa.Table, target: pa.Schema | None) -> pa.Table:
    """``rows`` in the schema a base file of schema ``target`` takes them (see
    :func:`written_schema`): ``rows`` itself when they are in it already."""
    schema = written_schema(rows.schema, target)
    if schema is None:
        return rows
    columns = []
    for f in schema:
        if f.name not in rows.column_names:
            columns.append(pa.nulls(rows.num_rows, f.type))
            continue
        column = rows.column(f.name)
        # Unchecked: a widening loses nothing, but for a long beyond 2^53 as a double, which
        # Java rounds the same way.
        columns.append(column if column.type == f.type else column.cast(f.type, safe=False))
    return pa.Table.from_arrays(columns, schema=schema)
