"""The configuration keys key generators read, and the parsing shared by them.

Keys carry Hudi's own names: ``hoodie.table.*`` as persisted in ``hoodie.properties`` and the
``hoodie.datasource.write.*`` / ``hoodie.keygen.*`` write options of the same meaning.
"""

from __future__ import annotations

from collections.abc import Mapping

from shoal.errors import InvalidOptionError

RECORDKEY_FIELDS = "hoodie.table.recordkey.fields"
WRITE_RECORDKEY_FIELD = "hoodie.datasource.write.recordkey.field"
PARTITION_FIELDS = "hoodie.table.partition.fields"
WRITE_PARTITIONPATH_FIELD = "hoodie.datasource.write.partitionpath.field"
KEYGENERATOR_CLASS = "hoodie.table.keygenerator.class"
WRITE_KEYGENERATOR_CLASS = "hoodie.datasource.write.keygenerator.class"
KEYGENERATOR_TYPE = "hoodie.table.keygenerator.type"
WRITE_KEYGENERATOR_TYPE = "hoodie.datasource.write.keygenerator.type"
# The generator Spark SQL's SqlKeyGenerator wraps.
SQL_ORIGIN_KEYGENERATOR_CLASS = "hoodie.sql.origin.keygen.class"
HIVE_STYLE_PARTITIONING = "hoodie.datasource.write.hive_style_partitioning"
URL_ENCODE_PARTITIONING = "hoodie.datasource.write.partitionpath.urlencode"
CONSISTENT_LOGICAL_TIMESTAMP = "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled"
TABLE_VERSION = "hoodie.table.version"
WRITE_TABLE_VERSION = "hoodie.write.table.version"
# HUDI-7001: how a ComplexKeyGenerator with ONE record key field writes its keys.
COMPLEX_KEYGEN_ENCODING = "hoodie.table.complex.keygen.encoding"  # FIELD_PREFIXED | VALUE_ONLY
COMPLEX_KEYGEN_NEW_ENCODING = "hoodie.write.complex.keygen.new.encoding"  # true = VALUE_ONLY

TIMEBASED_PREFIX = "hoodie.keygen.timebased."
TIMEBASED_DEPRECATED_PREFIX = "hoodie.deltastreamer.keygen.timebased."
TIMESTAMP_TYPE = TIMEBASED_PREFIX + "timestamp.type"
TIMESTAMP_SCALAR_TIME_UNIT = TIMEBASED_PREFIX + "timestamp.scalar.time.unit"
TIMESTAMP_INPUT_DATE_FORMAT = TIMEBASED_PREFIX + "input.dateformat"
TIMESTAMP_INPUT_DATE_FORMAT_DELIMITER = TIMEBASED_PREFIX + "input.dateformat.list.delimiter.regex"
TIMESTAMP_INPUT_TIMEZONE = TIMEBASED_PREFIX + "input.timezone"
TIMESTAMP_OUTPUT_DATE_FORMAT = TIMEBASED_PREFIX + "output.dateformat"
TIMESTAMP_OUTPUT_TIMEZONE = TIMEBASED_PREFIX + "output.timezone"
TIMESTAMP_TIMEZONE = TIMEBASED_PREFIX + "timezone"  # input and output at once (deprecated in Hudi)
DATE_TIME_PARSER_CLASS = "hoodie.keygen.datetime.parser.class"
DEFAULT_DATE_TIME_PARSER_CLASS = "org.apache.hudi.keygen.parser.HoodieDateTimeParser"

# Partition value Hudi writes for a null or empty field (pre-0.12 tables used "default").
DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"
# Record key parts of ComplexKeyGenerator standing for a null / an empty value.
NULL_RECORDKEY_PLACEHOLDER = "__null__"
EMPTY_RECORDKEY_PLACEHOLDER = "__empty__"


def get_option(props: Mapping[str, str], key: str, *alternatives: str) -> str | None:
    """The value of ``key`` or of the first alternative key present, else None."""
    for k in (key, *alternatives):
        value = props.get(k)
        if value is not None:
            return str(value)
    return None


def get_bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    """A ``true``/``false`` option (any case; an empty value means the default)."""
    value = props.get(key)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text == "":
        return default
    if text in ("true", "false"):
        return text == "true"
    raise InvalidOptionError(f"{key} must be true or false, got {value!r}")


def split_fields(value: str | None) -> list[str]:
    """A comma-separated field list as Hudi reads it: items trimmed, empty items dropped."""
    if value is None:
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def bool_text(value: bool) -> str:
    return "true" if value else "false"
