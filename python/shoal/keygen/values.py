"""Column access and the string form Hudi gives each value in record keys and partition paths.

Apache Hudi turns a key or partition field into text with ``String.valueOf`` of the Avro value
(``HoodieAvroUtils.getNestedFieldValAsString``), after converting the ``date`` and ``decimal``
logical types. For Arrow data that means:

=====================  ==========================================================================
Arrow type             string form
=====================  ==========================================================================
int8 … int64, uint*    decimal digits (``-42``)
bool                   ``true`` / ``false``
string types           the value itself
float16/32, float64    Java ``Float.toString`` / ``Double.toString`` (``1.0``, ``3.14159``,
                       ``1.0E10``, ``NaN``), see :mod:`shoal.keygen.javafmt`
decimal                Java ``BigDecimal.toString`` (``12345.67890``, ``1.234E-7``, ``0E-10``)
date32 / date64        ISO ``LocalDate.toString`` (``2023-04-01``, ``+10000-01-01``)
timestamp              the Avro long: epoch **micros** (Avro ``timestamp-micros``, which Spark
                       and shoal write) for s/us/ns units, epoch **millis** for the ms unit —
                       Hudi does not format timestamps unless
                       ``...consistent.logical.timestamp.enabled`` is true; then they render as
                       ``java.sql.Timestamp.toString`` at millisecond precision
                       (``2023-04-01 12:01:00.0``), in UTC (Java uses the JVM's default zone)
dictionary             the form of the decoded value
null type              null
=====================  ==========================================================================

Binary, time-of-day, interval and nested types have no usable form (Java would print an object
identity such as ``[B@1b6d3586``) and are rejected.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from shoal.arrays import contiguous
from shoal.errors import InvalidRecordKeyError
from shoal.keygen.javafmt import java_double_to_string, java_float_to_string

__all__ = ["column", "first_true", "floor_div", "java_strings", "local_dates", "lpad_int", "signed_padded"]

_MS_PER_DAY = 86_400_000


def column(data: pa.Table | pa.RecordBatch, field: str, role: str) -> pa.Array:
    """The values of ``field`` as one contiguous array.

    ``field`` may be a dotted path into struct columns (``address.city``), as in Hudi; a top-level
    column whose name contains the dots wins. A null struct makes its children null.
    """
    names = data.schema.names
    if field in names:
        return contiguous(data.column(field))
    parts = field.split(".")
    if len(parts) < 2 or parts[0] not in names:
        raise InvalidRecordKeyError(f"{role} field {field!r} is not a column of the data (columns: {names})")
    values = contiguous(data.column(parts[0]))
    for depth, part in enumerate(parts[1:], start=1):
        if not pa.types.is_struct(values.type) or values.type.get_field_index(part) < 0:
            path = ".".join(parts[:depth])
            raise InvalidRecordKeyError(f"{role} field {field!r}: {path!r} has no struct field {part!r}")
        values = pc.struct_field(values, [values.type.get_field_index(part)])
    return values


def first_true(mask: pa.Array) -> int:
    """Index of the first true element of a boolean array (-1 if none)."""
    return int(pc.index(mask, pa.scalar(True)).as_py())


def java_strings(values: pa.Array, field: str, *, consistent_logical_timestamp: bool = False) -> pa.Array:
    """A ``string`` array with the Java string form of each value; nulls stay null."""
    t = values.type
    if pa.types.is_dictionary(t):
        dictionary = java_strings(
            values.dictionary, field, consistent_logical_timestamp=consistent_logical_timestamp
        )
        return dictionary.take(values.indices)
    if pa.types.is_string(t):
        return values
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return values.cast(pa.string())
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        # Arrow's decimal text follows Java's BigDecimal.toString (scientific below 1e-6).
        return values.cast(pa.string())
    if pa.types.is_floating(t):
        return _floats(values)
    if pa.types.is_date(t):
        return local_dates(_epoch_days(values))
    if pa.types.is_timestamp(t):
        if consistent_logical_timestamp:
            return _sql_timestamps(values)
        return _avro_timestamp_longs(values).cast(pa.string())
    if pa.types.is_null(t):
        return pa.nulls(len(values), pa.string())
    raise InvalidRecordKeyError(
        f"field {field!r} has type {t}, which Hudi cannot turn into a record key or partition value"
    )


def _floats(values: pa.Array) -> pa.Array:
    """Java Float/Double.toString.

    Arrow prints the same shortest round-trip digits as Java; for magnitudes in [1e-3, 1e7) Java's
    layout is Arrow's text with ``.0`` added to whole numbers. Other values (zero, very large or
    small, NaN, infinities) are formatted in Python, once per distinct value.
    """
    if values.type == pa.float16():
        values = values.cast(pa.float32())
    magnitude = pc.abs(values)
    plain = pc.fill_null(pc.and_(pc.greater_equal(magnitude, 1e-3), pc.less(magnitude, 1e7)), False)
    text = values.cast(pa.string())
    text = pc.if_else(pc.match_substring(text, "."), text, pc.binary_join_element_wise(text, ".0", ""))
    other = pc.and_(pc.invert(plain), values.is_valid())
    if not pc.any(other).as_py():
        return pc.if_else(plain, text, pa.scalar(None, pa.string()))
    rest = values.filter(other).dictionary_encode()
    fmt = java_double_to_string if values.type == pa.float64() else java_float_to_string
    formatted = pa.array([fmt(v) for v in rest.dictionary.to_pylist()], pa.string()).take(rest.indices)
    return pc.replace_with_mask(pc.if_else(plain, text, pa.scalar(None, pa.string())), other, formatted)


def _epoch_days(values: pa.Array) -> pa.Array:
    if values.type == pa.date32():
        return values.cast(pa.int32()).cast(pa.int64())
    return floor_div(values.cast(pa.int64()), _MS_PER_DAY)


def floor_div(values: pa.Array, divisor: int) -> pa.Array:
    """Integer division rounding toward negative infinity (Arrow's ``divide`` truncates)."""
    quotient = pc.divide(values, divisor)
    inexact_negative = pc.and_(pc.less(values, 0), pc.not_equal(pc.multiply(quotient, divisor), values))
    return pc.if_else(inexact_negative, pc.subtract(quotient, 1), quotient)


def lpad_int(values: pa.Array, width: int) -> pa.Array:
    """Non-negative integers as text, left-padded with zeros to ``width``."""
    text = values.cast(pa.string())
    return pc.utf8_lpad(text, width=width, padding="0") if width > 1 else text


def signed_padded(values: pa.Array, width: int) -> pa.Array:
    """Integers zero-padded to ``width`` digits after a ``-`` sign for negatives (Joda/Java style)."""
    digits = lpad_int(pc.abs(values), width)
    return pc.if_else(pc.less(values, 0), pc.binary_join_element_wise("-", digits, ""), digits)


def local_dates(days: pa.Array) -> pa.Array:
    """``java.time.LocalDate.toString`` of epoch days: ``yyyy-MM-dd``, 4+ digit signed years."""
    dates = days.cast(pa.int32()).cast(pa.date32())
    year = pc.year(dates)
    year_text = signed_padded(year, 4)
    year_text = pc.if_else(pc.greater(year, 9999), pc.binary_join_element_wise("+", year_text, ""), year_text)
    return pc.binary_join_element_wise(
        year_text, "-", lpad_int(pc.month(dates), 2), "-", lpad_int(pc.day(dates), 2), ""
    )


def _avro_timestamp_longs(values: pa.Array) -> pa.Array:
    unit = values.type.unit
    raw = values.cast(pa.int64())
    if unit == "s":
        return pc.multiply_checked(raw, 1_000_000)
    if unit == "ns":
        return floor_div(raw, 1000)
    return raw  # "ms" -> timestamp-millis, "us" -> timestamp-micros


def _sql_timestamps(values: pa.Array) -> pa.Array:
    """``java.sql.Timestamp.toString()`` of the Avro value, rendered in UTC.

    Hudi builds ``new Timestamp(millis)`` for ``timestamp-millis`` and ``new Timestamp(micros / 1000)``
    (a division truncating toward zero) for ``timestamp-micros``.
    """
    longs = _avro_timestamp_longs(values)
    millis = longs if values.type.unit == "ms" else pc.divide(longs, 1000)
    instants = millis.cast(pa.timestamp("ms"))
    ms = pc.millisecond(instants)
    fraction = pc.utf8_rtrim(lpad_int(ms, 3), characters="0")
    fraction = pc.if_else(pc.equal(ms, 0), "0", fraction)
    return pc.binary_join_element_wise(
        signed_padded(pc.year(instants), 4),
        "-",
        lpad_int(pc.month(instants), 2),
        "-",
        lpad_int(pc.day(instants), 2),
        " ",
        lpad_int(pc.hour(instants), 2),
        ":",
        lpad_int(pc.minute(instants), 2),
        ":",
        lpad_int(pc.second(instants), 2),
        ".",
        fraction,
        "",
    )
