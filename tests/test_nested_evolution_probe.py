"""Probing schema evolution inside nested columns as a user whose source schema evolves.

A nested field that holds only None in a batch (``{"a": 1, "in": None}``, which pyarrow types
``null``) is taken in the type the table stores it in, as a top-level column of nulls only is
(docs/compatibility.md: "a batch in which an optional column is all null keeps the column's type"); values of
another type in a nested field are still refused, naming the field, the table unchanged."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import SchemaMismatchError
from shoal.write.schema import reconcile
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import file_digests

INNER = pa.struct([("x", pa.int64()), ("y", pa.list_(pa.int64()))])
S = pa.struct([("a", pa.int64()), ("in", INNER)])
COLUMNS = ["id", "ts", "s", "l", "m"]


def _timeline_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / ".hoodie").iterdir() if p.is_file())


def _first_rows() -> list[dict]:
    return [
        {
            "id": "k1",
            "ts": 1,
            "s": {"a": 1, "in": {"x": 1, "y": [1, 2]}},
            "l": [{"a": 1, "in": {"x": 1, "y": []}}],
            "m": [("k", {"a": 1, "in": {"x": 1, "y": None}})],
        },
        {
            "id": "k2",
            "ts": 1,
            "s": {"a": 2, "in": {"x": 2, "y": [2]}},
            "l": [],
            "m": [],
        },
    ]


def _table_of(rows: list[dict]) -> pa.Table:
    return pa.table(
        {
            "id": [r["id"] for r in rows],
            "ts": pa.array([r["ts"] for r in rows], pa.int64()),
            "s": pa.array([r["s"] for r in rows], S),
            "l": pa.array([r["l"] for r in rows], pa.list_(S)),
            "m": pa.array([r["m"] for r in rows], pa.map_(pa.string(), S)),
        }
    )


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_nested_field_of_nones_only_is_taken_in_the_stored_type(tmp_path, table_type):
    path = tmp_path / "t"
    t = shoal.Table.create(str(path), name="t", table_type=table_type, record_key="id", ordering_field="ts")
    first = _first_rows()
    t.upsert(_table_of(first))

    # As a user's records arrive: a struct within a struct that is None in every record of the
    # batch, a field of a struct in a list that is, and a map value's fields that are.
    later = [
        {
            "id": "k1",
            "ts": 2,
            "s": {"a": 10, "in": None},
            "l": [{"a": 10, "in": {"x": None, "y": None}}, None],
        },
        {"id": "k3", "ts": 2, "s": None, "l": None},
    ]
    batch = pa.Table.from_pylist(later)
    assert batch.schema.field("s").type.field("in").type == pa.null()
    null_inner = pa.struct(
        [("a", pa.int64()), ("in", pa.struct([("x", pa.null()), ("y", pa.list_(pa.null()))]))]
    )
    maps = [[("k", {"a": 10, "in": {"x": None, "y": [None]}})], None]
    batch = batch.append_column("m", pa.array(maps, pa.map_(pa.string(), null_inner)))
    t.upsert(batch)

    model = {r["id"]: r for r in first}
    model.update({r["id"]: {**r, "m": m} for r, m in zip(later, maps, strict=True)})
    expected = [model[k] for k in sorted(model)]
    t = shoal.Table(str(path))
    schema = t.schema()
    assert schema is not None
    assert (schema.field("s").type, schema.field("l").type, schema.field("m").type) == (
        S,
        pa.list_(S),
        pa.map_(pa.string(), S),
    )
    assert rows_by(t.read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(path)), COLUMNS, ["id"]) == expected

    # Values of another type in a nested field are still refused, naming it, before anything
    # changes; so is that type in an empty batch (Spark checks its input's schema on one).
    before, digests = _timeline_files(path), file_digests(path)
    wrong = pa.Table.from_pylist([{"id": "k1", "ts": 3, "s": {"a": 1, "in": {"x": "one", "y": None}}}])
    with pytest.raises(SchemaMismatchError, match=r"'s\.in\.x' has type string but the table stores int64"):
        t.upsert(wrong, options={"hoodie.datasource.write.reconcile.schema": "true"})
    assert (_timeline_files(path), file_digests(path)) == (before, digests)
    empty = pa.schema(
        [("id", pa.string()), ("ts", pa.int64()), ("s", pa.struct([("a", pa.int64()), ("in", pa.string())]))]
    )
    with pytest.raises(SchemaMismatchError, match=r"'s\.in' has type string but the table stores"):
        reconcile(empty.empty_table(), pa.schema([("id", pa.string()), ("ts", pa.int64()), ("s", S)]))
