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
numbers beyond ``num_buckets``, two file groups of one bucket, and a file group a write touches
whose base file's min or max key hashes to another bucket are refused. The last one catches a
changed ``num_buckets`` or hash field (which Hudi would not notice: it would write a key into a
second file group) with high probability, not certainty: only two keys per touched file group
are checked, to keep tagging free of data reads.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from shoal.errors import CorruptTableError, InvalidOptionError, InvalidRecordKeyError
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice
from shoal.index.footer import read_key_footer

BUCKET_DIGITS = 8
_MASK32 = 0xFFFFFFFF
_INT_MAX = 0x7FFFFFFF
# Keys are hashed in slices of about this many UTF-8 bytes, bounding the per-unit arrays.
_HASH_SLICE_BYTES = 1 << 22
# Rows of complex keys with more parts than this are parsed one by one (no key generator writes
# them); below it, repeated field names are found by comparing each part with its neighbours.
_MAX_VECTOR_PARTS = 16
_COMMA, _COLON = ord(","), ord(":")
_INVERSE_31 = pow(31, -1, 1 << 32)


# ---- Java hashing ------------------------------------------------------------------------------
#
# String.hashCode is sum(u[j] * 31^(n-1-j)) modulo 2^32 over the UTF-16 code units u of a string.
# 31 is odd, so it has an inverse modulo 2^32, and 31^(n-1-j) = 31^(end-1) * 31^-j for a string
# ending at unit `end` of a buffer: one prefix sum of u[j] * 31^-j over the whole buffer gives the
# hash of any range of it in O(1), with no per-string loop.


class _Utf16Buffer:
    """The UTF-16 code units of a UTF-8 buffer, with prefix sums that hash any range of it."""

    def __init__(self, data: np.ndarray) -> None:
        self._unit_at: np.ndarray | None = None
        if data.size and bool((data >= 0x80).any()):
            units, self._unit_at = _utf16_units(data)
        else:
            units = data.astype(np.uint32)
        n = units.size
        self._size = n
        weighted = units * _table(_inverse_powers, n)[:n]  # wraps modulo 2^32
        self._prefix = np.concatenate([np.zeros(1, np.uint32), np.cumsum(weighted, dtype=np.uint32)])

    def hashes(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Java hashes (uint32) of the strings at byte ranges [starts, ends), which begin and end
        on character boundaries."""
        if self._unit_at is not None:
            starts, ends = self._unit_at[starts], self._unit_at[ends]
        powers = _table(_powers, self._size)
        # An empty range sums to 0 whatever power it picks.
        return powers[np.maximum(ends - 1, 0)] * (self._prefix[ends] - self._prefix[starts])


def _utf16_units(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-16 code units of UTF-8 ``data`` and, per byte position (and the end), the number
    of units before it (meaningful at the first byte of a character)."""
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
    # A code point beyond the Basic Multilingual Plane is a surrogate pair.
    pair = code_points >= 0x10000
    unit_before = np.concatenate([[0], np.cumsum(1 + pair.astype(np.int64))])
    first_unit = unit_before[:-1]
    units = np.empty(int(unit_before[-1]), dtype=np.uint32)
    supplementary = code_points[pair] - 0x10000
    units[first_unit] = code_points
    units[first_unit[pair]] = 0xD800 + (supplementary >> 10)
    units[first_unit[pair] + 1] = 0xDC00 + (supplementary & 0x3FF)
    leads_before = np.concatenate([[0], np.cumsum(lead)])
    return units, unit_before[leads_before]


def _powers(size: int) -> np.ndarray:
    return np.cumprod(np.concatenate([[1], np.full(size - 1, 31)]).astype(np.uint32), dtype=np.uint32)


def _inverse_powers(size: int) -> np.ndarray:
    steps = np.concatenate([[1], np.full(size - 1, _INVERSE_31)]).astype(np.uint32)
    return np.cumprod(steps, dtype=np.uint32)


_TABLES: dict[object, np.ndarray] = {}


def _table(make: object, size: int) -> np.ndarray:
    """``make(k)`` for some k >= max(size, 1), kept and grown by doubling."""
    table = _TABLES.get(make)
    if table is None or len(table) < size:
        length = max(size, 1, 2 * len(table) if table is not None else 1 << 16)
        table = _TABLES[make] = make(length)  # type: ignore[operator]
    return table


def _utf8(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of a string array without nulls and its offsets into them (int64, from 0)."""
    n = len(strings)
    offset_type = np.int64 if pa.types.is_large_string(strings.type) else np.int32
    _, offsets_buf, data_buf = strings.buffers()
    if offsets_buf is None or n == 0:
        return np.zeros(0, np.uint8), np.zeros(n + 1, np.int64)
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[strings.offset : strings.offset + n + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data[offsets[0] : offsets[-1]], offsets - offsets[0]


def _plain_strings(strings: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks() if strings.num_chunks != 1 else strings.chunk(0)
    if pa.types.is_dictionary(strings.type):
        strings = strings.dictionary_decode()
    if not (pa.types.is_string(strings.type) or pa.types.is_large_string(strings.type)):
        strings = strings.cast(pa.string())
    if strings.null_count:
        raise ValueError("Java hashes are computed for strings without nulls")
    return strings


def _row_slices(strings: pa.Array) -> list[tuple[int, int]]:
    """Row ranges of about ``_HASH_SLICE_BYTES`` bytes each (at least one row)."""
    _, offsets = _utf8(strings)
    n, out, start = len(strings), [], 0
    while start < n:
        stop = int(np.searchsorted(offsets, offsets[start] + _HASH_SLICE_BYTES, side="right")) - 1
        stop = min(max(stop, start + 1), n)
        out.append((start, stop))
        start = stop
    return out


def java_string_hashes(strings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Java's ``String.hashCode`` of each string (int32; no nulls), over UTF-16 code units: a
    character outside the Basic Multilingual Plane counts as its two surrogates."""
    strings = _plain_strings(strings)
    out = np.zeros(len(strings), dtype=np.uint32)
    for lo, hi in _row_slices(strings):
        data, offsets = _utf8(strings.slice(lo, hi - lo))
        out[lo:hi] = _Utf16Buffer(data).hashes(offsets[:-1], offsets[1:])
    return out.view(np.int32)


def _java_hash_scalar(text: str) -> int:
    """``String.hashCode`` of one string (unsigned), for the rare keys hashed one by one."""
    h = 0
    encoded = text.encode("utf-16-be")
    for i in range(0, len(encoded), 2):
        h = (31 * h + (encoded[i] << 8 | encoded[i + 1])) & _MASK32
    return h


def _java_list_hash_scalar(values: Sequence[str | None]) -> int:
    h = 1
    for v in values:
        h = (31 * h + (0 if v is None else _java_hash_scalar(v))) & _MASK32
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


def key_hashes(keys: pa.Array | pa.ChunkedArray, hash_fields: Sequence[str]) -> np.ndarray:
    """Java's ``List.hashCode`` of each record key's hash values (uint32)."""
    keys = _plain_strings(keys)
    out = np.empty(len(keys), dtype=np.uint32)
    for lo, hi in _row_slices(keys):
        out[lo:hi] = _key_hashes(keys.slice(lo, hi - lo), hash_fields)
    return out


def _key_hashes(keys: pa.Array, fields: Sequence[str]) -> np.ndarray:
    data, offsets = _utf8(keys)
    buffer = _Utf16Buffer(data)
    starts, ends = offsets[:-1], offsets[1:]
    # A key without ':' is the one-element list [key]: 31 * 1 + hash.
    hashes = buffer.hashes(starts, ends) + np.uint32(31)
    is_colon = data == _COLON
    colons = np.flatnonzero(is_colon)
    if colons.size == 0:
        return hashes
    colons_before = _count_before(is_colon)
    complex_rows = colons_before[ends] > colons_before[starts]
    if complex_rows.any():
        rows = np.flatnonzero(complex_rows)
        hashes[rows] = _complex_key_hashes(
            keys, data, buffer, starts[rows], ends[rows], rows, (colons, colons_before), fields
        )
    return hashes


def _complex_key_hashes(
    keys: pa.Array,
    data: np.ndarray,
    buffer: _Utf16Buffer,
    starts: np.ndarray,
    ends: np.ndarray,
    rows: np.ndarray,
    colon_index: tuple[np.ndarray, np.ndarray],
    fields: Sequence[str],
) -> np.ndarray:
    """List hashes of the complex keys at byte ranges [starts, ends) (rows ``rows`` of
    ``keys``): parts between commas, each `name:value` with exactly one ':' and a value; other
    keys are parsed one by one, with Java's split."""
    m = len(rows)
    colons, colons_before = colon_index
    is_comma = data == _COMMA
    commas = np.flatnonzero(is_comma)
    commas_before = _count_before(is_comma)
    # The commas inside each of these keys, in order.
    first_comma = commas_before[starts]
    per_row = commas_before[ends] - first_comma
    inside = commas[np.repeat(first_comma, per_row) + _ranks_within(per_row)]
    parts_per_row = per_row + 1
    part_row = np.repeat(np.arange(m), parts_per_row)
    # A key's first part starts at the key, its last ends with it; commas bound the others.
    first_part = np.cumsum(parts_per_row) - parts_per_row
    last_part = first_part + per_row
    part_starts = np.empty(len(part_row), dtype=np.int64)
    part_ends = np.empty(len(part_row), dtype=np.int64)
    after_comma = np.ones(len(part_row), dtype=bool)
    after_comma[first_part] = False
    part_starts[first_part] = starts
    part_starts[after_comma] = inside + 1
    before_comma = np.ones(len(part_row), dtype=bool)
    before_comma[last_part] = False
    part_ends[last_part] = ends
    part_ends[before_comma] = inside
    first_colon = colons_before[part_starts]
    colon_count = colons_before[part_ends] - first_colon
    colon = colons[np.minimum(first_colon, len(colons) - 1)]
    regular = (colon_count == 1) & (colon + 1 < part_ends)
    irregular = np.zeros(m, dtype=bool)
    irregular[part_row[~regular]] = True
    irregular[parts_per_row > _MAX_VECTOR_PARTS] = True
    # A field named twice in a key fails Hudi's parse: equal names have equal hashes and
    # lengths, so rows with a repeated (hash, length) go to the exact row-by-row parse.
    name_hash = buffer.hashes(part_starts, colon)
    name_length = colon - part_starts
    for distance in range(1, min(int(parts_per_row.max()), _MAX_VECTOR_PARTS)):
        same = (
            (part_row[distance:] == part_row[:-distance])
            & (name_hash[distance:] == name_hash[:-distance])
            & (name_length[distance:] == name_length[:-distance])
        )
        irregular[part_row[distance:][same]] = True
    value_hash = buffer.hashes(np.minimum(colon + 1, part_ends), part_ends)
    hashes = np.ones(m, dtype=np.uint32)
    for field in fields:
        name = np.frombuffer(field.encode(), dtype=np.uint8)
        candidates = np.flatnonzero(regular & (name_length == len(name)))
        for i, byte in enumerate(name):
            candidates = candidates[data[part_starts[candidates] + i] == byte]
        element = np.zeros(m, dtype=np.uint32)  # a field the key lacks hashes as null: 0
        element[part_row[candidates]] = value_hash[candidates]
        hashes = hashes * np.uint32(31) + element
    if irregular.any():
        odd = np.flatnonzero(irregular)
        odd_keys = keys.take(pa.array(rows[odd])).to_pylist()
        hashes[odd] = [_java_list_hash_scalar(_hash_values_of(k, fields)) for k in odd_keys]
    return hashes


def _count_before(mask: np.ndarray) -> np.ndarray:
    """Per position (and the end): how many of the positions before it are set."""
    counts = np.empty(mask.size + 1, dtype=np.int32 if mask.size < 1 << 31 else np.int64)
    counts[0] = 0
    np.cumsum(mask, out=counts[1:])
    return counts


def _ranks_within(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., c-1 for each count c, concatenated."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    group_start = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total, dtype=np.int64) - group_start


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
            tags.append(self._tag_ids(self.bucket_ids(keys), groups))
        return tags

    def tag_buckets(self, ids: np.ndarray, slices: Sequence[FileSlice]) -> pa.Array:
        """:meth:`tag` for bucket numbers rather than keys: per bucket number of ``ids`` (int64),
        the id of its file group among one partition's latest ``slices``, or null; refuses the
        same layouts. The Spark write's tasks hash the keys and send the driver bucket numbers."""
        groups = self.file_groups(slices)
        if not groups or len(ids) == 0:
            return pa.nulls(len(ids), pa.string())
        return self._tag_ids(np.asarray(ids, dtype=np.int64), groups)

    def _tag_ids(self, ids: np.ndarray, groups: dict[int, FileSlice]) -> pa.Array:
        buckets = np.array(sorted(groups), dtype=np.int64)
        position = np.minimum(np.searchsorted(buckets, ids), len(buckets) - 1)
        position[buckets[position] != ids] = -1
        self._check_layout(groups, np.unique(ids[position >= 0]))
        file_ids = pa.array([groups[b].file_id for b in buckets.tolist()], pa.string())
        return file_ids.take(pa.array(position, mask=position < 0))

    def _check_layout(self, groups: dict[int, FileSlice], touched: np.ndarray) -> None:
        """The min and max keys of each touched file group's base file must hash to its bucket:
        otherwise the table was written with another number of buckets or hash field."""
        stored: list[tuple[str, int]] = []
        for bucket in touched.tolist():
            base = groups[bucket].base_file
            if base is not None:
                footer = read_key_footer(self.storage, base.path)
                stored += [(k, bucket) for k in (footer.min_key, footer.max_key) if k is not None]
        if not stored:
            return
        found = self.bucket_ids(pa.array([k for k, _ in stored], pa.string())).tolist()
        for (key, bucket), other in zip(stored, found, strict=True):
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
