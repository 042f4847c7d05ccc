"""The columns a read returns and filters on: a column added after some files were written comes
back for every row and is filtered on as nulls where a file lacks it, a read of no columns still
counts the rows, and a column the table does not have is an error."""

from __future__ import annotations

import datetime as _dt

import pyarrow as pa
import pytest

import shoal
from shoal.errors import InvalidArgumentError
from shoal.read.filters import check_filters
from tests.hudi_oracle import hudi_rs_read

TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


@pytest.fixture(params=TABLE_TYPES)
def evolved(request, tmp_path) -> tuple[shoal.Table, str]:
    """Three rows written before column ``c`` existed, then two with it: one a new key in a new
    partition, one an update of an old row (a log record on merge-on-read). Returns the table
    and the instant before ``c``."""
    t = shoal.Table.create(
        str(tmp_path / "t"), "t", table_type=request.param, record_key="id", partition_by="part"
    )
    t.bulk_insert(pa.table({"id": [1, 2, 3], "part": ["a", "a", "b"], "v": [1.0, 2.0, 3.0]}))
    before = t.latest_instant()
    t.upsert(pa.table({"id": [4, 3], "part": ["c", "b"], "v": [4.0, 3.5], "c": ["new", "upd"]}))
    return t, before


def _rows(table: pa.Table, columns: list[str]) -> list[tuple]:
    """The rows of ``columns``, in an order that does not depend on the read's (nulls sort too)."""
    return sorted((tuple(r[c] for c in columns) for r in table.to_pylist()), key=repr)


def test_a_new_column_comes_back_for_every_row(evolved):
    t, _ = evolved
    expected = _rows(hudi_rs_read(t.path), ["c"])
    assert expected == _rows(pa.table({"c": [None, None, "new", "upd"]}), ["c"])
    assert _rows(t.read(columns=["c"]), ["c"]) == expected
    assert _rows(t.read_batches(columns=["c"]).read_all(), ["c"]) == expected
    both = t.read(columns=["c", "id"])
    assert both.column_names == ["c", "id"]
    assert _rows(both, ["id", "c"]) == _rows(hudi_rs_read(t.path), ["id", "c"])


def test_reads_from_before_a_column_existed_return_it_as_nulls(evolved):
    t, before = evolved
    old = t.read(columns=["id", "c"], as_of=before)
    assert _rows(old, ["id", "c"]) == [(1, None), (2, None), (3, None)]
    changes = t.read_incremental(end=before, columns=["c", "v"])
    assert changes.column_names == ["_hoodie_commit_time", "c", "v"]
    assert changes.column("c").null_count == 3 and changes.num_rows == 3


def test_a_read_of_no_columns_counts_the_rows(evolved):
    t, _ = evolved
    for read in (t.read(columns=[]), t.read_batches(columns=[]).read_all()):
        assert read.num_columns == 0
        assert read.num_rows == 4


@pytest.mark.parametrize(
    ("filters", "keep"),
    [
        ([("c", "=", "new")], lambda r: r["c"] == "new"),
        ([("c", "!=", "zzz")], lambda r: r["c"] is not None and r["c"] != "zzz"),
        # As Arrow's ``not in`` (and shoal's Spark reads) do, nulls are not in the set.
        ([("c", "not in", ["upd"])], lambda r: r["c"] != "upd"),
        ([("c", "in", ["new", "upd"]), ("v", ">", 3.9)], lambda r: r["c"] in ("new", "upd") and r["v"] > 3.9),
    ],
)
def test_filters_on_a_new_column_treat_older_files_as_nulls(evolved, filters, keep):
    t, _ = evolved
    expected = sorted(r["id"] for r in hudi_rs_read(t.path).to_pylist() if keep(r))
    assert sorted(t.read(columns=["id"], filters=filters).column("id").to_pylist()) == expected
    assert sorted(t.read(filters=filters).column("id").to_pylist()) == expected
    streamed = t.read_batches(columns=["id"], filters=filters).read_all()
    assert sorted(streamed.column("id").to_pylist()) == expected
    changed = t.read_incremental(columns=["id"], filters=filters)
    assert sorted(changed.column("id").to_pylist()) == expected


def test_unknown_columns_are_errors(evolved):
    t, _ = evolved
    timeline = [(i.time, i.action, i.state) for i in t.timeline]
    with pytest.raises(shoal.InvalidArgumentError, match="nope"):
        t.read(columns=["id", "nope"])
    with pytest.raises(shoal.InvalidArgumentError, match="nope"):
        t.read_batches(columns=["nope"])
    with pytest.raises(shoal.InvalidArgumentError, match="nope"):
        t.read_incremental(columns=["nope"])
    for read in (t.read, t.read_batches, t.read_incremental):
        with pytest.raises(shoal.InvalidArgumentError, match="nope"):
            read(filters=[("nope", "=", 1)])
    # The incremental delete marker is a column only with include_deletes.
    with pytest.raises(shoal.InvalidArgumentError, match="_hoodie_is_deleted"):
        t.read_incremental(columns=["_hoodie_is_deleted"])
    marked = t.read_incremental(columns=["_hoodie_is_deleted"], include_deletes=True)
    assert "_hoodie_is_deleted" in marked.column_names
    assert [(i.time, i.action, i.state) for i in t.timeline] == timeline


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (("v", "=", "abc"), "do not fit the columns' types"),
        (("part", ">", 1), "do not fit the columns' types"),
        (("id", "in", "12"), "takes a list of values"),
        (("id", "in", [1, "x"]), "bad filter"),
        (("c", "like", "n%"), "bad filter"),
    ],
)
def test_mistyped_filters_are_errors(evolved, bad, message):
    t, _ = evolved
    for read in (t.read, t.read_batches, t.read_incremental):
        with pytest.raises(shoal.InvalidArgumentError, match=message):
            read(filters=[bad])


def test_empty_value_sets(evolved):
    t, _ = evolved
    assert t.read(filters=[("part", "in", [])]).num_rows == 0
    assert t.read(filters=[("part", "not in", [])]).num_rows == 4
    assert t.read(filters=[("c", "not in", ())], columns=["id"]).num_rows == 4


def test_filter_check_compares_values_not_only_types():
    """Arrow compares a naive datetime with a UTC timestamp only on values: the planner's check
    runs the filters on a row of nulls, so it refuses them before any file is read."""
    schema = pa.schema([("at", pa.timestamp("us", tz="UTC")), ("n", pa.int64())])
    naive = [("at", ">", _dt.datetime(2024, 1, 1))]
    with pytest.raises(InvalidArgumentError, match="timestamp with timezone"):
        check_filters(naive, schema)
    check_filters([("at", ">", _dt.datetime(2024, 1, 1, tzinfo=_dt.timezone.utc)), ("n", "<", 3)], schema)
    check_filters(None, schema)
    check_filters(naive, None)
