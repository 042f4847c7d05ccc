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
