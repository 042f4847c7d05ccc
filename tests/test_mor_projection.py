"""Merge-on-read reads that project and filter: the base file is read with only the columns the
read returns, filters on and merges by, and the merged rows are those of a full read."""

from __future__ import annotations

import pyarrow as pa
import pytest

import shoal
import shoal.read.mor as mor
from tests.hudi_oracle import hudi_rs_read

CITIES = ["sf", "nyc"]


def _events(rows: list[tuple[int, int, str]]) -> pa.Table:
    """(id, ts, status) change events; city and fare follow from them."""
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "city": [CITIES[r[0] % 2] for r in rows],
            "ts": pa.array([r[1] for r in rows], pa.int64()),
            "status": [r[2] for r in rows],
            "fare": pa.array([r[0] * 1.5 + r[1] for r in rows]),
        }
    )


@pytest.fixture
def orders(tmp_path) -> shoal.Table:
    """A MOR table under event-time ordering whose slices have base files and logs with updates,
    late events that must lose to the base file, new keys and deletes."""
    t = shoal.Table.create(
        str(tmp_path / "orders"),
        name="orders",
        table_type="MERGE_ON_READ",
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        merge_ordering="EVENT_TIME_ORDERING",
    )
    t.bulk_insert(_events([(i, 10, "created") for i in range(20)]))
    t.upsert(_events([(i, 20, "paid") for i in range(0, 20, 3)] + [(20, 20, "created")]))
    t.upsert(_events([(i, 5, "created-late") for i in range(1, 20, 4)] + [(21, 25, "created")]))
    t.delete(_events([(4, 30, "x"), (7, 30, "x")]).select(["id", "city"]))
    merged = {s.partition_path for s in t.file_slices() if s.base_file and s.log_files}
    assert merged == set(CITIES)
    return t


def _expected(path: str, columns: list[str], keep) -> list[tuple]:
    full = hudi_rs_read(path).to_pylist()
    return sorted(tuple(r[c] for c in columns) for r in full if keep(r))


CASES = [
    # (columns, filters, the same filter in Python)
    (["status"], [], lambda r: True),
    (["fare", "status"], [("ts", ">", 10)], lambda r: r["ts"] > 10),
    (["id", "fare"], [("status", "=", "created")], lambda r: r["status"] == "created"),
    (
        ["city", "ts"],
        [("city", "=", "sf"), ("fare", "<", 30.0)],
        lambda r: r["city"] == "sf" and r["fare"] < 30,
    ),
]


@pytest.mark.parametrize(("columns", "filters", "keep"), CASES)
def test_projected_reads_return_the_rows_hudi_rs_returns(orders, columns, filters, keep):
    out = orders.read(columns=columns, filters=filters)
    assert out.column_names == columns
    got = sorted(tuple(r[c] for c in columns) for r in out.to_pylist())
    assert got == _expected(orders.path, columns, keep)


def test_the_base_file_is_read_with_the_columns_the_merge_needs(orders, monkeypatch):
    read_with: list[list[str] | None] = []
    real = mor.read_base_file

    def spy(storage, path, columns=None, filters=()):
        read_with.append(columns)
        return real(storage, path, columns, filters)

    monkeypatch.setattr(mor, "read_base_file", spy)
    orders.read(columns=["fare"], filters=[("status", "=", "paid")])
    assert read_with and all(c == ["fare", "_hoodie_record_key", "ts", "status"] for c in read_with)
    read_with.clear()
    orders.read()
    assert read_with and all(c is None for c in read_with)
