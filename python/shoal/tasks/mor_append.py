"""The merge-on-read append task: the changes of one file group become log blocks appended to
the current log file of its latest slice (Hudi's append handle).

Updates go into an Avro data block; deletes into a delete block that follows it, as Hudi writes
them: hard deletes with the default ordering value (they always apply), ``_hoodie_is_deleted``
rows with their ordering value (under event-time ordering they lose to a newer version).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.arrays import importable
from shoal.errors import CommitConflictError
from shoal.fs.markers import create_marker
from shoal.fs.naming import LOG_BASE_VERSION, log_file_name, write_token
from shoal.fs.storage import Storage
from shoal.tasks.cow_write import OP_COLUMN, OP_HARD_DELETE, OP_UPSERT, CowWriteSpec
from shoal.timeline.commit_metadata import WriteStat
from shoal.write.base_file import avro_schema_for, with_meta_columns

RECORD_KEY = "_hoodie_record_key"


@dataclass(frozen=True)
class LogAppendSpec:
    """One file group's log append, as plain data."""

    base_uri: str
    instant: str
    partition_path: str
    file_id: str
    task_id: int
    base_instant: str
    base_file_name: str
    current_log_name: str | None
    current_log_version: int
    current_log_size: int
    max_log_size: int
    table_name: str
    ordering_field: str | None
    attempt: int = 0
    # The Avro schema (meta fields included) for the SCHEMA header of a delete block when the
    # records carry no data columns (the delete operation).
    table_schema: str | None = None
    # The slice rewrite to run instead when a record (or ordered delete) names a key that the
    # slice's logs delete: see ``names_a_logged_delete``.
    rewrite_if_key_deleted: CowWriteSpec | None = None
    # With ``attempt``, names the write attempt in a new log file's write token.
    stage_id: int = 0
    # hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled: Java then
    # orders by a timestamp field's instant (TimestampMicrosWrapper) instead of its raw long.
    consistent_logical_timestamp: bool = False
    # hoodie.logfile.data.block.max.size: the largest data block, in bytes.
    max_data_block_size: int = 256 * 1024 * 1024
    # Append to the current log file when it has room. Executors that may run a task twice
    # (Spark retries, speculation) turn this off: each attempt then writes a log file of its
    # own, and the commit keeps the successful attempt's file only.
    in_place: bool = True


def run_log_append(spec: LogAppendSpec, records: pa.Table, storage: Storage | None = None) -> WriteStat:
    """Appends the blocks and returns the delta write stat."""
    started = time.monotonic()
    storage = storage or Storage(spec.base_uri)
    ops = records.column(OP_COLUMN)
    is_upsert = pc.equal(ops, OP_UPSERT)
    if pc.all(is_upsert).as_py():
        # Most appends hold no delete: no copies (a filter keeps the chunks as they are too).
        upserts, deletes = records.drop_columns([OP_COLUMN]), records.slice(0, 0)
    else:
        upserts = records.filter(is_upsert).drop_columns([OP_COLUMN])
        deletes = records.filter(pc.invert(is_upsert))
    blocks: list[bytes] = []
    schema = spec.table_schema
    if upserts.num_rows:
        # Log data blocks carry the file id, not a file name, in _hoodie_file_name.
        data = with_meta_columns(upserts, spec.instant, spec.task_id, spec.file_id)
        schema = avro_schema_for(data.schema, spec.table_name)
        for batch in data.to_batches(max_chunksize=100_000):
            blocks.extend(_data_blocks(batch, schema, spec))
    if deletes.num_rows:
        blocks.extend(_delete_blocks(deletes, spec, schema))
    payload = b"".join(blocks)

    append = (
        spec.in_place
        and spec.current_log_name is not None
        and storage.is_local
        # Hudi rolls over to a new log file once one is larger than the limit, not at it.
        and spec.current_log_size <= spec.max_log_size
    )
    if append:
        assert spec.current_log_name is not None
        name, version, offset = spec.current_log_name, spec.current_log_version, spec.current_log_size
    else:
        version = spec.current_log_version + 1 if spec.current_log_name else LOG_BASE_VERSION
        name = log_file_name(
            spec.file_id, spec.base_instant, version, write_token(spec.task_id, spec.stage_id, spec.attempt)
        )
        offset = 0
    path = f"{spec.partition_path}/{name}" if spec.partition_path else name
    create_marker(storage, spec.instant, path, "APPEND", append_offset=offset)
    full = storage.full_path(path)
    if append:
        with open(full, "ab") as f:
            f.write(payload)
    else:
        # Exclusively: overwriting a log file another writer just created would lose its blocks.
        try:
            storage.create_exclusive(path, payload)
        except CommitConflictError:
            raise CommitConflictError(
                f"another writer created the log file {path} of file group {spec.file_id} at the same "
                f"time as write {spec.instant}; retry the write"
            ) from None
    size = storage.size(path)
    return WriteStat(
        fileId=spec.file_id,
        path=path,
        prevCommit=spec.base_instant,
        numWrites=upserts.num_rows,
        numDeletes=deletes.num_rows,
        numUpdateWrites=upserts.num_rows,
        numInserts=0,
        totalWriteBytes=len(payload),
        partitionPath=spec.partition_path,
        totalLogRecords=upserts.num_rows + deletes.num_rows,
        totalLogBlocks=len(blocks),
        fileSizeInBytes=size,
        runtimeStats={
            "totalScanTime": 0,
            "totalUpsertTime": int((time.monotonic() - started) * 1000),
            "totalCreateTime": 0,
        },
        logVersion=version,
        logOffset=offset,
        baseFile=spec.base_file_name,
        logFiles=[name],
    )


def _data_blocks(batch: pa.RecordBatch, schema: str, spec: LogAppendSpec) -> list[bytes]:
    """The AVRO_DATA_BLOCKs of ``batch``, each at most ``spec.max_data_block_size`` bytes unless
    one record alone is larger: a block over the limit is split in halves by rows, as Hudi's
    append handle starts a new block once the records it buffered reach the limit."""
    block = _native.encode_avro_data_block(importable(batch), schema, spec.instant)
    if len(block) <= spec.max_data_block_size or batch.num_rows == 1:
        return [block]
    half = batch.num_rows // 2
    return _data_blocks(batch.slice(0, half), schema, spec) + _data_blocks(batch.slice(half), schema, spec)


def _delete_blocks(deletes: pa.Table, spec: LogAppendSpec, schema: str | None) -> list[bytes]:
    """DELETE_BLOCKs of the rows. Hard deletes carry Java's default ordering value
    ``IntWrapper(0)``, which always applies; ``_hoodie_is_deleted`` rows carry their own, in a
    block of their own (a batch holds each key once, so the two blocks never share a key)."""
    header = {"SCHEMA": schema, "INSTANT_TIME": spec.instant} if schema else None
    hard = pc.equal(deletes.column(OP_COLUMN), OP_HARD_DELETE)
    blocks = []
    for rows, with_ordering in ((deletes.filter(hard), False), (deletes.filter(pc.invert(hard)), True)):
        if rows.num_rows == 0:
            continue
        ordering = None
        if with_ordering and spec.ordering_field and spec.ordering_field in rows.column_names:
            values = rows.column(spec.ordering_field)
            ordering = java_ordering_values(values, spec.consistent_logical_timestamp)
        blocks.append(
            _native.encode_delete_block(
                rows.column(RECORD_KEY),
                rows.column("_hoodie_partition_path"),
                ordering,
                spec.instant,
                schema_json=schema,
                header=header,
            )
        )
    return blocks


def java_ordering_values(values: pa.ChunkedArray, consistent_logical_timestamp: bool) -> pa.ChunkedArray:
    """Ordering values as Hudi's Java writer puts them in a delete block: the field's Avro value
    as the record holds it. A time-millis field's is an Integer, a time-micros field's a Long, and
    a timestamp field's its raw Long (millis or micros, as the field stores them) unless
    consistent logical timestamps are on, when Java wraps the instant (TimestampMicrosWrapper).
    Java and hudi-rs compare a delete's value with the field's only when the classes match."""
    kind = values.type
    if pa.types.is_time32(kind):
        return values.cast(pa.int32())
    if pa.types.is_time64(kind) or (pa.types.is_timestamp(kind) and not consistent_logical_timestamp):
        return values.cast(pa.int64())
    return values


def names_a_logged_delete(rewrite: CowWriteSpec, records: pa.Table, storage: Storage | None = None) -> bool:
    """Whether a record or ``_hoodie_is_deleted`` delete among ``records`` names a key that a
    committed delete block in the slice's logs deletes.

    Hudi's readers collapse a key's log entries before the base record competes, so such an
    entry logged after the delete collapses to a version that can lose against the deleted base
    record under event-time ordering, and bring it back. Those slices are rewritten instead."""
    old = rewrite.old_slice
    if old is None:
        return False
    ordered = records.filter(pc.not_equal(records.column(OP_COLUMN), OP_HARD_DELETE)).column(RECORD_KEY)
    if len(ordered) == 0:
        return False
    storage = storage or Storage(old.base_uri)
    # The blocks a reader merges: those of completed instants, and of instants older than the
    # active timeline (archived), less the rolled-back ones.
    blocks = _native.scan_log_files(
        storage.native_sources(old.log_file_paths), list(old.completed_instants), None
    )
    deleted = [b.deletes().column("record_key") for b in blocks if b.block_type == "DELETE_BLOCK"]
    if not deleted:
        return False
    keys = pa.chunked_array(deleted, pa.string()).combine_chunks()
    return bool(pc.any(pc.is_in(ordered, value_set=keys)).as_py())
