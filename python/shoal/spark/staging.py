"""Rows staged by Spark tasks for a write that the driver-side commit runs with the embedded
engine: the streaming sink's micro-batches (``shoal.spark.stream_sink``), and the data source's
batch writes that must bring a key's records together (``shoal.spark.datasource``).

Each task writes the rows it is given as an Arrow IPC stream under a staging directory of the
table (``.hoodie/.temp``, which every executor reaches), named by its stage, partition and
attempt, and its commit message names its file. The commit reads the files the messages name,
those of the attempts that succeeded; the files of failed attempts, which no message names, go
with the staging directory.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc
from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from shoal.fs.storage import Storage

# The task-local property in which Spark's micro-batch execution gives the query's id.
_QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass
class StagedRows(WriterCommitMessage):
    """The files one task staged, and the id of the streaming query that ran it (None in a
    batch write)."""

    files: list[str] = field(default_factory=list)
    query: str | None = None


def stage_rows(base_uri: str, staging: str, batches: Iterator[pa.RecordBatch]) -> StagedRows:
    """One task: writes its rows to ``<staging>/<stage>-<partition>-<attempt>.arrow`` in the
    table at ``base_uri``."""
    ctx = TaskContext.get()
    stage, partition, attempt = (ctx.stageId(), ctx.partitionId(), ctx.taskAttemptId()) if ctx else (0, 0, 0)
    staged = StagedRows(query=ctx.getLocalProperty(_QUERY_ID_PROPERTY) if ctx else None)
    storage = Storage(base_uri)
    name = f"{staging}/{stage}-{partition}-{attempt}.arrow"
    with ExitStack() as files:
        sink = None
        for batch in batches:
            if not batch.num_rows:
                continue
            if sink is None:
                storage.makedirs(staging)
                out = files.enter_context(storage.fs.open_output_stream(storage.full_path(name)))
                sink = files.enter_context(ipc.new_stream(out, batch.schema))
                staged.files.append(name)
            sink.write_batch(batch)
    return staged


def read_staged(storage: Storage, staged: list[StagedRows]) -> pa.Table | None:
    """The rows of the files the messages name (those of the task attempts that succeeded), in
    the order of their names; None when the tasks staged none."""
    tables = []
    for name in sorted(f for m in staged for f in m.files):
        with storage.fs.open_input_stream(storage.full_path(name)) as f:
            tables.append(ipc.open_stream(f).read_all())
    return pa.concat_tables(tables) if tables else None


def delete_staging(base_uri: str, staging: str, staged: list[StagedRows]) -> None:
    """Deletes ``staging`` and any other directory a message names."""
    storage = Storage(base_uri)
    for directory in {staging} | {f.rsplit("/", 1)[0] for m in staged for f in m.files}:
        storage.delete_dir(directory)


def delete_abandoned(storage: Storage, parent: str, prefix: str, older_than_s: float) -> list[str]:
    """Deletes the staging directories ``<parent>/<prefix>*`` last changed more than
    ``older_than_s`` seconds ago: those of writes whose driver died between staging and
    commit, which nothing else deletes. A file system that reports no time for directories
    (object stores) keeps them. Returns the directories deleted."""
    selector = pafs.FileSelector(storage.full_path(parent), allow_not_found=True)
    cutoff = time.time_ns() - int(older_than_s * 1e9)
    deleted = []
    for info in storage.fs.get_file_info(selector):
        stale = info.mtime_ns is not None and info.mtime_ns < cutoff
        if info.type == pafs.FileType.Directory and info.base_name.startswith(prefix) and stale:
            storage.delete_dir(f"{parent}/{info.base_name}")
            deleted.append(info.base_name)
    return deleted
