"""Partition path segments (HUDI_FORMAT §4.4): default value, URL encoding, Hive style.

Every function here works on the *distinct* values of a column and expands the result with one
``take`` at the end, so the cost per row is a dictionary lookup whatever the formatting does.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import InvalidRecordKeyError
from shoal.keygen.options import DEFAULT_PARTITION_PATH

__all__ = ["escape_path_name", "join_segments", "segments_from_strings", "segments_from_values"]

# Hive's FileUtils.escapePathName set, as Hudi's PartitionPathEncodeUtils has it: every control
# character 0x00-0x1F (the code starts its loop at 0, although the comment speaks of 0x01), DEL, and
# " # % ' * / : = ? \ { [ ] ^. Everything else, including non-ASCII, is kept.
_ESCAPED = frozenset([*map(chr, range(0x20)), *"\"#%'*/:=?\\\x7f{[]^"])
_NEEDS_ESCAPE = "[" + "".join(f"\\x{ord(c):02x}" for c in sorted(_ESCAPED)) + "]"
# A ".." path segment; like Hudi, a backslash counts as a separator too.
_TRAVERSAL = r"(^|[/\\])\.\.([/\\]|$)"


def escape_path_name(value: str) -> str:
    """Hudi's ``PartitionPathEncodeUtils.escapePathName``: listed characters become ``%XX`` (upper hex)."""
    if not value:
        return DEFAULT_PARTITION_PATH
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def segments_from_strings(
    strings: pa.Array, field: str, *, hive_style: bool, url_encode: bool
) -> tuple[pa.Array, pa.Array]:
    """Partition path segments from the values' string forms (nulls allowed).

    Null and empty values become ``__HIVE_DEFAULT_PARTITION__``; other values are URL-encoded when
    asked; Hive style prefixes ``<field>=``. Returns the distinct segments and, for every row, the
    index of its segment.
    """
    encoded = strings if pa.types.is_dictionary(strings.type) else strings.dictionary_encode()
    return segments_from_values(
        encoded.dictionary, encoded.indices, field, hive_style=hive_style, url_encode=url_encode
    )


def segments_from_values(
    values: pa.Array, indices: pa.Array, field: str, *, hive_style: bool, url_encode: bool
) -> tuple[pa.Array, pa.Array]:
    """Like :func:`segments_from_strings`, for distinct ``values`` and per-row ``indices`` into them."""
    prefix = f"{field}=" if hive_style else ""
    formatted = pc.if_else(pc.equal(values, ""), DEFAULT_PARTITION_PATH, values)
    if url_encode:
        formatted = _escape(formatted)
    if indices.null_count:
        formatted = pa.concat_arrays([formatted, pa.array([DEFAULT_PARTITION_PATH], pa.string())])
        indices = pc.fill_null(indices, pa.scalar(len(formatted) - 1, indices.type))
    if prefix:
        formatted = pc.binary_join_element_wise(prefix, formatted, "")
    check_no_traversal(formatted, field)
    return formatted, indices


def join_segments(levels: list[tuple[pa.Array, pa.Array]]) -> pa.Array:
    """Per-row partition paths from each level's distinct segments and row indices, joined by ``/``.

    The distinct combinations of levels are joined once and expanded with a single ``take``.
    """
    if len(levels) == 1:
        texts, indices = levels[0]
        return texts.take(indices)
    combined: pa.Array | None = None
    radix = 1
    for texts, indices in levels:
        if radix * max(len(texts), 1) >= 2**62:
            # Too many combinations to number: join row by row.
            return pc.binary_join_element_wise(*(t.take(i) for t, i in levels), "/")
        code = pc.multiply(indices.cast(pa.int64()), radix)
        combined = code if combined is None else pc.add(combined, code)
        radix *= max(len(texts), 1)
    assert combined is not None
    encoded = combined.dictionary_encode()
    distinct = encoded.dictionary
    parts = []
    for texts, _ in levels:
        size = max(len(texts), 1)
        parts.append(texts.take(pc.remainder(distinct, size)))
        distinct = pc.divide(distinct, size)
    return pc.binary_join_element_wise(*parts, "/").take(encoded.indices)


def _escape(values: pa.Array) -> pa.Array:
    needs = pc.match_substring_regex(values, _NEEDS_ESCAPE)
    if not pc.any(needs).as_py():
        return values
    escaped = [escape_path_name(v) for v in values.filter(needs).to_pylist()]
    return pc.replace_with_mask(values, needs, pa.array(escaped, pa.string()))


def check_no_traversal(segments: pa.Array, field: str) -> None:
    """Reject segments with a ``..`` level, which could leave the table (newer Hudi rejects them too)."""
    bad = pc.match_substring_regex(segments, _TRAVERSAL)
    if pc.any(bad).as_py():
        segment = segments[int(pc.index(bad, pa.scalar(True)).as_py())].as_py()
        raise InvalidRecordKeyError(
            f"partition field {field!r}: the partition path segment {segment!r} has a '..' level, "
            "which could write outside the table"
        )
