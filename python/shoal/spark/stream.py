"""Spark Structured Streaming from a shoal table: ``spark.readStream.format("shoal").load(path)``.

Each micro-batch is an incremental read of the instants completed since the previous one, planned
and read like ``spark.read.format("shoal")`` with ``query_type=incremental`` (one task per file
slice, packed into Spark partitions by size). The offset is the stream's checkpoint position on the
incremental axis, as with ``Table.stream``: the requested time of the last instant read (table
version 6) or its completion time (version 8). On version 6 a batch never passes the oldest pending
write, so an instant that completes late is not skipped (:func:`shoal.read.stream.ready_instants`).
Spark stores the offsets in the query's checkpoint location: a restarted query goes on after the
last batch it committed.

Options, besides the read options of an incremental read (``columns``, ``filters``,
``include_deletes``, which needs ``query_type=incremental`` too, and
``hoodie.datasource.read.incr.fallback.fulltablescan.enable``):

* ``hoodie.datasource.streaming.startOffset`` (``start_offset``): ``earliest`` (the default: every
  instant on the timeline), ``latest`` (only instants that complete after the query starts), or
  a position (an instant time): the instants after it.
* ``max_instants_per_trigger``: at most this many instants per micro-batch (default: all).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from shoal.errors import InvalidOptionError, SchemaMismatchError
from shoal.read.filters import Filter
from shoal.read.incremental import normalize_bound, range_key
from shoal.read.stream import ready_instants
from shoal.read.undone import check_start_not_undone
from shoal.spark.read import (
    ReadJob,
    ReadTask,
    arrow_target,
    conform,
    iter_task,
    plan_read,
    spark_schema,
    storage_for,
    without_tasks,
)
from shoal.spark.splits import SplitPolicy, pack
from shoal.table import Table
from shoal.timeline.timeline import Timeline

START_OFFSET = "hoodie.datasource.streaming.startOffset"
MAX_INSTANTS = "max_instants_per_trigger"
# Stream-only options (lower case) and their names here; a batch read refuses them.
STREAM_OPTIONS = {
    START_OFFSET.lower(): "start_offset",
    "start_offset": "start_offset",
    MAX_INSTANTS: MAX_INSTANTS,
}
# The offset key; "" stands for the beginning of the timeline (offsets hold primitive values).
_CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class StreamOptions:
    """The stream-only options of one ``readStream``, validated."""

    start_offset: str = "earliest"
    max_instants: int | None = None


def split_stream_options(options: Mapping[str, str]) -> tuple[StreamOptions, dict[str, str]]:
    """The stream-only options and the rest (the read options)."""
    stream: dict[str, str] = {}
    rest: dict[str, str] = {}
    for key, value in options.items():
        name = STREAM_OPTIONS.get(key.lower())
        if name is None:
            rest[key] = value
        elif name in stream and stream[name] != value:
            raise InvalidOptionError(f"option {key!r} conflicts with another spelling of {name!r}")
        else:
            stream[name] = value
    start = stream.get("start_offset", "earliest").strip()
    if start.lower() in ("earliest", "latest"):
        start = start.lower()
    else:
        normalize_bound(start, START_OFFSET)  # an instant time, or InvalidArgumentError
    limit = None
    if MAX_INSTANTS in stream:
        text = stream[MAX_INSTANTS].strip()
        if not text.isdigit() or int(text) < 1:
            raise InvalidOptionError(f"option {MAX_INSTANTS!r} must be a positive integer, got {text!r}")
        limit = int(text)
    return StreamOptions(start, limit), rest


class SlicePartition(InputPartition):
    """Planned read tasks (each a file slice, or a partition's changes and deletes) that one
    Spark task reads in turn, with the read's shared part (plain data)."""

    def __init__(self, job: ReadJob, tasks: tuple[ReadTask, ...]) -> None:
        self.job = job
        self.tasks = tasks


def slice_partitions(job: ReadJob, policy: SplitPolicy) -> list[InputPartition]:
    """The planned tasks packed into Spark partitions by size, each partition carrying the
    read's shared part."""
    shared = without_tasks(job)
    packed = pack([t.size for t in job.tasks], policy)
    return [SlicePartition(shared, tuple(job.tasks[i] for i in tasks)) for tasks in packed]


def read_partition(partition: InputPartition, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of one partition's tasks as batches of ``target`` (Spark reads one empty
    ``InputPartition(None)`` when a plan has no task)."""
    if not isinstance(partition, SlicePartition):
        return
    storage = storage_for(partition.job.base_uri)
    for task in partition.tasks:
        for piece in iter_task(partition.job, task, storage):
            yield from conform(piece, target)


class ShoalStreamReader(DataSourceStreamReader):
    """Plans each micro-batch as an incremental read between two checkpoint positions."""

    def __init__(
        self,
        path: str,
        filters: Sequence[Filter],
        include_deletes: bool,
        fallback_full_scan: bool,
        stream: StreamOptions,
        schema: StructType,
        policy: SplitPolicy,
        follows_table: bool = False,
        fixed_columns: bool = False,
    ) -> None:
        """``follows_table``: ``schema`` is the one the table declared (no schema of the
        user's), so a type the table widens stops the query, and so does a column it gains
        unless ``fixed_columns`` (a ``columns`` option)."""
        self.path = path
        self.declared = schema
        self.follows_table = follows_table
        self.fixed_columns = fixed_columns
        self.policy = policy
        self.filters = tuple(filters)
        self.include_deletes = include_deletes
        self.fallback_full_scan = fallback_full_scan
        self.stream = stream
        self.columns = tuple(schema.names)
        self.target = arrow_target(schema, "UTC")
        self._committed: dict | None = None

    def initialOffset(self) -> dict:
        start = self.stream.start_offset
        if start == "earliest":
            return {_CHECKPOINT: ""}
        if start == "latest":
            timeline = Table(self.path)._timeline()
            ready = ready_instants(timeline, None)
            by_completion = timeline.config.table_version >= 8
            return {_CHECKPOINT: range_key(ready[-1], by_completion) if ready else ""}
        return {_CHECKPOINT: normalize_bound(start, START_OFFSET) or ""}

    def latestOffset(self, start: dict | None = None, limit: object = None) -> dict:
        # Spark before 4.2 passes no start: the batch goes on from the last one committed.
        if start is None:
            start = self._committed if self._committed is not None else self.initialOffset()
        table = Table(self.path)
        timeline = table._timeline()
        # A query whose last batch read a commit that was rolled back since fails, rather than
        # going on with rows its sink holds and the table no longer does.
        check_start_not_undone(timeline, start.get(_CHECKPOINT) or None)
        ready = ready_instants(timeline, start.get(_CHECKPOINT) or None)
        if self.stream.max_instants is not None:
            ready = ready[: self.stream.max_instants]
        if not ready:
            return start
        if self.follows_table:
            self._check_schema_unchanged(table, timeline)
        return {_CHECKPOINT: range_key(ready[-1], timeline.config.table_version >= 8)}

    def _check_schema_unchanged(self, table: Table, timeline: Timeline) -> None:
        """Raises SchemaMismatchError when the table has columns, or column types, the stream
        did not declare when it started: Spark keeps a query's schema, so its batches would go
        on without the columns (a sink would never get the values those batches carried), or
        fail to cast the values. Raised before the batch's offset is logged, so a restarted
        query reads the batch again with the table's new schema."""
        current = table._schema(timeline)
        if current is None:
            return
        declared = {f.name: f.dataType for f in self.declared.fields}
        now = spark_schema(current).fields
        added = [] if self.fixed_columns else [f.name for f in now if f.name not in declared]
        changed = [
            f"{f.name} ({declared[f.name].simpleString()} -> {f.dataType.simpleString()})"
            for f in now
            if f.name in declared and f.dataType != declared[f.name]
        ]
        if added or changed:
            what = "; ".join(
                part
                for part in (
                    f"new columns: {', '.join(added)}" if added else "",
                    f"changed types: {', '.join(changed)}" if changed else "",
                )
                if part
            )
            raise SchemaMismatchError(
                f"the table's schema changed since this stream started ({what}): restart the query "
                "to read on with the new schema, from the first batch not yet committed (the "
                "columns option fixes a stream's columns instead)"
            )

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = start.get(_CHECKPOINT) or None, end.get(_CHECKPOINT) or None
        if begin == stop:
            return []
        job = plan_read(
            self.path,
            self.columns,
            self.filters,
            "incremental",
            None,
            begin,
            stop,
            self.include_deletes,
            self.fallback_full_scan,
        )
        return slice_partitions(job, self.policy)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.target)

    def commit(self, end: dict) -> None:
        """Remembers the end of the batch Spark committed; the table keeps what the batch read
        until it is cleaned, so there is nothing to release."""
        self._committed = end
