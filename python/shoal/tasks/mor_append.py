"""The merge-on-read append task: updates of one file group become Avro data blocks appended to
the current log file of its latest slice (Hudi's append handle).

Deletes are not written as delete blocks: Hudi's readers collapse a key's log entries before
comparing with the base record, so under event-time ordering a delete followed by an older
record would bring the deleted base version back. The writer instead routes file groups with
deletes to a rewrite of their merged slice, which gives the same rows in every reader.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.fs.markers import create_marker
from shoal.fs.naming import LOG_BASE_VERSION, log_file_name, write_token
from shoal.fs.storage import Storage
from shoal.tasks.cow_write import OP_COLUMN, OP_UPSERT
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


def run_log_append(spec: LogAppendSpec, records: pa.Table, storage: Storage | None = None) -> WriteStat:
    """Appends the blocks and returns the delta write stat."""
    started = time.monotonic()
    storage = storage or Storage(spec.base_uri)
    ops = records.column(OP_COLUMN)
    if not pc.all(pc.equal(ops, OP_UPSERT)).as_py():
        raise ValueError("log appends take updates only; deletes go through a slice rewrite")
    upserts = records.drop_columns([OP_COLUMN])
    blocks: list[bytes] = []
    if upserts.num_rows:
        # Log data blocks carry the file id, not a file name, in _hoodie_file_name.
        data = with_meta_columns(upserts, spec.instant, spec.task_id, spec.file_id)
        schema = avro_schema_for(data.schema, spec.table_name)
        for batch in data.to_batches(max_chunksize=100_000):
            blocks.append(_native.encode_avro_data_block(batch, schema, spec.instant))
    payload = b"".join(blocks)

    append = (
        spec.current_log_name is not None and storage.is_local and spec.current_log_size < spec.max_log_size
    )
    if append:
        assert spec.current_log_name is not None
        name, version, offset = spec.current_log_name, spec.current_log_version, spec.current_log_size
    else:
        version = spec.current_log_version + 1 if spec.current_log_name else LOG_BASE_VERSION
        name = log_file_name(
            spec.file_id, spec.base_instant, version, write_token(spec.task_id, 0, spec.attempt)
        )
        offset = 0
    path = f"{spec.partition_path}/{name}" if spec.partition_path else name
    create_marker(storage, spec.instant, path, "APPEND", append_offset=offset)
    full = storage.full_path(path)
    if append:
        with open(full, "ab") as f:
            f.write(payload)
    else:
        storage.write_bytes(path, payload)
    size = storage.size(path)
    return WriteStat(
        fileId=spec.file_id,
        path=path,
        prevCommit=spec.base_instant,
        numWrites=upserts.num_rows,
        numDeletes=0,
        numUpdateWrites=upserts.num_rows,
        numInserts=0,
        totalWriteBytes=len(payload),
        partitionPath=spec.partition_path,
        totalLogRecords=upserts.num_rows,
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
