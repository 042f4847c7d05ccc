"""Key generators: record keys and partition paths byte-identical to what Apache Hudi writes.

Expected values come from Hudi-written fixture tables (their ``_hoodie_record_key`` and
``_hoodie_partition_path`` columns), from the format spec (HUDI_FORMAT §4.4, §5) and from Java's
documented behaviour, worked out by hand.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
import zipfile
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.config import javaprops
from shoal.errors import InvalidOptionError, InvalidRecordKeyError, UnsupportedError
from shoal.keygen import (
    ComplexKeyGenerator,
    CustomKeyGenerator,
    GlobalDeleteKeyGenerator,
    KeyGenerator,
    NonpartitionedKeyGenerator,
    SimpleKeyGenerator,
    TimestampBasedKeyGenerator,
    TimestampOptions,
    escape_path_name,
    java_double_to_string,
    java_float_to_string,
    java_strings,
    key_generator_from_properties,
)

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "hudi-java"
FIXTURE_ZIPS = sorted(p.stem for p in FIXTURES.glob("*.zip"))

# 2023-04-01T12:01:00.123Z: 2023-04-01 is day 19448 since the epoch (19448 * 86400 = 1680307200 s),
# plus 12 h 1 min = 43260 s.
TS_MS = 1_680_350_460_123
EPOCH = dt.date(1970, 1, 1)


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def keygen(key: str, partition: str | None = None, **extra: str) -> KeyGenerator:
    props = {"hoodie.table.recordkey.fields": key}
    if partition is not None:
        props["hoodie.table.partition.fields"] = partition
    props.update(extra)
    return key_generator_from_properties(props)


# ---- fixtures written by Apache Hudi -------------------------------------------------------


def _read_java_properties(path: Path) -> dict[str, str]:
    return javaprops.loads(path.read_text(encoding="latin-1"))


@pytest.fixture(scope="session")
def fixture_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every fixture zip, unzipped once: name -> table base path."""
    root = tmp_path_factory.mktemp("keygen_fixtures")
    tables = {}
    for name in FIXTURE_ZIPS:
        dest = root / name
        with zipfile.ZipFile(FIXTURES / f"{name}.zip") as z:
            z.extractall(dest)
        bases = [
            p.parent.parent for p in dest.glob("*/.hoodie/hoodie.properties") if "__MACOSX" not in str(p)
        ]
        assert len(bases) == 1, bases
        tables[name] = bases[0]
    return tables


def test_properties_reader_handles_java_escapes(tmp_path: Path) -> None:
    f = tmp_path / "p.properties"
    f.write_text("#c\n! c\na\\:b = x\\=y\\\\z\nlong=one\\\n   two\nu:\\u00e9\\t\n  spaced value\n", "latin-1")
    assert _read_java_properties(f) == {"a:b": "x=y\\z", "long": "onetwo", "u": "é\t", "spaced": "value"}


@pytest.mark.skipif(not FIXTURE_ZIPS, reason="Hudi fixtures not found")
@pytest.mark.parametrize("name", FIXTURE_ZIPS)
def test_fixture_keys_and_partitions_match_hudi(name: str, fixture_tables: dict[str, Path]) -> None:
    base = fixture_tables[name]
    props = _read_java_properties(base / ".hoodie" / "hoodie.properties")
    kg = key_generator_from_properties(props)

    # The generator describes itself as the table does.
    version = int(props["hoodie.table.version"])
    own = kg.table_properties(table_version=version)
    if "hoodie.table.keygenerator.class" in props:
        assert kg.class_name == props["hoodie.table.keygenerator.class"]
    if "hoodie.table.keygenerator.type" in props:
        assert kg.type_name == props["hoodie.table.keygenerator.type"]
    shared = set(own) & set(props)
    assert {"hoodie.table.recordkey.fields", "hoodie.datasource.write.hive_style_partitioning"} <= shared
    assert {k: own[k] for k in shared} == {k: props[k] for k in shared}

    files = sorted(p for p in base.rglob("*.parquet") if ".hoodie" not in p.relative_to(base).parts)
    if name.endswith("_empty"):
        assert files == []
        return
    assert files
    with_meta = props.get("hoodie.populate.meta.fields", "true") != "false"
    for path in files:
        data = pq.ParquetFile(path).read()
        keys = kg.record_keys(data)
        partitions = kg.partition_paths(data)
        assert keys.type == pa.string() and keys.null_count == 0
        assert partitions.type == pa.string() and partitions.null_count == 0
        # Every row sits in the directory its partition path names.
        directory = path.parent.relative_to(base).as_posix()
        assert set(partitions.to_pylist()) == {"" if directory == "." else directory}
        if with_meta:
            assert keys.to_pylist() == data.column("_hoodie_record_key").to_pylist()
            assert partitions.to_pylist() == data.column("_hoodie_partition_path").to_pylist()


@pytest.mark.skipif(not FIXTURE_ZIPS, reason="Hudi fixtures not found")
def test_fixture_generators_are_the_expected_kinds(fixture_tables: dict[str, Path]) -> None:
    kinds = {
        name: type(key_generator_from_properties(_read_java_properties(p / ".hoodie" / "hoodie.properties")))
        for name, p in fixture_tables.items()
    }
    assert kinds["cow_v6_complexkeygen_hivestyle"] is ComplexKeyGenerator
    assert kinds["cow_v8_complexkeygen_hivestyle"] is ComplexKeyGenerator
    assert kinds["cow_v6_timebasedkeygen_nonhivestyle"] is TimestampBasedKeyGenerator
    assert kinds["cow_v8_nonpartitioned"] is NonpartitionedKeyGenerator
    assert kinds["mor_avro_v8_trips_8i3u1d"] is SimpleKeyGenerator


# ---- Java Double.toString / Float.toString ------------------------------------------------

DOUBLES = [
    (1.0, "1.0"),
    (3.14159, "3.14159"),
    (2.71828, "2.71828"),
    (100.0, "100.0"),
    (0.1, "0.1"),
    (0.1 + 0.2, "0.30000000000000004"),
    (12345.6789, "12345.6789"),
    (1234567.125, "1234567.125"),
    (9999999.0, "9999999.0"),  # plain below 10^7
    (1.0e7, "1.0E7"),
    (1.0e10, "1.0E10"),
    (123456789.0, "1.23456789E8"),
    (float(2**63), "9.223372036854776E18"),
    (1.0e23, "1.0E23"),
    (0.001, "0.001"),  # plain from 10^-3
    (9.999e-4, "9.999E-4"),
    (1.0e-4, "1.0E-4"),
    (-1.5e-7, "-1.5E-7"),
    (-2.5, "-2.5"),
    (0.0, "0.0"),
    (-0.0, "-0.0"),
    (math.nan, "NaN"),
    (math.inf, "Infinity"),
    (-math.inf, "-Infinity"),
    (1.7976931348623157e308, "1.7976931348623157E308"),  # Double.MAX_VALUE
    (2.2250738585072014e-308, "2.2250738585072014E-308"),  # Double.MIN_NORMAL
    (5e-324, "4.9E-324"),  # Double.MIN_VALUE: two digits at least, the closer one
    (_f32(0.1), "0.10000000149011612"),  # (double) 0.1f
]

FLOATS = [
    (1.0, "1.0"),
    (0.1, "0.1"),
    (1.1, "1.1"),
    (3.14159, "3.14159"),
    (123.456, "123.456"),
    (1.0e10, "1.0E10"),
    (16777216.0, "1.6777216E7"),
    (1.0e-5, "1.0E-5"),
    (-0.0, "-0.0"),
    (math.nan, "NaN"),
    (3.4028234663852886e38, "3.4028235E38"),  # Float.MAX_VALUE
    (1.401298464324817e-45, "1.4E-45"),  # Float.MIN_VALUE
    (1.1754943508222875e-38, "1.1754944E-38"),  # Float.MIN_NORMAL (JDK 19+; JDK <= 18: 1.17549435E-38)
]


@pytest.mark.parametrize(("value", "expected"), DOUBLES)
def test_java_double_to_string(value: float, expected: str) -> None:
    assert java_double_to_string(value) == expected


@pytest.mark.parametrize(("value", "expected"), FLOATS)
def test_java_float_to_string(value: float, expected: str) -> None:
    assert java_float_to_string(_f32(value)) == expected


_JAVA_LAYOUT = re.compile(r"^-?(\d+\.\d+|\d\.\d+E-?\d+)$")


def _significant_digits(text: str) -> str:
    mantissa = text.lstrip("-").split("E")[0].replace(".", "")
    return mantissa.strip("0")


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != 0))
def test_java_double_round_trips_with_shortest_digits(value: float) -> None:
    text = java_double_to_string(value)
    assert _JAVA_LAYOUT.match(text)
    assert float(text) == value
    exponent = int(text.split("E")[1]) if "E" in text else None
    assert exponent is None or not (-3 <= exponent < 7)
    # Shortest digits, as Python's repr: the same digits whenever repr needs two or more.
    shortest = _significant_digits(repr(abs(value)).split("e")[0])
    if len(shortest) >= 2:
        assert _significant_digits(text) == shortest


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False).filter(lambda x: x != 0))
def test_java_float_round_trips(value: float) -> None:
    text = java_float_to_string(value)
    assert _JAVA_LAYOUT.match(text)
    assert _f32(float(text)) == value
    assert len(_significant_digits(text)) <= 9


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(), min_size=1, max_size=200))
def test_vectorised_double_columns_match_the_scalar_formatting(values: list[float]) -> None:
    array = pa.array([*values, None], pa.float64())
    assert java_strings(array, "f").to_pylist() == [java_double_to_string(v) for v in values] + [None]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(width=32), min_size=1, max_size=200))
def test_vectorised_float_columns_match_the_scalar_formatting(values: list[float]) -> None:
    array = pa.array([*values, None], pa.float32())
    assert java_strings(array, "f").to_pylist() == [java_float_to_string(v) for v in values] + [None]


# ---- string forms of Arrow values ---------------------------------------------------------


@pytest.mark.parametrize(
    ("array", "expected"),
    [
        (pa.array([1, -42, None], pa.int8()), ["1", "-42", None]),
        (pa.array([2**63 - 1], pa.int64()), ["9223372036854775807"]),
        (pa.array([2**64 - 1], pa.uint64()), ["18446744073709551615"]),
        (pa.array([True, False, None]), ["true", "false", None]),
        (pa.array(["a", "", None], pa.large_string()), ["a", "", None]),
        (pa.array(["x", "y", "x"]).dictionary_encode(), ["x", "y", "x"]),
        (pa.array([1.0, 3.14159, 1e10, None]), ["1.0", "3.14159", "1.0E10", None]),
        (pa.array([1.0, 0.1, None], pa.float32()), ["1.0", "0.1", None]),
        (pa.array([0.0, -0.0]), ["0.0", "-0.0"]),
        (
            pa.array([Decimal("12345.67890"), Decimal("-1.50000")], pa.decimal128(10, 5)),
            ["12345.67890", "-1.50000"],
        ),
        (
            pa.array([Decimal("0"), Decimal("1.234E-7"), Decimal("0.000001")], pa.decimal128(20, 10)),
            ["0E-10", "1.234E-7", "0.0000010000"],
        ),
        (pa.array([Decimal("1E+3")], pa.decimal128(5, -2)), ["1.0E+3"]),
        (pa.array([Decimal("7.5")], pa.decimal256(40, 1)), ["7.5"]),
        # LocalDate.toString: 4-digit years zero-padded, a sign beyond 9999 and below 0.
        (pa.array([19448, 0, -1, None], pa.date32()), ["2023-04-01", "1970-01-01", "1969-12-31", None]),
        # 9999-12-31 is day 2932896; year 0 is a leap year, so -0001-01-01 is 366 + 365 days
        # before 0001-01-01.
        (
            pa.array(
                [(dt.date(1, 1, 1) - EPOCH).days, (dt.date(5, 12, 31) - EPOCH).days, 2932897, -719162 - 731],
                pa.date32(),
            ),
            ["0001-01-01", "0005-12-31", "+10000-01-01", "-0001-01-01"],
        ),
        (pa.array([TS_MS], pa.date64()), ["2023-04-01"]),
        # Timestamps are the Avro long: micros, or millis for the ms unit.
        (pa.array([TS_MS * 1000 + 456], pa.timestamp("us", tz="UTC")), ["1680350460123456"]),
        (pa.array([TS_MS], pa.timestamp("ms")), ["1680350460123"]),
        (pa.array([1_680_350_460], pa.timestamp("s")), ["1680350460000000"]),
        (pa.array([TS_MS * 1_000_000 + 456_789, -1], pa.timestamp("ns")), ["1680350460123456", "-1"]),
        (pa.nulls(2), [None, None]),
    ],
)
def test_java_string_forms(array: pa.Array, expected: list[str | None]) -> None:
    out = java_strings(array, "f")
    assert out.type == pa.string()
    assert out.to_pylist() == expected


def test_consistent_logical_timestamps_render_like_java_sql_timestamp() -> None:
    micros = pa.array(
        [TS_MS * 1000 + 456, 1_680_350_460_000_000, 1_680_350_460_100_000, -1], pa.timestamp("us")
    )
    assert java_strings(micros, "f", consistent_logical_timestamp=True).to_pylist() == [
        "2023-04-01 12:01:00.123",
        "2023-04-01 12:01:00.0",
        "2023-04-01 12:01:00.1",
        "1970-01-01 00:00:00.0",  # micros / 1000 truncates toward zero
    ]
    millis = pa.array([TS_MS + 7], pa.timestamp("ms", tz="UTC"))
    assert java_strings(millis, "f", consistent_logical_timestamp=True).to_pylist() == [
        "2023-04-01 12:01:00.13"
    ]
    g = keygen(
        "ts", None, **{"hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled": "true"}
    )
    assert g.record_keys(pa.table({"ts": micros.slice(0, 1)})).to_pylist() == ["2023-04-01 12:01:00.123"]
    assert (
        g.table_properties()["hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled"]
        == "true"
    )


@pytest.mark.parametrize(
    "array",
    [
        pa.array([b"x"]),
        pa.array([[1]]),
        pa.array([{"a": 1}]),
        pa.array([dt.time(1)]),
        pa.array([1], pa.duration("s")),
    ],
)
def test_types_without_a_string_form_are_rejected(array: pa.Array) -> None:
    with pytest.raises(InvalidRecordKeyError, match="'k'"):
        keygen("k").record_keys(pa.table({"k": array}))


# ---- SimpleKeyGenerator -------------------------------------------------------------------

TRIPS = pa.table(
    {
        "uuid": ["334e26e9-8355-45cc-97c6-c31daf0df330", "3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04", "c"],
        "city": ["san_francisco", "chennai", "chennai"],
        "fare": [19.1, 41.06, 17.85],
    }
)


def test_simple_keys_and_partitions() -> None:
    g = keygen("uuid", "city")
    assert isinstance(g, SimpleKeyGenerator)
    assert (g.class_name, g.type_name) == ("org.apache.hudi.keygen.SimpleKeyGenerator", "SIMPLE")
    assert g.record_keys(TRIPS).to_pylist() == TRIPS.column("uuid").to_pylist()
    assert g.partition_paths(TRIPS).to_pylist() == ["san_francisco", "chennai", "chennai"]
    hive = keygen("uuid", "city", **{"hoodie.datasource.write.hive_style_partitioning": "true"})
    assert hive.partition_paths(TRIPS).to_pylist() == ["city=san_francisco", "city=chennai", "city=chennai"]
    # A double partition field renders like Java.
    assert keygen("uuid", "fare").partition_paths(TRIPS).to_pylist() == ["19.1", "41.06", "17.85"]


def test_simple_accepts_record_batches_and_chunked_tables() -> None:
    g = keygen("id", "p", **{"hoodie.datasource.write.hive_style_partitioning": "true"})
    batch = pa.record_batch({"id": pa.array([1, 2], pa.int32()), "p": pa.array([10, 300], pa.int16())})
    assert g.record_keys(batch).to_pylist() == ["1", "2"]
    assert g.partition_paths(batch).to_pylist() == ["p=10", "p=300"]
    table = pa.concat_tables([pa.Table.from_batches([batch]), pa.Table.from_batches([batch])])
    assert table.column("id").num_chunks == 2
    assert g.record_keys(table).to_pylist() == ["1", "2", "1", "2"]
    assert g.partition_paths(table).to_pylist() == ["p=10", "p=300", "p=10", "p=300"]
    empty = table.slice(0, 0)
    assert g.record_keys(empty).to_pylist() == [] and g.partition_paths(empty).to_pylist() == []


def test_null_and_empty_partition_values_go_to_the_default_partition() -> None:
    data = pa.table({"id": ["1", "2", "3"], "city": ["x", None, ""]})
    assert keygen("id", "city").partition_paths(data).to_pylist() == [
        "x",
        "__HIVE_DEFAULT_PARTITION__",
        "__HIVE_DEFAULT_PARTITION__",
    ]
    hive = keygen("id", "city", **{"hoodie.datasource.write.hive_style_partitioning": "true"})
    assert hive.partition_paths(data).to_pylist() == [
        "city=x",
        "city=__HIVE_DEFAULT_PARTITION__",
        "city=__HIVE_DEFAULT_PARTITION__",
    ]
    dictionary = data.set_column(1, "city", data.column("city").dictionary_encode())
    assert hive.partition_paths(dictionary).to_pylist() == hive.partition_paths(data).to_pylist()


@pytest.mark.parametrize("bad", [None, ""])
def test_simple_null_or_empty_key_names_field_and_row(bad: str | None) -> None:
    data = pa.table({"uuid": ["a", "b", bad, bad], "city": ["x"] * 4})
    with pytest.raises(InvalidRecordKeyError, match=r"'uuid'.* row 2\b"):
        keygen("uuid", "city").record_keys(data)


def test_missing_columns_are_invalid_record_keys() -> None:
    g = keygen("uuid", "town")
    with pytest.raises(InvalidRecordKeyError, match="'nope'"):
        keygen("nope", "city").record_keys(TRIPS)
    with pytest.raises(InvalidRecordKeyError, match="'town'"):
        g.partition_paths(TRIPS)
    with pytest.raises(InvalidRecordKeyError, match=r"'uuid\.x'"):
        keygen("uuid.x").record_keys(TRIPS)


def test_nested_fields_are_reached_by_dotted_paths() -> None:
    rider = pa.array(
        [{"id": 7, "home": {"city": "oslo"}}, None],
        pa.struct([("id", pa.int64()), ("home", pa.struct([("city", pa.string())]))]),
    )
    data = pa.table({"k": ["a", "b"], "rider": rider})
    g = keygen("k,rider.id", "rider.home.city", **{"hoodie.datasource.write.hive_style_partitioning": "true"})
    assert g.record_keys(data).to_pylist() == ["k:a,rider.id:7", "k:b,rider.id:__null__"]
    assert g.partition_paths(data).to_pylist() == [
        "rider.home.city=oslo",
        "rider.home.city=__HIVE_DEFAULT_PARTITION__",
    ]
    with pytest.raises(InvalidRecordKeyError, match=r"rider\.zip"):
        keygen("rider.zip").record_keys(data)


# ---- URL encoding -------------------------------------------------------------------------

ESCAPED_BY_HAND = {
    '"': "%22",
    "#": "%23",
    "%": "%25",
    "'": "%27",
    "*": "%2A",
    "/": "%2F",
    ":": "%3A",
    "=": "%3D",
    "?": "%3F",
    "\\": "%5C",
    "\x7f": "%7F",
    "{": "%7B",
    "[": "%5B",
    "]": "%5D",
    "^": "%5E",
    "\x00": "%00",
    "\x01": "%01",
    "\t": "%09",
    "\n": "%0A",
    "\r": "%0D",
    "\x1b": "%1B",
    "\x1f": "%1F",
}
CONTROL = {chr(c): f"%{c:02X}" for c in range(0x20)}  # the rest of 0x00-0x1F, by the spec's rule
KEPT = " }&+,;<>|~@!$()-._`aZ09éü中\U0001f600"


@pytest.mark.parametrize("char", sorted({**CONTROL, **ESCAPED_BY_HAND}))
def test_url_encoding_escapes_each_listed_character(char: str) -> None:
    expected = {**CONTROL, **ESCAPED_BY_HAND}[char]
    data = pa.table({"id": ["1"], "p": [f"a{char}b"]})
    plain = keygen("id", "p", **{"hoodie.datasource.write.partitionpath.urlencode": "true"})
    assert plain.partition_paths(data).to_pylist() == [f"a{expected}b"]
    hive = keygen(
        "id",
        "p",
        **{
            "hoodie.datasource.write.partitionpath.urlencode": "true",
            "hoodie.datasource.write.hive_style_partitioning": "true",
        },
    )
    assert hive.partition_paths(data).to_pylist() == [f"p=a{expected}b"]
    assert escape_path_name(f"a{char}b") == f"a{expected}b"


def test_url_encoding_keeps_other_characters_and_is_off_by_default() -> None:
    data = pa.table({"id": ["1", "2", "3"], "p": [KEPT, "2023/04/01", "a:b=c"]})
    encoded = keygen("id", "p", **{"hoodie.datasource.write.partitionpath.urlencode": "true"})
    assert encoded.partition_paths(data).to_pylist() == [KEPT, "2023%2F04%2F01", "a%3Ab%3Dc"]
    # Off: values verbatim, a "/" makes extra directory levels.
    assert keygen("id", "p").partition_paths(data).to_pylist() == [KEPT, "2023/04/01", "a:b=c"]


@pytest.mark.parametrize("value", ["..", "../etc", "a/../b", "x/..", "..\\x"])
def test_partition_values_cannot_climb_out_of_the_table(value: str) -> None:
    data = pa.table({"id": ["1"], "p": [value]})
    with pytest.raises(InvalidRecordKeyError, match="'p'"):
        keygen("id", "p").partition_paths(data)
    with pytest.raises(InvalidRecordKeyError):
        keygen("id", "p", **{"hoodie.datasource.write.hive_style_partitioning": "true"}).partition_paths(
            pa.table({"id": ["1"], "p": ["a/../b"]})
        )


def test_dots_inside_a_segment_are_fine() -> None:
    data = pa.table({"id": ["1", "2", "3"], "p": ["../etc", "..", "2024.01.01"]})
    g = keygen(
        "id",
        "p",
        **{
            "hoodie.datasource.write.partitionpath.urlencode": "true",
            "hoodie.datasource.write.hive_style_partitioning": "true",
        },
    )
    assert g.partition_paths(data).to_pylist() == ["p=..%2Fetc", "p=..", "p=2024.01.01"]


# ---- ComplexKeyGenerator ------------------------------------------------------------------

PEOPLE = pa.table(
    {
        "id": pa.array([1, 2, None, 4], pa.int32()),
        "name": ["Alice", "", "Carol", None],
        "byteField": pa.array([10, 20, None, 30], pa.int32()),
        "shortField": pa.array([300, 100, 300, None], pa.int32()),
    }
)


def test_complex_keys_with_null_and_empty_parts() -> None:
    g = keygen(
        "id,name", "byteField,shortField", **{"hoodie.datasource.write.hive_style_partitioning": "true"}
    )
    assert isinstance(g, ComplexKeyGenerator)
    assert (g.class_name, g.type_name) == ("org.apache.hudi.keygen.ComplexKeyGenerator", "COMPLEX")
    assert g.record_keys(PEOPLE).to_pylist() == [
        "id:1,name:Alice",
        "id:2,name:__empty__",
        "id:__null__,name:Carol",
        "id:4,name:__null__",
    ]
    assert g.partition_paths(PEOPLE).to_pylist() == [
        "byteField=10/shortField=300",
        "byteField=20/shortField=100",
        "byteField=__HIVE_DEFAULT_PARTITION__/shortField=300",
        "byteField=30/shortField=__HIVE_DEFAULT_PARTITION__",
    ]
    plain = keygen("id,name", "byteField,shortField")
    assert plain.partition_paths(PEOPLE).to_pylist() == [
        "10/300",
        "20/100",
        "__HIVE_DEFAULT_PARTITION__/300",
        "30/__HIVE_DEFAULT_PARTITION__",
    ]


def test_complex_all_null_or_empty_key_names_the_row() -> None:
    data = pa.table({"id": pa.array([1, None, None], pa.int64()), "name": ["a", "", None]})
    with pytest.raises(InvalidRecordKeyError, match=r"\['id', 'name'\].* row 1\b"):
        keygen("id,name", "id").record_keys(data)


def test_complex_many_partition_fields_and_none() -> None:
    data = pa.table({"a": ["x", "x", "y"], "b": [1, 2, 1], "c": [True, True, False], "k": ["1", "2", "3"]})
    g = keygen("k", "a,b,c", **{"hoodie.table.keygenerator.type": "COMPLEX"})
    assert g.partition_paths(data).to_pylist() == ["x/1/true", "x/2/true", "y/1/false"]
    none = ComplexKeyGenerator(["k", "a"], [])
    assert none.partition_paths(data).to_pylist() == ["", "", ""]


def test_complex_single_key_field_encoding() -> None:
    data = pa.table({"id": [1, 2], "p": ["a", "b"]})
    base = {"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator"}
    # 0.14.0 and older, and the default of 0.14.2+ / 1.0.3+: the field name is kept.
    assert keygen("id", "p", **base).record_keys(data).to_pylist() == ["id:1", "id:2"]
    # hoodie.write.complex.keygen.new.encoding=true: the 0.14.1 / 0.15.0 / 1.0.0-1.0.2 bare value.
    new = {**base, "hoodie.write.complex.keygen.new.encoding": "true"}
    assert keygen("id", "p", **new).record_keys(data).to_pylist() == ["1", "2"]
    # ... which table version 9 ignores, and a recorded table encoding overrides.
    assert keygen("id", "p", **new, **{"hoodie.table.version": "9"}).record_keys(data).to_pylist() == [
        "id:1",
        "id:2",
    ]
    recorded = {**base, "hoodie.table.complex.keygen.encoding": "VALUE_ONLY"}
    g = keygen("id", "p", **recorded)
    assert g.record_keys(data).to_pylist() == ["1", "2"]
    assert g.table_properties()["hoodie.table.complex.keygen.encoding"] == "VALUE_ONLY"
    with pytest.raises(InvalidRecordKeyError, match="'id'"):
        g.record_keys(pa.table({"id": [None, 1], "p": ["a", "b"]}))
    with pytest.raises(InvalidOptionError):
        keygen("id", "p", **base, **{"hoodie.table.complex.keygen.encoding": "SOMETIMES"})


# ---- non-partitioned and global delete ----------------------------------------------------


def test_nonpartitioned_key_is_simple_for_one_field_and_complex_for_more() -> None:
    one = keygen("id")
    assert isinstance(one, NonpartitionedKeyGenerator)
    assert (one.class_name, one.type_name) == (
        "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
        "NON_PARTITION",
    )
    assert one.record_keys(PEOPLE.slice(0, 2)).to_pylist() == ["1", "2"]
    assert one.partition_paths(PEOPLE).to_pylist() == ["", "", "", ""]
    two = keygen("id,name")
    assert two.record_keys(PEOPLE).to_pylist()[:2] == ["id:1,name:Alice", "id:2,name:__empty__"]
    with pytest.raises(InvalidRecordKeyError, match=r"'id'.* row 2\b"):
        one.record_keys(PEOPLE)


def test_global_delete_keys_are_always_complex() -> None:
    g = keygen("id", "byteField", **{"hoodie.table.keygenerator.type": "GLOBAL_DELETE"})
    assert isinstance(g, GlobalDeleteKeyGenerator)
    assert g.record_keys(PEOPLE.slice(0, 1)).to_pylist() == ["id:1"]
    assert g.partition_paths(PEOPLE.slice(0, 1)).to_pylist() == [""]
    assert g.partition_fields == []


# ---- TimestampBasedKeyGenerator -----------------------------------------------------------


def ts_keygen(**timebased: str) -> KeyGenerator:
    props = {
        "hoodie.table.recordkey.fields": "id",
        "hoodie.table.partition.fields": "ts",
        "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    }
    for key, value in timebased.items():
        if key.startswith("hoodie."):
            props[key] = value
        else:
            props["hoodie.keygen.timebased." + key.replace("_", ".")] = value
    return key_generator_from_properties(props)


def ts_paths(g: KeyGenerator, values: list, type_: pa.DataType | None = None) -> list[str]:
    data = pa.table({"id": pa.array(range(len(values))), "ts": pa.array(values, type_)})
    return g.partition_paths(data).to_pylist()


@pytest.mark.parametrize(
    ("timestamp_type", "value", "extra"),
    [
        ("EPOCHMILLISECONDS", TS_MS, {}),
        ("UNIX_TIMESTAMP", TS_MS // 1000, {}),
        ("EPOCHMICROSECONDS", TS_MS * 1000 + 999, {}),
        ("SCALAR", TS_MS // 1000, {}),  # the scalar unit defaults to seconds
        ("SCALAR", TS_MS // 60_000, {"timestamp.scalar.time.unit": "MINUTES"}),
        ("SCALAR", TS_MS * 1_000_000, {"timestamp.scalar.time.unit": "nanoseconds"}),
    ],
)
def test_numeric_timestamp_types(timestamp_type: str, value: int, extra: dict[str, str]) -> None:
    g = ts_keygen(timestamp_type=timestamp_type, output_dateformat="yyyy/MM/dd/HH", **extra)
    assert isinstance(g, TimestampBasedKeyGenerator)
    assert ts_paths(g, [value]) == ["2023/04/01/12"]
    assert g.record_keys(pa.table({"id": [5], "ts": [value]})).to_pylist() == ["5"]


def test_scalar_days_and_date_columns() -> None:
    g = ts_keygen(
        **{
            "timestamp.type": "SCALAR",
            "timestamp.scalar.time.unit": "DAYS",
            "output.dateformat": "yyyy-MM-dd",
        }
    )
    assert ts_paths(g, [19448, None]) == ["2023-04-01", "1970-01-02"]  # null: the default of one unit
    assert ts_paths(g, [dt.date(2023, 4, 1)], pa.date32()) == ["2023-04-01"]
    assert ts_paths(g, [TS_MS], pa.date64()) == ["2023-04-01"]


def test_arrow_timestamps_are_instants_whatever_the_type() -> None:
    g = ts_keygen(timestamp_type="EPOCHMILLISECONDS", output_dateformat="yyyy-MM-dd HH:mm:ss.SSS")
    when = dt.datetime(2023, 4, 1, 12, 1, 0, 123456, tzinfo=dt.timezone.utc)
    for unit in ("s", "ms", "us", "ns"):
        expected = "2023-04-01 12:01:00.000" if unit == "s" else "2023-04-01 12:01:00.123"
        assert ts_paths(g, [when], pa.timestamp(unit, tz="UTC")) == [expected]
    assert ts_paths(g, [when.replace(tzinfo=None)], pa.timestamp("us")) == ["2023-04-01 12:01:00.123"]
    # One microsecond before the epoch is in the last millisecond of 1969.
    assert ts_paths(g, [-1], pa.timestamp("us")) == ["1969-12-31 23:59:59.999"]


def test_floats_and_decimals_are_truncated_like_java_longValue() -> None:
    g = ts_keygen(timestamp_type="EPOCHMILLISECONDS", output_dateformat="yyyy-MM-dd HH:mm:ss.SSS")
    assert ts_paths(g, [TS_MS + 0.9, -1.5, math.nan]) == [
        "2023-04-01 12:01:00.123",
        "1969-12-31 23:59:59.999",
        "1970-01-01 00:00:00.000",
    ]
    assert ts_paths(g, [Decimal("1680350460123.9")], pa.decimal128(20, 1)) == ["2023-04-01 12:01:00.123"]
    micros = ts_keygen(timestamp_type="EPOCHMICROSECONDS", output_dateformat="yyyy-MM-dd HH:mm:ss.SSS")
    assert ts_paths(micros, [-1500]) == ["1969-12-31 23:59:59.999"]  # TimeUnit.convert truncates to -1 ms


def test_null_times_take_hudis_default_value() -> None:
    millis = ts_keygen(timestamp_type="EPOCHMILLISECONDS", output_dateformat="yyyy-MM-dd HH:mm:ss.SSS")
    assert ts_paths(millis, [None, TS_MS]) == ["1970-01-01 00:00:00.001", "2023-04-01 12:01:00.123"]
    seconds = ts_keygen(timestamp_type="UNIX_TIMESTAMP", output_dateformat="yyyy-MM-dd HH:mm:ss")
    assert ts_paths(seconds, [None]) == ["1970-01-01 00:00:01"]
    strings = ts_keygen(
        timestamp_type="DATE_STRING",
        input_dateformat="yyyy-MM-dd'T'HH:mm:ss.SSSZ",
        output_dateformat="yyyy/MM/dd/HH",
    )
    assert ts_paths(strings, [None, "2023-04-01T12:01:00.123Z"]) == ["1970/01/01/00", "2023/04/01/12"]
    # Printed with the first input pattern in the input zone, then parsed back.
    no_ms = ts_keygen(
        timestamp_type="DATE_STRING",
        input_dateformat="yyyy-MM-dd HH:mm:ss",
        timezone="GMT+05:30",
        output_dateformat="yyyy-MM-dd HH:mm:ss.SSS",
    )
    assert ts_paths(no_ms, [None], pa.string()) == ["1970-01-01 05:30:00.000"]


def test_date_strings_like_the_timebased_fixture() -> None:
    g = ts_keygen(
        timestamp_type="DATE_STRING",
        input_dateformat="yyyy-MM-dd'T'HH:mm:ss.SSSZ",
        output_dateformat="yyyy/MM/dd/HH",
    )
    values = ["2023-04-01T12:01:00.123Z", "2023-04-04T13:01:00.123Z", "2023-04-01T12:01:00.123Z"]
    assert ts_paths(g, values) == ["2023/04/01/12", "2023/04/04/13", "2023/04/01/12"]
    # Without a configured zone the value is printed in the offset it carries.
    assert ts_paths(g, ["2023-04-01T23:59:00.000+0530", "2023-04-01T01:00:00.000-08:00"]) == [
        "2023/04/01/23",
        "2023/04/01/01",
    ]
    utc = ts_keygen(
        timestamp_type="DATE_STRING",
        input_dateformat="yyyy-MM-dd'T'HH:mm:ss.SSSZ",
        output_dateformat="yyyy/MM/dd/HH",
        output_timezone="UTC",
    )
    assert ts_paths(utc, ["2023-04-01T23:59:00.000+0530", "2023-04-01T01:00:00.000-08:00"]) == [
        "2023/04/01/18",
        "2023/04/01/09",
    ]


def test_date_strings_with_zones_and_several_input_formats() -> None:
    kolkata = ts_keygen(
        timestamp_type="DATE_STRING",
        input_dateformat="yyyy-MM-dd HH:mm:ss",
        input_timezone="Asia/Kolkata",
        output_dateformat="yyyy-MM-dd HH:mm",
        output_timezone="UTC",
    )
    assert ts_paths(kolkata, ["2023-04-01 12:01:00"]) == ["2023-04-01 06:31"]
    # The input zone is also the output zone when no output zone is set.
    same = ts_keygen(
        timestamp_type="DATE_STRING",
        input_dateformat="yyyy-MM-dd HH:mm:ss",
        input_timezone="Asia/Kolkata",
        output_dateformat="HH:mm",
    )
    assert ts_paths(same, ["2023-04-01 12:01:00"]) == ["12:01"]
    several = ts_keygen(
        timestamp_type="MIXED",
        input_dateformat="yyyy-MM-dd'T'HH:mm:ssZ, yyyyMMdd,yyyy/M/d",
        output_dateformat="yyyy-MM-dd",
    )
    assert ts_paths(several, ["2023-04-01T23:00:00Z", "20230502", "2023/6/7", None]) == [
        "2023-04-01",
        "2023-05-02",
        "2023-06-07",
        "1970-01-01",
    ]
    delimited = ts_keygen(
        timestamp_type="DATE_STRING",
        input_dateformat="yyyy-MM-dd|dd.MM.yyyy",
        output_dateformat="yyyyMMdd",
        **{"input.dateformat.list.delimiter.regex": r"\|"},
    )
    assert ts_paths(delimited, ["2023-04-01", "02.05.2023"]) == ["20230401", "20230502"]


def test_date_string_layouts_parse_alike() -> None:
    g = ts_keygen(
        timestamp_type="DATE_STRING",
        input_dateformat="yyyy-MM-dd HH:mm:ss",
        output_dateformat="yyyy-MM-dd HH:mm:ss",
    )
    padded = ["2023-04-01 12:01:00", "2024-02-29 23:59:59"]
    assert ts_paths(g, padded) == padded
    # Joda also reads unpadded numbers; one such row sends the batch through the general parser.
    assert ts_paths(g, [*padded, "2023-4-1 2:3:4"]) == [*padded, "2023-04-01 02:03:04"]
    dotted = ts_keygen(
        timestamp_type="DATE_STRING", input_dateformat="dd.MM.yyyy HH:mm", output_dateformat="yyyyMMddHHmm"
    )
    assert ts_paths(dotted, ["01.04.2023 12:01", "29.02.2024 00:00"]) == ["202304011201", "202402290000"]
    with pytest.raises(InvalidRecordKeyError, match=re.escape("'30.02.2024 00:00'")):
        ts_paths(dotted, ["01.04.2023 12:01", "30.02.2024 00:00"])


def test_many_distinct_date_strings() -> None:
    start = dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc)
    moments = [start + dt.timedelta(seconds=7919 * i, milliseconds=i % 1000) for i in range(20_000)]
    texts = [m.strftime("%Y-%m-%dT%H:%M:%S.") + f"{m.microsecond // 1000:03d}Z" for m in moments]
    texts[5] = None
    g = ts_keygen(
        timestamp_type="DATE_STRING",
        input_dateformat="yyyy-MM-dd'T'HH:mm:ss.SSSZ",
        output_dateformat="yyyy/MM/dd/HH",
    )
    expected = [m.strftime("%Y/%m/%d/%H") for m in moments]
    expected[5] = "1970/01/01/00"
    assert ts_paths(g, texts) == expected


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("UTC", "2023/04/01/12"),
        ("GMT", "2023/04/01/12"),
        ("GMT+08:00", "2023/04/01/20"),
        ("GMT-8", "2023/04/01/04"),
        ("Asia/Kolkata", "2023/04/01/17"),  # +05:30
        ("America/Los_Angeles", "2023/04/01/05"),  # daylight saving time: -07:00
    ],
)
def test_output_time_zones(zone: str, expected: str) -> None:
    g = ts_keygen(timestamp_type="EPOCHMILLISECONDS", output_dateformat="yyyy/MM/dd/HH", output_timezone=zone)
    assert ts_paths(g, [TS_MS]) == [expected]
    both = ts_keygen(timestamp_type="EPOCHMILLISECONDS", output_dateformat="yyyy/MM/dd/HH", timezone=zone)
    assert ts_paths(both, [TS_MS]) == [expected]


def test_output_patterns() -> None:
    def fmt(pattern: str, value: int = TS_MS) -> str:
        return ts_paths(ts_keygen(timestamp_type="EPOCHMILLISECONDS", output_dateformat=pattern), [value])[0]

    assert fmt("yyyyMMddHHmmssSSS") == "20230401120100123"
    assert fmt("yy/M/d/H/m/s/S/SS") == "23/4/1/12/1/0/1/12"
    assert fmt("'year='yyyy'/month='MM") == "year=2023/month=04"
    assert fmt("yyyy-MM-dd'T'HH 'o''clock'") == "2023-04-01T12 o'clock"
    assert fmt("yyyyy SSSS") == "02023 1230"
    assert fmt("yyyy-MM-dd ZZ", value=0) == "1970-01-01 +00:00"


def test_timestamp_partitions_with_hive_style_and_url_encoding() -> None:
    g = ts_keygen(
        timestamp_type="EPOCHMILLISECONDS",
        output_dateformat="yyyy-MM-dd HH:mm",
        **{
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.write.partitionpath.urlencode": "true",
        },
    )
    assert ts_paths(g, [TS_MS, None]) == ["ts=2023-04-01 12%3A01", "ts=1970-01-01 00%3A00"]
    slashed = ts_keygen(
        timestamp_type="EPOCHMILLISECONDS",
        output_dateformat="yyyy/MM/dd",
        **{
            "hoodie.datasource.write.partitionpath.urlencode": "true",
        },
    )
    assert ts_paths(slashed, [TS_MS]) == ["2023%2F04%2F01"]


def test_timestamp_value_errors() -> None:
    strings = ts_keygen(timestamp_type="DATE_STRING", input_dateformat="yyyy-MM-dd", output_dateformat="yyyy")
    with pytest.raises(InvalidRecordKeyError, match=r"'ts'.*'04/01/2023' at row 1\b"):
        ts_paths(strings, ["2023-04-01", "04/01/2023"])
    for impossible in ("2023-02-29", "2023-13-01", "2023-00-10", ""):
        with pytest.raises(InvalidRecordKeyError, match="'ts'"):
            ts_paths(strings, [impossible])
    assert ts_paths(strings, ["2024-02-29"]) == ["2024"]
    with pytest.raises(InvalidRecordKeyError, match="reads date strings"):
        ts_paths(strings, [1, 2])
    numbers = ts_keygen(timestamp_type="EPOCHMILLISECONDS", output_dateformat="yyyy")
    with pytest.raises(InvalidRecordKeyError, match="DATE_STRING"):
        ts_paths(numbers, ["2023-04-01"])
    days = ts_keygen(
        **{"timestamp.type": "SCALAR", "timestamp.scalar.time.unit": "DAYS", "output.dateformat": "y"}
    )
    with pytest.raises(InvalidRecordKeyError, match="out of range"):
        ts_paths(days, [2**62])
    with pytest.raises(InvalidRecordKeyError, match="'ts'"):
        ts_paths(numbers, [b"x"])


@pytest.mark.parametrize(
    ("timebased", "match"),
    [
        ({"output.dateformat": "yyyy"}, "timestamp.type"),  # no type and no input format
        ({"timestamp.type": "DATE_STRING", "output.dateformat": "yyyy"}, "input.dateformat"),
        ({"timestamp.type": "EPOCHMILLISECONDS"}, "output.dateformat"),
        ({"timestamp.type": "WEEKS", "output.dateformat": "yyyy"}, "timestamp.type"),
        (
            {
                "timestamp.type": "SCALAR",
                "timestamp.scalar.time.unit": "FORTNIGHTS",
                "output.dateformat": "y",
            },
            "unit",
        ),
        ({"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "EEE yyyy"}, "'E'"),
        ({"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "hh a"}, "'h'"),
        ({"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "dd MMM yyyy"}, "text months"),
        ({"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "yyyy 'Q"}, "quote"),
        ({"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "yyyy zzz"}, "'z'"),
        (
            {"timestamp.type": "DATE_STRING", "input.dateformat": "yy-MM-dd", "output.dateformat": "y"},
            "two-digit",
        ),
        (
            {"timestamp.type": "DATE_STRING", "input.dateformat": "yyyy-MM-dd ZZZ", "output.dateformat": "y"},
            "ZZZ",
        ),
        (
            {"timestamp.type": "DATE_STRING", "input.dateformat": "yyyy yyyy", "output.dateformat": "y"},
            "twice",
        ),
        (
            {
                "timestamp.type": "EPOCHMILLISECONDS",
                "output.dateformat": "y",
                "output.timezone": "Mars/Olympus",
            },
            "zone",
        ),
        ({"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "y", "timezone": "UTC+8"}, "zone"),
        ({"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "y", "timezone": "GMT+25:00"}, "zone"),
        (
            {
                "timestamp.type": "EPOCHMILLISECONDS",
                "output.dateformat": "y",
                "hoodie.keygen.datetime.parser.class": "com.example.Parser",
            },
            "parser",
        ),
    ],
)
def test_bad_timebased_options(timebased: dict[str, str], match: str) -> None:
    with pytest.raises(InvalidOptionError, match=match):
        ts_keygen(
            **{
                k if k.startswith("hoodie.") else "hoodie.keygen.timebased." + k: v
                for k, v in timebased.items()
            }
        )


def test_timebased_options_from_a_hudi_014_table_and_round_trip() -> None:
    # Hudi 0.14 persisted the date formats but not the timestamp type: DATE_STRING is implied.
    g = ts_keygen(input_dateformat="yyyy-MM-dd'T'HH:mm:ss.SSSZ", output_dateformat="yyyy/MM/dd/HH")
    assert isinstance(g, TimestampBasedKeyGenerator) and g.options.timestamp_type == "DATE_STRING"
    props = g.table_properties(table_version=6)
    assert props["hoodie.keygen.timebased.timestamp.type"] == "DATE_STRING"
    assert props["hoodie.keygen.timebased.input.dateformat"] == "yyyy-MM-dd'T'HH:mm:ss.SSSZ"
    assert props["hoodie.keygen.timebased.output.dateformat"] == "yyyy/MM/dd/HH"
    assert props["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
    again = key_generator_from_properties(props)
    assert again.options == g.options
    # The deprecated deltastreamer prefix is read too.
    old = key_generator_from_properties(
        {
            "hoodie.table.recordkey.fields": "id",
            "hoodie.table.partition.fields": "ts",
            "hoodie.table.keygenerator.type": "TIMESTAMP",
            "hoodie.deltastreamer.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
            "hoodie.deltastreamer.keygen.timebased.output.dateformat": "yyyy",
        }
    )
    assert ts_paths(old, [TS_MS // 1000]) == ["2023"]
    scalar = TimestampOptions("scalar", "yyyy", scalar_time_unit="days", timezone="UTC")
    assert scalar.to_properties() == {
        "hoodie.keygen.timebased.timestamp.type": "SCALAR",
        "hoodie.keygen.timebased.output.dateformat": "yyyy",
        "hoodie.keygen.timebased.timestamp.scalar.time.unit": "DAYS",
        "hoodie.keygen.timebased.timezone": "UTC",
    }


def test_timestamp_generator_takes_one_key_and_one_partition_field() -> None:
    with pytest.raises(InvalidOptionError):
        keygen(
            "id,name",
            "ts",
            **{
                "hoodie.table.keygenerator.type": "TIMESTAMP",
                "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
                "hoodie.keygen.timebased.output.dateformat": "yyyy",
            },
        )
    with pytest.raises(InvalidOptionError):
        keygen(
            "id",
            "ts,other",
            **{
                "hoodie.table.keygenerator.type": "TIMESTAMP",
                "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
                "hoodie.keygen.timebased.output.dateformat": "yyyy",
            },
        )


# ---- CustomKeyGenerator -------------------------------------------------------------------


def test_custom_generator_mixes_simple_and_timestamp_parts() -> None:
    props = {
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city:simple,ts:TIMESTAMP",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
        "hoodie.keygen.timebased.output.dateformat": "yyyy-MM-dd",
    }
    g = key_generator_from_properties(props)  # inferred from the typed fields
    assert isinstance(g, CustomKeyGenerator)
    assert (g.class_name, g.type_name) == ("org.apache.hudi.keygen.CustomKeyGenerator", "CUSTOM")
    assert g.partition_fields == ["city", "ts"]
    data = pa.table({"id": [1, 2], "city": ["oslo", None], "ts": [TS_MS, None]})
    assert g.record_keys(data).to_pylist() == ["1", "2"]
    assert g.partition_paths(data).to_pylist() == [
        "city=oslo/ts=2023-04-01",
        "city=__HIVE_DEFAULT_PARTITION__/ts=1970-01-01",
    ]
    v6 = g.table_properties(table_version=6)
    assert v6["hoodie.table.partition.fields"] == "city,ts"
    assert v6["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.CustomKeyGenerator"
    assert v6["hoodie.keygen.timebased.output.dateformat"] == "yyyy-MM-dd"
    v8 = g.table_properties(table_version=8)
    assert v8["hoodie.table.partition.fields"] == "city:SIMPLE,ts:TIMESTAMP"
    assert v8["hoodie.table.keygenerator.type"] == "CUSTOM" and "hoodie.table.keygenerator.class" not in v8
    # A v6 table keeps only the names; the types come from the write option.
    reopened = key_generator_from_properties(
        {**v6, "hoodie.datasource.write.partitionpath.field": "city:SIMPLE,ts:TIMESTAMP"}
    )
    assert reopened.partition_paths(data).to_pylist() == g.partition_paths(data).to_pylist()
    assert (
        key_generator_from_properties(v8).partition_paths(data).to_pylist()
        == g.partition_paths(data).to_pylist()
    )
    complex_key = key_generator_from_properties(
        {**props, "hoodie.datasource.write.recordkey.field": "id,city"}
    )
    assert complex_key.record_keys(data).to_pylist() == ["id:1,city:oslo", "id:2,city:__null__"]


@pytest.mark.parametrize("fields", ["city", "city:RANGE", "city:SIMPLE:x", ":SIMPLE"])
def test_custom_generator_rejects_untyped_or_unknown_parts(fields: str) -> None:
    with pytest.raises(InvalidOptionError):
        keygen("id", fields, **{"hoodie.table.keygenerator.type": "CUSTOM"})


# ---- building generators from properties --------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "partitions", "expected"),
    [
        ("id", None, NonpartitionedKeyGenerator),
        ("id", "", NonpartitionedKeyGenerator),
        ("id,name", None, NonpartitionedKeyGenerator),
        ("id", "city", SimpleKeyGenerator),
        ("id,name", "city", ComplexKeyGenerator),
        ("id", "city,day", ComplexKeyGenerator),
        ("id", "city:SIMPLE", CustomKeyGenerator),
    ],
)
def test_generator_inference(keys: str, partitions: str | None, expected: type) -> None:
    assert type(keygen(keys, partitions)) is expected


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (
            {"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator"},
            SimpleKeyGenerator,
        ),
        (
            {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleAvroKeyGenerator"},
            SimpleKeyGenerator,
        ),
        (
            {"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.ComplexAvroKeyGenerator"},
            ComplexKeyGenerator,
        ),
        ({"hoodie.table.keygenerator.type": "COMPLEX"}, ComplexKeyGenerator),
        ({"hoodie.datasource.write.keygenerator.type": "non_partition"}, NonpartitionedKeyGenerator),
        ({"hoodie.table.keygenerator.type": "NON_PARTITION_AVRO"}, NonpartitionedKeyGenerator),
        (
            {
                "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
                "hoodie.table.keygenerator.type": "NON_PARTITION",
            },
            NonpartitionedKeyGenerator,
        ),
        (
            {
                "hoodie.table.keygenerator.class": "org.apache.spark.sql.hudi.command.SqlKeyGenerator",
                "hoodie.sql.origin.keygen.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
            },
            ComplexKeyGenerator,
        ),
        (
            {"hoodie.table.keygenerator.class": "org.apache.spark.sql.hudi.command.SqlKeyGenerator"},
            SimpleKeyGenerator,
        ),
    ],
)
def test_generator_class_and_type_settings(setting: dict[str, str], expected: type) -> None:
    assert type(keygen("id", "city", **setting)) is expected


def test_simple_generator_without_partition_fields_is_nonpartitioned() -> None:
    g = keygen("id", "", **{"hoodie.table.keygenerator.type": "SIMPLE"})
    assert isinstance(g, NonpartitionedKeyGenerator)
    with pytest.raises(InvalidOptionError):
        SimpleKeyGenerator(["id"], [])
    with pytest.raises(InvalidOptionError):
        keygen("id,name", "city", **{"hoodie.table.keygenerator.type": "SIMPLE"})


def test_write_options_alone_describe_a_generator() -> None:
    g = key_generator_from_properties(
        {
            "hoodie.datasource.write.recordkey.field": " uuid ",
            "hoodie.datasource.write.partitionpath.field": "city",
            "hoodie.datasource.write.hive_style_partitioning": "TRUE",
        }
    )
    assert isinstance(g, SimpleKeyGenerator) and g.record_key_fields == ["uuid"] and g.hive_style_partitioning
    assert g.partition_paths(TRIPS).to_pylist()[0] == "city=san_francisco"


@pytest.mark.parametrize(
    ("props", "error"),
    [
        ({}, InvalidOptionError),
        ({"hoodie.table.recordkey.fields": " , "}, InvalidOptionError),
        (
            {"hoodie.table.recordkey.fields": "id", "hoodie.datasource.write.recordkey.field": "uuid"},
            InvalidOptionError,
        ),
        (
            {
                "hoodie.table.recordkey.fields": "id",
                "hoodie.table.partition.fields": "a",
                "hoodie.datasource.write.partitionpath.field": "b",
            },
            InvalidOptionError,
        ),
        (
            {
                "hoodie.table.recordkey.fields": "id",
                "hoodie.table.keygenerator.class": "com.example.MyKeyGen",
            },
            InvalidOptionError,
        ),
        (
            {"hoodie.table.recordkey.fields": "id", "hoodie.table.keygenerator.type": "RANDOM"},
            InvalidOptionError,
        ),
        (
            {
                "hoodie.table.recordkey.fields": "id",
                "hoodie.table.keygenerator.type": "SIMPLE",
                "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
            },
            InvalidOptionError,
        ),
        (
            {"hoodie.table.recordkey.fields": "id", "hoodie.datasource.write.hive_style_partitioning": "yes"},
            InvalidOptionError,
        ),
        (
            {"hoodie.table.recordkey.fields": "id", "hoodie.datasource.write.partitionpath.urlencode": "1"},
            InvalidOptionError,
        ),
        (
            {
                "hoodie.table.recordkey.fields": "id",
                "hoodie.table.partition.fields": "a:SIMPLE",
                "hoodie.table.keygenerator.type": "COMPLEX",
            },
            InvalidOptionError,
        ),
        (
            {"hoodie.table.recordkey.fields": "id", "hoodie.table.keygenerator.type": "AUTO_RECORD"},
            UnsupportedError,
        ),
        (
            {
                "hoodie.table.recordkey.fields": "id",
                "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.AutoRecordGenWrapperKeyGenerator",
            },
            UnsupportedError,
        ),
        (
            {
                "hoodie.table.recordkey.fields": "id",
                "hoodie.table.complex.keygen.encoding": "X",
                "hoodie.table.keygenerator.type": "COMPLEX",
            },
            InvalidOptionError,
        ),
        (
            {
                "hoodie.table.recordkey.fields": "id",
                "hoodie.table.version": "six",
                "hoodie.table.keygenerator.type": "COMPLEX",
            },
            InvalidOptionError,
        ),
    ],
)
def test_bad_properties(props: dict[str, str], error: type[Exception]) -> None:
    with pytest.raises(error):
        key_generator_from_properties(props)


@pytest.mark.parametrize(
    "props",
    [
        {"hoodie.table.recordkey.fields": "uuid", "hoodie.table.partition.fields": "city"},
        {
            "hoodie.table.recordkey.fields": "uuid,city",
            "hoodie.table.partition.fields": "city,fare",
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.write.partitionpath.urlencode": "true",
        },
        {"hoodie.table.recordkey.fields": "uuid"},
        {"hoodie.table.recordkey.fields": "uuid", "hoodie.table.keygenerator.type": "GLOBAL_DELETE"},
        {
            "hoodie.table.recordkey.fields": "uuid",
            "hoodie.table.partition.fields": "fare",
            "hoodie.table.keygenerator.type": "TIMESTAMP",
            "hoodie.keygen.timebased.timestamp.type": "SCALAR",
            "hoodie.keygen.timebased.timestamp.scalar.time.unit": "HOURS",
            "hoodie.keygen.timebased.output.dateformat": "yyyy",
            "hoodie.keygen.timebased.input.timezone": "UTC",
            "hoodie.keygen.timebased.output.timezone": "Asia/Tokyo",
        },
    ],
)
@pytest.mark.parametrize("version", [None, 6, 8])
def test_table_properties_rebuild_the_same_generator(props: dict[str, str], version: int | None) -> None:
    g = key_generator_from_properties(props)
    persisted = g.table_properties(table_version=version)
    assert ("hoodie.table.keygenerator.class" in persisted) == (version != 8)
    assert ("hoodie.table.keygenerator.type" in persisted) == (version != 6)
    again = key_generator_from_properties(persisted)
    assert type(again) is type(g)
    assert again.record_keys(TRIPS).equals(g.record_keys(TRIPS))
    assert again.partition_paths(TRIPS).equals(g.partition_paths(TRIPS))
    assert again.table_properties(table_version=version) == persisted


def test_generators_can_be_built_directly() -> None:
    g = TimestampBasedKeyGenerator(
        ["id"], "ts", TimestampOptions("EPOCHMILLISECONDS", "yyyy/MM/dd"), hive_style_partitioning=True
    )
    assert g.partition_paths(pa.table({"id": [1], "ts": [TS_MS]})).to_pylist() == ["ts=2023/04/01"]
    assert "TimestampBasedKeyGenerator" in repr(g)
    with pytest.raises(InvalidOptionError):
        NonpartitionedKeyGenerator([])
