"""Write options that restate what a table records must agree with it: a write that names
another ordering field or table name would otherwise run with the table's, not the one asked
for. Hudi's writers fail such a write with a config conflict (``validateTableConfig``)."""

from __future__ import annotations

from shoal.config.table_config import TableConfig
from shoal.config.write_config import PAYLOAD_ORDERING_FIELD, PRECOMBINE_FIELD, TABLE_NAME, WriteConfig
from shoal.errors import InvalidOptionError


def check_table_options_agree(config: TableConfig, write_config: WriteConfig) -> None:
    """Raises InvalidOptionError for an ordering field (``hoodie.datasource.write.precombine.field``,
    ``hoodie.payload.ordering.field``) or table name (``hoodie.table.name``) other than the
    table's. Empty values say nothing."""
    ordering = config.precombine_field or ""
    for key in (PRECOMBINE_FIELD, PAYLOAD_ORDERING_FIELD):
        given = (write_config.raw.get(key) or "").strip()
        if given and given != ordering:
            recorded = f"orders records by {ordering!r}" if ordering else "has no ordering field"
            raise InvalidOptionError(
                f"{key}={given!r} conflicts with the table, which {recorded} "
                "(hoodie.table.precombine.field, set when it was created)"
            )
    name = (write_config.raw.get(TABLE_NAME) or "").strip()
    if name and name != config.table_name:
        raise InvalidOptionError(
            f"{TABLE_NAME}={name!r} conflicts with the table's name {config.table_name!r}"
        )
