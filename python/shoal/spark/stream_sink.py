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
committed for that identifier (a replay after a restart) is skipped. The commit also records the
Spark query that wrote it (``_shoal_streaming_sink_query`` = ``{identifier: query id}``; Spark keeps
a query's id in its checkpoint): a query started with a new checkpoint location numbers its batches
from 0 again, and its batches are written, not taken for replays of the old query's (which Hudi's
sink would skip, losing them). The tasks of an identifier's batches stage their files in one
directory, ``.hoodie/.temp/stream-sink-<digest of the identifier>``, which the batch's commit (or
abort) empties once the batch is committed, skipped or aborted: Spark sends no message for a failed
task attempt, and its partial file is deleted with the rest (or, when the attempt's Python worker
was still writing it as Spark gave up on the attempt, with the next batch's).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from shoal.errors import UnsupportedError
from shoal.fs.markers import MARKER_DIR
from shoal.fs.storage import Storage
from shoal.spark.options import new_table_path, open_or_create, parse_options, undo_new_table
from shoal.spark.read import arrow_target
from shoal.spark.staging import StagedRows, delete_staging, read_staged, stage_rows
from shoal.table import Table
from shoal.timeline.timeline import Timeline
from shoal.write.writer import Operation

SINK_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"
IDENTIFIER_OPTION = "hoodie.datasource.write.streaming.checkpoint.identifier"
DEFAULT_IDENTIFIER = "default_single_writer"
# The Spark query (its id, kept in the query's checkpoint) that committed each identifier's batch.
SINK_QUERY_KEY = "_shoal_streaming_sink_query"
STAGING_PREFIX = "stream-sink-"
# Options Spark itself takes, which reach the data source with the user's.
_SPARK_OPTIONS = ("path", "checkpointlocation")
_SINK_WRITES = (Operation.UPSERT, Operation.INSERT, Operation.BULK_INSERT, Operation.DELETE)


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
            "the shoal sink writes each micro-batch as a commit (outputMode append): "
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
    storage = Storage(path)
    new = new_table_path(storage)
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
    return SinkJob(table.storage.base_uri, operation, hoodie, identifier, staging_dir(identifier))


def staging_dir(identifier: str) -> str:
    """The directory the tasks of ``identifier``'s batches stage their files in. The commit runs
    in another process, with a writer Spark makes anew for it, and must find the files of the
    failed task attempts too (no message names them): the name is fixed by the identifier, which
    one query at a time writes with."""
    digest = hashlib.sha256(identifier.encode()).hexdigest()[:16]
    return f"{MARKER_DIR}/{STAGING_PREFIX}{digest}"


@dataclass(frozen=True)
class SinkCheckpoint:
    """What the latest commit of an identifier recorded: its micro-batch id, and the query that
    wrote it (None: a writer that does not record it, Hudi's sink among them)."""

    batch_id: int
    query: str | None


def last_committed_batch(table: Table, identifier: str) -> SinkCheckpoint | None:
    """The micro-batch id the table's latest commit for ``identifier`` recorded, as Hudi's sink
    reads it back (commits of other identifiers are passed over), with the query that wrote it."""
    timeline = table._timeline()
    for instant in reversed(timeline.completed_data_instants()):
        extra = timeline.commit_metadata(instant).extra_metadata
        checkpoint = _json_map(extra.get(SINK_CHECKPOINT_KEY))
        if identifier in checkpoint:
            query = _json_map(extra.get(SINK_QUERY_KEY)).get(identifier)
            return SinkCheckpoint(int(checkpoint[identifier]), str(query) if query else None)
    return None


def _json_map(value: str | None) -> dict:
    if not value:
        return {}
    try:
        loaded = json.loads(value)
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def is_replay(done: SinkCheckpoint | None, batch_id: int, query: str | None) -> bool:
    """Whether the table committed ``batch_id`` of this query already. Batch ids are those of
    the query's checkpoint: a query started with a new checkpoint location (a new query id)
    numbers its batches from 0 again, and they are new data, not replays."""
    if done is None or done.batch_id < batch_id:
        return False
    return done.query is None or query is None or done.query == query


def commit_batch(job: SinkJob, messages: list[WriterCommitMessage | None], batch_id: int) -> str | None:
    """Driver side: writes the micro-batch's staged rows as one commit recording ``batch_id``,
    unless the table committed it already. Returns the instant written (None: nothing)."""
    staged = [m for m in messages if isinstance(m, StagedRows)]
    try:
        table = Table(job.base_uri, options=job.options)
        query = next((m.query for m in staged if m.query), None)
        if is_replay(last_committed_batch(table, job.identifier), batch_id, query):
            return None
        data = read_staged(table.storage, staged)
        if data is None:
            return None
        checkpoint = {SINK_CHECKPOINT_KEY: json.dumps({job.identifier: str(batch_id)})}
        if query:
            checkpoint[SINK_QUERY_KEY] = json.dumps({job.identifier: query})
        return table._writer(checkpoint).write(data, job.operation).instant
    finally:
        discard_staged(job, staged)


def discard_staged(job: SinkJob, staged: list[StagedRows]) -> None:
    """Deletes the directory the tasks of a micro-batch staged their files in, with the files of
    failed attempts (which no message names), and any other directory a message names."""
    delete_staging(job.base_uri, job.staging, staged)


class ShoalStreamWriter(DataSourceStreamArrowWriter):
    """Stages each task's rows; commits each micro-batch as one write (see the module)."""

    def __init__(self, job: SinkJob) -> None:
        self.job = job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedRows:
        return stage_rows(self.job.base_uri, self.job.staging, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit_batch(self.job, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        discard_staged(self.job, [m for m in messages if isinstance(m, StagedRows)])
