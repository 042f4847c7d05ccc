"""The ``shoal`` Spark data source and ``shoal.spark.read``: every Apache Hudi fixture reads with
the rows hudi-rs returns (snapshot, read-optimized, time travel), incremental reads match the
local reader, and tables written through ``df.write.format("shoal")`` read back in hudi-rs."""

from __future__ import annotations

import datetime as _dt
import importlib
import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("pyspark")

import shoal
import shoal.spark
from shoal.errors import (
    InvalidArgumentError,
    InvalidOptionError,
    SchemaMismatchError,
    TableNotFoundError,
)
from shoal.spark.datasource import (
    ShoalCommitMessage,
    begin_write,
    commit_write,
    read_options,
    register,
    write_new_file_groups,
)
from shoal.spark.read import spark_schema
from tests.hudi_oracle import hudi_rs_read
from tests.test_fixtures import ALL_FIXTURES, MOR_FIXTURES, _canonical, _sort_keys
from tests.test_incremental import hudi_rs_incremental
from tests.test_incremental_archived import _build as build_archived
from tests.test_incremental_archived import _expected as archived_expected
from tests.test_incremental_archived import _rows as archived_rows

# The module (``shoal.spark.read`` on the package is the function).
spark_read = importlib.import_module("shoal.spark.read")
TRIPS = "mor_avro_v6_trips_8i3d"  # MOR, partitioned by city, 8 inserts then 3 deletes
QUERY_TYPE = "hoodie.datasource.query.type"


@pytest.fixture(scope="module")
def ss(spark):
    """The session with the data source registered."""
    register(spark)
    return spark


def _load(spark, path, **options):
    return spark.read.format("shoal").options(**options).load(str(path))


def _assert_same_rows(ours: pa.Table, theirs: pa.Table, table: shoal.Table) -> None:
    assert ours.num_rows == theirs.num_rows
    if theirs.num_rows == 0:
        return
    assert set(ours.column_names) == set(theirs.column_names)
    cols = theirs.column_names
    keys = _sort_keys(table, cols)
    if not set(keys) <= set(cols):  # a projection without the key: order by every column
        keys = cols
    assert _canonical(ours.select(cols), keys) == _canonical(theirs, keys)


# ---- reads of Apache Hudi's tables --------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_fixture_snapshot_matches_hudi_rs(ss, fixture_table, name):
    path = fixture_table(name)
    table = shoal.Table(path)
    df = _load(ss, path)
    _assert_same_rows(df.toArrow(), hudi_rs_read(str(path)), table)


@pytest.mark.parametrize("name", MOR_FIXTURES)
def test_fixture_read_optimized_matches_hudi_rs(ss, fixture_table, name):
    path = fixture_table(name)
    ours = _load(ss, path, **{QUERY_TYPE: "read_optimized"}).toArrow()
    _assert_same_rows(ours, hudi_rs_read(str(path), read_optimized=True), shoal.Table(path))


@pytest.mark.parametrize("name", ["cow_v6_simplekeygen_nonhivestyle", "mor_avro_v8_trips_8i3u1d"])
def test_fixture_time_travel_matches_hudi_rs(ss, fixture_table, name):
    path = fixture_table(name)
    table = shoal.Table(path)
    first = table.timeline[0].time
    theirs = hudi_rs_read(str(path), as_of=first)
    assert theirs.num_rows > 0
    _assert_same_rows(_load(ss, path, **{"as.of.instant": first}).toArrow(), theirs, table)
    _assert_same_rows(shoal.spark.read(ss, path, as_of=first).toArrow(), theirs, table)


def _changes(table: pa.Table) -> list[tuple[str, str]]:
    if table.num_rows == 0:
        return []
    return sorted(
        zip(table["_hoodie_commit_time"].to_pylist(), table["_hoodie_record_key"].to_pylist(), strict=True)
    )


def _by_key(table: pa.Table) -> list[dict]:
    keys = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key"]
    return table.sort_by([(k, "ascending") for k in keys]).to_pylist()


@pytest.mark.parametrize("name", [TRIPS, "mor_avro_v8_trips_8i3u1d", "cow_v8_simplekeygen_nonhivestyle"])
def test_fixture_incremental_matches_local_and_hudi_rs(ss, fixture_table, name):
    path = fixture_table(name)
    table = shoal.Table(path)
    v8 = table.config.table_version >= 8
    axis = [(t.completion_time if v8 else None) or t.time for t in table.timeline]
    for lo, hi in [(None, axis[0]), (axis[0], None)]:
        options = {QUERY_TYPE: "incremental", "hoodie.datasource.read.begin.instanttime": lo or "0"}
        if hi is not None:
            options["hoodie.datasource.read.end.instanttime"] = hi
        local = table.read_incremental(lo or "0", hi)
        ours = _load(ss, path, **options).toArrow()
        assert _by_key(ours) == _by_key(local), (lo, hi)
        theirs = hudi_rs_incremental(str(path), lo, hi)
        assert _changes(ours) == _changes(theirs), (lo, hi)
    with_deletes = shoal.spark.read(ss, path, query_type="incremental", include_deletes=True).toArrow()
    assert _by_key(with_deletes) == _by_key(table.read_incremental(include_deletes=True))


def test_incremental_deletes_are_reported(ss, fixture_table):
    path = fixture_table(TRIPS)
    table = shoal.Table(path)
    first, second = (t.time for t in table.timeline)
    out = _load(ss, path, query_type="incremental", start=first, include_deletes="true").toArrow()
    deleted = out.filter(pc.field("_hoodie_is_deleted"))
    # The second instant deleted 3 of the 8 keys the first one wrote.
    assert deleted.num_rows == 3
    assert set(deleted["_hoodie_commit_time"].to_pylist()) == {second}
    assert set(deleted["_hoodie_record_key"].to_pylist()) == set(
        hudi_rs_read(str(path), as_of=first)["_hoodie_record_key"].to_pylist()
    ) - set(hudi_rs_read(str(path))["_hoodie_record_key"].to_pylist())


def test_incremental_into_archived_instants_falls_back_with_hudis_option(ss, tmp_path):
    path, times = build_archived(tmp_path, "COPY_ON_WRITE")
    options = {QUERY_TYPE: "incremental", "hoodie.datasource.read.begin.instanttime": times[1]}
    with pytest.raises(Exception, match=f"earliest instant still available is {times[5]}"):
        _load(ss, path, **options).collect()
    options["hoodie.datasource.read.end.instanttime"] = times[6]
    options["hoodie.datasource.read.incr.fallback.fulltablescan.enable"] = "true"
    ours = _load(ss, path, **options).toArrow()
    assert archived_rows(ours) == archived_expected(path, times[1], times[6])
    fast = shoal.spark.read(
        ss, path, query_type="incremental", start=times[1], end=times[6], fallback_full_scan=True
    )
    assert archived_rows(fast.toArrow()) == archived_expected(path, times[1], times[6])


# ---- projection and filters ---------------------------------------------------------------------


def test_fast_path_projects_and_filters(ss, fixture_table):
    path = fixture_table("mor_avro_v8_trips_8i3u1d")
    table = shoal.Table(path)
    columns = ["_hoodie_record_key", "rider", "fare", "city"]
    filters = [("city", "=", "san_francisco"), ("fare", ">", 20.0)]
    df = shoal.spark.read(ss, path, columns=columns, filters=filters)
    assert df.columns == columns
    # The partition filter prunes the plan to the slices of one partition.
    planned = spark_read.plan_read(path, columns, filters).tasks
    assert sorted(t.changes[0].file_id for t in planned) == sorted(
        s.file_id for s in table.file_slices() if s.partition_path == "city=san_francisco"
    )
    theirs = hudi_rs_read(str(path))
    theirs = theirs.filter((pc.field("city") == "san_francisco") & (pc.field("fare") > 20.0)).select(columns)
    assert theirs.num_rows > 0
    _assert_same_rows(df.toArrow(), theirs, table)


def test_base_files_stream_in_batches_with_the_rows_of_the_local_task(tmp_path, monkeypatch):
    """Base-file slices stream in batches: every piece together is what the local task reads,
    with projection and a filter on a column outside it."""
    table = shoal.Table.create(tmp_path / "t", "trips", record_key="id", partition_by="city")
    table.bulk_insert(_trips(range(3000), "a"))
    monkeypatch.setattr(spark_read, "STREAM_BATCH_ROWS", 256)
    for columns, filters in [
        (None, []),
        (("id", "rider"), [("fare", ">=", 1000.0), ("day", "<", _dt.date(2024, 1, 9))]),
    ]:
        job = spark_read.plan_read(table.path, columns, filters)
        for task in job.tasks:
            pieces = list(spark_read.iter_task(job, task, table.storage))
            assert len(pieces) > 1
            streamed = pa.concat_tables(pieces)
            assert streamed.equals(spark_read.run_task(job, task, table.storage))


def test_data_source_columns_and_filters_options(ss, fixture_table):
    path = fixture_table("mor_avro_v8_trips_8i3u1d")
    cities = ["chennai", "sao_paulo"]
    df = _load(ss, path, columns="rider, fare", filters=json.dumps([["city", "in", cities]]))
    assert df.columns == ["rider", "fare"]
    theirs = hudi_rs_read(str(path)).filter(pc.field("city").isin(cities))
    assert theirs.num_rows > 0
    _assert_same_rows(df.toArrow(), theirs.select(["rider", "fare"]), shoal.Table(path))


def test_where_after_where_reads_the_right_rows_with_pushdown_enabled(ss, fixture_table):
    """Spark 4.3 keeps a pushed-down Python reader on the relation and reuses it for later
    queries of the same DataFrame: the data source takes no filters from Spark, so with
    pushdown enabled a filtered query, then the unfiltered DataFrame, both read their rows."""
    path = fixture_table("mor_avro_v8_trips_8i3u1d")
    theirs = hudi_rs_read(str(path))
    in_sf = theirs.filter(pc.field("city") == "san_francisco").num_rows
    assert 0 < in_sf < theirs.num_rows
    ss.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = _load(ss, path)
        assert df.where("city = 'san_francisco'").count() == in_sf
        assert df.count() == theirs.num_rows
    finally:
        ss.conf.unset("spark.sql.python.filterPushdown.enabled")


# ---- errors -------------------------------------------------------------------------------------


def test_read_errors_surface_through_spark(ss, fixture_table, tmp_path):
    with pytest.raises(Exception, match=r"TableNotFoundError: no Hudi table at"):
        _load(ss, tmp_path / "missing").schema  # noqa: B018
    with pytest.raises(Exception, match=r"InvalidArgumentError: unknown query type 'bogus'"):
        _load(ss, fixture_table(TRIPS), **{QUERY_TYPE: "bogus"}).schema  # noqa: B018


def test_bad_read_arguments_are_rejected(ss, fixture_table, tmp_path):
    path = str(fixture_table(TRIPS))
    with pytest.raises(InvalidOptionError, match=r"unknown read option 'hoodie.datasource.read.paths'"):
        read_options({"path": path, "hoodie.datasource.read.paths": "x"})
    with pytest.raises(InvalidArgumentError, match=r"as_of \(as.of.instant\) is for snapshot reads"):
        read_options({"path": path, "query_type": "incremental", "as.of.instant": "20250101"})
    with pytest.raises(InvalidOptionError, match=r"'filters' must be a JSON list"):
        read_options({"path": path, "filters": '{"city": "sf"}'})
    with pytest.raises(InvalidOptionError, match=r"conflicts with another spelling"):
        read_options({"path": path, "query_type": "snapshot", QUERY_TYPE: "incremental"})
    with pytest.raises(InvalidArgumentError, match=r"unknown column\(s\) \['nope'\]"):
        shoal.spark.read(ss, path, columns=["rider", "nope"])
    with pytest.raises(TableNotFoundError):
        shoal.spark.read(ss, tmp_path / "missing")
    with pytest.raises(InvalidArgumentError, match="need query_type='incremental'"):
        shoal.spark.read(ss, path, start="20250101")


# ---- writes -------------------------------------------------------------------------------------

CREATE = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}


def _trips(ids: range, version: str) -> pa.Table:
    cities = ["sf", "nyc", "sao_paulo"]
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "city": pa.array([cities[i % 3] for i in ids]),
            "ts": pa.array([1_700_000_000 + i for i in ids], pa.int64()),
            "rider": pa.array([f"rider-{version}-{i}" for i in ids]),
            "fare": pa.array([i * 1.5 for i in ids]),
            "day": pa.array([_dt.date(2024, 1, 1 + i % 28) for i in ids], pa.date32()),
        }
    )


def _write(spark, data: pa.Table, path, operation: str, partitions: int = 3, **options) -> None:
    df = spark.createDataFrame(data).repartition(partitions)
    writer = df.write.format("shoal").option("hoodie.datasource.write.operation", operation)
    writer.options(**options).mode("append").save(str(path))


def _data_rows(table: pa.Table) -> list[dict]:
    return table.select(["id", "city", "ts", "rider", "fare", "day"]).sort_by("id").to_pylist()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_write_creates_and_appends_and_hudi_rs_reads_it(ss, tmp_path, table_type):
    path = tmp_path / "t"
    first, second = _trips(range(0, 40), "a"), _trips(range(40, 70), "b")
    _write(ss, first, path, "bulk_insert", **CREATE, **{"hoodie.datasource.write.table.type": table_type})
    _write(ss, second, path, "insert")
    table = shoal.Table(path)
    assert table.table_type == table_type
    assert [(t.action, t.state) for t in table.timeline] == [
        ("deltacommit" if table_type == "MERGE_ON_READ" else "commit", "COMPLETED")
    ] * 2
    expected = _data_rows(pa.concat_tables([first, second]))
    theirs = hudi_rs_read(str(path))
    assert _data_rows(theirs) == expected
    # Meta columns are Hudi's: keys and partition paths from the key generator.
    assert sorted(theirs["_hoodie_record_key"].to_pylist(), key=int) == [str(i) for i in range(70)]
    assert set(theirs["_hoodie_partition_path"].to_pylist()) == {"sf", "nyc", "sao_paulo"}
    assert _data_rows(_load(ss, path).toArrow()) == expected
    # Files of each task are named with its partition id; no markers are left behind.
    assert not any(table.storage.list_files(".hoodie/.temp", recursive=True))


def test_write_rejects_what_it_cannot_do_before_the_timeline_changes(ss, tmp_path):
    path = tmp_path / "t"
    data = _trips(range(10), "a")
    _write(ss, data, path, "bulk_insert", partitions=1, **CREATE)
    before = shoal.Table(path).instants()
    with pytest.raises(Exception, match=r"UnsupportedError: mode\('overwrite'\) with .*=delete"):
        writer = ss.createDataFrame(data).write.format("shoal").mode("overwrite")
        writer.option("hoodie.datasource.write.operation", "delete").save(str(path))
    # What writer() checks, called as Spark calls it.
    schema = spark_schema(data.schema)

    def begin(operation="insert", frame=schema, at=path, **options):
        opts = {"path": str(at), "hoodie.datasource.write.operation": operation, **options}
        return begin_write(opts, frame, overwrite=False)

    with pytest.raises(InvalidOptionError, match=r"conflicts with the table's 'id'"):
        begin(**{"hoodie.datasource.write.recordkey.field": "rider"})
    with pytest.raises(
        InvalidOptionError, match=r"unknown or unsupported option 'hoodie.parquet.max.filesize'"
    ):
        begin(**{"hoodie.parquet.max.filesize": "1"})
    with pytest.raises(SchemaMismatchError):
        begin(frame=spark_schema(data.drop_columns(["ts"]).schema))
    with pytest.raises(SchemaMismatchError):
        begin("upsert", frame=spark_schema(data.drop_columns(["ts"]).schema))
    with pytest.raises(InvalidOptionError, match=r"creating one needs hoodie.table.name"):
        begin(at=tmp_path / "other")
    assert shoal.Table(path).instants() == before
    assert not (tmp_path / "other").exists()
    assert _data_rows(hudi_rs_read(str(path))) == _data_rows(data)


def test_failed_write_is_rolled_back(ss, tmp_path):
    path = tmp_path / "t"
    good = _trips(range(10), "a")
    _write(ss, good, path, "bulk_insert", partitions=1, **CREATE)
    ids = pa.array([10, 11, None, *range(13, 20)], pa.int64())
    bad = _trips(range(10, 20), "b").set_column(0, "id", ids)
    with pytest.raises(Exception, match="InvalidRecordKeyError"):
        _write(ss, bad, path, "insert", partitions=2)
    table = shoal.Table(path)
    assert [t.action for t in table.timeline] == ["commit", "rollback"]
    assert not [i for i in table.instants() if i.state.name != "COMPLETED"]
    assert _data_rows(hudi_rs_read(str(path))) == _data_rows(good)


def test_commit_deletes_files_of_failed_task_attempts(tmp_path):
    """A retried task writes new file groups; the first attempt's files are in no commit message
    and must go before the commit, or readers listing the partition would return them too."""
    path = tmp_path / "t"
    data = _trips(range(12), "a")
    options = {"path": str(path), "hoodie.datasource.write.operation": "bulk_insert", **CREATE}
    job = begin_write(options, spark_schema(data.schema), overwrite=False)
    lost = write_new_file_groups(job, data, task_id=0, stage_id=3, attempt=7)
    kept = write_new_file_groups(job, data, task_id=0, stage_id=3, attempt=8)
    storage = shoal.Table(path).storage
    assert all(storage.exists(s.path) for s in lost + kept)
    commit_write(job, [ShoalCommitMessage(kept)])
    assert not any(storage.exists(s.path) for s in lost)
    assert _data_rows(hudi_rs_read(str(path))) == _data_rows(data)


def test_a_failed_first_write_leaves_the_path_as_it_was(ss, tmp_path):
    """df.write.format("shoal") into a new path: a write refused when it starts (a schema
    without the ordering field) or failing in its tasks (a null record key) leaves nothing."""
    path = tmp_path / "t"
    no_ts = _trips(range(0, 5), "a").drop_columns(["ts"])
    with pytest.raises(Exception, match="ts"):
        _write(ss, no_ts, path, "insert", **CREATE)
    assert not path.exists()
    null_key = _trips(range(0, 5), "a")
    null_key = null_key.set_column(0, "id", pa.array([None, 1, 2, 3, 4], pa.int64()))
    with pytest.raises(Exception, match="null"):
        _write(ss, null_key, path, "insert", **CREATE)
    assert not path.exists()
    # The corrected retry creates the table.
    _write(ss, _trips(range(0, 5), "a"), path, "insert", **CREATE)
    assert len(shoal.Table(path).read()) == 5
