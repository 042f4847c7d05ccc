"""Reusing a base file's bloom filter for the file that replaces it: when a merge removes no key,
the new file's keys are the old file's plus the inserted ones, so the old filter with the inserted
keys added answers for every key of the new file. Rebuilding it hashes every key 30 times (the
default filter), which is most of what a merge spends on its footer.

Any filter holding every key of a file is correct for readers; reuse is also kept to filters that
end up shaped as a rebuilt one would be (same type, sizing and, for DYNAMIC_V0, row count), so the
false-positive rate is the configured one."""

from __future__ import annotations

import base64
import functools
import struct
from dataclasses import dataclass

import pyarrow as pa

from shoal import _native

# Hadoop `Filter` header (version -1, nbHash, hashType, vectorSize) and, for DYNAMIC_V0, the
# `InternalDynamicBloomFilter` fields after it (nr, currentNbRecord, rows): HUDI_FORMAT §6.4.
_SIMPLE_HEADER = struct.Struct(">iiBi")
_DYNAMIC_HEADER = struct.Struct(">iiBiiii")
_HADOOP_FILTER_VERSION = -1
_MURMUR_HASH = 1


@dataclass(frozen=True)
class BloomConfig:
    """The configured filter (``hoodie.bloom.index.filter.type`` and its sizing)."""

    type_code: str
    num_entries: int
    fpp: float
    max_entries: int


@dataclass(frozen=True)
class _Shape:
    nb_hash: int
    vector_size: int
    # DYNAMIC_V0 only: keys per row, keys in the active row, rows.
    nr: int = 0
    current: int = 0
    rows: int = 1


def extended_footer(
    old_value: str, old_type_code: str | None, config: BloomConfig, inserted: pa.Array
) -> str | None:
    """The footer value of the old file's filter (``old_value``, of type ``old_type_code``) with
    the ``inserted`` keys added; None when a rebuilt filter is needed instead: the old one is of
    another type or sizing, or the inserted keys would make a DYNAMIC_V0 filter grow a row."""
    type_code = old_type_code or "SIMPLE"
    if type_code != config.type_code:
        return None
    shape = _shape(old_value, type_code)
    if shape is None:
        return None
    if (shape.nb_hash, shape.vector_size) != _configured_sizing(config.num_entries, config.fpp):
        return None
    if type_code == "DYNAMIC_V0" and not _fits(shape, config, len(inserted)):
        return None
    if len(inserted) == 0:
        return old_value
    bloom = _native.BloomFilter.from_footer(old_value, old_type_code)
    bloom.add_keys(inserted)
    return str(bloom.to_footer())


def _fits(shape: _Shape, config: BloomConfig, num_inserted: int) -> bool:
    """Whether adding keys leaves a DYNAMIC_V0 filter with the rows a rebuilt one would have:
    they fit in the active row, or the filter already has all the rows its bound allows (both
    then fill existing rows round-robin)."""
    if shape.nr != config.num_entries:
        return False
    if shape.current + num_inserted <= shape.nr:
        return True
    return shape.rows * shape.nr >= config.max_entries


def _shape(value: str, type_code: str) -> _Shape | None:
    """The header fields of a footer value; None for a layout this module does not reuse
    (legacy or Jenkins-hashed filters, or a value too short to hold a header)."""
    header = _DYNAMIC_HEADER if type_code == "DYNAMIC_V0" else _SIMPLE_HEADER
    # Base64 turns every 3 bytes into 4 characters: decode just enough for the header.
    chars = -(-header.size // 3) * 4
    try:
        raw = base64.b64decode(value[:chars], validate=True)
    except ValueError:
        return None
    if len(raw) < header.size:
        return None
    fields = header.unpack_from(raw)
    if fields[0] != _HADOOP_FILTER_VERSION or fields[2] != _MURMUR_HASH:
        return None
    if type_code == "DYNAMIC_V0":
        return _Shape(fields[1], fields[3], nr=fields[4], current=fields[5], rows=fields[6])
    return _Shape(fields[1], fields[3])


@functools.lru_cache(maxsize=16)
def _configured_sizing(num_entries: int, fpp: float) -> tuple[int, int]:
    """(hash count, bits per row) of a filter sized for ``num_entries`` at ``fpp``."""
    empty = _native.BloomFilter.simple(num_entries, fpp)
    return empty.num_hashes, empty.vector_size
