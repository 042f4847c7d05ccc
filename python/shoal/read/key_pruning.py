"""Record-key pruning: a read whose filters pin the record key (``=`` or ``in`` on
``_hoodie_record_key``, or on every record key field) opens only the base files whose footers
may hold one of those keys, by their min/max record keys and bloom filters, as Hudi's bloom
index picks candidate files. A point lookup reads a footer per file instead of every file; a
merge-on-read slice whose base file holds none of the keys is read from its log files alone.

Only what the footers rule out is skipped; the filters still decide every row read. Keys are
built from field values by the table's key generator, for string and integer fields only: their
Hudi text is the value as written, in every engine.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from shoal.errors import ShoalError
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice
from shoal.index.bloom import BloomIndex
from shoal.keygen import ComplexKeyGenerator, KeyGenerator
from shoal.read.filters import Filter

RECORD_KEY = "_hoodie_record_key"

# Candidate keys beyond which the footers are not consulted: probing is cheap, but building
# every combination of several key fields' values is not.
MAX_PINNED_KEYS = 10_000


def bases_admitting(
    storage: Storage,
    slices: Sequence[FileSlice],
    filters: Sequence[Filter] | None,
    keygen: KeyGenerator,
    schema: pa.Schema | None,
) -> list[bool] | None:
    """Per slice, whether its base file may hold one of the keys ``filters`` pin, by its
    footer (a slice without a base file: True); None when the filters pin no keys."""
    keys = pinned_keys(filters, keygen, schema)
    if keys is None:
        return None
    return BloomIndex(storage).admits(keys, slices)


def without_base(sl: FileSlice) -> FileSlice:
    """``sl`` read from its log files alone: for a base file that holds none of the keys a
    read is after, whose rows the filters would drop anyway."""
    return dataclasses.replace(sl, base_file=None)


def pinned_keys(
    filters: Sequence[Filter] | None, keygen: KeyGenerator, schema: pa.Schema | None
) -> pa.Array | None:
    """The record keys a row must have to pass ``filters`` (a string array), or None when the
    filters allow any key (or pin too many to be worth a footer probe)."""
    if not filters or schema is None:
        return None
    direct = _values(filters, RECORD_KEY)
    if direct is not None:
        if len(direct) > MAX_PINNED_KEYS or not all(isinstance(v, str) for v in direct):
            return None
        return pa.array(sorted(set(direct)), pa.string())
    fields = keygen.record_key_fields
    per_field: list[list[Any]] = []
    for name in fields:
        values = _values(filters, name)
        index = schema.get_field_index(name)
        if values is None or index < 0 or not _exact_text(schema.field(index).type, values):
            return None
        per_field.append(sorted(set(values)))
    if math.prod(len(v) for v in per_field) > MAX_PINNED_KEYS:
        return None
    if not all(per_field):
        return pa.array([], pa.string())
    rows = list(zip(*itertools.product(*per_field), strict=True))
    try:
        types = [schema.field(name).type for name in fields]
        columns = pa.table({name: pa.array(col, t) for name, col, t in zip(fields, rows, types, strict=True)})
        keys = keygen.record_keys(columns)
        if isinstance(keygen, ComplexKeyGenerator) and len(fields) == 1:
            # A one-field complex key is "field:value" or the bare value (HUDI-7001): Hudi 0.14.1
            # and 0.15.0 wrote the latter without recording it in hoodie.properties, so the
            # table's generator may not be the one its files were keyed by. Probe both.
            other = ComplexKeyGenerator(fields, single_field_value_only=not keygen.single_field_value_only)
            keys = pa.concat_arrays([keys, other.record_keys(columns)])
        return keys
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, ShoalError):
        # A value the column cannot hold, or one no key is made of (an empty string): the
        # filters decide, unpruned.
        return None


def _values(filters: Sequence[Filter], column: str) -> list[Any] | None:
    """The values an ``=`` or ``in`` filter on ``column`` allows (the first such filter), or None."""
    for name, op, value in filters:
        if name != column:
            continue
        if op in ("=", "=="):
            return [value]
        if op == "in" and isinstance(value, list | tuple | set | frozenset):
            return list(value)
    return None


def _exact_text(t: pa.DataType, values: list[Any]) -> bool:
    """Whether ``values`` are all of column type ``t``, a type whose Hudi key text is exact:
    strings as they are, integers in decimal (no nulls: a complex key writes them as a
    placeholder)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return all(isinstance(v, str) for v in values)
    if pa.types.is_integer(t):
        return all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    return False
