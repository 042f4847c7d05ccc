"""The ``.hoodie_partition_metadata`` marker every partition directory needs (HUDI_FORMAT §1.4)."""

from __future__ import annotations

import contextlib

from shoal.config import javaprops
from shoal.errors import CommitConflictError
from shoal.fs.naming import PARTITION_METADATA_FILE
from shoal.fs.storage import Storage


def ensure_partition_metadata(storage: Storage, partition_path: str, instant: str) -> None:
    """Writes the marker if absent; Java lists a directory as a partition only if it exists."""
    rel = f"{partition_path}/{PARTITION_METADATA_FILE}" if partition_path else PARTITION_METADATA_FILE
    if storage.exists(rel):
        return
    depth = len(partition_path.split("/")) if partition_path else 0
    text = javaprops.dumps(
        {"commitTime": instant, "partitionDepth": str(depth)}, comment="partition metadata"
    )
    # Another task of the same write may have created it first.
    with contextlib.suppress(CommitConflictError):
        storage.create_exclusive(rel, text.encode("latin-1"))


def is_partition(storage: Storage, partition_path: str) -> bool:
    """Whether ``partition_path`` is a partition of the table: its directory holds the marker
    (as a properties file, or in the base file format Hudi can write it in)."""
    rel = f"{partition_path}/{PARTITION_METADATA_FILE}" if partition_path else PARTITION_METADATA_FILE
    return any(storage.exists(rel + suffix) for suffix in ("", ".parquet", ".orc"))


def partition_paths(storage: Storage) -> list[str]:
    """Every partition of the table: the directories that hold the marker (the table's root for
    a table without partitions)."""
    found = set()
    for f in storage.list_files("", recursive=True):
        if f.name.startswith(PARTITION_METADATA_FILE) and not f.path.startswith(".hoodie/"):
            found.add(f.path.rsplit("/", 1)[0] if "/" in f.path else "")
    return sorted(found)
