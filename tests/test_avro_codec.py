"""Avro container files (timeline instants): decoding the files Apache Hudi wrote in the fixtures
agrees with fastavro and with the debug tool shared/tools/dump_avro.py, and re-encoding the
decoded JSON with the file's writer schema reproduces Hudi's data block byte for byte."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from shoal import _native
from shoal.errors import CorruptDataError, InvalidArgumentError

fastavro = pytest.importorskip("fastavro")

DUMP_AVRO = Path(__file__).resolve().parents[1].parent / "shared" / "tools" / "dump_avro.py"
SCHEMAS = Path(__file__).resolve().parents[1].parent / "shared" / "spec" / "schemas"

# Every fixture with Avro instant files: v8 commits/deltacommits/plans, v6 rollbacks.
FIXTURES = [
    "cow_v8_complexkeygen_hivestyle",
    "cow_v8_nonpartitioned",
    "cow_v8_simplekeygen_nonhivestyle",
    "mor_avro_v8_trips_8i3u1d",
    "mor_parquet_v6_nonpartitioned_rollback",
]


def avro_instant_files(root: Path) -> list[Path]:
    """Avro container files of the data table's active timeline (v6 `.hoodie/`, v8
    `.hoodie/timeline/`); the metadata table and the LSM history are other formats' business."""
    hoodie = root / ".hoodie"
    candidates = [*hoodie.glob("*"), *hoodie.glob("timeline/*")]
    return sorted(p for p in candidates if p.is_file() and p.read_bytes()[:4] == b"Obj\x01")


def _latin1_bytes(value):
    """fastavro's Python values in our JSON conventions (bytes -> one code point per byte)."""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dict):
        return {k: _latin1_bytes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_latin1_bytes(v) for v in value]
    return value


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_instants_decode_like_fastavro(fixture_table, name):
    files = avro_instant_files(fixture_table(name))
    assert files, f"{name}: no Avro instant files"
    for path in files:
        data = path.read_bytes()
        ours = json.loads(_native.avro_container_decode(data))
        reference = [_latin1_bytes(r) for r in fastavro.reader(io.BytesIO(data))]
        assert ours == reference, path.name
        assert len(ours) == 1, "Hudi writes one record per instant file"


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_instants_match_dump_avro_tool(fixture_table, name):
    files = avro_instant_files(fixture_table(name))
    out = subprocess.run(
        [sys.executable, str(DUMP_AVRO), *map(str, files)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    lines = iter(out)
    for path in files:
        header = next(lines)
        assert header.startswith(f"== {path} codec null schema name org.apache.hudi.avro.model."), header
        records = json.loads(_native.avro_container_decode(path.read_bytes()))
        field_names = str(list(records[0]))
        assert header.endswith(f"fields {field_names}"), header
        for record in records:
            # The tool prints json.dumps(record)[:2500]: field and map-entry order must agree too.
            assert next(lines) == json.dumps(record, default=str)[:2500], path.name
    assert next(lines, None) is None


@pytest.mark.parametrize("name", FIXTURES)
def test_reencoding_reproduces_hudi_data_blocks(fixture_table, name):
    for path in avro_instant_files(fixture_table(name)):
        data = path.read_bytes()
        reader = fastavro.reader(io.BytesIO(data))
        schema_json = reader.metadata["avro.schema"]
        ours = _native.avro_container_encode(schema_json, _native.avro_container_decode(data))
        (hudi_block,) = fastavro.block_reader(io.BytesIO(data))
        (our_block,) = fastavro.block_reader(io.BytesIO(ours))
        assert our_block.bytes_.getvalue() == hudi_block.bytes_.getvalue(), path.name
        assert json.loads(fastavro.reader(io.BytesIO(ours)).metadata["avro.schema"]) == json.loads(
            schema_json
        )


def _sample(schema, names):
    """A non-default value for an Avro schema (JSON form), registering named types in `names`."""
    if isinstance(schema, str):
        if schema in names:
            return _sample(names[schema], names)
        return {
            "null": None,
            "boolean": True,
            "int": -7,
            "long": 1 << 40,
            "float": 0.5,
            "double": -1.25,
            "bytes": "\x00\xff",
            "string": "é-ok",
        }[schema]
    if isinstance(schema, list):
        return _sample(schema[-1], names)
    kind = schema["type"]
    if kind in ("record", "enum", "fixed"):
        names[schema["name"]] = schema
        ns = schema.get("namespace")
        if ns:
            names[f"{ns}.{schema['name']}"] = schema
    if kind == "record":
        return {f["name"]: _sample(f["type"], names) for f in schema["fields"]}
    if kind == "enum":
        return schema["symbols"][-1]
    if kind == "fixed":
        return "f" * schema["size"]
    if kind == "array":
        return [_sample(schema["items"], names)]
    if kind == "map":
        return {"k": _sample(schema["values"], names)}
    return _sample(kind, names)


@pytest.mark.parametrize("schema_file", sorted(SCHEMAS.glob("*.avsc")), ids=lambda p: p.stem)
def test_hudi_schemas_round_trip_and_read_with_fastavro(schema_file):
    schema_json = schema_file.read_text()
    record = _sample(json.loads(schema_json), {})
    data = _native.avro_container_encode(schema_json, json.dumps([record]))
    assert json.loads(_native.avro_container_decode(data)) == [record]
    assert [_latin1_bytes(r) for r in fastavro.reader(io.BytesIO(data))] == [record]


def test_missing_fields_take_defaults_and_errors_are_typed():
    schema = json.dumps(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {"name": "a", "type": ["null", "string"], "default": None},
                {"name": "b", "type": "long", "default": 3},
                {"name": "c", "type": "int"},
            ],
        }
    )
    data = _native.avro_container_encode(schema, json.dumps([{"c": 1}]))
    assert json.loads(_native.avro_container_decode(data)) == [{"a": None, "b": 3, "c": 1}]
    with pytest.raises(InvalidArgumentError):
        _native.avro_container_encode(schema, json.dumps([{"a": "x"}]))  # c has no default
    with pytest.raises(InvalidArgumentError):
        _native.avro_container_encode(schema, json.dumps([{"c": "not an int"}]))
    for garbage in (b"", b"Obj", b"Obj\x01", b"PAR1....", data[: len(data) - 3]):
        with pytest.raises(CorruptDataError):
            _native.avro_container_decode(garbage)
