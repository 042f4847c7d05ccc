"""Partition pruning of filtered reads: a partition is skipped only when the values its path stands
for provably fail the filters. Paths hold URL-encoded values, ``__HIVE_DEFAULT_PARTITION__`` for
null and empty ones, or a timestamp-based key generator's formatted dates; none of these may make a
filtered read lose rows. Every filtered read is compared with hudi-rs's full read of the table,
filtered in Python, and the reads that can prune are checked to still skip partitions."""

from __future__ import annotations

import datetime as dt
import decimal
import operator
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import shoal
import shoal.read.incremental as incremental_module
import shoal.table as table_module
from shoal.config.table_config import TableConfig
from shoal.read.pruning import PartitionLayout, prune_partitions, split_partition_path, unescape_path_name
from tests.hudi_oracle import hudi_rs_read

TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
URLENCODE = "hoodie.datasource.write.partitionpath.urlencode"
HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _passes(row: dict[str, Any], filters: Sequence[tuple[str, str, Any]]) -> bool:
    """SQL semantics, as the row filters have them: a comparison with null is not true."""
    for col, op, value in filters:
        v = row[col]
        if v is None:
            return False
        if op == "in":
            ok = v in value
        elif op == "not in":
            ok = v not in value
        else:
            ok = _COMPARE[op](v, value)
        if not ok:
            return False
    return True


def _expected_ids(path: str, filters: Sequence[tuple[str, str, Any]]) -> list[int]:
    """The ids hudi-rs's full read of the table holds that pass ``filters``."""
    return sorted(r["id"] for r in hudi_rs_read(path).to_pylist() if _passes(r, filters))


class _ReadSpy:
    """Records the partitions whose file slices a snapshot read opens."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.partitions: set[str] = set()
        real_base, real_mor = table_module.read_base_slice, table_module.read_mor_slice

        def base(spec: Any, storage: Any = None) -> pa.Table:
            self.partitions.add(spec.partition_path)
            return real_base(spec, storage)

        def mor(spec: Any, storage: Any = None) -> pa.Table:
            self.partitions.add(spec.partition_path)
            return real_mor(spec, storage)

        monkeypatch.setattr(table_module, "read_base_slice", base)
        monkeypatch.setattr(table_module, "read_mor_slice", mor)


def _write(
    path: Path, table_type: str, data: pa.Table, partition_by: str | list[str], **create: Any
) -> shoal.Table:
    """A table with ``data`` written twice (the second time as an update of every row, so that a
    merge-on-read table has log files to merge)."""
    t = shoal.Table.create(
        str(path), name="t", table_type=table_type, record_key="id", partition_by=partition_by,
        ordering_field="ts", **create,
    )  # fmt: skip
    t.upsert(data)
    t.upsert(data.set_column(data.schema.get_field_index("ts"), "ts", pa.array([2] * data.num_rows)))
    if table_type == "MERGE_ON_READ":
        assert any(s.log_files for s in t.file_slices()), "the update should have written log files"
    return t


def _check(t: shoal.Table, filters: list[tuple[str, str, Any]]) -> list[int]:
    ids = sorted(t.read(filters=filters)["id"].to_pylist())
    assert ids == _expected_ids(t.path, filters), filters
    return ids


# ---- (a) URL-encoded partition values ------------------------------------------------------------

_ENCODED_VALUES = ["a/b", "x=y", "c:d", "50%", "plain", "%41", "q?#"]


@pytest.mark.parametrize("hive_style", [False, True])
@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_url_encoded_partition_values_are_decoded(tmp_path, table_type, hive_style, monkeypatch):
    data = pa.table(
        {"id": range(len(_ENCODED_VALUES)), "p": _ENCODED_VALUES, "ts": [1] * len(_ENCODED_VALUES)}
    )
    options = {URLENCODE: "true", HIVE_STYLE: str(hive_style).lower()}
    t = _write(tmp_path / "t", table_type, data, "p", options=options)
    prefix = "p=" if hive_style else ""
    assert f"{prefix}a%2Fb" in {s.partition_path for s in t.file_slices()}
    for i, value in enumerate(_ENCODED_VALUES):
        assert _check(t, [("p", "=", value)]) == [i]
    assert _check(t, [("p", "in", ["a/b", "c:d", "nowhere"])]) == [0, 2]
    assert _check(t, [("p", "!=", "x=y")]) == [0, 2, 3, 4, 5, 6]
    _check(t, [("p", ">=", "c"), ("p", "<", "q")])
    _check(t, [("p", "not in", ["a/b", "%41"])])

    spy = _ReadSpy(monkeypatch)
    assert sorted(t.read(filters=[("p", "=", "a/b")])["id"].to_pylist()) == [0]
    assert spy.partitions == {f"{prefix}a%2Fb"}, "the other partitions must be pruned"


# ---- (b) null and empty values: the default partition --------------------------------------------


@pytest.mark.parametrize("hive_style", [False, True])
@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_null_and_empty_partition_values(tmp_path, table_type, hive_style, monkeypatch):
    values = ["", None, "z", "__HIVE_DEFAULT_PARTITION__", "default", "a"]
    data = pa.table({"id": range(len(values)), "p": pa.array(values, pa.string()), "ts": [1] * len(values)})
    t = _write(tmp_path / "t", table_type, data, "p", options={HIVE_STYLE: str(hive_style).lower()})
    prefix = "p=" if hive_style else ""
    default = f"{prefix}__HIVE_DEFAULT_PARTITION__"
    assert default in {s.partition_path for s in t.file_slices()}
    assert _check(t, [("p", "=", "")]) == [0]
    assert _check(t, [("p", "=", "__HIVE_DEFAULT_PARTITION__")]) == [3]
    assert _check(t, [("p", "=", "default")]) == [4]
    assert _check(t, [("p", "in", ["", "z"])]) == [0, 2]
    assert _check(t, [("p", "!=", "z")]) == [0, 3, 4, 5]
    assert _check(t, [("p", "<", "b")]) == [0, 3, 5]
    assert _check(t, [("p", ">", "")]) == [2, 3, 4, 5]

    spy = _ReadSpy(monkeypatch)
    assert t.read(filters=[("p", "=", "z")])["id"].to_pylist() == [2]
    assert spy.partitions == {f"{prefix}z"}, "the default partition cannot hold 'z'"
    spy.partitions.clear()
    assert t.read(filters=[("p", "=", "")])["id"].to_pylist() == [0]
    # Hudi before 0.12 wrote null and empty values to "default": that partition may hold them too.
    assert spy.partitions == {default, f"{prefix}default"}


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_null_values_of_a_typed_partition_column(tmp_path, table_type, monkeypatch):
    data = pa.table({"id": range(4), "n": pa.array([None, 1, 2, None], pa.int32()), "ts": [1] * 4})
    t = _write(tmp_path / "t", table_type, data, "n")
    assert _check(t, [("n", "=", 1)]) == [1]
    assert _check(t, [("n", "!=", 1)]) == [2]
    assert _check(t, [("n", "<", 5)]) == [1, 2]
    spy = _ReadSpy(monkeypatch)
    t.read(filters=[("n", ">", 1)])
    assert spy.partitions == {"2"}


# ---- (c) key generators whose paths do not hold the column's value --------------------------------

_TIMESTAMP_OPTIONS = {
    "hoodie.keygen.timebased.timestamp.type": "DATE_STRING",
    "hoodie.keygen.timebased.input.dateformat": "yyyy-MM-dd HH:mm:ss",
    "hoodie.keygen.timebased.output.dateformat": "yyyyMMdd",
}


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_timestamp_key_generator_partitions_are_not_pruned(tmp_path, table_type):
    stamps = ["2020-01-01 10:00:00", "2020-01-01 11:00:00", "2020-01-02 00:00:00", "2020-01-03 08:30:00"]
    data = pa.table({"id": range(4), "d": stamps, "ts": [1] * 4})
    t = _write(tmp_path / "t", table_type, data, "d", key_generator="TIMESTAMP", options=_TIMESTAMP_OPTIONS)
    assert {s.partition_path for s in t.file_slices()} == {"20200101", "20200102", "20200103"}
    assert _check(t, [("d", "=", "2020-01-01 10:00:00")]) == [0]
    assert _check(t, [("d", "<", "2020-01-02")]) == [0, 1]
    assert _check(t, [("d", "in", ["2020-01-03 08:30:00", "20200101"])]) == [3]
    assert _check(t, [("d", "=", "20200102")]) == []


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_incremental_reads_do_not_prune_timestamp_partitions(tmp_path, table_type):
    stamps = ["2020-01-01 10:00:00", "2020-01-02 00:00:00"]
    data = pa.table({"id": range(2), "d": stamps, "ts": [1] * 2})
    t = _write(tmp_path / "t", table_type, data, "d", key_generator="TIMESTAMP", options=_TIMESTAMP_OPTIONS)
    out = t.read_incremental(filters=[("d", "=", "2020-01-01 10:00:00")])
    assert sorted(out["id"].to_pylist()) == [0]
    out = t.read_incremental(filters=[("d", ">=", "2020-01-02")])
    assert sorted(out["id"].to_pylist()) == [1]


def _config(**props: str) -> TableConfig:
    base = {"hoodie.table.name": "t", "hoodie.table.recordkey.fields": "id"}
    return TableConfig({**base, **props})


def test_custom_key_generator_prunes_its_simple_parts_only():
    config = _config(
        **{
            "hoodie.table.version": "8",
            "hoodie.table.keygenerator.type": "CUSTOM",
            "hoodie.table.partition.fields": "region:SIMPLE,d:TIMESTAMP",
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.keygen.timebased.output.dateformat": "yyyyMMdd",
        }
    )
    layout = PartitionLayout.of_table(config)
    assert layout.fields == ("region", "d") and layout.value_fields == frozenset({"region"})
    schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("d", pa.int64())])
    paths = ["eu/20200101", "us/20200101", "eu/20200102"]
    fields, hive = config.partition_fields, config.hive_style_partitioning

    def prune(filters: list[tuple[str, str, Any]]) -> list[str]:
        return prune_partitions(paths, filters, fields, hive, schema, config=config)

    assert prune([("region", "=", "eu")]) == ["eu/20200101", "eu/20200102"]
    # 20200101 is the formatted date, not the epoch millis the column holds: never pruned on.
    assert prune([("d", "=", 20200101)]) == paths
    assert prune([("d", "=", 1577836800000), ("region", "=", "us")]) == ["us/20200101"]


@pytest.mark.parametrize(
    "props",
    [
        {"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator"},
        {"hoodie.table.keygenerator.class": "com.example.MyKeyGenerator"},
        # A version 6 custom table keeps no part types: which parts are formatted is not known.
        {"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator"},
    ],
)
def test_key_generators_shoal_cannot_invert_prune_nothing(props):
    config = _config(**{"hoodie.table.partition.fields": "p", **props})
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    pruned = prune_partitions(["a", "b"], [("p", "=", "a")], ["p"], False, schema, config=config)
    assert pruned == ["a", "b"]


# ---- multiple partition fields, ambiguous and typed paths -----------------------------------------


@pytest.mark.parametrize("urlencode", [False, True])
@pytest.mark.parametrize("hive_style", [False, True])
@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_several_partition_fields(tmp_path, table_type, hive_style, urlencode, monkeypatch):
    # Without URL encoding, "x/y" in a makes a path of three segments for two fields.
    a = pa.array([1, 1, 2, 2, 3, None], pa.int32())
    b = ["u", "x/y", "u", "", "v=w", "u"]
    data = pa.table({"id": range(6), "a": a, "b": b, "ts": [1] * 6})
    options = {HIVE_STYLE: str(hive_style).lower(), URLENCODE: str(urlencode).lower()}
    t = _write(tmp_path / "t", table_type, data, ["a", "b"], options=options)
    assert _check(t, [("a", "=", 1)]) == [0, 1]
    assert _check(t, [("b", "=", "u")]) == [0, 2, 5]
    assert _check(t, [("b", "=", "x/y")]) == [1]
    assert _check(t, [("a", "=", 1), ("b", "=", "x/y")]) == [1]
    assert _check(t, [("a", ">=", 2), ("b", "in", ["", "v=w"])]) == [3, 4]
    assert _check(t, [("b", "=", "")]) == [3]
    assert _check(t, [("b", "=", "v=w")]) == [4]

    spy = _ReadSpy(monkeypatch)
    assert sorted(t.read(filters=[("a", "=", 2), ("b", "=", "u")])["id"].to_pylist()) == [2]
    wanted = "a=2/b=u" if hive_style else "2/u"
    # Without URL encoding, the path of ("1", "x/y") has more segments than there are fields: which
    # value is whose is not known, so that partition is read too.
    ambiguous = set() if urlencode else {"a=1/b=x/y" if hive_style else "1/x/y"}
    assert spy.partitions == {wanted} | ambiguous


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_typed_partition_columns(tmp_path, table_type, monkeypatch):
    days = [dt.date(2020, 1, 1), dt.date(2020, 1, 2), dt.date(2021, 6, 30)]
    data = pa.table(
        {
            "id": range(3),
            "day": pa.array(days, pa.date32()),
            "flag": [True, False, True],
            "amount": pa.array([decimal.Decimal(v) for v in ("1.50", "-2.00", "10.25")], pa.decimal128(6, 2)),
            "big": pa.array([-5, 7, 2**40], pa.int64()),
            "ts": [1] * 3,
        }
    )  # fmt: skip
    for field in ("day", "flag", "amount", "big"):
        t = _write(tmp_path / field, table_type, data, field)
        values = data[field].to_pylist()
        for v in values:
            assert _check(t, [(field, "=", v)]) == [i for i, x in enumerate(values) if x == v]
        if field != "flag":
            lo = sorted(values)[1]
            assert _check(t, [(field, ">=", lo)]) == [i for i, x in enumerate(values) if x >= lo]
            assert _check(t, [(field, "<", lo)]) == [i for i, x in enumerate(values) if x < lo]
        spy = _ReadSpy(monkeypatch)
        target = values[2]
        ids = sorted(t.read(filters=[(field, "=", target)])["id"].to_pylist())
        assert ids == [i for i, x in enumerate(values) if x == target]
        assert spy.partitions == {t.keygen.partition_paths(data.slice(2, 1))[0].as_py()}, field
        monkeypatch.undo()


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_pruning_skips_partitions_that_cannot_match(tmp_path, table_type, monkeypatch):
    cities = ["sf", "nyc", "chennai"]
    data = pa.table({"id": range(30), "city": [cities[i % 3] for i in range(30)], "ts": [1] * 30})
    t = _write(tmp_path / "t", table_type, data, "city")
    spy = _ReadSpy(monkeypatch)
    assert _check(t, [("city", "=", "sf"), ("id", ">=", 10)]) == [i for i in range(10, 30) if i % 3 == 0]
    assert spy.partitions == {"sf"}
    spy.partitions.clear()
    assert _check(t, [("city", "in", ["nyc", "chennai"]), ("id", "<", 5)]) == [1, 2, 4]
    assert spy.partitions == {"nyc", "chennai"}
    spy.partitions.clear()
    assert _check(t, [("city", ">", "sf")]) == []
    assert spy.partitions == set()

    # Incremental reads prune the partitions their commits touched in the same way.
    kept: list[list[str]] = []
    real = incremental_module.prune_partitions

    def recording(*args: Any, **kwargs: Any) -> list[str]:
        out = real(*args, **kwargs)
        kept.append(out)
        return out

    monkeypatch.setattr(incremental_module, "prune_partitions", recording)
    out = t.read_incremental(filters=[("city", "=", "nyc")])
    assert sorted(out["id"].to_pylist()) == [i for i in range(30) if i % 3 == 1]
    assert kept == [["nyc"]]


# ---- the pieces --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fields", "hive", "expected"),
    [
        ("a/b", ["x", "y"], False, {"x": "a", "y": "b"}),
        ("a/b/c", ["x", "y"], False, None),
        ("a", ["x", "y"], False, None),
        ("x=a/y=b=c", ["x", "y"], True, {"x": "a", "y": "b=c"}),
        ("y=b/x=a", ["x", "y"], True, None),
        ("x=a/b", ["x"], True, None),
        ("x=a/x=b", ["x"], True, None),
        ("a", ["x"], True, None),
        ("", [], False, {}),
    ],
)
def test_split_partition_path(path, fields, hive, expected):
    assert split_partition_path(path, fields, hive) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a%2Fb", "a/b"), ("50%25", "50%"), ("plain", "plain"), ("a%2fb", None), ("50%", None), ("a:b", None)],
)
def test_unescape_path_name(text, expected):
    assert unescape_path_name(text) == expected


def test_without_the_table_config_a_possibly_encoded_segment_is_read_both_ways():
    schema = pa.schema([("p", pa.string())])
    paths = ["a%2Fb", "other", "__HIVE_DEFAULT_PARTITION__"]
    assert prune_partitions(paths, [("p", "=", "a/b")], ["p"], False, schema) == ["a%2Fb"]
    assert prune_partitions(paths, [("p", "=", "a%2Fb")], ["p"], False, schema) == ["a%2Fb"]
    assert prune_partitions(paths, [("p", "=", "")], ["p"], False, schema) == ["__HIVE_DEFAULT_PARTITION__"]


def test_paths_the_key_generator_could_not_have_written_are_kept():
    # Arrow parses "007" as 7 and "1" as true, but Hudi writes 7 and true otherwise: these paths
    # came from elsewhere (another writer, a rename), and what their rows hold is not known.
    schema = pa.schema([("n", pa.int32()), ("b", pa.bool_())])
    assert prune_partitions(["007", "7", "8"], [("n", "=", 8)], ["n"], False, schema) == ["007", "8"]
    assert prune_partitions(["1", "true", "false"], [("b", "=", False)], ["b"], False, schema) == [
        "1",
        "false",
    ]
