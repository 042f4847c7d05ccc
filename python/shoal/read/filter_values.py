"""The values of the data source's ``filters`` option in the types of the columns they filter.

The option is JSON, which has no date, timestamp or decimal: a filter on such a column gives its
value as a string (``"2025-01-31"``, ``"2025-01-31T12:00:00Z"``, ``"12.50"``), or a number for a
decimal, and it is read here as the column's type, the Python value ``Table.read`` takes."""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from shoal.errors import InvalidOptionError
from shoal.read.filters import Filter


def typed_filters(filters: Sequence[Filter], schema: pa.Schema | None) -> tuple[Filter, ...]:
    """``filters`` with the values for date, timestamp and decimal columns of ``schema`` read
    as those types; other filters as they are (the read checks them against the columns)."""
    if schema is None:
        return tuple(filters)
    out = []
    for column, op, value in filters:
        if column in schema.names:
            kind = schema.field(column).type
            if isinstance(value, list):
                value = [_typed(column, kind, v) for v in value]
            else:
                value = _typed(column, kind, value)
        out.append((column, op, value))
    return tuple(out)


def _typed(column: str, kind: pa.DataType, value: Any) -> Any:
    if value is None:
        return None
    try:
        if pa.types.is_date(kind) and isinstance(value, str):
            return _dt.date.fromisoformat(value)
        if pa.types.is_timestamp(kind) and isinstance(value, str):
            return _timestamp(column, kind, value)
        if pa.types.is_decimal(kind) and isinstance(value, str | int | float) and not isinstance(value, bool):
            return decimal.Decimal(str(value))
    except (ValueError, decimal.InvalidOperation):
        raise InvalidOptionError(
            f"option 'filters': {value!r} is not a {kind} value for column {column!r}"
        ) from None
    return value


def _timestamp(column: str, kind: pa.TimestampType, value: str) -> _dt.datetime:
    """An ISO 8601 time; a column of instants (with a time zone) needs the value's offset
    (``Z`` for UTC), since the reader cannot know which zone a bare time means."""
    moment = _dt.datetime.fromisoformat(value)
    if kind.tz is not None and moment.tzinfo is None:
        raise InvalidOptionError(
            f"option 'filters': {value!r} for column {column!r} (instants, {kind}) needs its time "
            "zone offset, e.g. '2025-01-31T12:00:00Z'"
        )
    return moment
