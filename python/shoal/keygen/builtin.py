"""Hudi's value-based key generators: simple, complex, non-partitioned, global-delete and custom."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from shoal.errors import InvalidOptionError
from shoal.keygen import options as opt
from shoal.keygen.base import Data, KeyGenerator, PartitionPart, SimplePartitionPart, hudi_class

__all__ = [
    "ComplexKeyGenerator",
    "CustomKeyGenerator",
    "GlobalDeleteKeyGenerator",
    "NonpartitionedKeyGenerator",
    "SimpleKeyGenerator",
]


class SimpleKeyGenerator(KeyGenerator):
    """One record key field, whose value is the key; one partition field, whose value is the path.

    ``SimpleKeyGenerator(["uuid"], ["city"], hive_style_partitioning=True)`` keys a row
    ``3eeb61f7-...`` and places it in ``city=chennai``. A null or empty partition value goes to
    ``__HIVE_DEFAULT_PARTITION__``; a null or empty key is an error.
    """

    TYPE_NAME = "SIMPLE"
    CLASS_NAME = hudi_class("SimpleKeyGenerator")

    def __init__(
        self, record_key_fields: Sequence[str], partition_fields: Sequence[str], **kwargs: bool
    ) -> None:
        _expect_one(record_key_fields, "record key", type(self).__name__)
        _expect_one(partition_fields, "partition", type(self).__name__)
        super().__init__(record_key_fields, [SimplePartitionPart(partition_fields[0])], **kwargs)

    def record_keys(self, data: Data) -> pa.Array:
        return self._simple_keys(data)


class ComplexKeyGenerator(KeyGenerator):
    """Keys ``f1:v1,f2:v2`` from several fields; partition path ``v1/v2`` from several fields.

    A null key part is written ``__null__``, an empty one ``__empty__``; a key whose parts are all
    null or empty is an error. With a single record key field the key is ``field:value`` unless
    ``single_field_value_only`` is set (``hoodie.write.complex.keygen.new.encoding=true``, the
    encoding Hudi 0.14.1, 0.15.0 and 1.0.0-1.0.2 used, see HUDI-7001), which writes the bare value.
    Partition fields may be empty: the table is then not partitioned.
    """

    TYPE_NAME = "COMPLEX"
    CLASS_NAME = hudi_class("ComplexKeyGenerator")

    def __init__(
        self,
        record_key_fields: Sequence[str],
        partition_fields: Sequence[str] = (),
        *,
        single_field_value_only: bool = False,
        **kwargs: bool,
    ) -> None:
        super().__init__(record_key_fields, [SimplePartitionPart(f) for f in partition_fields], **kwargs)
        self.single_field_value_only = single_field_value_only and len(self.record_key_fields) == 1

    def record_keys(self, data: Data) -> pa.Array:
        if self.single_field_value_only:
            return self._simple_keys(data)
        return self._complex_keys(data)

    def table_properties(self, table_version: int | None = None) -> dict[str, str]:
        props = super().table_properties(table_version)
        if len(self.record_key_fields) == 1:
            encoding = "VALUE_ONLY" if self.single_field_value_only else "FIELD_PREFIXED"
            props[opt.COMPLEX_KEYGEN_ENCODING] = encoding
        return props


class NonpartitionedKeyGenerator(KeyGenerator):
    """Every row in the one partition ``""``; the key is simple for one field, complex for several."""

    TYPE_NAME = "NON_PARTITION"
    CLASS_NAME = hudi_class("NonpartitionedKeyGenerator")

    def __init__(self, record_key_fields: Sequence[str], **kwargs: bool) -> None:
        super().__init__(record_key_fields, (), **kwargs)

    def record_keys(self, data: Data) -> pa.Array:
        if len(self.record_key_fields) == 1:
            return self._simple_keys(data)
        return self._complex_keys(data)


class GlobalDeleteKeyGenerator(KeyGenerator):
    """Complex keys (``field:value`` even for one field) and the partition ``""``, for global deletes."""

    TYPE_NAME = "GLOBAL_DELETE"
    CLASS_NAME = hudi_class("GlobalDeleteKeyGenerator")

    def __init__(self, record_key_fields: Sequence[str], **kwargs: bool) -> None:
        super().__init__(record_key_fields, (), **kwargs)

    def record_keys(self, data: Data) -> pa.Array:
        return self._complex_keys(data)


class CustomKeyGenerator(KeyGenerator):
    """A partition path mixing plain values and formatted timestamps, field by field.

    Built from Hudi's ``field:TYPE`` list (``hoodie.datasource.write.partitionpath.field``,
    e.g. ``region:SIMPLE,ts:TIMESTAMP``), see :func:`~shoal.keygen.key_generator_from_properties`;
    TIMESTAMP parts share one set of ``hoodie.keygen.timebased.*`` options. The record key is simple
    for one field and complex for several.
    """

    TYPE_NAME = "CUSTOM"
    CLASS_NAME = hudi_class("CustomKeyGenerator")

    def __init__(
        self, record_key_fields: Sequence[str], partition_parts: Sequence[PartitionPart], **kwargs: bool
    ):
        super().__init__(record_key_fields, partition_parts, **kwargs)
        self.partition_parts: list[PartitionPart] = list(partition_parts)

    def record_keys(self, data: Data) -> pa.Array:
        if len(self.record_key_fields) == 1:
            return self._simple_keys(data)
        return self._complex_keys(data)

    def _partition_field_specs(self, typed: bool) -> list[str]:
        # Table version 8 keeps the part types in hoodie.table.partition.fields; 6 only the names.
        return [p.spec() for p in self.partition_parts] if typed else list(self.partition_fields)


def _expect_one(fields: Sequence[str], role: str, owner: str) -> None:
    if len(fields) != 1:
        raise InvalidOptionError(f"{owner} takes exactly one {role} field, got {list(fields)}")
