"""Hudi log files: real Hudi-written blocks decode, our blocks are byte-identical to Java's,
torn or garbage bytes never break the reader, and the scanner applies rollbacks.

Expected values come from the fixture bytes (as decoded by the independent debug tool
``shared/tools/parse_log.py``), from the Spark SQL that produced each fixture table, from the
tables' own deltacommit metadata, and from the spec's worked examples.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import io
import json
import random
import re
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shoal import _native as native
from shoal.errors import CorruptDataError, InvalidArgumentError, UnsupportedError

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
LOG_FIXTURES = SHARED / "log-files"
TABLE_FIXTURES = SHARED / "hudi-java"
MOR_ZIPS = sorted(p.stem for p in TABLE_FIXTURES.glob("mor_*.zip"))

pytestmark = pytest.mark.skipif(not LOG_FIXTURES.is_dir(), reason="shared fixtures not found")

# Hudi's log file name: .<fileId>_<timestamp>.log.<version>_<token> (spec §4.3).
LOG_NAME = re.compile(r"^\.(.+)_(.*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(.cdc)?)?$")


def fixture(kind: str) -> bytes:
    (path,) = [p for p in (LOG_FIXTURES / kind).iterdir() if ".log." in p.name]
    return path.read_bytes()


def fixture_path(kind: str) -> Path:
    (path,) = [p for p in (LOG_FIXTURES / kind).iterdir() if ".log." in p.name]
    return path


# --- the four standalone fixture logs ---------------------------------------------------------


def test_avro_data_fixture():
    (block,) = native.read_log_blocks(fixture("valid_log_avro_data"))
    assert block.block_type == "AVRO_DATA_BLOCK"
    assert (block.offset, block.size, block.format_version) == (0, 1172, 1)
    assert list(block.header) == ["INSTANT_TIME", "SCHEMA"]
    assert block.instant_time == "20250316025828811"
    assert block.footer == {}
    assert not block.is_corrupt and block.corrupt_reason is None
    assert block.record_count == 1
    batch = block.records()
    schema = json.loads(block.header["SCHEMA"])
    assert batch.schema.names == [f["name"] for f in schema["fields"]]
    assert batch.to_pylist() == [
        {
            "_hoodie_commit_time": "20250316025828811",
            "_hoodie_commit_seqno": "20250316025828811_0_2",
            "_hoodie_record_key": "334e26e9-8355-45cc-97c6-c31daf0df330",
            "_hoodie_partition_path": "city=san_francisco",
            "_hoodie_file_name": "ff32ab89-5ad0-4968-83b4-89a34c95d32f-0",
            "ts": 1695159649088,
            "uuid": "334e26e9-8355-45cc-97c6-c31daf0df330",
            "rider": "rider-A",
            "driver": "driver-K",
            "fare": 29.1,
            "city": "san_francisco",
        }
    ]
    with pytest.raises(InvalidArgumentError):
        block.deletes()


def test_avro_data_fixture_reencodes_byte_exactly():
    data = fixture("valid_log_avro_data")
    (block,) = native.read_log_blocks(data)
    again = native.encode_avro_data_block(block.records(), block.header["SCHEMA"], block.instant_time)
    assert again == data


def test_delete_fixture_and_byte_exact_reencoding():
    data = fixture("valid_log_delete")
    (block,) = native.read_log_blocks(data)
    assert block.block_type == "DELETE_BLOCK"
    assert block.size == len(data) == 1098
    assert list(block.header) == ["SCHEMA", "INSTANT_TIME"]
    assert block.instant_time == "20250618054714114"
    assert block.record_count is None
    deletes = block.deletes()
    assert deletes.schema.names == ["record_key", "partition_path", "ordering_value"]
    union = deletes.schema.field("ordering_value").type
    assert union.mode == "dense"
    assert list(union.type_codes) == list(range(12))
    keys = [
        "e96c4396-3fad-413a-a942-4cb36106d721",
        "9909a8b1-2d15-4d3d-8ec9-efc48c536a00",
        "334e26e9-8355-45cc-97c6-c31daf0df330",
    ]
    assert deletes.column("record_key").to_pylist() == keys
    assert deletes.column("partition_path").to_pylist() == ["city=san_francisco"] * 3
    ordering = deletes.column("ordering_value")
    # Spec §11: `04 00` = IntWrapper branch (2), value 0.
    assert ordering.type_codes.to_pylist() == [2, 2, 2]
    assert ordering.to_pylist() == [0, 0, 0]

    # Re-encode from the decoded values, header in the fixture's order.
    again = native.encode_delete_block(
        deletes.column("record_key"),
        deletes.column("partition_path"),
        deletes.column("ordering_value"),
        block.instant_time,
        block.header["SCHEMA"],
        header={"SCHEMA": block.header["SCHEMA"]},
    )
    assert again == data
    # Spark SQL deletes carry IntWrapper(0): the default when no ordering values are given.
    again = native.encode_delete_block(
        pa.array(keys),
        pa.array(["city=san_francisco"] * 3),
        None,
        "20250618054714114",
        block.header["SCHEMA"],
        header={"SCHEMA": block.header["SCHEMA"]},
    )
    assert again == data


def test_rollback_fixture_reencodes_byte_exactly():
    data = fixture("valid_log_rollback")
    (block,) = native.read_log_blocks(data)
    assert block.block_type == "COMMAND_BLOCK"
    assert block.header == {
        "INSTANT_TIME": "20250126040936578",
        "COMMAND_BLOCK_TYPE": "0",
        "TARGET_INSTANT_TIME": "20250126040826878",
    }
    assert block.content() == b""
    assert native.encode_rollback_block("20250126040936578", "20250126040826878") == data
    # Spec §11 hex dump: blockSize 91 at offset 6, total length 97 at the end.
    assert data[6:14] == (91).to_bytes(8, "big")
    assert data[-8:] == (97).to_bytes(8, "big")


def test_parquet_fixture_content_is_a_parquet_file():
    (block,) = native.read_log_file(fixture_path("valid_log_parquet_data"))
    assert block.block_type == "PARQUET_DATA_BLOCK"
    assert block.instant_time == "20250113230424191"
    content = block.content()
    assert len(content) == 4373
    table = pq.read_table(io.BytesIO(content))
    schema = json.loads(block.header["SCHEMA"])
    assert table.schema.names == [f["name"] for f in schema["fields"]]
    assert set(table.column("_hoodie_commit_time").to_pylist()) == {block.instant_time}
    with pytest.raises(InvalidArgumentError):
        block.records()


def test_header_order_argument_must_agree_with_arguments():
    with pytest.raises(InvalidArgumentError):
        native.encode_rollback_block("2", "1", header={"INSTANT_TIME": "3"})
    with pytest.raises(InvalidArgumentError):
        native.encode_rollback_block("2", "1", header={"NOT_A_KEY": "x"})
    # Extra keys are appended after the caller's, defined ones fill in after that.
    data = native.encode_rollback_block(
        "2", "1", header={"TARGET_INSTANT_TIME": "1", "BLOCK_IDENTIFIER": "b"}
    )
    (block,) = native.read_log_blocks(data)
    assert list(block.header) == [
        "TARGET_INSTANT_TIME",
        "BLOCK_IDENTIFIER",
        "INSTANT_TIME",
        "COMMAND_BLOCK_TYPE",
    ]


# --- every log file inside the real MOR tables -----------------------------------------------


def unzip(name: str, dest: Path) -> Path:
    with zipfile.ZipFile(TABLE_FIXTURES / f"{name}.zip") as z:
        z.extractall(dest)
    (props,) = [p for p in dest.glob("*/.hoodie/hoodie.properties") if "__MACOSX" not in str(p)]
    return props.parent.parent


def log_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(".*.log.*") if "__MACOSX" not in p.parts)


def v6_log_write_stats(root: Path) -> dict[str, tuple[str, dict]]:
    """Log file name → (deltacommit instant, write stat), from the v6 JSON timeline."""
    stats = {}
    for commit in (root / ".hoodie").glob("*.deltacommit"):
        meta = json.loads(commit.read_text())
        for ws_list in meta["partitionToWriteStats"].values():
            for ws in ws_list:
                name = ws["path"].rsplit("/", 1)[-1]
                if ".log." in name:
                    stats[name] = (commit.name.split(".")[0], ws)
    return stats


@pytest.mark.skipif(not MOR_ZIPS, reason="MOR fixtures not found")
@pytest.mark.parametrize("name", MOR_ZIPS)
def test_every_log_file_of_mor_fixtures_decodes(tmp_path, name):
    root = unzip(name, tmp_path)
    files = log_files(root)
    stats = v6_log_write_stats(root) if "_v6_" in name else {}
    # Every log file the timeline says was written is there (and is checked below).
    assert set(stats) <= {p.name for p in files}
    for path in files:
        m = LOG_NAME.match(path.name)
        assert m, path.name
        file_id = m.group(1)
        blocks = native.read_log_file(path)
        assert blocks, path
        assert sum(b.size for b in blocks) == path.stat().st_size
        in_metadata_table = ".hoodie" in path.relative_to(root).parts
        partition = path.parent.relative_to(root).as_posix()
        partition = "" if partition == "." else partition
        for block in blocks:
            assert not block.is_corrupt, (path, block.corrupt_reason)
            assert block.format_version == 1
            instant = block.instant_time
            assert re.fullmatch(r"\d{17}", instant), instant
            if path.name in stats:
                # The deltacommit that lists the file is the instant that wrote the block.
                assert stats[path.name][0] == instant
            if block.block_type == "AVRO_DATA_BLOCK":
                batch = block.records()
                assert batch.num_rows == block.record_count
                assert set(batch.column("_hoodie_commit_time").to_pylist()) == {instant}
                # Spec §5: log data blocks hold the fileId, not a file name.
                assert set(batch.column("_hoodie_file_name").to_pylist()) == {file_id}
                assert set(batch.column("_hoodie_partition_path").to_pylist()) == {partition}
                if path.name in stats:
                    assert stats[path.name][1]["numWrites"] == batch.num_rows
                # Java-identical bytes: re-encoding the decoded rows rebuilds the whole file.
                again = native.encode_avro_data_block(
                    batch, block.header["SCHEMA"], instant, header=block.header
                )
                assert len(blocks) == 1 and again == path.read_bytes()
            elif block.block_type == "PARQUET_DATA_BLOCK":
                table = pq.read_table(io.BytesIO(block.content()))
                header_fields = [f["name"] for f in json.loads(block.header["SCHEMA"])["fields"]]
                assert table.schema.names == header_fields
                assert set(table.column("_hoodie_commit_time").to_pylist()) == {instant}
                assert set(table.column("_hoodie_file_name").to_pylist()) == {file_id}
                if path.name in stats:
                    assert stats[path.name][1]["numWrites"] == table.num_rows
            elif block.block_type == "DELETE_BLOCK":
                deletes = block.deletes()
                if path.name in stats:
                    assert stats[path.name][1]["numDeletes"] == deletes.num_rows
                if not in_metadata_table:
                    assert set(deletes.column("partition_path").to_pylist()) == {partition}
                assert deletes.column("ordering_value").type_codes.to_pylist() == [2] * deletes.num_rows
                # Java's layout round-trips byte-exactly from what we decoded.
                again = native.encode_delete_block(
                    deletes.column("record_key"),
                    deletes.column("partition_path"),
                    deletes.column("ordering_value"),
                    instant,
                    block.header.get("SCHEMA"),
                    header=block.header,
                )
                assert again == path.read_bytes()
            elif block.block_type == "COMMAND_BLOCK":
                assert block.header["COMMAND_BLOCK_TYPE"] == "0"
                again = native.encode_rollback_block(
                    instant, block.header["TARGET_INSTANT_TIME"], header=block.header
                )
                assert again == path.read_bytes()
            else:
                # The metadata table's HFile blocks are surfaced, not decoded.
                assert block.block_type == "HFILE_DATA_BLOCK" and in_metadata_table
                assert len(block.content()) > 0
                with pytest.raises(UnsupportedError):
                    block.records()


FARE_UPDATES = {
    # From the fixtures' Spark SQL: UPDATE ... SET fare = ... WHERE rider = ...
    "mor_avro_v6_trips_8i1u": {"9909a8b1-2d15-4d3d-8ec9-efc48c536a00": ("rider-D", 25.0)},
    "mor_avro_v8_trips_8i3u1d": {
        "334e26e9-8355-45cc-97c6-c31daf0df330": ("rider-A", 0.0),
        "c8abbe79-8d89-47ea-b4ce-4d224bae5bfa": ("rider-J", 0.0),
        "7a84095f-737f-40bc-b62f-6b69664712d2": ("rider-G", 0.0),
    },
}
SQL_DELETES = {
    # DELETE FROM ... WHERE rider in (...) → the keys those riders were inserted with.
    "mor_avro_v6_trips_8i3d": {
        "334e26e9-8355-45cc-97c6-c31daf0df330",
        "e96c4396-3fad-413a-a942-4cb36106d721",
        "9909a8b1-2d15-4d3d-8ec9-efc48c536a00",
    },
    "mor_avro_v8_trips_8i3u1d": {
        "e3cf430c-889d-4015-bc98-59bdce1e530c",
        "c8abbe79-8d89-47ea-b4ce-4d224bae5bfa",
    },
}


@pytest.mark.parametrize("name", sorted(set(FARE_UPDATES) | set(SQL_DELETES)))
def test_avro_mor_logs_hold_what_the_sql_wrote(tmp_path, name):
    root = unzip(name, tmp_path)
    updated, deleted = {}, set()
    for path in log_files(root):
        if ".hoodie" in path.relative_to(root).parts:
            continue
        for block in native.read_log_file(path):
            if block.block_type == "AVRO_DATA_BLOCK":
                for row in block.records().to_pylist():
                    updated[row["_hoodie_record_key"]] = (row["rider"], row["fare"])
            elif block.block_type == "DELETE_BLOCK":
                deleted |= set(block.deletes().column("record_key").to_pylist())
    assert updated == FARE_UPDATES.get(name, {})
    assert deleted == SQL_DELETES.get(name, set())


# --- our Avro data blocks ---------------------------------------------------------------------

ALL_TYPES_SCHEMA = {
    "type": "record",
    "name": "all_types_record",
    "namespace": "hoodie.all_types",
    "fields": [
        {"name": "_hoodie_record_key", "type": ["null", "string"], "doc": "", "default": None},
        {"name": "b", "type": ["null", "boolean"], "default": None},
        {"name": "i", "type": ["null", "int"], "default": None},
        {"name": "l", "type": "long"},
        {"name": "f", "type": ["null", "float"], "default": None},
        {"name": "d", "type": ["null", "double"], "default": None},
        {"name": "s", "type": ["null", "string"], "default": None},
        {"name": "by", "type": ["null", "bytes"], "default": None},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
        {
            "name": "tmic",
            "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
            "default": None,
        },
        {
            "name": "tmil",
            "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
            "default": None,
        },
        {
            "name": "dec_fixed",
            "type": [
                "null",
                {
                    "type": "fixed",
                    "name": "fixed",
                    "namespace": "hoodie.all_types.all_types_record.dec_fixed",
                    "size": 5,
                    "logicalType": "decimal",
                    "precision": 10,
                    "scale": 2,
                },
            ],
            "default": None,
        },
        {
            "name": "dec_bytes",
            "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9}],
            "default": None,
        },
        {"name": "tags", "type": ["null", {"type": "array", "items": ["null", "string"]}], "default": None},
        {
            "name": "addr",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "addr",
                    "namespace": "hoodie.all_types.all_types_record",
                    "fields": [
                        {"name": "city", "type": ["null", "string"], "default": None},
                        {"name": "zip", "type": "int"},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "attrs", "type": ["null", {"type": "map", "values": ["null", "long"]}], "default": None},
        {
            "name": "suit",
            "type": ["null", {"type": "enum", "name": "suit", "symbols": ["SPADES", "HEARTS"]}],
            "default": None,
        },
        {
            "name": "points",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "point",
                    "fields": [
                        {"name": "x", "type": "double"},
                        {"name": "ys", "type": {"type": "array", "items": "int"}},
                    ],
                },
            },
        },
    ],
}

UTC = dt.timezone.utc
ALL_TYPES_ARROW = pa.schema(
    [
        pa.field("_hoodie_record_key", pa.string()),
        pa.field("b", pa.bool_()),
        pa.field("i", pa.int32()),
        pa.field("l", pa.int64(), nullable=False),
        pa.field("f", pa.float32()),
        pa.field("d", pa.float64()),
        pa.field("s", pa.string()),
        pa.field("by", pa.binary()),
        pa.field("day", pa.date32()),
        pa.field("tmic", pa.timestamp("us", tz="UTC")),
        pa.field("tmil", pa.timestamp("ms", tz="UTC")),
        pa.field("dec_fixed", pa.decimal128(10, 2)),
        pa.field("dec_bytes", pa.decimal128(38, 9)),
        pa.field("tags", pa.list_(pa.field("item", pa.string()))),
        pa.field(
            "addr", pa.struct([pa.field("city", pa.string()), pa.field("zip", pa.int32(), nullable=False)])
        ),
        pa.field(
            "attrs",
            pa.map_(pa.field("keys", pa.string(), nullable=False), pa.field("values", pa.int64())),
        ),
        pa.field("suit", pa.string()),
        pa.field(
            "points",
            pa.list_(
                pa.field(
                    "item",
                    pa.struct(
                        [
                            pa.field("x", pa.float64(), nullable=False),
                            pa.field(
                                "ys", pa.list_(pa.field("item", pa.int32(), nullable=False)), nullable=False
                            ),
                        ]
                    ),
                    nullable=False,
                )
            ),
            nullable=False,
        ),
    ]
)


def all_types_batch() -> pa.RecordBatch:
    rows = [
        {
            "_hoodie_record_key": "k1",
            "b": True,
            "i": -7,
            "l": 2**62,
            "f": 1.5,
            "d": -2.25,
            "s": "naïve ✓",
            "by": b"\x00\x01\xff",
            "day": dt.date(2024, 2, 29),
            "tmic": dt.datetime(2023, 9, 19, 21, 40, 49, 88123, tzinfo=UTC),
            "tmil": dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
            "dec_fixed": decimal.Decimal("-12345678.90"),
            "dec_bytes": decimal.Decimal("12345678901234567890.123456789"),
            "tags": ["a", None, ""],
            "addr": {"city": "chennai", "zip": 600001},
            "attrs": [("x", 1), ("y", None)],
            "suit": "HEARTS",
            "points": [{"x": 0.5, "ys": [1, 2, 3]}, {"x": -1.0, "ys": []}],
        },
        {
            "_hoodie_record_key": None,
            "b": None,
            "i": None,
            "l": -1,
            "f": None,
            "d": None,
            "s": None,
            "by": None,
            "day": None,
            "tmic": None,
            "tmil": None,
            "dec_fixed": None,
            "dec_bytes": None,
            "tags": None,
            "addr": None,
            "attrs": None,
            "suit": None,
            "points": [],
        },
        {
            "_hoodie_record_key": "",
            "b": False,
            "i": 2**31 - 1,
            "l": -(2**63),
            "f": float("inf"),
            "d": 0.0,
            "s": "",
            "by": b"",
            "day": dt.date(1, 1, 1),
            "tmic": dt.datetime(1970, 1, 1, tzinfo=UTC),
            "tmil": dt.datetime(2262, 4, 11, tzinfo=UTC),
            "dec_fixed": decimal.Decimal("99999999.99"),
            "dec_bytes": decimal.Decimal("-0.000000001"),
            "tags": [],
            "addr": {"city": None, "zip": 0},
            "attrs": [],
            "suit": "SPADES",
            "points": [{"x": 1e300, "ys": [-(2**31)]}],
        },
    ]
    return pa.RecordBatch.from_pylist(rows, schema=ALL_TYPES_ARROW)


def test_every_supported_type_round_trips_through_a_block():
    batch = all_types_batch()
    schema_json = json.dumps(ALL_TYPES_SCHEMA)
    data = native.encode_avro_data_block(batch, schema_json, "20240101000000000")
    (block,) = native.read_log_blocks(data)
    assert block.block_type == "AVRO_DATA_BLOCK"
    assert block.header == {"INSTANT_TIME": "20240101000000000", "SCHEMA": schema_json}
    assert block.record_count == 3
    back = block.records()
    assert back.schema == ALL_TYPES_ARROW
    assert back.to_pylist() == batch.to_pylist()
    assert back.equals(batch)


def test_encoding_is_deterministic_and_framed_like_java():
    batch = all_types_batch()
    schema_json = json.dumps(ALL_TYPES_SCHEMA)
    data = native.encode_avro_data_block(batch, schema_json, "20240101000000000")
    assert data == native.encode_avro_data_block(batch, schema_json, "20240101000000000")
    assert data[:6] == b"#HUDI#"
    assert int.from_bytes(data[6:14], "big") == len(data) - 14
    assert int.from_bytes(data[-8:], "big") == len(data) - 8
    assert int.from_bytes(data[14:18], "big") == 1  # log format version
    assert int.from_bytes(data[18:22], "big") == 3  # AVRO_DATA_BLOCK ordinal


def test_our_block_decodes_with_the_fixture_schema():
    (fixture_block,) = native.read_log_blocks(fixture("valid_log_avro_data"))
    schema_json = fixture_block.header["SCHEMA"]
    rows = [
        {
            "_hoodie_commit_time": "20250101000000000",
            "_hoodie_commit_seqno": f"20250101000000000_0_{i}",
            "_hoodie_record_key": f"key-{i}",
            "_hoodie_partition_path": "city=chennai",
            "_hoodie_file_name": "ff32ab89-5ad0-4968-83b4-89a34c95d32f-0",
            "ts": 1_700_000_000_000 + i,
            "uuid": f"key-{i}",
            "rider": None if i % 2 else f"rider-{i}",
            "driver": "driver-Z",
            "fare": i * 1.5,
            "city": "chennai",
        }
        for i in range(5)
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=fixture_block.records().schema)
    data = native.encode_avro_data_block(batch, schema_json, "20250101000000000")
    (block,) = native.read_log_blocks(data)
    assert block.records().to_pylist() == rows


def test_reader_schema_evolution_fills_new_fields_with_null():
    (block,) = native.read_log_blocks(fixture("valid_log_avro_data"))
    schema = json.loads(block.header["SCHEMA"])
    evolved = dict(schema)
    evolved["fields"] = [f for f in schema["fields"] if f["name"] != "driver"] + [
        {"name": "tip", "type": ["null", "double"], "default": None}
    ]
    batch = block.records(json.dumps(evolved))
    assert "driver" not in batch.schema.names
    assert batch.column("tip").to_pylist() == [None]
    assert batch.column("rider").to_pylist() == ["rider-A"]
    with pytest.raises(InvalidArgumentError):
        block.records('{"type":"record","name":"x","fields":[{"name":"ts","type":"string"}]}')


def test_encoder_rejects_what_it_cannot_write():
    schema = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]})
    with pytest.raises(InvalidArgumentError):
        native.encode_avro_data_block(pa.record_batch({"a": pa.array([1, None])}), schema, "1")
    with pytest.raises(InvalidArgumentError):
        native.encode_avro_data_block(pa.record_batch({"b": pa.array([1])}), schema, "1")
    with pytest.raises(InvalidArgumentError):
        native.encode_avro_data_block(pa.record_batch({"a": pa.array(["x"])}), schema, "1")
    with pytest.raises(InvalidArgumentError):
        native.encode_avro_data_block(pa.record_batch({"a": pa.array([1])}), "{not json", "1")


# --- delete blocks with every ordering-value wrapper ------------------------------------------


@pytest.mark.parametrize(
    ("values", "type_code", "expected"),
    [
        (pa.array([True, False]), 1, [True, False]),
        (pa.array([0, -5], pa.int32()), 2, [0, -5]),
        (pa.array([7, None], pa.int16()), 2, [7, None]),
        (pa.array([2**40, -1], pa.int64()), 3, [2**40, -1]),
        (pa.array([1.5, -0.25], pa.float32()), 4, [1.5, -0.25]),
        (pa.array([1e300, 2.5], pa.float64()), 5, [1e300, 2.5]),
        (pa.array([b"\x00", b""], pa.binary()), 6, [b"\x00", b""]),
        (pa.array(["z", ""], pa.string()), 7, ["z", ""]),
        (pa.array([dt.date(2020, 1, 2), dt.date(1960, 1, 1)]), 8, [dt.date(2020, 1, 2), dt.date(1960, 1, 1)]),
        (
            pa.array(
                [decimal.Decimal("1.5"), decimal.Decimal("-12345678901234.000000000000001")],
                pa.decimal128(30, 15),
            ),
            9,
            [decimal.Decimal("1.500000000000000"), decimal.Decimal("-12345678901234.000000000000001")],
        ),
        (pa.array([dt.time(1, 2, 3, 4), dt.time(0)], pa.time64("us")), 10, [dt.time(1, 2, 3, 4), dt.time(0)]),
        (
            pa.array(
                [dt.datetime(2023, 9, 19, tzinfo=UTC), dt.datetime(1969, 1, 1, tzinfo=UTC)],
                pa.timestamp("us", "UTC"),
            ),
            11,
            [dt.datetime(2023, 9, 19, tzinfo=UTC), dt.datetime(1969, 1, 1, tzinfo=UTC)],
        ),
    ],
)
def test_delete_ordering_values_round_trip(values, type_code, expected):
    keys = pa.array(["k1", None])
    parts = pa.array([None, "p"])
    data = native.encode_delete_block(keys, parts, values, "001")
    (block,) = native.read_log_blocks(data)
    assert block.header == {"INSTANT_TIME": "001"}
    d = block.deletes()
    assert d.column("record_key").to_pylist() == ["k1", None]
    assert d.column("partition_path").to_pylist() == [None, "p"]
    codes = d.column("ordering_value").type_codes.to_pylist()
    assert codes == [type_code if v is not None else 0 for v in expected]
    assert d.column("ordering_value").to_pylist() == expected
    # Decoded unions re-encode to the same bytes.
    again = native.encode_delete_block(d.column(0), d.column(1), d.column(2), "001")
    assert again == data


def test_delete_wrapper_bytes_follow_java_layout():
    # LongWrapper is branch 3: zigzag(3) = 06, then zigzag(5) = 0a (hudi-rs would read a float).
    data = native.encode_delete_block(pa.array(["k"]), pa.array(["p"]), pa.array([5], pa.int64()), "1")
    (block,) = native.read_log_blocks(data)
    content = block.content()
    payload = content[8:]
    assert content[:4] == (3).to_bytes(4, "big")
    assert int.from_bytes(content[4:8], "big") == len(payload)
    assert payload == bytes([0x02, 0x02, 0x02]) + b"k" + bytes([0x02, 0x02]) + b"p" + bytes(
        [0x06, 0x0A, 0x00]
    )
    # DecimalWrapper: decimal(30,15), minimal two's complement; 1 → 10^15 = 0x038D7EA4C68000.
    data = native.encode_delete_block(
        pa.array(["k"]), pa.array(["p"]), pa.array([decimal.Decimal("1")], pa.decimal128(5, 0)), "1"
    )
    payload = native.read_log_blocks(data)[0].content()[8:]
    assert payload[-10:] == bytes([0x12, 0x0E, 0x03, 0x8D, 0x7E, 0xA4, 0xC6, 0x80, 0x00, 0x00])


def test_delete_block_rejects_bad_arguments():
    with pytest.raises(InvalidArgumentError):
        native.encode_delete_block(pa.array(["a", "b"]), pa.array(["p"]), None, "1")
    with pytest.raises(InvalidArgumentError):
        native.encode_delete_block(pa.array([1]), pa.array(["p"]), None, "1")
    with pytest.raises(InvalidArgumentError):
        # 1e-16 cannot be rescaled to DecimalWrapper's scale 15 without rounding.
        native.encode_delete_block(
            pa.array(["a"]), pa.array(["p"]), pa.array([decimal.Decimal("1E-16")], pa.decimal128(20, 16)), "1"
        )


# --- torn and garbage input -------------------------------------------------------------------


def several_blocks() -> list[bytes]:
    schema_json = json.dumps(ALL_TYPES_SCHEMA)
    return [
        fixture("valid_log_avro_data"),
        fixture("valid_log_delete"),
        native.encode_avro_data_block(all_types_batch(), schema_json, "20240101000000000"),
        fixture("valid_log_rollback"),
        native.encode_delete_block(
            pa.array(["a", "b"]), pa.array(["p", "p"]), pa.array([1, 2]), "20240102000000000"
        ),
    ]


def test_truncating_the_last_block_at_every_offset_keeps_earlier_blocks():
    blocks = several_blocks()
    head = b"".join(blocks[:-1])
    last = blocks[-1]
    expected = native.read_log_blocks(head)
    assert [b.block_type for b in expected] == [
        "AVRO_DATA_BLOCK",
        "DELETE_BLOCK",
        "AVRO_DATA_BLOCK",
        "COMMAND_BLOCK",
    ]
    expected_records = expected[2].records()
    for cut in range(len(last)):
        for garbage in (b"", b"\x00garbage\xff", b"#HUDI"):
            data = head + last[:cut] + garbage
            got = native.read_log_blocks(data)
            assert [(b.block_type, b.offset, b.size) for b in got[:4]] == [
                (b.block_type, b.offset, b.size) for b in expected
            ], cut
            assert got[2].records().equals(expected_records)
            tail = got[4:]
            if cut + len(garbage) == 0:
                assert tail == []
            else:
                assert tail and all(b.is_corrupt for b in tail), cut
                assert all(b.block_type == "CORRUPT_BLOCK" and b.corrupt_reason for b in tail)
                assert sum(b.size for b in tail) == cut + len(garbage)
                assert b"".join(b.content() for b in tail) == last[:cut] + garbage


def test_garbage_in_the_middle_resyncs_on_the_next_magic():
    blocks = several_blocks()
    garbage = b"\x13\x37 not a block"
    data = blocks[0] + garbage + blocks[1]
    got = native.read_log_blocks(data)
    assert [b.block_type for b in got] == ["AVRO_DATA_BLOCK", "CORRUPT_BLOCK", "DELETE_BLOCK"]
    assert got[1].offset == len(blocks[0])
    assert got[1].size == len(garbage)
    assert got[2].offset == len(blocks[0]) + len(garbage)
    assert got[2].deletes().num_rows == 3


def test_random_garbage_never_raises():
    rng = random.Random(20250618)
    pieces = several_blocks()
    for _ in range(400):
        n = rng.randrange(0, 600)
        data = bytearray(rng.randbytes(n))
        # Sprinkle magics and real block fragments so that the framing paths get exercised.
        for _ in range(rng.randrange(0, 4)):
            at = rng.randrange(0, len(data) + 1)
            piece = rng.choice(pieces)
            s = rng.randrange(0, len(piece))
            data[at:at] = rng.choice([b"#HUDI#", piece[s : s + rng.randrange(1, 200)]])
        got = native.read_log_blocks(bytes(data))
        assert sum(b.size for b in got) == len(data)
        for b in got:
            content_readers = {
                "AVRO_DATA_BLOCK": b.records,
                "DELETE_BLOCK": b.deletes,
            }
            if b.block_type in content_readers:
                with contextlib.suppress(CorruptDataError):
                    content_readers[b.block_type]()


def test_flipped_content_bytes_only_raise_corrupt_data_errors():
    rng = random.Random(7)
    for piece in several_blocks():
        (block,) = native.read_log_blocks(piece)
        if block.block_type not in ("AVRO_DATA_BLOCK", "DELETE_BLOCK"):
            continue
        start = len(piece) - 12 - len(block.content())
        for _ in range(300):
            data = bytearray(piece)
            # Skip the 4-byte content version: versions 1 and 2 are real (unsupported) layouts.
            i = rng.randrange(start + 4, len(piece) - 12)
            data[i] = rng.randrange(256)
            (b,) = native.read_log_blocks(bytes(data))
            with contextlib.suppress(CorruptDataError):
                b.records() if b.block_type == "AVRO_DATA_BLOCK" else b.deletes()


# --- scanner ------------------------------------------------------------------------------------


def blocks_summary(blocks) -> list[tuple[int, str, str]]:
    return [(b.file_index, b.block_type, b.instant_time) for b in blocks]


def test_scanner_on_the_rollback_fixture_table(tmp_path):
    root = unzip("mor_parquet_v6_nonpartitioned_rollback", tmp_path)
    hoodie = root / ".hoodie"
    completed = sorted(
        p.name.split(".")[0] for p in hoodie.iterdir() if p.name.endswith((".commit", ".deltacommit"))
    )
    assert completed == ["20250126040823628", "20250126060846931"]
    files = log_files(root)
    assert [p.name.split(".log.")[1][0] for p in files] == ["1", "2", "3"]
    got = native.scan_log_files([str(p) for p in files], completed)
    # log.1 holds the failed deltacommit's block, log.2 its rollback, log.3 the next write.
    assert blocks_summary(got) == [(2, "PARQUET_DATA_BLOCK", "20250126060846931")]
    assert pq.read_table(io.BytesIO(got[0].content())).num_rows == 1
    # Bytes work the same as paths; a query before the last deltacommit sees nothing.
    assert (
        blocks_summary(native.scan_log_files([p.read_bytes() for p in files], completed, "20250126050000000"))
        == []
    )
    # Even with the failed instant marked completed, the rollback block removes it.
    got = native.scan_log_files([str(p) for p in files], [*completed, "20250126040826878"])
    assert blocks_summary(got) == [(2, "PARQUET_DATA_BLOCK", "20250126060846931")]


def test_scanner_rollbacks_and_uncommitted_instants():
    schema = json.dumps({"type": "record", "name": "r", "fields": [{"name": "k", "type": "string"}]})

    def data_block(instant: str) -> bytes:
        return native.encode_avro_data_block(pa.record_batch({"k": pa.array([instant])}), schema, instant)

    def delete_block(instant: str) -> bytes:
        return native.encode_delete_block(pa.array([instant]), pa.array(["p"]), None, instant)

    # Two attempts of 003 in the same file, a torn tail, then the rollback of 003 in a new file.
    f1 = data_block("002") + data_block("003") + delete_block("003") + data_block("003")[:40]
    f2 = native.encode_rollback_block("004", "003")
    f3 = data_block("005") + delete_block("006") + data_block("007")
    completed = ["001", "002", "003", "005", "006", "007"]
    got = native.scan_log_files([f1, f2, f3], completed)
    assert blocks_summary(got) == [
        (0, "AVRO_DATA_BLOCK", "002"),
        (2, "AVRO_DATA_BLOCK", "005"),
        (2, "DELETE_BLOCK", "006"),
        (2, "AVRO_DATA_BLOCK", "007"),
    ]
    assert got[1].records().column("k").to_pylist() == ["005"]
    assert got[2].deletes().column("record_key").to_pylist() == ["006"]
    # 006 not completed → skipped; 007 past the max instant ends the scan.
    got = native.scan_log_files([f1, f2, f3], ["001", "002", "005"], max_instant="006")
    assert blocks_summary(got) == [(0, "AVRO_DATA_BLOCK", "002"), (2, "AVRO_DATA_BLOCK", "005")]
    # Incremental range (002, 006].
    got = native.scan_log_files([f1, f2, f3], completed, instant_range=("002", "006"))
    assert blocks_summary(got) == [(2, "AVRO_DATA_BLOCK", "005"), (2, "DELETE_BLOCK", "006")]
    # Known inflight instants never count.
    got = native.scan_log_files([f1, f3], completed, inflight_instants=["002", "003"])
    assert [b.instant_time for b in got] == ["005", "006", "007"]


def test_encoders_accept_tables_and_chunked_arrays():
    schema = json.dumps({"type": "record", "name": "r", "fields": [{"name": "k", "type": "string"}]})
    table = pa.Table.from_batches(
        [pa.record_batch({"k": pa.array(["a", "b"])}), pa.record_batch({"k": pa.array(["c"])})]
    )
    from_table = native.encode_avro_data_block(table, schema, "1")
    from_batch = native.encode_avro_data_block(pa.record_batch({"k": pa.array(["a", "b", "c"])}), schema, "1")
    assert from_table == from_batch
    keys = pa.chunked_array([["a"], ["b", "c"]])
    parts = pa.chunked_array([[], ["p", "p", "p"]], pa.string())
    assert native.encode_delete_block(keys, parts, None, "1") == native.encode_delete_block(
        pa.array(["a", "b", "c"]), pa.array(["p"] * 3), None, "1"
    )
