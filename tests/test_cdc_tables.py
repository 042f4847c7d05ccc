"""A table that logs change data (``hoodie.table.cdc.enabled=true``) refuses shoal's record
writes with UnsupportedError before anything on disk changes. Hudi's CDC queries read the
``.cdc`` log files that its writers add beside every change, and shoal writes none, so a shoal
write would be missing from the change feed. Reads work as on any table.

The tables are copies of Hudi-written fixtures with the property set (checksum recomputed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import shoal
from shoal.config.table_config import CDC_ENABLED
from shoal.errors import UnsupportedError
from tests.table_files import data_columns, file_digests, set_table_properties
from tests.test_fixtures import _compare as compare_with_hudi_rs

FIXTURES = ["cow_v6_simplekeygen_nonhivestyle", "mor_avro_v6_trips_8i1u"]


def _with_cdc(fixture_table, name: str, value: str = "true") -> Path:
    root = fixture_table(name)
    set_table_properties(root, {CDC_ENABLED: value})
    return root


def _records(table: shoal.Table):
    rows = table.read()
    return rows.select(data_columns(rows)).slice(0, 2)


@pytest.mark.parametrize("name", FIXTURES)
def test_record_writes_refuse_a_cdc_table_and_reads_still_work(fixture_table, name):
    root = _with_cdc(fixture_table, name)
    table = shoal.Table(str(root))
    data = _records(table)
    files = file_digests(root)
    for attempt in (
        lambda: table.upsert(data),
        lambda: table.insert(data),
        lambda: table.bulk_insert(data),
        lambda: table.delete(data),
        lambda: table.stream_writer(),
    ):
        with pytest.raises(UnsupportedError, match=r"hoodie\.table\.cdc\.enabled=true"):
            attempt()
        assert file_digests(root) == files
    compare_with_hudi_rs(str(root), read_optimized=False)


def test_cdc_disabled_in_the_properties_writes(fixture_table):
    root = _with_cdc(fixture_table, FIXTURES[0], "false")
    table = shoal.Table(str(root))
    before = table.read().num_rows
    table.upsert(_records(table))
    assert shoal.Table(str(root)).read().num_rows == before
    compare_with_hudi_rs(str(root), read_optimized=False)


def test_spark_write_refuses_a_cdc_table(fixture_table, spark):
    pytest.importorskip("pyspark")
    import shoal.spark

    root = _with_cdc(fixture_table, FIXTURES[1])
    files = file_digests(root)
    df = spark.createDataFrame(_records(shoal.Table(str(root))))
    with pytest.raises(UnsupportedError, match="change data"):
        shoal.spark.write(df, str(root), "upsert")
    assert file_digests(root) == files
