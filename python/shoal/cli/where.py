"""``shoal show --where``: filters written as text, read as the types of the columns they filter.

``COLUMN OP VALUE`` with OP one of ``= != < <= > >=``, or ``COLUMN in V1,V2,...``. Values are
text: numbers for numeric columns, ``true``/``false`` for booleans, ISO dates and times (times of
instant columns with their offset, e.g. ``2025-01-31T12:00:00Z``), decimals as written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from shoal.errors import InvalidArgumentError, InvalidOptionError
from shoal.read.filter_values import typed_filters
from shoal.read.filters import Filter

# Longest operators first, so "<=" is not read as "<" followed by "=...".
_CONDITION = re.compile(
    r"^\s*(?P<column>[^\s=!<>]+)\s*(?P<op><=|>=|!=|==|=|<|>|\s+in\s+)\s*(?P<value>.*?)\s*$"
)


def where_filters(
    conditions: Sequence[str], keys: Sequence[str], schema: pa.Schema | None, key_field: str | None = None
) -> list[Filter]:
    """The read filters of ``--where`` conditions and ``--key`` record keys (ANDed; several keys
    are any of them). ``key_field``: the field the keys are values of, for a table that stores
    no ``_hoodie_record_key``; None: the keys are record keys."""
    filters: list[Filter] = []
    for text in conditions:
        match = _CONDITION.match(text)
        if match is None:
            raise InvalidArgumentError(
                f"--where {text!r}: expected COLUMN OP VALUE (OP one of = != < <= > >=) or COLUMN in V1,V2"
            )
        column, op, value = match["column"], match["op"].strip(), match["value"]
        if schema is None or column not in schema.names:
            known = ", ".join(schema.names) if schema is not None else "none: the table has no commit"
            raise InvalidArgumentError(f"--where {text!r}: no column {column!r} (columns: {known})")
        kind = schema.field(column).type
        if op == "in":
            condition: Filter = (
                column,
                "in",
                [_value(f"--where {text!r}", column, kind, v.strip()) for v in value.split(",")],
            )
        else:
            condition = (column, "=" if op == "==" else op, _value(f"--where {text!r}", column, kind, value))
        try:
            filters.extend(typed_filters([condition], schema))
        except InvalidOptionError:
            raise InvalidArgumentError(
                f"--where {text!r}: {value!r} is not a {kind} value for {column!r}"
                + (
                    " (times of instants need their offset, e.g. 2025-01-31T12:00:00Z)"
                    if pa.types.is_timestamp(kind)
                    else ""
                )
            ) from None
    if keys and key_field is None:
        filters.append(("_hoodie_record_key", "in", list(keys)))
    elif keys:
        assert schema is not None and key_field is not None
        kind = schema.field(key_field).type
        filters.append((key_field, "in", [_value(f"--key {k!r}", key_field, kind, k) for k in keys]))
    return filters


def _value(what: str, column: str, kind: pa.DataType, value: str) -> Any:
    """``value`` as the Python value of a ``kind`` column; dates, times and decimals are left
    as text for :func:`typed_filters`. ``what``: the argument, for the error."""
    try:
        if pa.types.is_integer(kind):
            return int(value)
        if pa.types.is_floating(kind):
            return float(value)
        if pa.types.is_boolean(kind):
            low = value.lower()
            if low not in ("true", "false"):
                raise ValueError(value)
            return low == "true"
    except ValueError:
        raise InvalidArgumentError(f"{what}: {value!r} is not a {kind} value for {column!r}") from None
    return value
