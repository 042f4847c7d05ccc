"""Tables of Hudi's custom key generator (``field:SIMPLE`` and ``field:TIMESTAMP`` partition
parts): table version 6 records the partition fields' names only, and the parts' types come from
the ``hoodie.datasource.write.partitionpath.field`` write option."""

from __future__ import annotations

import pyarrow as pa
import pytest

import shoal
from shoal.config.table_config import TableConfig
from shoal.errors import InvalidOptionError
from shoal.fs.storage import Storage
from tests.hudi_oracle import hudi_rs_read, rows_by

TYPED = "region:SIMPLE,day:TIMESTAMP"
TIMESTAMP_OPTIONS = {
    "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
    "hoodie.keygen.timebased.output.dateformat": "yyyyMMdd",
}
DAY_MS = 86_400_000
# 2020-09-13 and 2020-09-14, UTC.
SEPT_13 = 1_599_955_200_000
COLUMNS = ["id", "region", "day", "v"]


def _create(tmp_path, table_type: str) -> shoal.Table:
    return shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        table_type=table_type,
        record_key="id",
        partition_by=TYPED.split(","),
        key_generator="CUSTOM",
        options=TIMESTAMP_OPTIONS,
    )


def _batch(ids, regions, days, values) -> pa.Table:
    return pa.table({"id": ids, "region": regions, "day": pa.array(days, pa.int64()), "v": values})


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_custom_key_generator_table_is_written_and_reopened(tmp_path, table_type):
    t = _create(tmp_path, table_type)
    t.upsert(
        _batch([1, 2, 3], ["eu", "eu", "us"], [SEPT_13, SEPT_13 + DAY_MS, SEPT_13 + 3_600_000], [1, 2, 3])
    )
    # Reopened, the table still knows the parts' types.
    again = shoal.Table(t.path)
    again.upsert(_batch([2], ["eu"], [SEPT_13 + DAY_MS], [20]))
    expected = rows_by(
        _batch([1, 2, 3], ["eu", "eu", "us"], [SEPT_13, SEPT_13 + DAY_MS, SEPT_13 + 3_600_000], [1, 20, 3]),
        COLUMNS,
        ["id"],
    )
    oracle = hudi_rs_read(t.path)
    assert rows_by(oracle, COLUMNS, ["id"]) == expected
    assert rows_by(again.read(), COLUMNS, ["id"]) == expected
    ids, paths = oracle.column("id").to_pylist(), oracle.column("_hoodie_partition_path").to_pylist()
    paths = dict(zip(ids, paths, strict=True))
    assert paths == {1: "eu/20200913", 2: "eu/20200914", 3: "us/20200913"}
    # A filter on the SIMPLE part prunes; one on the TIMESTAMP part filters rows only.
    assert [r["id"] for r in rows_by(again.read(filters=[("region", "=", "us")]), COLUMNS, ["id"])] == [3]
    by_day = again.read(filters=[("day", ">=", SEPT_13 + DAY_MS)])
    assert [r["id"] for r in rows_by(by_day, COLUMNS, ["id"])] == [2]


def test_a_version_6_table_without_the_typed_option_takes_it_from_the_write(tmp_path):
    t = _create(tmp_path, "COPY_ON_WRITE")
    # As Hudi leaves such a table: the partition fields by name only.
    storage = Storage(t.path)
    config = TableConfig.load(storage)
    del config.props["hoodie.datasource.write.partitionpath.field"]
    config.save(storage)
    assert TableConfig.load(storage).props["hoodie.table.partition.fields"] == "region,day"
    before = sorted(p.name for p in (tmp_path / "t" / ".hoodie").iterdir())
    batch = _batch([1], ["eu"], [SEPT_13], [1])
    with pytest.raises(InvalidOptionError, match="field:TYPE"):
        shoal.Table(t.path).upsert(batch)
    assert sorted(p.name for p in (tmp_path / "t" / ".hoodie").iterdir()) == before
    shoal.Table(t.path).upsert(batch, options={"hoodie.datasource.write.partitionpath.field": TYPED})
    opened = shoal.Table(t.path, options={"hoodie.datasource.write.partitionpath.field": TYPED})
    opened.upsert(_batch([2], ["us"], [SEPT_13], [2]))
    oracle = hudi_rs_read(t.path)
    assert sorted(oracle.column("_hoodie_partition_path").to_pylist()) == ["eu/20200913", "us/20200913"]
    assert rows_by(opened.read(), COLUMNS, ["id"]) == rows_by(oracle, COLUMNS, ["id"])
