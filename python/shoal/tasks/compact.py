"""The compaction task: one file slice of a compaction plan merged into a new base file
(Hudi's compactor running a merge handle over the slice's base file and logs).

The merged records keep their meta columns (commit time and sequence number of the write that
produced each version): compaction changes where records live, not their history. Only
``_hoodie_file_name`` is set to the new file.

The new base file has the table's schema as of the compaction (the schema its commit records),
as Hudi's compactor writes it: a file slice that no write since a schema change reached has
the columns added since as nulls, and the types widened since in the wider type.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.fs.markers import create_marker
from shoal.fs.naming import base_file_name, write_token
from shoal.fs.storage import Storage
from shoal.read.mor import MorSliceSpec, SliceMerge, merge_mor_slice
from shoal.tasks.cow_write import StoredFile
from shoal.tasks.merge_layout import merge_in_place
from shoal.timeline.commit_metadata import WriteStat
from shoal.write.base_file import (
    SPLICE_CODECS,
    BaseFileOptions,
    row_group_rows,
    write_base_file,
    write_spliced_base_file,
)
from shoal.write.file_schema import base_file_schema, in_schema, written_schema
from shoal.write.replaced_file import plain_columns, read_replaced_file
from shoal.write.schema import META_COLUMNS

FILE_NAME = "_hoodie_file_name"
RECORD_KEY = "_hoodie_record_key"


@dataclass(frozen=True)
class CompactionTaskSpec:
    """One operation of a compaction plan, with what executing it needs, as plain data."""

    base_uri: str
    instant: str
    task_id: int
    partition_path: str
    file_id: str
    base_instant: str
    base_file: str | None  # name, relative to the partition
    log_files: tuple[str, ...]  # names, relative to the partition, in Hudi's log order
    log_files_size: int
    completed_instants: tuple[str, ...]  # whose log blocks count: completed before the compaction
    ordering_field: str | None
    event_time_ordering: bool
    options: BaseFileOptions
    # The write attempt, named in the file's write token (Spark fills these in).
    stage_id: int = 0
    attempt: int = 0
    # The table's Avro schema (without meta fields) that the new base file is written in; None
    # (no commit recorded one) leaves the merged slice's own columns.
    table_schema: str | None = None


def run_compaction_task(spec: CompactionTaskSpec, storage: Storage | None = None) -> WriteStat | None:
    """Merges the slice, writes ``<fileId>_<token>_<instant>.parquet`` and returns its write
    stat; None when the slice holds nothing at all (a log-only slice whose blocks were all
    rolled back), for which Hudi writes no file either."""
    storage = storage or Storage(spec.base_uri)
    name = base_file_name(spec.file_id, write_token(spec.task_id, spec.stage_id, spec.attempt), spec.instant)
    path = _in_partition(spec.partition_path, name)
    # Written under a temporary name first (not a base file name: no reader lists it), then
    # renamed, so no reader ever opens a half-written base file of a running compaction. Both
    # names get markers, so a rollback of a failed attempt removes whichever exists.
    tmp = _in_partition(spec.partition_path, f".{name.removesuffix('.parquet')}.compacting")
    create_marker(storage, spec.instant, path, "MERGE" if spec.base_file else "CREATE")
    create_marker(storage, spec.instant, tmp, "CREATE")
    started = time.monotonic()
    stored = _read_base_file(spec, storage)
    merge = merge_mor_slice(
        MorSliceSpec(
            base_uri=spec.base_uri,
            partition_path=spec.partition_path,
            file_id=spec.file_id,
            base_file_path=_in_partition(spec.partition_path, spec.base_file) if spec.base_file else None,
            log_file_paths=tuple(_in_partition(spec.partition_path, n) for n in spec.log_files),
            completed_instants=spec.completed_instants,
            max_instant=None,
            ordering_field=spec.ordering_field,
            event_time_ordering=spec.event_time_ordering,
        ),
        storage,
        base=stored.rows if stored is not None else None,
    )
    stats = merge.stats()
    scanned = time.monotonic()
    target = base_file_schema(spec.table_schema)
    size = None
    # Chunks are copied only into a file of the base file's own schema.
    if stored is not None and written_schema(stored.rows.schema, target) is None:
        size = _write_spliced(storage, tmp, name, merge, stored, spec.options)
    if size is None:
        merged = merge.table()
        if merged.num_columns == 0:
            return None
        size = write_base_file(storage, tmp, in_schema(_with_file_name(merged, name), target), spec.options)
    storage.fs.move(storage.full_path(tmp), storage.full_path(path))
    elapsed_ms = int((time.monotonic() - scanned) * 1000)
    return WriteStat(
        fileId=spec.file_id,
        path=path,
        prevCommit=spec.base_instant,
        numWrites=stats.written,
        numDeletes=stats.deleted,
        numUpdateWrites=stats.updated,
        numInserts=stats.inserted,
        totalWriteBytes=size,
        partitionPath=spec.partition_path,
        totalLogRecords=stats.log_records,
        totalLogFilesCompacted=len(spec.log_files),
        totalLogSizeCompacted=spec.log_files_size,
        totalUpdatedRecordsCompacted=stats.log_keys,
        totalLogBlocks=stats.log_blocks,
        fileSizeInBytes=size,
        runtimeStats={
            "totalScanTime": int((scanned - started) * 1000),
            "totalUpsertTime": elapsed_ms if spec.base_file else 0,
            "totalCreateTime": 0 if spec.base_file else elapsed_ms,
        },
    )


def _read_base_file(spec: CompactionTaskSpec, storage: Storage) -> StoredFile | None:
    """The base file, read whole into memory when its new version can copy column chunks from
    it (a codec the splicing writer has); None otherwise (the merge reads it itself)."""
    if spec.base_file is None or spec.options.compression not in SPLICE_CODECS:
        return None
    replaced = read_replaced_file(storage, _in_partition(spec.partition_path, spec.base_file))
    rows = replaced.rows()
    metadata = replaced.metadata
    return StoredFile(
        rows, metadata.metadata or {}, plain_columns(metadata), replaced.raw, replaced.group_rows
    )


def _write_spliced(
    storage: Storage, path: str, name: str, merge: SliceMerge, stored: StoredFile, opts: BaseFileOptions
) -> int | None:
    """Writes the merged slice with its records in the base file's order (a log record in the
    place of the base record it replaces, records only the logs hold after them), copying the
    column chunks no log record changed; None, having written nothing, when it cannot."""
    base = stored.rows
    if FILE_NAME not in base.column_names or RECORD_KEY not in base.column_names:
        return None
    survivors = merge.survivors if merge.survivors is not None else base.slice(0, 0)
    if RECORD_KEY not in survivors.column_names or FILE_NAME not in survivors.column_names:
        return None
    base_keys = base.column(RECORD_KEY)
    dropped = (
        pc.invert(merge.base_keep)
        if merge.base_keep is not None
        else pa.repeat(pa.scalar(False), base.num_rows)
    )
    survivor_keys = survivors.column(RECORD_KEY).combine_chunks()
    # Base rows no survivor replaces are deleted: name them as deletes, the survivors as writes.
    dropped_keys = base_keys.filter(dropped)
    deleted = dropped_keys.filter(pc.invert(pc.is_in(dropped_keys, value_set=survivor_keys)))
    keys = pa.chunked_array([survivor_keys, *deleted.chunks], survivor_keys.type)
    writes = np.concatenate([np.ones(len(survivor_keys), dtype=bool), np.zeros(len(deleted), dtype=bool)])
    layout = merge_in_place(
        base.drop_columns([FILE_NAME]),
        stored.group_rows,
        dropped,
        pa.table({RECORD_KEY: keys}),
        writes,
        survivors,
        name,
        row_group_rows(base, opts),
    )
    if layout is None:
        return None
    groups = [(g.start, g.num_rows, g.sources) for g in layout.row_groups]
    return write_spliced_base_file(storage, path, layout.rows, groups, stored.raw, opts, None, stored.plain)


def _in_partition(partition_path: str, name: str) -> str:
    return f"{partition_path}/{name}" if partition_path else name


def _with_file_name(merged: pa.Table, name: str) -> pa.Table:
    """The merged records with ``_hoodie_file_name`` naming the new base file (base records
    carried the old file's name, log records the file id)."""
    if FILE_NAME not in merged.column_names:
        raise ValueError(f"merged slice lacks {FILE_NAME}: columns {merged.column_names}")
    i = merged.column_names.index(FILE_NAME)
    column = pa.repeat(pa.scalar(name, pa.string()), merged.num_rows)
    merged = merged.set_column(i, pa.field(FILE_NAME, pa.string()), column)
    # Meta columns first, in Hudi's order, whatever order the merge produced.
    user = [c for c in merged.column_names if c not in META_COLUMNS]
    return merged.select([*META_COLUMNS, *user])
