"""The key hash of Spark writes (``shoal.spark.keys.key_hash``): new keys go to insert slots and
positions by it, so its values must not change with how a batch is laid out or computed."""

from __future__ import annotations

import pyarrow as pa

from shoal.spark.keys import key_hash

_MASK = (1 << 64) - 1


def _mix(h: int) -> int:
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK
    return h ^ (h >> 31)


def _model(key: str) -> int:
    """The hash as documented: the length, then each zero-padded little-endian 8-byte word of
    the key, or of its first and its last 64 bytes when longer."""
    data = key.encode()
    h = _mix((len(data) * 0x9E3779B97F4A7C15) & _MASK)
    parts = [data] if len(data) <= 64 else [data[:64], data[-64:]]
    for part in parts:
        for at in range(0, len(part), 8):
            h = _mix(h ^ int.from_bytes(part[at : at + 8].ljust(8, b"\0"), "little"))
    return h


def _keys() -> list[str]:
    text = "".join(chr(ord("a") + i % 26) for i in range(150))
    return [text[:n] for n in range(150)] + ["ünïcödé-ключ", "ü" * 40, "26d4c6a1-3c2b-4f0e-9d1a-7e5f166d1e04"]


def test_every_key_length_hashes_as_documented():
    keys = _keys()
    assert key_hash(pa.array(keys)).tolist() == [_model(k) for k in keys]


def test_the_hash_of_a_key_does_not_depend_on_its_batch():
    keys = _keys()
    expected = [_model(k) for k in keys]
    chunked = pa.chunked_array([pa.array(keys[:7]), pa.array(keys[7:])])
    assert key_hash(chunked).tolist() == expected
    assert key_hash(pa.array(keys).slice(30, 40)).tolist() == expected[30:70]
    assert key_hash(pa.array(keys, pa.large_string())).tolist() == expected
    assert key_hash(pa.array([], pa.string())).tolist() == []
