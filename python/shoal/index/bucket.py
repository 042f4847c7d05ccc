"""The bucket index: Hudi's ``BUCKET`` index type with the ``SIMPLE`` engine.

Every partition has a fixed number of buckets (``hoodie.bucket.index.num.buckets``), and each
bucket is at most one file group, whose id starts with the bucket number written in 8 digits
(``00000003-<rest of a uuid>-0``). A record's bucket is computed from its key, as Hudi's
``BucketIdentifier`` computes it, so a Hudi writer and shoal agree on where every key lives:

* the hash values are the values of ``hoodie.bucket.index.hash.field`` (by default the record
  key fields) read back from the record key string: a key without ``:`` (a simple key) is
  itself the only value; otherwise the key is split on ``,`` into ``field:value`` parts with
  Java's ``String.split`` (trailing empty strings dropped, a value ends at its next ``:``);
* the hash is Java's ``List.hashCode`` of those values (``31 * h + String.hashCode``, a
  missing field counting 0), where ``String.hashCode`` runs over UTF-16 code units;
* the bucket is ``(hash & Integer.MAX_VALUE) % num_buckets``.

Tagging needs no lookup in any file: a record goes to its bucket's file group in its partition
when one exists (an update, or a new key the file group takes), and otherwise its bucket's file
group is created. Hudi records none of these options in ``hoodie.properties`` (table version 6),
so the layout is checked against the file groups themselves: ids that are not bucket ids, bucket
numbers beyond ``num_buckets`` and keys that hash to another bucket than their file group's
(a changed ``num_buckets`` or hash field, which Hudi would not notice and would then write a key
into a second file group) are refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import CorruptTableError, InvalidOptionError, InvalidRecordKeyError
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice
from shoal.index.footer import read_key_footer

BUCKET_DIGITS = 8
_MASK32 = 0xFFFFFFFF
_INT_MAX = 0x7FFFFFFF
# Strings are hashed in slices of about this many UTF-8 bytes, bounding the per-unit arrays.
_HASH_SLICE_BYTES = 1 << 22
_PART_PATTERN = r"^(?P<name>[^:]*):(?P<value>[^:]+)$"


# ---- Java hashing ------------------------------------------------------------------------------


def java_string_hashes(strings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Java's ``String.hashCode`` of each string (int32; nulls must be filled by the caller).

    ``s[0]*31^(n-1) + ... + s[n-1]`` modulo 2^32 over UTF-16 code units: a character outside the
    Basic Multilingual Plane counts as its two surrogates."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks() if strings.num_chunks != 1 else strings.chunk(0)
    if strings.null_count:
        raise ValueError("java_string_hashes takes strings without nulls")
    n = len(strings)
    out = np.zeros(n, dtype=np.uint32)
    if n == 0:
        return out.view(np.int32)
    if pa.types.is_large_string(strings.type):
        offset_type: type[np.integer] = np.int64
    elif pa.types.is_string(strings.type):
        offset_type = np.int32
    else:
        strings = strings.cast(pa.string())
        offset_type = np.int32
    _, offsets_buf, data_buf = strings.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[strings.offset : strings.offset + n + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    start = 0
    while start < n:
        stop = int(np.searchsorted(offsets, offsets[start] + _HASH_SLICE_BYTES, side="right")) - 1
        stop = min(max(stop, start + 1), n)
        lo, hi = int(offsets[start]), int(offsets[stop])
        out[start:stop] = _hash_utf8(data[lo:hi], offsets[start : stop + 1] - lo)
        start = stop
    return out.view(np.int32)


def _hash_utf8(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Java string hashes (uint32) of the strings ``data[offsets[i]:offsets[i+1]]`` (UTF-8)."""
    lengths_bytes = np.diff(offsets)
    result = np.zeros(len(lengths_bytes), dtype=np.uint32)
    if data.size == 0:
        return result
    if bool((data < 0x80).all()):
        units, unit_offsets = data.astype(np.uint32), offsets
    else:
        units, unit_offsets = _utf16_units(data, offsets)
    lengths = np.diff(unit_offsets)
    # Unit j of a string of n units weighs 31^(n-1-j): its distance to the string's end.
    ends = np.repeat(unit_offsets[1:], lengths)
    exponents = ends - 1 - np.arange(units.size, dtype=np.int64)
    contributions = units * _powers_of_31(int(lengths.max()))[exponents]  # wraps modulo 2^32
    nonempty = lengths > 0
    sums = np.add.reduceat(contributions, unit_offsets[:-1][nonempty], dtype=np.uint64)
    result[nonempty] = (sums & _MASK32).astype(np.uint32)
    return result


def _utf16_units(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-16 code units of UTF-8 ``data`` and the unit offsets of its strings."""
    lead = (data & 0xC0) != 0x80
    starts = np.flatnonzero(lead)
    padded = np.concatenate([data, np.zeros(3, dtype=np.uint8)]).astype(np.uint32)
    b0, b1, b2, b3 = (padded[starts + i] for i in range(4))
    code_points = np.where(
        b0 < 0x80,
        b0,
        np.where(
            b0 < 0xE0,
            ((b0 & 0x1F) << 6) | (b1 & 0x3F),
            np.where(
                b0 < 0xF0,
                ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F),
                ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F),
            ),
        ),
    )
    pair = code_points >= 0x10000
    per_point = 1 + pair.astype(np.int64)
    unit_before = np.concatenate([[0], np.cumsum(per_point)])
    first_unit = unit_before[:-1]
    units = np.empty(int(unit_before[-1]), dtype=np.uint32)
    supplementary = code_points[pair] - 0x10000
    units[first_unit] = code_points
    units[first_unit[pair]] = 0xD800 + (supplementary >> 10)
    units[first_unit[pair] + 1] = 0xDC00 + (supplementary & 0x3FF)
    # Strings start at lead bytes: a string's first code point is the number of leads before it.
    leads_before = np.concatenate([[0], np.cumsum(lead)])
    return units, unit_before[leads_before[offsets]]


_POWERS = np.ones(1, dtype=np.uint32)


def _powers_of_31(max_exponent: int) -> np.ndarray:
    """31^k modulo 2^32 for k up to at least ``max_exponent`` (grown and kept)."""
    global _POWERS
    if len(_POWERS) <= max_exponent:
        size = max(max_exponent + 1, 2 * len(_POWERS))
        _POWERS = np.cumprod(np.concatenate([[1], np.full(size - 1, 31)]).astype(np.uint32), dtype=np.uint32)
    return _POWERS


def _java_hash_scalar(text: str) -> int:
    """``String.hashCode`` of one string (unsigned), for the rare keys hashed one by one."""
    h = 0
    encoded = text.encode("utf-16-be")
    for i in range(0, len(encoded), 2):
        h = (31 * h + (encoded[i] << 8 | encoded[i + 1])) & _MASK32
    return h


# ---- hash values of record keys ----------------------------------------------------------------


def _java_split(text: str, sep: str) -> list[str]:
    """Java's ``text.split(sep)`` for a one-character separator: trailing empty strings are
    dropped, and a string without the separator is its own only piece."""
    if sep not in text:
        return [text]
    pieces = text.split(sep)
    while pieces and pieces[-1] == "":
        pieces.pop()
    return pieces


def _hash_values_of(key: str, fields: Sequence[str]) -> list[str | None]:
    """The hash values Hudi reads from one complex record key, or an error where Hudi's parse
    fails (a part without a value, a field named twice)."""
    pairs: dict[str, str] = {}
    for part in _java_split(key, ","):
        name_value = _java_split(part, ":")
        if len(name_value) < 2:
            raise InvalidRecordKeyError(
                f"record key {key!r} cannot be hashed by the bucket index: its part {part!r} is not "
                "field:value (Hudi splits the key on ',' and ':')"
            )
        if name_value[0] in pairs:
            raise InvalidRecordKeyError(
                f"record key {key!r} cannot be hashed by the bucket index: field {name_value[0]!r} "
                "appears twice"
            )
        pairs[name_value[0]] = name_value[1]
    return [pairs.get(f) for f in fields]


def _complex_hash_values(keys: pa.Array, fields: Sequence[str]) -> list[pa.Array]:
    """For keys holding ``:``, the value of each hash field (null where the key has none)."""
    m = len(keys)
    parts = pc.split_pattern(keys, ",")
    flat = pc.list_flatten(parts)
    parent = pc.list_parent_indices(parts).to_numpy(zero_copy_only=False)
    matched = pc.extract_regex(flat, _PART_PATTERN)
    # A part that is not exactly `name:value` (no value, several ':', empty) or a row naming a
    # field twice is parsed row by row, as Java's split would parse it.
    irregular = np.zeros(m, dtype=bool)
    bad_part = pc.is_null(matched).to_numpy(zero_copy_only=False)
    irregular[parent[bad_part]] = True
    names = pc.struct_field(matched, "name")
    values = pc.struct_field(matched, "value")
    counted = (
        pa.table({"row": parent, "name": names})
        .filter(pc.is_valid(names))
        .group_by(["row", "name"])
        .aggregate([([], "count_all")])
    )
    repeated = counted.filter(pc.greater(counted.column("count_all"), 1)).column("row")
    irregular[repeated.to_numpy()] = True
    regular_part = ~irregular[parent]
    columns = []
    for f in fields:
        here = regular_part & pc.fill_null(pc.equal(names, f), False).to_numpy(zero_copy_only=False)
        position = np.full(m, -1, dtype=np.int64)
        position[parent[here]] = np.arange(int(here.sum()))
        taken = values.filter(pa.array(here)).take(pa.array(position, mask=position < 0))
        columns.append(taken)
    if irregular.any():
        rows = np.flatnonzero(irregular)
        parsed = [_hash_values_of(k, fields) for k in keys.take(pa.array(rows)).to_pylist()]
        for i, column in enumerate(columns):
            patched = column.to_pylist()
            for row, found in zip(rows, parsed, strict=True):
                patched[row] = found[i]
            columns[i] = pa.array(patched, pa.string())
    return columns


def key_hashes(keys: pa.Array | pa.ChunkedArray, hash_fields: Sequence[str]) -> np.ndarray:
    """Java's ``List.hashCode`` of each record key's hash values (uint32)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    n = len(keys)
    hashes = np.empty(n, dtype=np.uint32)
    if n == 0:
        return hashes
    complex_rows = pc.match_substring(keys, ":").to_numpy(zero_copy_only=False)
    simple_rows = np.flatnonzero(~complex_rows)
    if len(simple_rows):
        simple = keys if len(simple_rows) == n else keys.take(pa.array(simple_rows))
        # A one-element list: 31 * 1 + hash.
        hashes[simple_rows] = java_string_hashes(simple).view(np.uint32) + np.uint32(31)
    rows = np.flatnonzero(complex_rows)
    if len(rows):
        h = np.ones(len(rows), dtype=np.uint32)
        for values in _complex_hash_values(keys.take(pa.array(rows)), hash_fields):
            element = java_string_hashes(values.fill_null("")).view(np.uint32)
            element[pc.is_null(values).to_numpy(zero_copy_only=False)] = 0
            h = h * np.uint32(31) + element
        hashes[rows] = h
    return hashes


def bucket_ids(keys: pa.Array | pa.ChunkedArray, hash_fields: Sequence[str], num_buckets: int) -> np.ndarray:
    """The bucket of each record key: ``(hash & Integer.MAX_VALUE) % num_buckets`` (int64)."""
    return (key_hashes(keys, hash_fields) & np.uint32(_INT_MAX)).astype(np.int64) % num_buckets


# ---- file ids ----------------------------------------------------------------------------------


def bucket_file_id(bucket: int) -> str:
    """A new file group id for ``bucket``: a uuid whose first 8 characters are the bucket number,
    with the ``-0`` suffix of a file group's first file (Hudi's ``newBucketFileIdPrefix``)."""
    return f"{bucket:0{BUCKET_DIGITS}d}{str(uuid.uuid4())[BUCKET_DIGITS:]}-0"


def bucket_of_file(file_id: str) -> int | None:
    """The bucket number a file group id starts with; None for an id that names no bucket."""
    head = file_id[:BUCKET_DIGITS]
    if len(head) == BUCKET_DIGITS and head.isascii() and head.isdigit():
        return int(head)
    return None


# ---- the index ---------------------------------------------------------------------------------


class BucketIndex:
    """Tags records with the file group of their bucket in their partition."""

    def __init__(self, storage: Storage, num_buckets: int, hash_fields: Sequence[str]) -> None:
        self.storage = storage
        self.num_buckets = num_buckets
        self.hash_fields = list(hash_fields)

    @classmethod
    def for_table(
        cls, storage: Storage, record_key_fields: Sequence[str], num_buckets: int, hash_field: str | None
    ) -> BucketIndex:
        """The index of a table with ``record_key_fields``; ``hash_field`` (comma-separated,
        default: the record key fields) must name record key fields, as Hudi requires."""
        fields = list(record_key_fields) if not hash_field else [f.strip() for f in hash_field.split(",")]
        unknown = [f for f in fields if f not in record_key_fields]
        if unknown or not fields:
            raise InvalidOptionError(
                f"hoodie.bucket.index.hash.field must name record key fields "
                f"({', '.join(record_key_fields)}); got {hash_field!r}"
            )
        return cls(storage, num_buckets, fields)

    def bucket_ids(self, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        return bucket_ids(keys, self.hash_fields, self.num_buckets)

    def file_groups(self, slices: Sequence[FileSlice]) -> dict[int, FileSlice]:
        """Bucket -> the partition's file group of that bucket, refusing layouts the bucket
        index cannot own."""
        out: dict[int, FileSlice] = {}
        for sl in slices:
            bucket = bucket_of_file(sl.file_id)
            where = f"file group {sl.file_id} of partition {sl.partition_path!r}"
            if bucket is None:
                raise InvalidOptionError(
                    f"hoodie.index.type=BUCKET: {where} was not written by the bucket index (its id "
                    "does not start with an 8-digit bucket number); a table written with another "
                    "index cannot switch to the bucket index"
                )
            if bucket >= self.num_buckets:
                raise InvalidOptionError(
                    f"hoodie.index.type=BUCKET: {where} is bucket {bucket}, but "
                    f"hoodie.bucket.index.num.buckets is {self.num_buckets}: the number of buckets of "
                    "a table cannot change (the simple bucket engine)"
                )
            if bucket in out:
                raise CorruptTableError(
                    f"partition {sl.partition_path!r} has two file groups of bucket {bucket}: "
                    f"{out[bucket].file_id} and {sl.file_id}"
                )
            out[bucket] = sl
        return out

    def tag(
        self, partitions: Sequence[tuple[pa.Array, Sequence[FileSlice]]], confirm: bool = True
    ) -> list[pa.Array]:
        """For each partition's keys and latest file slices: per key, the id of its bucket's file
        group, or null where the bucket has none yet. ``confirm`` is accepted for the other
        indexes' signature: a bucket index tag needs no confirmation."""
        del confirm
        tags = []
        for keys, slices in partitions:
            groups = self.file_groups(slices)
            if not groups or len(keys) == 0:
                tags.append(pa.nulls(len(keys), pa.string()))
                continue
            ids = self.bucket_ids(keys)
            buckets = sorted(groups)
            slot = np.full(self.num_buckets, -1, dtype=np.int64)
            slot[buckets] = np.arange(len(buckets))
            position = slot[ids]
            self._check_layout(groups, np.unique(ids[position >= 0]))
            file_ids = pa.array([groups[b].file_id for b in buckets], pa.string())
            tags.append(file_ids.take(pa.array(position, mask=position < 0)))
        return tags

    def _check_layout(self, groups: dict[int, FileSlice], touched: np.ndarray) -> None:
        """The min and max keys of each touched file group's base file must hash to its bucket:
        otherwise the table was written with another number of buckets or hash field."""
        for bucket in touched.tolist():
            base = groups[bucket].base_file
            if base is None:
                continue
            footer = read_key_footer(self.storage, base.path)
            stored = [k for k in (footer.min_key, footer.max_key) if k is not None]
            if not stored:
                continue
            found = self.bucket_ids(pa.array(stored, pa.string()))
            for key, other in zip(stored, found.tolist(), strict=True):
                if other != bucket:
                    raise InvalidOptionError(
                        f"hoodie.index.type=BUCKET: key {key!r} of file group {groups[bucket].file_id} "
                        f"(bucket {bucket}) hashes to bucket {other} with "
                        f"hoodie.bucket.index.num.buckets={self.num_buckets} and hash field "
                        f"{','.join(self.hash_fields)}: the table was written with other bucket "
                        "options, which cannot change"
                    )

    def arrange_inserts(self, keys: pa.Array, rows: pa.Array) -> tuple[pa.Array, list[tuple[int, int]]]:
        """``rows`` (indices into ``keys`` of records whose bucket has no file group) grouped by
        bucket, in input order within one, and the (bucket, number of records) of each group."""
        if len(rows) == 0:
            return rows, []
        ids = self.bucket_ids(keys.take(rows))
        order = np.argsort(ids, kind="stable")
        buckets, counts = np.unique(ids, return_counts=True)
        return rows.take(pa.array(order)), list(zip(buckets.tolist(), counts.tolist(), strict=True))
