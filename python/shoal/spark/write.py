"""Writing a Spark DataFrame into a shoal (Hudi) table: ``shoal.spark.write(df, path, ...)``.

The write runs the local writer's phases (``shoal.write.writer.Writer``), with the data staying
in Spark (DESIGN §3.1). Whole records cross from the JVM into Python once, in the route pass;
the count pass before it sees only the columns key generation reads (moving rows into Python
is the expensive direction: /work/shared/spec/SPARK_NOTES.md):

1. *count* (``mapInArrow`` over the key columns of the input): key generation, validation (a
   null or empty key fails here, before the timeline changes) and bloom tagging against the
   latest base files, whose footers (key ranges, bloom filters) the driver broadcasts. A key
   only one footer admits keeps that file's id unread: on copy-on-write tables the rewrite of
   that file group takes a bloom false positive as an insert; on merge-on-read the log append
   task of the file group reads its base file's keys once and writes the false positives to
   a base file (``_split_strays``): a new key must not land in a log, where no bloom index
   finds it. That base file is the one the partition's inserts create when the driver paired
   the two buckets into one task (``stray_targets``), else a new file group's. Keys several
   files may hold are confirmed by reading the files' key columns. Each task returns its
   record counts per (partition, file group or new, operation), the workload profile, and the
   keys whose confirmed tag differs from the footer tag (``BloomIndex.footer_tags``).
2. *assign* buckets on the driver with the local writer's ``BucketAssigner``: updates go to the
   file group holding their key; inserts fill small files, then new file groups.
3. *route* (``mapInArrow`` over whole records): keys the records (``key_records``); the same
   keys, their footer tags and the broadcast corrections give every record the tag the count
   pass counted, without reading a file; tags become buckets: updates by file group, inserts by
   a stable hash of the record key (``shoal.spark.keys``) weighted by the buckets' capacities
   (as Hudi's ``UpsertPartitioner``). Each task packs its records by bucket
   (``shoal.spark.packing``): per chunk of input and bucket, the bucket's keyed records as one
   Arrow IPC stream, carried in rows of pieces small enough that no Arrow batch of a write
   task passes Spark's 2 GiB limit. Spark repartitions those rows by route value, so that each
   bucket lands in the task planned for it, and sorts them by (route, value, piece). Shuffling
   packed records instead of every record as a row of its own costs Spark a copy of bytes, not
   a conversion per record.
4. *write*: each task unpacks one bucket's records at a time, deduplicates them
   (``finish_records``, in input order restored from a sequence column when keys repeat) and
   runs the local writer's task for the bucket's spec (``run_cow_write`` / ``run_log_append``).
   Tasks return their write stats and how many records they received.
5. *commit* on the driver (``Writer.commit``): files of failed or speculative attempts, which
   carry markers but are in no returned stat, are deleted first.

With a global index (``GLOBAL_BLOOM``, ``GLOBAL_SIMPLE``) the first pass is a key pass instead:
the keys, partition paths, operations and ordering values of every record come to the driver,
which deduplicates and tags them as the local writer does and plans by key
(``shoal.spark.global_keys``).

With the bucket index (``hoodie.index.type=BUCKET``, ``shoal.index.bucket``) no file is read
and no tag is carried: the count tasks hash each key to its bucket number (Hudi's
``BucketIdentifier``, vectorised) and return counts per (partition, bucket, operation); the
driver tags those buckets with their file groups as the local writer tags keys (checking the
layout: a table of another index or other bucket options fails here, before the timeline
changes) and assigns them with the local writer's ``Writer.assign``: each bucket's file group
takes its records, a bucket without one gets a new file group named after it. The route pass
hashes the keys again and packs each record for the task of its (partition, bucket).

The input is thus evaluated twice, by the count pass (its key columns only) and by the route
pass (whole records, which cross from the JVM into Python once).
An input that could give other rows when evaluated again (a plan with ``limit``, ``sample``,
``rand()``, windows, ``dropDuplicates``, or a source other than files, local data, ranges and
cached or checkpointed data: :func:`reproducible`) is checkpointed first (``localCheckpoint``).
One that changes all the same (a UDF wrongly taken for deterministic) fails the write before
its commit: a row's bucket is missing from the plan, or the rows written differ from the rows
counted.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DecimalType,
    MapType,
    StringType,
    StructType,
)

from shoal import _native
from shoal.arrays import contiguous
from shoal.config import write_config as wc
from shoal.config.table_config import MergeOrdering, TableConfig, TableType
from shoal.errors import InvalidArgumentError, InvalidOptionError
from shoal.fs.naming import new_file_id
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice, FileSystemView
from shoal.index.bloom import BloomIndex
from shoal.index.bucket import BucketIndex, bucket_ids, bucket_of_file
from shoal.index.footer import KeyFooter, read_key_footer
from shoal.index.membership import held_by
from shoal.services.compaction import base_file_options
from shoal.spark.executor import SparkExecutor, name_attempt, spark_job
from shoal.spark.global_keys import GlobalRoutePlan, key_pass_schema, key_task, plan_global
from shoal.spark.keying import BucketLayout, KeySpec, chunked, keyed_columns, task_keygen
from shoal.spark.keys import KeyMap, key_hash
from shoal.spark.packing import (
    PACKED_SCHEMA,
    PIECE_COLUMN,
    ROUTE_COLUMN,
    VALUE_COLUMN,
    pack,
    packed_values,
    piece_bytes,
    unpack,
)
from shoal.table import Table
from shoal.tasks.cow_write import OP_COLUMN, OP_HARD_DELETE, OP_UPSERT, CowWriteSpec
from shoal.tasks.mor_append import LogAppendSpec
from shoal.timeline.commit_metadata import NULL_COMMIT, WriteStat
from shoal.timeline.lock import WRITE, table_lock
from shoal.timeline.timeline import Timeline
from shoal.write.assigner import Assignment, Bucket, BucketAssigner
from shoal.write.gather import take_rows
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY
from shoal.write.schema import (
    IS_DELETED_COLUMN,
    normalize_types,
    strip_meta_columns,
)
from shoal.write.writer import (
    REPLACING,
    WRITES_NEW_FILE_GROUPS,
    Operation,
    Writer,
    WriteResult,
    finish_records,
    group_rows,
    key_records,
    looks_up_keys,
    make_index,
    refuse_replacing_buckets,
    replaced_file_groups,
    run_write_task,
)

# Hudi's data source option names that are not write config keys.
OPERATION_OPTION = "hoodie.datasource.write.operation"
TABLE_TYPE_OPTION = "hoodie.datasource.write.table.type"
# Keyword shorthands for the options that define a new table.
_ALIASES = {
    "table_name": wc.TABLE_NAME,
    "record_key": wc.RECORDKEY_FIELD,
    "partition_by": wc.PARTITIONPATH_FIELD,
    "ordering_field": wc.PRECOMBINE_FIELD,
    "table_type": TABLE_TYPE_OPTION,
    "key_generator": wc.KEYGENERATOR_CLASS,
}

# The input position of a record (Spark's monotonically_increasing_id), in the route pass's
# packed records.
SEQ_COLUMN = "_shoal_seq"
# Columns the local writer adds to records (not part of the table's data schema).
_INTERNAL = (RECORD_KEY, PARTITION_PATH, OP_COLUMN)

# Rows a count task tags at once: the key column of a candidate file is read once per chunk.
TAG_CHUNK_ROWS = 1_000_000
# Records the route pass packs at once: the fewer, larger packed values, the fewer rows the
# shuffle moves; the bytes bound a packed value well below binary's 2 GiB offsets.
PACK_CHUNK_ROWS = 200_000
PACK_CHUNK_BYTES = 64 * 1024 * 1024
# Arrow batches of the write's jobs (see arrow_batches): bytes aimed at, records per batch.
BATCH_BYTES = 32 * 1024 * 1024
MIN_BATCH_ROWS, MAX_BATCH_ROWS = 10_000, 100_000
# Records a write task should handle at least before buckets get tasks of their own.
MIN_TASK_RECORDS = 200_000
# Input records sampled for the record size estimate when no commit tells it.
SAMPLE_ROWS = 20_000

# Count rows: records per (partition, file id or null, operation), or with the bucket index per
# (partition, bucket number, operation); rows with a key are the bloom index's corrected tags.
COUNT_SCHEMA = "partition string, file_id string, op tinyint, n long, key string, bucket int"
_COUNT_ARROW_SCHEMA = pa.schema(
    [
        ("partition", pa.string()),
        ("file_id", pa.string()),
        ("op", pa.int8()),
        ("n", pa.int64()),
        ("key", pa.string()),
        ("bucket", pa.int32()),
    ]
)
RESULT_SCHEMA = "result string"


def write(
    df: DataFrame,
    path: str,
    operation: str | None = None,
    options: Mapping[str, Any] | None = None,
    **more_options: Any,
) -> WriteResult:
    """Writes ``df`` into the table at ``path`` with Spark and returns the committed result.

    ``operation``: ``upsert`` (default), ``insert``, ``bulk_insert`` or ``delete`` (or the option
    ``hoodie.datasource.write.operation``). Options are Hudi's write options (``hoodie.*``), given
    as a mapping and/or keywords (``**{"hoodie.parquet.max.file.size": "..."}``).

    When ``path`` holds no table yet, one is created from ``hoodie.table.name``,
    ``hoodie.datasource.write.recordkey.field``, ``hoodie.datasource.write.partitionpath.field``,
    ``hoodie.datasource.write.precombine.field`` and ``hoodie.datasource.write.table.type``
    (or the keywords ``table_name``, ``record_key``, ``partition_by``, ``ordering_field``,
    ``table_type``). For an existing table these options must agree with it.

    Records are validated, keyed, tagged and written by Spark tasks; planning and the commit
    happen on the driver with the same code as the local writer, so both give the same table.
    """
    return _write(df, path, operation, {**(options or {}), **more_options})


def _write(
    df: DataFrame,
    path: str,
    operation: str | None,
    options: Mapping[str, Any],
    after_task_write: Callable[[CowWriteSpec | LogAppendSpec, WriteStat], None] | None = None,
) -> WriteResult:
    """:func:`write`, with a hook the write tasks call after writing their file (tests inject
    task failures with it)."""
    op, table_type, hoodie = parse_options(operation, options)
    refuse_replacing_buckets(wc.WriteConfig(hoodie), op)
    spark = df.sparkSession
    table = open_or_create(path, table_type, hoodie, SparkExecutor(spark))
    if op == Operation.DELETE_PARTITION:
        return _delete_partitions(df, table)
    return SparkWrite(spark, table, op, after_task_write).run(df)


def _delete_partitions(df: DataFrame, table: Table) -> WriteResult:
    """``delete_partition``: the partitions named by ``hoodie.datasource.write.partitions.to.delete``,
    else those of the records of ``df`` (only their partition fields come to the driver)."""
    writer = Writer(table.storage, table.config, table.write_config, table.keygen, table.executor)
    if table.write_config.get(wc.PARTITIONS_TO_DELETE):
        return writer.write(None, Operation.DELETE_PARTITION)
    fields = [f.split(":", 1)[0] for f in table.config.partition_fields]
    if not fields:
        raise InvalidArgumentError("a table without partition fields has no partition to delete")
    missing = [f for f in fields if f not in df.columns]
    if missing:
        raise InvalidArgumentError(f"delete_partition needs the partition fields {missing} in the input")
    distinct = df.select(*[F.col(_quoted(f)) for f in fields]).distinct().toArrow()
    return writer.write(distinct, Operation.DELETE_PARTITION)


def _write_planned_on_the_driver(df: DataFrame, table: Table, operation: Operation) -> WriteResult:
    """A global index write whose records of one key may go different ways (it does not
    deduplicate, and a key repeats): the batch comes to the driver, which plans it as a
    ``shoal.Table`` write does; the write tasks run on Spark, one per bucket. The driver's memory
    bounds the batch. Other global index writes bring only their keys (``shoal.spark.global_keys``)."""
    started = time.perf_counter()
    data = df.toArrow()
    collected = time.perf_counter()
    writer = Writer(table.storage, table.config, table.write_config, table.keygen, table.executor)
    result = writer.write(data, operation)
    result.timings.update({"collect": collected - started, "plan_and_write": time.perf_counter() - collected})
    return result


def parse_options(
    operation: str | None, options: Mapping[str, Any]
) -> tuple[Operation, str | None, dict[str, str]]:
    """(operation, table type option, the ``hoodie.*`` write options) from the caller's options."""
    hoodie: dict[str, str] = {}
    op_text = operation
    table_type = None
    # Options named with the commit metadata prefix go to the commit's extraMetadata (WriteConfig).
    prefix = str(options.get(wc.COMMIT_METADATA_KEY_PREFIX, "_"))
    for key, value in options.items():
        name = _ALIASES.get(key, key)
        text = ",".join(value) if isinstance(value, (list, tuple)) else str(value)
        if name == OPERATION_OPTION:
            if op_text is not None and op_text.lower() != text.lower():
                raise InvalidOptionError(f"operation {op_text!r} conflicts with {OPERATION_OPTION}={text!r}")
            op_text = text
        elif name == TABLE_TYPE_OPTION:
            table_type = text
        elif name.startswith("hoodie.") or (prefix and name.startswith(prefix)):
            hoodie[name] = text
        else:
            raise InvalidOptionError(
                f"unknown write option {key!r}: pass Hudi's hoodie.* write options (or commit "
                f"metadata entries, named with the prefix {prefix!r})"
            )
    try:
        op = Operation((op_text or "upsert").strip().upper())
    except ValueError:
        raise InvalidOptionError(
            f"unknown operation {op_text!r}: use upsert, insert, bulk_insert, delete, "
            "insert_overwrite, insert_overwrite_table or delete_partition"
        ) from None
    return op, table_type, hoodie


def open_or_create(
    path: str, table_type: str | None, hoodie: dict[str, str], executor: SparkExecutor
) -> Table:
    """The table at ``path``, created from the options when there is none; options that define
    a table must agree with an existing one."""
    wc.WriteConfig(hoodie)  # unknown keys and bad values fail before anything is written
    storage = Storage(path)
    if not storage.exists(".hoodie/hoodie.properties"):
        name = hoodie.get(wc.TABLE_NAME)
        keys = hoodie.get(wc.RECORDKEY_FIELD)
        if not name or not keys:
            raise InvalidOptionError(
                f"no table at {path}: creating one needs {wc.TABLE_NAME} and {wc.RECORDKEY_FIELD}"
            )
        partitions = _fields(hoodie.get(wc.PARTITIONPATH_FIELD, ""))
        Table.create(
            path,
            name,
            table_type=table_type or TableType.COPY_ON_WRITE.value,
            record_key=_fields(keys),
            partition_by=partitions or None,
            ordering_field=hoodie.get(wc.PRECOMBINE_FIELD) or None,
            options=hoodie,
        )
        return Table(path, options=hoodie, executor=executor)
    table = Table(path, options=hoodie, executor=executor)
    _check_table_options(table.config, table_type, hoodie)
    return table


def _check_table_options(config: TableConfig, table_type: str | None, hoodie: Mapping[str, str]) -> None:
    current = {
        wc.TABLE_NAME: [config.table_name],
        wc.RECORDKEY_FIELD: config.record_key_fields,
        wc.PARTITIONPATH_FIELD: [f.split(":", 1)[0] for f in config.partition_fields],
        wc.PRECOMBINE_FIELD: [config.precombine_field] if config.precombine_field else [],
    }
    for key, fields in current.items():
        given = hoodie.get(key)
        if given is not None and [f.split(":", 1)[0] for f in _fields(given)] != fields:
            raise InvalidOptionError(f"{key}={given!r} conflicts with the table's {','.join(fields)!r}")
    if table_type is not None and TableType.parse(table_type) != config.table_type:
        raise InvalidOptionError(
            f"{TABLE_TYPE_OPTION}={table_type!r} conflicts with the table's {config.table_type.value}"
        )


def _fields(text: str) -> list[str]:
    return [f.strip() for f in text.split(",") if f.strip()]


# ---- the driver side ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TagContext:
    """Broadcast to the count and route passes: the latest slices of every partition and their
    base files' key footers (min key, max key, bloom filter as in the footer, bloom type code)."""

    slices: dict[str, list[FileSlice]]
    footers: dict[str, tuple[str | None, str | None, str | None, str | None]]


@dataclass(frozen=True)
class RoutePlan:
    """Broadcast to the route pass: the keys whose tags the count pass corrected (by
    partition: keys and file ids, null for a new key), the route value of each file group's
    bucket by partition, and each partition's insert buckets (cumulative record counts and
    route values)."""

    tags: TagContext | None
    corrections: dict[str, tuple[pa.Array, pa.Array]]
    updates: dict[str, dict[str, int]]
    inserts: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]


@dataclass(frozen=True)
class BucketRoutePlan:
    """Broadcast to the route pass of a bucket index write: per partition, the bucket numbers
    (ascending) that have a write task and the route values of their tasks."""

    routes: dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class BucketTaskSpec:
    """What the write tasks need: each bucket's task spec, the route value of every bucket (a
    task tells its buckets' rows apart by it), and how to key and finish the records."""

    specs: tuple[CowWriteSpec | LogAppendSpec, ...]
    route_values: tuple[int, ...]
    operation: Operation
    table_properties: dict[str, str]
    ordering_field: str | None
    table_schema: pa.Schema | None
    fill_missing: bool
    combine: bool
    sort_by_key: bool
    # Per bucket: for a merge-on-read log append, the new file group that takes the records
    # whose keys its base file does not hold (bloom false positives); None otherwise.
    stray_specs: tuple[CowWriteSpec | None, ...] = ()
    # Per bucket: for a log append, the bucket of its task (written after it) whose base file
    # takes those records instead of a file group of their own; None otherwise.
    stray_targets: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class _Planned:
    """A write planned on the driver, before its instant starts: its buckets, what each takes,
    and how the route pass finds them."""

    view: FileSystemView
    assignment: Assignment
    avg_record_size: int
    # Per bucket: whether it takes records or soft deletes (not hard deletes alone).
    ordered_entries: tuple[bool, ...]
    # The route pass's broadcast, from the route value of every bucket.
    route_plan: Callable[[list[int]], Any]
    # Records the route pass sends to the write tasks in all.
    routed: int
    # The partitions the records fall in (a replace commit replaces their file groups).
    partitions: list[str]
    # Whether a log append may get bloom false positives (keys tagged by a footer alone).
    strays_possible: bool = False
    bucketed: bool = False


class SparkWrite:
    """One write of a DataFrame, planned on the driver and run by Spark tasks."""

    def __init__(
        self,
        spark: SparkSession,
        table: Table,
        operation: Operation,
        after_task_write: Callable[[CowWriteSpec | LogAppendSpec, WriteStat], None] | None = None,
    ) -> None:
        self.spark = spark
        self.table = table
        self.operation = operation
        self.writer = Writer(table.storage, table.config, table.write_config, table.keygen, table.executor)
        self.after_task_write = after_task_write
        self.timings: dict[str, float] = {}
        self._broadcasts: list[Any] = []  # released after the write
        # Whether this write compacted the table before widening a column's type.
        self._compacted = False

    def run(self, df: DataFrame) -> WriteResult:
        with table_lock(self.table.storage, WRITE):
            try:
                result = self._run(df)
            finally:
                for broadcast in self._broadcasts:
                    broadcast.unpersist()
            result.timings.update(self.timings)
            return result

    def _phase(self, name: str, started: float) -> float:
        now = time.perf_counter()
        self.timings[name] = now - started
        return now

    def _broadcast(self, value: Any) -> Any:
        broadcast = self.spark.sparkContext.broadcast(value)
        self._broadcasts.append(broadcast)
        return broadcast

    def _run(self, df: DataFrame) -> WriteResult:
        t = time.perf_counter()
        storage, writer, op, config = self.table.storage, self.writer, self.operation, self.table.config
        timeline = Timeline.load(storage, config)
        # Bad bucket index options fail before any job (as in the local writer).
        bucket_index = writer.bucket_index()
        spec, data_schema, table_schema = self._key_spec(df, timeline, bucket_index)
        source = evaluated_once(df)
        keyed = counted = tag_context = bucketed = None
        if spec.global_keys:
            t = self._phase("plan_tagging", t)
            keyed = self._key_pass(source, spec)
            t = self._phase("keys", t)
        else:
            tag_context = self._tag_context(timeline) if spec.tag else None
            t = self._phase("plan_tagging", t)
            counted = self._count_pass(source, spec, tag_context)
            if bucket_index is not None:
                # Tags the counted buckets: a table laid out otherwise fails here.
                bucketed = _BucketCounts.tagged(counted, bucket_index, FileSystemView(storage, timeline))
            t = self._phase("tag_count", t)

        # Nothing on the timeline changed so far: bad input failed above.
        timeline = writer.rollback_failed_writes(timeline)
        if not self._compacted and writer.compact_before_widening(timeline, data_schema) is not timeline:
            # The compaction rewrote the base files the passes tagged against: plan again.
            self._compacted = True
            return self._run(df)
        view = FileSystemView(storage, timeline)
        if keyed is not None:
            assigner = writer.assigner(timeline, lambda: _sample(source, spec, table_schema, writer))
            global_plan = plan_global(writer, keyed, op, view, timeline, assigner)
            if global_plan is None:
                return _write_planned_on_the_driver(df, self.table, op)
            planned = _Planned(
                view,
                global_plan.assignment,
                assigner.avg_record_size,
                global_plan.ordered_entries,
                global_plan.route_plan,
                global_plan.routed,
                [],
            )
        else:
            assert counted is not None
            planned = self._assign(counted, bucketed, tag_context, timeline, view, source, spec, table_schema)
        t = self._phase("assign", t)
        return self._execute(source, spec, planned, data_schema, table_schema, t)

    def _key_pass(self, source: DataFrame, spec: KeySpec) -> pa.Table:
        """A global index write's key pass: every record's key, partition path, operation,
        ordering value and input position, on the driver (``shoal.spark.global_keys``)."""
        keys = source.select(*[F.col(_quoted(c)) for c in spec.columns])
        schema = key_pass_schema(spec.ordering)
        with (
            arrow_batches(self.spark, keys.schema),
            spark_job(self.spark.sparkContext, f"shoal {self.operation.value.lower()}: keys"),
        ):
            task = functools.partial(key_task, spec, schema)
            return keys.mapInArrow(task, from_arrow_schema(schema)).toArrow().cast(schema)

    def _count_pass(self, source: DataFrame, spec: KeySpec, tag_context: TagContext | None) -> pa.Table:
        """The count pass: record counts per (partition, file group or bucket, operation), and the
        keys whose footer tags were wrong."""
        tags = self._broadcast(tag_context)
        keys = source.select(*[F.col(_quoted(c)) for c in spec.columns])
        if tag_context is not None:
            keys = _one_count_task_per_core(keys, self.spark)
        with (
            arrow_batches(self.spark, keys.schema),
            spark_job(self.spark.sparkContext, f"shoal {self.operation.value.lower()}: count"),
        ):
            return keys.mapInArrow(functools.partial(_count_task, spec, tags), COUNT_SCHEMA).toArrow()

    def _assign(
        self,
        counted: pa.Table,
        bucketed: _BucketCounts | None,
        tag_context: TagContext | None,
        timeline: Timeline,
        view: FileSystemView,
        source: DataFrame,
        spec: KeySpec,
        table_schema: pa.Schema | None,
    ) -> _Planned:
        """Buckets from the count pass's counts (``bucketed``: with the bucket index, tagged), as
        the local writer assigns them."""
        writer, op = self.writer, self.operation
        if bucketed is not None:
            profile, corrections = bucketed.profile, {}
            # A bucket's records all go to its one file group: no sizing, so no size estimate.
            assigner = BucketAssigner(1, 0, 1)
        else:
            profile, corrections = _Profile.summed(counted), _corrections(counted)
            assigner = writer.assigner(timeline, lambda: _sample(source, spec, table_schema, writer))
        assignment = Assignment()
        for partition in profile.partitions():
            if bucketed is not None:
                inserts = bucketed.inserts.get(partition, [])
                writer.assign(
                    assigner,
                    assignment,
                    partition,
                    sum(count for _, count in inserts),
                    profile.updates(partition),
                    view.latest_file_slices(partition),
                    inserts,
                )
            elif op in WRITES_NEW_FILE_GROUPS:
                assigner.assign(
                    assignment,
                    partition,
                    profile.inserts(partition),
                    {},
                    [],
                    allow_logs=True,
                    use_small_files=False,
                )
            else:
                writer.assign(
                    assigner,
                    assignment,
                    partition,
                    profile.inserts(partition),
                    profile.updates(partition),
                    view.latest_file_slices(partition),
                )
        ordered_entries = tuple(
            profile.has_ordered_entries(bucket.partition_path, bucket.file_id, bucket.inserts)
            for bucket in assignment.buckets
        )
        if bucketed is None:
            return _Planned(
                view,
                assignment,
                assigner.avg_record_size,
                ordered_entries,
                lambda values: route_plan(tag_context, corrections, assignment, values),
                profile.routed(assignment),
                profile.partitions(),
                # Only the bloom index's footer tags can be false positives.
                strays_possible=self.table.write_config.get(wc.INDEX_TYPE) == "BLOOM",
            )
        return _Planned(
            view,
            assignment,
            assigner.avg_record_size,
            ordered_entries,
            lambda values: bucket_route_plan(assignment, values),
            bucketed.routed(assignment),
            profile.partitions(),
            bucketed=True,
        )

    def _execute(
        self,
        source: DataFrame,
        spec: KeySpec,
        planned: _Planned,
        data_schema: pa.Schema,
        table_schema: pa.Schema | None,
        t: float,
    ) -> WriteResult:
        """Starts the instant, runs the route pass and the write tasks, and commits."""
        writer, op, config = self.writer, self.operation, self.table.config
        assignment = planned.assignment
        n = len(assignment.buckets)
        sort_mode = self.table.write_config.get(wc.BULKINSERT_SORT_MODE)
        partitions = {b.partition_path for b in assignment.buckets}
        write = writer.start(op, assignment, planned.view.timeline, partitions)
        try:
            specs = tuple(writer.task_spec(write, b, b, planned.ordered_entries[b]) for b in range(n))
            strays_possible = planned.strays_possible
            # Light buckets share write tasks: each Python task costs tens of milliseconds of its own.
            weights = [
                bucket_weight(bucket, spec, planned.avg_record_size)
                for bucket, spec in zip(assignment.buckets, specs, strict=True)
            ]
            num_tasks = write_task_count(weights, self.spark.sparkContext.defaultParallelism)
            targets = stray_targets(assignment, specs, weights, num_tasks) if strays_possible else [None] * n
            task_of, num_tasks = pack_with_targets(weights, targets, num_tasks)
            route_values = routes_before_targets(route_keys(task_of, num_tasks), targets)
            stats: list[WriteStat] = []
            received = 0
            if n:
                plan = self._broadcast(planned.route_plan(route_values))
                combine = writer.combine(op)
                # The local writer plans a bulk insert with the bucket index as an upsert: records
                # stay in input order.
                sort_by_key = (
                    op in WRITES_NEW_FILE_GROUPS
                    and not planned.bucketed
                    and sort_mode in wc.KEY_SORTED_BULK_INSERT_MODES
                )
                # Input order matters to deduplication (the later of two equal records wins) and to
                # a bulk insert that keeps it.
                ordered = combine or (op in WRITES_NEW_FILE_GROUPS and not sort_by_key)
                task = BucketTaskSpec(
                    specs=specs,
                    route_values=tuple(route_values),
                    operation=op,
                    table_properties=spec.table_properties,
                    ordering_field=config.precombine_field,
                    table_schema=table_schema,
                    fill_missing=bool(self.table.write_config.get(wc.SCHEMA_ON_WRITE_ADD_COLUMNS)),
                    combine=combine,
                    sort_by_key=sort_by_key,
                    stray_specs=tuple(_stray_spec(writer, spec, b, n) for b, spec in enumerate(specs))
                    if strays_possible
                    else (),
                    stray_targets=tuple(targets) if strays_possible else (),
                )
                pieces_of = piece_bytes(batch_rows(source.schema))
                packed = source.mapInArrow(
                    functools.partial(_pack_task, spec, task, plan, ordered, pieces_of), PACKED_SCHEMA
                )
                # A task of several buckets gets them one after the other, and unpacks one at a
                # time; each packed value's pieces in order.
                shuffled = packed.repartition(num_tasks, ROUTE_COLUMN).sortWithinPartitions(
                    ROUTE_COLUMN, VALUE_COLUMN, PIECE_COLUMN
                )
                written = shuffled.mapInArrow(
                    functools.partial(_write_task, task, self.after_task_write), RESULT_SCHEMA
                )
                with (
                    arrow_batches(self.spark, source.schema),
                    spark_job(self.spark.sparkContext, f"shoal {op.value.lower()}: write {n} file groups"),
                ):
                    results = [json.loads(r[0]) for r in written.collect()]
                for result in results:
                    received += result["received"]
                    stats += [WriteStat.from_dict(s) for s in result["stats"]]
        except BaseException:
            writer.abandon(write)
            raise
        t = self._phase("write", t)
        if received != planned.routed:
            writer.abandon(write)
            raise InvalidArgumentError(
                f"the input changed between its two evaluations: {planned.routed} records counted, "
                f"{received} written; not committing (the next write rolls this one back). "
                "Checkpoint or cache an input that is not deterministic"
            )
        replaced = replaced_file_groups(op, planned.view, planned.partitions) if op in REPLACING else None
        result = writer.commit(write, stats, data_schema, replaced)
        self._phase("commit", t)
        return result

    def _key_spec(
        self, df: DataFrame, timeline: Timeline, bucket_index: BucketIndex | None
    ) -> tuple[KeySpec, pa.Schema, pa.Schema | None]:
        """Runs the preparation on an empty batch of the input's schema: a missing key, partition
        or ordering field, or a schema the table cannot take, fails here, before any job.
        Returns the passes' spec, the records' schema (for the commit) and the table schema."""
        op, config, writer = self.operation, self.table.config, self.writer
        timezone = self.spark.conf.get("spark.sql.session.timeZone") or "UTC"
        incoming = to_arrow_schema(df.schema, timezone=timezone).empty_table()
        incoming = normalize_types(strip_meta_columns(incoming))
        table_schema = None if op == Operation.DELETE else writer.table_schema(timeline)
        fill_missing = bool(self.table.write_config.get(wc.SCHEMA_ON_WRITE_ADD_COLUMNS))
        keygen = self.table.keygen
        keyed = key_records(incoming, op, keygen, config.precombine_field, table_schema, fill_missing)
        data_schema = pa.schema(
            [f.with_type(_plain(f.type)).with_nullable(True) for f in keyed.schema if f.name not in _INTERNAL]
        )
        wanted = {f.split(".", 1)[0] for f in [*keygen.record_key_fields, *keygen.partition_fields]}
        if op != Operation.DELETE:
            wanted.add(IS_DELETED_COLUMN)
        # A global index write deduplicates and tags on the driver: the key pass carries the
        # ordering values too.
        global_keys = self.table.write_config.global_index and looks_up_keys(self.table.write_config, op)
        ordering = None
        if global_keys and op != Operation.DELETE and config.precombine_field in keyed.column_names:
            ordering = keyed.schema.field(config.precombine_field)
            wanted.add(ordering.name)
        columns = tuple(c for c in incoming.column_names if c in wanted)
        key_schema = None
        if table_schema is not None:
            key_schema = pa.schema([f for f in table_schema if f.name in columns])
        spec = KeySpec(
            base_uri=self.table.storage.base_uri,
            operation=op,
            table_properties=dict(config.as_dict()),
            write_options=dict(self.table.write_config.raw),
            columns=columns,
            key_schema=key_schema,
            # The bucket index tags by hashing keys alone (make_index refuses it).
            tag=not global_keys
            and bucket_index is None
            and make_index(self.table.storage, self.table.write_config, op) is not None,
            write_token=uuid.uuid4().hex,
            buckets=(
                None
                if bucket_index is None
                else BucketLayout(tuple(bucket_index.hash_fields), bucket_index.num_buckets)
            ),
            global_keys=global_keys,
            ordering=ordering,
        )
        return spec, data_schema, table_schema

    def _tag_context(self, timeline: Timeline) -> TagContext:
        """The latest slices and, for the bloom index, the key footers of their base files."""
        storage = self.table.storage
        by_partition: dict[str, list[FileSlice]] = defaultdict(list)
        for sl in FileSystemView(storage, timeline).latest_file_slices():
            by_partition[sl.partition_path].append(sl)
        footers: dict[str, tuple[str | None, str | None, str | None, str | None]] = {}
        if self.table.write_config.get(wc.INDEX_TYPE) == "BLOOM":
            paths = [sl.base_file.path for sls in by_partition.values() for sl in sls if sl.base_file]
            read = self.writer.driver.map(read_key_footer, [(storage, p) for p in paths])
            for p, footer in zip(paths, read, strict=True):
                bloom = footer.bloom
                footers[p] = (
                    footer.min_key,
                    footer.max_key,
                    bloom.to_footer() if bloom is not None else None,
                    bloom.type_code if bloom is not None else None,
                )
        return TagContext(dict(by_partition), footers)


def evaluated_once(df: DataFrame) -> DataFrame:
    """``df``, or ``df`` checkpointed on the executors when evaluating it twice could give
    other rows (see :func:`reproducible`): the write evaluates its input twice, and both passes
    must see the same records."""
    return df if reproducible(df) else df.localCheckpoint(eager=False)


# Plan leaves that give the same rows when read again: files listed when the plan was made,
# local data, ranges, and data Spark already holds (checkpointed or cached).
_REPRODUCIBLE_LEAVES = frozenset(
    {"LogicalRelation", "LocalRelation", "Range", "LogicalRDD", "InMemoryRelation", "OneRowRelation"}
)
# Operators whose output rows depend on the order their input arrives in, which a shuffle
# does not keep from one evaluation to the next (``df.limit(n)`` takes whichever rows come first).
_ORDER_SENSITIVE = frozenset(
    {
        "GlobalLimit",
        "LocalLimit",
        "Tail",
        "Offset",
        "GlobalLimitAndOffset",
        "Sample",
        "Window",
        "WindowGroupLimit",
    }
)


# Aggregate functions whose result depends on the order rows arrive in (``dropDuplicates``
# becomes an aggregate of ``first`` values), as they appear in a plan's text.
_ORDER_SENSITIVE_AGGREGATES = (
    "first(",
    "last(",
    "any_value(",
    "collect_list(",
    "collect_set(",
    "max_by(",
    "min_by(",
)


def reproducible(df: DataFrame) -> bool:
    """Whether evaluating ``df`` again gives the same rows: its optimized plan reads only
    reproducible leaves (files, local data, ranges, cached or checkpointed data), has no
    order-sensitive operator or aggregate, and Spark deems all its expressions deterministic
    (no ``rand()``, no UDF marked nondeterministic)."""
    plan = df._jdf.queryExecution().optimizedPlan()
    if not plan.deterministic():
        return False
    stack = [plan]
    while stack:
        node = stack.pop()
        name = node.getClass().getSimpleName()
        children = node.children()
        if name in _ORDER_SENSITIVE or (children.size() == 0 and name not in _REPRODUCIBLE_LEAVES):
            return False
        if name == "Aggregate" and any(f in node.toString().lower() for f in _ORDER_SENSITIVE_AGGREGATES):
            return False
        stack.extend(children.apply(i) for i in range(children.size()))
    return True


@contextmanager
def arrow_batches(spark: SparkSession, schema: StructType) -> Iterator[None]:
    """Arrow batch settings for the write's jobs, whose widest rows are of ``schema``; the
    session's settings are restored afterwards. No byte limit: with one, Spark measures the
    batch after every row it adds. Records per batch: about 32 MiB of rows by a rough width
    estimate, between Spark's default (10,000) and 100,000, so tasks handle few batches. Arrow
    UDFs read rows, not the scan's columnar batches: those have 4,096 rows, whatever the setting."""
    settings = {
        "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(batch_rows(schema)),
        "spark.sql.execution.arrow.pythonUDF.columnarInput.enabled": "false",
    }
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def batch_rows(schema: StructType) -> int:
    """Records per Arrow batch for rows of ``schema`` (see :func:`arrow_batches`)."""
    width = sum(_width(f.dataType) for f in schema.fields)
    return max(MIN_BATCH_ROWS, min(MAX_BATCH_ROWS, BATCH_BYTES // max(1, width)))


def _width(t: DataType) -> int:
    """A rough in-memory width of a value of type ``t``, in bytes."""
    if isinstance(t, StructType):
        return sum(_width(f.dataType) for f in t.fields)
    if isinstance(t, (ArrayType, MapType)):
        return 256
    if isinstance(t, (StringType, BinaryType)):
        return 64
    if isinstance(t, DecimalType):
        return 16
    return 8


def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def _plain(t: pa.DataType) -> pa.DataType:
    """Dictionary types as their values (Spark has none)."""
    return _plain(t.value_type) if pa.types.is_dictionary(t) else t


def _sample(source: DataFrame, spec: KeySpec, table_schema: pa.Schema | None, writer: Writer) -> pa.Table:
    """Keyed records for the record size estimate (only when no commit tells it)."""
    data = normalize_types(strip_meta_columns(source.limit(SAMPLE_ROWS).toArrow()))
    return key_records(
        data,
        spec.operation,
        writer.keygen,
        writer.config.precombine_field,
        table_schema,
        bool(writer.wc.get(wc.SCHEMA_ON_WRITE_ADD_COLUMNS)),
    )


class _Profile:
    """Record counts per (partition, file group or None for new keys, operation)."""

    def __init__(self, counts: Sequence[tuple[str, str | None, int, int]]) -> None:
        self.counts = counts
        self._by_partition: dict[str, list[tuple[str | None, int, int]]] = defaultdict(list)
        for partition, file_id, op, n in counts:
            self._by_partition[partition].append((file_id, op, n))

    @classmethod
    def summed(cls, counted: pa.Table) -> _Profile:
        """The profile of the count tasks' output (count rows have no key)."""
        counts = counted.filter(pc.is_null(counted.column("key")))
        total = counts.group_by(["partition", "file_id", "op"], use_threads=False).aggregate([("n", "sum")])
        rows = zip(
            *(total.column(c).to_pylist() for c in ("partition", "file_id", "op", "n_sum")), strict=True
        )
        return cls(sorted(((p, f, int(o), int(n)) for p, f, o, n in rows), key=repr))

    def partitions(self) -> list[str]:
        return sorted(self._by_partition)

    def inserts(self, partition: str) -> int:
        # Deletes of keys the table does not hold have nothing to do.
        return sum(n for fid, op, n in self._by_partition[partition] if fid is None and op == OP_UPSERT)

    def updates(self, partition: str) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for fid, _op, n in self._by_partition[partition]:
            if fid is not None:
                out[fid] += n
        return dict(out)

    def has_ordered_entries(self, partition: str, file_id: str, inserts: int) -> bool:
        """Whether the bucket gets records or soft deletes, not only hard deletes."""
        return inserts > 0 or any(
            fid == file_id and op != OP_HARD_DELETE for fid, op, _n in self._by_partition[partition]
        )

    def routed(self, assignment: Assignment) -> int:
        """Records the route pass sends to a bucket: tagged ones, and new keys of partitions
        that take inserts (deletes of keys the table does not hold go with them)."""
        with_inserts = {p for p, plan in assignment.insert_plan.items() if plan}
        return sum(n for p, fid, _op, n in self.counts if fid is not None or p in with_inserts)


@dataclass(frozen=True)
class _BucketCounts:
    """A bucket index write's counts, tagged on the driver as the local writer tags its records:
    a key whose bucket has a file group goes to it (counted as an update, as the local writer
    counts it, whatever the write task then finds); the records of a bucket without one make
    its new file group; deletes there have nothing to do."""

    profile: _Profile
    # Per partition: (bucket number, records) of the buckets without a file group, ascending.
    inserts: dict[str, list[tuple[int, int]]]
    # Rows counted per (partition, bucket number).
    per_bucket: dict[tuple[str, int], int]

    @classmethod
    def tagged(cls, counted: pa.Table, index: BucketIndex, view: FileSystemView) -> _BucketCounts:
        total = counted.group_by(["partition", "bucket", "op"], use_threads=False).aggregate([("n", "sum")])
        by_partition: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        for p, b, o, n in zip(
            *(total.column(c).to_pylist() for c in ("partition", "bucket", "op", "n_sum")), strict=True
        ):
            by_partition[p].append((int(b), int(o), int(n)))
        counts: list[tuple[str, str | None, int, int]] = []
        inserts: dict[str, list[tuple[int, int]]] = {}
        per_bucket: dict[tuple[str, int], int] = defaultdict(int)
        for partition in sorted(by_partition):
            entries = by_partition[partition]
            ids = np.array([b for b, _, _ in entries], dtype=np.int64)
            file_ids = index.tag_buckets(ids, view.latest_file_slices(partition)).to_pylist()
            new: dict[int, int] = defaultdict(int)
            for (bucket, op, n), file_id in zip(entries, file_ids, strict=True):
                counts.append((partition, file_id, op, n))
                per_bucket[(partition, bucket)] += n
                if file_id is None and op == OP_UPSERT:
                    new[bucket] += n
            inserts[partition] = sorted(new.items())
        return cls(_Profile(sorted(counts, key=repr)), inserts, dict(per_bucket))

    def routed(self, assignment: Assignment) -> int:
        """Records the route pass sends to a write task: those of buckets that have one."""
        written = {(b.partition_path, bucket_of_file(b.file_id)) for b in assignment.buckets}
        return sum(n for (p, bucket), n in self.per_bucket.items() if (p, bucket) in written)


def _corrections(counted: pa.Table) -> dict[str, tuple[pa.Array, pa.Array]]:
    """The count tasks' corrected tags by partition: (keys, file ids), null for a new key."""
    rows = counted.filter(pc.is_valid(counted.column("key")))
    return {
        partition: (
            rows.column("key").take(at).combine_chunks(),
            rows.column("file_id").take(at).combine_chunks(),
        )
        for partition, at in group_rows(rows.column("partition"))
    }


def route_plan(
    tags: TagContext | None,
    corrections: dict[str, tuple[pa.Array, pa.Array]],
    assignment: Assignment,
    route_values: list[int],
) -> RoutePlan:
    """Where the route pass sends rows: tagged rows to their file group's bucket; the rest of a
    partition over its insert buckets by ``key_hash(key) % inserts`` against the buckets'
    cumulative counts (Hudi's UpsertPartitioner weighting). Deletes of new keys go where an
    insert of the same key would, so deduplication sees both; rows of partitions without
    inserts that match nothing are dropped."""
    updates: dict[str, dict[str, int]] = defaultdict(dict)
    for b, bucket in enumerate(assignment.buckets):
        # Tags name existing file groups only; a new bucket's fresh file id matches no row.
        updates[bucket.partition_path][bucket.file_id] = route_values[b]
    inserts = {}
    for partition, plan in assignment.insert_plan.items():
        if plan:
            cumulative = np.cumsum([count for _, count in plan]).tolist()
            inserts[partition] = (tuple(int(c) for c in cumulative), tuple(route_values[b] for b, _ in plan))
    return RoutePlan(tags, corrections, dict(updates), inserts)


def bucket_route_plan(assignment: Assignment, route_values: list[int]) -> BucketRoutePlan:
    """Where the route pass of a bucket index write sends rows: to the task of their
    (partition, bucket number), existing file group or new; rows of other buckets (deletes of
    keys no file group holds) are dropped."""
    by_partition: dict[str, dict[int, int]] = defaultdict(dict)
    for b, bucket in enumerate(assignment.buckets):
        number = bucket_of_file(bucket.file_id)
        assert number is not None, bucket.file_id  # the bucket index names every file group
        by_partition[bucket.partition_path][number] = route_values[b]
    routes = {}
    for partition, values in by_partition.items():
        numbers = sorted(values)
        routes[partition] = (
            np.asarray(numbers, dtype=np.int64),
            np.asarray([values[k] for k in numbers], dtype=np.int32),
        )
    return BucketRoutePlan(routes)


def bucket_weight(bucket: Bucket, spec: CowWriteSpec | LogAppendSpec, avg_record_size: int) -> int:
    """The records a bucket's task handles: those routed to it and, for a rewrite of a file
    group, the stored ones it reads and writes again (estimated from the slice's size)."""
    work = bucket.inserts + bucket.updates
    rewrite = isinstance(spec, CowWriteSpec) and (
        spec.old_base_path is not None or spec.old_slice is not None
    )
    if rewrite and bucket.existing is not None:
        work += bucket.existing.total_size() // max(1, avg_record_size)
    return work


def write_task_count(weights: Sequence[int], parallelism: int) -> int:
    """Spark tasks for buckets of ``weights`` (records): at least two per core (so a slow one
    does not hold the job up alone) and as many as it takes to keep each at about
    MIN_TASK_RECORDS, rounded up to whole waves of ``parallelism`` tasks (the tasks are about
    equal, and a last wave of fewer leaves cores idle), never more than buckets. A bucket
    heavier than that has a task of its own: the Python task's own cost is then small beside
    its work."""
    if not weights:
        return 1
    cores = max(1, parallelism)
    by_work = -(-sum(weights) // MIN_TASK_RECORDS)
    waves = -(-max(2 * cores, by_work) // cores)
    return max(1, min(len(weights), waves * cores))


def pack_buckets(weights: Sequence[int], tasks: int) -> list[int]:
    """The task (``< tasks``) of each bucket, balancing the summed ``weights`` (records) of the
    tasks: heaviest bucket first, each to the least loaded task."""
    loads = [(0, t) for t in range(tasks)]  # a heap of (records, task)
    task_of = [0] * len(weights)
    for b in sorted(range(len(weights)), key=lambda i: -weights[i]):
        load, t = heapq.heappop(loads)
        task_of[b] = t
        heapq.heappush(loads, (load + weights[b] + 1, t))
    return task_of


def stray_targets(
    assignment: Assignment,
    specs: Sequence[CowWriteSpec | LogAppendSpec],
    weights: Sequence[int],
    tasks: int,
) -> list[int | None]:
    """For each merge-on-read log append that may get bloom false positives (a base file's
    footer admitted them), a bucket of its partition that writes a base file with inserts, to
    take those new records when the two run in one task (None: none). Each such bucket takes
    one log's; a pair heavier than both a task's share of the work and MIN_TASK_RECORDS stays
    apart, so pairing never costs the write its parallelism."""
    share = max(sum(weights) / max(1, tasks), MIN_TASK_RECORDS)
    free = {
        partition: [b for b, count in plan if count > 0 and isinstance(specs[b], CowWriteSpec)]
        for partition, plan in assignment.insert_plan.items()
    }
    targets: list[int | None] = [None] * len(specs)
    for b, spec in enumerate(specs):
        if not isinstance(spec, LogAppendSpec) or not spec.base_file_name:
            continue
        candidates = free.get(spec.partition_path, [])
        for i, target in enumerate(candidates):
            if weights[b] + weights[target] <= share:
                targets[b] = candidates.pop(i)
                break
    return targets


def pack_with_targets(
    weights: Sequence[int], targets: Sequence[int | None], tasks: int
) -> tuple[list[int], int]:
    """The task of each bucket (:func:`pack_buckets`), a bucket and its stray target always in
    one; and the number of tasks (no more than the units packed)."""
    unit_of = list(range(len(weights)))
    for b, target in enumerate(targets):
        if target is not None:
            unit_of[target] = b
    units = sorted(set(unit_of))
    index = {u: i for i, u in enumerate(units)}
    unit_weights = [0] * len(units)
    for b, w in enumerate(weights):
        unit_weights[index[unit_of[b]]] += w
    tasks = max(1, min(tasks, len(units)))
    task_of_unit = pack_buckets(unit_weights, tasks)
    return [task_of_unit[index[unit_of[b]]] for b in range(len(weights))], tasks


def routes_before_targets(route_values: list[int], targets: Sequence[int | None]) -> list[int]:
    """``route_values`` with each log bucket's value below its stray target's (both in one task,
    so either value places either bucket): a task writes its buckets in route order, and the
    target must come after the log whose records it takes."""
    values = list(route_values)
    for b, target in enumerate(targets):
        if target is not None and values[b] > values[target]:
            values[b], values[target] = values[target], values[b]
    return values


def route_keys(task_of: Sequence[int], tasks: int) -> list[int]:
    """For each bucket ``b``, a non-negative int ``v`` (distinct per bucket) whose Spark hash
    partition ``pmod(murmur3(v, seed 42), tasks)`` is ``task_of[b]``, so that
    ``repartition(tasks, route)`` puts bucket ``b`` in that task's partition."""
    wanted = [list(np.flatnonzero(np.asarray(task_of, dtype=np.int64) == t)) for t in range(tasks)]
    found = [-1] * len(task_of)
    start = 0
    while any(wanted):
        values = np.arange(start, start + 4 * len(task_of) + 64, dtype=np.int64)
        parts = np.mod(spark_hash_int(values).astype(np.int64), tasks)
        for value, part in zip(values.tolist(), parts.tolist(), strict=True):
            if wanted[part]:
                found[wanted[part].pop()] = value
        start += len(values)
    return found


def spark_hash_int(values: np.ndarray) -> np.ndarray:
    """Spark's ``hash(int_column)``: Murmur3_x86_32 of 4-byte ints with seed 42, as int32."""
    with np.errstate(over="ignore"):
        k = values.astype(np.uint32)
        k = k * np.uint32(0xCC9E2D51)
        k = (k << np.uint32(15)) | (k >> np.uint32(17))
        k = k * np.uint32(0x1B873593)
        h = np.uint32(42) ^ k
        h = (h << np.uint32(13)) | (h >> np.uint32(19))
        h = h * np.uint32(5) + np.uint32(0xE6546B64)
        h ^= np.uint32(4)
        h ^= h >> np.uint32(16)
        h = h * np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h = h * np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h.view(np.int32)


# ---- the task side -----------------------------------------------------------------------------

# Per Python worker (workers are reused across tasks): the parsed footers of the current
# write's broadcast, and its corrected tags by partition.
_FOOTERS: dict[str, dict[str, KeyFooter]] = {}
_CORRECTIONS: dict[str, dict[str, KeyMap]] = {}


def _one_count_task_per_core(keys: DataFrame, spark: SparkSession) -> DataFrame:
    """``keys`` in at most as many partitions as the cluster runs tasks at once (no shuffle).
    A count task that tags against the table's files reads (once per worker) and hashes every
    candidate file's key column for each chunk of keys it tags: the fewer, larger tasks, the
    fewer times each file is hashed, while every core still gets a task."""
    cores = spark.sparkContext.defaultParallelism
    return keys.coalesce(cores) if keys.rdd.getNumPartitions() > cores else keys


def _count_task(spec: KeySpec, broadcast: Any, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Keys, validates and tags the key columns of one input partition; yields its record counts
    per (partition, file id or null, operation), and the keys whose tags differ from their
    footer tags (``BloomIndex.footer_tags``), with the right ones."""
    if spec.buckets is not None:
        yield from _count_buckets(spec, spec.buckets, batches)
        return
    context: TagContext | None = broadcast.value
    index = _task_index(spec, context) if context is not None else None
    counts: dict[tuple[str, str | None, int], int] = defaultdict(int)
    corrected: list[pa.RecordBatch] = []
    for chunk in chunked(batches, TAG_CHUNK_ROWS):
        keys, partitions, ops = keyed_columns(spec, chunk)
        groups = group_rows(partitions)
        if index is None or context is None:
            tagged = [(p, rows, pa.nulls(len(rows), pa.string())) for p, rows in groups]
        else:
            tagged, fixes = _confirmed_tags(index, context.slices, keys, groups)
            corrected += fixes
        for partition, rows, tags in tagged:
            grouped = (
                pa.table({"f": tags, "o": ops.take(rows)})
                .group_by(["f", "o"], use_threads=False)
                .aggregate([([], "count_all")])
            )
            for f, o, n in zip(
                *(grouped.column(c).to_pylist() for c in ("f", "o", "count_all")), strict=True
            ):
                counts[(partition, f, o)] += n
    if counts:
        rows = [{"partition": p, "file_id": f, "op": o, "n": n} for (p, f, o), n in counts.items()]
        yield pa.RecordBatch.from_pylist(rows, schema=_COUNT_ARROW_SCHEMA)
    yield from corrected


def _count_buckets(
    spec: KeySpec, layout: BucketLayout, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The bucket index's count task: record counts per (partition, bucket number, operation)."""
    parts: list[pa.Table] = []
    for chunk in chunked(batches, TAG_CHUNK_ROWS):
        keys, partitions, ops = keyed_columns(spec, chunk)
        numbers = bucket_ids(keys, layout.hash_fields, layout.num_buckets).astype(np.int32)
        parts.append(
            pa.table({"partition": partitions, "bucket": numbers, "op": ops})
            .group_by(["partition", "bucket", "op"], use_threads=False)
            .aggregate([([], "count_all")])
            .rename_columns(["partition", "bucket", "op", "n"])
        )
    if not parts:
        return
    total = pa.concat_tables(parts)
    if len(parts) > 1:
        total = (
            total.group_by(["partition", "bucket", "op"], use_threads=False)
            .aggregate([("n", "sum")])
            .rename_columns(["partition", "bucket", "op", "n"])
        )
    nulls = pa.nulls(total.num_rows, pa.string())
    columns = {"file_id": nulls, "key": nulls}
    yield from (
        pa.Table.from_pydict(
            {
                f.name: columns[f.name] if f.name in columns else total.column(f.name)
                for f in _COUNT_ARROW_SCHEMA
            },
            schema=_COUNT_ARROW_SCHEMA,
        )
        .combine_chunks()
        .to_batches()
    )


def _confirmed_tags(
    index: BloomIndex,
    slices: Mapping[str, list[FileSlice]],
    keys: pa.Array,
    groups: list[tuple[str, pa.Array]],
) -> tuple[list[tuple[str, pa.Array, pa.Array]], list[pa.RecordBatch]]:
    """Per partition (name, rows, tags): the footer tags, with the keys several files may hold
    confirmed by reading the files; and the corrections (count-schema batches of the keys whose
    confirmed tag differs). A key only one footer admits keeps that file's id unread: the write
    task of its file group takes a bloom false positive as an insert (a copy-on-write rewrite,
    or on merge-on-read ``_split_strays``)."""
    per_partition = [keys.take(rows) for _, rows in groups]
    footer = index.footer_tags(
        [(k, slices.get(p, [])) for k, (p, _) in zip(per_partition, groups, strict=True)]
    )
    confirm = [np.flatnonzero(shared) for _, shared in footer]
    exact = index.tag(
        [
            (k.take(pa.array(at)), slices.get(p, []))
            for k, at, (p, _) in zip(per_partition, confirm, groups, strict=True)
        ],
        confirm=True,
    )
    tagged: list[tuple[str, pa.Array, pa.Array]] = []
    fixes: list[pa.RecordBatch] = []
    for (partition, rows), k, (tags, _), at, right in zip(
        groups, per_partition, footer, confirm, exact, strict=True
    ):
        tags = tags.cast(pa.string())
        if len(at):
            taken = pa.array(at)
            guessed = tags.take(taken)
            differs = pc.fill_null(pc.not_equal(guessed, right), True)
            differs = pc.and_(differs, pc.or_(pc.is_valid(guessed), pc.is_valid(right)))
            if pc.any(differs).as_py():
                wrong = pc.indices_nonzero(differs)
                fixed = right.take(wrong).cast(pa.string())
                fixes.append(
                    pa.RecordBatch.from_arrays(
                        [
                            pa.array([partition] * len(wrong), pa.string()),
                            fixed,
                            pa.array(np.zeros(len(wrong), dtype=np.int8)),
                            pa.array(np.zeros(len(wrong), dtype=np.int64)),
                            k.take(taken.take(wrong)),
                            pa.nulls(len(wrong), pa.int32()),
                        ],
                        schema=_COUNT_ARROW_SCHEMA,
                    )
                )
            tags = _replaced(tags, at, right.cast(pa.string()))
        tagged.append((partition, rows, tags))
    return tagged, fixes


def _replaced(values: pa.Array, at: np.ndarray, new: pa.Array) -> pa.Array:
    """``values`` with the elements at ``at`` (ascending) replaced by ``new``."""
    order = np.empty(len(values), dtype=np.int64)
    keep = np.ones(len(values), dtype=bool)
    keep[at] = False
    kept = np.flatnonzero(keep)
    # Gather from [kept values..., new values...] in row order.
    order[kept] = np.arange(len(kept))
    order[at] = len(kept) + np.arange(len(at))
    return pa.concat_arrays([values.take(pa.array(kept)), new]).take(pa.array(order))


def _pack_task(
    spec: KeySpec,
    task: BucketTaskSpec,
    broadcast: Any,
    ordered: bool,
    pieces_of: int,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """The route pass over whole records (``mapInArrow``): keys them as the write task would
    (``key_records``), gives each its route value (:func:`_routes`) and yields, per chunk of
    input and route, the chunk's records of that route as one packed value
    (``shoal.spark.packing``) in pieces of at most ``pieces_of`` bytes. ``ordered``: each
    record carries its input position (``SEQ_COLUMN``, the value
    ``monotonically_increasing_id`` would give it), which deduplication needs once a shuffle
    has mixed the order."""
    keygen = task_keygen(task.table_properties)
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    position = (partition << 33) if ordered else 0
    # Names of this task's packed values: distinct across the tasks of the pass.
    value_ids = itertools.count(partition << 32)
    for chunk in chunked(batches, PACK_CHUNK_ROWS, PACK_CHUNK_BYTES):
        records = key_records(
            normalize_types(strip_meta_columns(chunk)),
            task.operation,
            keygen,
            task.ordering_field,
            task.table_schema,
            task.fill_missing,
        )
        if ordered:
            seq = np.arange(position, position + records.num_rows, dtype=np.int64)
            records = records.append_column(SEQ_COLUMN, pa.array(seq))
            position += records.num_rows
        if spec.global_keys:
            plan: GlobalRoutePlan = broadcast.value
            records, routes = plan.expand(records)
        else:
            routes = _routes(
                spec,
                broadcast,
                records.column(RECORD_KEY).combine_chunks(),
                records.column(PARTITION_PATH).combine_chunks(),
                records.column(OP_COLUMN).combine_chunks(),
            )
        yield from pack(records, routes, pieces_of, value_ids)


def _routes(spec: KeySpec, broadcast: Any, keys: pa.Array, partitions: pa.Array, ops: pa.Array) -> pa.Array:
    """The route value of every keyed record: null for rows to drop (deletes of keys nobody
    holds, in partitions without inserts). Tags are the footer tags with the count pass's
    corrections: no file is read."""
    if spec.buckets is not None:
        return route_buckets(
            bucket_ids(keys, spec.buckets.hash_fields, spec.buckets.num_buckets),
            partitions,
            ops,
            broadcast.value,
        )
    plan: RoutePlan = broadcast.value
    groups = group_rows(partitions)
    hashes = key_hash(keys)
    if plan.tags is None:
        tagged = [(p, rows, pa.nulls(len(rows), pa.string())) for p, rows in groups]
    else:
        index = _task_index(spec, plan.tags)
        assert index is not None
        per_partition = [keys.take(rows) for _, rows in groups]
        footer = index.footer_tags(
            [(k, plan.tags.slices.get(p, [])) for k, (p, _) in zip(per_partition, groups, strict=True)]
        )
        corrections = _correction_maps(spec.write_token, plan)
        tagged = []
        for (partition, rows), k, (tags, _) in zip(groups, per_partition, footer, strict=True):
            tags = tags.cast(pa.string())
            fixes = corrections.get(partition)
            if fixes is not None:
                at, right = fixes.lookup(k, hashes[rows.to_numpy(zero_copy_only=False)])
                if len(at):
                    tags = _replaced(tags, at, right)
            tagged.append((partition, rows, tags))
    return route_rows(hashes, ops, tagged, plan, len(keys))


def _correction_maps(token: str, plan: RoutePlan) -> dict[str, KeyMap]:
    maps = _CORRECTIONS.get(token)
    if maps is None:
        _CORRECTIONS.clear()
        maps = _CORRECTIONS[token] = {p: KeyMap(k, f) for p, (k, f) in plan.corrections.items()}
    return maps


def route_rows(
    hashes: np.ndarray, ops: pa.Array, tagged: list[tuple[str, pa.Array, pa.Array]], plan: RoutePlan, n: int
) -> pa.Array:
    """Route values (int32, null: dropped) of ``n`` keyed and tagged rows (per partition: its
    name, rows and tags), by ``plan``; ``hashes``: the rows' ``key_hash``."""
    route = np.zeros(n, dtype=np.int32)
    routed = np.zeros(n, dtype=bool)
    for partition, rows, here in tagged:
        at = rows.to_numpy(zero_copy_only=False)
        found = pc.is_valid(here)
        tagged_rows = pc.indices_nonzero(found).to_numpy(zero_copy_only=False)
        if len(tagged_rows):
            files = pc.dictionary_encode(here.take(pa.array(tagged_rows)))
            buckets = plan.updates.get(partition, {})
            values = [buckets.get(fid) for fid in files.dictionary.to_pylist()]
            if None in values:
                raise InvalidArgumentError(
                    f"the input changed between its two evaluations: an update of file group "
                    f"{files.dictionary[values.index(None)]} in partition {partition!r} was not counted. "
                    "Checkpoint or cache an input that is not deterministic"
                )
            codes = files.indices.to_numpy(zero_copy_only=False)
            route[at[tagged_rows]] = np.asarray(values, dtype=np.int32)[codes]
            routed[at[tagged_rows]] = True
        new = at[pc.indices_nonzero(pc.invert(found)).to_numpy(zero_copy_only=False)]
        if not len(new):
            continue
        inserts = plan.inserts.get(partition)
        if inserts is None:
            if pc.any(pc.equal(ops.take(pa.array(new)), OP_UPSERT)).as_py():
                raise InvalidArgumentError(
                    f"the input changed between its two evaluations: a new record of partition "
                    f"{partition!r} was not counted. Checkpoint or cache an input that is not deterministic"
                )
            continue
        cumulative, routes = inserts
        position = hashes[new] % np.uint64(cumulative[-1])
        slot = np.searchsorted(np.asarray(cumulative, dtype=np.uint64), position, side="right")
        route[new] = np.asarray(routes, dtype=np.int32)[slot]
        routed[new] = True
    return pa.array(route, mask=~routed)


def route_buckets(
    numbers: np.ndarray, partitions: pa.Array, ops: pa.Array, plan: BucketRoutePlan
) -> pa.Array:
    """Route values (int32, null: dropped) of keyed rows by their bucket ``numbers``: the task of
    their (partition, bucket). Every record's bucket has one (a file group, or its new one)."""
    n = len(numbers)
    route = np.zeros(n, dtype=np.int32)
    routed = np.zeros(n, dtype=bool)
    for partition, rows in group_rows(partitions):
        at = rows.to_numpy(zero_copy_only=False)
        known = plan.routes.get(partition)
        if known is not None:
            buckets, values = known
            ids = numbers[at]
            position = np.minimum(np.searchsorted(buckets, ids), len(buckets) - 1)
            hit = buckets[position] == ids
            route[at[hit]] = values[position[hit]]
            routed[at[hit]] = True
            at = at[~hit]
        lost = (
            at[pc.equal(ops.take(pa.array(at)), OP_UPSERT).to_numpy(zero_copy_only=False)] if len(at) else at
        )
        if len(lost):
            raise InvalidArgumentError(
                f"the input changed between its two evaluations: a record of bucket {int(numbers[lost[0]])} "
                f"in partition {partition!r} was not counted. Checkpoint or cache an input that is not "
                "deterministic"
            )
    return pa.array(route, mask=~routed)


def _task_index(spec: KeySpec, context: TagContext) -> BloomIndex | None:
    footers = _FOOTERS.get(spec.write_token)
    if footers is None:
        _FOOTERS.clear()
        footers = _FOOTERS[spec.write_token] = {
            path: KeyFooter(lo, hi, _native.BloomFilter.from_footer(bloom, code) if bloom else None)
            for path, (lo, hi, bloom, code) in context.footers.items()
        }
    storage, write_config = Storage(spec.base_uri), wc.WriteConfig(spec.write_options)
    return make_index(storage, write_config, spec.operation, footers, cache_keys=True)


def _write_task(
    task: BucketTaskSpec,
    after_write: Callable[[CowWriteSpec | LogAppendSpec, WriteStat], None] | None,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Writes the buckets whose packed records (``shoal.spark.packing``) reach this task,
    sorted by route value: each bucket once all its records are in, so the task unpacks one
    bucket's records at a time."""
    writer = _TaskWriter(task, after_write)
    pending: list[pa.Buffer] = []
    current: int | None = None
    for route, value in packed_values(batches):
        if route != current:
            if pending:
                yield writer.bucket(current, pending)
            pending, current = [], route
        pending.append(value)
    if pending:
        yield writer.bucket(current, pending)
    yield from writer.leftover_strays()


class _TaskWriter:
    """The buckets of one write task, written in route order. A log append's bloom false
    positives go to its stray target when that comes later in the task, else to a file group
    of their own."""

    def __init__(
        self,
        task: BucketTaskSpec,
        after_write: Callable[[CowWriteSpec | LogAppendSpec, WriteStat], None] | None,
    ) -> None:
        self.task = task
        self.after_write = after_write
        self.bucket_of = {v: b for b, v in enumerate(task.route_values)}
        self.written: set[int] = set()
        # Per target bucket: (log bucket, records) waiting for it.
        self.carried: dict[int, list[tuple[int, pa.Table]]] = defaultdict(list)

    def bucket(self, route: int | None, payloads: list[pa.Buffer]) -> pa.RecordBatch:
        """Writes one bucket's records (all of them, keyed by the route pass) and returns its
        result row."""
        task = self.task
        bucket = self.bucket_of.get(route) if route is not None else None
        if bucket is None:
            raise InvalidArgumentError(f"rows with the unknown route value {route} reached a write task")
        self.written.add(bucket)
        data = unpack(payloads)
        seq = data.column(SEQ_COLUMN) if SEQ_COLUMN in data.column_names else None
        records = _finish(data.drop_columns([SEQ_COLUMN]) if seq is not None else data, seq, task)
        carried = self.carried.pop(bucket, [])
        if carried:
            records = pa.concat_tables([records, *(strays for _, strays in carried)])
        stray_spec = task.stray_specs[bucket] if task.stray_specs else None
        writes: list[tuple[CowWriteSpec | LogAppendSpec, pa.Table]] = [(task.specs[bucket], records)]
        if stray_spec is not None and records.num_rows:
            log_spec = task.specs[bucket]
            assert isinstance(log_spec, LogAppendSpec)
            held, strays = _split_strays(log_spec, records)
            writes = [(log_spec, held)]
            target = task.stray_targets[bucket] if task.stray_targets else None
            if target is not None and target not in self.written and strays.num_rows:
                self.carried[target].append((bucket, strays))
            else:
                writes.append((stray_spec, strays))
        return self._result(data.num_rows, writes)

    def leftover_strays(self) -> Iterator[pa.RecordBatch]:
        """Strays whose target got no records in this task (the input changed): each log's in
        a file group of its own."""
        for items in self.carried.values():
            for bucket, strays in items:
                stray_spec = self.task.stray_specs[bucket]
                assert stray_spec is not None
                yield self._result(0, [(stray_spec, strays)])
        self.carried.clear()

    def _result(
        self, received: int, writes: list[tuple[CowWriteSpec | LogAppendSpec, pa.Table]]
    ) -> pa.RecordBatch:
        stats: list[WriteStat] = []
        for write_spec, rows in writes:
            if rows.num_rows and not _creates_nothing(write_spec, rows):
                spec = name_attempt(write_spec)
                stats.append(run_write_task(spec, rows))
                if self.after_write is not None:
                    self.after_write(spec, stats[-1])
        result = {"received": received, "stats": [s.to_dict() for s in stats]}
        return pa.RecordBatch.from_pydict({"result": [json.dumps(result)]})


def _stray_spec(
    writer: Writer, spec: CowWriteSpec | LogAppendSpec, bucket: int, buckets: int
) -> CowWriteSpec | None:
    """For a merge-on-read log append: the spec of a new file group in its partition for the
    records whose keys its base file turns out not to hold; None for other tasks. Its file id is
    fixed here, so every attempt of the task writes the same file group."""
    if not isinstance(spec, LogAppendSpec):
        return None
    return CowWriteSpec(
        base_uri=spec.base_uri,
        instant=spec.instant,
        partition_path=spec.partition_path,
        file_id=new_file_id(),
        # Task ids beyond the buckets': the write token names this file apart from the bucket's.
        task_id=buckets + bucket,
        old_base_path=None,
        prev_commit=NULL_COMMIT,
        ordering_field=writer.config.precombine_field,
        event_time_ordering=writer.config.merge_ordering == MergeOrdering.EVENT_TIME,
        options=base_file_options(writer.config, writer.wc),
    )


def _split_strays(spec: LogAppendSpec, records: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``records`` routed to a merge-on-read file group by its footer alone, split into those
    whose keys its base file holds (updates and deletes: the log append) and the new records
    among the rest (bloom false positives): they go to a base file, where a later write's bloom
    index finds them, never to a log. Deletes of keys the base file does not hold are dropped,
    as the exact tagging of the local writer drops them."""
    if not spec.base_file_name:
        # A slice of logs alone has no footer: no footer tag routed these records here.
        return records, records.slice(0, 0)
    path = f"{spec.partition_path}/{spec.base_file_name}" if spec.partition_path else spec.base_file_name
    storage = Storage(spec.base_uri)
    with storage.open_input_file(path) as f:
        base_keys = pq.read_table(f, columns=[RECORD_KEY]).column(RECORD_KEY)
    held = held_by(records.column(RECORD_KEY), base_keys)
    strays = records.filter(pc.and_(pc.invert(held), pc.equal(records.column(OP_COLUMN), OP_UPSERT)))
    return records.filter(held), strays


def _creates_nothing(spec: CowWriteSpec | LogAppendSpec, records: pa.Table) -> bool:
    """Whether ``spec`` creates a file group that ``records`` would leave empty: deletes of new
    keys only (the insert of a key and its later delete in one batch, deduplicated here). The
    local writer, which deduplicates before it plans, creates no file group for them."""
    if not isinstance(spec, CowWriteSpec) or spec.old_base_path is not None or spec.old_slice is not None:
        return False
    ops = records.column(OP_COLUMN) if OP_COLUMN in records.column_names else None
    return ops is not None and not pc.any(pc.equal(ops, OP_UPSERT)).as_py()


def _finish(records: pa.Table, seq: pa.ChunkedArray | None, task: BucketTaskSpec) -> pa.Table:
    """Deduplicated (the later of two equal records wins, so the input order is restored first
    when keys repeat) and, for a bulk insert, in key or input order."""
    op = task.operation
    keys = records.column(RECORD_KEY)
    repeats = task.combine and not _native.keys_distinct(contiguous(keys))
    if seq is not None and (repeats or (op in WRITES_NEW_FILE_GROUPS and not task.sort_by_key)):
        records = take_rows(records, pc.sort_indices(seq))
    records = finish_records(records, op, task.ordering_field, repeats)
    if op in WRITES_NEW_FILE_GROUPS and task.sort_by_key and records.num_rows:
        keys = records.column(RECORD_KEY)
        records = take_rows(records, _native.sort_key_indices(keys.combine_chunks()))
    return records
