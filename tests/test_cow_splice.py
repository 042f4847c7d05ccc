"""Copy-on-write merges keep the stored records in place and copy the column chunks no update
changed: the new base file holds the same rows hudi-rs and shoal read as a full rewrite would,
its unchanged chunks are byte for byte the replaced file's, and what cannot be spliced (another
codec, an evolved schema) is written whole."""

from __future__ import annotations

import glob
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import column_chunk_bytes

COLUMNS = ["id", "city", "ts", "fare", "note"]


def _data(ids, ts=1, fare=None, note=None, city="sf") -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": pa.array([f"id-{i:05d}" for i in ids]),
            "city": pa.array([city] * n),
            "ts": pa.array([ts] * n, pa.int64()),
            "fare": pa.array(fare if fare is not None else [float(i) / 7 for i in ids], pa.float64()),
            "note": pa.array(note if note is not None else [f"note {i % 97}" for i in ids]),
        }
    )


def _create(path, **options) -> shoal.Table:
    return shoal.Table.create(
        str(path),
        name="trips",
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options={k: str(v) for k, v in options.items()},
    )


def _base_files(path) -> list[str]:
    return sorted(
        glob.glob(os.path.join(str(path), "city=sf", "*.parquet"))
        or glob.glob(os.path.join(str(path), "sf", "*.parquet"))
    )


def _latest_base_file(table: shoal.Table) -> str:
    files = sorted(
        glob.glob(os.path.join(table.path, "**", "*.parquet"), recursive=True),
        key=lambda f: f.rsplit("_", 1)[1],
    )
    return files[-1]


def _expect_equal(table: shoal.Table, expected: pa.Table) -> None:
    got = table.read(columns=COLUMNS)
    assert rows_by(got, COLUMNS, ["id"]) == rows_by(expected, COLUMNS, ["id"])
    oracle = hudi_rs_read(table.path)
    assert rows_by(oracle, COLUMNS, ["id"]) == rows_by(expected, COLUMNS, ["id"])


def _apply(model: pa.Table, upserts: pa.Table) -> pa.Table:
    kept = model.filter(pc.invert(pc.is_in(model.column("id"), value_set=upserts.column("id"))))
    return pa.concat_tables([kept, upserts.select(model.column_names)])


def test_updates_take_their_records_place_and_unchanged_chunks_are_copied(tmp_path):
    t = _create(tmp_path / "t")
    base = _data(range(2000))
    t.bulk_insert(base)
    (old_file,) = glob.glob(os.path.join(t.path, "**", "*.parquet"), recursive=True)
    # Updates change fare only (a new ts too); new keys come in as well.
    upd_ids = list(range(0, 2000, 10))
    updates = _data(upd_ids, ts=2, fare=[-1.0] * len(upd_ids))
    inserts = _data(range(5000, 5100), ts=2)
    t.upsert(pa.concat_tables([updates, inserts]))
    new_file = _latest_base_file(t)
    assert new_file != old_file
    expected = _apply(base, pa.concat_tables([updates, inserts]))
    _expect_equal(t, expected)

    # In place: the stored order, the updated records where theirs were, then the new records.
    stored = pq.read_table(new_file)
    assert stored.column("id").to_pylist() == base.column("id").to_pylist() + inserts.column("id").to_pylist()
    fares = stored.column("fare").to_pylist()
    assert all(fares[i] == -1.0 for i in upd_ids)
    commit_times = stored.column("_hoodie_commit_time").to_pylist()
    assert len(set(commit_times[i] for i in upd_ids)) == 1
    assert commit_times[1] != commit_times[0]

    md = pq.read_metadata(new_file)
    assert md.num_row_groups == 2
    assert md.row_group(0).num_rows == 2000 and md.row_group(1).num_rows == 100
    # Columns no update changed are the replaced file's chunks; the others are encoded again.
    for column in ("_hoodie_record_key", "_hoodie_partition_path", "id", "city", "note"):
        assert column_chunk_bytes(new_file, column) == column_chunk_bytes(old_file, column), column
    for column in ("fare", "ts", "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name"):
        assert column_chunk_bytes(new_file, column) != column_chunk_bytes(old_file, column), column
    assert (
        pq.read_table(new_file).column("_hoodie_file_name").to_pylist() == [os.path.basename(new_file)] * 2100
    )
    # The footer is Hudi's: bounds and bloom filter cover the inserted keys.
    meta = md.metadata
    assert meta[b"hoodie_min_record_key"] == b"id-00000"
    assert meta[b"hoodie_max_record_key"] == b"id-05099"
    assert b"org.apache.hudi.bloomfilter" in meta and b"parquet.avro.schema" in meta


def test_a_second_merge_copies_from_a_spliced_file_and_keeps_few_row_groups(tmp_path):
    t = _create(tmp_path / "t")
    model = _data(range(1000))
    t.bulk_insert(model)
    for n in range(5):
        batch = pa.concat_tables(
            [
                _data(range(n, 1000, 50), ts=10 + n, note=[f"v{n}"] * len(range(n, 1000, 50))),
                _data(range(2000 + 10 * n, 2010 + 10 * n), ts=10 + n),
            ]
        )
        t.upsert(batch)
        model = _apply(model, batch)
        _expect_equal(t, model)
    md = pq.read_metadata(_latest_base_file(t))
    # The stored rows and one tail of new records: the tail is written again with each commit's
    # inserts rather than adding a row group per commit.
    assert md.num_row_groups == 2
    assert md.row_group(0).num_rows == 1000


def test_deletes_in_a_row_group_rewrite_it_and_keep_the_others(tmp_path):
    # Row groups of about 300 rows.
    t = _create(tmp_path / "t", **{"hoodie.parquet.block.size": 300 * 60})
    base = _data(range(1200))
    t.bulk_insert(base)
    (old_file,) = glob.glob(os.path.join(t.path, "**", "*.parquet"), recursive=True)
    old_md = pq.read_metadata(old_file)
    assert old_md.num_row_groups >= 3
    first_rows = old_md.row_group(0).num_rows
    # Delete two records of the last row group and update one there: the first group is untouched.
    doomed = _data([1190, 1191])
    t.delete(doomed)
    new_file = _latest_base_file(t)
    model = base.filter(pc.invert(pc.is_in(base.column("id"), value_set=doomed.column("id"))))
    _expect_equal(t, model)
    md = pq.read_metadata(new_file)
    assert md.row_group(0).num_rows == first_rows
    for column in ("id", "fare", "note", "_hoodie_commit_seqno", "_hoodie_commit_time"):
        assert column_chunk_bytes(new_file, column) == column_chunk_bytes(old_file, column), column
    assert pq.read_table(new_file).column("id").to_pylist() == model.column("id").to_pylist()
    # A delete and an update of the same file in one commit (a soft delete by _hoodie_is_deleted).
    batch = _data([5, 6], ts=5).append_column("_hoodie_is_deleted", pa.array([True, False]))
    t.upsert(batch)
    model = _apply(model.filter(pc.not_equal(model.column("id"), "id-00005")), _data([6], ts=5))
    _expect_equal(t, model)


def test_values_that_compare_equal_but_differ_in_bits_are_written_anew(tmp_path):
    t = _create(tmp_path / "t")
    base = _data(range(10), fare=[-0.0] + [math.nan] + [1.0] * 8, note=[None] + ["x"] * 9)
    t.bulk_insert(base)
    # 0.0 == -0.0 under comparison, but the file must hold the new sign; NaN stays NaN; nulls
    # go both ways.
    upd = _data([0, 1, 2], ts=2, fare=[0.0, math.nan, 1.0], note=["now", None, "x"])
    t.upsert(upd)
    stored = pq.read_table(_latest_base_file(t)).sort_by("id")
    fare = stored.column("fare").to_numpy()
    assert fare[0] == 0.0 and not np.signbit(fare[0])
    assert math.isnan(fare[1])
    assert stored.column("note").to_pylist()[:3] == ["now", None, "x"]
    oracle = hudi_rs_read(t.path).sort_by("id")
    assert not np.signbit(oracle.column("fare").to_numpy()[0])
    assert oracle.column("note").to_pylist()[:3] == ["now", None, "x"]


@pytest.mark.parametrize("codec", ["gzip", "zstd", "uncompressed", "lz4", "brotli"])
def test_every_codec_merges(tmp_path, codec):
    t = _create(tmp_path / "t", **{"hoodie.parquet.compression.codec": codec})
    base = _data(range(500))
    t.bulk_insert(base)
    batch = pa.concat_tables([_data(range(0, 500, 3), ts=4, fare=[2.5] * 167), _data(range(900, 910))])
    t.upsert(batch)
    _expect_equal(t, _apply(base, batch))
    md = pq.read_metadata(_latest_base_file(t))
    by_rust_core = md.created_by.startswith("parquet-rs")
    # lz4 and brotli files are written by pyarrow; the Rust core's writer has the others.
    assert by_rust_core == (codec in ("gzip", "zstd", "uncompressed"))
    expected_codec = {"uncompressed": "UNCOMPRESSED"}.get(codec, codec.upper())
    assert md.row_group(0).column(md.num_columns - 1).compression in (expected_codec, "LZ4_RAW")


def test_an_evolved_schema_is_written_whole(tmp_path):
    t = _create(tmp_path / "t")
    base = _data(range(300))
    t.bulk_insert(base)
    batch = _data(range(0, 300, 7), ts=3).append_column("extra", pa.array(list(range(43)), pa.int64()))
    t.upsert(batch)
    got = t.read().sort_by("id")
    extra = dict(zip(got.column("id").to_pylist(), got.column("extra").to_pylist(), strict=True))
    assert extra["id-00007"] == 1 and extra["id-00001"] is None
    assert "extra" in pq.read_schema(_latest_base_file(t)).names
    _expect_equal(t, _apply(base, batch.drop_columns(["extra"])))


def test_each_copy_of_a_key_stored_twice_is_merged_in_place(tmp_path):
    t = _create(tmp_path / "t")
    # bulk_insert does not combine records by key: the file then holds id-00003 twice.
    t.bulk_insert(pa.concat_tables([_data(range(100)), _data([3], ts=1, fare=[9.0])]))
    old_file = _latest_base_file(t)
    stored = pq.read_table(old_file)
    assert stored.column("id").to_pylist().count("id-00003") == 2
    t.upsert(_data([3, 4], ts=5, fare=[7.0, 7.0]))
    got = t.read(columns=COLUMNS)
    rows = [r for r in got.to_pylist() if r["id"] in ("id-00003", "id-00004")]
    # Hudi's merge handle merges each stored copy with the incoming record.
    assert sorted((r["id"], r["fare"]) for r in rows) == [
        ("id-00003", 7.0),
        ("id-00003", 7.0),
        ("id-00004", 7.0),
    ]
    assert rows_by(hudi_rs_read(t.path), COLUMNS, ["id"]) == rows_by(got, COLUMNS, ["id"])
    new_file = _latest_base_file(t)
    ids = pq.read_table(new_file).column("id").to_pylist()
    assert ids == stored.column("id").to_pylist()
    assert column_chunk_bytes(new_file, "note") == column_chunk_bytes(old_file, "note")


def test_nested_columns_merge(tmp_path):
    t = _create(tmp_path / "t")
    base = _data(range(50))
    nested = pa.array([{"a": i, "tags": [f"t{i}", "x"]} for i in range(50)])
    t.bulk_insert(base.append_column("info", nested))
    upd = _data([1, 2], ts=3).append_column(
        "info", pa.array([{"a": -1, "tags": []}, {"a": 2, "tags": ["t2", "x"]}])
    )
    t.upsert(upd)
    got = t.read().sort_by("id")
    assert got.column("info").to_pylist()[:3] == [
        {"a": 0, "tags": ["t0", "x"]},
        {"a": -1, "tags": []},
        {"a": 2, "tags": ["t2", "x"]},
    ]
    oracle = hudi_rs_read(t.path).sort_by("id")
    assert oracle.column("info").to_pylist() == got.column("info").to_pylist()
    assert rows_by(oracle, COLUMNS, ["id"]) == rows_by(got, COLUMNS, ["id"])


def test_upsert_into_a_table_hudi_wrote(tmp_path):
    from tests.test_fixtures import ALL_FIXTURES, _canonical, unzip_table

    if "cow_v6_simplekeygen_nonhivestyle" not in ALL_FIXTURES:
        pytest.skip("fixtures not found")
    t = shoal.Table(str(unzip_table("cow_v6_simplekeygen_nonhivestyle", tmp_path)))
    snapshot = t.read()
    user = [c for c in snapshot.column_names if not c.startswith("_hoodie")]
    row = snapshot.select(user).sort_by("id").slice(0, 1)
    row = row.set_column(row.column_names.index("longField"), "longField", pa.array([10**12], pa.int64()))
    row = row.set_column(row.column_names.index("name"), "name", pa.array(["changed"]))
    t.upsert(row)
    got = t.read()
    assert got.num_rows == snapshot.num_rows
    changed = got.filter(pc.equal(got.column("id"), row.column("id")[0])).select(["name", "longField"])
    assert changed.to_pylist() == [{"name": "changed", "longField": 10**12}]
    oracle = hudi_rs_read(t.path)
    assert _canonical(oracle.select(user), ["id"]) == _canonical(got.select(user), ["id"])
