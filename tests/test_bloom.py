"""Bloom filters through the bindings: HUDI_FORMAT §11 vectors and byte-identical rebuilds of the
filters Apache Hudi wrote into the fixture tables' base-file footers."""

from __future__ import annotations

import base64
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shoal import _native
from shoal.errors import CorruptDataError, InvalidArgumentError, UnsupportedError

FOOTER_KEY = b"org.apache.hudi.bloomfilter"
TYPE_KEY = b"hoodie_bloom_filter_type_code"

# COW and MOR, table versions 6 and 8, simple / complex / time-based keys.
FIXTURES = [
    "cow_v6_complexkeygen_hivestyle",
    "cow_v6_nonpartitioned",
    "cow_v6_timebasedkeygen_nonhivestyle",
    "cow_v8_complexkeygen_hivestyle",
    "cow_v8_nonpartitioned",
    "cow_v8_simplekeygen_nonhivestyle",
    "mor_avro_v6_trips_8i3d",
    "mor_avro_v8_trips_8i3u1d",
    "mor_parquet_v6_complexkeygen_hivestyle",
    "mor_parquet_v6_nonpartitioned_rollback",
]


def test_spec_simple_vector():
    f = _native.BloomFilter.simple(2, 0.01)
    assert (f.num_hashes, f.vector_size, f.type_code) == (7, 20, "SIMPLE")
    f.add("key1")
    f.add("key2")
    assert f.to_footer() == "/////wAAAAcBAAAAFHggDQ=="
    assert f.serialize() == base64.b64decode("/////wAAAAcBAAAAFHggDQ==")
    keys = pa.array(["key1", "key2"])
    assert _native.bloom_footer_for_keys(keys, 2, 0.01, type_code="SIMPLE") == "/////wAAAAcBAAAAFHggDQ=="


def test_spec_dynamic_vector():
    expected = "/////wAAAAcBAAAAFAAAAAIAAAADAAAAAv////8AAAAHAQAAABS99A7/////AAAABwEAAAAUTvcC"
    f = _native.BloomFilter.dynamic_v0(2, 0.01, 4)
    f.add_keys(pa.array(["a", "b", "c", "d", "e"]))
    assert f.to_footer() == expected
    assert f.type_code == "DYNAMIC_V0"
    back = _native.BloomFilter.from_footer(expected, "DYNAMIC_V0")
    assert back.to_footer() == expected
    assert all(back.might_contain(k) for k in "abcde")


def test_spec_default_sizing_and_fixture_prefix():
    f = _native.BloomFilter.dynamic_v0()
    assert (f.num_hashes, f.vector_size) == (30, 2_587_966)
    f.add("3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04")
    f.add("c8abbe79-8d89-47ea-b4ce-4d224bae5bfa")
    footer = f.to_footer()
    assert len(footer) == 431_380
    assert footer.startswith("/////wAAAB4BACd9PgAA6mAAAAACAAAAAf////8AAAAeAQAnfT4AAAAA")


def _base_files_with_filters(root):
    """(path, footer value, type code, record keys) of every base file carrying a bloom filter."""
    out = []
    for path in sorted(root.rglob("*.parquet")):
        meta = pq.read_metadata(path).metadata or {}
        if FOOTER_KEY not in meta:
            continue
        keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0).combine_chunks()
        type_code = meta.get(TYPE_KEY)
        out.append((path, meta[FOOTER_KEY].decode(), type_code.decode() if type_code else None, keys))
    return out


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_filters_rebuild_byte_identically(fixture_table, name):
    files = _base_files_with_filters(fixture_table(name))
    assert files, f"{name} has no base file with a bloom filter"
    for path, footer, type_code, keys in files:
        rebuilt = _native.bloom_footer_for_keys(keys, type_code=type_code or "SIMPLE")
        assert rebuilt == footer, path.name
        parsed = _native.BloomFilter.from_footer(footer, type_code)
        assert parsed.to_footer() == footer
        assert parsed.type_code == (type_code or "SIMPLE")


@pytest.mark.parametrize("name", ["mor_avro_v6_trips_8i3d", "cow_v8_complexkeygen_hivestyle"])
def test_batch_probe_agrees_with_single_probe(fixture_table, name):
    files = _base_files_with_filters(fixture_table(name))
    all_keys = [k for *_, keys in files for k in keys.to_pylist()]
    absent = [str(uuid.UUID(int=i * 0x9E3779B97F4A7C15 % (1 << 128))) for i in range(500)]
    probe_keys = [*all_keys, *absent, None, "", "é"]
    for _, footer, type_code, keys in files:
        f = _native.BloomFilter.from_footer(footer, type_code)
        expected = [None if k is None else f.might_contain(k) for k in probe_keys]
        assert all(f.might_contain(k) for k in keys.to_pylist())
        for arr in (
            pa.array(probe_keys, pa.string()),
            pa.array(probe_keys, pa.large_string()),
            pa.array(probe_keys, pa.string_view()),
        ):
            got = f.might_contain_batch(arr)
            assert isinstance(got, pa.BooleanArray)
            assert got.to_pylist() == expected


def test_corrupt_footers_raise_corrupt_data_error():
    good = _native.bloom_footer_for_keys(pa.array(["k1", "k2"]), 10, 0.01)
    raw = base64.b64decode(good)
    bad_values = [
        "not base64 at all!",
        base64.b64encode(raw[: len(raw) // 2]).decode(),
        base64.b64encode(raw[:3]).decode(),
        base64.b64encode(raw + b"\x00").decode(),
        base64.b64encode(b"\x00\x00\x00\x00" + raw[4:]).decode(),
        "",
    ]
    for value in bad_values:
        with pytest.raises(CorruptDataError):
            _native.BloomFilter.from_footer(value, "DYNAMIC_V0")
    # A dynamic filter read as SIMPLE leaves its rows as trailing bytes.
    with pytest.raises(CorruptDataError):
        _native.BloomFilter.from_footer(good, None)
    with pytest.raises(UnsupportedError):
        _native.BloomFilter.from_footer(good, "DYNAMIC_V9")


def test_argument_errors():
    f = _native.BloomFilter.dynamic_v0(10, 0.01, 20)
    before = f.serialize()
    with pytest.raises(InvalidArgumentError):
        f.add_keys(pa.array(["a", None]))
    assert f.serialize() == before
    with pytest.raises(UnsupportedError):
        f.add_keys(pa.array([1, 2]))
    with pytest.raises(UnsupportedError):
        f.might_contain_batch(pa.array([1.5]))
    with pytest.raises(InvalidArgumentError):
        _native.BloomFilter.simple(10, 1.5)
    with pytest.raises(InvalidArgumentError):
        _native.BloomFilter.dynamic_v0(0)
    with pytest.raises(InvalidArgumentError):
        _native.bloom_footer_for_keys(pa.array([None], pa.string()))
