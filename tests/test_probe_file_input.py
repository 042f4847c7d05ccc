"""A seeded differential probe of Spark writes whose input is a scan of parquet files.

Each seed writes random parquet files with pyarrow (many column types, dictionary encodings,
several files and row groups, empty files, byte-range splits) and writes them twice with
``shoal.spark.write`` into two fresh tables: once as the route tasks read the files themselves
(``shoal.spark.file_input``), once through Spark's rows (the option turning it off). Spark's
reading is the oracle: both tables must hold the same rows, and hudi-rs must read the direct
table's rows too. Some seeds add a file pyarrow would not read as Spark does (a type Spark
widens or converts, a missing column): those writes must go through Spark, and the qualifying
ones must not.

A second probe does the same for Hive-partitioned inputs (``d0=007/d1=a%2Fb/``, written by
pyarrow into directories named as Spark's writer names them, or by Spark's writer): Spark's
types for the partition columns (inferred, declared by a read schema, or strings when inference
is off) decide whether the route tasks read the files, and a model of them says which."""

from __future__ import annotations

import decimal
import itertools
import logging
import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import DataFrame, SparkSession

import shoal
from shoal.spark.write import write as spark_write
from tests.hudi_oracle import hudi_rs_read, rows_by

SEEDS = range(30)
THROUGH_SPARK = "the write reads its input through Spark"
OFF = {"shoal.spark.write.direct.parquet.input": "false"}
# Meta columns that differ between two tables holding the same records.
UNCOMPARED = {"_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name"}
SORT = ["k", "rid"]

Values = Callable[[random.Random, int], pa.Array]


# ---- column kinds ------------------------------------------------------------------------------


def _maybe_null(rng: random.Random, values: list, null_share: float = 0.15) -> list:
    return [None if rng.random() < null_share else v for v in values]


def _text(rng: random.Random) -> str:
    alphabet = string.ascii_letters + "éßø日本語🙂 \t"
    return "" if rng.random() < 0.1 else "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))


def _ints(bits: int) -> Callable[[random.Random, int], list]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def values(rng: random.Random, n: int) -> list:
        return [
            rng.choice((low, high, 0)) if rng.random() < 0.1 else rng.randint(low, high) for _ in range(n)
        ]

    return values


def _floats(rng: random.Random, n: int) -> list:
    # No NaN: rows are compared as Python values, where NaN != NaN.
    special = (float("inf"), float("-inf"), -0.0, 0.0)
    return [rng.choice(special) if rng.random() < 0.1 else rng.uniform(-1e6, 1e6) for _ in range(n)]


def _decimals(precision: int, scale: int) -> Callable[[random.Random, int], list]:
    def values(rng: random.Random, n: int) -> list:
        digits = lambda: rng.randint(-(10**precision) + 1, 10**precision - 1)  # noqa: E731
        return [decimal.Decimal(digits()).scaleb(-scale) for _ in range(n)]

    return values


def _kind(arrow: pa.DataType, values: Callable[[random.Random, int], list]) -> Values:
    return lambda rng, n: pa.array(_maybe_null(rng, values(rng, n)), arrow)


def _timestamps(unit: str, tz: str | None) -> Values:
    per_second = {"s": 1, "ms": 1000, "us": 1_000_000}[unit]
    # 1900..2200: inside what every reader here takes without calendar questions.
    low, high = -2_208_988_800 * per_second, 7_258_118_400 * per_second
    return _kind(pa.timestamp(unit, tz), lambda rng, n: [rng.randint(low, high) for _ in range(n)])


def _struct(rng: random.Random, n: int) -> pa.Array:
    inner = pa.array(_maybe_null(rng, _ints(32)(rng, n)), pa.int32())
    text = pa.array(_maybe_null(rng, [_text(rng) for _ in range(n)]), pa.string())
    mask = pa.array([rng.random() < 0.1 for _ in range(n)], pa.bool_())
    return pa.StructArray.from_arrays([inner, text], names=["a", "b"], mask=mask)


def _lists(rng: random.Random, n: int) -> pa.Array:
    rows = [[rng.choice((None, rng.randint(-100, 100))) for _ in range(rng.randint(0, 4))] for _ in range(n)]
    return pa.array(_maybe_null(rng, rows), pa.list_(pa.int64()))


def _maps(rng: random.Random, n: int) -> pa.Array:
    def entries() -> list:
        keys = rng.sample(["a", "b", "c", "ü", "日"], rng.randint(0, 3))
        return [(k, rng.choice((None, rng.uniform(-1, 1)))) for k in keys]

    return pa.array(_maybe_null(rng, [entries() for _ in range(n)]), pa.map_(pa.string(), pa.float64()))


def _deep(rng: random.Random, n: int) -> pa.Array:
    def leaf() -> dict:
        return {"x": rng.choice((None, rng.randint(-5, 5))), "y": rng.choice((None, [], [_text(rng), None]))}

    rows = [{_text(rng): rng.choice((None, [leaf() for _ in range(rng.randint(0, 2))]))} for _ in range(n)]
    inner = pa.list_(pa.struct([("x", pa.int64()), ("y", pa.list_(pa.string()))]))
    return pa.array(_maybe_null(rng, [list(r.items()) for r in rows]), pa.map_(pa.string(), inner))


def _binary(rng: random.Random, n: int) -> pa.Array:
    rows = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 10))) for _ in range(n)]
    return pa.array(_maybe_null(rng, rows), pa.binary())


def _strings(rng: random.Random, n: int) -> pa.Array:
    return pa.array(_maybe_null(rng, [_text(rng) for _ in range(n)]), pa.string())


# Data column kinds, by column name. hudi-rs reads every one of them as shoal does.
KINDS: dict[str, Values] = {
    "i8": _kind(pa.int8(), _ints(8)),
    "i16": _kind(pa.int16(), _ints(16)),
    "i32": _kind(pa.int32(), _ints(32)),
    "i64": _kind(pa.int64(), _ints(64)),
    "f32": _kind(pa.float32(), _floats),
    "f64": _kind(pa.float64(), _floats),
    "flag": _kind(pa.bool_(), lambda rng, n: [rng.random() < 0.5 for _ in range(n)]),
    "text": _strings,
    "bytes": _binary,
    "dec_small": _kind(pa.decimal128(9, 2), _decimals(9, 2)),
    "dec_wide": _kind(pa.decimal128(38, 10), _decimals(38, 10)),
    "day": _kind(pa.date32(), lambda rng, n: [rng.randint(-25_000, 80_000) for _ in range(n)]),
    "ts_s_utc": _timestamps("s", "UTC"),
    "ts_ms_utc": _timestamps("ms", "UTC"),
    "ts_us_utc": _timestamps("us", "UTC"),
    "ts_s": _timestamps("s", None),
    "ts_ms": _timestamps("ms", None),
    "ts_us": _timestamps("us", None),
    "nested": _struct,
    "items": _lists,
    "attrs": _maps,
    "deep": _deep,
}


# ---- one seed's case ---------------------------------------------------------------------------


@dataclass
class Case:
    """What one seed writes: the table's create options, its data columns and its writes."""

    rng: random.Random
    key_type: pa.DataType
    partitioned: bool
    table_type: str
    kinds: list[str]
    key_pool: list
    index: str | None
    ts_values: Iterator[int]
    rids: Iterator[int] = field(default_factory=itertools.count)

    @classmethod
    def of(cls, seed: int) -> Case:
        rng = random.Random(seed)
        key_type = rng.choice([pa.int64(), pa.int32(), pa.string()])
        pool_size = rng.randint(20, 400)
        if pa.types.is_string(key_type):
            key_pool: list = [f"k{i}{rng.choice(['', 'é', '日'])}" for i in range(pool_size)]
        else:
            key_pool = rng.sample(range(-(2**31), 2**31 - 1), pool_size)
        ts = rng.sample(range(10**9), 20_000)
        kinds = rng.sample(sorted(KINDS), rng.randint(3, 9))
        if rng.random() < 0.3:
            # Instants only, so that a file may store them as INT96 (see _int96_able).
            kinds = [k for k in kinds if not k.startswith("ts_")] + ["ts_us_utc"]
        return cls(
            rng=rng,
            key_type=key_type,
            partitioned=rng.random() < 0.6,
            table_type=rng.choice(["COPY_ON_WRITE", "MERGE_ON_READ"]),
            kinds=kinds,
            key_pool=key_pool,
            # A global index's key pass reads the files too (upserts only: a global insert that
            # keeps a repeated key is planned on the driver, with no pass over the input).
            index=rng.choice([None, None, "GLOBAL_BLOOM", "GLOBAL_SIMPLE"]),
            ts_values=iter(ts),
        )

    @property
    def create(self) -> dict[str, str]:
        options = {
            "table_name": "t",
            "record_key": "k",
            "ordering_field": "ts",
            "table_type": self.table_type,
        }
        if self.partitioned:
            options["partition_by"] = "p"
        if self.index is not None:
            options["hoodie.index.type"] = self.index
        return options

    @property
    def operations(self) -> list[str]:
        return ["upsert"] if self.index is not None else ["upsert", "insert", "bulk_insert"]

    def records(self, n: int) -> pa.Table:
        """``n`` records; ordering values never repeat, but a few records repeat the key, the
        partition and the ordering value of an earlier record of the same file (a tie the later
        record wins, in file order both paths keep)."""
        rng = self.rng
        keys = [rng.choice(self.key_pool) for _ in range(n)]
        parts = [rng.choice(["p0", "p1", "p2", "p/é"]) for _ in range(n)]
        ts = [next(self.ts_values) for _ in range(n)]
        for i in range(1, n):
            if rng.random() < 0.1:
                j = rng.randrange(i)
                keys[i], parts[i], ts[i] = keys[j], parts[j], ts[j]
        columns = {
            "k": pa.array(keys, self.key_type),
            "ts": pa.array(ts, pa.int64()),
            "rid": pa.array([next(self.rids) for _ in range(n)], pa.int64()),
        }
        if self.partitioned:
            columns["p"] = pa.array(parts, pa.string())
        for kind in self.kinds:
            columns[kind] = KINDS[kind](rng, n)
        return pa.table(columns)


# Ways one file of an input differs from the schema Spark reads it by, so that pyarrow would not
# read it as Spark does (Spark widens or converts, or reads nulls): the write goes through Spark.
MISMATCHES = ("uint32", "int32", "int96", "missing")


# Ways one file of an input may differ from the schema Spark reads it by and still be read by
# pyarrow as Spark reads it: a column Spark does not read, an instant in another time zone,
# large string and binary encodings.
HARMLESS = ("extra", "zone", "large")


@dataclass
class Input:
    """How a write reads its input directory; ``qualifies``: whether the route tasks may read
    its files themselves."""

    read: Callable[[SparkSession], DataFrame]
    qualifies: bool
    described: str


def _write_file(rng: random.Random, table: pa.Table, path: Path, **options) -> None:
    """One parquet file as pyarrow writes it, with random layout choices."""
    for name in table.column_names:
        column = table.column(name)
        dictionary_able = pa.types.is_string(column.type) or pa.types.is_integer(column.type)
        if dictionary_able and rng.random() < 0.3:
            table = table.set_column(table.column_names.index(name), name, column.dictionary_encode())
    if rng.random() < 0.3 and table.num_columns > 1:
        # Spark and the route tasks pick columns by name.
        table = table.select(rng.sample(table.column_names, table.num_columns))
    pq.write_table(
        table,
        path,
        row_group_size=rng.choice([7, 30, 100, 1000]),
        compression=rng.choice(["snappy", "zstd", "none", "gzip"]),
        use_dictionary=rng.random() < 0.7,
        data_page_size=rng.choice([None, 512]),
        data_page_version=rng.choice(["1.0", "2.0"]),
        store_schema=rng.random() < 0.8,
        store_decimal_as_integer=rng.random() < 0.3,
        **options,
    )


def _changed(table: pa.Table, column: str, stored: pa.DataType) -> pa.Table:
    index = table.column_names.index(column)
    return table.set_column(index, column, table.column(column).cast(stored))


def _odd_file(rng: random.Random, table: pa.Table, path: Path, odd: str, kinds: list[str]) -> None:
    """A file that differs from the schema Spark reads (see MISMATCHES and HARMLESS)."""
    if odd in ("uint32", "int32"):
        # The ordering values (all below 2**31) stored narrower: Spark widens them to longs.
        _write_file(rng, _changed(table, "ts", pa.uint32() if odd == "uint32" else pa.int32()), path)
    elif odd == "int96":
        _write_file(rng, table, path, use_deprecated_int96_timestamps=True)
    elif odd == "missing":
        _write_file(rng, table.drop_columns([rng.choice(kinds)]), path)
    elif odd == "extra":
        _write_file(rng, table.append_column("zz", pa.array([[1.5]] * table.num_rows)), path)
    elif odd == "zone":
        for kind in (k for k in kinds if k.endswith("_utc")):
            table = _changed(table, kind, pa.timestamp(table.column(kind).type.unit, "America/New_York"))
        _write_file(rng, table, path)
    else:
        larger = (
            ("text", pa.large_string()),
            ("bytes", pa.large_binary()),
            ("items", pa.large_list(pa.int64())),
        )
        for kind, large in larger:
            if kind in kinds:
                table = _changed(table, kind, large)
        _write_file(rng, table, path)


def _input(case: Case, directory: Path, mismatch: str | None, first: bool) -> Input:
    """Random parquet files in ``directory`` (one of them of the kind ``mismatch``, if given)
    and a way to read them."""
    rng = case.rng
    directory.mkdir()
    sizes = [rng.choice([0, rng.randint(1, 40), rng.randint(40, 600)]) for _ in range(rng.randint(1, 5))]
    if not any(sizes):
        sizes[0] = 50
    files = [case.records(n) for n in sizes]
    # Spark reads by a schema given: it infers none from the odd file.
    how = "schema" if mismatch else rng.choice(["plain", "select", "schema", "merge"])
    odd = mismatch or (rng.choice(HARMLESS) if how in ("schema", "select") and rng.random() < 0.5 else None)
    odd_at = rng.randrange(len(files)) if odd else -1
    for i, table in enumerate(files):
        path = directory / f"part-{i:03d}.parquet"
        if i == odd_at:
            _odd_file(rng, table, path, odd, case.kinds)
        else:
            _write_file(rng, table, path)
    schema = files[0].schema
    ddl = _ddl(schema)
    chosen = rng.sample(schema.names, len(schema.names))
    if how == "select" and first and rng.random() < 0.5:
        # Some columns only (in the table's first write: a later one would miss columns); the
        # record key, the ordering and partition fields, and the row number stay.
        chosen = [c for c in chosen if c in {"k", "ts", "p", "rid"} or rng.random() < 0.5]

    # The same files named as a directory, as a list of files, as a glob, or the directory twice
    # (Spark lists each file once).
    where = rng.choice(["directory", "files", "glob", "twice"])
    paths = {
        "directory": [str(directory)],
        "files": [str(p) for p in sorted(directory.iterdir())],
        "glob": [str(directory / "part-*.parquet")],
        "twice": [str(directory)] * 2,
    }[where]

    def read(spark: SparkSession) -> DataFrame:
        if how == "plain":
            return spark.read.parquet(*paths)
        if how == "merge":
            return spark.read.option("mergeSchema", "true").parquet(*paths)
        df = spark.read.schema(ddl).parquet(*paths)
        return df.select(*chosen) if how == "select" else df

    described = f"{how} of {where} {directory.name!r}, file {odd_at} {odd}, rows per file {sizes}"
    # Spark reads a file named twice twice: the route tasks would read it once.
    return Input(read, mismatch is None and where != "twice", described)


def _int96_able(kinds: list[str]) -> bool:
    """Whether the columns can be stored as INT96 timestamps Spark reads as the schema says:
    INT96 holds instants, so some timestamp column and no local times."""
    stamps = [k for k in kinds if k.startswith("ts_")]
    return bool(stamps) and all(k.endswith("_utc") for k in stamps)


def _ddl(schema: pa.Schema) -> str:
    """Spark's DDL for the schema Spark infers from the files (so that a file that differs is
    read by the schema, not inferred from)."""
    from pyspark.sql.pandas.types import from_arrow_type

    def spark_type(t: pa.DataType) -> str:
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_timestamp(t):
            return "timestamp" if t.tz is not None else "timestamp_ntz"
        return from_arrow_type(t).simpleString()

    return ", ".join(f"`{f.name}` {spark_type(f.type)}" for f in schema)


# ---- the probe ---------------------------------------------------------------------------------


def _comparable(table: pa.Table) -> pa.Table:
    return table.drop_columns([c for c in table.column_names if c in UNCOMPARED])


@pytest.mark.parametrize("seed", SEEDS)
def test_direct_and_spark_reads_of_parquet_files_write_the_same_table(spark, tmp_path, caplog, seed):
    """One seed's random input, written once or twice (a second write on top) into two tables:
    read by the route tasks and through Spark; see the module's text."""
    case = Case.of(seed)
    rng = case.rng
    writes = 1 + (rng.random() < 0.4)
    split = rng.random() < 0.5
    # Local times stay local and instants instants in any session time zone.
    zone = rng.choice(["UTC", "UTC", "America/Los_Angeles", "Asia/Kolkata"])
    spark.conf.set("spark.sql.session.timeZone", zone)
    direct, through = str(tmp_path / "direct"), str(tmp_path / "through")
    if split:
        spark.conf.set("spark.sql.files.maxPartitionBytes", str(rng.choice([2048, 4096, 16384])))
        spark.conf.set("spark.sql.files.openCostInBytes", str(rng.choice([512, 4096])))
    try:
        for w in range(writes):
            kinds = [m for m in MISMATCHES if m != "int96" or _int96_able(case.kinds)]
            mismatch = rng.choice(kinds) if rng.random() < 0.3 else None
            # Directory names Hadoop and pyarrow spell alike or not.
            name = rng.choice([f"in{w}", f"in {w}", f"in é{w}", f"in%{w}", f"in+{w}"])
            given = _input(case, tmp_path / name, mismatch, w == 0)
            operation = rng.choice(case.operations)
            options = dict(case.create)
            if operation != "upsert" and rng.random() < 0.3:
                options["hoodie.combine.before.insert"] = "true"
            context = f"seed {seed} write {w}: {operation} {given.described} split={split} {zone}"
            with caplog.at_level(logging.INFO, logger="shoal"):
                caplog.clear()
                spark_write(given.read(spark), direct, operation, options)
                assert (THROUGH_SPARK not in caplog.text) == given.qualifies, context
            spark_write(given.read(spark), through, operation, {**options, **OFF})
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")  # as the session fixture has it
        if split:
            spark.conf.unset("spark.sql.files.maxPartitionBytes")
            spark.conf.unset("spark.sql.files.openCostInBytes")

    written = _comparable(shoal.Table(direct).read())
    columns = written.column_names
    expected = rows_by(_comparable(shoal.Table(through).read()), columns, SORT)
    assert rows_by(written, columns, SORT) == expected, context
    assert len(expected) > 0
    assert rows_by(hudi_rs_read(direct), columns, SORT) == rows_by(written, columns, SORT), context


def test_files_named_twice_are_read_twice(spark, tmp_path, caplog):
    """Spark reads a file once per path naming it (the directory given twice, or the directory
    and the file): so does the write, through Spark, where ``inputFiles`` names it once."""
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(pa.table({"k": [1, 2], "ts": [1, 1], "v": ["a", "b"]}), source / "a.parquet")
    expected = sorted([(1, "a"), (2, "b")] * 2)
    for i, paths in enumerate([[source, source], [source, source / "a.parquet"]]):
        path = str(tmp_path / f"t{i}")
        with caplog.at_level(logging.INFO, logger="shoal"):
            caplog.clear()
            spark_write(spark.read.parquet(*map(str, paths)), path, "insert", table_name="t", record_key="k")
        assert "name a file more than once" in caplog.text
        for read in (shoal.Table(path).read(), hudi_rs_read(path)):
            assert (
                sorted(zip(read.column("k").to_pylist(), read.column("v").to_pylist(), strict=True))
                == expected
            )


# ---- Hive-partitioned inputs -------------------------------------------------------------------

# Characters Spark's writer escapes in a partition directory's name, as ``%XX``
# (``ExternalCatalogUtils.escapePathName``): ``}`` and spaces are not among them.
_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^") | frozenset(map(chr, range(1, 0x20)))

# Partition column types whose values the route tasks take from Spark's listing.
DIRECT_TYPES = frozenset({"string", "int", "bigint", "smallint", "tinyint", "date", "boolean"})


@dataclass(frozen=True)
class Level:
    """A kind of partition directory values: a pool of raw values (as Spark's writer spells
    them before escaping), the values every layout of the kind holds (that make Spark infer
    ``inferred``), and the types a read schema may declare for them."""

    pool: tuple[str, ...]
    forced: tuple[str, ...]
    inferred: str
    declarable: tuple[str, ...]


LEVELS = {
    # "007" parses as 7, and so does "7": two directories of one value.
    "int": Level(
        ("0", "7", "007", "-3", "42", "-128", "127"),
        (),
        "int",
        ("tinyint", "smallint", "int", "bigint", "string"),
    ),
    "long": Level(("5", "-1", "9223372036854775807"), ("9999999999",), "bigint", ("bigint", "string")),
    "date": Level(
        ("1970-01-01", "1900-02-28", "2199-12-31", "2024-02-29"),
        ("2024-01-01",),
        "date",
        ("date", "string", "timestamp"),
    ),
    # Spark infers no booleans from directory names: a read schema declares them.
    "bool": Level(("true", "false"), (), "string", ("boolean", "string")),
    "text": Level(
        (
            "a b",
            "é日本語🙂",
            "50%",
            "x=y",
            "#tag",
            "a/b",
            "c:d?*",
            "[x]{y}^",
            "'q\"",
            "back\\slash",
            "tab\tx",
            "%41",
            "%zz",
            "}",
        ),
        (),
        "string",
        ("string",),
    ),
    # Values of several kinds: Spark infers strings.
    "mixed": Level(("007", "1.5", "true", "x", "1e3"), ("1", "2024-01-01"), "string", ("string",)),
    "double": Level(("2", "-0.25"), ("1.5",), "double", ("double",)),
    "decimal": Level(("1", "-3"), ("12345678901234567890",), "decimal(20,0)", ("decimal(20,0)", "string")),
    "timestamp": Level(
        ("1999-12-31 23:59:59",), ("2024-01-01 10:00:00",), "timestamp", ("timestamp", "string")
    ),
}
# Kinds of data columns a hand-written file of a partitioned input stores.
PARTITIONED_KINDS = ("i32", "f64", "flag", "text", "dec_small", "day", "items")


def _escaped(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


@dataclass
class PartitionedCase:
    """One seed's Hive-partitioned input and its write: ``levels`` (partition column, kind, raw
    values; None for Hive's default partition), the leaf directories' values, each column's
    type as Spark reads it (the model: inferred from the kind, or declared), and how the input
    is read."""

    rng: random.Random
    levels: list[tuple[str, str, list[str | None]]]
    leaves: list[tuple[str | None, ...]]
    kinds: list[str]
    by_spark: bool
    how: str
    inference: bool
    types: dict[str, str]
    overlap: str | None
    paths: list[str] | None = None
    rids: Iterator[int] = field(default_factory=itertools.count)
    ts: Iterator[int] = field(default_factory=itertools.count)

    @classmethod
    def of(cls, seed: int) -> PartitionedCase:
        rng = random.Random(seed)
        names = [f"d{i}" for i in range(rng.randint(1, 3))]
        levels = []
        for name in names:
            # Every kind as some seed's first level.
            kind = sorted(LEVELS)[seed % len(LEVELS)] if name == "d0" else rng.choice(sorted(LEVELS))
            level = LEVELS[kind]
            values: list[str | None] = list(level.forced) + rng.sample(
                level.pool, rng.randint(1, min(5, len(level.pool)))
            )
            if rng.random() < 0.25:
                values.append(None)
            levels.append((name, kind, values))
        # Every value of every level in some leaf (so the inferred types are the kinds'), and a
        # few more leaves.
        width = max(len(v) for _, _, v in levels)
        leaves = {tuple(v[i % len(v)] for _, _, v in levels) for i in range(width)}
        for _ in range(rng.randint(0, 2)):
            leaves.add(tuple(rng.choice(v) for _, _, v in levels))
        how = "schema" if seed % 3 == 0 else rng.choice(["plain", "plain", "base_path", "merge"])
        inference = seed % 4 != 3
        types = {}
        for name, kind, _ in levels:
            if how == "schema":
                # The narrowest type more often (booleans, bytes).
                declarable = LEVELS[kind].declarable
                types[name] = declarable[0] if rng.random() < 0.5 else rng.choice(declarable)
            else:
                types[name] = LEVELS[kind].inferred if inference else "string"
        by_spark = rng.random() < 0.35
        overlap = None if by_spark or rng.random() < 0.6 else rng.choice(names)
        return cls(
            rng=rng,
            levels=levels,
            leaves=sorted(leaves, key=repr),
            kinds=rng.sample(PARTITIONED_KINDS, rng.randint(0, 3)),
            by_spark=by_spark,
            how=how,
            inference=inference,
            types=types,
            overlap=overlap,
        )

    @property
    def qualifies(self) -> bool:
        return all(t in DIRECT_TYPES for t in self.types.values())

    def records(self, n: int) -> pa.Table:
        """``n`` records of one file: the key repeats (ordering values do not, so that every
        path keeps the same record of a key)."""
        rng = self.rng
        columns = {
            "k": pa.array([rng.randrange(40) for _ in range(n)], pa.int64()),
            "ts": pa.array([next(self.ts) for _ in range(n)], pa.int64()),
            "rid": pa.array([next(self.rids) for _ in range(n)], pa.int64()),
            "p": pa.array([rng.choice(["p0", "p1", "p/é"]) for _ in range(n)], pa.string()),
        }
        for kind in self.kinds:
            columns[kind] = KINDS[kind](rng, n)
        return pa.table(columns)

    def write_input(self, spark: SparkSession, root: Path) -> None:
        """The leaf directories' files: by pyarrow into directories named as Spark's writer
        names them, or by Spark's writer itself."""
        rng = self.rng
        names = [name for name, _, _ in self.levels]
        if self.by_spark:
            rows = []
            for leaf in self.leaves:
                table = self.records(rng.randint(1, 60))
                rows += [(*r.values(), *leaf) for r in table.to_pylist()]
            ddl = _ddl(self.records(0).schema) + "".join(f", `{n}` string" for n in names)
            frame = spark.createDataFrame(rows, ddl).repartition(rng.randint(1, 3))
            frame.write.partitionBy(*names).parquet(str(root))
            return
        for leaf in self.leaves:
            directory = root.joinpath(
                *(
                    f"{n}={'__HIVE_DEFAULT_PARTITION__' if v is None else _escaped(v)}"
                    for n, v in zip(names, leaf, strict=True)
                )
            )
            directory.mkdir(parents=True)
            for i in range(rng.randint(1, 2)):
                # Empty files, but not only.
                empty = 0 if leaf != self.leaves[0] or i else 1
                table = self.records(rng.choice([empty, rng.randint(1, 40), rng.randint(40, 300)]))
                if self.overlap is not None and rng.random() < 0.7:
                    # A stored column named like a partition column: Spark takes the directory's value.
                    table = table.append_column(
                        self.overlap,
                        pa.array([rng.randrange(-9, 9) for _ in range(table.num_rows)], pa.int64()),
                    )
                _write_file(rng, table, directory / f"part-{i}.parquet")

    def read(self, spark: SparkSession, root: Path) -> DataFrame:
        if self.how == "merge":
            return spark.read.option("mergeSchema", "true").parquet(str(root))
        if self.how == "schema":
            data = _ddl(self.records(0).schema)
            return spark.read.schema(data + "".join(f", `{n}` {t}" for n, t in self.types.items())).parquet(
                str(root)
            )
        if self.how == "base_path":
            if self.paths is None:
                # The first level's directories, or the root when Hadoop would read a name as a
                # glob (all of them: a subset could hold other kinds of values).
                tops = [p for p in root.iterdir() if p.is_dir()]
                globs = any(set(p.name) & set("{}[]*?\\") for p in tops)
                self.paths = [str(root)] if globs else [str(p) for p in self.rng.sample(tops, len(tops))]
            return spark.read.option("basePath", str(root)).parquet(*self.paths)
        return spark.read.parquet(str(root))


PARTITIONED_SEEDS = range(16)
INFERENCE = "spark.sql.sources.partitionColumnTypeInference.enabled"


@pytest.mark.parametrize("seed", PARTITIONED_SEEDS)
def test_direct_and_spark_reads_of_partitioned_parquet_write_the_same_table(spark, tmp_path, caplog, seed):
    """One seed's random Hive-partitioned input (1-3 levels of directory values Spark parses as
    integers, dates, strings or nulls, or as doubles, decimals or timestamps, which the route
    tasks do not take), written into two tables: read by the route tasks and through Spark.
    Spark's reading is the oracle, as in the probe above."""
    case = PartitionedCase.of(seed)
    rng = case.rng
    if not case.inference:
        spark.conf.set(INFERENCE, "false")
    try:
        case.write_input(spark, tmp_path / "in")
        df = case.read(spark, tmp_path / "in")
        # The model's types are Spark's.
        assert {f.name: f.dataType.simpleString() for f in df.schema if f.name in case.types} == case.types
        # hudi-rs reads no table with a control character in a partition path.
        fields = [n for n, _, v in case.levels if not any(c < " " for c in "".join(filter(None, v)))]
        partition_by = rng.choice([None, "p", *fields])
        columns = rng.sample(df.columns, len(df.columns))
        if rng.random() < 0.4:
            # Some columns only, reordered: the record key, the ordering and partition fields
            # and the row number stay.
            columns = [c for c in columns if c in {"k", "ts", "rid", partition_by} or rng.random() < 0.5]
        selected = rng.random() < 0.5
        operation = rng.choice(["upsert", "insert", "bulk_insert"])
        options = {"table_name": "t", "record_key": "k", "ordering_field": "ts"}
        options["table_type"] = rng.choice(["COPY_ON_WRITE", "MERGE_ON_READ"])
        if partition_by is not None:
            options["partition_by"] = partition_by
        direct, through = str(tmp_path / "direct"), str(tmp_path / "through")
        context = (
            f"seed {seed}: {operation} of {case.how} {case.levels} leaves {case.leaves} types {case.types} "
            f"spark-written={case.by_spark} overlap={case.overlap} by {partition_by} columns "
            f"{columns if selected else 'all'}"
        )
        with caplog.at_level(logging.INFO, logger="shoal"):
            caplog.clear()
            given = case.read(spark, tmp_path / "in")
            spark_write(given.select(*columns) if selected else given, direct, operation, options)
            assert (THROUGH_SPARK not in caplog.text) == case.qualifies, context
        given = case.read(spark, tmp_path / "in")
        spark_write(given.select(*columns) if selected else given, through, operation, {**options, **OFF})
    finally:
        spark.conf.unset(INFERENCE)

    written = _comparable(shoal.Table(direct).read())
    columns = written.column_names
    expected = rows_by(_comparable(shoal.Table(through).read()), columns, SORT)
    assert rows_by(written, columns, SORT) == expected, context
    assert len(expected) > 0, context
    assert rows_by(hudi_rs_read(direct), columns, SORT) == expected, context
