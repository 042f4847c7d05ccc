"""Arrow <-> Avro schema conversion: the Arrow schema of a fixture's base file converts to exactly
the writer schema Hudi stored in that table's commit (`extraMetadata.schema`)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shoal import _native
from shoal.errors import InvalidArgumentError, UnsupportedError

FIXTURES = [
    "cow_v6_complexkeygen_hivestyle",
    "cow_v6_nonpartitioned",
    "cow_v6_simplekeygen_nonhivestyle",
    "cow_v8_complexkeygen_hivestyle",
    "cow_v8_nonpartitioned",
    "mor_avro_v6_trips_8i3d",
    "mor_avro_v8_trips_8i3u1d",
]


def _table_name(root: Path) -> str:
    for line in (root / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if line.startswith("hoodie.table.name="):
            return line.split("=", 1)[1].strip()
    raise AssertionError("no hoodie.table.name")


def _commit_schema(root: Path) -> str:
    """`extraMetadata.schema` of the first completed commit/deltacommit (JSON in v6, Avro in v8)."""
    hoodie = root / ".hoodie"
    timeline = hoodie / "timeline" if (hoodie / "timeline").is_dir() else hoodie
    commits = sorted(
        p
        for p in timeline.iterdir()
        if p.is_file() and p.suffix in (".commit", ".deltacommit") and p.stat().st_size
    )
    data = commits[0].read_bytes()
    if data[:4] == b"Obj\x01":
        (meta,) = json.loads(_native.avro_container_decode(data))
    else:
        meta = json.loads(data)
    return meta["extraMetadata"]["schema"]


def _data_schema(root: Path) -> pa.Schema:
    base = next(p for p in sorted(root.rglob("*.parquet")) if ".hoodie" not in p.parts)
    schema = pq.read_schema(base)
    keep = [f for f in schema if not f.name.startswith("_hoodie_")]
    return pa.schema(keep)


@pytest.mark.parametrize("name", FIXTURES)
def test_base_file_schema_converts_to_the_commit_schema(fixture_table, name):
    root = fixture_table(name)
    table = _table_name(root)
    expected = _commit_schema(root)
    got = _native.arrow_to_avro_schema(_data_schema(root), f"{table}_record", f"hoodie.{table}")
    assert json.loads(got) == json.loads(expected)
    assert got == expected  # same key order and compact form as Hudi's Schema.toString()


@pytest.mark.parametrize("name", FIXTURES)
def test_commit_schema_converts_back_to_the_base_file_types(fixture_table, name):
    root = fixture_table(name)
    arrow = _native.avro_to_arrow_schema(_commit_schema(root))
    base = _data_schema(root)
    assert arrow.names == base.names
    for ours, theirs in zip(arrow, base, strict=True):
        # Nested list/map child names and nullability differ between parquet readers; compare
        # the leaf types, which is what the conversion decides.
        assert _leaf_types(ours.type) == _leaf_types(theirs.type), ours.name


def _leaf_types(t: pa.DataType) -> list[str]:
    if pa.types.is_struct(t):
        return [x for i in range(t.num_fields) for x in [t.field(i).name, *_leaf_types(t.field(i).type)]]
    if pa.types.is_map(t):
        return ["map", *_leaf_types(t.key_type), *_leaf_types(t.item_type)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ["list", *_leaf_types(t.value_type)]
    return [str(t)]


def test_every_type_round_trips():
    schema = pa.schema(
        [
            ("b", pa.bool_()),
            ("i", pa.int32()),
            ("l", pa.int64()),
            ("f", pa.float32()),
            ("d", pa.float64()),
            ("s", pa.string()),
            ("bin", pa.binary()),
            ("date", pa.date32()),
            ("ts_us", pa.timestamp("us", tz="UTC")),
            ("ts_ms", pa.timestamp("ms", tz="UTC")),
            ("dec", pa.decimal128(10, 5)),
            ("list", pa.list_(pa.string())),
            ("st", pa.struct([("x", pa.int32()), ("inner", pa.struct([("y", pa.decimal128(4, 1))]))])),
        ]
    )
    avro = _native.arrow_to_avro_schema(schema, "t_record", "hoodie.t")
    assert _native.avro_to_arrow_schema(avro) == schema
    parsed = json.loads(avro)
    assert (parsed["name"], parsed["namespace"]) == ("t_record", "hoodie.t")
    dec = parsed["fields"][10]["type"][1]
    # Spark's layout: fixed "fixed" in <record full name>.<field>, 5 bytes hold precision 10.
    assert dec == {
        "type": "fixed",
        "name": "fixed",
        "namespace": "hoodie.t.t_record.dec",
        "size": 5,
        "logicalType": "decimal",
        "precision": 10,
        "scale": 5,
    }
    inner = parsed["fields"][12]["type"][1]["fields"][1]["type"][1]
    assert (inner["name"], inner["namespace"]) == ("inner", "hoodie.t.t_record.st")
    # Maps with string keys; arrow's names for the entry fields are the codec's own.
    m = _native.avro_to_arrow_schema(
        _native.arrow_to_avro_schema(pa.schema([("m", pa.map_(pa.string(), pa.int64()))]), "r", "ns")
    )
    assert pa.types.is_map(m.field("m").type)
    assert (m.field("m").type.key_type, m.field("m").type.item_type) == (pa.string(), pa.int64())


def test_avro_unions_in_either_order_and_enums():
    avro = json.dumps(
        {
            "type": "record",
            "name": "r",
            "fields": [
                {"name": "a", "type": ["string", "null"]},
                {"name": "b", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
                {"name": "c", "type": {"type": "fixed", "name": "F", "size": 4}},
            ],
        }
    )
    schema = _native.avro_to_arrow_schema(avro)
    assert schema == pa.schema(
        [pa.field("a", pa.string()), pa.field("b", pa.string(), False), pa.field("c", pa.binary(4), False)]
    )


def test_unsupported_and_invalid():
    for t in (pa.timestamp("ns"), pa.timestamp("s"), pa.uint64(), pa.map_(pa.int32(), pa.int32())):
        with pytest.raises(UnsupportedError):
            _native.arrow_to_avro_schema(pa.schema([("x", t)]), "r", "ns")
    with pytest.raises(InvalidArgumentError):
        _native.arrow_to_avro_schema(pa.schema([("bad name", pa.int32())]), "r", "ns")
    with pytest.raises(InvalidArgumentError):
        _native.avro_to_arrow_schema("{not json")
