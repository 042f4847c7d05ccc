"""Hudi's metadata table (``.hoodie/metadata``), which shoal does not maintain.

Hudi can keep a table's file listings, and optional indexes, in an internal merge-on-read table
under ``.hoodie/metadata``. ``hoodie.table.metadata.partitions`` in ``hoodie.properties`` names
its ready partitions, and while it names ``files``, Hudi's readers and writers list the table's
files through it. shoal writes the way a Hudi writer with ``hoodie.metadata.enable=false``
does. If that metadata table stayed, its listings would miss every file shoal writes, and
Hudi would read the table without them.

So before its first change to a table that has one, shoal does what that Hudi writer does
(``HoodieTable.maybeDeleteMetadataTable``): it clears the ready and inflight metadata partitions
in ``hoodie.properties``, then deletes ``.hoodie/metadata``. A Hudi writer with the metadata
table enabled builds it again from the files.

The properties change first, so a crash in between leaves a directory that no reader consults.
The next change deletes it. hudi-rs uses the metadata table on version 8 tables only, which shoal
does not write (``TableConfig.check_writable``).
"""

from __future__ import annotations

import logging

from shoal.config.table_config import METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT, TableConfig
from shoal.fs.storage import Storage

log = logging.getLogger(__name__)

METADATA_TABLE_DIR = ".hoodie/metadata"


def drop_metadata_table(storage: Storage, config: TableConfig) -> bool:
    """Clears the metadata partitions of ``config`` (saved to ``hoodie.properties``) and deletes
    ``.hoodie/metadata``, whichever of them is there; True when there was anything to drop.
    Call it under the table's write lock, before the change that would make the metadata table
    stale."""
    listed = {
        key: value
        for key in (METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT)
        if (value := config.props.get(key, "").strip())
    }
    if listed:
        log.warning(
            "dropping the metadata table of %s (%s): shoal does not maintain it, and its file "
            "listings would miss the files this change writes",
            storage.base_uri,
            ", ".join(f"{k}={v}" for k, v in listed.items()),
        )
        for key in listed:
            # Hudi's clearMetadataTablePartitionsConfig keeps the key with an empty value.
            config.props[key] = ""
        config.save(storage)
    present = storage.is_dir(METADATA_TABLE_DIR)
    if present:
        storage.delete_dir(METADATA_TABLE_DIR)
    return bool(listed) or present
