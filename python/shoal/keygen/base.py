"""The key generator interface and the record-key / partition-path building blocks.

A key generator turns rows into a ``HoodieKey``: the record key (``_hoodie_record_key``) and the
relative partition path (``_hoodie_partition_path``). shoal's generators reproduce, byte for byte,
the strings Apache Hudi's generators of the same name write, and work on whole Arrow batches.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import InvalidOptionError, InvalidRecordKeyError
from shoal.keygen import options as opt
from shoal.keygen.partition import join_segments, segments_from_strings
from shoal.keygen.values import column, first_true, java_strings

__all__ = ["KeyGenerator", "PartitionPart", "SimplePartitionPart"]

_HUDI_PACKAGE = "org.apache.hudi.keygen."

Data: TypeAlias = pa.Table | pa.RecordBatch


class PartitionPart(abc.ABC):
    """One level of a partition path, computed from one field."""

    field: str

    @abc.abstractmethod
    def segments(self, data: Data, generator: KeyGenerator) -> tuple[pa.Array, pa.Array]:
        """The segments of the rows (Hive prefix and URL encoding applied).

        Returned as the distinct segment strings and, for every row, the index of its segment.
        """

    @abc.abstractmethod
    def spec(self) -> str:
        """How the part is written in a CustomKeyGenerator field list (``field:TYPE``)."""

    def table_properties(self) -> dict[str, str]:
        """Settings of this part to persist in ``hoodie.properties``."""
        return {}


class SimplePartitionPart(PartitionPart):
    """A partition level holding the field's value as is (Hudi's ``SimpleKeyGenerator`` semantics)."""

    def __init__(self, field: str) -> None:
        self.field = field

    def segments(self, data: Data, generator: KeyGenerator) -> tuple[pa.Array, pa.Array]:
        strings = java_strings(
            column(data, self.field, "partition"),
            self.field,
            consistent_logical_timestamp=generator.consistent_logical_timestamp,
        )
        return segments_from_strings(
            strings,
            self.field,
            hive_style=generator.hive_style_partitioning,
            url_encode=generator.url_encode_partition_path,
        )

    def spec(self) -> str:
        return f"{self.field}:SIMPLE"


class KeyGenerator(abc.ABC):
    """Computes Hudi record keys and partition paths for Arrow data.

    Attributes:
        record_key_fields: the fields making up the record key, in key order (dotted paths reach
            into struct columns).
        partition_fields: the fields making up the partition path, in path order (``[]`` when the
            table is not partitioned).
        hive_style_partitioning: partition segments are ``<field>=<value>``
            (``hoodie.datasource.write.hive_style_partitioning``).
        url_encode_partition_path: partition values are escaped Hive-style
            (``hoodie.datasource.write.partitionpath.urlencode``).
        consistent_logical_timestamp: timestamp values render as date-times instead of epoch numbers
            (``hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled``).

    Subclasses set ``TYPE_NAME`` (``hoodie.table.keygenerator.type``) and ``CLASS_NAME``
    (``hoodie.table.keygenerator.class``).
    """

    TYPE_NAME: str
    CLASS_NAME: str

    def __init__(
        self,
        record_key_fields: Sequence[str],
        partition_parts: Sequence[PartitionPart] = (),
        *,
        hive_style_partitioning: bool = False,
        url_encode_partition_path: bool = False,
        consistent_logical_timestamp: bool = False,
    ) -> None:
        self.record_key_fields: list[str] = list(record_key_fields)
        if not self.record_key_fields or any(not f for f in self.record_key_fields):
            raise InvalidOptionError(f"{type(self).__name__} needs at least one record key field")
        self._parts: list[PartitionPart] = list(partition_parts)
        self.partition_fields: list[str] = [p.field for p in self._parts]
        self.hive_style_partitioning = hive_style_partitioning
        self.url_encode_partition_path = url_encode_partition_path
        self.consistent_logical_timestamp = consistent_logical_timestamp

    # ---- the interface -------------------------------------------------------------------

    @abc.abstractmethod
    def record_keys(self, data: Data) -> pa.Array:
        """The record key of every row: a ``string`` array without nulls.

        Raises:
            InvalidRecordKeyError: a key field is missing from ``data``, or a row's key is null or
                empty (the message names the field and the first offending row).
        """

    def partition_paths(self, data: Data) -> pa.Array:
        """The relative partition path of every row: a ``string`` array, ``""`` when not partitioned.

        Raises:
            InvalidRecordKeyError: a partition field is missing from ``data`` or has a value that
                cannot be turned into a partition path.
        """
        if not self._parts:
            return pc.fill_null(pa.nulls(data.num_rows, pa.string()), "")
        return join_segments([part.segments(data, self) for part in self._parts])

    @property
    def class_name(self) -> str:
        """The Java class, as in ``hoodie.table.keygenerator.class`` (table version 6)."""
        return self.CLASS_NAME

    @property
    def type_name(self) -> str:
        """The generator type, as in ``hoodie.table.keygenerator.type`` (table version 8)."""
        return self.TYPE_NAME

    def table_properties(self, table_version: int | None = None) -> dict[str, str]:
        """The ``hoodie.properties`` entries that describe this generator.

        Record key and partition fields, the generator (``hoodie.table.keygenerator.class`` for
        table version 6, ``hoodie.table.keygenerator.type`` for 8 and later; both when
        ``table_version`` is None), Hive-style partitioning and URL encoding, plus generator
        specific settings (``hoodie.keygen.timebased.*``).
        """
        props = {opt.RECORDKEY_FIELDS: ",".join(self.record_key_fields)}
        if self._parts:
            typed = table_version is not None and table_version >= 8
            props[opt.PARTITION_FIELDS] = ",".join(self._partition_field_specs(typed))
        if table_version is None or table_version < 8:
            props[opt.KEYGENERATOR_CLASS] = self.class_name
        if table_version is None or table_version >= 8:
            props[opt.KEYGENERATOR_TYPE] = self.type_name
        props[opt.HIVE_STYLE_PARTITIONING] = opt.bool_text(self.hive_style_partitioning)
        props[opt.URL_ENCODE_PARTITIONING] = opt.bool_text(self.url_encode_partition_path)
        if self.consistent_logical_timestamp:
            props[opt.CONSISTENT_LOGICAL_TIMESTAMP] = "true"
        for part in self._parts:
            props.update(part.table_properties())
        return props

    def _partition_field_specs(self, typed: bool) -> list[str]:
        return list(self.partition_fields)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(record_key_fields={self.record_key_fields!r}, "
            f"partition_fields={self.partition_fields!r}, "
            f"hive_style_partitioning={self.hive_style_partitioning}, "
            f"url_encode_partition_path={self.url_encode_partition_path})"
        )

    # ---- record key building blocks ------------------------------------------------------

    def _key_strings(self, data: Data, field: str) -> pa.Array:
        return java_strings(
            column(data, field, "record key"),
            field,
            consistent_logical_timestamp=self.consistent_logical_timestamp,
        )

    def _simple_keys(self, data: Data) -> pa.Array:
        """One field's value as the key (``KeyGenUtils.getRecordKey(record, field)``)."""
        field = self.record_key_fields[0]
        keys = self._key_strings(data, field)
        # Byte lengths come from the offsets; utf8_length would decode every key.
        empty = pc.equal(pc.binary_length(keys), 0)
        if keys.null_count or pc.any(empty).as_py():
            bad = pc.fill_null(empty, True)
            raise InvalidRecordKeyError(
                f"record key field {field!r} is null or empty at row {first_true(bad)}"
                f" ({pc.sum(bad).as_py()} such rows)"
            )
        return keys

    def _complex_keys(self, data: Data) -> pa.Array:
        """``f1:v1,f2:v2`` with ``__null__`` / ``__empty__`` parts (Hudi's ``KeyGenUtils.getRecordKey``)."""
        parts: list[pa.Array | str] = []
        any_value: pa.Array | None = None  # rows with at least one non-null, non-empty part so far
        always_valued = False
        for i, field in enumerate(self.record_key_fields):
            strings = self._key_strings(data, field)
            empty = pc.equal(strings, "")
            has_empty = bool(pc.any(empty).as_py())
            text = pc.if_else(empty, opt.EMPTY_RECORDKEY_PLACEHOLDER, strings) if has_empty else strings
            if text.null_count:
                text = pc.fill_null(text, opt.NULL_RECORDKEY_PLACEHOLDER)
            if not has_empty and not strings.null_count:
                always_valued = True
            elif not always_valued:
                present = pc.fill_null(pc.invert(empty), False)
                any_value = present if any_value is None else pc.or_(any_value, present)
            parts.append(f"{field}:" if i == 0 else f",{field}:")
            parts.append(text)
        if not always_valued and any_value is not None and not pc.all(any_value).as_py():
            row = first_true(pc.invert(any_value))
            raise InvalidRecordKeyError(
                f"record key fields {self.record_key_fields} are all null or empty at row {row}"
            )
        return pc.binary_join_element_wise(*parts, "")


def hudi_class(simple_name: str) -> str:
    return _HUDI_PACKAGE + simple_name
