"""The data source's ``filters`` option is JSON: values for date, timestamp and decimal columns
come as strings (or numbers, for decimals), read as the columns' types, and the data source
returns the rows ``Table.read`` returns for the same filters given as Python values."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

import shoal
from shoal.spark.datasource import register

UTC = dt.timezone.utc


@pytest.fixture(scope="module")
def ss(spark):
    """The session with the data source registered."""
    register(spark)
    return spark


def _table(tmp_path) -> shoal.Table:
    t = shoal.Table.create(str(tmp_path / "t"), name="t", record_key="id", partition_by="day")
    days = [dt.date(2025, 1, d) for d in (1, 1, 2, 3)]
    t.upsert(
        pa.table(
            {
                "id": [1, 2, 3, 4],
                "day": pa.array(days, pa.date32()),
                "at": pa.array(
                    [dt.datetime(2025, 1, d, h, tzinfo=UTC) for d, h in ((1, 9), (1, 18), (2, 9), (3, 9))],
                    pa.timestamp("us", tz="UTC"),
                ),
                "local": pa.array([dt.datetime(2025, 1, 1, h) for h in (1, 2, 3, 4)], pa.timestamp("us")),
                "price": pa.array(
                    [Decimal("1.50"), Decimal("12.25"), None, Decimal("7.00")], pa.decimal128(6, 2)
                ),
            }
        )
    )
    return t


CASES = [
    (["day", "=", "2025-01-01"], ("day", "=", dt.date(2025, 1, 1))),
    (["day", "in", ["2025-01-02", "2025-01-03"]], ("day", "in", [dt.date(2025, 1, 2), dt.date(2025, 1, 3)])),
    (["at", ">=", "2025-01-01T12:00:00Z"], ("at", ">=", dt.datetime(2025, 1, 1, 12, tzinfo=UTC))),
    (
        ["at", "<", "2025-01-02T10:00:00+01:00"],
        ("at", "<", dt.datetime(2025, 1, 2, 9, tzinfo=UTC)),
    ),
    # A naive column is stored as UTC instants (Avro timestamp-micros): its values need Z too.
    (["local", "<=", "2025-01-01 02:00:00Z"], ("local", "<=", dt.datetime(2025, 1, 1, 2, tzinfo=UTC))),
    (["price", ">", "5"], ("price", ">", Decimal("5"))),
    (["price", "=", 12.25], ("price", "=", Decimal("12.25"))),
    (["price", "not in", ["1.50"]], ("price", "not in", [Decimal("1.50")])),
]


def _ids(table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def test_typed_filters_read_the_rows_table_read_reads(ss, tmp_path):
    t = _table(tmp_path)
    for given, typed in CASES:
        want = _ids(t.read(filters=[typed]))
        assert want, f"{typed} selects rows"  # a case that selects nothing checks too little
        df = ss.read.format("shoal").option("filters", json.dumps([given])).load(t.path)
        got = sorted(r["id"] for r in df.select("id").collect())
        assert got == want, given


@pytest.mark.parametrize(
    "given",
    [
        ["day", "=", "2025-13-01"],
        ["at", ">=", "2025-01-01T12:00:00"],  # instants need the offset
        ["price", ">", "cheap"],
    ],
)
def test_values_that_are_not_of_the_columns_type_are_refused(ss, tmp_path, given):
    t = _table(tmp_path)
    with pytest.raises(Exception, match="InvalidOptionError"):
        ss.read.format("shoal").option("filters", json.dumps([given])).load(t.path).collect()
