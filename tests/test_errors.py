"""Bad input gets a clear, typed error, and the table (timeline and data) is unchanged after it."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import shoal
from shoal.fs.storage import Storage


def _table(tmp_path, **kw) -> shoal.Table:
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", record_key="id", partition_by="city", ordering_field="ts", **kw
    )
    t.upsert(pa.table({"id": [1, 2], "city": ["a", "b"], "ts": [1, 1], "v": ["x", "y"]}))
    return t


def _snapshot_of_disk(path: str) -> dict[str, int]:
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            out[os.path.relpath(full, path)] = os.path.getsize(full)
    return out


@pytest.fixture
def table(tmp_path):
    return _table(tmp_path)


def _assert_unchanged(table: shoal.Table, before: dict[str, int], rows: list[dict]) -> None:
    assert _snapshot_of_disk(table.path) == before
    assert table.read(columns=["id", "city", "ts", "v"]).sort_by("id").to_pylist() == rows


def _rows(table):
    return table.read(columns=["id", "city", "ts", "v"]).sort_by("id").to_pylist()


def test_missing_table(tmp_path):
    with pytest.raises(shoal.TableNotFoundError):
        shoal.Table(str(tmp_path / "nope"))


def test_create_twice(table):
    with pytest.raises(shoal.TableExistsError):
        shoal.Table.create(table.path, name="t", record_key="id")


@pytest.mark.parametrize(
    "bad",
    [
        {"id": [None], "city": ["a"], "ts": [2], "v": ["z"]},
        {"id": [3], "city": ["a"], "ts": [2]},  # missing column v
    ],
)
def test_bad_batches_leave_table_unchanged(table, bad):
    before, rows = _snapshot_of_disk(table.path), _rows(table)
    with pytest.raises((shoal.InvalidRecordKeyError, shoal.SchemaMismatchError)):
        table.upsert(pa.table(bad))
    _assert_unchanged(table, before, rows)


def test_null_record_key_is_invalid_record_key(table):
    before, rows = _snapshot_of_disk(table.path), _rows(table)
    with pytest.raises(shoal.InvalidRecordKeyError):
        table.upsert(
            pa.table(
                {"id": pa.array([None, 5], pa.int64()), "city": ["a", "a"], "ts": [2, 2], "v": ["z", "w"]}
            )
        )
    _assert_unchanged(table, before, rows)


def test_type_change_is_schema_mismatch(table):
    before, rows = _snapshot_of_disk(table.path), _rows(table)
    with pytest.raises(shoal.SchemaMismatchError):
        table.upsert(pa.table({"id": [3], "city": ["a"], "ts": [2], "v": [1.5]}))
    _assert_unchanged(table, before, rows)


def test_missing_ordering_field(table):
    before, rows = _snapshot_of_disk(table.path), _rows(table)
    with pytest.raises(shoal.SchemaMismatchError):
        table.upsert(pa.table({"id": [3], "city": ["a"], "v": ["q"]}))
    _assert_unchanged(table, before, rows)


def test_missing_partition_field(table):
    before, rows = _snapshot_of_disk(table.path), _rows(table)
    with pytest.raises(shoal.InvalidRecordKeyError):
        table.delete(pa.table({"id": [1]}))
    _assert_unchanged(table, before, rows)


@pytest.mark.parametrize(
    "options",
    [
        {"hoodie.parquet.max.file.sise": "100"},
        {"hoodie.parquet.max.file.size": "lots"},
        {"hoodie.index.type": "MAGIC"},
        {"hoodie.bulkinsert.sort.mode": "SHUFFLE"},
        {5: "x"},
        {None: "x"},
        [("hoodie.index.type", "BLOOM")],
    ],
)
def test_invalid_options(table, options):
    before, rows = _snapshot_of_disk(table.path), _rows(table)
    with pytest.raises(shoal.InvalidOptionError):
        table.upsert(pa.table({"id": [3], "city": ["a"], "ts": [2], "v": ["q"]}), options=options)
    _assert_unchanged(table, before, rows)


@pytest.mark.parametrize("options", [{5: "x"}, "hoodie.cleaner.policy=KEEP_LATEST_COMMITS"])
def test_option_names_are_strings_for_services_and_tables_too(table, options):
    before, rows = _snapshot_of_disk(table.path), _rows(table)
    with pytest.raises(shoal.InvalidOptionError):
        table.clean(options=options)
    with pytest.raises(shoal.InvalidOptionError):
        shoal.Table(table.path, options=options)
    _assert_unchanged(table, before, rows)


def test_invalid_table_type(tmp_path):
    with pytest.raises(shoal.InvalidOptionError):
        shoal.Table.create(str(tmp_path / "x"), name="x", table_type="BOTH", record_key="id")
    assert not (tmp_path / "x" / ".hoodie" / "hoodie.properties").exists()


def test_unknown_option_suggests_the_right_name(tmp_path):
    with pytest.raises(shoal.InvalidOptionError, match=r"hoodie\.parquet\.max\.file\.size"):
        shoal.Table.create(
            str(tmp_path / "x"), name="x", record_key="id", options={"hoodie.parquet.max.file.sise": "1"}
        )


def test_checksum_mismatch_is_corrupt_table(table):
    props = os.path.join(table.path, ".hoodie", "hoodie.properties")
    with open(props, encoding="latin-1") as f:
        text = f.read()
    with open(props, "w", encoding="latin-1") as f:
        f.write(text.replace("hoodie.table.name=t", "hoodie.table.name=u"))
    with pytest.raises(shoal.CorruptTableError):
        shoal.Table(table.path)


def test_corrupt_commit_file_is_corrupt_table(table):
    commit = next(f for f in os.listdir(os.path.join(table.path, ".hoodie")) if f.endswith(".commit"))
    with open(os.path.join(table.path, ".hoodie", commit), "w") as f:
        f.write("{not json")
    with pytest.raises(shoal.CorruptTableError):
        table.read()


def test_existing_instant_is_commit_conflict(table):
    storage = Storage(table.path)
    name = next(f for f in os.listdir(os.path.join(table.path, ".hoodie")) if f.endswith(".commit"))
    with pytest.raises(shoal.CommitConflictError):
        storage.create_exclusive(f".hoodie/{name}", b"{}")


def test_bad_filter_and_as_of(table):
    with pytest.raises(shoal.InvalidArgumentError):
        table.read(filters=[("id", "~", 1)])
    with pytest.raises(shoal.InvalidArgumentError):
        table.read(as_of="yesterday")
    with pytest.raises(shoal.InstantNotFoundError):
        table.read(as_of="19990101000000000")
