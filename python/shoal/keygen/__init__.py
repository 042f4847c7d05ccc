"""Hudi key generators: the record key and partition path of every row, computed on Arrow batches.

The strings match what Apache Hudi writes into ``_hoodie_record_key`` and
``_hoodie_partition_path`` (HUDI_FORMAT §4.4 and §5)::

    from shoal.keygen import key_generator_from_properties

    keygen = key_generator_from_properties({
        "hoodie.table.recordkey.fields": "id,name",
        "hoodie.table.partition.fields": "byteField,shortField",
        "hoodie.datasource.write.hive_style_partitioning": "true",
    })                                    # inferred: ComplexKeyGenerator
    keygen.record_keys(batch)             # ["id:1,name:Alice", ...]
    keygen.partition_paths(batch)         # ["byteField=10/shortField=300", ...]
    keygen.table_properties()             # entries for hoodie.properties

Generators: :class:`SimpleKeyGenerator`, :class:`ComplexKeyGenerator`,
:class:`NonpartitionedKeyGenerator`, :class:`TimestampBasedKeyGenerator`,
:class:`CustomKeyGenerator` and :class:`GlobalDeleteKeyGenerator`. Value formatting per Arrow type
is described in :mod:`shoal.keygen.values`.
"""

from shoal.keygen.base import KeyGenerator, PartitionPart, SimplePartitionPart
from shoal.keygen.builtin import (
    ComplexKeyGenerator,
    CustomKeyGenerator,
    GlobalDeleteKeyGenerator,
    NonpartitionedKeyGenerator,
    SimpleKeyGenerator,
)
from shoal.keygen.factory import key_generator_from_properties, keygen_properties
from shoal.keygen.javafmt import java_double_to_string, java_float_to_string
from shoal.keygen.partition import escape_path_name
from shoal.keygen.timestamp import TimestampBasedKeyGenerator, TimestampOptions, TimestampPartitionPart
from shoal.keygen.values import java_strings

__all__ = [
    "ComplexKeyGenerator",
    "CustomKeyGenerator",
    "GlobalDeleteKeyGenerator",
    "KeyGenerator",
    "NonpartitionedKeyGenerator",
    "PartitionPart",
    "SimpleKeyGenerator",
    "SimplePartitionPart",
    "TimestampBasedKeyGenerator",
    "TimestampOptions",
    "TimestampPartitionPart",
    "escape_path_name",
    "java_double_to_string",
    "java_float_to_string",
    "java_strings",
    "key_generator_from_properties",
    "keygen_properties",
]
