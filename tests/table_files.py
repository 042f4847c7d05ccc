"""The data files of a table on disk and those its completed commits report: a write that left
no orphan (a failed task attempt's file, say) has the two sets equal."""

from __future__ import annotations

from pathlib import Path

import shoal
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
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
