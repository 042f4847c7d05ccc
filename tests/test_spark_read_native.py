"""``shoal.spark.read`` hands base-file slices to Spark's parquet reader: rows equal to the local
``Table.read`` and to hudi-rs (every fixture, COW and MOR with and without log files, read
optimized, time travel, projection, partition and row filters), and what Spark would read
differently stays on shoal's tasks."""

from __future__ import annotations

import datetime as _dt
import decimal
import importlib
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

import shoal
import shoal.spark
from shoal.fs.storage import Storage
from tests.hudi_oracle import hudi_rs_read
from tests.test_fixtures import ALL_FIXTURES, MOR_FIXTURES, _canonical, _sort_keys

spark_read = importlib.import_module("shoal.spark.read")
UTC = _dt.timezone.utc
CITIES = ["san francisco", "nyc", "sao_paulo"]
# Columns hudi-rs returns with other types than shoal (a timestamp without a time zone comes back
# as UTC): compared with the local reader only.
NOT_IN_HUDI_RS = {"local_at"}


def _split(path, **kwargs):
    job = spark_read.plan_read(path, **kwargs)
    return spark_read.split_native(job, spark_read.storage_for(job.base_uri))


def _rows(table: pa.Table, keys: list[str]) -> list[dict]:
    if table.num_rows == 0:
        return []
    # NaN != NaN: compare floats through their text.
    rows = table.sort_by([(k, "ascending") for k in keys]).to_pylist()
    return [{k: "nan" if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in rows]


def _assert_rows(ours: pa.Table, theirs: pa.Table, keys: list[str]) -> None:
    assert ours.num_rows == theirs.num_rows
    cols = [c for c in theirs.column_names if c in ours.column_names]
    assert ours.column_names == theirs.column_names or set(theirs.column_names) - set(cols) <= NOT_IN_HUDI_RS
    assert _rows(ours.select(cols), keys) == _rows(theirs.select(cols), keys)


def _assert_types(ours: pa.Table, local: pa.Table) -> None:
    """Spark's types of a native read are the ones shoal's tasks declare for the local rows."""
    assert spark_read.spark_schema(ours.schema) == spark_read.spark_schema(local.schema)


def _data(ids: range, version: str = "a", local_times: bool = False) -> pa.Table:
    """Every kind of column the native scan takes, with nulls and NaNs to filter on.
    ``local_times`` adds a timestamp without a time zone (an upsert into a copy-on-write file
    with one fails in the writer, 2026-11-22: tables with it are written by bulk insert only)."""
    n = len(ids)
    data = pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "city": pa.array([CITIES[i % 3] for i in ids]),
            "ts": pa.array([1_000 + i for i in ids], pa.int64()),
            "fare": pa.array([[1.5 * i, math.nan, None, 20.0 + i][i % 4] for i in ids]),
            "rider": pa.array([None if i % 5 == 0 else f"rider-{version}-{i % 7}" for i in ids]),
            "day": pa.array([_dt.date(2024, 1, 1 + i % 28) for i in ids], pa.date32()),
            "at": pa.array([_dt.datetime(2024, 1, 1, tzinfo=UTC) + _dt.timedelta(hours=i) for i in ids]),
            "amount": pa.array([decimal.Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
            "flag": pa.array([i % 2 == 0 for i in ids]),
            "small": pa.array([i % 100 for i in ids], pa.int32()),
            "ratio": pa.array([i / 3 for i in ids], pa.float32()),
            "blob": pa.array([i.to_bytes(2, "big") for i in ids], pa.binary()),
            "tags": pa.array([[f"t{i % 4}", version] if i % 6 else None for i in ids], pa.list_(pa.string())),
            "info": pa.array(
                [{"a": i, "b": f"b{i}"} for i in ids], pa.struct([("a", pa.int32()), ("b", pa.string())])
            ),
            "attrs": pa.array([[("k", i), ("v", n)] for i in ids], pa.map_(pa.string(), pa.int64())),
        }
    )
    if local_times:
        local = [_dt.datetime(2024, 1, 1) + _dt.timedelta(minutes=7 * i) for i in ids]
        data = data.append_column("local_at", pa.array(local, pa.timestamp("us")))
    return data


@pytest.fixture(scope="module")
def cow(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("native") / "cow")
    table = shoal.Table.create(path, "cow", record_key="id", partition_by="city", ordering_field="ts")
    table.bulk_insert(_data(range(0, 600)))
    table.upsert(_data(range(500, 700), "b"))
    return path


@pytest.fixture(scope="module")
def flat(tmp_path_factory) -> str:
    """Not partitioned."""
    path = str(tmp_path_factory.mktemp("native") / "flat")
    table = shoal.Table.create(path, "flat", record_key="id", ordering_field="ts")
    table.bulk_insert(_data(range(0, 300)))
    table.upsert(_data(range(250, 350), "b"))
    return path


@pytest.fixture(scope="module")
def mor(tmp_path_factory) -> str:
    """Merge-on-read: log files in the file groups of one partition only."""
    path = str(tmp_path_factory.mktemp("native") / "mor")
    table = shoal.Table.create(
        path, "mor", table_type="MERGE_ON_READ", record_key="id", partition_by="city", ordering_field="ts"
    )
    table.bulk_insert(_data(range(0, 600)))
    table.upsert(_data(range(0, 300, 3), "b"))  # ids divisible by 3: city "san francisco"
    return path


# ---- whole tables ---------------------------------------------------------------------------------


def test_cow_reads_every_slice_natively_with_the_local_rows(spark, cow):
    scan, rest = _split(cow)
    assert scan is not None and rest == ()
    assert len(scan.uris) == len(shoal.Table(cow).file_slices())
    ours = shoal.spark.read(spark, cow).toArrow()
    local = shoal.Table(cow).read()
    _assert_types(ours, local)
    _assert_rows(ours, local, ["id"])
    _assert_rows(ours, hudi_rs_read(cow), ["id"])


def test_mor_unions_native_base_files_with_merged_slices(spark, mor):
    table = shoal.Table(mor)
    slices = table.file_slices()
    with_logs = [s for s in slices if s.log_files]
    assert 0 < len(with_logs) < len(slices)
    scan, rest = _split(mor)
    assert scan is not None
    assert len(scan.uris) == len(slices) - len(with_logs) and len(rest) == len(with_logs)
    ours = shoal.spark.read(spark, mor).toArrow()
    local = table.read()
    _assert_types(ours, local)
    _assert_rows(ours, local, ["id"])
    _assert_rows(ours, hudi_rs_read(mor), ["id"])
    # The updated rows come from the merged slices.
    assert {r["rider"] for r in ours.filter(pa.compute.field("id") == 3).to_pylist()} == {"rider-b-3"}


def test_mor_read_optimized_is_all_base_files(spark, mor):
    scan, rest = _split(mor, query_type="read_optimized")
    assert scan is not None and rest == ()
    ours = shoal.spark.read(spark, mor, query_type="read_optimized").toArrow()
    local = shoal.Table(mor).read(query_type="read_optimized")
    _assert_rows(ours, local, ["id"])
    _assert_rows(ours, hudi_rs_read(mor, read_optimized=True), ["id"])


@pytest.mark.parametrize("which", ["cow", "mor"])
def test_time_travel_reads_the_files_of_the_instant(spark, cow, mor, which):
    path = cow if which == "cow" else mor
    table = shoal.Table(path)
    first = table.timeline[0].time
    scan, _ = _split(path, as_of=first)
    assert scan is not None
    ours = shoal.spark.read(spark, path, as_of=first).toArrow()
    local = table.read(as_of=first)
    assert local.num_rows == 600
    _assert_rows(ours, local, ["id"])
    _assert_rows(ours, hudi_rs_read(path, as_of=first), ["id"])


def test_non_partitioned_table(spark, flat):
    scan, rest = _split(flat)
    assert scan is not None and rest == ()
    ours = shoal.spark.read(spark, flat).toArrow()
    local = shoal.Table(flat).read()
    _assert_types(ours, local)
    _assert_rows(ours, local, ["id"])
    _assert_rows(ours, hudi_rs_read(flat), ["id"])


def test_files_without_a_later_column_read_it_as_nulls(spark, tmp_path):
    path = str(tmp_path / "t")
    table = shoal.Table.create(
        path,
        "evolved",
        record_key="id",
        partition_by="city",
        options={"hoodie.datasource.write.reconcile.schema": "true"},
    )
    table.bulk_insert(pa.table({"id": [1, 2], "city": ["a", "a"]}))
    table.insert(pa.table({"id": [3], "city": ["b"], "note": ["new"]}))
    scan, rest = _split(path)
    assert scan is not None and rest == ()
    ours = shoal.spark.read(spark, path).toArrow()
    assert _rows(ours.select(["id", "note"]), ["id"]) == [
        {"id": 1, "note": None},
        {"id": 2, "note": None},
        {"id": 3, "note": "new"},
    ]
    _assert_rows(ours, table.read(), ["id"])
    # Projected to the later column alone, the older files still give their rows.
    for native_scan in (True, False):
        only = shoal.spark.read(spark, path, columns=["note"], native_scan=native_scan).toArrow()
        assert sorted(only.column("note").to_pylist(), key=str) == [None, None, "new"]
    shoal.spark.register(spark)
    source = spark.read.format("shoal").option("columns", "note").load(path).toArrow()
    assert sorted(source.column("note").to_pylist(), key=str) == [None, None, "new"]
    local = table.read(columns=["note"])
    assert sorted(local.column("note").to_pylist(), key=str) == [None, None, "new"]
    # Filtered on it: the older files' rows are nulls there, as in Table.read.
    for filters in ([("note", "=", "new")], [("note", "not in", ["x"])]):
        expected = sorted(table.read(columns=["id"], filters=filters).column("id").to_pylist())
        assert expected == ([3] if filters[0][1] == "=" else [1, 2, 3])
        for native_scan in (True, False):
            frame = shoal.spark.read(spark, path, columns=["id"], filters=filters, native_scan=native_scan)
            assert sorted(r.id for r in frame.collect()) == expected
        option = json.dumps([list(f) for f in filters])
        frame = spark.read.format("shoal").option("filters", option).load(path)
        assert sorted(r.id for r in frame.collect()) == expected
    # The planner both engines share checks filters: the same typed errors, the same empty sets.
    with pytest.raises(shoal.InvalidArgumentError, match="takes a list"):
        shoal.spark.read(spark, path, filters=[("id", "in", "12")])
    with pytest.raises(shoal.InvalidArgumentError, match="do not fit"):
        shoal.spark.read(spark, path, filters=[("id", "=", "one")])
    for native_scan in (True, False):
        nothing = shoal.spark.read(spark, path, filters=[("city", "in", [])], native_scan=native_scan)
        assert nothing.count() == 0


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_fixture_snapshot(spark, fixture_table, name):
    path = fixture_table(name)
    table = shoal.Table(path)
    ours = shoal.spark.read(spark, path).toArrow()
    theirs = hudi_rs_read(str(path))
    assert ours.num_rows == theirs.num_rows
    if theirs.num_rows:
        cols = theirs.column_names
        keys = _sort_keys(table, cols)
        assert _canonical(ours.select(cols), keys) == _canonical(theirs, keys)
    if any(s.base_file and not s.log_files for s in table.file_slices()):
        assert _split(path)[0] is not None


@pytest.mark.parametrize("name", [n for n in MOR_FIXTURES if "empty" not in n])
def test_fixture_read_optimized(spark, fixture_table, name):
    path = fixture_table(name)
    scan, rest = _split(path, query_type="read_optimized")
    assert scan is not None and rest == ()
    ours = shoal.spark.read(spark, path, query_type="read_optimized").toArrow()
    theirs = hudi_rs_read(str(path), read_optimized=True)
    cols = theirs.column_names
    keys = _sort_keys(shoal.Table(path), cols)
    assert _canonical(ours.select(cols), keys) == _canonical(theirs, keys)


# ---- projection and filters -----------------------------------------------------------------------

FILTERS = [
    [("city", "=", "san francisco")],
    [("city", "in", ["nyc", "sao_paulo"]), ("fare", ">", 10.0)],
    [("fare", ">=", 1.5)],
    [("fare", "<", 30)],
    [("fare", "!=", 20.0)],
    [("fare", "not in", [1.5, 21.0])],
    [("rider", "not in", ["rider-a-1", "rider-b-2"])],
    [("rider", "<=", "rider-a-3")],
    [("id", ">", 100.5), ("id", "<=", 400)],
    [("id", "in", [1, 2, 3, 301, 999])],
    [("small", "==", 7)],
    [("ratio", ">", 50)],
    [("day", "<", _dt.date(2024, 1, 10))],
    [("at", ">=", _dt.datetime(2024, 1, 5, 3, 30, tzinfo=_dt.timezone(_dt.timedelta(hours=2))))],
    [("amount", "<=", decimal.Decimal("12.25"))],
    [("amount", ">", decimal.Decimal("100.5"))],
    [("flag", "=", True), ("blob", ">", b"\x00\x10")],
]


@pytest.mark.parametrize("filters", FILTERS, ids=[repr(f)[:60] for f in FILTERS])
def test_filters_keep_the_rows_the_local_reader_keeps(spark, cow, mor, flat, filters):
    columns = ["id", "rider", "fare"]  # filter columns outside the projection are read along
    for path in (cow, mor, flat):
        scan, _ = _split(path, columns=columns, filters=filters)
        # The merge-on-read table has log files in every slice of "san francisco".
        assert scan is not None or (path == mor and filters == FILTERS[0])
        ours = shoal.spark.read(spark, path, columns=columns, filters=filters).toArrow()
        assert ours.column_names == columns
        local = shoal.Table(path).read(columns=columns, filters=filters)
        _assert_rows(ours, local, ["id"])
        tasks = shoal.spark.read(spark, path, columns=columns, filters=filters, native_scan=False)
        _assert_rows(ours, tasks.toArrow(), ["id"])


def test_timestamps_without_time_zone_read_as_shoals_tasks_read_them(spark, tmp_path):
    """The files store local times; whichever path reads them, the rows and types are the ones
    shoal's tasks return, filtered or not."""
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, "local", record_key="id", ordering_field="ts")
    table.bulk_insert(_data(range(0, 300), local_times=True))
    at = _dt.datetime(2024, 1, 1, 12, 0, 0, 500)
    for filters in ([], [("local_at", "<", at)], [("local_at", "<", at.replace(tzinfo=UTC))]):
        try:
            tasks = shoal.spark.read(spark, path, filters=filters, native_scan=False).toArrow()
        except Exception:
            continue  # a value of the other kind than the declared type: Arrow refuses it
        ours = shoal.spark.read(spark, path, filters=filters).toArrow()
        assert ours.schema == tasks.schema
        _assert_rows(ours, tasks, ["id"])
        local = table.read(columns=["id"], filters=filters)
        assert sorted(ours["id"].to_pylist()) == sorted(local["id"].to_pylist())


@pytest.mark.parametrize(
    "filters",
    [
        [("fare", "=", math.nan)],  # NaN literals
        [("rider", "not in", [])],  # empty lists
        [("amount", ">", 100)],  # integers for decimals (Arrow needs a wider decimal)
        [("amount", ">", decimal.Decimal("1.125"))],  # decimals the column's type does not hold
        [("rider", "in", ["rider-a-1", None])],  # null in an ``in`` list
        [("at", "<", _dt.datetime(2024, 1, 3))],  # a naive value for a column of instants
        [("info", "!=", {"a": 1, "b": "b1"})],  # nested columns
    ],
)
def test_filters_without_a_spark_equivalent_stay_on_shoals_tasks(spark, cow, filters):
    try:
        local = shoal.Table(cow).read(columns=["id"], filters=filters)
    except shoal.InvalidArgumentError as exc:
        # Arrow cannot evaluate some of them (an integer against a decimal it would have to
        # widen, a struct, a naive instant): refused when the read is planned or a file is
        # filtered, by both engines alike.
        with pytest.raises(Exception) as spark_exc:
            shoal.spark.read(spark, cow, columns=["id"], filters=filters).collect()
        assert "do not fit" in str(exc) and "do not fit" in str(spark_exc.value)
        return
    scan, rest = _split(cow, filters=filters)
    assert scan is None and len(rest) == len(shoal.Table(cow).file_slices())
    _assert_rows(shoal.spark.read(spark, cow, columns=["id"], filters=filters).toArrow(), local, ["id"])


def test_partition_filter_scans_only_the_pruned_files(spark, cow):
    filters = [("city", "=", "nyc")]
    scan, rest = _split(cow, filters=filters)
    nyc = [s for s in shoal.Table(cow).file_slices() if s.partition_path == "nyc"]
    assert scan is not None and rest == () and len(scan.uris) == len(nyc)
    ours = shoal.spark.read(spark, cow, filters=filters).toArrow()
    assert set(ours["city"].to_pylist()) == {"nyc"}
    _assert_rows(ours, shoal.Table(cow).read(filters=filters), ["id"])


# ---- what Spark would read differently ------------------------------------------------------------


def test_types_spark_reads_otherwise_are_not_native(tmp_path):
    """INT96 and nanosecond timestamps, times, unsigned integers and fixed-size binaries have no
    Spark type equal to the one shoal declares for them."""
    data = pa.table(
        {
            "ok": pa.array([1], pa.int64()),
            "legacy": pa.array([_dt.datetime(2024, 1, 1)], pa.timestamp("us")),
            "nanos": pa.array([1], pa.timestamp("ns", tz="UTC")),
            "time": pa.array([_dt.time(1, 2)], pa.time64("us")),
            "unsigned": pa.array([1], pa.uint32()),
            "uuid": pa.array([b"0123456789abcdef"], pa.binary(16)),
            "nested_nanos": pa.array([{"t": 1}], pa.struct([("t", pa.timestamp("ns"))])),
        }
    )
    file = tmp_path / "f.parquet"
    pq.write_table(data, file, use_deprecated_int96_timestamps=True)
    types = spark_read._footer_types(Storage(str(tmp_path)), str(file))
    assert types["ok"] is not None
    # INT96 reads back as nanoseconds in Arrow.
    assert pq.read_schema(file).field("legacy").type == pa.timestamp("ns")
    assert {n for n, t in types.items() if t is None} == {
        "legacy",
        "nanos",
        "time",
        "unsigned",
        "uuid",
        "nested_nanos",
    }


def test_a_file_is_native_only_when_its_types_are_the_declared_ones():
    from pyspark.sql.types import IntegerType, LongType, StringType

    wanted = {"id": LongType(), "name": StringType()}
    lowered = {"id", "name"}
    assert spark_read._reads_alike({"id": LongType(), "name": StringType(), "x": None}, wanted, lowered)
    assert spark_read._reads_alike({"id": LongType()}, wanted, lowered)  # name: nulls either way
    assert not spark_read._reads_alike({"id": IntegerType(), "name": StringType()}, wanted, lowered)
    assert not spark_read._reads_alike({"id": None, "name": StringType()}, wanted, lowered)
    # Spark matches ``Name`` to ``name``; shoal's tasks read nulls.
    assert not spark_read._reads_alike({"id": LongType(), "Name": StringType()}, wanted, lowered)


def test_native_scan_false_and_incremental_reads_use_shoals_tasks(spark, cow):
    table = shoal.Table(cow)
    plan = shoal.spark.read(spark, cow, native_scan=False)._jdf.queryExecution().executedPlan().toString()
    assert "MapInArrow" in plan and "FileScan" not in plan
    plan = shoal.spark.read(spark, cow)._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan and "MapInArrow" not in plan
    job = spark_read.plan_read(cow, query_type="incremental")
    assert spark_read.split_native(job, table.storage) == (None, job.tasks)
    ours = shoal.spark.read(spark, cow, query_type="incremental").toArrow()
    _assert_rows(ours, table.read_incremental(), ["id"])


def test_tables_on_object_stores_use_shoals_tasks(cow):
    job = spark_read.plan_read(cow)
    storage = spark_read.storage_for(job.base_uri)
    remote = type("Remote", (), {"is_local": False, "full_path": storage.full_path})()
    assert spark_read.split_native(job, remote) == (None, job.tasks)


def test_unsafe_paths_use_shoals_tasks(spark, tmp_path):
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, "globby", record_key="id", partition_by="city", ordering_field="ts")
    data = pa.table({"id": [1, 2, 3], "city": ["a[1]", "b", "c d"], "ts": [1, 1, 1]})
    table.bulk_insert(data)
    scan, rest = _split(path)
    assert scan is not None
    assert len(scan.uris) == 2 and len(rest) == 1  # "a[1]" is a glob pattern to Spark
    ours = shoal.spark.read(spark, path).toArrow()
    _assert_rows(ours, table.read(), ["id"])
    assert Path(scan.uris[0].removeprefix("file://")).is_file()


def test_the_native_part_keeps_the_filters_whatever_the_order_of_the_slices(mor):
    filters = [("fare", ">", 10.0)]
    job = spark_read.plan_read(mor, filters=filters)
    merged_first = tuple(sorted(job.tasks, key=lambda t: isinstance(t.changes[0], spark_read.SliceReadSpec)))
    assert not isinstance(merged_first[0].changes[0], spark_read.SliceReadSpec)
    scan, rest = spark_read.split_native(
        spark_read.replace(job, tasks=merged_first), spark_read.storage_for(mor)
    )
    assert scan is not None and rest and scan.filters == tuple(filters)
