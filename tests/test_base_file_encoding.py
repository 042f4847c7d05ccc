"""How base files are encoded for speed without changing what they hold: string columns of one
value (a partition field) are written, and read back by merges, as one-entry dictionaries; the
sequence-number column carries no statistics; columns whose dictionary would overflow are
written plain from the start; readers (shoal, hudi-rs) see the same values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import shoal
from shoal.write.base_file import DICTIONARY_PAGE_LIMIT, constant_strings_as_dictionaries, dictionary_columns
from tests.hudi_oracle import hudi_rs_read, rows_by


def test_only_string_columns_of_one_value_become_dictionaries():
    table = pa.table(
        {
            # A leading empty chunk: the first value is in the second one.
            "one": pa.chunked_array([[], ["p1", "p1"], ["p1"]], pa.string()),
            "large": pa.chunked_array([pa.array(["x"] * 3, pa.large_string())]),
            "two": ["a", "a", "b"],
            "with_null": ["a", None, "a"],
            "number": [7, 7, 7],
            # Per-record meta columns keep their type even when a file holds one record.
            "_hoodie_record_key": ["k", "k", "k"],
        }
    )
    out = constant_strings_as_dictionaries(table)
    types = {f.name: f.type for f in out.schema}
    assert types["one"] == pa.dictionary(pa.int32(), pa.string())
    assert types["large"] == pa.dictionary(pa.int32(), pa.large_string())
    assert out.column("one").chunk(0).dictionary.to_pylist() == ["p1"]
    for name in ("two", "with_null", "number", "_hoodie_record_key"):
        assert types[name] == table.schema.field(name).type, name
    assert out.cast(table.schema).equals(table)


def _latest_files(path: str) -> list[Path]:
    files = [f for f in Path(path).rglob("*.parquet") if ".hoodie" not in f.parts]
    latest: dict[str, Path] = {}
    for f in files:
        if (
            f.parent.name not in latest
            or f.stem.rsplit("_", 1)[-1] > latest[f.parent.name].stem.rsplit("_", 1)[-1]
        ):
            latest[f.parent.name] = f
    return list(latest.values())


def _check_encoding(path: str) -> None:
    files = _latest_files(path)
    assert files
    for f in files:
        meta = pq.read_metadata(f)
        # A merge keeps the stored records' row group and adds one for new records.
        for g in range(meta.num_row_groups):
            columns = {
                meta.row_group(g).column(i).path_in_schema: meta.row_group(g).column(i)
                for i in range(meta.num_columns)
            }
            city = columns["city"]
            assert city.has_dictionary_page
            # One dictionary entry: the dictionary page is a few bytes, the values only indices.
            assert city.total_uncompressed_size < 1000
            assert city.statistics.min == city.statistics.max == f.parent.name
            assert columns["_hoodie_commit_seqno"].statistics is None
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()
        key_stats = [
            meta.row_group(g).column(meta.schema.names.index("_hoodie_record_key")).statistics
            for g in range(meta.num_row_groups)
        ]
        assert min(s.min for s in key_stats) == min(keys)
        assert max(s.max for s in key_stats) == max(keys)
        assert pq.read_table(f, columns=["city"]).column(0).type == pa.string()


def test_partition_field_written_and_merged_as_a_dictionary(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", record_key="id", partition_by="city", ordering_field="ts"
    )
    n = 3000
    ids = [f"id-{i:05d}" for i in range(n)]
    cities = ["sf", "nyc", "la"]
    t.bulk_insert(
        pa.table({"id": ids, "city": [cities[i % 3] for i in range(n)], "ts": [1] * n, "v": list(range(n))})
    )
    _check_encoding(t.path)
    # Updates and inserts: every file is merged with the replaced one, whose city column is
    # read as a dictionary and concatenated with the new rows'.
    up_ids = ids[::7] + [f"new-{i}" for i in range(90)]
    t.upsert(
        pa.table(
            {
                "id": up_ids,
                "city": [cities[i % 3] for i in range(0, n, 7)] + [cities[i % 3] for i in range(90)],
                "ts": [2] * len(up_ids),
                "v": [-1] * len(up_ids),
            }
        )
    )
    _check_encoding(t.path)
    expect = {i: (cities[k % 3], 1, k) for k, i in enumerate(ids)}
    for k, i in enumerate(up_ids):
        expect[i] = (expect[i][0] if i in expect else cities[(k - len(ids[::7])) % 3], 2, -1)
    want = [{"id": i, "city": c, "ts": ts, "v": v} for i, (c, ts, v) in sorted(expect.items())]
    columns = ["id", "city", "ts", "v"]
    assert rows_by(t.read(), columns, ["id"]) == want
    assert rows_by(hudi_rs_read(t.path), columns, ["id"]) == want


def test_dictionary_is_skipped_only_for_columns_whose_dictionary_would_overflow():
    rng = np.random.default_rng(7)
    n = 100_000
    table = pa.table(
        {
            "_hoodie_commit_seqno": [f"s_{i}" for i in range(n)],
            "_hoodie_record_key": [f"k{i:07d}" for i in range(n)],
            "unique_int": rng.permutation(n),
            "random_double": rng.random(n),
            "wide_strings": [f"{x:032d}" for x in rng.integers(0, 10**9, n)],
            "few_ints": rng.integers(0, 1_000, n),
            "few_strings": [f"city-{x}" for x in rng.integers(0, 500, n)],
            # Half the rows one value, half distinct: the writer's own fallback decides.
            "skewed": np.where(rng.random(n) < 0.5, -1, np.arange(n)),
            # 5,000 values in a cycle: rows drawn at random, not in stride, see the repeats.
            "cyclic": np.arange(n) % 5_000,
            "flag": rng.random(n) < 0.5,
        }
    )
    chosen = dictionary_columns(table)
    assert isinstance(chosen, list)
    plain = set(table.column_names) - set(chosen)
    assert plain == {
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "unique_int",
        "random_double",
        "wide_strings",
    }
    # Files are no larger than with a dictionary tried on every column, and read back the same.
    for name in table.column_names:
        one = table.select([name])
        sizes = []
        for use in (True, dictionary_columns(one)):
            sink = pa.BufferOutputStream()
            pq.write_table(one, sink, use_dictionary=use, dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT)
            sizes.append(sink.getvalue().size)
            assert pq.read_table(pa.BufferReader(sink.getvalue())).equals(one)
        assert sizes[1] <= sizes[0] * 1.01, name
    # Small tables are judged on all their rows; nested schemas leave it to the writer.
    assert "v" in dictionary_columns(pa.table({"v": [1, 2, 3]}))
    assert dictionary_columns(pa.table({"v": [[1], [2]]})) is True


def _twins(path: str) -> dict[str, list[str]]:
    from shoal.fs.storage import Storage
    from shoal.tasks.cow_write import _copies_of_record_keys

    storage = Storage(path)
    out = {}
    for f in _latest_files(path):
        rel = str(f.relative_to(path))
        with storage.open_input_file(rel) as handle:
            meta = pq.read_metadata(handle)
            out[f.parent.name] = _copies_of_record_keys(handle, meta, meta.schema.to_arrow_schema())
    return out


def test_merge_decodes_a_record_key_field_once(tmp_path):
    """A merge reads a column whose chunks are byte for byte _hoodie_record_key's (the key field
    of a simple key generator, or any copy of it) by decoding the record keys once; a complex key
    (``field:value``) is another column, read as usual."""
    n = 2000
    data = pa.table(
        {
            "id": [f"id-{i:05d}" for i in range(n)],
            "copy": [f"id-{i:05d}" for i in range(n)],
            "other": [f"id-{i:05d}x" for i in range(n)],
            "city": ["sf", "la"] * (n // 2),
            "ts": [1] * n,
        }
    )
    up = pa.table(
        {
            "id": [f"id-{i:05d}" for i in range(0, n, 9)] + ["id-new"],
            "copy": [f"id-{i:05d}" for i in range(0, n, 9)] + ["id-new"],
            "other": ["changed"] * (len(range(0, n, 9)) + 1),
            "city": ["sf" if i % 2 == 0 else "la" for i in range(0, n, 9)] + ["sf"],
            "ts": [2] * (len(range(0, n, 9)) + 1),
        }
    )
    for record_key, twins in ((["id"], ["id", "copy"]), (["id", "city"], [])):
        t = shoal.Table.create(
            str(tmp_path / "-".join(record_key)),
            name="t",
            record_key=record_key,
            partition_by="city",
            ordering_field="ts",
        )
        t.bulk_insert(data)
        assert _twins(t.path) == {"sf": twins, "la": twins}
        t.upsert(up)
        columns = ["id", "copy", "other", "city", "ts"]
        expect = {r["id"]: r for r in data.to_pylist()} | {r["id"]: r for r in up.to_pylist()}
        want = sorted(expect.values(), key=lambda r: r["id"])
        assert rows_by(t.read(), columns, ["id"]) == want
        assert rows_by(hudi_rs_read(t.path), columns, ["id"]) == want


def test_merge_keeps_columns_plain_that_the_replaced_file_stores_plain(tmp_path):
    t = shoal.Table.create(str(tmp_path / "t"), name="t", record_key="id", ordering_field="ts")
    n = 3000
    blob = [f"{i:06d}" * 50 for i in range(n)]  # 300 distinct bytes a row: no dictionary
    t.bulk_insert(
        pa.table(
            {
                "id": [f"id-{i:05d}" for i in range(n)],
                "blob": blob,
                "cat": ["a", "b", "c"] * 1000,
                "ts": [1] * n,
            }
        )
    )

    def dictionary_pages() -> dict[str, bool]:
        (f,) = _latest_files(t.path)
        meta = pq.read_metadata(f)
        group = meta.row_group(0)
        return {
            group.column(i).path_in_schema: group.column(i).has_dictionary_page
            for i in range(meta.num_columns)
        }

    assert dictionary_pages()["blob"] is False and dictionary_pages()["cat"] is True
    t.upsert(pa.table({"id": ["id-00001", "id-new"], "blob": ["x", "y"], "cat": ["d", "a"], "ts": [2, 2]}))
    assert dictionary_pages()["blob"] is False and dictionary_pages()["cat"] is True
    want = {f"id-{i:05d}": (blob[i], ["a", "b", "c"][i % 3]) for i in range(n)}
    want |= {"id-00001": ("x", "d"), "id-new": ("y", "a")}
    rows = [{"id": k, "blob": b, "cat": c} for k, (b, c) in sorted(want.items())]
    assert rows_by(t.read(), ["id", "blob", "cat"], ["id"]) == rows
    assert rows_by(hudi_rs_read(t.path), ["id", "blob", "cat"], ["id"]) == rows
