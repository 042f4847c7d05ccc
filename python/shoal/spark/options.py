"""Options of a Spark write: Hudi's data source option names and keyword shorthands, and opening
(or creating) the table they name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from shoal.config import write_config as wc
from shoal.config.table_config import TableConfig, TableType
from shoal.errors import InvalidArgumentError, InvalidOptionError
from shoal.fs.storage import Storage
from shoal.spark.executor import SparkExecutor
from shoal.table import Table
from shoal.timeline.timeline import Timeline
from shoal.write.writer import (
    Operation,
)

# Hudi's data source option names that are not write config keys.
OPERATION_OPTION = "hoodie.datasource.write.operation"

TABLE_TYPE_OPTION = "hoodie.datasource.write.table.type"

# Keyword shorthands for the options that define a new table.
ALIASES = {
    "table_name": wc.TABLE_NAME,
    "record_key": wc.RECORDKEY_FIELD,
    "partition_by": wc.PARTITIONPATH_FIELD,
    "ordering_field": wc.PRECOMBINE_FIELD,
    "table_type": TABLE_TYPE_OPTION,
    "key_generator": wc.KEYGENERATOR_CLASS,
}


def is_write_option(key: str) -> bool:
    """Whether ``key`` names an option of a write (a Hudi write option or one of its keyword
    shorthands)."""
    name = ALIASES.get(key, key)
    return name in (OPERATION_OPTION, TABLE_TYPE_OPTION) or wc.is_known_option(name)


def parse_options(
    operation: str | None, options: Mapping[str, Any]
) -> tuple[Operation, str | None, dict[str, str]]:
    """(operation, table type option, the ``hoodie.*`` write options) from the caller's options."""
    hoodie: dict[str, str] = {}
    op_text = operation
    table_type = None
    # Options named with the commit metadata prefix go to the commit's extraMetadata (WriteConfig).
    prefix = str(options.get(wc.COMMIT_METADATA_KEY_PREFIX, "_"))
    for key, value in options.items():
        name = ALIASES.get(key, key)
        text = ",".join(value) if isinstance(value, (list, tuple)) else str(value)
        if name == OPERATION_OPTION:
            if op_text is not None and op_text.lower() != text.lower():
                raise InvalidOptionError(f"operation {op_text!r} conflicts with {OPERATION_OPTION}={text!r}")
            op_text = text
        elif name == TABLE_TYPE_OPTION:
            table_type = text
        elif name.startswith("hoodie.") or wc.is_known_option(name) or (prefix and name.startswith(prefix)):
            hoodie[name] = text
        else:
            raise InvalidOptionError(
                f"unknown write option {key!r}: pass Hudi's hoodie.* write options, shoal's own "
                f"(shoal.spark.write.direct.parquet.input), or commit metadata entries, named "
                f"with the prefix {prefix!r}"
            )
    try:
        op = Operation((op_text or "upsert").strip().upper())
    except ValueError:
        raise InvalidOptionError(
            f"unknown operation {op_text!r}: use upsert, insert, bulk_insert, delete, "
            "insert_overwrite, insert_overwrite_table or delete_partition"
        ) from None
    return op, table_type, hoodie


def open_or_create(
    path: str, table_type: str | None, hoodie: dict[str, str], executor: SparkExecutor
) -> Table:
    """The table at ``path``, created from the options when there is none; options that define
    a table must agree with an existing one."""
    wc.WriteConfig(hoodie)  # unknown keys and bad values fail before anything is written
    storage = Storage(path)
    if not storage.exists(".hoodie/hoodie.properties"):
        name = hoodie.get(wc.TABLE_NAME)
        keys = hoodie.get(wc.RECORDKEY_FIELD)
        if not name or not keys:
            raise InvalidOptionError(
                f"no table at {path}: creating one needs {wc.TABLE_NAME} and {wc.RECORDKEY_FIELD}"
            )
        partitions = field_names(hoodie.get(wc.PARTITIONPATH_FIELD, ""))
        Table.create(
            path,
            name,
            table_type=table_type or TableType.COPY_ON_WRITE.value,
            record_key=field_names(keys),
            partition_by=partitions or None,
            ordering_field=hoodie.get(wc.PRECOMBINE_FIELD) or None,
            options=hoodie,
        )
        return Table(path, options=hoodie, executor=executor)
    table = Table(path, options=hoodie, executor=executor)
    check_table_options(table.config, table_type, hoodie)
    return table


@contextmanager
def table_for_write(
    path: str, table_type: str | None, hoodie: dict[str, str], executor: SparkExecutor
) -> Iterator[Table]:
    """:func:`open_or_create` for one write. When the write fails and this call created the
    table at a path that held nothing, the path is left as it was: a refused first write (a null
    record key, a schema the options contradict) does not leave a table with its options behind
    for the corrected retry to conflict with."""
    storage = Storage(path)
    new = new_table_path(storage)
    table = open_or_create(path, table_type, hoodie, executor)
    try:
        yield table
    except BaseException:
        if new is not None:
            undo_new_table(storage, new)
        raise


@dataclass(frozen=True)
class NewTablePath:
    """A path that held nothing before a write created its table there; ``existed``: as an
    empty directory."""

    existed: bool


def new_table_path(storage: Storage) -> NewTablePath | None:
    """The path of ``storage`` as a write that creates its table there finds it, or None when it
    holds a table or anything else. Raises InvalidArgumentError when it is a file."""
    if storage.exists(".hoodie/hoodie.properties"):
        return None
    if storage.is_file(""):
        raise InvalidArgumentError(f"{storage.base_uri} is a file: a table is a directory")
    existed = storage.exists("")
    if existed and (storage.list_files("") or storage.list_dirs("")):
        return None
    return NewTablePath(existed)


def undo_new_table(storage: Storage, new: NewTablePath) -> None:
    """Leaves the path as the write that created its table found it (see :func:`discard_new_table`)."""
    if discard_new_table(storage) and not new.existed:
        storage.delete_dir("")


def discard_new_table(storage: Storage) -> bool:
    """Deletes what a failed first write left at a path that held nothing before it: the table
    it created, the files it wrote and its pending instant; whether it did. Kept when the
    timeline shows a completed commit (another writer's, made meanwhile)."""
    config = TableConfig.load(storage)
    if Timeline.load(storage, config).completed_data_instants():
        return False
    for name in storage.list_dirs(""):
        storage.delete_dir(name)
    for entry in storage.list_files(""):
        storage.delete(entry.path, missing_ok=True)
    return True


def check_table_options(config: TableConfig, table_type: str | None, hoodie: Mapping[str, str]) -> None:
    # The table name and ordering field are checked by every writer
    # (shoal.write.table_options), Spark's included.
    current = {
        wc.RECORDKEY_FIELD: config.record_key_fields,
        wc.PARTITIONPATH_FIELD: [f.split(":", 1)[0] for f in config.partition_fields],
    }
    for key, fields in current.items():
        given = hoodie.get(key)
        if given is not None and [f.split(":", 1)[0] for f in field_names(given)] != fields:
            raise InvalidOptionError(f"{key}={given!r} conflicts with the table's {','.join(fields)!r}")
    if table_type is not None and TableType.parse(table_type) != config.table_type:
        raise InvalidOptionError(
            f"{TABLE_TYPE_OPTION}={table_type!r} conflicts with the table's {config.table_type.value}"
        )


def field_names(text: str) -> list[str]:
    return [f.strip() for f in text.split(",") if f.strip()]
