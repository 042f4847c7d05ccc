"""Filters as ``(column, op, value)`` tuples (the form hudi-rs and pyarrow's ``filters`` use)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import InvalidArgumentError
from shoal.read.projection import check_columns

Filter = tuple[str, str, Any]
_OPS = {"=", "==", "!=", "<", "<=", ">", ">=", "in", "not in"}


def to_expression(filters: Sequence[Filter] | None) -> pc.Expression | None:
    """ANDs the tuples into one Arrow expression; None when there are no filters."""
    if not filters:
        return None
    _check_shape(filters)
    expr: pc.Expression | None = None
    for f in filters:
        if not isinstance(f, tuple | list) or len(f) != 3 or f[1] not in _OPS or not isinstance(f[0], str):
            raise InvalidArgumentError(
                f"bad filter {f!r}: expected (column, op, value) with op in {sorted(_OPS)}"
            )
        col, op, value = f
        field = pc.field(col)
        if op in ("in", "not in") and not isinstance(value, list | tuple | set | frozenset):
            raise InvalidArgumentError(f"bad filter {f!r}: {op!r} takes a list of values")
        if op in ("in", "not in") and not value:
            # No value is in an empty set (Arrow cannot type an empty value set).
            term = pc.scalar(op == "not in")
        elif op in ("in", "not in") and all(v is None for v in value):
            # A set of nulls has no type to match a string column's: test for null directly
            # (``isin`` matches nulls to a null in the set, so this is the same answer).
            term = field.is_null() if op == "in" else field.is_valid()
        elif op in ("=", "=="):
            term = field == value
        elif op == "!=":
            term = field != value
        elif op == "<":
            term = field < value
        elif op == "<=":
            term = field <= value
        elif op == ">":
            term = field > value
        elif op == ">=":
            term = field >= value
        else:
            try:
                hit = field.isin(list(value))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
                raise InvalidArgumentError(f"bad filter {f!r}: {e}") from None
            term = hit if op == "in" else ~hit
        expr = term if expr is None else expr & term
    return expr


def _check_shape(filters: object) -> None:
    """Raises InvalidArgumentError for ``filters`` that are not a list of tuples: one tuple or a
    string would otherwise be read item by item, with a confusing message."""
    single = isinstance(filters, tuple) and len(filters) == 3 and isinstance(filters[0], str)
    if isinstance(filters, str | bytes) or single:
        raise InvalidArgumentError(
            f"filters must be a list of (column, op, value) tuples, got {filters!r}"
            + (f"; use [{filters!r}]" if single else "")
        )


def check_filters(filters: Sequence[Filter] | None, schema: pa.Schema | None) -> None:
    """Raises InvalidArgumentError for filters that name a column the table's ``schema`` does
    not have, or compare a column with values of a type it cannot be compared with. A table
    without a schema yet (no commit) has nothing to check against."""
    expr = to_expression(filters)
    if expr is None or schema is None:
        return
    names = list(dict.fromkeys(f[0] for f in filters or ()))
    check_columns(names, schema, what="filter column")
    try:
        # Binding the filters to the columns' types is what fails on a mistyped value; a row of
        # nulls, because Arrow checks some types only when it compares values (a naive datetime
        # against a column of UTC instants).
        pa.table({c: pa.nulls(1, schema.field(c).type) for c in names}).filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        given = list(filters or ())
        raise InvalidArgumentError(f"filters {given!r} do not fit the columns' types: {e}") from None


def apply_filters(table: pa.Table, filters: Sequence[Filter] | None) -> pa.Table:
    """The rows of ``table`` that pass ``filters``. A filter column the table lacks (its file was
    written before the column existed) is nulls there, and is compared as such."""
    expr = to_expression(filters)
    if expr is None:
        return table
    missing = [c for c in dict.fromkeys(f[0] for f in filters or ()) if c not in table.column_names]
    for name in missing:
        table = table.append_column(name, pa.nulls(table.num_rows, _value_type(filters or (), name)))
    try:
        table = table.filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        # A file's column type the table's schema does not show (check_filters passed them).
        given = list(filters or ())
        raise InvalidArgumentError(f"filters {given!r} do not fit a file's column types: {e}") from None
    return table.drop_columns(missing) if missing else table


def _value_type(filters: Sequence[Filter], name: str) -> pa.DataType:
    """The type of the values ``name`` is compared with (a set's for ``in``): the nulls that
    stand in for a missing column take it, so that the comparison kernels accept them."""
    _, op, value = next(f for f in filters if f[0] == name)
    if op in ("in", "not in"):
        return pa.array(list(value)).type
    return pa.scalar(value).type


def columns_of(filters: Sequence[Filter] | None) -> set[str]:
    return {f[0] for f in filters or []}
