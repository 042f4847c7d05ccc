"""Java's ``Double.toString`` and ``Float.toString``, which Hudi uses for float and double key values.

Java renders a floating-point value with the *shortest* decimal that reads back as the same value
(JDK 19+ specifies this exactly; older JDKs agree on everything but rare values, where they could
emit one needless extra digit). Among the shortest candidates it picks the one closest to the
value, ties going to an even last digit, and it never uses fewer than two significant digits
(``1.0``, ``4.9E-324``). Values in ``[1e-3, 1e7)`` are written plainly with at least one fractional
digit (``100.0``, ``0.001``); others in "computerized scientific notation" (``1.0E7``, ``1.0E-4``,
``-1.2345E10``), with no ``+`` sign and no padding in the exponent.

Python's ``repr`` already yields the shortest round-tripping digits of a double, which settles the
common case; the exact search below (on :class:`fractions.Fraction`, so free of rounding) handles
``float`` (binary32) values and the two-digit minimum.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

__all__ = ["java_double_to_string", "java_float_to_string"]


def java_double_to_string(value: float) -> str:
    """Format ``value`` exactly as Java's ``Double.toString(double)`` does."""
    value = float(value)
    special = _special(value)
    if special is not None:
        return special
    magnitude = abs(value)
    digits, exponent = _repr_digits(magnitude)
    if len(digits) == 1:
        # Java never goes below two significant digits: choose the closest two-digit decimal.
        lower, upper, even = _double_interval(magnitude)
        digits, exponent = _closest_decimal(Fraction(magnitude), 2, lower, upper, even)
    return _render(value < 0, digits, exponent)


def java_float_to_string(value: float) -> str:
    """Format ``value`` (a binary32 value held in a Python float) as Java's ``Float.toString(float)``."""
    value = float(value)
    special = _special(value)
    if special is not None:
        return special
    magnitude = abs(value)
    if struct.unpack("<f", struct.pack("<f", magnitude))[0] != magnitude:
        raise ValueError(f"{value!r} is not representable as a 32-bit float")
    lower, upper, even = _float_interval(magnitude)
    exact = Fraction(magnitude)
    for length in range(2, 10):
        found = _closest_decimal_or_none(exact, length, lower, upper, even)
        if found is not None:
            return _render(value < 0, *found)
    raise AssertionError(f"no decimal of at most 9 digits rounds to {value!r}")  # pragma: no cover


def _special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    return None


def _repr_digits(magnitude: float) -> tuple[str, int]:
    """Shortest round-trip digits of a positive double and the decimal exponent of its first digit."""
    mantissa, _, exp = repr(magnitude).partition("e")
    whole, _, frac = mantissa.partition(".")
    raw = whole + frac
    stripped = raw.lstrip("0")
    leading_zeros = len(raw) - len(stripped)
    exponent = (int(exp) if exp else 0) + len(whole) - 1 - leading_zeros
    return stripped.rstrip("0") or "0", exponent


def _double_interval(magnitude: float) -> tuple[Fraction, Fraction, bool]:
    """The interval of reals that round to ``magnitude`` (a positive double), and whether it is closed."""
    below = math.nextafter(magnitude, 0.0)
    above = math.nextafter(magnitude, math.inf)
    exact = Fraction(magnitude)
    upper = Fraction(above) if not math.isinf(above) else exact + (exact - Fraction(below))
    even = struct.unpack("<Q", struct.pack("<d", magnitude))[0] % 2 == 0
    return (exact + Fraction(below)) / 2, (exact + upper) / 2, even


def _float_interval(magnitude: float) -> tuple[Fraction, Fraction, bool]:
    """Like :func:`_double_interval` for a positive binary32 value."""
    bits = struct.unpack("<I", struct.pack("<f", magnitude))[0]
    exact = Fraction(magnitude)
    below = Fraction(struct.unpack("<f", struct.pack("<I", bits - 1))[0])
    if bits + 1 >= 0x7F800000:  # the next value up is infinity: mirror the gap below
        above = exact + (exact - below)
    else:
        above = Fraction(struct.unpack("<f", struct.pack("<I", bits + 1))[0])
    return (exact + below) / 2, (exact + above) / 2, bits % 2 == 0


def _closest_decimal(
    exact: Fraction, length: int, lower: Fraction, upper: Fraction, closed: bool
) -> tuple[str, int]:
    found = _closest_decimal_or_none(exact, length, lower, upper, closed)
    if found is None:  # pragma: no cover - a shorter decimal exists, so a longer one does too
        raise AssertionError(f"no {length}-digit decimal rounds to {float(exact)!r}")
    return found


def _closest_decimal_or_none(
    exact: Fraction, length: int, lower: Fraction, upper: Fraction, closed: bool
) -> tuple[str, int] | None:
    """The ``length``-digit decimal closest to ``exact`` within the rounding interval, if any.

    Returns its significant digits (no trailing zeros) and the decimal exponent of the first digit.
    """
    first = _decimal_exponent(exact)
    unit_exp = first - length + 1
    unit = Fraction(10) ** unit_exp
    floor_q = math.floor(exact / unit)
    candidates = {floor_q, floor_q + 1} if floor_q * unit != exact else {floor_q}

    def inside(q: int) -> bool:
        c = q * unit
        return lower < c < upper or (closed and c in (lower, upper))

    fitting = sorted((q for q in candidates if inside(q)), key=lambda q: (abs(q * unit - exact), q % 2))
    if not fitting:
        return None
    q = fitting[0]
    text = str(q)
    digits = text.rstrip("0")
    return digits, unit_exp + len(text) - 1


def _decimal_exponent(exact: Fraction) -> int:
    """The ``k`` with ``10**k <= exact < 10**(k+1)`` for a positive fraction."""
    k = math.floor(math.log10(float(exact)))
    while Fraction(10) ** k > exact:
        k -= 1
    while Fraction(10) ** (k + 1) <= exact:
        k += 1
    return k


def _render(negative: bool, digits: str, exponent: int) -> str:
    sign = "-" if negative else ""
    if -3 <= exponent < 7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            frac = digits[exponent + 1 :] or "0"
            return f"{sign}{whole}.{frac}"
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"
