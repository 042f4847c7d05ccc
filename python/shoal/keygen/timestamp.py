"""Hudi's ``TimestampBasedKeyGenerator``: partition paths formatted from a time field.

The partition field is read as a point in time and printed with
``hoodie.keygen.timebased.output.dateformat`` (a Joda pattern such as ``yyyy/MM/dd/HH``, which
makes four directory levels). How the field is read depends on its Arrow type and on
``hoodie.keygen.timebased.timestamp.type``:

* integers, floats (truncated) and decimals (truncated) are counts of a unit since the epoch:
  seconds for ``UNIX_TIMESTAMP``, milliseconds for ``EPOCHMILLISECONDS``, microseconds for
  ``EPOCHMICROSECONDS``, ``hoodie.keygen.timebased.timestamp.scalar.time.unit`` (``SECONDS`` by
  default; ``NANOSECONDS`` ... ``DAYS``) for ``SCALAR``;
* strings need ``DATE_STRING`` (or ``MIXED``) and are parsed with
  ``hoodie.keygen.timebased.input.dateformat`` — a comma separated list of patterns, the first
  that matches winning;
* Arrow timestamp and date columns are instants already and are used as such, whatever the type
  (Hudi reads the Avro long through the configured unit instead, which is only meaningful when the
  unit matches — e.g. ``SCALAR`` with ``DAYS`` for dates, as Hudi's Flink writer configures).

Time zones follow Hudi: ``hoodie.keygen.timebased.timezone`` sets input and output zone at once,
otherwise ``...input.timezone`` / ``...output.timezone``. A date string is read in the input zone
unless it carries its own offset; its partition value is printed in the output zone, else in the
input zone, else in the offset the string carried. Where Hudi would fall back to the JVM's default
zone, shoal uses UTC.

A null time takes Hudi's default value: one unit after the epoch (for ``DATE_STRING``, one
millisecond printed with the first input pattern and parsed back), so it lands in a
``1970/01/01``-like partition rather than ``__HIVE_DEFAULT_PARTITION__``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import InvalidOptionError, InvalidRecordKeyError
from shoal.keygen import options as opt
from shoal.keygen.base import Data, KeyGenerator, PartitionPart, hudi_class
from shoal.keygen.javadate import UTC, InputFormat, OutputFormat, Zone, parse_zone
from shoal.keygen.partition import segments_from_values
from shoal.keygen.values import column, floor_div

__all__ = ["TimestampBasedKeyGenerator", "TimestampOptions", "TimestampPartitionPart"]

TIMESTAMP_TYPES = (
    "UNIX_TIMESTAMP",
    "DATE_STRING",
    "MIXED",
    "EPOCHMILLISECONDS",
    "EPOCHMICROSECONDS",
    "SCALAR",
)
# java.util.concurrent.TimeUnit -> (multiplier to millis, divisor to millis)
_TIME_UNITS = {
    "NANOSECONDS": (1, 1_000_000),
    "MICROSECONDS": (1, 1000),
    "MILLISECONDS": (1, 1),
    "SECONDS": (1000, 1),
    "MINUTES": (60_000, 1),
    "HOURS": (3_600_000, 1),
    "DAYS": (86_400_000, 1),
}
_TYPE_UNITS = {
    "UNIX_TIMESTAMP": "SECONDS",
    "EPOCHMILLISECONDS": "MILLISECONDS",
    "EPOCHMICROSECONDS": "MICROSECONDS",
}
_MS_PER_DAY = 86_400_000


@dataclass(frozen=True)
class TimestampOptions:
    """The ``hoodie.keygen.timebased.*`` settings.

    Attributes:
        timestamp_type: UNIX_TIMESTAMP, DATE_STRING, MIXED, EPOCHMILLISECONDS, EPOCHMICROSECONDS or SCALAR.
        output_dateformat: Joda pattern of the partition value, e.g. ``yyyy/MM/dd``.
        input_dateformat: Joda pattern(s) of date strings (DATE_STRING/MIXED), separated by
            ``input_dateformat_delimiter``.
        scalar_time_unit: the unit of SCALAR numbers (a ``java.util.concurrent.TimeUnit`` name).
        timezone, input_timezone, output_timezone: Java time zone ids (``UTC``, ``GMT+08:00``,
            ``Asia/Kolkata``); ``timezone`` sets both sides.
    """

    timestamp_type: str
    output_dateformat: str
    input_dateformat: str | None = None
    input_dateformat_delimiter: str = ","
    scalar_time_unit: str = "SECONDS"
    timezone: str | None = None
    input_timezone: str | None = None
    output_timezone: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "timestamp_type", self.timestamp_type.strip().upper())
        object.__setattr__(self, "scalar_time_unit", self.scalar_time_unit.strip().upper())
        if self.timestamp_type not in TIMESTAMP_TYPES:
            raise InvalidOptionError(
                f"{opt.TIMESTAMP_TYPE} must be one of {', '.join(TIMESTAMP_TYPES)}, "
                f"got {self.timestamp_type!r}"
            )
        if self.scalar_time_unit not in _TIME_UNITS:
            raise InvalidOptionError(
                f"{opt.TIMESTAMP_SCALAR_TIME_UNIT} must be one of {', '.join(_TIME_UNITS)}, "
                f"got {self.scalar_time_unit!r}"
            )
        if not self.output_dateformat:
            raise InvalidOptionError(f"{opt.TIMESTAMP_OUTPUT_DATE_FORMAT} is required")
        if self.parses_strings and not self.input_dateformat:
            raise InvalidOptionError(
                f"{opt.TIMESTAMP_INPUT_DATE_FORMAT} is required for {self.timestamp_type}"
            )

    @property
    def parses_strings(self) -> bool:
        return self.timestamp_type in ("DATE_STRING", "MIXED")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TimestampOptions:
        """Read the options (also under Hudi's deprecated ``hoodie.deltastreamer.keygen.timebased.`` prefix).

        Hudi 0.14 did not persist ``timestamp.type`` in ``hoodie.properties``: when it is absent but
        an input date format is present, DATE_STRING is assumed.
        """

        def get(key: str) -> str | None:
            suffix = key[len(opt.TIMEBASED_PREFIX) :]
            value = opt.get_option(props, key, opt.TIMEBASED_DEPRECATED_PREFIX + suffix)
            return value if value is None or value.strip() else None

        parser = opt.get_option(props, opt.DATE_TIME_PARSER_CLASS)
        if parser and parser.strip() and parser.strip() != opt.DEFAULT_DATE_TIME_PARSER_CLASS:
            raise InvalidOptionError(f"{opt.DATE_TIME_PARSER_CLASS}={parser!r} is not supported")
        timestamp_type = get(opt.TIMESTAMP_TYPE)
        input_format = get(opt.TIMESTAMP_INPUT_DATE_FORMAT)
        if timestamp_type is None:
            if input_format is None:
                raise InvalidOptionError(
                    f"{opt.TIMESTAMP_TYPE} is required by the timestamp-based key generator"
                )
            timestamp_type = "DATE_STRING"
        return cls(
            timestamp_type=timestamp_type,
            output_dateformat=get(opt.TIMESTAMP_OUTPUT_DATE_FORMAT) or "",
            input_dateformat=input_format,
            input_dateformat_delimiter=get(opt.TIMESTAMP_INPUT_DATE_FORMAT_DELIMITER) or ",",
            scalar_time_unit=get(opt.TIMESTAMP_SCALAR_TIME_UNIT) or "SECONDS",
            timezone=get(opt.TIMESTAMP_TIMEZONE),
            input_timezone=get(opt.TIMESTAMP_INPUT_TIMEZONE),
            output_timezone=get(opt.TIMESTAMP_OUTPUT_TIMEZONE),
        )

    def to_properties(self) -> dict[str, str]:
        """The ``hoodie.keygen.timebased.*`` entries that reproduce these options."""
        props = {
            opt.TIMESTAMP_TYPE: self.timestamp_type,
            opt.TIMESTAMP_OUTPUT_DATE_FORMAT: self.output_dateformat,
        }
        if self.input_dateformat is not None:
            props[opt.TIMESTAMP_INPUT_DATE_FORMAT] = self.input_dateformat
        if self.input_dateformat_delimiter != ",":
            props[opt.TIMESTAMP_INPUT_DATE_FORMAT_DELIMITER] = self.input_dateformat_delimiter
        if self.timestamp_type == "SCALAR":
            props[opt.TIMESTAMP_SCALAR_TIME_UNIT] = self.scalar_time_unit
        for key, value in (
            (opt.TIMESTAMP_TIMEZONE, self.timezone),
            (opt.TIMESTAMP_INPUT_TIMEZONE, self.input_timezone),
            (opt.TIMESTAMP_OUTPUT_TIMEZONE, self.output_timezone),
        ):
            if value is not None:
                props[key] = value
        return props


class TimestampPartitionPart(PartitionPart):
    """A partition level holding a formatted time (see the module documentation)."""

    def __init__(self, field: str, options: TimestampOptions) -> None:
        self.field = field
        self.options = options
        self._output = OutputFormat(options.output_dateformat, opt.TIMESTAMP_OUTPUT_DATE_FORMAT)
        self._input: InputFormat | None = None
        if options.input_dateformat is not None:
            try:
                patterns = re.split(options.input_dateformat_delimiter, options.input_dateformat)
            except re.error as e:
                raise InvalidOptionError(f"{opt.TIMESTAMP_INPUT_DATE_FORMAT_DELIMITER}: {e}") from e
            patterns = [p.strip() for p in patterns if p.strip()]
            self._input = InputFormat(patterns, opt.TIMESTAMP_INPUT_DATE_FORMAT)
        if options.timezone is not None:
            both = parse_zone(options.timezone, opt.TIMESTAMP_TIMEZONE)
            self._input_zone, self._output_zone = both, both
        else:
            self._input_zone = parse_zone(options.input_timezone, opt.TIMESTAMP_INPUT_TIMEZONE)
            self._output_zone = parse_zone(options.output_timezone, opt.TIMESTAMP_OUTPUT_TIMEZONE)
        unit = _TYPE_UNITS.get(options.timestamp_type, options.scalar_time_unit)
        self._unit: tuple[int, int] | None = None if options.parses_strings else _TIME_UNITS[unit]

    def spec(self) -> str:
        return f"{self.field}:TIMESTAMP"

    def table_properties(self) -> dict[str, str]:
        return self.options.to_properties()

    # ---- computing segments ------------------------------------------------------------------

    def segments(self, data: Data, generator: KeyGenerator) -> tuple[pa.Array, pa.Array]:
        values = column(data, self.field, "partition")
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        t = values.type
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            strings = values.cast(pa.string())
            if strings.null_count:  # Hudi parses a default text in place of null
                strings = pc.fill_null(strings, self._default_text())
            if _mostly_distinct(strings):
                texts, indices = self._format_strings(strings, strings)
            else:  # parse and print each distinct string once
                encoded = strings.dictionary_encode()
                texts, printed = self._format_strings(encoded.dictionary, strings)
                indices = printed.take(encoded.indices)
        else:
            try:
                instants = self._instants(values)
            except pa.ArrowInvalid as e:
                raise InvalidRecordKeyError(f"partition field {self.field!r}: time value out of range") from e
            nulls = pc.is_null(instants) if instants.null_count else None
            instants = pc.fill_null(instants, 0)
            wall = (self._output_zone or UTC).to_wall(instants)
            texts, indices = self._output.format_distinct(wall, pc.subtract(wall, instants))
            if nulls is not None:
                indices = pc.if_else(nulls, pa.scalar(None, indices.type), indices)
        if indices.null_count:  # null times take the default value
            texts = pa.concat_arrays([texts, pa.array([self._default_value()], pa.string())])
            indices = pc.fill_null(indices.cast(pa.int64()), len(texts) - 1)
        return segments_from_values(
            texts,
            indices,
            self.field,
            hive_style=generator.hive_style_partitioning,
            url_encode=generator.url_encode_partition_path,
        )

    def _instants(self, values: pa.Array) -> pa.Array:
        """Epoch milliseconds of non-string values (nulls stay null)."""
        t = values.type
        if pa.types.is_null(t):
            return pa.nulls(len(values), pa.int64())
        if pa.types.is_timestamp(t):
            raw = values.cast(pa.int64())
            if t.unit == "s":
                return pc.multiply_checked(raw, 1000)
            if t.unit == "ms":
                return raw
            return floor_div(raw, 1000 if t.unit == "us" else 1_000_000)
        if pa.types.is_date(t):
            if t == pa.date32():
                return pc.multiply(values.cast(pa.int32()).cast(pa.int64()), _MS_PER_DAY)
            return values.cast(pa.int64())
        if self._unit is None:
            raise InvalidRecordKeyError(
                f"partition field {self.field!r} has type {t}, but timestamp type "
                f"{self.options.timestamp_type} reads date strings"
            )
        if pa.types.is_integer(t):
            counts = values.cast(pa.int64())
        elif pa.types.is_floating(t):
            floats = values.cast(pa.float64())
            floats = pc.if_else(pc.is_nan(floats), 0.0, floats)  # Java's (long) NaN is 0
            floats = pc.max_element_wise(pc.min_element_wise(pc.trunc(floats), 9.2e18), -9.2e18)
            counts = floats.cast(pa.int64())
        elif pa.types.is_decimal(t):
            counts = values.cast(pa.int64(), safe=False)  # BigDecimal.longValue truncates
        else:
            raise InvalidRecordKeyError(
                f"partition field {self.field!r} has type {t}, which cannot be read as a timestamp"
            )
        return self._to_millis(counts)

    def _to_millis(self, counts: pa.Array) -> pa.Array:
        assert self._unit is not None
        multiplier, divisor = self._unit
        if multiplier != 1:
            return pc.multiply_checked(counts, multiplier)  # raises ArrowInvalid on overflow
        return pc.divide(counts, divisor) if divisor != 1 else counts  # TimeUnit.convert truncates

    def _format_strings(self, texts: pa.Array, column_values: pa.Array) -> tuple[pa.Array, pa.Array]:
        """Partition values of distinct non-null date strings: distinct outputs and each text's index."""
        if self._input is None:
            raise InvalidRecordKeyError(
                f"partition field {self.field!r} holds strings, but timestamp type "
                f"{self.options.timestamp_type} reads numbers (set {opt.TIMESTAMP_TYPE}=DATE_STRING)"
            )
        parsed = self._input.parse(texts)
        unmatched = pc.is_null(parsed.wall_ms)
        if pc.any(unmatched).as_py():
            bad = texts[int(pc.index(unmatched, pa.scalar(True)).as_py())].as_py()
            row = int(pc.index(column_values.cast(pa.string()), pa.scalar(bad, pa.string())).as_py())
            raise InvalidRecordKeyError(
                f"partition field {self.field!r}: {bad!r} at row {row} is not a date matching "
                f"{opt.TIMESTAMP_INPUT_DATE_FORMAT}={self.options.input_dateformat!r}"
            )
        wall, offset = parsed.wall_ms, parsed.offset_ms
        has_offset = pc.is_valid(offset)
        offset0 = pc.fill_null(offset, 0)
        if self._input_zone is None:
            instants = pc.subtract(wall, offset0)
        else:
            zoned = self._input_zone.to_instant(pc.if_else(has_offset, 0, wall))
            instants = pc.if_else(has_offset, pc.subtract(wall, offset0), zoned)
        out_zone = self._output_zone or self._input_zone
        if out_zone is None:
            out_wall, out_offset = wall, offset0
        else:
            out_wall = out_zone.to_wall(instants)
            out_offset = pc.subtract(out_wall, instants)
        return self._output.format_distinct(out_wall, out_offset)

    def _default_value(self) -> str:
        """The partition value of a null time (``TimestampBasedAvroKeyGenerator.getDefaultPartitionVal``)."""
        if self._input is None:
            assert self._unit is not None
            instants = self._to_millis(pa.array([1], pa.int64()))
            wall = (self._output_zone or UTC).to_wall(instants)
            return str(self._output.format(wall, pc.subtract(wall, instants))[0].as_py())
        text = pa.array([self._default_text()], pa.string())
        printed, index = self._format_strings(text, text)
        return str(printed[index[0].as_py()].as_py())

    def _default_text(self) -> str:
        """What Hudi parses for a null date string: epoch + 1 ms printed with the first input pattern
        in the input zone, else the output zone, else GMT."""
        assert self._input is not None
        zone: Zone = self._input_zone or self._output_zone or UTC
        instants = pa.array([1], pa.int64())
        wall = zone.to_wall(instants)
        first = OutputFormat(self._input.patterns[0], opt.TIMESTAMP_INPUT_DATE_FORMAT)
        return str(first.format(wall, pc.subtract(wall, instants))[0].as_py())


def _mostly_distinct(values: pa.Array) -> bool:
    """Whether a sample of a large array is mostly distinct values (dictionary encoding won't pay)."""
    if len(values) < 8192:
        return False
    sample = values.take(pa.array(range(0, len(values), len(values) // 2048), pa.int64()))
    return bool(pc.count_distinct(sample).as_py() > len(sample) // 2)


class TimestampBasedKeyGenerator(KeyGenerator):
    """One record key field (as :class:`~shoal.keygen.SimpleKeyGenerator`) and a time-formatted partition.

    ``TimestampBasedKeyGenerator(["id"], "ts", TimestampOptions("EPOCHMILLISECONDS", "yyyy/MM/dd"))``
    puts a row with ``ts=1680350460123`` in ``2023/04/01``.
    """

    TYPE_NAME = "TIMESTAMP"
    CLASS_NAME = hudi_class("TimestampBasedKeyGenerator")

    def __init__(
        self,
        record_key_fields: list[str] | tuple[str, ...],
        partition_field: str,
        options: TimestampOptions,
        **kwargs: bool,
    ) -> None:
        if len(record_key_fields) != 1:
            raise InvalidOptionError(
                "TimestampBasedKeyGenerator takes exactly one record key field, "
                f"got {list(record_key_fields)}"
            )
        super().__init__(record_key_fields, [TimestampPartitionPart(partition_field, options)], **kwargs)
        self.options = options

    def record_keys(self, data: Data) -> pa.Array:
        return self._simple_keys(data)
