"""Building a key generator from table properties and write options."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shoal.errors import InvalidOptionError, UnsupportedError
from shoal.keygen import options as opt
from shoal.keygen.base import KeyGenerator, PartitionPart, SimplePartitionPart
from shoal.keygen.builtin import (
    ComplexKeyGenerator,
    CustomKeyGenerator,
    GlobalDeleteKeyGenerator,
    NonpartitionedKeyGenerator,
    SimpleKeyGenerator,
)
from shoal.keygen.timestamp import TimestampBasedKeyGenerator, TimestampOptions, TimestampPartitionPart

__all__ = ["check_write_options_agree", "key_generator_from_properties", "keygen_properties"]

_KINDS = ("SIMPLE", "COMPLEX", "NON_PARTITION", "TIMESTAMP", "CUSTOM", "GLOBAL_DELETE")
_PKG = "org.apache.hudi.keygen."
# Java class (Spark and Avro flavours alike) -> generator kind.
_CLASSES = {
    _PKG + "SimpleKeyGenerator": "SIMPLE",
    _PKG + "SimpleAvroKeyGenerator": "SIMPLE",
    _PKG + "ComplexKeyGenerator": "COMPLEX",
    _PKG + "ComplexAvroKeyGenerator": "COMPLEX",
    _PKG + "NonpartitionedKeyGenerator": "NON_PARTITION",
    _PKG + "NonpartitionedAvroKeyGenerator": "NON_PARTITION",
    _PKG + "TimestampBasedKeyGenerator": "TIMESTAMP",
    _PKG + "TimestampBasedAvroKeyGenerator": "TIMESTAMP",
    _PKG + "CustomKeyGenerator": "CUSTOM",
    _PKG + "CustomAvroKeyGenerator": "CUSTOM",
    _PKG + "GlobalDeleteKeyGenerator": "GLOBAL_DELETE",
    _PKG + "GlobalAvroDeleteKeyGenerator": "GLOBAL_DELETE",
}
# Spark SQL's wrapper around the table's real generator: it says nothing by itself.
_SQL_WRAPPER = "org.apache.spark.sql.hudi.command.SqlKeyGenerator"
# Hudi generators shoal knows of but does not implement.
_UNSUPPORTED = {
    "AUTO_RECORD",
    "AUTO_RECORD_AVRO",
    "HOODIE_TABLE_METADATA",
    "SPARK_SQL_UUID",
    "SPARK_SQL_MERGE_INTO",
    "STREAMER_TEST",
    "USER_PROVIDED",
    _PKG + "AutoRecordGenWrapperKeyGenerator",
    _PKG + "AutoRecordGenWrapperAvroKeyGenerator",
    "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator",
    "org.apache.spark.sql.hudi.command.UuidKeyGenerator",
    "org.apache.spark.sql.hudi.command.MergeIntoKeyGenerator",
}


def key_generator_from_properties(props: Mapping[str, str]) -> KeyGenerator:
    """The key generator described by table properties and/or write options.

    Reads (table key first, then the write option of the same meaning; when both are present they
    must agree):

    * record key fields: ``hoodie.table.recordkey.fields`` / ``hoodie.datasource.write.recordkey.field``;
    * partition fields: ``hoodie.table.partition.fields`` / ``hoodie.datasource.write.partitionpath.field``
      (``field:SIMPLE``/``field:TIMESTAMP`` items for the custom generator);
    * the generator: ``hoodie.table.keygenerator.class``, ``hoodie.datasource.write.keygenerator.class``,
      ``hoodie.table.keygenerator.type``, ``hoodie.datasource.write.keygenerator.type`` (Java class
      names of the Spark or Avro flavour, or the type names SIMPLE, COMPLEX, NON_PARTITION,
      TIMESTAMP, CUSTOM, GLOBAL_DELETE). Without any, it is inferred as Hudi does: no partition
      fields -> non-partitioned; ``field:TYPE`` partition fields -> custom; one partition field and
      at most one key field -> simple; otherwise complex. A simple generator without partition
      fields becomes non-partitioned, as in Hudi's writers;
    * ``hoodie.datasource.write.hive_style_partitioning``,
      ``hoodie.datasource.write.partitionpath.urlencode`` and
      ``hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled`` (all default false);
    * ``hoodie.keygen.timebased.*`` for timestamp partitions (see :class:`TimestampOptions`);
    * for a complex generator with one key field: ``hoodie.table.complex.keygen.encoding``
      (FIELD_PREFIXED / VALUE_ONLY), else ``hoodie.write.complex.keygen.new.encoding`` below table
      version 9.

    Raises:
        InvalidOptionError: a value is malformed, unknown or contradicts another.
        UnsupportedError: a Hudi key generator shoal does not implement (auto keys, custom classes).
    """
    key_fields = _fields(props, opt.RECORDKEY_FIELDS, opt.WRITE_RECORDKEY_FIELD, "record key")
    partition_specs = _fields(props, opt.PARTITION_FIELDS, opt.WRITE_PARTITIONPATH_FIELD, "partition")
    if not key_fields:
        raise InvalidOptionError(
            f"no record key fields: set {opt.RECORDKEY_FIELDS} or {opt.WRITE_RECORDKEY_FIELD} "
            "(generated record keys are not supported)"
        )
    kind = _kind(props, key_fields, partition_specs)
    flags = {
        "hive_style_partitioning": opt.get_bool(props, opt.HIVE_STYLE_PARTITIONING, False),
        "url_encode_partition_path": opt.get_bool(props, opt.URL_ENCODE_PARTITIONING, False),
        "consistent_logical_timestamp": opt.get_bool(props, opt.CONSISTENT_LOGICAL_TIMESTAMP, False),
    }
    if kind == "CUSTOM":
        parts = [_custom_part(spec, props) for spec in partition_specs]
        return CustomKeyGenerator(key_fields, parts, **flags)
    partition_fields = [_untyped(spec, kind) for spec in partition_specs]
    if kind == "SIMPLE":
        if not partition_fields:
            return NonpartitionedKeyGenerator(key_fields, **flags)
        return SimpleKeyGenerator(key_fields, partition_fields, **flags)
    if kind == "COMPLEX":
        value_only = len(key_fields) == 1 and not _complex_single_field_prefixed(props)
        return ComplexKeyGenerator(key_fields, partition_fields, single_field_value_only=value_only, **flags)
    if kind == "NON_PARTITION":
        return NonpartitionedKeyGenerator(key_fields, **flags)
    if kind == "GLOBAL_DELETE":
        return GlobalDeleteKeyGenerator(key_fields, **flags)
    if len(partition_fields) != 1:
        raise InvalidOptionError(
            f"TimestampBasedKeyGenerator takes exactly one partition field, got {partition_fields}"
        )
    options = TimestampOptions.from_properties(props)
    return TimestampBasedKeyGenerator(key_fields, partition_fields[0], options, **flags)


def keygen_properties(
    table_properties: Mapping[str, str], write_options: Mapping[str, Any]
) -> dict[str, str]:
    """The properties a table's key generator is built from: its ``hoodie.properties``, and the
    partition path field write option when given. A custom generator's table of version 6
    records its partition fields without their types, which Hudi's writers take from that
    option.

    Raises:
        InvalidOptionError: a write option that shapes keys or partition paths (record key
            fields, key generator, Hive style, URL encoding, ``hoodie.keygen.timebased.*``)
            contradicts the table, as Hudi's writers refuse it ("Config conflict").
    """
    check_write_options_agree(table_properties, write_options)
    props = dict(table_properties)
    typed = write_options.get(opt.WRITE_PARTITIONPATH_FIELD)
    if typed is not None:
        props[opt.WRITE_PARTITIONPATH_FIELD] = str(typed)
    return props


def check_write_options_agree(table_properties: Mapping[str, str], write_options: Mapping[str, Any]) -> None:
    """Refuse write options that would key or place records otherwise than the table does.

    The table's ``hoodie.properties`` decide how keys and partition paths are written; a write
    option saying otherwise would be ignored, and the rows written with it land where the user
    did not ask. Hudi's writers fail such a write with a config conflict; so does shoal.

    Raises:
        InvalidOptionError: naming the option, its value and the table's.
    """
    conflicts: list[str] = []

    def differ(key: str, given: Any, recorded: str) -> None:
        conflicts.append(f"{key}={str(given)!r} (the table has {recorded!r})")

    table_keys = table_properties.get(opt.RECORDKEY_FIELDS)
    given_keys = write_options.get(opt.WRITE_RECORDKEY_FIELD)
    if (
        table_keys is not None
        and given_keys is not None
        and opt.split_fields(str(given_keys)) != opt.split_fields(table_keys)
    ):
        differ(opt.WRITE_RECORDKEY_FIELD, given_keys, table_keys)
    for key in (opt.HIVE_STYLE_PARTITIONING, opt.URL_ENCODE_PARTITIONING, opt.CONSISTENT_LOGICAL_TIMESTAMP):
        recorded, given = table_properties.get(key), write_options.get(key)
        if recorded is None or given is None or not str(given).strip():
            continue
        if opt.get_bool({key: str(given)}, key, False) != opt.get_bool({key: recorded}, key, False):
            differ(key, given, recorded)
    _check_generator_agrees(table_properties, write_options, differ)
    for key, given in write_options.items():
        suffix = _timebased_suffix(key)
        if suffix is None or given is None or not str(given).strip():
            continue
        recorded = opt.get_option(
            table_properties, opt.TIMEBASED_PREFIX + suffix, opt.TIMEBASED_DEPRECATED_PREFIX + suffix
        )
        if recorded is None or not recorded.strip():
            continue
        a, b = str(given).strip(), recorded.strip()
        if suffix in _CASE_FREE_TIMEBASED:
            a, b = a.upper(), b.upper()
        if a != b:
            differ(key, given, recorded)
    if conflicts:
        raise InvalidOptionError("write options conflict with the table: " + "; ".join(conflicts))


# Enumerations among the hoodie.keygen.timebased.* settings, which Hudi reads in any case.
_CASE_FREE_TIMEBASED = ("timestamp.type", "timestamp.scalar.time.unit")


def _timebased_suffix(key: str) -> str | None:
    for prefix in (opt.TIMEBASED_PREFIX, opt.TIMEBASED_DEPRECATED_PREFIX):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return None


def _check_generator_agrees(
    table_properties: Mapping[str, str],
    write_options: Mapping[str, Any],
    differ: Callable[[str, Any, str], None],
) -> None:
    """The key generator a write option names must be the table's (either flavour of its class,
    or its type name)."""
    recorded: list[str] = []
    kinds = set()
    for key in (opt.KEYGENERATOR_CLASS, opt.KEYGENERATOR_TYPE):
        value = (table_properties.get(key) or "").strip()
        if value == _SQL_WRAPPER:
            value = (table_properties.get(opt.SQL_ORIGIN_KEYGENERATOR_CLASS) or "").strip()
        if not value:
            continue
        recorded.append(value)
        try:
            kinds.add(
                _kind_of_class(value, key)
                if key == opt.KEYGENERATOR_CLASS
                else _kind_of_type(value.upper(), key)
            )
        except (InvalidOptionError, UnsupportedError):
            return  # building the table's generator reports it
    if len(kinds) != 1:
        return
    table_kind = kinds.pop()
    no_partitions = not opt.split_fields(table_properties.get(opt.PARTITION_FIELDS))
    for key in (opt.WRITE_KEYGENERATOR_CLASS, opt.WRITE_KEYGENERATOR_TYPE):
        value = str(write_options.get(key) or "").strip()
        if value == _SQL_WRAPPER:
            value = str(write_options.get(opt.SQL_ORIGIN_KEYGENERATOR_CLASS) or "").strip()
        if not value:
            continue
        # shoal (like the keyword ``key_generator``) takes a type name for the class too.
        kind = _kind_of_class(value, key) if "." in value else _kind_of_type(value.upper(), key)
        if kind == "SIMPLE" and no_partitions:
            kind = "NON_PARTITION"  # what a simple generator without partition fields creates
        if kind != table_kind:
            differ(key, value, ", ".join(recorded))


def _fields(props: Mapping[str, str], table_key: str, write_key: str, role: str) -> list[str]:
    table_value = props.get(table_key)
    write_value = props.get(write_key)
    table_fields = opt.split_fields(table_value)
    write_fields = opt.split_fields(write_value)
    if table_value is not None and write_value is not None:
        if [f.split(":")[0] for f in table_fields] != [f.split(":")[0] for f in write_fields]:
            raise InvalidOptionError(
                f"{role} fields disagree: {table_key}={table_value!r} but {write_key}={write_value!r}"
            )
        # The custom generator's part types may live in only one of the two (v6 tables keep names).
        return write_fields if any(":" in f for f in write_fields) else table_fields
    return table_fields if table_value is not None else write_fields


def _kind(props: Mapping[str, str], key_fields: list[str], partition_specs: list[str]) -> str:
    named: dict[str, str] = {}
    for key in (opt.KEYGENERATOR_CLASS, opt.WRITE_KEYGENERATOR_CLASS):
        value = (props.get(key) or "").strip()
        if value == _SQL_WRAPPER:
            value = (props.get(opt.SQL_ORIGIN_KEYGENERATOR_CLASS) or "").strip()
        if value:
            named[key] = _kind_of_class(value, key)
    for key in (opt.KEYGENERATOR_TYPE, opt.WRITE_KEYGENERATOR_TYPE):
        value = (props.get(key) or "").strip().upper()
        if value:
            named[key] = _kind_of_type(value, key)
    kinds = set(named.values())
    if len(kinds) > 1:
        raise InvalidOptionError(f"key generator settings disagree: {named}")
    if kinds:
        return kinds.pop()
    return _infer(key_fields, partition_specs)


def _kind_of_class(name: str, key: str) -> str:
    if name in _CLASSES:
        return _CLASSES[name]
    if name in _UNSUPPORTED:
        raise UnsupportedError(f"{key}={name} is not supported by shoal")
    raise InvalidOptionError(f"{key}: unknown key generator class {name!r}")


def _kind_of_type(name: str, key: str) -> str:
    base = name.removesuffix("_AVRO")
    if base in _KINDS:
        return base
    if name in _UNSUPPORTED:
        raise UnsupportedError(f"{key}={name} is not supported by shoal")
    raise InvalidOptionError(
        f"{key}: unknown key generator type {name!r} (expected one of {', '.join(_KINDS)})"
    )


def _infer(key_fields: list[str], partition_specs: list[str]) -> str:
    """``KeyGenUtils.inferKeyGeneratorType``."""
    if not partition_specs:
        return "NON_PARTITION"
    if ":" in partition_specs[0]:
        return "CUSTOM"
    if len(partition_specs) == 1 and len(key_fields) <= 1:
        return "SIMPLE"
    return "COMPLEX"


def _untyped(spec: str, kind: str) -> str:
    if ":" in spec:
        raise InvalidOptionError(
            f"partition field {spec!r} carries a type, which only the custom key generator takes"
        )
    return spec


def _custom_part(spec: str, props: Mapping[str, str]) -> PartitionPart:
    name, sep, part_type = spec.partition(":")
    if not sep or not name.strip() or ":" in part_type:
        raise InvalidOptionError(
            "custom key generator partition fields are written field:TYPE "
            f"(e.g. city:SIMPLE,ts:TIMESTAMP), got {spec!r}"
        )
    kind = part_type.strip().upper()
    if kind == "SIMPLE":
        return SimplePartitionPart(name.strip())
    if kind == "TIMESTAMP":
        return TimestampPartitionPart(name.strip(), TimestampOptions.from_properties(props))
    raise InvalidOptionError(f"partition field {spec!r}: the type must be SIMPLE or TIMESTAMP")


def _complex_single_field_prefixed(props: Mapping[str, str]) -> bool:
    """Whether a one-field complex key is ``field:value`` (HUDI-7001)."""
    recorded = (props.get(opt.COMPLEX_KEYGEN_ENCODING) or "").strip().upper()
    if recorded:
        if recorded not in ("FIELD_PREFIXED", "VALUE_ONLY"):
            raise InvalidOptionError(
                f"{opt.COMPLEX_KEYGEN_ENCODING} must be FIELD_PREFIXED or VALUE_ONLY, got {recorded!r}"
            )
        return recorded == "FIELD_PREFIXED"
    version_text = opt.get_option(props, opt.WRITE_TABLE_VERSION, opt.TABLE_VERSION)
    try:
        version = int(version_text) if version_text and version_text.strip() else 6
    except ValueError as e:
        raise InvalidOptionError(f"table version must be an integer, got {version_text!r}") from e
    return version >= 9 or not opt.get_bool(props, opt.COMPLEX_KEYGEN_NEW_ENCODING, False)
