"""Probes of key generators, partition paths and pruning against Apache Hudi's behaviour.

Expected values come from Hudi's Java source (KeyGenUtils, PartitionPathEncodeUtils,
TimestampBasedAvroKeyGenerator, HoodieDateTimeParser with Joda's DateTimeZone.forTimeZone,
HoodieWriterUtils.validateTableConfig) and are worked out by hand or with a small Python model
here, never taken from shoal's output; hudi-rs reads what shoal writes.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import InvalidOptionError, InvalidRecordKeyError
from shoal.keygen import key_generator_from_properties
from tests.hudi_oracle import hudi_rs_read
from tests.table_files import file_digests

HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"
URLENCODE = "hoodie.datasource.write.partitionpath.urlencode"
TIMEBASED = "hoodie.keygen.timebased."
UTC = dt.timezone.utc
KEYGEN = "org.apache.hudi.keygen."


def _epoch_ms(*args: int) -> int:
    return int(dt.datetime(*args, tzinfo=UTC).timestamp() * 1000)


def _timestamp_paths(values: pa.Array, **timebased: str) -> list[str]:
    props = {
        "hoodie.table.recordkey.fields": "id",
        "hoodie.table.partition.fields": "ts",
        "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        **{TIMEBASED + k: v for k, v in timebased.items()},
    }
    keygen = key_generator_from_properties(props)
    return keygen.partition_paths(pa.table({"id": range(len(values)), "ts": values})).to_pylist()


# ---- time zones -------------------------------------------------------------------------------

JULY = _epoch_ms(2023, 7, 1, 12, 0)
JANUARY = _epoch_ms(2023, 1, 15, 12, 0)


@pytest.mark.parametrize(
    ("zone", "july", "january"),
    [
        # Joda converts the JDK 1.1 ids to regions before the zone database sees them: EST, MST
        # are New York and Denver, with daylight saving time, not the fixed -05:00 / -07:00.
        ("EST", "2023-07-01 08:00", "2023-01-15 07:00"),
        ("MST", "2023-07-01 06:00", "2023-01-15 05:00"),
        ("HST", "2023-07-01 02:00", "2023-01-15 02:00"),
        ("PST", "2023-07-01 05:00", "2023-01-15 04:00"),
        ("CST", "2023-07-01 07:00", "2023-01-15 06:00"),
        ("IST", "2023-07-01 17:30", "2023-01-15 17:30"),
        ("CTT", "2023-07-01 20:00", "2023-01-15 20:00"),
        ("JST", "2023-07-01 21:00", "2023-01-15 21:00"),
        ("AET", "2023-07-01 22:00", "2023-01-15 23:00"),
        ("ECT", "2023-07-01 14:00", "2023-01-15 13:00"),
    ],
)
def test_java_three_letter_zone_ids_are_the_regions_joda_makes_them(zone, july, january):
    paths = _timestamp_paths(
        pa.array([JULY, JANUARY], pa.int64()),
        **{"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "yyyy-MM-dd HH:mm", "timezone": zone},
    )
    assert paths == [july, january]


def test_a_table_with_a_three_letter_zone_is_written_and_read_back(tmp_path):
    path = str(tmp_path / "t")
    t = shoal.Table.create(
        path,
        name="t",
        record_key="id",
        partition_by="ts",
        key_generator="TIMESTAMP",
        options={
            TIMEBASED + "timestamp.type": "EPOCHMILLISECONDS",
            TIMEBASED + "output.dateformat": "yyyy/MM/dd/HH",
            TIMEBASED + "output.timezone": "EST",
        },
    )
    t.upsert(pa.table({"id": [1, 2], "ts": pa.array([JULY, JANUARY], pa.int64())}))
    expected = {1: "2023/07/01/08", 2: "2023/01/15/07"}
    rows = hudi_rs_read(path).to_pylist()
    assert {r["id"]: r["_hoodie_partition_path"] for r in rows} == expected
    for partition in expected.values():
        assert os.path.isfile(os.path.join(path, partition, ".hoodie_partition_metadata"))


@pytest.mark.parametrize(
    ("zone", "instant", "expected"),
    [
        # US daylight saving time: second Sunday of March to first Sunday of November.
        ("America/New_York", _epoch_ms(2040, 7, 1, 12, 0), "2040-07-01 08:00"),
        ("America/New_York", _epoch_ms(2040, 1, 15, 12, 0), "2040-01-15 07:00"),
        ("America/New_York", _epoch_ms(2099, 8, 31, 3, 30), "2099-08-30 23:30"),
        # Southern summer: +11:00 in January.
        ("Australia/Sydney", _epoch_ms(2050, 1, 15, 0, 0), "2050-01-15 11:00"),
        ("Australia/Sydney", _epoch_ms(2050, 7, 15, 0, 0), "2050-07-15 10:00"),
        ("EST", _epoch_ms(2040, 7, 1, 12, 0), "2040-07-01 08:00"),
    ],
)
def test_daylight_saving_time_goes_on_after_2037(zone, instant, expected):
    """Joda applies a zone's rules to every year; the zone files' listed transitions end in 2037."""
    paths = _timestamp_paths(
        pa.array([instant], pa.int64()),
        **{"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "yyyy-MM-dd HH:mm", "timezone": zone},
    )
    assert paths == [expected]


def test_date_strings_read_in_a_zone_after_2037():
    options = {
        "timestamp.type": "DATE_STRING",
        "input.dateformat": "yyyy-MM-dd HH:mm:ss",
        "input.timezone": "America/New_York",
        "output.timezone": "UTC",
        "output.dateformat": "yyyy-MM-dd'T'HH:mm",
    }
    texts = ["2040-07-01 08:00:00", "2040-01-15 08:00:00", "2040-11-04 01:30:00"]
    # 01:30 on 2040-11-04 happens twice in New York; Joda takes the earlier instant (EDT).
    assert _timestamp_paths(pa.array(texts), **options) == [
        "2040-07-01T12:00",
        "2040-01-15T13:00",
        "2040-11-04T05:30",
    ]
    # 2040-03-11 02:30 does not exist in New York (clocks go from 02:00 to 03:00): Joda refuses it.
    with pytest.raises(InvalidRecordKeyError, match="skips"):
        _timestamp_paths(pa.array(["2040-03-11 02:30:00"]), **options)


def test_years_past_32767_print_in_full():
    """A count of microseconds read as milliseconds (EPOCHMILLISECONDS on a micros column) is a
    time some 53,000 years on; Joda prints that year, and so must shoal, or a table written by
    both splits the same rows over two partitions."""
    micros_as_millis = 1_688_212_800_000_000  # 2023-07-01T12:00Z in microseconds
    days = micros_as_millis // 86_400_000
    cycles, rest = divmod(days, 146_097)  # whole 400-year Gregorian cycles
    date = dt.date(1970, 1, 1) + dt.timedelta(days=rest)
    expected = f"{date.year + 400 * cycles}/{date.month:02d}/{date.day:02d}"
    paths = _timestamp_paths(
        pa.array([micros_as_millis], pa.int64()),
        **{"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "yyyy/MM/dd"},
    )
    assert paths == [expected]


# ---- write options that contradict the table -----------------------------------------------------


def _simple_table(path: str) -> shoal.Table:
    t = shoal.Table.create(path, name="t", record_key="id", partition_by="city")
    t.upsert(pa.table({"id": [1, 2], "city": ["a b", "x"], "v": [1, 2]}))
    return t


CONFLICTS = [
    {HIVE_STYLE: "true"},
    {URLENCODE: "true"},
    {"hoodie.datasource.write.recordkey.field": "v"},
    {"hoodie.datasource.write.recordkey.field": "id,v"},
    {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator"},
    {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator"},
    {"hoodie.datasource.write.keygenerator.type": "CUSTOM"},
]


@pytest.mark.parametrize("options", CONFLICTS, ids=lambda o: "=".join(next(iter(o.items()))))
def test_write_options_contradicting_the_table_are_refused(tmp_path, options):
    """Hudi fails such a write with "Config conflict"; ignoring the option would put the rows
    elsewhere than asked (or key them otherwise)."""
    path = str(tmp_path / "t")
    _simple_table(path)
    before = file_digests(Path(path))
    row = pa.table({"id": [3], "city": ["a b"], "v": [3]})
    with pytest.raises(InvalidOptionError, match="conflict"):
        shoal.Table(path, options=options).upsert(row)
    with pytest.raises(InvalidOptionError, match="conflict"):
        shoal.Table(path).upsert(row, options=options)
    assert file_digests(Path(path)) == before


def test_timestamp_options_contradicting_the_table_are_refused(tmp_path):
    path = str(tmp_path / "t")
    t = shoal.Table.create(
        path,
        name="t",
        record_key="id",
        partition_by="ts",
        key_generator="TIMESTAMP",
        options={
            TIMEBASED + "timestamp.type": "EPOCHMILLISECONDS",
            TIMEBASED + "output.dateformat": "yyyy/MM",
        },
    )
    t.upsert(pa.table({"id": [1], "ts": pa.array([JULY], pa.int64())}))
    before = file_digests(Path(path))
    row = pa.table({"id": [2], "ts": pa.array([JANUARY], pa.int64())})
    for options in (
        {TIMEBASED + "output.dateformat": "yyyy/MM/dd"},
        {TIMEBASED + "timestamp.type": "UNIX_TIMESTAMP"},
    ):
        with pytest.raises(InvalidOptionError, match="conflict"):
            shoal.Table(path).upsert(row, options=options)
    assert file_digests(Path(path)) == before
    # The same settings, written otherwise, are no conflict.
    t.upsert(
        row,
        options={
            TIMEBASED + "timestamp.type": "epochmilliseconds",
            TIMEBASED + "output.dateformat": "yyyy/MM",
            "hoodie.datasource.write.keygenerator.class": KEYGEN + "TimestampBasedAvroKeyGenerator",
        },
    )
    assert sorted(r["_hoodie_partition_path"] for r in hudi_rs_read(path).to_pylist()) == [
        "2023/01",
        "2023/07",
    ]


@pytest.mark.parametrize(
    "options",
    [
        {HIVE_STYLE: "FALSE", URLENCODE: "false"},
        {"hoodie.datasource.write.recordkey.field": " id "},
        {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleAvroKeyGenerator"},
        {"hoodie.datasource.write.keygenerator.type": "simple"},
    ],
)
def test_write_options_agreeing_with_the_table_are_accepted(tmp_path, options):
    path = str(tmp_path / "t")
    _simple_table(path)
    shoal.Table(path, options=options).upsert(pa.table({"id": [3], "city": ["a b"], "v": [3]}))
    rows = hudi_rs_read(path).to_pylist()
    assert sorted((r["id"], r["_hoodie_partition_path"]) for r in rows) == [(1, "a b"), (2, "x"), (3, "a b")]


def test_a_simple_generator_without_partitions_reopens_with_its_own_options(tmp_path):
    """A simple generator without partition fields makes a non-partitioned table; writing again
    with the options that created it is no conflict."""
    path = str(tmp_path / "t")
    options = {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator"}
    t = shoal.Table.create(path, name="t", record_key="id", options=options)
    t.upsert(pa.table({"id": [1], "v": [1]}))
    shoal.Table(path, options=options).upsert(pa.table({"id": [2], "v": [2]}))
    assert sorted(r["id"] for r in hudi_rs_read(path).to_pylist()) == [1, 2]


def test_spark_write_options_contradicting_the_table_are_refused(spark, tmp_path):
    import shoal.spark

    path = str(tmp_path / "t")
    base = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
    }
    df = spark.createDataFrame([(1, "a/b", 1)], "id long, city string, v long")
    shoal.spark.write(df, path, "upsert", {**base, URLENCODE: "true"})
    before = file_digests(Path(path))
    for conflict in ({URLENCODE: "false"}, {HIVE_STYLE: "true"}):
        with pytest.raises(InvalidOptionError, match="conflict"):
            shoal.spark.write(df, path, "upsert", {**base, **conflict})
    assert file_digests(Path(path)) == before
    assert [r["_hoodie_partition_path"] for r in hudi_rs_read(path).to_pylist()] == ["a%2Fb"]


# ---- partition paths of special values on both engines --------------------------------------------

# PartitionPathEncodeUtils.escapePathName's set: control characters and " # % ' * / : = ? \ { [ ] ^ DEL.
_ESCAPED = {chr(c) for c in range(0x20)} | set("\"#%'*/:=?\\{[]^\x7f")
SPECIAL = [
    "a b",
    "x,y",
    "k:v",
    "a=b",
    "50%",
    "ü日本",
    "",
    None,
    "__HIVE_DEFAULT_PARTITION__",
    "q?#",
    "[x]",
    "x/y",
]


def _hudi_segment(field: str, value: str | None, hive: bool, url: bool) -> str:
    """KeyGenUtils.getRecordPartitionPath for one field."""
    if value is None or value == "":
        text = "__HIVE_DEFAULT_PARTITION__"
    else:
        text = "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value) if url else value
    return f"{field}={text}" if hive else text


def _hudi_complex_key(fields: list[str], row: dict) -> str:
    """KeyGenUtils.getRecordKey for several fields."""
    parts = []
    for f in fields:
        v = row[f]
        parts.append(f"{f}:" + ("__null__" if v is None else "__empty__" if v == "" else str(v)))
    return ",".join(parts)


def test_special_values_give_hudis_keys_and_paths_on_both_engines(spark, tmp_path):
    import shoal.spark

    rows = [
        {"id": i, "sub": None if i % 3 == 0 else "" if i % 3 == 1 else f"s/{i}", "city": v, "n": i % 2}
        for i, v in enumerate(SPECIAL)
    ]
    schema = pa.schema([("id", pa.int64()), ("sub", pa.string()), ("city", pa.string()), ("n", pa.int32())])
    data = pa.Table.from_pylist(rows, schema=schema)
    for hive, url in itertools.product([False, True], [False, True]):
        flags = {HIVE_STYLE: str(hive).lower(), URLENCODE: str(url).lower()}
        expected = {
            r["id"]: (
                _hudi_complex_key(["id", "sub"], r),
                _hudi_segment("city", r["city"], hive, url)
                + "/"
                + _hudi_segment("n", str(r["n"]), hive, url),
            )
            for r in rows
        }
        local = str(tmp_path / f"local_{hive}_{url}")
        t = shoal.Table.create(
            local, name="t", record_key=["id", "sub"], partition_by=["city", "n"], options=flags
        )
        t.upsert(data)
        distributed = str(tmp_path / f"spark_{hive}_{url}")
        options = {
            "hoodie.table.name": "t",
            "hoodie.datasource.write.recordkey.field": "id,sub",
            "hoodie.datasource.write.partitionpath.field": "city,n",
            **flags,
        }
        frame = spark.createDataFrame(
            [tuple(r.values()) for r in rows], "id long, sub string, city string, n int"
        )
        shoal.spark.write(frame, distributed, "upsert", options)
        for path in (local, distributed):
            read = hudi_rs_read(path).to_pylist()
            got = {r["id"]: (r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in read}
            assert got == expected, (path, hive, url)
            for _, partition in expected.values():
                assert os.path.isfile(os.path.join(path, partition, ".hoodie_partition_metadata"))
            for value in {r["city"] for r in rows if r["city"] is not None}:
                filtered = shoal.Table(path).read(filters=[("city", "=", value)])
                assert sorted(filtered.column("id").to_pylist()) == sorted(
                    r["id"] for r in read if r["city"] == value
                ), (path, value)
