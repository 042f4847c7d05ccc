"""Reads whose filters pin the record key open only the base files whose footers may hold one
of the keys, and return exactly the rows an unpruned read returns: shoal tables (copy-on-write,
merge-on-read with logs, a complex key, time travel) and every Hudi-written fixture, against
hudi-rs."""

from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shoal
from shoal.read.filters import apply_filters
from shoal.read.key_pruning import MAX_PINNED_KEYS, pinned_keys
from tests.hudi_oracle import hudi_rs_read
from tests.test_fixtures import ALL_FIXTURES, unzip_table

ROWS_PER_WRITE = 2_000


def _batch(seed: int, n: int = ROWS_PER_WRITE) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": [str(uuid.UUID(int=int(x))) for x in rng.integers(0, 2**62, n)],
            "part": [f"p{int(x)}" for x in rng.integers(0, 2, n)],
            "n": pa.array(rng.integers(0, 50, n), pa.int64()),
            "ts": pa.array(np.full(n, seed), pa.int64()),
        }
    )


def _table(path: str, table_type: str, record_key: str | list[str] = "id") -> tuple[shoal.Table, pa.Table]:
    """Four bulk inserts (four file groups per partition) and, on merge-on-read, updates of a
    tenth of the keys into logs. Returns the table and every record written."""
    t = shoal.Table.create(
        path, name="t", table_type=table_type, record_key=record_key, partition_by="part", ordering_field="ts"
    )
    written = [_batch(seed) for seed in range(1, 5)]
    for batch in written:
        t.bulk_insert(batch)
    if table_type == "MERGE_ON_READ":
        updates = written[0].slice(0, ROWS_PER_WRITE // 10)
        updates = updates.set_column(3, "ts", pa.array(np.full(updates.num_rows, 9), pa.int64()))
        t.upsert(updates)
    return t, pa.concat_tables(written)


def _lookups(records: pa.Table) -> list[list[tuple]]:
    keys = records.column("id").to_pylist()
    return [
        [("id", "=", keys[0])],
        [("id", "=", keys[-1]), ("n", ">=", 0)],
        [("id", "in", [keys[5], keys[3000], keys[7999], "not-a-key"])],
        [("id", "=", "not-a-key")],
        [("id", "in", [])],
        [("_hoodie_record_key", "in", [keys[17], keys[4017]])],
        [("id", "=", keys[1]), ("part", "=", "p1")],
    ]


def _same_rows(t: shoal.Table, filters: list[tuple], **read) -> pa.Table:
    """The pruned read, checked against the whole read filtered afterwards."""
    pruned = t.read(filters=filters, **read)
    whole = apply_filters(t.read(**read), filters)
    assert pruned.schema == whole.schema
    assert pruned.sort_by("id").to_pylist() == whole.sort_by("id").to_pylist()
    return pruned


def _planned(t: shoal.Table, filters: list[tuple] | None, query_type: str = "snapshot") -> int:
    specs, _ = t._plan_read(None, filters, None, query_type)
    return len(specs)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_key_lookup_reads_the_files_that_may_hold_its_keys(tmp_path, table_type):
    path = str(tmp_path / "t")
    t, records = _table(path, table_type)
    everything = _planned(t, None)
    assert everything == 8
    found = 0
    for filters in _lookups(records):
        found += _same_rows(t, filters).num_rows
        _same_rows(t, filters, query_type="read_optimized")
        # Base-file slices that hold none of the keys are not read (a slice with logs is).
        assert _planned(t, filters) < everything
    assert found == 1 + 1 + 3 + 0 + 0 + 2 + (1 if records.column("part")[1].as_py() == "p1" else 0)
    key = records.column("id")[0].as_py()
    assert _planned(t, [("id", "=", key)], "read_optimized") == 1
    # hudi-rs holds the same rows for the keys looked up.
    rows = _same_rows(t, [("id", "=", key)]).select(["id", "part", "n", "ts"]).to_pylist()
    theirs = hudi_rs_read(path)
    assert (
        theirs.filter(pc.equal(theirs.column("id"), key)).select(["id", "part", "n", "ts"]).to_pylist()
        == rows
    )


def test_time_travel_and_a_complex_key(tmp_path):
    path = str(tmp_path / "t")
    t, records = _table(path, "COPY_ON_WRITE", record_key=["id", "n"])
    first = t.timeline[0].time
    keys, ns = records.column("id").to_pylist(), records.column("n").to_pylist()
    lookups = [
        [("id", "=", keys[0]), ("n", "=", ns[0])],
        [("id", "in", [keys[0], keys[6001]]), ("n", "in", [ns[0], ns[6001], 1000])],
        [("n", "=", ns[0]), ("id", "=", keys[0]), ("_hoodie_commit_time", ">", "0")],
    ]
    for filters in lookups:
        assert _same_rows(t, filters).num_rows >= 1
        _same_rows(t, filters, as_of=first)
        assert _planned(t, filters) < 8
    # The key (a complex one here, "id:...,n:...") is the key generator's.
    assert pinned_keys([("id", "=", "a"), ("n", "in", [2, 1])], t.keygen, t.schema()).to_pylist() == [
        "id:a,n:1",
        "id:a,n:2",
    ]
    # A filter on one key field alone pins no key: every file is read.
    assert _planned(t, [("id", "=", keys[0])]) == 8


def test_filters_that_pin_no_key_read_every_file(tmp_path):
    path = str(tmp_path / "t")
    t, records = _table(path, "COPY_ON_WRITE")
    schema, keygen = t.schema(), t.keygen
    key = records.column("id")[0].as_py()
    for filters in (
        [("id", "!=", key)],
        [("id", ">=", key)],
        [("n", "=", 3)],
        [("id", "in", [str(i) for i in range(MAX_PINNED_KEYS + 1)])],
    ):
        assert pinned_keys(filters, keygen, schema) is None
        _same_rows(t, filters)
        assert _planned(t, filters) == 8
    # A value of another type (which the read itself refuses) pins nothing.
    assert pinned_keys([("_hoodie_record_key", "=", 5)], keygen, schema) is None


@pytest.mark.skipif(not ALL_FIXTURES, reason="fixtures not found")
@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_key_lookups_in_hudi_written_tables(tmp_path, name):
    path = str(unzip_table(name, tmp_path))
    t = shoal.Table(path)
    theirs = hudi_rs_read(path)
    if theirs.num_rows == 0:
        assert t.read(filters=[("_hoodie_record_key", "=", "x")]).num_rows == 0
        return
    fields = t.keygen.record_key_fields
    if "_hoodie_record_key" in theirs.column_names and theirs.column("_hoodie_record_key").null_count == 0:
        keys = theirs.column("_hoodie_record_key").to_pylist()
        for filters in (
            [("_hoodie_record_key", "=", keys[0])],
            [("_hoodie_record_key", "in", [*keys[-2:], "x"])],
        ):
            ours = t.read(filters=filters)
            expected = apply_filters(theirs, filters)
            assert sorted(ours.column("_hoodie_record_key").to_pylist()) == sorted(
                expected.column("_hoodie_record_key").to_pylist()
            )
    # By the key fields' values, for the types whose key text is exact.
    row = theirs.slice(0, 1).to_pylist()[0]
    filters = [(f, "=", row[f]) for f in fields if f in row]
    ours, expected = t.read(filters=filters), apply_filters(theirs, filters)
    assert ours.num_rows == expected.num_rows >= 1


def test_a_merge_on_read_slice_whose_base_holds_no_key_is_read_from_its_logs(tmp_path):
    """With the bucket index new keys go to the logs of the file groups their buckets have: a
    lookup of such a key skips the base file (its footer rules the key out) and still finds the
    key in the logs; a key the base file holds is read with it."""
    path = str(tmp_path / "t")
    buckets = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}
    t = shoal.Table.create(
        path, name="t", table_type="MERGE_ON_READ", record_key="id", ordering_field="ts", options=buckets
    )
    old = _batch(1, 200).drop_columns(["part"])
    t.upsert(old)
    t.compact()
    new = _batch(2, 50).drop_columns(["part"])
    t.upsert(new)
    slices = t.file_slices()
    assert len(slices) == 2 and all(s.base_file is not None and s.log_files for s in slices)
    new_key, old_key = new.column("id")[0].as_py(), old.column("id")[0].as_py()
    for key, base_read in ((new_key, False), (old_key, True)):
        filters = [("id", "=", key)]
        specs, _ = t._plan_read(None, filters, None, "snapshot")
        holder = [s for s in specs if s.log_file_paths]
        assert any((s.base_file_path is not None) == base_read for s in holder), key
        assert _same_rows(t, filters).column("id").to_pylist() == [key]
    # The new key is in no base file: a read-optimized lookup finds nothing, and reads nothing.
    assert _same_rows(t, [("id", "=", new_key)], query_type="read_optimized").num_rows == 0
    assert _planned(t, [("id", "=", new_key)], "read_optimized") == 0
    theirs = hudi_rs_read(path)
    assert theirs.filter(pc.equal(theirs.column("id"), new_key)).num_rows == 1
