"""Footer min/max record keys are in Java's ``String.compareTo`` order (UTF-16 code units), which
Hudi writes them in and prunes files by, not in byte (code point) order: the two part where a
supplementary character (a surrogate pair in UTF-16) meets one of U+E000..U+FFFF, which UTF-16
puts above the pair. Every expected order here comes from an oracle, ``java_key``."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
import shoal.index.bloom as bloom
import shoal.tasks.cow_write as cow_write
from shoal import _native
from shoal.index.bloom import BloomIndex
from shoal.index.footer import KeyFooter
from shoal.write.base_file import BaseFileOptions
from tests.hudi_oracle import hudi_rs_read

SMILE, PRIVATE, LAST_BMP, FIRST_SUPPLEMENTARY = "\U0001f600", "\ue000", "\uffff", "\U00010000"


def java_key(s: str) -> bytes:
    """Big-endian UTF-16 bytes compare as Java compares strings: code unit by code unit."""
    return s.encode("utf-16-be", "surrogatepass")


def java_bounds(keys: list[str]) -> tuple[str, str]:
    ordered = sorted(keys, key=java_key)
    return ordered[0], ordered[-1]


def _random_keys(rng: random.Random, n: int) -> list[str]:
    alphabet = ["a", "x", "é", "\u07ff", "\ud7ff", PRIVATE, "\uf8ff", "\ufffd", LAST_BMP]
    alphabet += [FIRST_SUPPLEMENTARY, SMILE, "\U0010ffff"]
    return ["".join(rng.choices(alphabet, k=rng.randrange(0, 6))) for _ in range(n)]


def test_key_bounds_are_in_utf16_order():
    keys = ["a" + PRIVATE, "a" + SMILE, "b"]
    assert java_bounds(keys) == ("a" + SMILE, "b")
    assert _native.key_bounds(pa.array(keys)) == ("a" + SMILE, "b")
    keys = ["b" + LAST_BMP, None, "b" + FIRST_SUPPLEMENTARY, "a" + PRIVATE, "a" + SMILE]
    # In code point order these would be ("a\ue000", "b\U00010000").
    assert _native.key_bounds(pa.array(keys, pa.large_string())) == ("a" + SMILE, "b" + LAST_BMP)
    rng = random.Random(16)
    for _ in range(200):
        keys = _random_keys(rng, rng.randrange(1, 30))
        assert _native.key_bounds(pa.array(keys)) == java_bounds(keys), keys


def test_keys_in_range_is_javas_range_test():
    lo, hi = java_bounds(["x" + SMILE, "x" + PRIVATE])
    keys = ["x" + SMILE, "x" + PRIVATE, None, "x", "x" + LAST_BMP, "x\U0001f601", "y"]
    got = _native.keys_in_range(pa.array(keys), lo, hi).to_pylist()
    assert got == [True, True, None, False, False, True, False]
    rng = random.Random(61)
    for _ in range(100):
        keys = _random_keys(rng, 40)
        lo, hi = sorted(_random_keys(rng, 2), key=java_key)
        expected = [java_key(lo) <= java_key(k) <= java_key(hi) for k in keys]
        assert _native.keys_in_range(pa.array(keys), lo, hi).to_pylist() == expected


def _prune(keys: list[str], lo: str, hi: str) -> list[str]:
    """The keys bloom index pruning keeps for a file whose footer bounds are ``lo`` and ``hi``."""
    index = BloomIndex(storage=None)  # type: ignore[arg-type]
    index._footer = lambda path: KeyFooter(lo, hi, None)  # type: ignore[method-assign]
    array = pa.array(keys, pa.string())
    found = index._prune_with_footer(array, SimpleNamespace(base_file=SimpleNamespace(path="f")))
    if found is None:
        return []
    (kept,) = found
    return array.to_pylist() if kept is None else array.take(kept).to_pylist()


def test_pruning_keeps_every_key_of_a_file_with_hudi_bounds():
    held = ["x" + SMILE, "x" + PRIVATE, "x\U0001f601"]
    lo, hi = java_bounds(held)
    assert (lo, hi) == ("x" + SMILE, "x" + PRIVATE)
    # Compared by bytes, every held key falls outside these bounds.
    assert _prune([*held, "x", "x" + LAST_BMP, "y"], lo, hi) == held
    rng = random.Random(7)
    for _ in range(100):
        keys = _random_keys(rng, 30)
        lo, hi = sorted(_random_keys(rng, 2), key=java_key)
        # A key either order admits is kept: shoal wrote bounds in byte order before.
        expected = [k for k in keys if java_key(lo) <= java_key(k) <= java_key(hi) or lo <= k <= hi]
        assert _prune(keys, lo, hi) == expected


def test_pruning_keeps_every_key_of_a_file_with_bounds_in_byte_order():
    """Files shoal wrote before its bounds were in UTF-16 order carry them in code point order:
    an upsert of their keys must still find them."""
    held = ["a", "a" + PRIVATE + "x", "a" + SMILE]
    lo, hi = min(held), max(held)  # code point order: ("a", "a\U0001f600")
    assert java_key(hi) < java_key("a" + PRIVATE + "x"), "Java's order puts this key past hi"
    assert _prune([*held, "b", "A"], lo, hi) == held


def test_ascii_bounds_keep_arrows_comparison(monkeypatch):
    def unexpected(*args):
        raise AssertionError("the exact path is for bounds with characters of U+E000 and up")

    monkeypatch.setattr(_native, "keys_in_range", unexpected)
    keys = ["0a", "5" + SMILE, "5" + PRIVATE, "9", "f"]
    # Bounds below U+E000 order every key as bytes do, whatever the keys hold.
    assert _prune(keys, "1", "a") == ["5" + SMILE, "5" + PRIVATE, "9"]


def _key_footer(keys: list[str], lo: str, hi: str) -> dict[bytes, bytes]:
    value = _native.bloom_footer_for_keys(pa.array(keys))
    return {
        b"org.apache.hudi.bloomfilter": value.encode(),
        b"hoodie_bloom_filter_type_code": b"DYNAMIC_V0",
        b"hoodie_min_record_key": lo.encode(),
        b"hoodie_max_record_key": hi.encode(),
    }


def test_merge_extending_the_footer_keeps_utf16_bounds():
    old = ["a", "a!"]
    inserted = ["a" + SMILE, "a" + PRIVATE]
    footer = _key_footer(old, *java_bounds(old))
    got = cow_write._extended_key_footer(
        footer, BaseFileOptions(table_name="t"), pa.chunked_array([pa.array(inserted)])
    )
    assert got is not None
    # Code point order would give ("a", "a\U0001f600").
    assert (got.min_key, got.max_key) == java_bounds(old + inserted) == ("a", "a" + PRIVATE)


def test_merge_recomputes_bounds_whose_order_depends_on_the_writer():
    """Old bounds holding a character from U+E000 may be in byte order (shoal before UTF-16
    bounds): extending them could leave a key outside; the bounds come from the records."""
    old = ["a" + PRIVATE, "b" + SMILE]
    for lo, hi in (java_bounds(old), (min(old), max(old))):
        footer = _key_footer(old, lo, hi)
        inserted = pa.chunked_array([pa.array(["a" + SMILE])])
        assert cow_write._extended_key_footer(footer, BaseFileOptions(table_name="t"), inserted) is None


def _base_files(path: str) -> list[Path]:
    return sorted(p for p in Path(path).rglob("*.parquet") if ".hoodie" not in p.parts)


def _footer_bounds(f: Path) -> tuple[str, str]:
    meta = pq.read_metadata(f).metadata
    return meta[b"hoodie_min_record_key"].decode(), meta[b"hoodie_max_record_key"].decode()


def _file_keys(f: Path) -> list[str]:
    return pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()


def _table(tmp_path: Path, table_type: str) -> shoal.Table:
    return shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        table_type=table_type,
        record_key="key",
        partition_by="part",
        ordering_field="ts",
    )


def _rows(keys: list[str], ts: int, v: int) -> pa.Table:
    n = len(keys)
    return pa.table({"key": keys, "part": ["p"] * n, "ts": [ts] * n, "v": [v] * n})


def _one_row_per_key(t: shoal.Table) -> dict[str, int]:
    """Key -> value of the table's rows, checking each key comes once and that hudi-rs reads the
    same rows."""
    got = t.read(columns=["key", "v"]).to_pylist()
    assert len(got) == len({r["key"] for r in got}), got
    by_hudi_rs = hudi_rs_read(t.path).select(["key", "v"]).to_pylist()
    assert sorted(by_hudi_rs, key=lambda r: r["key"]) == sorted(got, key=lambda r: r["key"])
    return {r["key"]: r["v"] for r in got}


HELD = ["x" + PRIVATE, "x" + SMILE, "x\U0001f601"]
# Inserts go to new file groups rather than the small file, where the merge would find the key
# anyway: a key the index misses is then written twice.
NO_SMALL_FILES = {"hoodie.parquet.small.file.limit": "0"}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_written_bounds_are_utf16_and_upserts_find_their_keys(tmp_path, table_type):
    t = _table(tmp_path, table_type)
    t.insert(_rows(HELD, 1, 0))
    [f] = _base_files(t.path)
    assert _footer_bounds(f) == java_bounds(_file_keys(f)) == ("x" + SMILE, "x" + PRIVATE)
    # Inside the bounds in UTF-16 order, outside them in byte order.
    t.upsert(_rows(["x" + PRIVATE, "x\U0001f601"], 2, 1), options=NO_SMALL_FILES)
    assert _one_row_per_key(t) == {"x" + PRIVATE: 1, "x" + SMILE: 0, "x\U0001f601": 1}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_upserts_find_keys_of_a_file_hudi_wrote(tmp_path, table_type, monkeypatch):
    t = _table(tmp_path, table_type)
    t.insert(_rows(HELD, 1, 0))
    real = bloom.read_key_footer

    def as_hudi_wrote_it(storage, path):
        # Hudi's bounds for the file's keys, whatever order shoal wrote them in.
        footer: KeyFooter = real(storage, path)
        lo, hi = java_bounds(_file_keys(Path(storage.full_path(path))))
        return dataclasses.replace(footer, min_key=lo, max_key=hi)

    monkeypatch.setattr(bloom, "read_key_footer", as_hudi_wrote_it)
    t.upsert(_rows(HELD, 2, 1), options=NO_SMALL_FILES)
    assert _one_row_per_key(t) == dict.fromkeys(HELD, 1)


def test_merge_inserting_keys_writes_utf16_bounds(tmp_path, monkeypatch):
    t = _table(tmp_path, "COPY_ON_WRITE")
    t.insert(_rows(["a", "a!"], 1, 0))
    extended = []
    real = cow_write._extended_key_footer

    def spy(*args):
        extended.append(real(*args))
        return extended[-1]

    monkeypatch.setattr(cow_write, "_extended_key_footer", spy)
    t.upsert(_rows(["a" + SMILE, "a" + PRIVATE], 2, 1))
    assert extended and extended[-1] is not None
    [f] = [p for p in _base_files(t.path) if len(_file_keys(p)) == 4]
    assert _footer_bounds(f) == java_bounds(_file_keys(f)) == ("a", "a" + PRIVATE)
    assert _one_row_per_key(t) == {"a": 0, "a!": 0, "a" + SMILE: 1, "a" + PRIVATE: 1}
