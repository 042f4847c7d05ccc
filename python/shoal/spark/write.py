"""Writing a Spark DataFrame into a shoal (Hudi) table: ``shoal.spark.write(df, path, ...)``.

The write runs the local writer's phases (``shoal.write.writer.Writer``), with the data staying
in Spark (DESIGN §3.1):

1. *prepare* (``mapInArrow`` over the input partitions): validation, key generation and the
   operation column (``key_records``), then bloom tagging: the driver broadcasts the latest base
   files of the table with their footers' key ranges and bloom filters, tasks probe the filters
   and confirm candidates by reading the key column of candidate files (``BloomIndex``). Every
   row also gets its position in the input, so that deduplication can keep the later of two
   equal records as the local writer does. The result is checkpointed on the executors
   (``localCheckpoint``): the input is evaluated once, and rows kept as rows cost far less to
   keep than a columnar cache.
2. *count* records per (partition, file group or new, operation): the workload profile, on the
   driver.
3. *assign* buckets on the driver with the local writer's ``BucketAssigner``: updates go to the
   file group holding their key; inserts fill small files, then new file groups.
4. *route* every row to its bucket with Spark expressions: updates by file group, inserts by a
   stable hash of the record key weighted by the buckets' capacities (as Hudi's
   ``UpsertPartitioner``), and repartition so that bucket ``b`` is exactly Spark partition ``b``.
5. *write*: one task per bucket deduplicates its records (``finish_records``) and runs the
   local writer's task for the bucket's spec (``run_cow_write`` / ``run_log_append``); it
   returns its write stat as a JSON row.
6. *commit* on the driver (``Writer.commit``): files of failed or speculative attempts, which
   carry markers but are in no returned stat, are deleted first.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import ArrayType, IntegerType, LongType, MapType, StringType, StructField, StructType

from shoal import _native
from shoal.config import write_config as wc
from shoal.config.table_config import TableConfig, TableType
from shoal.errors import InvalidArgumentError, InvalidOptionError
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice, FileSystemView
from shoal.index.bloom import BloomIndex
from shoal.index.footer import KeyFooter, read_key_footer
from shoal.keygen import KeyGenerator, key_generator_from_properties
from shoal.spark.executor import SparkExecutor, name_attempt, spark_job
from shoal.table import Table
from shoal.tasks.cow_write import OP_COLUMN, OP_HARD_DELETE, OP_UPSERT, CowWriteSpec
from shoal.tasks.mor_append import LogAppendSpec
from shoal.timeline.commit_metadata import WriteStat
from shoal.timeline.lock import WRITE, table_lock
from shoal.timeline.timeline import Timeline
from shoal.write.assigner import Assignment
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY
from shoal.write.schema import normalize_types, strip_meta_columns
from shoal.write.writer import (
    Operation,
    Writer,
    WriteResult,
    finish_records,
    group_rows,
    key_records,
    make_index,
    run_write_task,
    take_rows,
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

# Internal columns between the phases.
TAG_COLUMN = "_shoal_file_id"  # the file group holding the key; null for a new key
SEQ_COLUMN = "_shoal_seq"  # input position: (input partition << 40) + row
ROUTE_COLUMN = "_shoal_route"  # a value whose Spark hash partition is the bucket
_INTERNAL = (RECORD_KEY, PARTITION_PATH, OP_COLUMN, TAG_COLUMN, SEQ_COLUMN)

# Rows a prepare task tags at once: the key column of a candidate file is read once per chunk.
PREPARE_CHUNK_ROWS = 1_000_000
SEQ_PARTITION_SHIFT = 40

STAT_SCHEMA = "stat string"


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
    spark = df.sparkSession
    table = open_or_create(path, table_type, hoodie, SparkExecutor(spark))
    return SparkWrite(spark, table, op, after_task_write).run(df)


def parse_options(
    operation: str | None, options: Mapping[str, Any]
) -> tuple[Operation, str | None, dict[str, str]]:
    """(operation, table type option, the ``hoodie.*`` write options) from the caller's options."""
    hoodie: dict[str, str] = {}
    op_text = operation
    table_type = None
    for key, value in options.items():
        name = _ALIASES.get(key, key)
        text = ",".join(value) if isinstance(value, (list, tuple)) else str(value)
        if name == OPERATION_OPTION:
            if op_text is not None and op_text.lower() != text.lower():
                raise InvalidOptionError(f"operation {op_text!r} conflicts with {OPERATION_OPTION}={text!r}")
            op_text = text
        elif name == TABLE_TYPE_OPTION:
            table_type = text
        elif name.startswith("hoodie."):
            hoodie[name] = text
        else:
            raise InvalidOptionError(f"unknown write option {key!r}: pass Hudi's hoodie.* write options")
    try:
        op = Operation((op_text or "upsert").strip().upper())
    except ValueError:
        raise InvalidOptionError(
            f"unknown operation {op_text!r}: use upsert, insert, bulk_insert or delete"
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
class PrepareSpec:
    """What a prepare task needs, as plain data."""

    base_uri: str
    operation: Operation
    table_properties: dict[str, str]
    write_options: dict[str, str]
    ordering_field: str | None
    table_schema: pa.Schema | None
    fill_missing: bool
    output_schema: pa.Schema
    # Whether to tag (an index lookup is needed), and the token of this write's broadcast.
    tag: bool
    write_token: str
    # Whether tags must be confirmed by reading candidate files (BloomIndex.tag): on
    # merge-on-read tables, an update of a file group becomes a log append, and a bloom false
    # positive there would put a new key into a log, where no bloom index finds it again.
    # Copy-on-write rewrites of a file group take such keys into its base file.
    confirm_tags: bool


@dataclass(frozen=True)
class TagContext:
    """Broadcast to prepare tasks: the latest slices of every partition and their base files'
    key footers (min key, max key, bloom filter as in the footer, bloom type code)."""

    slices: dict[str, list[FileSlice]]
    footers: dict[str, tuple[str | None, str | None, str | None, str | None]]


@dataclass(frozen=True)
class BucketTaskSpec:
    """What the write tasks need: each bucket's task spec, the route value of every bucket (to
    check the partitioning), and how to finish the records."""

    specs: tuple[CowWriteSpec | LogAppendSpec, ...]
    route_values: tuple[int, ...]
    operation: Operation
    ordering_field: str | None
    combine: bool


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

    def _run(self, df: DataFrame) -> WriteResult:
        t = time.perf_counter()
        storage, writer, op = self.table.storage, self.writer, self.operation
        timeline = Timeline.load(storage, self.table.config)
        spec = self._prepare_spec(df, timeline)
        tag_context = self._tag_context(timeline) if spec.tag else None
        t = self._phase("plan_tagging", t)
        broadcast = self.spark.sparkContext.broadcast(tag_context)
        self._broadcasts.append(broadcast)
        prepared = df.mapInArrow(
            functools.partial(_prepare_task, spec, broadcast), from_arrow_schema(spec.output_schema)
        ).localCheckpoint(eager=False)
        with spark_job(self.spark.sparkContext, f"shoal {op.value.lower()}: prepare and tag"):
            counts = prepared.groupBy(PARTITION_PATH, TAG_COLUMN, OP_COLUMN).count().collect()
        t = self._phase("prepare_tag_count", t)

        # Nothing on the timeline changed so far: bad input failed above.
        timeline = writer.rollback_failed_writes(timeline)
        view = FileSystemView(storage, timeline)
        assigner = writer.assigner(timeline, lambda: _sample(prepared))
        assignment = Assignment()
        profile = _Profile([(r[0], r[1], int(r[2]), int(r[3])) for r in counts])
        for partition in profile.partitions():
            if op == Operation.BULK_INSERT:
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
        n = len(assignment.buckets)
        route_values = route_keys(n)
        t = self._phase("assign", t)

        write = writer.start(op, assignment, timeline, {b.partition_path for b in assignment.buckets})
        specs = tuple(
            writer.task_spec(
                write,
                b,
                b,
                profile.has_ordered_entries(bucket.partition_path, bucket.file_id, bucket.inserts),
            )
            for b, bucket in enumerate(assignment.buckets)
        )
        stats: list[WriteStat] = []
        if n:
            routed = _route(self.spark, prepared, assignment, route_values)
            task = BucketTaskSpec(
                specs, tuple(route_values), op, self.table.config.precombine_field, writer.combine(op)
            )
            rows = routed.repartition(n, ROUTE_COLUMN).mapInArrow(
                functools.partial(_write_task, task, self.after_task_write), STAT_SCHEMA
            )
            with spark_job(self.spark.sparkContext, f"shoal {op.value.lower()}: write {n} file groups"):
                stats = [WriteStat.from_dict(json.loads(r[0])) for r in rows.collect()]
        t = self._phase("write", t)
        data_schema = pa.schema([f for f in spec.output_schema if f.name not in _INTERNAL])
        result = writer.commit(write, stats, data_schema)
        self._phase("commit", t)
        return result

    def _prepare_spec(self, df: DataFrame, timeline: Timeline) -> PrepareSpec:
        """Runs the preparation on an empty batch of the input's schema: a missing key, partition
        or ordering field, or a schema the table cannot take, fails here, before any job; the
        result's schema is the prepare tasks' output schema."""
        op, config, writer = self.operation, self.table.config, self.writer
        timezone = self.spark.conf.get("spark.sql.session.timeZone") or "UTC"
        incoming = to_arrow_schema(df.schema, timezone=timezone).empty_table()
        table_schema = None if op == Operation.DELETE else writer.table_schema(timeline)
        fill_missing = bool(self.table.write_config.get(wc.SCHEMA_ON_WRITE_ADD_COLUMNS))
        keyed = key_records(
            normalize_types(strip_meta_columns(incoming)),
            op,
            self.table.keygen,
            config.precombine_field,
            table_schema,
            fill_missing,
        )
        fields = [f.with_type(_plain(f.type)).with_nullable(True) for f in keyed.schema]
        output = pa.schema([*fields, pa.field(TAG_COLUMN, pa.string()), pa.field(SEQ_COLUMN, pa.int64())])
        return PrepareSpec(
            base_uri=self.table.storage.base_uri,
            operation=op,
            table_properties=dict(config.as_dict()),
            write_options=dict(self.table.write_config.raw),
            ordering_field=config.precombine_field,
            table_schema=table_schema,
            fill_missing=fill_missing,
            output_schema=output,
            tag=make_index(self.table.storage, self.table.write_config, op) is not None,
            write_token=uuid.uuid4().hex,
            confirm_tags=self.writer.merge_on_read,
        )

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


def _plain(t: pa.DataType) -> pa.DataType:
    """Dictionary types as their values (Spark has none)."""
    return _plain(t.value_type) if pa.types.is_dictionary(t) else t


def _sample(prepared: DataFrame) -> pa.Table:
    """Prepared records for the record size estimate (only when no commit tells it)."""
    return prepared.drop(TAG_COLUMN, SEQ_COLUMN).limit(20_000).toArrow()


class _Profile:
    """Record counts per (partition, file group or None for new keys, operation)."""

    def __init__(self, counts: Sequence[tuple[str, str | None, int, int]]) -> None:
        self.counts = counts
        self._by_partition: dict[str, list[tuple[str | None, int, int]]] = defaultdict(list)
        for partition, file_id, op, n in counts:
            self._by_partition[partition].append((file_id, op, n))

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


def _route(
    spark: SparkSession, prepared: DataFrame, assignment: Assignment, route_values: list[int]
) -> DataFrame:
    """``prepared`` with the route column: tagged rows go to their file group's bucket; the
    rest of a partition spreads over its insert buckets by ``pmod(xxhash64(key), inserts)``
    against the buckets' cumulative counts (Hudi's UpsertPartitioner weighting). Deletes of
    new keys go where an insert of the same key would, so deduplication sees both; rows of
    partitions without inserts that match nothing are dropped."""
    updates: dict[str, dict[str, int]] = defaultdict(dict)
    for b, bucket in enumerate(assignment.buckets):
        # Tags name existing file groups only; a new bucket's fresh file id matches no row.
        updates[bucket.partition_path][bucket.file_id] = route_values[b]
    rows = []
    for partition in sorted({b.partition_path for b in assignment.buckets}):
        plan = assignment.insert_plan.get(partition, [])
        cumulative = np.cumsum([count for _, count in plan]).tolist()
        rows.append(
            (
                partition,
                updates.get(partition, {}),
                int(cumulative[-1]) if plan else 0,
                [int(c) for c in cumulative],
                [route_values[b] for b, _ in plan],
            )
        )
    schema = StructType(
        [
            StructField(PARTITION_PATH, StringType()),
            StructField("_r_updates", MapType(StringType(), IntegerType())),
            StructField("_r_inserts", LongType()),
            StructField("_r_cumulative", ArrayType(LongType())),
            StructField("_r_routes", ArrayType(IntegerType())),
        ]
    )
    plan_df = spark.createDataFrame(rows, schema)
    inserts = F.col("_r_inserts")
    position = F.pmod(F.xxhash64(F.col(RECORD_KEY)), inserts)
    insert_route = F.element_at(
        F.col("_r_routes"), F.size(F.filter(F.col("_r_cumulative"), lambda c: c <= position)) + 1
    )
    route: Column = F.when(
        F.col(TAG_COLUMN).isNotNull(), F.element_at(F.col("_r_updates"), F.col(TAG_COLUMN))
    ).when(inserts > 0, insert_route)
    return (
        prepared.join(F.broadcast(plan_df), on=PARTITION_PATH, how="inner")
        .withColumn(ROUTE_COLUMN, route)
        .where(F.col(ROUTE_COLUMN).isNotNull())
        .drop("_r_updates", "_r_inserts", "_r_cumulative", "_r_routes")
    )


def route_keys(n: int) -> list[int]:
    """For each bucket ``b < n``, the smallest non-negative int ``v`` (distinct per bucket) whose
    Spark hash partition ``pmod(murmur3(v, seed 42), n)`` is ``b``, so that
    ``repartition(n, route)`` puts bucket ``b`` exactly in partition ``b``."""
    found = np.full(n, -1, dtype=np.int64)
    start = 0
    while n and (found < 0).any():
        values = np.arange(start, start + 4 * n + 64, dtype=np.int64)
        parts = np.mod(spark_hash_int(values).astype(np.int64), n)
        first_parts, first_index = np.unique(parts, return_index=True)
        missing = found[first_parts] < 0
        found[first_parts[missing]] = values[first_index[missing]]
        start += len(values)
    return [int(v) for v in found]


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

# Per Python worker (workers are reused across tasks): key generators by table properties, and
# the parsed footers of the current write's broadcast.
_KEYGENS: dict[tuple[tuple[str, str], ...], KeyGenerator] = {}
_FOOTERS: dict[str, dict[str, KeyFooter]] = {}


def _prepare_task(
    spec: PrepareSpec, broadcast: Any, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Keys, validates and tags the rows of one input partition."""
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    offset = partition << SEQ_PARTITION_SHIFT
    index = _task_index(spec, broadcast.value) if spec.tag else None
    slices = broadcast.value.slices if spec.tag else {}
    buffered: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        if batch.num_rows:
            buffered.append(batch)
            rows += batch.num_rows
        if rows >= PREPARE_CHUNK_ROWS:
            yield from _prepare_chunk(spec, pa.Table.from_batches(buffered), offset, index, slices)
            offset += rows
            buffered, rows = [], 0
    if rows:
        yield from _prepare_chunk(spec, pa.Table.from_batches(buffered), offset, index, slices)


def _task_index(spec: PrepareSpec, context: TagContext) -> BloomIndex | None:
    footers = _FOOTERS.get(spec.write_token)
    if footers is None:
        _FOOTERS.clear()
        footers = _FOOTERS[spec.write_token] = {
            path: KeyFooter(lo, hi, _native.BloomFilter.from_footer(bloom, code) if bloom else None)
            for path, (lo, hi, bloom, code) in context.footers.items()
        }
    storage, write_config = Storage(spec.base_uri), wc.WriteConfig(spec.write_options)
    return make_index(storage, write_config, spec.operation, footers, cache_keys=True)


def _keygen(properties: dict[str, str]) -> KeyGenerator:
    key = tuple(sorted(properties.items()))
    keygen = _KEYGENS.get(key)
    if keygen is None:
        keygen = _KEYGENS[key] = key_generator_from_properties(properties)
    return keygen


def _prepare_chunk(
    spec: PrepareSpec,
    data: pa.Table,
    offset: int,
    index: BloomIndex | None,
    slices: Mapping[str, list[FileSlice]],
) -> Iterator[pa.RecordBatch]:
    keyed = key_records(
        normalize_types(strip_meta_columns(data)),
        spec.operation,
        _keygen(spec.table_properties),
        spec.ordering_field,
        spec.table_schema,
        spec.fill_missing,
    )
    n = keyed.num_rows
    tags = pa.nulls(n, pa.string()) if index is None else tag_rows(keyed, index, slices, spec.confirm_tags)
    seq = pa.array(np.arange(offset, offset + n, dtype=np.int64))
    out = keyed.append_column(TAG_COLUMN, tags).append_column(SEQ_COLUMN, seq)
    yield from out.cast(spec.output_schema).to_batches()


def tag_rows(
    records: pa.Table, index: BloomIndex, slices: Mapping[str, list[FileSlice]], confirm: bool
) -> pa.Array:
    """The file id holding each record's key (null for new keys), in row order; ``confirm``:
    see BloomIndex.tag."""
    groups = group_rows(records.column(PARTITION_PATH))
    keys = records.column(RECORD_KEY)
    tags = index.tag([(keys.take(rows).combine_chunks(), slices.get(p, [])) for p, rows in groups], confirm)
    if not groups:
        return pa.nulls(0, pa.string())
    order = pa.concat_arrays([rows for _, rows in groups]).to_numpy(zero_copy_only=False)
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.arange(len(order), dtype=np.int64)
    return pa.concat_arrays([t.cast(pa.string()) for t in tags]).take(pa.array(inverse))


def _write_task(
    task: BucketTaskSpec,
    after_write: Callable[[CowWriteSpec | LogAppendSpec, WriteStat], None] | None,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Writes one bucket (Spark partition ``b`` holds exactly bucket ``b``)."""
    context = TaskContext.get()
    assert context is not None
    bucket = context.partitionId()
    received = [b for b in batches if b.num_rows]
    if not received:
        return
    data = pa.Table.from_batches(received)
    routes = data.column(ROUTE_COLUMN)
    if not pc.all(pc.equal(routes, task.route_values[bucket])).as_py():
        raise InvalidArgumentError(f"rows of another bucket reached the write task of bucket {bucket}")
    records = data.drop_columns([ROUTE_COLUMN, TAG_COLUMN])
    if task.combine:
        # Deduplication keeps the later of two equal records: restore the input order.
        records = take_rows(records, pc.sort_indices(records.column(SEQ_COLUMN)))
    records = finish_records(
        records.drop_columns([SEQ_COLUMN]), task.operation, task.ordering_field, task.combine
    )
    if records.num_rows == 0:
        return
    if task.operation == Operation.BULK_INSERT:
        keys = records.column(RECORD_KEY)
        records = take_rows(records, _native.sort_key_indices(keys.combine_chunks()))
    spec = name_attempt(task.specs[bucket])
    stat = run_write_task(spec, records)
    if after_write is not None:
        after_write(spec, stat)
    yield pa.RecordBatch.from_pydict({"stat": [json.dumps(stat.to_dict())]})
