"""The columns a read returns: requested columns are checked against the table's schema, and
each comes back even where no file read holds it (a column added after those files were
written), as nulls; a read's columns take the types of the table's latest schema where a later
write widened them, as hudi-rs reads them."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from shoal.errors import InvalidArgumentError
from shoal.write.schema import reads_as


def requested_columns(columns: Sequence[str] | None) -> list[str] | None:
    """The names a read was asked for, each once, in the order first given (None: all).

    Raises:
        InvalidArgumentError: ``columns`` is a string (which would read as one column per
            character) or names something other than a string.
    """
    if columns is None:
        return None
    if isinstance(columns, str | bytes):
        raise InvalidArgumentError(
            f"columns must be a list of column names, got {columns!r}; use [{columns!r}]"
        )
    names = list(columns)
    odd = [c for c in names if not isinstance(c, str)]
    if odd:
        raise InvalidArgumentError(f"columns must be a list of column names, got {odd!r} among them")
    return list(dict.fromkeys(names))


def check_columns(
    columns: Sequence[str] | None, schema: pa.Schema | None, extra: Sequence[str] = (), what: str = "column"
) -> None:
    """Raises InvalidArgumentError for requested columns that neither the table's ``schema``
    nor ``extra`` (columns a read adds, such as an incremental read's delete marker) name. A
    table without a schema yet (no commit) has no columns to check against."""
    if columns is None or schema is None:
        return
    known = set(schema.names) | set(extra)
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise InvalidArgumentError(f"unknown {what}(s) {unknown}; the table has {schema.names}")


def project(table: pa.Table, columns: Sequence[str], schema: pa.Schema | None) -> pa.Table:
    """``table``'s ``columns``, once each and in that order; a column the table lacks is nulls
    of ``schema``'s type for it (left out when ``schema`` does not name it either)."""
    names = list(dict.fromkeys(columns))
    for name in names:
        if name not in table.column_names and schema is not None and name in schema.names:
            table = table.append_column(
                schema.field(name).with_nullable(True), pa.nulls(table.num_rows, schema.field(name).type)
            )
    return table.select([n for n in names if n in table.column_names])


def conform(table: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """``table`` (a read's rows) in the table's latest ``schema``: the columns no file read
    holds (a write added them later, or wrote them only in records it deleted) appended as
    nulls, and columns a later write evolved (a numeric type widened, a struct given fields)
    cast to their latest type. Without the
    schema metadata a base file's footer gave the rows: it describes that one file (its bloom
    filter, its key range, the Avro schema it was written in), not the table, as hudi-rs and
    :meth:`shoal.Table.read_batches` return none."""
    if schema is None:
        return table
    table = without_file_metadata(table)
    target = conformed_schema(table.schema, schema)
    if target.equals(table.schema):
        return table
    for field in target:
        if field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table.cast(target)


def conformed_schema(read: pa.Schema, schema: pa.Schema) -> pa.Schema:
    """The schema :func:`conform` gives rows of the ``read`` schema."""
    fields = []
    for field in read:
        if field.name in schema.names and reads_as(field.type, schema.field(field.name).type):
            field = field.with_type(schema.field(field.name).type)
        fields.append(field)
    fields += [f.with_nullable(True) for f in schema if f.name not in read.names]
    return pa.schema(fields)


def without_file_metadata(table: pa.Table) -> pa.Table:
    """``table`` without the schema metadata a base file's footer gave it (its bloom filter:
    hundreds of KB a file, which a read of thousands of small files would otherwise hold once
    per file until the slices are concatenated)."""
    if not table.schema.metadata:
        return table
    # pyarrow drops the row count of a table without columns when it replaces its schema.
    return table.replace_schema_metadata(None) if table.num_columns else rows_without_columns(len(table))


def rows_without_columns(n: int) -> pa.Table:
    """A table of ``n`` rows and no column (a read of no columns still counts rows)."""
    return pa.table({"rows": pa.nulls(n)}).select([])
