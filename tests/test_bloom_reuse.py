"""A merge that removes no key extends the replaced file's bloom filter with the inserted keys
instead of rebuilding it (index/bloom_reuse.py): same filter shape as a rebuild, every key of the
new file present, min/max keys of the new file; deletes, other sizing or a filter that would have
to grow fall back to a rebuild."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal._native import BloomFilter, bloom_footer_for_keys
from shoal.index.bloom_reuse import BloomConfig, extended_footer
from tests.hudi_oracle import hudi_rs_read, rows_by

SMALL_DYNAMIC = BloomConfig("DYNAMIC_V0", num_entries=100, fpp=0.001, max_entries=250)
SMALL_SIMPLE = BloomConfig("SIMPLE", num_entries=500, fpp=0.001, max_entries=0)


def _keys(prefix: str, n: int) -> pa.Array:
    return pa.array([f"{prefix}-{i:05d}" for i in range(n)])


def _footer(keys: pa.Array, config: BloomConfig) -> str:
    return bloom_footer_for_keys(keys, config.num_entries, config.fpp, config.max_entries, config.type_code)


def _dynamic_header(value: str) -> tuple[int, int, int]:
    """(keys per row, keys in the active row, rows) of a DYNAMIC_V0 footer value."""
    raw = base64.b64decode(value)
    return struct.unpack_from(">iii", raw, 13)


def test_simple_filter_extended_is_the_rebuilt_filter():
    old, new = _keys("a", 300), _keys("b", 150)
    extended = extended_footer(_footer(old, SMALL_SIMPLE), None, SMALL_SIMPLE, new)
    # A SIMPLE filter is the union of its keys' bits: order and history do not matter.
    assert extended == _footer(pa.concat_arrays([old, new]), SMALL_SIMPLE)


def test_dynamic_filter_extended_within_its_active_row_is_the_rebuilt_filter():
    old, new = _keys("a", 130), _keys("b", 60)  # 130 keys: row 2 holds 30, room for 70
    extended = extended_footer(_footer(old, SMALL_DYNAMIC), "DYNAMIC_V0", SMALL_DYNAMIC, new)
    assert extended == _footer(pa.concat_arrays([old, new]), SMALL_DYNAMIC)
    assert _dynamic_header(extended) == (100, 90, 2)


def test_dynamic_filter_that_would_grow_a_row_is_rebuilt():
    old, new = _keys("a", 130), _keys("b", 71)  # one key past row 2 needs a third row
    assert extended_footer(_footer(old, SMALL_DYNAMIC), "DYNAMIC_V0", SMALL_DYNAMIC, new) is None


def test_bounded_dynamic_filter_keeps_filling_its_rows():
    old, new = _keys("a", 260), _keys("b", 80)  # 3 rows reach the 250 bound: no more rows
    extended = extended_footer(_footer(old, SMALL_DYNAMIC), "DYNAMIC_V0", SMALL_DYNAMIC, new)
    assert extended is not None
    rebuilt = _footer(pa.concat_arrays([old, new]), SMALL_DYNAMIC)
    assert _dynamic_header(extended)[2] == _dynamic_header(rebuilt)[2] == 3
    bloom = BloomFilter.from_footer(extended, "DYNAMIC_V0")
    assert all(bloom.might_contain(k) for k in old.to_pylist() + new.to_pylist())


def test_no_inserted_keys_keeps_the_filter():
    value = _footer(_keys("a", 130), SMALL_DYNAMIC)
    assert extended_footer(value, "DYNAMIC_V0", SMALL_DYNAMIC, pa.array([], pa.string())) == value


@pytest.mark.parametrize(
    "config",
    [
        BloomConfig("DYNAMIC_V0", num_entries=100, fpp=0.01, max_entries=250),  # other bits
        BloomConfig("DYNAMIC_V0", num_entries=101, fpp=0.001, max_entries=250),  # other row size
        BloomConfig("SIMPLE", num_entries=100, fpp=0.001, max_entries=250),  # other type
    ],
)
def test_filter_of_other_configuration_is_rebuilt(config):
    value = _footer(_keys("a", 10), SMALL_DYNAMIC)
    assert extended_footer(value, "DYNAMIC_V0", config, _keys("b", 1)) is None


def test_unreadable_header_is_rebuilt():
    assert extended_footer("not*base64", "DYNAMIC_V0", SMALL_DYNAMIC, _keys("b", 1)) is None
    legacy = base64.b64encode(struct.pack(">iBi", 7, 0, 960)).decode()  # unversioned: Jenkins
    assert extended_footer(legacy, None, SMALL_SIMPLE, _keys("b", 1)) is None


def _footers(path: str) -> dict[str, dict[str, str]]:
    """Footer entries of the latest base file of each partition (one file group each here)."""
    latest: dict[str, Path] = {}
    for f in Path(path).rglob("*.parquet"):
        if ".hoodie" in f.parts:
            continue
        instant = f.stem.rsplit("_", 1)[-1]
        if f.parent.name not in latest or instant > latest[f.parent.name].stem.rsplit("_", 1)[-1]:
            latest[f.parent.name] = f
    return {
        part: {k.decode(): v.decode() for k, v in (pq.read_metadata(f).metadata or {}).items()}
        | {"_keys": ",".join(pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist())}
        for part, f in latest.items()
    }


def _check_key_entries(meta: dict[str, str]) -> list[str]:
    keys = meta["_keys"].split(",")
    assert meta["hoodie_min_record_key"] == min(keys)
    assert meta["hoodie_max_record_key"] == max(keys)
    bloom = BloomFilter.from_footer(meta["org.apache.hudi.bloomfilter"], "DYNAMIC_V0")
    assert all(bloom.might_contain(k) for k in keys)
    return keys


def test_upserts_extend_the_filter_and_deletes_rebuild_it(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "t"), name="trips", record_key="id", partition_by="city", ordering_field="ts"
    )
    ids = [f"id-{i:04d}" for i in range(0, 2000, 2)]
    # Rows of 400 keys: the 500 keys of a partition fill one row and start a second.
    opts = {"hoodie.index.bloom.num_entries": "400", "hoodie.bloom.index.filter.dynamic.max.entries": "2000"}
    t.bulk_insert(
        pa.table({"id": ids, "city": ["x", "y"] * 500, "ts": [1] * 1000, "v": [0] * 1000}), options=opts
    )
    before = _footers(t.path)
    # Updates, and inserts below and above the stored keys (new min and max keys).
    upsert = pa.table(
        {
            "id": ids[:100] + ["id-", "id-zz"] + [f"id-{i:04d}" for i in range(1, 200, 2)],
            "city": ["x", "y"] * 51 + ["x"] * 100,
            "ts": [2] * 202,
            "v": list(range(202)),
        }
    )
    t.upsert(upsert, options=opts)
    after = _footers(t.path)
    for part, meta in after.items():
        keys = _check_key_entries(meta)
        inserted = sorted(set(keys) - set(before[part]["_keys"].split(",")))
        assert inserted, part
        # The old filter with the inserted keys added, not a rebuild over the file's keys.
        expected = extended_footer(
            before[part]["org.apache.hudi.bloomfilter"],
            "DYNAMIC_V0",
            BloomConfig("DYNAMIC_V0", 400, 1e-9, 2000),
            pa.array([k for k in upsert["id"].to_pylist() if k in set(inserted)]),
        )
        assert meta["org.apache.hudi.bloomfilter"] == expected
        assert _dynamic_header(expected) == (400, len(keys) - 400, 2)
        # The merge keeps the stored keys in place and adds new ones after them, so a filter
        # built over the file's keys in order is the same filter.
        assert expected == bloom_footer_for_keys(pa.array(keys), 400, 1e-9, 2000)
    t.delete(pa.table({"id": ["id-0000", "id-0002"], "city": ["x", "y"]}), options=opts)
    for meta in _footers(t.path).values():
        keys = _check_key_entries(meta)
        assert meta["org.apache.hudi.bloomfilter"] == bloom_footer_for_keys(pa.array(keys), 400, 1e-9, 2000)
    expected_rows = {i: (0, 1) for i in ids} | {r["id"]: (r["v"], 2) for r in upsert.to_pylist()}
    del expected_rows["id-0000"], expected_rows["id-0002"]
    expect = [{"id": k, "v": v, "ts": ts} for k, (v, ts) in sorted(expected_rows.items())]
    assert rows_by(t.read(), ["id", "v", "ts"], ["id"]) == expect
    assert rows_by(hudi_rs_read(t.path), ["id", "v", "ts"], ["id"]) == expect
