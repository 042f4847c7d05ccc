"""Write options that restate the table's ordering field or name must agree with it
(``shoal.write.table_options``): a write naming another ordering field used to run ordered by
the table's, so a record the user meant to win could lose. Such a write fails before its
instant, as Hudi's writers fail it with a config conflict, and the table is unchanged."""

from __future__ import annotations

import pyarrow as pa
import pytest

import shoal
from shoal.errors import InvalidOptionError

PRECOMBINE = "hoodie.datasource.write.precombine.field"
PAYLOAD_ORDERING = "hoodie.payload.ordering.field"


def _table(tmp_path, ordering_field: str | None = "ts") -> shoal.Table:
    t = shoal.Table.create(str(tmp_path / "t"), "t", record_key="id", ordering_field=ordering_field)
    t.upsert(pa.table({"id": ["a"], "ts": [2], "v": [5]}))
    return t


# A record older by ts but newer by v: the options ask to order by v.
LATE_BY_TS = pa.table({"id": ["a"], "ts": [1], "v": [9]})


@pytest.mark.parametrize(
    "options",
    [{PRECOMBINE: "v"}, {PAYLOAD_ORDERING: "v"}, {"hoodie.table.name": "other"}],
    ids=["precombine", "payload-ordering", "table-name"],
)
def test_options_naming_another_ordering_field_or_name_are_refused(tmp_path, options):
    t = _table(tmp_path)
    before = t._timeline().instants
    with pytest.raises(InvalidOptionError, match=next(iter(options))):
        t.upsert(LATE_BY_TS, options=options)
    with pytest.raises(InvalidOptionError):
        shoal.Table(t.path, options=options).upsert(LATE_BY_TS)
    assert t._timeline().instants == before
    assert t.read().select(["id", "ts", "v"]).to_pylist() == [{"id": "a", "ts": 2, "v": 5}]


def test_an_ordering_field_for_a_table_without_one_is_refused(tmp_path):
    t = _table(tmp_path, ordering_field=None)
    with pytest.raises(InvalidOptionError, match="has no ordering field"):
        t.upsert(LATE_BY_TS, options={PAYLOAD_ORDERING: "ts"})


def test_options_restating_the_table_are_accepted(tmp_path):
    t = _table(tmp_path)
    t.upsert(LATE_BY_TS, options={PRECOMBINE: "ts", PAYLOAD_ORDERING: "ts", "hoodie.table.name": "t"})
    # Ordered by ts, the late record loses.
    assert t.read().select(["id", "ts", "v"]).to_pylist() == [{"id": "a", "ts": 2, "v": 5}]


@pytest.mark.parametrize("key", [PRECOMBINE, PAYLOAD_ORDERING, "hoodie.table.name"])
def test_spark_writes_refuse_another_ordering_field_or_name(tmp_path, spark, key):
    from shoal.spark import register
    from shoal.spark import write as spark_write

    t = _table(tmp_path)
    before = t._timeline().instants
    frame = spark.createDataFrame(LATE_BY_TS.to_pandas())
    with pytest.raises(InvalidOptionError, match=key):
        spark_write(frame, t.path, "upsert", {key: "v"})
    register(spark)
    with pytest.raises(Exception, match=key):
        frame.write.format("shoal").mode("append").option(key, "v").option(
            "hoodie.datasource.write.operation", "insert"
        ).save(t.path)
    assert t._timeline().instants == before
