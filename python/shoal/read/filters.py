"""Filters as ``(column, op, value)`` tuples (the form hudi-rs and pyarrow's ``filters`` use)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import InvalidArgumentError

Filter = tuple[str, str, Any]
_OPS = {"=", "==", "!=", "<", "<=", ">", ">=", "in", "not in"}


def to_expression(filters: Sequence[Filter] | None) -> pc.Expression | None:
    """ANDs the tuples into one Arrow expression; None when there are no filters."""
    if not filters:
        return None
    expr: pc.Expression | None = None
    for f in filters:
        if len(f) != 3 or f[1] not in _OPS:
            raise InvalidArgumentError(
                f"bad filter {f!r}: expected (column, op, value) with op in {sorted(_OPS)}"
            )
        col, op, value = f
        field = pc.field(col)
        if op in ("=", "=="):
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
        elif op == "in":
            term = field.isin(list(value))
        else:
            term = ~field.isin(list(value))
        expr = term if expr is None else expr & term
    return expr


def apply_filters(table: pa.Table, filters: Sequence[Filter] | None) -> pa.Table:
    """The rows of ``table`` that pass ``filters``. A filter column the table lacks (its file was
    written before the column existed) is nulls there, and is compared as such."""
    expr = to_expression(filters)
    if expr is None:
        return table
    missing = [c for c in dict.fromkeys(f[0] for f in filters or ()) if c not in table.column_names]
    for name in missing:
        table = table.append_column(name, pa.nulls(table.num_rows, _value_type(filters or (), name)))
    table = table.filter(expr)
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


def partition_values(partition_path: str, fields: Sequence[str], hive_style: bool) -> dict[str, str] | None:
    """The partition field values encoded in a path, or None if the path cannot be mapped."""
    if not fields:
        return {}
    segments = partition_path.split("/") if partition_path else []
    if hive_style:
        out = {}
        for seg in segments:
            name, sep, value = seg.partition("=")
            if not sep:
                return None
            out[name] = value
        return out if set(fields) <= set(out) else None
    if len(segments) != len(fields):
        return None
    return dict(zip(fields, segments, strict=False))


def prune_partitions(
    partitions: Sequence[str],
    filters: Sequence[Filter] | None,
    fields: Sequence[str],
    hive_style: bool,
    schema: pa.Schema | None,
) -> list[str]:
    """Keeps partitions whose path values can satisfy the filters on partition fields."""
    relevant = [f for f in filters or [] if f[0] in fields]
    if not relevant or schema is None:
        return list(partitions)
    expr = to_expression(relevant)
    kept = []
    for p in partitions:
        values = partition_values(p, fields, hive_style)
        if values is None:
            kept.append(p)
            continue
        arrays, names = [], []
        for name in columns_of(relevant):
            if name not in values or name not in schema.names:
                break
            typ = schema.field(name).type
            try:
                arrays.append(pa.array([values[name]]).cast(typ))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                break
            names.append(name)
        else:
            if pa.table(arrays, names=names).filter(expr).num_rows == 0:
                continue
        kept.append(p)
    return kept
