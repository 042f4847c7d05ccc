"""Column types through every path that re-encodes records (copy-on-write base files,
merge-on-read log blocks, delete blocks, compaction) and every read (snapshot, read-optimized,
time travel, incremental), compared with a model of the written rows and with hudi-rs; the Avro
schema log blocks record; and the input a write takes into an existing column's type."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shoal
from shoal import _native
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import file_digests

TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
D = decimal.Decimal
UTC = dt.timezone.utc


def _create(tmp_path: Path, table_type: str) -> shoal.Table:
    return shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type=table_type, record_key="id", ordering_field="ts"
    )


# ---- every type, every path ---------------------------------------------------------------------

_ST = pa.struct(
    [("x", pa.int64()), ("inner", pa.struct([("y", pa.decimal128(4, 1)), ("z", pa.list_(pa.int64()))]))]
)


def _rows(ids: list[int], ts: int) -> pa.Table:
    """Three shapes of row, one per id modulo 3: extremes, unicode and empties, nulls."""

    def pick(*values: object) -> list[object]:
        return [values[i % 3] for i in ids]

    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "b": pa.array(pick(True, False, None)),
            "i8": pa.array(pick(-128, 127, None), pa.int8()),
            "i16": pa.array(pick(-32768, 0, None), pa.int16()),
            "i32": pa.array(pick(2**31 - 1, -(2**31), None), pa.int32()),
            "i64": pa.array(pick(2**63 - 1, -(2**63), None), pa.int64()),
            "f32": pa.array(pick(1.5, float("-inf"), None), pa.float32()),
            "f64": pa.array(pick(float("inf"), -0.0, None), pa.float64()),
            "d5_2": pa.array(pick(D("123.45"), D("-0.01"), None), pa.decimal128(5, 2)),
            "d18_4": pa.array(pick(D("99999999999999.9999"), D("-1"), None), pa.decimal128(18, 4)),
            "d38_10": pa.array(
                pick(D("9" * 28 + "." + "9" * 10), D("-" + "9" * 28 + ".0000000001"), None),
                pa.decimal128(38, 10),
            ),
            "d20_0": pa.array(
                pick(D("12345678901234567890"), D("-1" + "0" * 19), None), pa.decimal128(20, 0)
            ),
            "s": pa.array(pick("x" * 300, "héllo wörld 🎉", None)),
            "ls": pa.array(pick("", "日本語", None), pa.large_string()),
            "bin": pa.array(pick(b"", b"\x00\xff", None)),
            "lbin": pa.array(pick(b"\x01", b"", None), pa.large_binary()),
            "date": pa.array(pick(dt.date(1970, 1, 1), dt.date(1900, 12, 31), None)),
            "t_ms": pa.array(pick(0, 86_399_999, None), pa.time32("ms")),
            "t_us": pa.array(pick(0, 86_399_999_999, None), pa.time64("us")),
            "ts_ms": pa.array(
                pick(
                    dt.datetime(2024, 1, 1, 0, 0, 0, 123000, UTC), dt.datetime(1960, 1, 1, tzinfo=UTC), None
                ),
                pa.timestamp("ms", tz="UTC"),
            ),
            "ts_us": pa.array(
                pick(
                    dt.datetime(2024, 1, 1, 1, 2, 3, 456789, UTC), dt.datetime(1900, 1, 1, tzinfo=UTC), None
                ),
                pa.timestamp("us", tz="UTC"),
            ),
            "ts_ntz": pa.array(
                pick(dt.datetime(2024, 1, 1, 1, 2, 3, 456789), dt.datetime(1969, 12, 31, 23, 59, 59), None),
                pa.timestamp("us"),
            ),
            "ts_s": pa.array(pick(0, -86_400, None), pa.timestamp("s", tz="UTC")),
            "ts_ns": pa.array(pick(1_000, -2_000, None), pa.timestamp("ns", tz="Asia/Kolkata")),
            "lst": pa.array(pick([1, None, 3], [], None), pa.list_(pa.int32())),
            "llst": pa.array(pick(["a", ""], None, []), pa.large_list(pa.string())),
            "lst_of_st": pa.array(
                pick([{"a": 1, "b": "x"}, None], [], None),
                pa.list_(pa.struct([("a", pa.int32()), ("b", pa.string())])),
            ),
            "st": pa.array(
                pick({"x": 1, "inner": {"y": D("1.5"), "z": [1]}}, {"x": None, "inner": None}, None), _ST
            ),
            "mp": pa.array(pick([("k", 1), ("n", None)], [], None), pa.map_(pa.string(), pa.int64())),
            "mp_st": pa.array(
                pick([("k", {"q": "v"})], [("", None)], None),
                pa.map_(pa.string(), pa.struct([("q", pa.string())])),
            ),
            "lst_lst": pa.array(pick([[1], [], None], None, [[]]), pa.list_(pa.list_(pa.int64()))),
        }
    )


def _upserted(state: pa.Table, new: pa.Table) -> pa.Table:
    kept = state.filter(pc.invert(pc.is_in(state.column("id"), new.column("id"))))
    return pa.concat_tables([kept, new])


def _assert_same(got: pa.Table, expected: pa.Table, what: str) -> None:
    """``got`` holds exactly ``expected``'s rows, compared by value (NaN and -0.0 by repr)."""
    cols = expected.column_names
    got = got.select(cols).cast(expected.schema) if got.num_rows else got
    norm = [{k: repr(v) for k, v in r.items()} for r in rows_by(got, cols, ["id"])]
    want = [{k: repr(v) for k, v in r.items()} for r in rows_by(expected, cols, ["id"])]
    assert norm == want, what


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_every_type_through_every_write_and_read_path(tmp_path, table_type):
    t = _create(tmp_path, table_type)
    first = t.upsert(_rows([1, 2, 3], 1))
    stored = pa.schema([f for f in t.schema() if not f.name.startswith("_hoodie")])
    # Timestamps of any unit and zone are stored as UTC instants in micros (millis stay millis).
    assert stored.field("ts_ntz").type == stored.field("ts_ns").type == pa.timestamp("us", tz="UTC")
    assert stored.field("ts_ms").type == pa.timestamp("ms", tz="UTC")
    state1 = _rows([1, 2, 3], 1).cast(stored)
    second = t.upsert(_rows([3, 1], 2))  # updates: base file rewrites or log data blocks
    state2 = _upserted(state1, _rows([3, 1], 2).cast(stored))
    t.delete(pa.table({"id": [2]}))  # a delete block on merge-on-read
    state3 = state2.filter(pc.not_equal(state2.column("id"), 2))
    t.upsert(_rows([4, 5, 6], 3))
    state4 = _upserted(state3, _rows([4, 5, 6], 3).cast(stored))

    _assert_same(t.read(), state4, "snapshot")
    _assert_same(pa.Table.from_batches(list(t.read_batches())), state4, "streamed snapshot")
    _assert_same(hudi_rs_read(t.path), state4, "hudi-rs snapshot")
    for instant, state in ((first, state1), (second, state2)):
        _assert_same(t.read(as_of=instant), state, f"as of {instant}")
        _assert_same(hudi_rs_read(t.path, as_of=instant), state, f"hudi-rs as of {instant}")
    changed = _upserted(_rows([3, 1], 2).cast(stored), _rows([4, 5, 6], 3).cast(stored))
    _assert_same(t.read_incremental(start=first), changed, "incremental")
    read_optimized = hudi_rs_read(t.path, read_optimized=True).select(stored.names).cast(stored)
    _assert_same(t.read(query_type="read_optimized"), read_optimized, "read-optimized")
    if table_type == "MERGE_ON_READ":
        t.compact()
        _assert_same(t.read(query_type="read_optimized"), state4, "read-optimized after compaction")
        _assert_same(hudi_rs_read(t.path), state4, "hudi-rs after compaction")
        t.upsert(_rows([5, 7], 4))  # logs over the compacted base file
        state5 = _upserted(state4, _rows([5, 7], 4).cast(stored))
        _assert_same(t.read(), state5, "logs over a compacted base")
        _assert_same(hudi_rs_read(t.path), state5, "hudi-rs logs over a compacted base")


# ---- the Avro schema of log data blocks -----------------------------------------------------------


def test_log_block_schema_follows_the_spark_conventions(tmp_path):
    t = _create(tmp_path, "MERGE_ON_READ")
    t.upsert(_rows([1, 2, 3], 1))
    t.upsert(_rows([1, 2], 2))
    (log,) = [p for p in Path(t.path).iterdir() if ".log." in p.name]
    (block,) = _native.read_log_file(str(log))
    schema = json.loads(block.header["SCHEMA"])
    assert (schema["type"], schema["name"], schema["namespace"]) == ("record", "t_record", "hoodie.t")
    fields = {f["name"]: f for f in schema["fields"]}
    # Hudi's meta fields, as its writers add them (HUDI_FORMAT §5: with an empty doc).
    meta = [f for f in schema["fields"] if f["name"].startswith("_hoodie_")]
    assert [list(f) for f in meta] == [["name", "type", "doc", "default"]] * 5
    assert all(f["type"] == ["null", "string"] and f["doc"] == "" for f in meta)
    for f in schema["fields"]:
        # Every field a nullable union, null first, with a null default.
        assert f["type"][0] == "null" and len(f["type"]) == 2 and f["default"] is None, f["name"]
    types = {name: f["type"][1] for name, f in fields.items()}
    assert types["date"] == {"type": "int", "logicalType": "date"}
    assert types["ts_us"] == types["ts_ntz"] == {"type": "long", "logicalType": "timestamp-micros"}
    assert types["ts_ms"] == {"type": "long", "logicalType": "timestamp-millis"}
    assert types["t_ms"] == {"type": "int", "logicalType": "time-millis"}
    assert types["t_us"] == {"type": "long", "logicalType": "time-micros"}
    assert (types["ls"], types["lbin"], types["i8"]) == ("string", "bytes", "int")
    # Spark's decimal: a fixed named "fixed" in <record>.<field>, of the fewest bytes that hold
    # its precision (9 for 20 digits, 16 for 38).
    for name, size in (("d5_2", 3), ("d18_4", 8), ("d20_0", 9), ("d38_10", 16)):
        assert types[name]["type"] == "fixed" and types[name]["name"] == "fixed", name
        assert (types[name]["namespace"], types[name]["size"]) == (f"hoodie.t.t_record.{name}", size)
    # Nested records are named after their field, in the enclosing record's full name; list
    # items and map values are nullable unions.
    st = types["st"]
    assert (st["name"], st["namespace"]) == ("st", "hoodie.t.t_record")
    inner = st["fields"][1]["type"][1]
    assert (inner["name"], inner["namespace"]) == ("inner", "hoodie.t.t_record.st")
    assert inner["fields"][0]["type"][1]["namespace"] == "hoodie.t.t_record.st.inner.y"
    item = types["lst_of_st"]["items"]
    assert item[0] == "null" and (item[1]["name"], item[1]["namespace"]) == ("lst_of_st", "hoodie.t.t_record")
    assert types["mp"] == {"type": "map", "values": ["null", "long"]}
    # An independent Avro reader decodes the block's records with that schema.
    parsed = fastavro.parse_schema(schema)
    content = block.content()
    count = int.from_bytes(content[4:8], "big")
    pos, records = 8, []
    for _ in range(count):
        size = int.from_bytes(content[pos : pos + 4], "big")
        records.append(fastavro.schemaless_reader(io.BytesIO(content[pos + 4 : pos + 4 + size]), parsed))
        pos += size + 4
    by_id = {r["id"]: r for r in records}
    assert by_id[1]["s"] == "héllo wörld 🎉" and by_id[1]["d20_0"] == D("-10000000000000000000")
    assert by_id[1]["mp_st"] == {"": None} and by_id[2]["st"] is None and by_id[2]["lst_lst"] == [[]]


# ---- delete blocks: ordering values of a timestamp field as Java writes them ------------------------


def _java_style_deletes(tmp_path: Path, unit: str) -> shoal.Table:
    """Four records ordered by a timestamp, then deletes of keys 1 to 3 with an older, a newer
    and an equal ordering value, in a delete block whose ordering values are LongWrappers of the
    field's raw long, as Hudi's Java writer logs them (a timestamp field's value is a Long unless
    consistent logical timestamps are enabled)."""
    typ = pa.timestamp(unit, tz="UTC")
    t = shoal.Table.create(
        str(tmp_path / unit), name="t", table_type="MERGE_ON_READ", record_key="id", ordering_field="ts"
    )
    moments = [dt.datetime(y, 1, 1, tzinfo=UTC) for y in (2020, 2022, 2021)]
    t.upsert(pa.table({"id": [1, 2, 3, 4], "ts": pa.array([moments[2]] * 4, typ), "v": [1, 2, 3, 4]}))
    deleting = pa.array(moments, typ)
    t.upsert(pa.table({"id": [1, 2, 3], "ts": deleting, "v": [0, 0, 0], "_hoodie_is_deleted": [True] * 3}))
    (log,) = [p for p in Path(t.path).iterdir() if ".log." in p.name]
    (block,) = _native.read_log_file(str(log))
    assert block.block_type == "DELETE_BLOCK"
    deletes = block.deletes()
    raw = deleting.cast(pa.int64())
    log.write_bytes(
        _native.encode_delete_block(
            deletes.column("record_key"),
            deletes.column("partition_path"),
            raw,
            block.instant_time,
            header=block.header,
        )
    )
    (rewritten,) = _native.read_log_file(str(log))
    assert rewritten.deletes().column("ordering_value").type_codes.to_pylist() == [3, 3, 3]  # LongWrapper
    return t


@pytest.mark.parametrize("unit", ["us", "ms"])
def test_long_ordering_values_of_deletes_order_against_a_timestamp_field(tmp_path, unit):
    t = _java_style_deletes(tmp_path, unit)
    # Java compares the delete's Long with the record's Long: the older delete of key 1 loses,
    # the newer (key 2) and the equal one (key 3) delete.
    expected = [{"id": 1, "v": 1}, {"id": 4, "v": 4}]
    assert rows_by(hudi_rs_read(t.path), ["id", "v"], ["id"]) == expected
    assert rows_by(t.read(), ["id", "v"], ["id"]) == expected
    t.compact()
    assert rows_by(t.read(), ["id", "v"], ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), ["id", "v"], ["id"]) == expected


# ---- input of another type into an existing column ------------------------------------------------


def _refused(t: shoal.Table, data: pa.Table, match: str) -> None:
    before = file_digests(Path(t.path))
    with pytest.raises(shoal.SchemaMismatchError, match=match):
        t.upsert(data)
    assert file_digests(Path(t.path)) == before


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_narrower_nested_input_is_stored_in_the_table_types(tmp_path, table_type):
    """As an ``int`` column into a ``long`` one, an ``int`` inside a struct, list or map is
    written in the stored ``long``, and the table's schema stays as it was."""
    t = _create(tmp_path, table_type)
    st = pa.struct([("a", pa.int64()), ("f", pa.float64())])
    t.upsert(
        pa.table(
            {
                "id": [1, 2],
                "ts": [1, 1],
                "s": pa.array([{"a": 2**40, "f": 0.5}, None], st),
                "l": pa.array([[2**40], None], pa.list_(pa.int64())),
                "m": pa.array([[("k", 2**40)], []], pa.map_(pa.string(), pa.int64())),
            }
        )
    )
    schema = t.schema()
    narrow = pa.table(
        {
            "id": [2, 3],
            "ts": [2, 2],
            "s": pa.array(
                [{"a": 7, "f": 1.5}, {"a": None, "f": None}],
                pa.struct([("a", pa.int32()), ("f", pa.float32())]),
            ),
            "l": pa.array([[1, None], []], pa.list_(pa.int32())),
            "m": pa.array([None, [("x", 3)]], pa.map_(pa.string(), pa.int32())),
        }
    )
    t.upsert(narrow)
    assert t.schema() == schema
    expected = [
        {"id": 1, "s": {"a": 2**40, "f": 0.5}, "l": [2**40], "m": [("k", 2**40)]},
        {"id": 2, "s": {"a": 7, "f": 1.5}, "l": [1, None], "m": None},
        {"id": 3, "s": {"a": None, "f": None}, "l": [], "m": [("x", 3)]},
    ]
    assert rows_by(t.read(), ["id", "s", "l", "m"], ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), ["id", "s", "l", "m"], ["id"]) == expected
    # Narrowing the stored type, inside a struct or at the top, stays refused.
    wide = pa.table({"id": [4], "ts": [3], "s": pa.array([{"a": 1, "f": 1.0}], st), "l": pa.array([["x"]])})
    _refused(t, wide, "column 'l.element' has type string but the table stores int64")


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_timestamps_in_another_unit_are_stored_in_the_tables(tmp_path, table_type):
    t = _create(tmp_path, table_type)
    second = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    t.upsert(
        pa.table(
            {
                "id": [1],
                "ts": [1],
                "us": pa.array([second], pa.timestamp("us", tz="UTC")),
                "ms": pa.array([second], pa.timestamp("ms", tz="UTC")),
            }
        )
    )
    schema = t.schema()
    # Millis into micros, seconds into millis, micros of whole millis into millis: lossless.
    t.upsert(
        pa.table(
            {
                "id": [2],
                "ts": [2],
                "us": pa.array([second], pa.timestamp("ms", tz="UTC")),
                "ms": pa.array([second], pa.timestamp("s")),
            }
        )
    )
    t.upsert(
        pa.table(
            {
                "id": [3],
                "ts": [3],
                "us": pa.array([second], pa.timestamp("s", tz="UTC")),
                "ms": pa.array([second], pa.timestamp("us", tz="UTC")),
            }
        )
    )
    assert t.schema() == schema
    expected = [{"id": i, "us": second, "ms": second} for i in (1, 2, 3)]
    assert rows_by(t.read(), ["id", "us", "ms"], ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), ["id", "us", "ms"], ["id"]) == expected
    # Micros a millis column cannot hold are refused, not truncated.
    finer = pa.array([second + dt.timedelta(microseconds=1)], pa.timestamp("us", tz="UTC"))
    _refused(t, pa.table({"id": [4], "ts": [4], "us": finer, "ms": finer}), "'ms'")


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_batch_whose_column_is_all_null_keeps_the_columns_type(tmp_path, table_type):
    """A batch in which an optional column happens to hold no value (pandas and pyarrow type it
    null) writes nulls of the stored type, and never changes it."""
    pd = pytest.importorskip("pandas")
    t = _create(tmp_path, table_type)
    t.upsert(
        pa.table(
            {
                "id": [1],
                "ts": [1],
                "n": [5],
                "s": pa.array([{"a": 1}]),
                "l": pa.array([[1.5]]),
                "d": [D("1.25")],
            }
        )
    )
    schema = t.schema()
    t.upsert(
        pd.DataFrame(
            {
                "id": [2, 3],
                "ts": [2, 2],
                "n": [None, None],
                "s": [None, None],
                "l": [None, None],
                "d": [None, None],
            }
        )
    )
    t.upsert(
        pa.table(
            {"id": [4], "ts": [3], "n": pa.array([None], pa.float64()), "s": [None], "l": [None], "d": [None]}
        )
    )
    assert t.schema() == schema
    expected = [{"id": 1, "n": 5, "s": {"a": 1}, "l": [1.5], "d": D("1.25")}] + [
        {"id": i, "n": None, "s": None, "l": None, "d": None} for i in (2, 3, 4)
    ]
    columns = ["id", "n", "s", "l", "d"]
    assert rows_by(t.read(), columns, ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), columns, ["id"]) == expected
    # A value of another type in the column is still a mismatch.
    _refused(t, pa.table({"id": [5], "ts": [4], "n": ["x"], "s": [None], "l": [None], "d": [None]}), "'n'")


# ---- table names that are no Avro names -----------------------------------------------------------


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize(
    ("name", "sanitized"), [("user-events", "user__events"), ("2024trips", "__024trips")]
)
def test_a_table_name_that_is_no_avro_name_is_sanitized_as_hudi_does(tmp_path, table_type, name, sanitized):
    t = shoal.Table.create(
        str(tmp_path / "t"), name=name, table_type=table_type, record_key="id", ordering_field="ts"
    )
    t.upsert(
        pa.table(
            {
                "id": [1, 2],
                "ts": [1, 1],
                "s": pa.array([{"d": D("1.5")}, None], pa.struct([("d", pa.decimal128(5, 1))])),
            }
        )
    )
    t.upsert(
        pa.table(
            {"id": [2], "ts": [2], "s": pa.array([{"d": D("2.5")}], pa.struct([("d", pa.decimal128(5, 1))]))}
        )
    )
    # Hudi's writer names the record after the table name with each character an Avro name
    # cannot hold masked as "__" (HoodieAvroUtils.sanitizeName).
    commit = max(p for p in (Path(t.path) / ".hoodie").iterdir() if p.suffix in (".commit", ".deltacommit"))
    schema = json.loads(json.loads(commit.read_text())["extraMetadata"]["schema"])
    assert (schema["name"], schema["namespace"]) == (f"{sanitized}_record", f"hoodie.{sanitized}")
    assert schema["fields"][2]["type"][1]["namespace"] == f"hoodie.{sanitized}.{sanitized}_record"
    expected = [{"id": 1, "s": {"d": D("1.5")}}, {"id": 2, "s": {"d": D("2.5")}}]
    assert rows_by(t.read(), ["id", "s"], ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), ["id", "s"], ["id"]) == expected


# ---- what a read's schema carries -----------------------------------------------------------------


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_reads_carry_no_base_file_footer_as_schema_metadata(tmp_path, table_type):
    """A base file's footer (its bloom filter, key range and the Avro schema it was written in,
    here an older one with ``a`` an ``int``) describes that file, not the table a read returns:
    hudi-rs and read_batches return no schema metadata, and neither do the other reads."""
    t = _create(tmp_path, table_type)
    first = t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "a": pa.array([1, 2], pa.int32())}))
    t.upsert(pa.table({"id": [3], "ts": [2], "a": pa.array([2**40], pa.int64())}))
    assert hudi_rs_read(t.path).schema.metadata is None
    assert t.read_batches().schema.metadata is None
    reads = {
        "snapshot": t.read(),
        "columns": t.read(columns=["id", "a"]),
        "read_optimized": t.read(query_type="read_optimized"),
        "time travel": t.read(as_of=first),
        "incremental": t.read_incremental(),
        "incremental with deletes": t.read_incremental(include_deletes=True),
    }
    for what, got in reads.items():
        assert got.schema.field("a").type == pa.int64(), what
        assert got.schema.metadata is None, what


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_decimals_with_fewer_digits_are_stored_in_the_tables_decimal(tmp_path, table_type):
    """A Spark frame of ``decimal(37,10)`` values (as Spark infers them from Python decimals)
    or any decimal with no more digits on either side of the point is written in the table's
    ``decimal(38,10)``; the table's schema stays as it was. More digits stay refused."""
    t = _create(tmp_path, table_type)
    stored = pa.decimal128(38, 10)
    t.upsert(pa.table({"id": [1], "ts": [1], "d": pa.array([decimal.Decimal("1.5")], stored)}))
    schema = t.schema()
    t.upsert(
        pa.table(
            {"id": [2], "ts": [1], "d": pa.array([decimal.Decimal("2" * 27 + ".25")], pa.decimal128(37, 10))}
        )
    )
    t.upsert(
        pa.table({"id": [3], "ts": [1], "d": pa.array([decimal.Decimal("-3.12345")], pa.decimal128(20, 5))})
    )
    assert t.schema() == schema
    expected = [
        {"id": 1, "d": decimal.Decimal("1.5000000000")},
        {"id": 2, "d": decimal.Decimal("2" * 27 + ".2500000000")},
        {"id": 3, "d": decimal.Decimal("-3.1234500000")},
    ]
    assert rows_by(t.read(), ["id", "d"], ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), ["id", "d"], ["id"]) == expected
    _refused(
        t,
        pa.table({"id": [4], "ts": [1], "d": pa.array([decimal.Decimal("1.5")], pa.decimal128(38, 12))}),
        "decimal",
    )
