"""shoal writes into tables Apache Hudi wrote, and hudi-rs reads the result.

Every version 6 fixture with its meta fields gets an upsert of records it holds (a later
ordering value) and a delete of another record. shoal and hudi-rs must then both read the
model: the fixture's rows as read before the writes, with those records replaced and that one
removed. The tables shoal does not write (no meta fields; version 8, see test_v8_writes.py)
refuse every write and keep their files.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shoal
from shoal.errors import UnsupportedError
from tests.hudi_oracle import hudi_rs_read
from tests.table_files import data_columns, file_digests
from tests.test_fixtures import ALL_FIXTURES, _canonical

WRITABLE = [n for n in ALL_FIXTURES if "_v6_" in n and "empty" not in n and "no_metafields" not in n]
NO_META = [n for n in ALL_FIXTURES if "_v6_" in n and "no_metafields" in n]
KEY = "_hoodie_record_key"


def _model(before: pa.Table, updated: pa.Table, deleted: list[str]) -> list[dict]:
    """The rows (key and data columns) the table must hold after the writes."""
    columns = [KEY, *data_columns(before)]
    gone = pa.array([*updated.column(KEY).to_pylist(), *deleted])
    kept = before.filter(pc.invert(pc.is_in(before.column(KEY), gone))).select(columns)
    return _canonical(pa.concat_tables([kept, updated.select(columns).cast(kept.schema)]), [KEY])


def _write_and_check(root, upsert, delete) -> None:
    """Upserts records of the table at ``root`` with a later ordering value and deletes another
    (``upsert``/``delete`` take the data columns); shoal and hudi-rs must read the model."""
    table = shoal.Table(str(root))
    before = table.read()
    ordering = table.config.precombine_field
    n = before.num_rows
    assert n > 0

    updated = before.slice(0, min(2, n))
    if ordering:
        later = pc.add(updated.column(ordering), 1).cast(updated.schema.field(ordering).type)
        updated = updated.set_column(updated.column_names.index(ordering), ordering, later)
    deleted = before.slice(2, 1) if n > 2 else before.slice(0, 0)
    upsert(updated.select(data_columns(updated)))
    if deleted.num_rows:
        delete(deleted.select(data_columns(deleted)))

    expected = _model(before, updated, deleted.column(KEY).to_pylist())
    columns = list(expected[0])
    ours = shoal.Table(str(root)).read()
    assert _canonical(ours.select(columns), [KEY]) == expected
    theirs = hudi_rs_read(str(root))
    assert _canonical(theirs.select(columns).cast(ours.select(columns).schema), [KEY]) == expected


@pytest.mark.skipif(not WRITABLE, reason="fixtures not found")
@pytest.mark.parametrize("name", WRITABLE)
def test_upsert_and_delete_into_a_hudi_table_read_back_by_hudi_rs(fixture_table, name):
    root = fixture_table(name)
    table = shoal.Table(str(root))
    _write_and_check(root, table.upsert, table.delete)


SPARK_SAMPLE = ("cow_v6_complexkeygen_hivestyle", "mor_avro_v6_trips_8i3d", "mor_parquet_v6_nonpartitioned")


@pytest.mark.parametrize("name", [n for n in WRITABLE if n in SPARK_SAMPLE])
def test_spark_upsert_and_delete_into_a_hudi_table_read_back_by_hudi_rs(fixture_table, spark, name):
    pytest.importorskip("pyspark")
    import shoal.spark

    root = fixture_table(name)

    def spark_write(operation: str):
        return lambda data: shoal.spark.write(spark.createDataFrame(data), str(root), operation)

    _write_and_check(root, spark_write("upsert"), spark_write("delete"))


@pytest.mark.parametrize("name", NO_META)
def test_a_table_without_meta_fields_refuses_writes(fixture_table, name):
    root = fixture_table(name)
    table = shoal.Table(str(root))
    rows = table.read()
    files = file_digests(root)
    for write in (table.upsert, table.insert, table.bulk_insert, table.delete):
        with pytest.raises(UnsupportedError, match=r"hoodie\.populate\.meta\.fields=false"):
            write(rows.slice(0, 1))
    assert file_digests(root) == files
    assert shoal.Table(str(root)).read().num_rows == rows.num_rows


def test_an_evolving_upsert_that_loses_every_record_still_writes_the_new_schema(fixture_table):
    """The incoming records are older than the stored ones (ordering field), so none wins; the
    commit's schema has the new column, and so must the file the commit rewrote: hudi-rs and
    shoal then both show it, null."""
    root = fixture_table("cow_v6_simplekeygen_nonhivestyle")
    table = shoal.Table(str(root))
    before = table.read()
    older = before.slice(0, 1).select(data_columns(before))
    older = older.set_column(older.column_names.index("longField"), "longField", pa.array([-1], pa.int64()))
    table.upsert(older.append_column("extra_col", pa.array(["lost"])))

    ours = shoal.Table(str(root)).read()
    theirs = hudi_rs_read(str(root))
    assert "extra_col" in ours.column_names and "extra_col" in theirs.column_names
    assert ours.column("extra_col").null_count == ours.num_rows == before.num_rows
    columns = [KEY, *data_columns(before), "extra_col"]
    assert _canonical(ours.select(columns), [KEY]) == _canonical(
        theirs.select(columns).cast(ours.select(columns).schema), [KEY]
    )
    kept = before.select([KEY, "longField"]).sort_by(KEY).to_pylist()
    assert ours.select([KEY, "longField"]).sort_by(KEY).to_pylist() == kept
