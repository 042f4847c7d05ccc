"""Partition pruning: which partitions a read's filters may find rows in, from their paths.

A partition is dropped only when the values its path stands for provably fail the filters. The
path holds each partition field's value as the key generator wrote it: URL-encoded or not,
``__HIVE_DEFAULT_PARTITION__`` for null and empty values, a formatted date for the timestamp-based
generator. What cannot be turned back into the column's value exactly is not pruned on: the
row filters applied to what is read decide for those rows.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from shoal.errors import ShoalError
from shoal.keygen import (
    ComplexKeyGenerator,
    CustomKeyGenerator,
    SimpleKeyGenerator,
    SimplePartitionPart,
    escape_path_name,
    java_strings,
    key_generator_from_properties,
)
from shoal.keygen.options import DEFAULT_PARTITION_PATH
from shoal.read.filters import Filter, columns_of, to_expression

if TYPE_CHECKING:
    from shoal.config.table_config import TableConfig

# Column types whose Hudi string form (``java_strings``) is one-to-one and parses back exactly.
# Floats are left out: a value written as float32 reads back widened to float64 after a schema
# change, so the text of the path is not the value the row holds; timestamps are written as epoch
# numbers (or at millisecond precision) that Arrow does not parse back.
_EXACT_TYPES = (
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_string_view,
    pa.types.is_integer,
    pa.types.is_boolean,
    pa.types.is_decimal,
    pa.types.is_date32,
)
# The default partition of Hudi before 0.12 (null and empty values), still found in old tables.
_LEGACY_DEFAULT_PARTITION_PATH = "default"
_ESCAPE = re.compile("%([0-9A-F]{2})")


@dataclass(frozen=True)
class PartitionLayout:
    """How a table's partition paths hold its partition field values.

    Attributes:
        fields: the partition fields, in path order.
        hive_style: segments are ``<field>=<value>``.
        url_encode: values are URL-encoded (``hoodie.datasource.write.partitionpath.urlencode``);
            None when not known, so that both readings of a segment are kept.
        value_fields: the fields whose segment is the column's value as Hudi writes it (the simple
            and complex key generators, a custom generator's SIMPLE parts). Other fields, such as
            a timestamp-based generator's formatted dates, are never pruned on.
    """

    fields: tuple[str, ...]
    hive_style: bool
    url_encode: bool | None
    value_fields: frozenset[str]

    @classmethod
    def of_table(cls, config: TableConfig) -> PartitionLayout:
        """The layout ``hoodie.properties`` describes. A key generator shoal cannot build or
        invert leaves no field to prune on."""
        fields = tuple(config.partition_fields)
        return cls(
            fields, config.hive_style_partitioning, config.url_encode_partitioning, _value_fields(config)
        )


def _value_fields(config: TableConfig) -> frozenset[str]:
    try:
        keygen = key_generator_from_properties(config.as_dict())
    except ShoalError:
        # An unknown or unsupported generator: its paths may hold anything.
        return frozenset()
    if tuple(keygen.partition_fields) != tuple(config.partition_fields):
        return frozenset()
    # Exact types: a subclass could format its values differently.
    if type(keygen) in (SimpleKeyGenerator, ComplexKeyGenerator):
        return frozenset(keygen.partition_fields)
    if type(keygen) is CustomKeyGenerator:
        return frozenset(p.field for p in keygen.partition_parts if type(p) is SimplePartitionPart)
    return frozenset()


def split_partition_path(
    partition_path: str, fields: Sequence[str], hive_style: bool
) -> dict[str, str] | None:
    """The text of each partition field's segment in a path (still URL-encoded, if it was), or None
    when the path cannot be split into one segment per field: a value holding ``/`` (written
    without URL encoding) gives more segments than fields, and which of them belongs to which field
    is then ambiguous."""
    if not fields:
        return {}
    segments = partition_path.split("/") if partition_path else []
    if len(segments) != len(fields):
        return None
    if not hive_style:
        return dict(zip(fields, segments, strict=True))
    out = {}
    for name, seg in zip(fields, segments, strict=True):
        prefix = f"{name}="
        if not seg.startswith(prefix):
            return None
        out[name] = seg[len(prefix) :]
    return out


def unescape_path_name(text: str) -> str | None:
    """The value ``escape_path_name`` turned into ``text``, or None if it could not have written
    ``text`` (a ``%`` not starting an escape, a character it would have escaped, lower-case hex)."""
    value = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    return value if value and escape_path_name(value) == text else None


def _decoded_texts(text: str, url_encode: bool | None) -> list[str] | None:
    """The values a (non-default) segment text may stand for, as text; None if not known."""
    if url_encode is False:
        return [text]
    decoded = unescape_path_name(text)
    if url_encode:
        return None if decoded is None else [decoded]
    return [text] if decoded is None or decoded == text else [text, decoded]


def _parse(texts: list[str], typ: pa.DataType, field: str) -> list[Any] | None:
    """The values of type ``typ`` Hudi writes as ``texts``; None if any text has no such value or
    the type's text form is not known to be one-to-one."""
    if not any(check(typ) for check in _EXACT_TYPES):
        return None
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        return list(texts)
    try:
        parsed = pa.array(texts, pa.string()).cast(typ)
        # The round trip rules out texts the cast accepts but Hudi would not write ("012", "1"
        # for true): their column value would be written differently, so this is not it.
        if java_strings(parsed, field).to_pylist() != texts:
            return None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ShoalError):
        return None
    return parsed.to_pylist()


def _candidates(text: str, typ: pa.DataType, field: str, url_encode: bool | None) -> list[Any] | None:
    """Every value the field may hold in a partition whose segment reads ``text``; None if not known."""
    stringy = pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ)
    if text in (DEFAULT_PARTITION_PATH, _LEGACY_DEFAULT_PARTITION_PATH):
        # Null and empty values are written so, and so is a value equal to the text itself.
        own = _parse([text], typ, field) or []
        return [None, *own, *([""] if stringy else [])]
    if not text:
        # Hudi never writes an empty segment (an empty value goes to the default partition).
        return None
    texts = _decoded_texts(text, url_encode)
    return None if texts is None else _parse(texts, typ, field)


def prune_partitions(
    partitions: Sequence[str],
    filters: Sequence[Filter] | None,
    fields: Sequence[str],
    hive_style: bool,
    schema: pa.Schema | None,
    *,
    config: TableConfig | None = None,
) -> list[str]:
    """The partitions whose rows may pass ``filters``: a partition is dropped only when every value
    its path can stand for fails a filter on a partition field. The row filters must still be
    applied to what is read from the kept partitions.

    ``config`` (the table's ``hoodie.properties``) tells how the paths were written: URL encoding
    and the key generator, whose formatted fields (timestamp-based partitions) are not pruned on.
    Without it, ``fields`` and ``hive_style`` describe the layout and the values are taken to be
    written as the simple key generator does; a segment that may be URL-encoded is read both ways.
    """
    if config is not None:
        layout = PartitionLayout.of_table(config)
    else:
        layout = PartitionLayout(tuple(fields), hive_style, None, frozenset(fields))
    if schema is None:
        return list(partitions)
    prunable = {n for n in layout.value_fields if n in schema.names}
    relevant = [f for f in filters or () if f[0] in prunable]
    if not relevant:
        return list(partitions)
    names = sorted(columns_of(relevant))
    types = {n: schema.field(n).type for n in names}
    cache: dict[tuple[str, str], list[Any] | None] = {}
    # Partitions grouped by the fields their paths tell, each group filtered as one table of
    # (partition number, candidate values) rows: one Arrow call per group, not per partition.
    groups: dict[tuple[str, ...], list[tuple[int, list[tuple[Any, ...]]]]] = {}
    keep = [False] * len(partitions)
    for i, p in enumerate(partitions):
        texts = split_partition_path(p, layout.fields, layout.hive_style)
        if texts is None:
            keep[i] = True
            continue
        known: dict[str, list[Any]] = {}
        for n in names:
            key = (n, texts[n])
            if key not in cache:
                cache[key] = _candidates(texts[n], types[n], n, layout.url_encode)
            values = cache[key]
            if values is not None:
                known[n] = values
        if not known:
            keep[i] = True
            continue
        groups.setdefault(tuple(known), []).append((i, list(itertools.product(*known.values()))))
    for group_names, members in groups.items():
        expr = to_expression([f for f in relevant if f[0] in group_names])
        rows = [(i, combo) for i, combos in members for combo in combos]
        marker = "\0partition"  # not a column name a filter can take
        arrays = [pa.array([i for i, _ in rows], pa.int64())]
        arrays += [pa.array([combo[j] for _, combo in rows], types[n]) for j, n in enumerate(group_names)]
        try:
            table = pa.Table.from_arrays(arrays, names=[marker, *group_names])
            passed = table.filter(expr).column(0).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            # Filters check_filters let through but Arrow cannot evaluate here: prune nothing.
            passed = [i for i, _ in members]
        for i in passed:
            keep[i] = True
    return [p for p, k in zip(partitions, keep, strict=True) if k]
