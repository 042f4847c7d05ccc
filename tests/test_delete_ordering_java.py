"""Soft deletes of merge-on-read tables ordered by a time or timestamp field carry the ordering
value Hudi's Java writer puts in a delete block: the field's Avro value as the record holds it
(``HoodieAvroUtils.getNestedFieldVal``, wrapped by ``wrapValueIntoAvro``). A timestamp field's
is its raw Long (millis or micros, as the field stores them), a time-millis field's an Integer,
a time-micros field's a Long; with consistent logical timestamps Java wraps a timestamp's
instant instead (TimestampMicrosWrapper). Java and hudi-rs order a delete against the stored
record only when the classes match, so any other wrapper is applied unordered or, for
TimeMicrosWrapper, not read by hudi-rs at all.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

import shoal
from shoal import _native
from shoal.errors import InvalidArgumentError
from shoal.keygen.options import CONSISTENT_LOGICAL_TIMESTAMP
from tests.hudi_oracle import hudi_rs_read
from tests.table_files import set_table_properties

LONG_WRAPPER, INT_WRAPPER, TIMESTAMP_MICROS_WRAPPER = 3, 2, 11


def _table(tmp_path, properties=None) -> shoal.Table:
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type="MERGE_ON_READ", record_key="id", ordering_field="ts"
    )
    if properties:
        set_table_properties(tmp_path / "t", properties)
        t = shoal.Table(t.path)
    return t


def _delete_block(t: shoal.Table):
    (sl,) = t.file_slices()
    blocks = [b for lf in sl.log_files for b in _native.read_log_file(f"{t.path}/{lf.path}")]
    (block,) = [b for b in blocks if b.block_type == "DELETE_BLOCK"]
    return block.deletes().column("ordering_value")


def _write(t: shoal.Table, stored: pa.Array, deletes: pa.Array) -> None:
    """ids 1-4 stored at ``stored``; then soft deletes of ids 1-3 at ``deletes`` (older, newer,
    equal): Java keeps id 1 (its delete is older) and applies the other two."""
    t.upsert(pa.table({"id": [1, 2, 3, 4], "ts": pa.concat_arrays([stored] * 4), "v": [1, 2, 3, 4]}))
    t.upsert(pa.table({"id": [1, 2, 3], "ts": deletes, "v": [0, 0, 0], "_hoodie_is_deleted": [True] * 3}))


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.mark.parametrize("unit", ["ms", "us"])
@pytest.mark.parametrize("tz", ["UTC", None])
def test_timestamp_ordered_deletes_carry_the_raw_long(tmp_path, unit, tz):
    kind = pa.timestamp(unit, tz=tz)
    year = lambda y: dt.datetime(y, 1, 1)  # noqa: E731
    t = _table(tmp_path)
    _write(t, pa.array([year(2021)], kind), pa.array([year(2020), year(2022), year(2021)], kind))
    values = _delete_block(t)
    assert values.type_codes.to_pylist() == [LONG_WRAPPER] * 3
    per_second = 1000 if unit == "ms" else 1_000_000
    epoch = dt.datetime(1970, 1, 1)
    assert [v.as_py() for v in values] == [
        int((year(y) - epoch).total_seconds()) * per_second for y in (2020, 2022, 2021)
    ]
    assert _ids(t.read()) == [1, 4]
    assert _ids(hudi_rs_read(t.path)) == [1, 4]
    t.compact()
    assert _ids(t.read()) == [1, 4]


def test_consistent_logical_timestamps_carry_the_instant(tmp_path):
    t = _table(tmp_path, {CONSISTENT_LOGICAL_TIMESTAMP: "true"})
    kind = pa.timestamp("ms", tz="UTC")
    year = lambda y: dt.datetime(y, 1, 1, tzinfo=dt.timezone.utc)  # noqa: E731
    _write(t, pa.array([year(2021)], kind), pa.array([year(2020), year(2022), year(2021)], kind))
    values = _delete_block(t)
    assert values.type_codes.to_pylist() == [TIMESTAMP_MICROS_WRAPPER] * 3
    assert _ids(t.read()) == [1, 4]


@pytest.mark.parametrize(("kind", "code"), [(pa.time32("ms"), INT_WRAPPER), (pa.time64("us"), LONG_WRAPPER)])
def test_time_ordered_deletes_carry_the_raw_value(tmp_path, kind, code):
    t = _table(tmp_path)
    per_ms = 1 if kind == pa.time32("ms") else 1000
    stored = pa.array([5000 * per_ms], pa.int64()).cast(pa.int32() if per_ms == 1 else pa.int64()).cast(kind)
    deletes = pa.array([v * per_ms for v in (4000, 6000, 5000)], pa.int32() if per_ms == 1 else pa.int64())
    _write(t, stored, deletes.cast(kind))
    values = _delete_block(t)
    assert values.type_codes.to_pylist() == [code] * 3
    assert [v.as_py() for v in values] == [v * per_ms for v in (4000, 6000, 5000)]
    assert _ids(t.read()) == [1, 4]
    # hudi-rs 0.5.0 reads the table (a TimeMicrosWrapper made it fail); it does not order deletes
    # against time fields, so it applies all three.
    assert _ids(hudi_rs_read(t.path)) in ([1, 4], [4])


# ---- decimal ordering values a delete block cannot carry -----------------------------------------

DECIMAL = pa.decimal128(38, 10)


def _decimal_table(tmp_path, table_type: str) -> shoal.Table:
    t = shoal.Table.create(
        str(tmp_path / "d"), name="d", table_type=table_type, record_key="id", ordering_field="ts"
    )
    t.upsert(pa.table({"id": [1, 2], "ts": pa.array([Decimal(1), Decimal(1)], DECIMAL)}))
    return t


# 27 integer digits: more than decimal(30,15) holds. And a scale-10 value needing rounding is fine
# (scale 10 widens to 15); the first fails as Hudi's tryUpcastDecimal fails it.
TOO_WIDE = pa.table({"id": [1], "ts": pa.array([Decimal("1" * 27)], DECIMAL), "_hoodie_is_deleted": [True]})


def test_a_decimal_ordering_value_no_delete_block_holds_fails_before_the_timeline_changes(tmp_path):
    t = _decimal_table(tmp_path, "MERGE_ON_READ")
    before = t._timeline().instants
    with pytest.raises(InvalidArgumentError, match=r"decimal\(30,15\)"):
        t.upsert(TOO_WIDE)
    with pytest.raises(InvalidArgumentError, match=r"decimal\(30,15\)"), t.stream_writer() as writer:
        writer.write(TOO_WIDE)
    assert t._timeline().instants == before
    assert _ids(t.read()) == [1, 2]
    # A value that fits is logged and ordered as usual.
    t.upsert(pa.table({"id": [1], "ts": pa.array([Decimal(2)], DECIMAL), "_hoodie_is_deleted": [True]}))
    assert _ids(t.read()) == [2]


def test_copy_on_write_writes_no_delete_block_and_takes_such_a_delete(tmp_path):
    t = _decimal_table(tmp_path, "COPY_ON_WRITE")
    t.upsert(TOO_WIDE)
    assert _ids(t.read()) == [2]


@pytest.mark.parametrize("index", ["BLOOM", "GLOBAL_BLOOM"])
def test_spark_writes_refuse_it_before_the_timeline_changes(tmp_path, spark, index):
    from shoal.spark import write as spark_write

    t = _decimal_table(tmp_path, "MERGE_ON_READ")
    before = t._timeline().instants
    with pytest.raises(InvalidArgumentError, match=r"decimal\(30,15\)"):
        frame = spark.createDataFrame(
            TOO_WIDE.to_pandas(), "id long, ts decimal(38,10), _hoodie_is_deleted boolean"
        )
        spark_write(frame, t.path, "upsert", {"hoodie.index.type": index})
    assert t._timeline().instants == before
    assert _ids(t.read()) == [1, 2]
