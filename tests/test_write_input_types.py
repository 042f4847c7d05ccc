"""What a write accepts as input, and how its column types are stored: a pandas frame's index is
not data, types that were accepted once are accepted again, and input shoal cannot write (repeated
column names, Arrow types with no Avro mapping) is refused with a typed error before the table
changes."""

from __future__ import annotations

import decimal
import re
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import shoal
from shoal import _native
from shoal.write.input import _is_pandas_frame, to_arrow_table
from shoal.write.schema import normalize_types, unsupported_reason
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import file_digests

TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


def _create(tmp_path: Path, table_type: str) -> shoal.Table:
    return shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type=table_type, record_key="id", ordering_field="ts"
    )


def _data_columns(table: pa.Table) -> list[str]:
    return [c for c in table.column_names if not c.startswith("_hoodie")]


def _assert_rows(t: shoal.Table, expected: list[dict]) -> None:
    """shoal and hudi-rs both read exactly ``expected`` (rows with an ``id``)."""
    columns = list(expected[0])
    assert rows_by(t.read(), columns, ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), columns, ["id"]) == expected


def _refused(t: shoal.Table, data: object, error: type[Exception], match: str) -> None:
    """Writing ``data`` raises ``error`` and leaves every file of the table as it was."""
    before = file_digests(Path(t.path))
    with pytest.raises(error, match=match):
        t.upsert(data)
    assert file_digests(Path(t.path)) == before
    assert not [i for i in t.instants() if i.state.name != "COMPLETED"]


# ---- pandas and other frames --------------------------------------------------------------------


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_pandas_index_is_not_written(tmp_path, table_type):
    t = _create(tmp_path, table_type)
    df = pd.DataFrame({"id": [1, 2, 3], "ts": [1, 1, 1], "v": [5, -1, 7]})
    filtered = df[df.v > 0]  # index [0, 2]: not a RangeIndex
    t.upsert(filtered)
    assert _data_columns(t.read()) == ["id", "ts", "v"]
    assert t.schema().names[-3:] == ["id", "ts", "v"]
    # A later frame with a default index has the same columns, so it is no schema change.
    t.upsert(pd.DataFrame({"id": [4], "ts": [1], "v": [9]}))
    t.upsert(pd.DataFrame({"id": [1], "ts": [2], "v": [6]}, index=pd.Index([10], name="named")))
    assert _data_columns(t.read()) == ["id", "ts", "v"]
    _assert_rows(t, [{"id": 1, "ts": 2, "v": 6}, {"id": 3, "ts": 1, "v": 7}, {"id": 4, "ts": 1, "v": 9}])


def test_pandas_conversion_errors_are_typed():
    with pytest.raises(shoal.InvalidArgumentError, match="pandas"):
        to_arrow_table(pd.DataFrame({"id": [1, 2], "v": [1, "x"]}))
    frame = pd.DataFrame([[1, 2.0, 3.0]], columns=["id", "v", "v"])
    with pytest.raises(shoal.InvalidArgumentError):
        to_arrow_table(frame)


def test_pandas_is_looked_up_not_imported(monkeypatch):
    # Without pandas loaded, nothing can be a pandas frame, and the check must not load it.
    monkeypatch.delitem(sys.modules, "pandas")
    assert not _is_pandas_frame(pa.table({"a": [1]}))
    assert "pandas" not in sys.modules


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_polars_and_arrow_streams_are_written_as_they_are(tmp_path, table_type):
    pl = pytest.importorskip("polars")
    t = _create(tmp_path, table_type)
    t.upsert(pl.DataFrame({"id": [2, 1], "ts": [1, 1], "v": ["b", "a"]}))

    class Stream:
        """Any producer of the Arrow C stream interface, without an index."""

        def __arrow_c_stream__(self, requested_schema: object = None) -> object:
            return pa.table({"id": [3], "ts": [1], "v": ["c"]}).__arrow_c_stream__(requested_schema)

    t.upsert(Stream())
    assert _data_columns(t.read()) == ["id", "ts", "v"]
    _assert_rows(
        t, [{"id": 1, "ts": 1, "v": "a"}, {"id": 2, "ts": 1, "v": "b"}, {"id": 3, "ts": 1, "v": "c"}]
    )


# ---- types accepted once are accepted again -------------------------------------------------------

UNSIGNED = [
    (pa.uint8(), pa.int32(), [255, 7], [0, 8]),
    (pa.uint16(), pa.int32(), [65535, 7], [0, 8]),
    (pa.uint32(), pa.int64(), [4294967295, 7], [0, 8]),
    (pa.int8(), pa.int32(), [-128, 7], [127, 8]),
    (
        pa.struct([("u", pa.uint8())]),
        pa.struct([("u", pa.int32())]),
        [{"u": 255}, {"u": 1}],
        [{"u": 2}, None],
    ),
    (pa.list_(pa.uint16()), pa.list_(pa.int32()), [[65535], []], [[1, 2], None]),
    (
        pa.map_(pa.string(), pa.uint32()),
        pa.map_(pa.string(), pa.int64()),
        [[("k", 4294967295)], []],
        [[], None],
    ),
]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize(("typ", "stored", "first", "second"), UNSIGNED, ids=[str(u[0]) for u in UNSIGNED])
def test_unsigned_columns_are_accepted_again(tmp_path, table_type, typ, stored, first, second):
    t = _create(tmp_path, table_type)
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "u": pa.array(first, typ)}))
    assert t.schema().field("u").type == stored
    # The same input schema again: an update and an insert.
    t.upsert(pa.table({"id": [1, 3], "ts": [2, 2], "u": pa.array(second, typ)}))
    assert t.schema().field("u").type == stored
    _assert_rows(t, [{"id": 1, "u": second[0]}, {"id": 2, "u": first[1]}, {"id": 3, "u": second[1]}])


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_unsigned_input_into_a_signed_column(tmp_path, table_type):
    t = _create(tmp_path, table_type)
    t.upsert(
        pa.table({"id": [1], "ts": [1], "a": pa.array([-1], pa.int64()), "b": pa.array([-1], pa.int32())})
    )
    t.upsert(
        pa.table(
            {
                "id": [2],
                "ts": [1],
                "a": pa.array([4294967295], pa.uint32()),
                "b": pa.array([65535], pa.uint16()),
            }
        )
    )
    assert t.schema().field("a").type == pa.int64()
    assert t.schema().field("b").type == pa.int32()
    _assert_rows(t, [{"id": 1, "a": -1, "b": -1}, {"id": 2, "a": 4294967295, "b": 65535}])


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize("later", [False, True], ids=["first_write", "later_write"])
def test_uint64_is_still_unsupported(tmp_path, table_type, later):
    t = _create(tmp_path, table_type)
    if later:
        t.upsert(pa.table({"id": [1], "ts": [1], "u": pa.array([1], pa.int64())}))
    _refused(
        t, pa.table({"id": [2], "ts": [1], "u": pa.array([1], pa.uint64())}), shoal.UnsupportedError, "'u'"
    )


# ---- views and other layouts stored as plain types ------------------------------------------------

VIEWS = {
    "string_view": pa.array(["a", None, "c"], pa.string_view()),
    "binary_view": pa.array([b"a", b"", None], pa.binary_view()),
    "list_view": pa.array([[1, 2], None, []], pa.list_view(pa.int64())),
    "large_list_view": pa.array([[1], [], None], pa.large_list_view(pa.int64())),
    "list_of_list_view": pa.array([[[1], None], None, [[2, 3]]], pa.list_(pa.list_view(pa.int64()))),
    "struct_of_list_view": pa.array(
        [{"l": [1, 2], "s": "x"}, None, {"l": None, "s": None}],
        pa.struct([("l", pa.large_list_view(pa.int32())), ("s", pa.string_view())]),
    ),
    "map_of_list_view": pa.array(
        [[("k", [1, 2])], None, [("a", None), ("b", [3])]],
        pa.map_(pa.large_string(), pa.list_view(pa.int64())),
    ),
    "map_of_large_string": pa.array([[("k", "v")], [], None], pa.map_(pa.large_string(), pa.large_string())),
    "dictionary": pa.array(["x", None, "x"]).dictionary_encode(),
}


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize("name", list(VIEWS))
def test_views_are_stored_as_plain_types(tmp_path, table_type, name):
    col = VIEWS[name]
    # Sliced too: the rows a view shows start at its offset.
    sliced = pa.concat_arrays([col, col]).slice(2, 3)
    t = _create(tmp_path, table_type)
    t.upsert(pa.table({"id": [1, 2, 3], "ts": [1, 1, 1], "x": col}))
    t.upsert(pa.table({"id": [3, 4, 5], "ts": [2, 2, 2], "x": sliced}))
    stored = t.schema().field("x").type
    assert stored == normalize_types(pa.table({"x": col})).schema.field("x").type
    # Ids 1 and 2 from the first write, 3 to 5 (3 updated) from the second.
    values = col.to_pylist()[:2] + sliced.to_pylist()
    _assert_rows(t, [{"id": i + 1, "x": v} for i, v in enumerate(values)])


# ---- repeated column names --------------------------------------------------------------------------


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize("later", [False, True], ids=["first_write", "later_write"])
def test_repeated_column_names_are_invalid(tmp_path, table_type, later):
    t = _create(tmp_path, table_type)
    if later:
        t.upsert(pa.table({"id": [1], "ts": [1], "v": [1.0]}))
    bad = pa.Table.from_arrays(
        [pa.array([1]), pa.array([1]), pa.array([1.0]), pa.array([2.0])], names=["id", "ts", "v", "v"]
    )
    _refused(t, bad, shoal.InvalidArgumentError, "two columns named 'v'")
    nested = pa.table(
        {
            "id": [1],
            "ts": [1],
            "s": pa.StructArray.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"]),
        }
    )
    _refused(t, nested, shoal.InvalidArgumentError, "'s' has two fields named 'a'")
    frame = pd.DataFrame([[1, 1, 2.0, 3.0]], columns=["id", "ts", "v", "v"])
    _refused(t, frame, shoal.InvalidArgumentError, "Duplicate column names")
    with pytest.raises(shoal.InvalidArgumentError, match="two columns named 'v'"):
        t.delete(bad)


# ---- types shoal cannot write -------------------------------------------------------------------------

_UNION = pa.UnionArray.from_sparse(pa.array([0, 1], pa.int8()), [pa.array([1, 2]), pa.array(["a", "b"])])
UNWRITABLE = {
    "sparse_union": _UNION,
    "dense_union": pa.UnionArray.from_dense(
        pa.array([0, 1], pa.int8()), pa.array([0, 0], pa.int32()), [pa.array([1]), pa.array(["a"])]
    ),
    "month_day_nano_interval": pa.array([pa.MonthDayNano([1, 2, 3])] * 2, pa.month_day_nano_interval()),
    "run_end_encoded": pa.RunEndEncodedArray.from_arrays(pa.array([2], pa.int32()), pa.array([5])),
    "fixed_size_list": pa.array([[1, 2], [3, 4]], pa.list_(pa.int64(), 2)),
    "dictionary_of_float16": pa.DictionaryArray.from_arrays(
        pa.array([0, 0], pa.int32()), pa.array([1.0], pa.float16())
    ),
    "uuid_extension": pa.ExtensionArray.from_storage(pa.uuid(), pa.array([b"0" * 16] * 2, pa.binary(16))),
    "json_extension": pa.ExtensionArray.from_storage(pa.json_(), pa.array(["{}", "[]"])),
    "struct_of_union": pa.StructArray.from_arrays([_UNION], names=["u"]),
    "list_of_interval": pa.array([[pa.MonthDayNano([1, 2, 3])], []], pa.list_(pa.month_day_nano_interval())),
    "map_of_interval": pa.array(
        [[("k", pa.MonthDayNano([1, 2, 3]))], []], pa.map_(pa.string(), pa.month_day_nano_interval())
    ),
    "map_with_int_keys": pa.array([[(1, "a")], []], pa.map_(pa.int32(), pa.string())),
    "float16": pa.array([1.0, 2.0], pa.float16()),
    "duration": pa.array([1, 2], pa.duration("s")),
    "time32_seconds": pa.array([1, 2], pa.time32("s")),
    "decimal256": pa.array([decimal.Decimal("1.5")] * 2, pa.decimal256(10, 1)),
    "fixed_size_binary": pa.array([b"ab", b"cd"], pa.binary(2)),
}


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize("later", [False, True], ids=["first_write", "later_write"])
@pytest.mark.parametrize("name", list(UNWRITABLE))
def test_unwritable_types_are_unsupported(tmp_path, table_type, later, name):
    col = UNWRITABLE[name]
    t = _create(tmp_path, table_type)
    if later:
        t.upsert(pa.table({"id": [1], "ts": [1]}))
    # The message names the column and its type.
    match = re.escape(f"column 'x' has type {col.type}")
    _refused(t, pa.table({"id": [1, 2], "ts": [2, 2], "x": col}), shoal.UnsupportedError, match)
    if later:
        # A delete only reads the key columns: a column it would not write does not matter.
        t.delete(pa.table({"id": [1, 2], "ts": [3, 3], "x": col}))
        assert t.read().num_rows == 0


def test_invalid_avro_name_is_refused_before_the_write(tmp_path):
    t = _create(tmp_path, "MERGE_ON_READ")
    t.upsert(pa.table({"id": [1], "ts": [1]}))
    _refused(t, pa.table({"id": [1], "ts": [2], "a-b": [1]}), shoal.InvalidArgumentError, "a-b")


@pytest.mark.parametrize(
    "typ",
    [
        pa.bool_(),
        pa.int8(),
        pa.int64(),
        pa.uint32(),
        pa.uint64(),
        pa.float16(),
        pa.float64(),
        pa.string(),
        pa.binary(),
        pa.binary(4),
        pa.date32(),
        pa.time32("s"),
        pa.time32("ms"),
        pa.time64("us"),
        pa.time64("ns"),
        pa.timestamp("us", tz="UTC"),
        pa.timestamp("ms", tz="UTC"),
        pa.timestamp("ns", tz="UTC"),
        pa.duration("us"),
        pa.decimal128(38, 2),
        pa.decimal128(5, -1),
        pa.decimal256(10, 2),
        pa.list_(pa.int32()),
        pa.large_list(pa.float16()),
        pa.list_(pa.int32(), 2),
        pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))]),
        pa.struct([("a", pa.duration("s"))]),
        pa.map_(pa.string(), pa.int64()),
        pa.map_(pa.int32(), pa.int64()),
        pa.map_(pa.string(), pa.binary(3)),
        pa.month_day_nano_interval(),
    ],
    ids=str,
)
def test_unsupported_reason_agrees_with_the_avro_mapping(typ):
    """The up-front check refuses exactly what the Avro mapping a write task uses refuses."""
    schema = pa.schema([pa.field("x", typ)])
    try:
        _native.arrow_to_avro_schema(schema, "r", "")
        mapped = True
    except shoal.UnsupportedError:
        mapped = False
    # Unsigned types are cast to signed ones before the check, so they only need to map.
    if not (pa.types.is_unsigned_integer(typ) and mapped):
        assert (unsupported_reason(typ) is None) == mapped
