"""Schema evolution inside nested columns: a write whose struct (also within a list or a map)
has a field the table's struct lacks adds it as a nullable field, as Hudi's Avro schema
evolution does; a nested field widens like a column does. Older records read the new field as
null. The model is the rows written, with that field null where a record was written before it
existed; shoal and hudi-rs must both read it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal.errors import SchemaMismatchError
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import file_digests

TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
OLD = pa.struct([("a", pa.int32())])
NEW = pa.struct([("a", pa.int64()), ("b", pa.string())])
RECONCILE = {"hoodie.datasource.write.reconcile.schema": "true"}
COLUMNS = ["id", "part", "ts", "s", "l", "m"]


def _batch(rows: list[dict], struct: pa.StructType) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r["id"] for r in rows]),
            "part": pa.array([r["part"] for r in rows]),
            "ts": pa.array([r["ts"] for r in rows], pa.int64()),
            "s": pa.array([r["s"] for r in rows], struct),
            "l": pa.array([r["l"] for r in rows], pa.list_(struct)),
            "m": pa.array([r["m"] for r in rows], pa.map_(pa.string(), struct)),
        }
    )


def _row(key: str, part: str, ts: int, a: int, b: str | None = None, old: bool = False) -> dict:
    s = {"a": a} if old else {"a": a, "b": b}
    return {"id": key, "part": part, "ts": ts, "s": s, "l": [s, s], "m": [("k", s)]}


def _model(rows: dict[str, dict]) -> list[dict]:
    """The rows as a reader of the evolved table sees them: a record written before the field
    existed has ``b`` null, wherever its struct sits."""

    def evolved(s: dict | None) -> dict | None:
        return None if s is None else {"a": s["a"], "b": s.get("b")}

    out = []
    for key in sorted(rows):
        r = rows[key]
        out.append(
            {
                **r,
                "s": evolved(r["s"]),
                "l": [evolved(x) for x in r["l"]],
                "m": [(k, evolved(v)) for k, v in r["m"]],
            }
        )
    return out


def _read(table: pa.Table) -> list[dict]:
    return rows_by(table.select(COLUMNS), COLUMNS, ["id"])


def _create(tmp_path: Path, table_type: str) -> shoal.Table:
    return shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        table_type=table_type,
        record_key="id",
        partition_by="part",
        ordering_field="ts",
    )


def _timeline_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / ".hoodie").iterdir() if p.is_file())


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_struct_gains_a_field_in_a_struct_a_list_and_a_map(tmp_path, table_type):
    """Three steps: the old shape into two partitions, an update of the old shape in the log (on
    merge-on-read), then the new shape into one partition only. The other partition's files
    still hold the old shape and read as the new one; so does the whole table on hudi-rs."""
    t = _create(tmp_path, table_type)
    rows = {}
    first = [_row(k, p, 1, a, old=True) for k, p, a in [("k1", "p1", 1), ("k2", "p1", 2), ("k3", "p2", 3)]]
    first_instant = t.upsert(_batch(first, OLD))
    rows.update({r["id"]: r for r in first})
    second = [_row("k2", "p1", 2, 20, old=True), _row("k3", "p2", 2, 30, old=True)]
    t.upsert(_batch(second, OLD))
    rows.update({r["id"]: r for r in second})
    third = [_row("k1", "p1", 3, 10, "x"), _row("k4", "p1", 3, 4, None)]
    t.upsert(_batch(third, NEW))
    rows.update({r["id"]: r for r in third})

    t = shoal.Table(str(tmp_path / "t"))
    ours = t.read()
    assert ours.schema.field("s").type == NEW
    assert ours.schema.field("l").type.value_type == NEW
    assert _read(ours) == _model(rows)
    # Files of the untouched partition alone still read in the table's schema.
    only_p2 = t.read(filters=[("part", "=", "p2")])
    assert only_p2.schema.field("s").type == NEW
    assert _read(only_p2) == [m for m in _model(rows) if m["part"] == "p2"]
    assert _read(hudi_rs_read(str(tmp_path / "t"))) == _model(rows)
    # Time travel to before the change reads in the table's latest schema too.
    back = t.read(as_of=first_instant)
    assert back.schema.field("s").type == NEW
    assert _read(back) == _model({r["id"]: r for r in first})

    commit = sorted((tmp_path / "t" / ".hoodie").glob("*.*commit"))[-1]
    schema = json.loads(json.loads(commit.read_text())["extraMetadata"]["schema"])
    s = next(f for f in schema["fields"] if f["name"] == "s")
    record = next(x for x in s["type"] if isinstance(x, dict))
    assert [(f["name"], f["type"], f.get("default", "absent")) for f in record["fields"]] == [
        ("a", ["null", "long"], None),
        ("b", ["null", "string"], None),
    ]

    if table_type == "MERGE_ON_READ":
        t.compact()
        t = shoal.Table(str(tmp_path / "t"))
        assert _read(t.read()) == _model(rows)
        assert _read(t.read(query_type="read_optimized")) == _model(rows)
        assert _read(hudi_rs_read(str(tmp_path / "t"))) == _model(rows)


def test_merge_on_read_logs_of_the_old_shape_are_compacted_before_the_struct_changes(tmp_path):
    """hudi-rs 0.5 cannot merge a log block holding a struct with fewer fields than the table's
    schema: the evolving write first compacts the slices with logs, as a widening one does."""
    t = _create(tmp_path, "MERGE_ON_READ")
    rows = {}
    first = [_row("k1", "p1", 1, 1, old=True), _row("k2", "p1", 1, 2, old=True)]
    t.upsert(_batch(first, OLD))
    second = [_row("k2", "p1", 2, 20, old=True)]
    t.upsert(_batch(second, OLD))
    rows.update({r["id"]: r for r in first + second})
    third = [_row("k1", "p1", 3, 10, "x")]
    t.upsert(_batch(third, NEW))
    rows.update({r["id"]: r for r in third})
    assert _read(shoal.Table(str(tmp_path / "t")).read()) == _model(rows)
    assert _read(hudi_rs_read(str(tmp_path / "t"))) == _model(rows)


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_rewritten_files_of_the_old_shape_take_the_tables_struct(tmp_path, table_type):
    """A delete in the partition the evolving write did not touch rewrites (copy-on-write) or
    compacts (merge-on-read) a file of the old shape: the new base file holds the table's
    struct, as Hudi writes merged files in the latest schema."""
    t = _create(tmp_path, table_type)
    first = [_row(k, p, 1, a, old=True) for k, p, a in [("k1", "p1", 1), ("k2", "p2", 2), ("k3", "p2", 3)]]
    t.upsert(_batch(first, OLD))
    t.upsert(_batch([_row("k1", "p1", 2, 10, "x")], NEW))
    t.delete(pa.table({"id": ["k3"], "part": ["p2"]}))
    if table_type == "MERGE_ON_READ":
        t.compact()
    t = shoal.Table(str(tmp_path / "t"))
    latest = max((tmp_path / "t" / "p2").glob("*.parquet"), key=lambda p: p.name.rsplit("_", 1)[-1])
    stored = pq.read_schema(latest)
    assert stored.field("s").type == NEW
    expected = _model({"k1": _row("k1", "p1", 2, 10, "x"), "k2": first[1]})
    assert _read(t.read()) == expected
    assert _read(hudi_rs_read(str(tmp_path / "t"))) == expected


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_write_lacking_a_nested_field_is_refused_unless_reconciled(tmp_path, table_type):
    """Like a missing column: dropping a struct's field is refused before the timeline changes;
    with reconcile.schema the table keeps the field and the write's records hold null in it."""
    t = _create(tmp_path, table_type)
    t.upsert(_batch([_row("k1", "p1", 1, 1, "x"), _row("k2", "p1", 1, 2, "y")], NEW))
    before = _timeline_files(tmp_path / "t")
    digests = file_digests(tmp_path / "t")
    with pytest.raises(SchemaMismatchError, match=r"field s\.b of the table is missing"):
        t.upsert(_batch([_row("k1", "p1", 2, 10, old=True)], OLD))
    assert _timeline_files(tmp_path / "t") == before
    assert file_digests(tmp_path / "t") == digests

    t.upsert(_batch([_row("k1", "p1", 2, 10, old=True)], OLD), options=RECONCILE)
    # Fields in another order are matched by name and stored in the table's order.
    swapped = pa.struct([("b", pa.string()), ("a", pa.int64())])
    k2 = _row("k2", "p1", 3, 2, "z")
    t.upsert(_batch([{**k2, "s": {"b": "z", "a": 2}, "l": [], "m": []}], swapped))
    k2 = {**k2, "l": [], "m": []}
    expected = _model({"k1": _row("k1", "p1", 2, 10, None), "k2": k2})
    t = shoal.Table(str(tmp_path / "t"))
    assert t.read().schema.field("s").type == NEW
    assert _read(t.read()) == expected
    assert _read(hudi_rs_read(str(tmp_path / "t"))) == expected


def test_an_incompatible_nested_type_is_refused_naming_the_field(tmp_path):
    t = _create(tmp_path, "COPY_ON_WRITE")
    t.upsert(_batch([_row("k1", "p1", 1, 1, "x")], NEW))
    before = _timeline_files(tmp_path / "t")
    other = pa.struct([("a", pa.int64()), ("b", pa.int64())])
    bad = pa.table(
        {
            "id": ["k1"],
            "part": ["p1"],
            "ts": pa.array([2], pa.int64()),
            "s": pa.array([{"a": 1, "b": 2}], other),
            "l": pa.array([[]], pa.list_(NEW)),
            "m": pa.array([[]], pa.map_(pa.string(), NEW)),
        }
    )
    with pytest.raises(SchemaMismatchError, match=r"column 's\.b' has type int64 but the table stores"):
        t.upsert(bad)
    assert _timeline_files(tmp_path / "t") == before


def test_spark_writes_and_reads_an_evolved_struct(tmp_path, spark):
    """The same evolution through ``shoal.spark.write`` and read back through the data source."""
    from shoal.spark import register
    from shoal.spark import write as spark_write

    register(spark)

    t = _create(tmp_path, "MERGE_ON_READ")
    first = [_row("k1", "p1", 1, 1, old=True), _row("k2", "p2", 1, 2, old=True)]
    t.upsert(_batch(first, OLD))
    third = [_row("k1", "p1", 3, 10, "x"), _row("k3", "p1", 3, 3, None)]
    spark_write(spark.createDataFrame(_batch(third, NEW)), str(tmp_path / "t"), operation="upsert")
    rows = {r["id"]: r for r in first + third}
    got = spark.read.format("shoal").load(str(tmp_path / "t")).toArrow()
    assert got.schema.field("s").type == NEW
    assert _read(got) == _model(rows)
    assert _read(hudi_rs_read(str(tmp_path / "t"))) == _model(rows)


def test_the_data_source_writer_compacts_before_an_evolving_insert(tmp_path, spark):
    """``df.write.format("shoal")`` inserts into a merge-on-read table whose slices have logs of
    the old shape: it compacts first, as the other write paths do, so hudi-rs reads the table."""
    from shoal.spark import register

    register(spark)
    t = _create(tmp_path, "MERGE_ON_READ")
    first = [_row("k1", "p1", 1, 1, old=True), _row("k2", "p1", 1, 2, old=True)]
    t.upsert(_batch(first, OLD))
    second = [_row("k2", "p1", 2, 20, old=True)]
    t.upsert(_batch(second, OLD))
    assert any(s.log_files for s in t.file_slices()), "no log: the test would prove nothing"
    third = [_row("k3", "p1", 3, 3, "x")]
    (
        spark.createDataFrame(_batch(third, NEW))
        .write.format("shoal")
        .option("hoodie.datasource.write.operation", "insert")
        .mode("append")
        .save(str(tmp_path / "t"))
    )
    rows = {r["id"]: r for r in first + second + third}
    assert _read(shoal.Table(str(tmp_path / "t")).read()) == _model(rows)
    assert _read(hudi_rs_read(str(tmp_path / "t"))) == _model(rows)
