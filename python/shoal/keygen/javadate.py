"""Java (Joda-Time) date patterns and time zones, vectorised over Arrow arrays.

Hudi's ``TimestampBasedKeyGenerator`` parses input strings and prints partition values with Joda
``DateTimeFormat`` patterns such as ``yyyy-MM-dd'T'HH:mm:ss.SSSZ`` or ``yyyy/MM/dd/HH``. This module
implements the subset that partitioning uses:

* ``y`` year (``yyyy`` zero-pads to four digits, ``yy`` prints the last two; two-digit years are
  not accepted when *parsing*, as Joda resolves them against the current date), ``M`` month,
  ``d`` day, ``H`` hour of day, ``m`` minute, ``s`` second, ``S`` fraction of second;
* ``Z`` / ``ZZ`` zone offset (``+0530`` / ``+05:30``; parsing also accepts ``Z`` for UTC);
* literals: any non-letter, and text in single quotes (``''`` is a quote).

Any other pattern letter (text months, weekdays, am/pm, ...) raises
:class:`~shoal.errors.InvalidOptionError`.

Times are handled as int64 epoch milliseconds. "Wall" milliseconds are a local date-time encoded as
if it were UTC; a :class:`Zone` converts between instants and wall times.
"""

from __future__ import annotations

import datetime as _dt
import re
import zoneinfo
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import InvalidOptionError, InvalidRecordKeyError
from shoal.keygen.values import floor_div, lpad_int, signed_padded

__all__ = ["InputFormat", "OutputFormat", "Zone", "parse_zone"]

_MS = {"S": 1, "s": 1000, "m": 60_000, "H": 3_600_000, "d": 86_400_000, "M": 86_400_000, "y": 86_400_000}
_NUMERIC = frozenset("yMdHmsS")
_SUPPORTED = _NUMERIC | {"Z"}


@dataclass(frozen=True)
class _Token:
    letter: str  # "" for a literal
    count: int = 0
    text: str = ""


def _tokenize(pattern: str, key: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(pattern)
    literal: list[str] = []

    def flush() -> None:
        if literal:
            tokens.append(_Token("", text="".join(literal)))
            literal.clear()

    while i < n:
        c = pattern[i]
        if c == "'":
            if i + 1 < n and pattern[i + 1] == "'":
                literal.append("'")
                i += 2
                continue
            end = i + 1
            while True:
                end = pattern.find("'", end)
                if end < 0:
                    raise InvalidOptionError(f"{key}: unterminated quote in date pattern {pattern!r}")
                if end + 1 < n and pattern[end + 1] == "'":
                    literal.append(pattern[i + 1 : end] + "'")
                    i = end + 1
                    end += 2
                    continue
                literal.append(pattern[i + 1 : end])
                i = end + 1
                break
            continue
        if ("a" <= c <= "z") or ("A" <= c <= "Z"):
            if c not in _SUPPORTED:
                raise InvalidOptionError(
                    f"{key}: pattern letter {c!r} in {pattern!r} is not supported "
                    "(supported: y M d H m s S Z and literals)"
                )
            j = i
            while j < n and pattern[j] == c:
                j += 1
            count = j - i
            if c == "M" and count > 2:
                raise InvalidOptionError(f"{key}: text months ({'M' * count}) are not supported: {pattern!r}")
            if c == "Z" and count > 2:
                raise InvalidOptionError(f"{key}: zone ids (ZZZ) are not supported in {pattern!r}")
            flush()
            tokens.append(_Token(c, count))
            i = j
            continue
        literal.append(c)
        i += 1
    flush()
    if not tokens:
        raise InvalidOptionError(f"{key}: empty date pattern")
    return tokens


class OutputFormat:
    """A Joda output pattern, printing wall times."""

    def __init__(self, pattern: str, key: str) -> None:
        self.pattern = pattern
        self._tokens = _tokenize(pattern, key)
        letters = [t for t in self._tokens if t.letter]
        self._has_offset = any(t.letter == "Z" for t in letters)
        numeric = [t for t in letters if t.letter in _NUMERIC]
        self._unit_ms = min(
            (_fraction_unit(t.count) if t.letter == "S" else _MS[t.letter] for t in numeric), default=_MS["d"]
        )

    def format(self, wall_ms: pa.Array, offset_ms: pa.Array) -> pa.Array:
        """Print non-null wall times; ``offset_ms`` (wall minus instant) is used by ``Z``."""
        texts, indices = self.format_distinct(wall_ms, offset_ms)
        return texts.take(indices)

    def format_distinct(self, wall_ms: pa.Array, offset_ms: pa.Array) -> tuple[pa.Array, pa.Array]:
        """Like :meth:`format`, as distinct texts plus each row's index into them."""
        if self._has_offset:
            return self._render(wall_ms, offset_ms), pa.array(range(len(wall_ms)), pa.int32())
        # Print each distinct value once, at the precision the pattern shows.
        truncated = pc.multiply(floor_div(wall_ms, self._unit_ms), self._unit_ms)
        encoded = truncated.dictionary_encode()
        return self._render(encoded.dictionary, None), encoded.indices

    def _render(self, wall_ms: pa.Array, offset_ms: pa.Array | None) -> pa.Array:
        if len(wall_ms) == 0:
            return pa.array([], pa.string())
        fields = _civil_fields(wall_ms)
        parts: list[pa.Array | str] = []
        for token in self._tokens:
            if not token.letter:
                parts.append(token.text)
            elif token.letter == "y":
                year = fields["y"]
                if token.count == 2:
                    parts.append(lpad_int(pc.remainder(pc.abs(year), 100), 2))
                else:
                    parts.append(signed_padded(year, token.count))
            elif token.letter == "S":
                parts.append(_fraction_text(fields["S"], token.count))
            elif token.letter == "Z":
                assert offset_ms is not None
                parts.append(_offset_text(offset_ms, colon=token.count == 2))
            else:
                parts.append(lpad_int(fields[token.letter], token.count))
        if len(parts) == 1:
            only = parts[0]
            return only if isinstance(only, pa.Array) else pa.array([only] * len(wall_ms), pa.string())
        return pc.binary_join_element_wise(*parts, "")


def _civil_fields(wall_ms: pa.Array) -> dict[str, pa.Array]:
    """Proleptic Gregorian year (astronomical: 0 is 1 BC, as Joda's ISO chronology), month, day,
    hour, minute, second and millisecond of wall times, for any int64 millisecond count.

    Arrow's calendar functions keep the year in 16 bits and wrap past 32767 (a count of
    microseconds read as milliseconds lands near year 55000), where Joda prints the real year.
    Days to civil date after H. Hinnant's algorithm; every division below is of non-negative
    numbers, so Arrow's truncating divide is exact.
    """
    day_ms = 86_400_000
    days = floor_div(wall_ms, day_ms)
    in_day = pc.subtract(wall_ms, pc.multiply(days, day_ms))
    z = pc.add(days, 719_468)
    era = floor_div(z, 146_097)
    doe = pc.subtract(z, pc.multiply(era, 146_097))  # day of the 400-year era, 0..146096
    yoe = pc.divide(
        pc.add(
            pc.subtract(doe, pc.divide(doe, 1460)),
            pc.subtract(pc.divide(doe, 36_524), pc.divide(doe, 146_096)),
        ),
        365,
    )
    doy = pc.subtract(
        doe, pc.add(pc.multiply(yoe, 365), pc.subtract(pc.divide(yoe, 4), pc.divide(yoe, 100)))
    )  # day of the year starting March 1st
    mp = pc.divide(pc.add(pc.multiply(doy, 5), 2), 153)
    day = pc.add(pc.subtract(doy, pc.divide(pc.add(pc.multiply(mp, 153), 2), 5)), 1)
    month = pc.if_else(pc.less(mp, 10), pc.add(mp, 3), pc.subtract(mp, 9))
    year = pc.add(pc.add(yoe, pc.multiply(era, 400)), pc.less_equal(month, 2).cast(pa.int64()))
    return {
        "y": year,
        "M": month,
        "d": day,
        "H": pc.divide(in_day, 3_600_000),
        "m": pc.remainder(pc.divide(in_day, 60_000), 60),
        "s": pc.remainder(pc.divide(in_day, 1000), 60),
        "S": pc.remainder(in_day, 1000),
    }


def _fraction_unit(count: int) -> int:
    return 10 ** max(0, 3 - count)


def _fraction_text(millis: pa.Array, count: int) -> pa.Array:
    if count <= 3:
        return lpad_int(pc.divide(millis, 10 ** (3 - count)), count)
    return pc.binary_join_element_wise(lpad_int(millis, 3), "0" * (count - 3), "")


def _offset_text(offset_ms: pa.Array, colon: bool) -> pa.Array:
    minutes = pc.divide(pc.abs(offset_ms), 60_000)
    sign = pc.if_else(pc.less(offset_ms, 0), "-", "+")
    hours = lpad_int(pc.divide(minutes, 60), 2)
    mins = lpad_int(pc.remainder(minutes, 60), 2)
    return pc.binary_join_element_wise(sign, hours, ":" if colon else "", mins, "")


@dataclass(frozen=True)
class Parsed:
    """Result of :meth:`InputFormat.parse`: wall times and the offsets written in the text."""

    wall_ms: pa.Array  # int64, null where the text did not match
    offset_ms: pa.Array  # int64, null where the text carried no offset


class InputFormat:
    """A Joda input pattern (or a list of them, the first matching one winning), parsing strings."""

    def __init__(self, patterns: list[str], key: str) -> None:
        if not patterns:
            raise InvalidOptionError(f"{key} is required to parse date strings")
        self.patterns = patterns
        self._parsers = [_Parser.compile(p, key) for p in patterns]

    def parse(self, texts: pa.Array) -> Parsed:
        """Parse non-null strings; rows that match no pattern, or name an impossible date or time
        (``2023-02-30``, ``25:00``), come back null in ``wall_ms``."""
        wall, offset = self._parsers[0].parse(texts)
        for parser in self._parsers[1:]:
            pending = pc.is_null(wall)
            if not pc.any(pending).as_py():
                break
            more_wall, more_offset = parser.parse(texts.filter(pending))
            wall = pc.replace_with_mask(wall, pending, more_wall)
            offset = pc.replace_with_mask(offset, pending, more_offset)
        return Parsed(wall, offset)


@dataclass(frozen=True)
class _Parser:
    """One input pattern as a capturing regex, plus a fixed-position layout for the common case.

    Joda reads numbers leniently (``M`` takes one or two digits, ``yyyy`` up to nine), which needs
    the capturing regex. When every string of a batch has the zero-padded layout the pattern
    prints, the fields sit at fixed positions and plain slicing is several times faster.
    """

    regex: str
    groups: frozenset[str]
    fixed_regex: str | None  # matches exactly the zero-padded layout
    slices: tuple[tuple[str, int, int | None], ...]  # group -> [start, stop) in that layout
    iso_length: int | None  # that layout starts with an ISO-8601 date-time of this length

    @staticmethod
    def compile(pattern: str, key: str) -> _Parser:
        tokens = _tokenize(pattern, key)
        regex: list[str] = []
        fixed: list[str] | None = []
        slices: list[tuple[str, int, int | None]] = []
        position = 0
        seen: set[str] = set()
        for index, token in enumerate(tokens):
            last = index + 1 == len(tokens)
            if not token.letter:
                regex.append(_literal_regex(token.text))
                if fixed is not None and token.text.isascii():
                    fixed.append(_literal_regex(token.text))
                    position += len(token.text)
                else:
                    fixed = None
                continue
            if token.letter in seen:
                raise InvalidOptionError(f"{key}: field {token.letter!r} appears twice in {pattern!r}")
            seen.add(token.letter)
            next_numeric = not last and tokens[index + 1].letter in _NUMERIC
            if token.letter == "y":
                if token.count == 2:
                    raise InvalidOptionError(f"{key}: two-digit years (yy) cannot be parsed: {pattern!r}")
                width = f"{{{token.count}}}" if next_numeric else "{1,9}"
                regex.append(f"(?P<y>[-+]?\\d{width})")
            elif token.letter == "S":
                regex.append(f"(?P<S>\\d{{{token.count}}})" if next_numeric else "(?P<S>\\d{1,9})")
            elif token.letter == "Z":
                regex.append(f"(?P<Z>{_OFFSET_REGEX})")
            else:
                regex.append(f"(?P<{token.letter}>\\d{{1,2}})")
            if fixed is None:
                continue
            if token.letter == "Z" and last:
                fixed.append(f"(?:{_OFFSET_REGEX})")
                slices.append(("Z", position, None))
            elif token.count >= _FIXED_MIN_COUNT.get(token.letter, 99):
                fixed.append(f"\\d{{{token.count}}}")
                slices.append((token.letter, position, position + token.count))
                position += token.count
            else:
                fixed = None
        return _Parser(
            regex="^" + "".join(regex) + "$",
            groups=frozenset(seen),
            fixed_regex=None if fixed is None else "^" + "".join(fixed) + "$",
            slices=tuple(slices),
            iso_length=_iso_length(tokens) if fixed is not None else None,
        )

    def parse(self, texts: pa.Array) -> tuple[pa.Array, pa.Array]:
        """Wall millis (null where the text does not fit) and written offsets of the texts."""
        if self.fixed_regex is not None and self.slices:
            fits = pc.match_substring_regex(texts, self.fixed_regex)
            if pc.all(fits).as_py() and self.iso_length is not None:
                iso = _iso_wall_of_text(texts, self.iso_length, "Z" in self.groups)
                if iso is not None:
                    return iso
            if pc.all(fits).as_py():
                fields = {g: pc.utf8_slice_codeunits(texts, start, stop) for g, start, stop in self.slices}
                fast = _iso_wall(fields)
                if fast is not None:
                    offset = _offsets(fields["Z"]) if "Z" in fields else pa.nulls(len(texts), pa.int64())
                    return fast, offset
                return _assemble(fields, fits)
        matched = pc.extract_regex(texts, self.regex)
        fields = {g: pc.struct_field(matched, [_group_index(matched, g)]) for g in self.groups}
        return _assemble(fields, matched.is_valid())


def _iso_length(tokens: list[_Token]) -> int | None:
    """Length of the ISO-8601 text (``yyyy-MM-dd[( |'T')HH:mm[:ss[.S{1,3}]]]``) a pattern starts with,
    when nothing but a trailing zone offset follows it."""
    shape = [(t.letter, t.count) if t.letter else ("", t.text) for t in tokens]
    if shape and shape[-1][0] == "Z":
        shape.pop()
    date = [("y", 4), ("", "-"), ("M", 2), ("", "-"), ("d", 2)]
    time = [("H", 2), ("", ":"), ("m", 2)]
    seconds = [("", ":"), ("s", 2)]
    if shape[:5] != date:
        return None
    rest = shape[5:]
    if rest:
        if rest[0] not in (("", "T"), ("", " ")) or rest[1:4] != time:
            return None
        rest = rest[4:]
    if rest:
        if rest[:2] != seconds:
            return None
        rest = rest[2:]
    if rest and not (len(rest) == 2 and rest[0] == ("", ".") and rest[1][0] == "S" and int(rest[1][1]) <= 3):
        return None
    return sum(int(n) if letter else len(str(n)) for letter, n in shape)


def _iso_wall_of_text(texts: pa.Array, length: int, has_offset: bool) -> tuple[pa.Array, pa.Array] | None:
    """Wall millis and offsets of texts whose leading ``length`` characters are ISO-8601 date-times.

    Arrow's ISO parser rejects exactly what Joda rejects (month 13, February 30, hour 24,
    second 60); None when it fails, so that the caller validates row by row.
    """
    head = pc.utf8_slice_codeunits(texts, 0, length) if has_offset else texts
    try:
        wall = head.cast(pa.timestamp("ms")).cast(pa.int64())
    except pa.ArrowInvalid:
        return None
    offset = (
        _offsets(pc.utf8_slice_codeunits(texts, length)) if has_offset else pa.nulls(len(texts), pa.int64())
    )
    return wall, offset


def _iso_wall(fields: dict[str, pa.Array]) -> pa.Array | None:
    """Wall millis via Arrow's ISO-8601 parser, for 4-digit years; None if some value is invalid.

    The parser rejects exactly what Joda rejects (month 13, February 30, hour 24, second 60), so
    a failure sends the batch to the row-by-row validation of :func:`_assemble`.
    """
    if not fields.keys() - {"Z"}:
        return None
    year = fields.get("y")
    if year is not None and not pc.all(pc.equal(pc.utf8_length(year), 4)).as_py():
        return None
    fraction = fields.get("S")
    if fraction is not None:
        fraction = pc.utf8_slice_codeunits(pc.utf8_rpad(fraction, width=3, padding="0"), 0, 3)
    iso = pc.binary_join_element_wise(
        year if year is not None else "1970",
        "-",
        fields.get("M", "01"),
        "-",
        fields.get("d", "01"),
        "T",
        fields.get("H", "00"),
        ":",
        fields.get("m", "00"),
        ":",
        fields.get("s", "00"),
        ".",
        fraction if fraction is not None else "000",
        "",
    )
    try:
        return iso.cast(pa.timestamp("ms")).cast(pa.int64())
    except pa.ArrowInvalid:
        return None


# Letter counts that print as many digits as they have (yyyy, MM, ...): fields at fixed positions.
_FIXED_MIN_COUNT = {"y": 4, "M": 2, "d": 2, "H": 2, "m": 2, "s": 2, "S": 1}
_OFFSET_REGEX = "[Zz]|[-+]\\d{2}(?::?\\d{2})?"


def _literal_regex(text: str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


def _assemble(fields: dict[str, pa.Array], ok: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Wall millis and offsets from the captured field texts (null where ``ok`` is false)."""
    size = len(ok)

    def number(name: str, default: int) -> pa.Array:
        if name not in fields:
            return pa.array([default] * size, pa.int64())
        text = pc.if_else(ok, fields[name], str(default))
        if name == "y":
            text = pc.replace_substring(text, "+", "")
        return text.cast(pa.int64())

    year, month, day = number("y", 1970), number("M", 1), number("d", 1)
    hour, minute, second = number("H", 0), number("m", 0), number("s", 0)
    if "S" in fields:
        digits = pc.if_else(ok, fields["S"], "0")
        millis = pc.utf8_slice_codeunits(pc.utf8_rpad(digits, width=3, padding="0"), 0, 3).cast(pa.int64())
    else:
        millis = pa.array([0] * size, pa.int64())
    days = _days_from_civil(year, month, day)
    invalid = pc.or_(
        pc.or_(pc.less(month, 1), pc.greater(month, 12)),
        pc.or_(pc.greater(hour, 23), pc.or_(pc.greater(minute, 59), pc.greater(second, 59))),
    )
    valid_day = pc.and_(pc.greater_equal(day, 1), pc.less_equal(day, 31))
    in_range = pc.and_(pc.greater(days, -100_000_000), pc.less(days, 100_000_000))
    invalid = pc.or_(invalid, pc.invert(pc.and_(valid_day, in_range)))
    safe_days = pc.if_else(invalid, 0, days)
    dates = safe_days.cast(pa.int32()).cast(pa.date32())
    invalid = pc.or_(invalid, pc.not_equal(pc.day(dates), day))
    ok = pc.and_(ok, pc.invert(invalid))  # Joda rejects impossible dates and times
    wall = pc.add(
        pc.multiply(days, 86_400_000),
        pc.add(
            pc.add(pc.multiply(hour, 3_600_000), pc.multiply(minute, 60_000)),
            pc.add(pc.multiply(second, 1000), millis),
        ),
    )
    wall = pc.if_else(ok, wall, pa.scalar(None, pa.int64()))
    if "Z" in fields:
        offset = pc.if_else(ok, _offsets(fields["Z"]), pa.scalar(None, pa.int64()))
    else:
        offset = pa.nulls(size, pa.int64())
    return wall, offset


def _group_index(matched: pa.Array, name: str) -> int:
    return int(matched.type.get_field_index(name))


def _offsets(texts: pa.Array) -> pa.Array:
    """Offset text (``Z``, ``+05``, ``+0530``, ``+05:30``) to milliseconds; unmatched rows give 0."""
    cleaned = pc.replace_substring(texts, ":", "")
    is_zero = pc.or_(pc.equal(pc.utf8_upper(cleaned), "Z"), pc.equal(cleaned, ""))
    body = pc.if_else(is_zero, "+0000", cleaned)
    body = pc.utf8_rpad(body, width=5, padding="0")
    hours = pc.utf8_slice_codeunits(body, 1, 3).cast(pa.int64())
    minutes = pc.utf8_slice_codeunits(body, 3, 5).cast(pa.int64())
    magnitude = pc.multiply(pc.add(pc.multiply(hours, 60), minutes), 60_000)
    negative = pc.equal(pc.utf8_slice_codeunits(body, 0, 1), "-")
    return pc.if_else(negative, pc.negate(magnitude), magnitude)


def _days_from_civil(year: pa.Array, month: pa.Array, day: pa.Array) -> pa.Array:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y = pc.subtract(year, pc.less_equal(month, 2).cast(pa.int64()))
    era = floor_div(y, 400)
    yoe = pc.subtract(y, pc.multiply(era, 400))
    mp = pc.remainder(pc.add(month, 9), 12)
    doy = pc.add(pc.divide(pc.add(pc.multiply(mp, 153), 2), 5), pc.subtract(day, 1))
    doe = pc.add(pc.add(pc.multiply(yoe, 365), pc.divide(yoe, 4)), pc.subtract(doy, pc.divide(yoe, 100)))
    return pc.subtract(pc.add(pc.multiply(era, 146_097), doe), 719_468)


@dataclass(frozen=True)
class Zone:
    """A time zone given as Java ``TimeZone`` ids are: ``UTC``, ``GMT+08:00``, ``Asia/Kolkata``."""

    name: str
    fixed_offset_ms: int | None = None  # for UTC/GMT and GMT+hh:mm ids
    region: str | None = None  # IANA region id

    def to_wall(self, instants: pa.Array) -> pa.Array:
        """Local wall times of epoch-millisecond instants."""
        if self.fixed_offset_ms is not None:
            return pc.add(instants, self.fixed_offset_ms) if self.fixed_offset_ms else instants
        zoned = instants.cast(pa.timestamp("ms", tz=self.region))
        wall = pc.local_timestamp(zoned).cast(pa.int64())
        return self._after_2037(instants, wall, from_wall=False)

    def to_instant(self, wall: pa.Array) -> pa.Array:
        """Instants of local wall times; ambiguous times take the earlier offset, as Joda does."""
        if self.fixed_offset_ms is not None:
            return pc.subtract(wall, self.fixed_offset_ms) if self.fixed_offset_ms else wall
        try:
            zoned = pc.assume_timezone(
                wall.cast(pa.timestamp("ms")), timezone=self.region, ambiguous="earliest", nonexistent="raise"
            )
        except pa.ArrowInvalid as e:
            raise InvalidRecordKeyError(f"a date string names a local time {self.name} skips: {e}") from e
        return self._after_2037(wall, zoned.cast(pa.int64()), from_wall=True)

    def _after_2037(self, times: pa.Array, converted: pa.Array, from_wall: bool) -> pa.Array:
        """``converted`` (the wall times of instants ``times``, or with ``from_wall`` the instants
        of wall times ``times``, as Arrow converts them) with the values from 2037 on, where
        Arrow's zone data ends, worked out with :meth:`_late_offsets` instead."""
        late = _late(times)
        if late is None:
            return converted
        at = times.filter(late)
        offsets = self._late_offsets(at, from_wall)
        exact = pc.subtract(at, offsets) if from_wall else pc.add(at, offsets)
        return pc.replace_with_mask(converted, late, pc.coalesce(exact, converted.filter(late)))

    def _late_offsets(self, times: pa.Array, from_wall: bool) -> pa.Array:
        """The zone's offsets (ms) at instants, or at wall times (``from_wall``), from 2037 on,
        worked out with Python's zoneinfo, which applies the zone's rules to every year (null
        past year 9999). Offsets change on whole minutes, so each distinct minute is looked up once.
        """
        assert self.region is not None
        zone = zoneinfo.ZoneInfo(self.region)
        minutes = floor_div(times, _MINUTE_MS).dictionary_encode()
        offsets: list[int | None] = []
        for minute in minutes.dictionary.to_pylist():
            try:
                if from_wall:
                    # fold=0: the earlier of two instants in an overlap, as Joda's getOffsetFromLocal.
                    offset = (_EPOCH + _dt.timedelta(minutes=minute)).replace(tzinfo=zone).utcoffset()
                    assert offset is not None
                    instant = _EPOCH_UTC + _dt.timedelta(minutes=minute) - offset
                    if instant.astimezone(zone).utcoffset() != offset:
                        raise InvalidRecordKeyError(
                            f"a date string names a local time {self.name} skips "
                            f"({(_EPOCH + _dt.timedelta(minutes=minute)).isoformat()})"
                        )
                else:
                    offset = (_EPOCH_UTC + _dt.timedelta(minutes=minute)).astimezone(zone).utcoffset()
                    assert offset is not None
            except OverflowError:
                offsets.append(None)
                continue
            offsets.append(offset // _dt.timedelta(milliseconds=1))
        return pa.array(offsets, pa.int64()).take(minutes.indices)


UTC = Zone("UTC", fixed_offset_ms=0)
# Arrow's zone conversions apply the transitions the zone files list, which end in 2037: later
# years keep the offset of the last one (no daylight saving time in New York, always in Sydney),
# while Joda (Hudi) applies the zone's rules to every year.
# From here on offsets are worked out with zoneinfo (Zone._late_offsets).
_ARROW_TRANSITIONS_END_MS = 2_114_380_800_000  # 2037-01-01T00:00:00Z
_MINUTE_MS = 60_000
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=_dt.timezone.utc)


def _late(times: pa.Array) -> pa.Array | None:
    """Where ``times`` fall after Arrow's zone data ends; None when nowhere."""
    late = pc.fill_null(pc.greater_equal(times, _ARROW_TRANSITIONS_END_MS), False)
    return late if pc.any(late).as_py() else None


_CUSTOM_ID = re.compile(r"^GMT([+-])(\d{1,2})(?::?(\d{2}))?$")
# The JDK 1.1 three-letter ids Java's TimeZone accepts, as Joda's DateTimeZone.forTimeZone (which
# Hudi's date parser calls) converts them *before* consulting the zone database: "EST", "MST" and
# "HST" are the region zones below (with their daylight saving time), not the fixed offsets the
# IANA database has under those names.
_JODA_LEGACY_IDS = {
    "WET": "WET",
    "CET": "CET",
    "MET": "CET",
    "ECT": "CET",
    "EET": "EET",
    "MIT": "Pacific/Apia",
    "HST": "Pacific/Honolulu",
    "AST": "America/Anchorage",
    "PST": "America/Los_Angeles",
    "MST": "America/Denver",
    "PNT": "America/Phoenix",
    "CST": "America/Chicago",
    "EST": "America/New_York",
    "IET": "America/Indiana/Indianapolis",
    "PRT": "America/Puerto_Rico",
    "CNT": "America/St_Johns",
    "AGT": "America/Argentina/Buenos_Aires",
    "BET": "America/Sao_Paulo",
    "ART": "Africa/Cairo",
    "CAT": "Africa/Harare",
    "EAT": "Africa/Addis_Ababa",
    "NET": "Asia/Yerevan",
    "PLT": "Asia/Karachi",
    "IST": "Asia/Kolkata",
    "BST": "Asia/Dhaka",
    "VST": "Asia/Ho_Chi_Minh",
    "CTT": "Asia/Shanghai",
    "JST": "Asia/Tokyo",
    "ACT": "Australia/Darwin",
    "AET": "Australia/Sydney",
    "SST": "Pacific/Guadalcanal",
    "NST": "Pacific/Auckland",
}


def parse_zone(value: str | None, key: str) -> Zone | None:
    """A :class:`Zone` for a configured id, None when unset or empty."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text in ("UTC", "GMT", "UT", "Z"):
        return Zone(text, fixed_offset_ms=0)
    custom = _CUSTOM_ID.match(text)
    if custom:
        hours, minutes = int(custom.group(2)), int(custom.group(3) or 0)
        if hours > 23 or minutes > 59:
            raise InvalidOptionError(f"{key}: invalid time zone offset {value!r}")
        sign = -1 if custom.group(1) == "-" else 1
        return Zone(text, fixed_offset_ms=sign * (hours * 60 + minutes) * 60_000)
    region = _JODA_LEGACY_IDS.get(text, text)
    try:
        zoneinfo.ZoneInfo(region)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as e:
        raise InvalidOptionError(
            f"{key}: unknown time zone {value!r} (use UTC, GMT+hh:mm or a region id like Asia/Kolkata)"
        ) from e
    return Zone(text, region=region)
