"""The files of a table on disk: its data files and those its completed commits report (a
write that left no orphan, a failed task attempt's file say, has the two sets equal); every
file's digest, to show a refused change left the table as it was; its properties, set as a
Hudi writer would; and the data columns of its rows."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

import shoal
from shoal.config.table_config import TableConfig
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
from shoal.fs.storage import Storage
from shoal.timeline.timeline import Timeline


def data_files(path: str) -> set[str]:
    """Relative paths of the base and log files under ``path``."""
    return {
        str(p.relative_to(path))
        for p in Path(path).rglob("*")
        if p.is_file()
        and ".hoodie" not in p.parts
        and (parse_base_file_name(p.name) or parse_log_file_name(p.name))
    }


def committed_paths(path: str) -> set[str]:
    """Relative paths of the files the completed data instants' write stats name."""
    table = shoal.Table(path)
    timeline = Timeline.load(table.storage, table.config)
    return {
        s.path
        for inst in timeline.completed_data_instants()
        for s in timeline.commit_metadata(inst).write_stats()
        if s.path
    }


def column_chunk_bytes(path: str, column: str, group: int = 0) -> bytes:
    """The stored bytes of one column chunk of a parquet file (dictionary page included)."""
    import pyarrow.parquet as pq

    md = pq.read_metadata(path)
    names = [md.schema.column(i).path for i in range(md.num_columns)]
    chunk = md.row_group(group).column(names.index(column))
    start = chunk.data_page_offset
    if chunk.has_dictionary_page and chunk.dictionary_page_offset:
        start = min(start, chunk.dictionary_page_offset)
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(chunk.total_compressed_size)


def file_digests(root: Path) -> dict[str, str]:
    """Every file under the table, by relative path, with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def set_table_properties(root: Path, properties: Mapping[str, str]) -> None:
    """Sets ``properties`` in the table's ``hoodie.properties`` (checksum recomputed)."""
    storage = Storage(str(root))
    config = TableConfig.load(storage)
    config.props.update(properties)
    config.save(storage)


def data_columns(rows: pa.Table) -> list[str]:
    """The columns of ``rows`` other than Hudi's meta columns."""
    return [c for c in rows.column_names if not c.startswith("_hoodie_")]


# Files of a few records, and bloom filters sized for them: several file groups per partition,
# small-file packing and merges, with tables of tens of records.
SMALL_FILES = {
    "hoodie.parquet.max.file.size": "6000",
    "hoodie.parquet.small.file.limit": "4500",
    "hoodie.index.bloom.num_entries": "200",
    "hoodie.bloom.index.filter.dynamic.max.entries": "400",
}


def record_listings(monkeypatch: Any) -> list[tuple[str, bool]]:
    """Records every ``Storage.list_files`` call of this process from now on, as (path,
    recursive), in the list it returns (until ``monkeypatch.undo()``)."""
    listed: list[tuple[str, bool]] = []
    list_files = Storage.list_files

    def recording(self: Storage, rel: str, recursive: bool = False) -> Any:
        listed.append((rel, recursive))
        return list_files(self, rel, recursive)

    monkeypatch.setattr(Storage, "list_files", recording)
    return listed
