"""The columns of Spark reads are ``Table.read``'s and ``Table.read_incremental``'s: the same
names in the same order, with the same rows, through ``shoal.spark.read`` (Spark's parquet scan
and shoal's tasks) and the ``shoal`` data source, on both table types. Incremental reads keep
their meta columns under a projection, an empty projection still counts rows, the delete marker
sits where ``read_incremental`` puts it around a later column, and a filter whose value cannot be
compared with its column fails on the driver with shoal's error."""

from __future__ import annotations

import datetime as _dt
import importlib
import json

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
import shoal.spark
from tests.test_spark_read_native import _split

spark_read = importlib.import_module("shoal.spark.read")
UTC = _dt.timezone.utc
TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
# The data source's names for shoal.spark.read's arguments that differ (the others are the same).
_SOURCE_OPTIONS = {"query_type": "hoodie.datasource.query.type"}


def _batch(ids: list[str], ts: int, with_w: bool = False) -> pa.Table:
    n = len(ids)
    data = {
        "id": ids,
        "p": ["x" if ord(i[-1]) % 2 else "y" for i in ids],
        "ts": pa.array([ts] * n, pa.int64()),
        "v": pa.array([ord(i[-1]) * 10 + ts for i in ids], pa.int64()),
        "at": pa.array([_dt.datetime(2024, 1, 1, tzinfo=UTC) + _dt.timedelta(hours=ord(i[-1])) for i in ids]),
    }
    if with_w:
        data["w"] = [f"w-{i}" for i in ids]
    return pa.table(data)


@pytest.fixture(scope="module", params=TABLE_TYPES)
def evolved(request, tmp_path_factory) -> tuple[str, list[str]]:
    """Inserts, an update, a delete, then an upsert that adds column ``w`` (merge-on-read: log
    files for the updates and deletes). Returns the path and the instant times."""
    path = str(tmp_path_factory.mktemp("columns") / request.param.lower())
    table = shoal.Table.create(
        path, "cols", table_type=request.param, record_key="id", partition_by="p", ordering_field="ts"
    )
    times = [
        table.upsert(_batch(list("abcdef"), 1)),
        table.upsert(_batch(list("ab"), 2)),
        table.delete(_batch(list("cd"), 3)),
        table.upsert(_batch(list("eg"), 4, with_w=True)),
    ]
    return path, times


def _source(spark, path: str, columns=None, filters=None, include_deletes=False, **kwargs):
    shoal.spark.register(spark)
    reader = spark.read.format("shoal")
    for name, value in kwargs.items():
        if value is not None:
            reader = reader.option(_SOURCE_OPTIONS.get(name, name), str(value))
    if columns is not None:
        reader = reader.option("columns", ",".join(columns))
    if filters:
        reader = reader.option("filters", json.dumps([list(f) for f in filters], default=str))
    if include_deletes:
        reader = reader.option("include_deletes", "true")
    return reader.load(path)


def _frames(spark, path: str, **kwargs) -> dict:
    """The read through every Spark path, by name."""
    return {
        "native": shoal.spark.read(spark, path, **kwargs),
        "tasks": shoal.spark.read(spark, path, native_scan=False, **kwargs),
        "source": _source(spark, path, **kwargs),
    }


def _text(value: object) -> str:
    # Spark hands instants back in its session's time zone: compare them in UTC.
    if isinstance(value, _dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).isoformat()
    return str(value)


def _canonical(table: pa.Table) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=_text) for r in table.to_pylist())


def _assert_like(spark, path: str, local: pa.Table, source: bool = True, **kwargs) -> None:
    """Every Spark path (the data source's when ``source``) returns ``local``'s columns, in
    order, and its rows."""
    frames = _frames(spark, path, **kwargs)
    if not source:
        del frames["source"]
    for name, frame in frames.items():
        assert frame.columns == local.column_names, name
        if not local.column_names:
            # Arrow's conversion of a frame without columns has no rows to show: count them.
            assert frame.count() == local.num_rows, name
            continue
        ours = frame.toArrow()
        assert ours.num_rows == local.num_rows, name
        assert _canonical(ours) == _canonical(local), name


# ---- incremental reads keep their meta columns ----------------------------------------------------


@pytest.mark.parametrize("include_deletes", [False, True])
@pytest.mark.parametrize("columns", [["v"], ["v", "_hoodie_record_key"], ["w", "_hoodie_is_deleted"]])
def test_incremental_projection_keeps_the_meta_columns(spark, evolved, columns, include_deletes):
    path, times = evolved
    if "_hoodie_is_deleted" in columns and not include_deletes:
        columns = columns[:1]
    for start, end in ((None, None), (times[0], times[2]), (times[1], None)):
        local = shoal.Table(path).read_incremental(
            start=start, end=end, columns=columns, include_deletes=include_deletes
        )
        assert local.column_names[0] == "_hoodie_commit_time"
        if include_deletes:
            assert local.column_names[-1] == "_hoodie_is_deleted"
        _assert_like(
            spark,
            path,
            local,
            query_type="incremental",
            start=start,
            end=end,
            columns=columns,
            include_deletes=include_deletes,
        )


# ---- no columns: rows still count -----------------------------------------------------------------


@pytest.mark.parametrize("query_type", ["snapshot", "read_optimized"])
def test_empty_projection_counts_the_rows(spark, evolved, query_type):
    path, times = evolved
    table = shoal.Table(path)
    for filters in (None, [("p", "=", "x")], [("v", ">", 20)]):
        local = table.read(columns=[], filters=filters, query_type=query_type)
        assert local.column_names == [] and local.num_rows > 0
        _assert_like(spark, path, local, columns=[], filters=filters, query_type=query_type)
    local = table.read(columns=[], as_of=times[0])
    assert local.num_rows == 6
    _assert_like(spark, path, local, columns=[], as_of=times[0])
    # Base files alone are counted by Spark's parquet scan, which needs no column for that.
    if query_type == "read_optimized" or any(not s.log_files for s in table.file_slices()):
        scan, _ = _split(path, columns=[], query_type=query_type)
        assert scan is not None and scan.columns == ()


def test_empty_projection_of_an_incremental_read_is_the_commit_time(spark, evolved):
    path, _ = evolved
    for include_deletes in (False, True):
        local = shoal.Table(path).read_incremental(columns=[], include_deletes=include_deletes)
        assert local.num_rows > 0
        _assert_like(
            spark, path, local, query_type="incremental", columns=[], include_deletes=include_deletes
        )


# ---- column order around a later column ----------------------------------------------------------


def test_delete_marker_sits_where_read_incremental_puts_it(spark, evolved):
    path, times = evolved
    table = shoal.Table(path)
    ranges = [
        (None, times[2]),  # before w: the marker goes before it
        (times[1], times[2]),  # the delete alone
        (times[0], None),  # through the commit that added w: after it
        (None, None),
        (times[3], times[3]),  # nothing in the range: the table's schema, the marker last
    ]
    for start, end in ranges:
        local = table.read_incremental(start=start, end=end, include_deletes=True)
        _assert_like(spark, path, local, query_type="incremental", start=start, end=end, include_deletes=True)
    assert table.read_incremental(end=times[2], include_deletes=True).column_names[-2:] == [
        "_hoodie_is_deleted",
        "w",
    ]
    assert table.read_incremental(include_deletes=True).column_names[-2:] == ["w", "_hoodie_is_deleted"]


@pytest.mark.parametrize("query_type", ["snapshot", "read_optimized"])
def test_full_reads_have_table_reads_columns_in_order(spark, evolved, query_type):
    path, times = evolved
    table = shoal.Table(path)
    local = table.read(query_type=query_type)
    assert local.column_names[-1] == "w"
    _assert_like(spark, path, local, query_type=query_type)
    # As of an instant before w: w still comes, as nulls, where Table.read puts it.
    local = table.read(as_of=times[1])
    _assert_like(spark, path, local, as_of=times[1])
    for start, end in ((None, times[1]), (times[2], None)):
        local = table.read_incremental(start=start, end=end)
        _assert_like(spark, path, local, query_type="incremental", start=start, end=end)


# ---- filters that fit no file ---------------------------------------------------------------------


def test_naive_datetime_on_a_utc_column_fails_on_the_driver(spark, evolved):
    path, _ = evolved
    naive = [("at", ">", _dt.datetime(2024, 1, 1, 12))]
    with pytest.raises(shoal.InvalidArgumentError, match="do not fit"):
        shoal.Table(path).read(filters=naive)
    with pytest.raises(shoal.InvalidArgumentError, match="do not fit"):
        shoal.Table(path).read_incremental(filters=naive)
    for native_scan in (True, False):
        with pytest.raises(shoal.InvalidArgumentError, match="do not fit the columns' types"):
            shoal.spark.read(spark, path, filters=naive, native_scan=native_scan)
        with pytest.raises(shoal.InvalidArgumentError, match="do not fit the columns' types"):
            shoal.spark.read(spark, path, filters=naive, query_type="incremental", native_scan=native_scan)
    # The same instant in UTC is taken, as by Table.read.
    aware = [("at", ">", _dt.datetime(2024, 1, 1, 12, tzinfo=UTC))]
    local = shoal.Table(path).read(columns=["id"], filters=aware)
    assert local.num_rows > 0
    # (The data source's filters option is JSON: no datetimes.)
    _assert_like(spark, path, local, source=False, columns=["id"], filters=aware)
