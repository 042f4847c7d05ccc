"""Spark SQL on shoal tables, through temporary views of the data source: SELECT with the read
options (snapshot, read-optimized, time travel, incremental), INSERT INTO (upsert by default, or
the view's operation), INSERT OVERWRITE, a view that creates its table; the rows are a model's,
and hudi-rs reads every table written. A table in Spark's catalog is refused with a message
naming the temporary view, before any read or write."""

from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.errors import UnsupportedError
from shoal.spark.datasource import register
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "city", "ts", "v"]
SCHEMA = pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.float64())])


@pytest.fixture(scope="module")
def ss(spark):
    register(spark)
    return spark


def _table(path: str, table_type: str) -> shoal.Table:
    t = shoal.Table.create(
        path, name="trips", table_type=table_type, record_key="id", partition_by="city", ordering_field="ts"
    )
    t.upsert(
        pa.Table.from_pylist(
            [{"id": "a", "city": "sf", "ts": 1, "v": 1.0}, {"id": "b", "city": "la", "ts": 1, "v": 2.0}],
            schema=SCHEMA,
        )
    )
    return t


def _rows(table: pa.Table) -> list[dict]:
    return rows_by(table, COLUMNS, ["id"])


def _sql_rows(spark, query: str) -> list[dict]:
    return [r.asDict() for r in spark.sql(query).collect()]


def _expect(model: dict[str, tuple]) -> list[dict]:
    return [dict(zip(COLUMNS, (k, *v), strict=True)) for k, v in sorted(model.items())]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_insert_into_a_view_upserts_and_a_new_view_reads_it(ss, tmp_path, table_type):
    path = str(tmp_path / "t")
    _table(path, table_type)
    model = {"a": ("sf", 1, 1.0), "b": ("la", 1, 2.0)}
    ss.sql(f"CREATE OR REPLACE TEMPORARY VIEW trips USING shoal OPTIONS (path '{path}')")
    assert _sql_rows(ss, "SELECT id, city, ts, v FROM trips ORDER BY id") == _expect(model)

    # A column list (the meta columns are null), BY NAME, and every column by position.
    ss.sql("INSERT INTO trips (id, city, ts, v) VALUES ('c', 'sf', 3, 3.0)")
    ss.sql("INSERT INTO trips BY NAME SELECT 'd' AS id, 'la' AS city, 4L AS ts, 4.0 AS v")
    ss.sql("INSERT INTO trips SELECT null, null, null, null, null, 'e', 'ny', 5L, 5.0")
    model |= {"c": ("sf", 3, 3.0), "d": ("la", 4, 4.0), "e": ("ny", 5, 5.0)}
    # An upsert: the key's newer record wins over the table's and over its twin in the batch.
    ss.sql("INSERT INTO trips (id, city, ts, v) VALUES ('a', 'sf', 9, 9.0), ('a', 'sf', 8, 8.0)")
    model["a"] = ("sf", 9, 9.0)

    t = shoal.Table(path)
    action = "deltacommit" if table_type == "MERGE_ON_READ" else "commit"
    assert [e.action for e in t.timeline] == [action] * 5
    assert _rows(t.read()) == _expect(model)
    assert _rows(hudi_rs_read(path)) == _expect(model)
    # The view keeps the read it planned first (Spark keeps a Python data source's planned
    # read); a view made again reads the table as it is now.
    assert _sql_rows(ss, "SELECT count(*) AS n FROM trips") == [{"n": 2}]
    ss.sql(f"CREATE OR REPLACE TEMPORARY VIEW trips USING shoal OPTIONS (path '{path}')")
    assert _sql_rows(ss, "SELECT id, city, ts, v FROM trips ORDER BY id") == _expect(model)


def test_a_views_read_options_and_an_incremental_view_feeding_an_insert(ss, tmp_path):
    path, copy = str(tmp_path / "t"), str(tmp_path / "copy")
    t = _table(path, "MERGE_ON_READ")
    first = t.latest_instant()
    t.upsert(
        pa.Table.from_pylist(
            [{"id": "a", "city": "sf", "ts": 2, "v": 7.0}, {"id": "c", "city": "ny", "ts": 2, "v": 3.0}],
            schema=SCHEMA,
        )
    )
    ss.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW ro USING shoal OPTIONS (path '{path}', "
        "'hoodie.datasource.query.type' 'read_optimized')"
    )
    ss.sql(
        # A Hadoop-style local path, as Spark gives locations.
        f"CREATE OR REPLACE TEMPORARY VIEW old USING shoal OPTIONS (path 'file:{path}', "
        f"'as.of.instant' '{first}')"
    )
    ss.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW changes USING shoal OPTIONS (path '{path}', "
        f"'hoodie.datasource.query.type' 'incremental', 'hoodie.datasource.read.begin.instanttime' '{first}')"
    )
    start = {"a": ("sf", 1, 1.0), "b": ("la", 1, 2.0)}
    changed = {"a": ("sf", 2, 7.0), "c": ("ny", 2, 3.0)}
    assert _sql_rows(ss, "SELECT id, city, ts, v FROM old ORDER BY id") == _expect(start)
    assert _rows(t.read(query_type="read_optimized")) == _sql_rows(
        ss, "SELECT id, city, ts, v FROM ro ORDER BY id"
    )
    assert _sql_rows(ss, "SELECT id, city, ts, v FROM changes ORDER BY id") == _expect(changed)

    # A view of a new table: its columns and the options that create the table; the INSERT
    # creates it, with the view's operation.
    ss.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW copy (id STRING, city STRING, ts BIGINT, v DOUBLE) USING shoal "
        f"OPTIONS (path '{copy}', 'hoodie.table.name' 'copy', "
        "'hoodie.datasource.write.recordkey.field' 'id', 'hoodie.datasource.write.precombine.field' 'ts', "
        "'hoodie.datasource.write.operation' 'bulk_insert')"
    )
    ss.sql("INSERT INTO copy SELECT id, city, ts, v FROM changes")
    written = shoal.Table(copy)
    timeline = written._timeline()
    assert [e.action for e in written.timeline] == ["commit"]
    assert timeline.commit_metadata(timeline.completed()[-1]).operation_type == "BULK_INSERT"
    assert _rows(written.read()) == _expect(changed)
    assert _rows(hudi_rs_read(copy)) == _expect(changed)
    assert _sql_rows(ss, "SELECT id, city, ts, v FROM copy ORDER BY id") == _expect(changed)


def test_insert_overwrite_replaces_the_table(ss, tmp_path):
    path = str(tmp_path / "t")
    _table(path, "COPY_ON_WRITE")
    # A view's read options are no write options: its INSERTs leave them out.
    ss.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW trips USING shoal OPTIONS (path '{path}', "
        "'hoodie.datasource.query.type' 'snapshot')"
    )
    ss.sql("INSERT OVERWRITE trips (id, city, ts, v) VALUES ('z', 'ny', 4, 4.0)")
    t = shoal.Table(path)
    assert t.timeline[-1].action == "replacecommit"
    assert _rows(t.read()) == _expect({"z": ("ny", 4, 4.0)})
    assert _rows(hudi_rs_read(path)) == _expect({"z": ("ny", 4, 4.0)})


def test_a_view_with_a_delete_operation_deletes_the_keys_inserted(ss, tmp_path):
    path = str(tmp_path / "t")
    _table(path, "MERGE_ON_READ")
    ss.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW gone USING shoal OPTIONS (path '{path}', "
        "'hoodie.datasource.write.operation' 'delete')"
    )
    ss.sql("INSERT INTO gone (id, city, ts, v) VALUES ('a', 'sf', 5, 0.0)")
    assert _rows(shoal.Table(path).read()) == _expect({"b": ("la", 1, 2.0)})
    assert _rows(hudi_rs_read(path)) == _expect({"b": ("la", 1, 2.0)})


def test_a_table_in_sparks_catalog_is_refused_with_the_way_to_reach_it(ss, tmp_path):
    path = str(tmp_path / "t")
    t = _table(path, "COPY_ON_WRITE")
    before = t.instants()
    with pytest.raises(Exception, match="CREATE TEMPORARY VIEW") as caught:
        ss.sql(f"CREATE TABLE shoal_catalog_t USING shoal LOCATION '{path}'")
    assert UnsupportedError.__name__ in str(caught.value)
    # With its columns given, Spark creates the entry without asking the source: its reads and
    # writes then come with no options at all, and fail naming the way.
    ss.sql(
        "CREATE TABLE shoal_catalog_u (id STRING, city STRING, ts BIGINT, v DOUBLE) "
        f"USING shoal LOCATION '{path}'"
    )
    try:
        with pytest.raises(Exception, match="CREATE TEMPORARY VIEW"):
            ss.sql("SELECT * FROM shoal_catalog_u").collect()
        with pytest.raises(Exception, match="CREATE TEMPORARY VIEW"):
            ss.sql("INSERT INTO shoal_catalog_u VALUES ('q', 'sf', 1, 1.0)")
    finally:
        ss.sql("DROP TABLE IF EXISTS shoal_catalog_u")
    assert shoal.Table(path).instants() == before
    assert _rows(shoal.Table(path).read()) == _expect({"a": ("sf", 1, 1.0), "b": ("la", 1, 2.0)})


def test_a_dataframe_of_the_source_keeps_its_first_read(ss, tmp_path):
    path = str(tmp_path / "t")
    t = _table(path, "COPY_ON_WRITE")
    df = ss.read.format("shoal").load(path)
    assert df.count() == 2
    t.upsert(pa.Table.from_pylist([{"id": "c", "city": "ny", "ts": 1, "v": 3.0}], schema=SCHEMA))
    assert df.count() == 2
    assert ss.read.format("shoal").load(path).count() == 3
