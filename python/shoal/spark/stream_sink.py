"""``df.writeStream.format("shoal")``: a Structured Streaming sink that writes each micro-batch
as one commit, exactly once.

Spark's data source writer cannot bring a key's records together across tasks, so the tasks
do not write the table: each stages the rows it is given as an Arrow IPC file in a scratch
directory of the table (``.hoodie/.temp``, which every executor reaches). The micro-batch's
commit, on the driver once every task succeeded, reads the staged files and writes them with
the embedded engine as one write of the sink's operation (``upsert`` by default, as Hudi's
sink), with every index, key generator, deduplication and table service a ``Table`` write has.

Exactly once, as Hudi's ``HoodieStreamingSink``: the commit records
``_hudi_streaming_sink_checkpoint`` = ``{identifier: batchId}`` in its extraMetadata
(``hoodie.datasource.write.streaming.checkpoint.identifier``, by default
``default_single_writer``), and a micro-batch whose id is at or below the last one the table
committed for that identifier (a replay after a restart) is skipped. The staged files are deleted
once their batch is committed, skipped or aborted, those of failed task attempts included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.ipc as ipc
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from shoal.errors import UnsupportedError
from shoal.fs.storage import Storage
from shoal.spark.options import new_table_path, open_or_create, parse_options, undo_new_table
from shoal.spark.read import arrow_target
from shoal.spark.scratch import scratch_dir
from shoal.table import Table
from shoal.timeline.timeline import Timeline
from shoal.write.writer import Operation

SINK_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"
IDENTIFIER_OPTION = "hoodie.datasource.write.streaming.checkpoint.identifier"
DEFAULT_IDENTIFIER = "default_single_writer"
STAGING_PREFIX = "stream-sink-"
# Options Spark itself takes, which reach the data source with the user's.
_SPARK_OPTIONS = ("path", "checkpointlocation")
_SINK_WRITES = (Operation.UPSERT, Operation.INSERT, Operation.BULK_INSERT, Operation.DELETE)


@dataclass
class StagedRows(WriterCommitMessage):
    """The files one task staged."""

    files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SinkJob:
    """The sink as plain data: the driver plans it, tasks and commits run elsewhere."""

    base_uri: str
    operation: Operation
    options: dict[str, str]
    identifier: str
    staging: str


def begin_stream_write(options: Mapping[str, str], schema: StructType, overwrite: bool) -> SinkJob:
    """Driver side, when the query starts: validates the options and the input's schema against
    the table (created on the first write, as a batch write creates it) before any batch."""
    if overwrite:
        raise UnsupportedError(
            "the shoal sink writes each micro-batch as a commit (outputMode append or update): "
            "outputMode complete would replace the table with every batch"
        )
    given = {k: v for k, v in options.items() if k.lower() not in _SPARK_OPTIONS}
    path = options.get("path")
    if not path:
        raise UnsupportedError("writeStream.format('shoal') needs the table's path: .start(path)")
    operation, table_type, hoodie = parse_options(None, given)
    if operation not in _SINK_WRITES:
        raise UnsupportedError(
            f"{operation.value.lower()} is not a streaming write: the shoal sink takes upsert, insert, "
            "bulk_insert or delete"
        )
    identifier = hoodie.pop(IDENTIFIER_OPTION, DEFAULT_IDENTIFIER)
    new = new_table_path(Storage(path))
    table = open_or_create(path, table_type, hoodie, executor=None)  # type: ignore[arg-type]
    try:
        # A missing key, partition or ordering field, or a schema the table cannot take, fails
        # now, through the preparation every batch's write runs.
        from shoal.spark.datasource import _prepare, _writer

        timeline = Timeline.load(table.storage, table.config)
        _prepare(_writer(table), arrow_target(schema, "UTC").empty_table(), operation, timeline)
    except BaseException:
        if new is not None:
            undo_new_table(table.storage, new)
        raise
    staging = scratch_dir(table.storage, STAGING_PREFIX)
    return SinkJob(table.storage.base_uri, operation, hoodie, identifier, staging)


def stage_rows(job: SinkJob, batches: Iterator[pa.RecordBatch]) -> StagedRows:
    """One task: writes its rows to ``<staging>/<stage>-<partition>-<attempt>.arrow``."""
    ctx = TaskContext.get()
    stage, partition, attempt = (ctx.stageId(), ctx.partitionId(), ctx.taskAttemptId()) if ctx else (0, 0, 0)
    staged = StagedRows()
    storage = Storage(job.base_uri)
    name = f"{job.staging}/{stage}-{partition}-{attempt}.arrow"
    with ExitStack() as files:
        sink = None
        for batch in batches:
            if not batch.num_rows:
                continue
            if sink is None:
                storage.makedirs(job.staging)
                out = files.enter_context(storage.fs.open_output_stream(storage.full_path(name)))
                sink = files.enter_context(ipc.new_stream(out, batch.schema))
                staged.files.append(name)
            sink.write_batch(batch)
    return staged


def last_committed_batch(table: Table, identifier: str) -> int | None:
    """The micro-batch id the table's latest commit for ``identifier`` recorded, as Hudi's sink
    reads it back (commits of other identifiers are passed over)."""
    timeline = table._timeline()
    for instant in reversed(timeline.completed_data_instants()):
        value = timeline.commit_metadata(instant).extra_metadata.get(SINK_CHECKPOINT_KEY)
        if not value:
            continue
        try:
            checkpoint = json.loads(value)
        except ValueError:
            continue
        if isinstance(checkpoint, dict) and identifier in checkpoint:
            return int(checkpoint[identifier])
    return None


def commit_batch(job: SinkJob, messages: list[WriterCommitMessage | None], batch_id: int) -> str | None:
    """Driver side: writes the micro-batch's staged rows as one commit recording ``batch_id``,
    unless the table committed it already. Returns the instant written (None: nothing)."""
    staged = [m for m in messages if isinstance(m, StagedRows)]
    try:
        table = Table(job.base_uri, options=job.options)
        done = last_committed_batch(table, job.identifier)
        if done is not None and done >= batch_id:
            return None
        storage = table.storage
        tables = []
        for name in sorted(f for m in staged for f in m.files):
            with storage.fs.open_input_stream(storage.full_path(name)) as f:
                tables.append(ipc.open_stream(f).read_all())
        if not tables:
            return None
        data = pa.concat_tables(tables)
        checkpoint = {SINK_CHECKPOINT_KEY: json.dumps({job.identifier: str(batch_id)})}
        return table._writer(checkpoint).write(data, job.operation).instant
    finally:
        discard_staged(job, staged)


def discard_staged(job: SinkJob, staged: list[StagedRows]) -> None:
    """Deletes the directories the tasks of a micro-batch staged their files in, with the files
    of failed attempts. Spark asks for the sink again for each micro-batch, and the directory is
    that of the writer the tasks were given, not always the committing one's."""
    storage = Storage(job.base_uri)
    for directory in {f.rsplit("/", 1)[0] for m in staged for f in m.files}:
        storage.delete_dir(directory)


class ShoalStreamWriter(DataSourceStreamArrowWriter):
    """Stages each task's rows; commits each micro-batch as one write (see the module)."""

    def __init__(self, job: SinkJob) -> None:
        self.job = job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedRows:
        return stage_rows(self.job, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit_batch(self.job, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        discard_staged(self.job, [m for m in messages if isinstance(m, StagedRows)])
