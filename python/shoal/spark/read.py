"""Reading shoal tables with Spark: the planned file slices run as Spark tasks.

The driver plans with the planner ``Table.read`` and ``Table.read_incremental`` use (plain-data
slice specs); each Spark task runs the same task function the local executor runs on one file
slice and hands Spark Arrow batches of the declared schema. :func:`read` builds the DataFrame
on ``spark.range(n).mapInArrow`` (one task per slice, real column pruning); the ``shoal`` data
source (:mod:`shoal.spark.datasource`) uses the same plan and tasks.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from shoal.errors import InvalidArgumentError, UnsupportedError
from shoal.fs.storage import Storage
from shoal.read import incremental as inc
from shoal.read.filters import Filter, columns_of, to_expression
from shoal.read.snapshot import SliceReadSpec
from shoal.table import Table, _read_slice
from shoal.write.schema import IS_DELETED_COLUMN, META_COLUMNS

QUERY_TYPES = ("snapshot", "read_optimized", "incremental")
# Rows per batch a base file streams in: enough to amortise per-batch costs, few enough that
# Spark consumes one batch while the task decodes the next.
STREAM_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class ReadTask:
    """One Spark task: one file slice; for an incremental read with deletes, every changed
    slice and delete probe of one partition path (deletes are settled per key, and a key
    lives in one partition path)."""

    changes: tuple[inc.ReadSpec, ...]
    deletes: tuple[inc.DeleteProbeSpec, ...] = ()


@dataclass(frozen=True)
class ReadJob:
    """A planned read, as plain data: what every task needs, and the tasks."""

    base_uri: str
    # The output's Arrow schema, with the table's types (Spark's come from it).
    schema: pa.Schema
    incremental: bool
    # Incremental reads: the table schema and the arguments their finishing step needs.
    table_schema: pa.Schema | None = None
    columns: tuple[str, ...] | None = None
    include_deletes: bool = False
    tasks: tuple[ReadTask, ...] = ()


def normalize_query_type(query_type: str) -> str:
    """``snapshot``, ``read_optimized`` or ``incremental`` (Hudi's spellings accepted)."""
    qt = str(query_type).strip().lower().replace("-", "_")
    if qt not in QUERY_TYPES:
        raise InvalidArgumentError(
            f"unknown query type {query_type!r}: expected one of {', '.join(QUERY_TYPES)}"
        )
    return qt


def check_arguments(
    query_type: str,
    as_of: str | _dt.datetime | None,
    start: str | _dt.datetime | None,
    end: str | _dt.datetime | None,
    include_deletes: bool,
) -> None:
    """Rejects arguments that do not belong to the query type."""
    if query_type == "incremental":
        if as_of is not None:
            raise InvalidArgumentError(
                "as_of (as.of.instant) is for snapshot reads; incremental reads take start and end"
            )
    elif start is not None or end is not None or include_deletes:
        raise InvalidArgumentError(
            f"start, end and include_deletes need query_type='incremental', not {query_type!r}"
        )


def output_schema(
    table: Table,
    table_schema: pa.Schema | None,
    query_type: str,
    columns: Sequence[str] | None,
    include_deletes: bool,
) -> pa.Schema:
    """The Arrow schema of a read's rows, as ``Table.read``/``read_incremental`` return them:
    meta columns first (left out when the table does not populate them), the incremental
    delete marker last, projected to ``columns`` in their order. Unknown columns are errors."""
    fields = list(table_schema or [])
    if not table.config.populate_meta_fields:
        if query_type == "incremental":
            raise UnsupportedError(
                "incremental reads need _hoodie_commit_time, and this table was written with "
                "hoodie.populate.meta.fields=false"
            )
        fields = [f for f in fields if f.name not in META_COLUMNS]
    deletes = query_type == "incremental" and include_deletes
    if deletes:
        fields = [f for f in fields if f.name != IS_DELETED_COLUMN]
        fields.append(pa.field(IS_DELETED_COLUMN, pa.bool_()))
    schema = pa.schema(fields)
    if columns is None:
        return schema
    names = list(dict.fromkeys([*columns, *([IS_DELETED_COLUMN] if deletes else [])]))
    missing = [c for c in names if c not in schema.names]
    if missing and table_schema is not None:
        raise InvalidArgumentError(f"unknown column(s) {missing}; the table has {schema.names}")
    return pa.schema([schema.field(c) for c in names if c in schema.names])


def plan_read(
    path: str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    filters: Sequence[Filter] | None = None,
    query_type: str = "snapshot",
    as_of: str | _dt.datetime | None = None,
    start: str | _dt.datetime | None = None,
    end: str | _dt.datetime | None = None,
    include_deletes: bool = False,
    fallback_full_scan: bool = False,
) -> ReadJob:
    """Plans a read of the table at ``path`` into Spark tasks (arguments as :func:`read`)."""
    qt = normalize_query_type(query_type)
    check_arguments(qt, as_of, start, end, include_deletes)
    cols = tuple(columns) if columns is not None else None
    table = Table(path)
    if qt != "incremental":
        specs, table_schema = table._plan_read(cols, filters, as_of, qt)
        schema = output_schema(table, table_schema, qt, cols, False)
        return ReadJob(table.storage.base_uri, schema, False, tasks=tuple(ReadTask((s,)) for s in specs))
    timeline = table._timeline()
    table_schema = table._schema(timeline)
    schema = output_schema(table, table_schema, qt, cols, include_deletes)
    plan = inc.plan_read(
        table.storage, timeline, table_schema, start, end, cols, filters, include_deletes, fallback_full_scan
    )
    if include_deletes:
        by_partition: dict[str, tuple[list[inc.ReadSpec], list[inc.DeleteProbeSpec]]] = {}
        for spec in plan.changes:
            by_partition.setdefault(spec.partition_path, ([], []))[0].append(spec)
        for probe in plan.deletes:
            by_partition.setdefault(probe.partition_path, ([], []))[1].append(probe)
        tasks = tuple(ReadTask(tuple(c), tuple(d)) for _, (c, d) in sorted(by_partition.items()))
    else:
        tasks = tuple(ReadTask((s,)) for s in plan.changes)
    return ReadJob(table.storage.base_uri, schema, True, table_schema, cols, include_deletes, tasks)


def run_task(job: ReadJob, task: ReadTask, storage: Storage) -> pa.Table:
    """Reads one task's slices with the local executor's task functions."""
    if not job.incremental:
        (spec,) = task.changes
        return _read_slice(spec, storage)
    changed = [inc.read_slice(s, storage) for s in task.changes]
    deleted = [inc.read_deleted(d, storage) for d in task.deletes]
    return inc.finish_read(changed, deleted, job.table_schema, job.columns, job.include_deletes)


def iter_task(job: ReadJob, task: ReadTask, storage: Storage) -> Iterator[pa.Table]:
    """:func:`run_task`'s rows in pieces: a slice that is a base file alone streams by batches
    (Spark takes one while the task decodes the next, and a large file never sits in memory
    whole); merged slices and incremental tasks come whole."""
    if not job.incremental:
        (spec,) = task.changes
        if isinstance(spec, SliceReadSpec):
            yield from iter_base_slice(spec, storage)
            return
    yield run_task(job, task, storage)


def iter_base_slice(spec: SliceReadSpec, storage: Storage) -> Iterator[pa.Table]:
    """``read_base_slice`` by batches of :data:`STREAM_BATCH_ROWS` rows: the same columns,
    filter columns read along and dropped after filtering."""
    if spec.base_file_path is None:
        return
    expr = to_expression(spec.filters)
    with storage.open_input_file(spec.base_file_path) as f:
        pf = pq.ParquetFile(f)
        available = pf.schema_arrow.names
        columns = None if spec.columns is None else [c for c in spec.columns if c in available]
        wanted = None
        if columns is not None:
            wanted = columns + [c for c in columns_of(spec.filters) if c not in columns and c in available]
        for batch in pf.iter_batches(batch_size=STREAM_BATCH_ROWS, columns=wanted):
            piece = pa.Table.from_batches([batch])
            if expr is not None:
                piece = piece.filter(expr)
                if columns is not None:
                    piece = piece.select(columns)
            yield piece


_STORAGES: dict[str, Storage] = {}


def storage_for(base_uri: str) -> Storage:
    """One Storage per table and Python worker (workers are reused across tasks)."""
    storage = _STORAGES.get(base_uri)
    if storage is None:
        storage = _STORAGES[base_uri] = Storage(base_uri)
    return storage


# ---- Arrow <-> Spark ----------------------------------------------------------------------------


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema. Every field is nullable: files written under older
    schemas, and merged slices, may hold nulls the current schema does not allow."""
    fields = []
    for f in schema:
        try:
            dt = from_arrow_type(_plain(f.type), prefer_timestamp_ntz=True)
        except Exception as exc:  # pyspark raises its own type error for unmapped types
            raise UnsupportedError(f"column {f.name!r} of type {f.type} has no Spark type: {exc}") from None
        fields.append(StructField(f.name, _nullable(dt), nullable=True))
    return StructType(fields)


def arrow_target(struct: StructType, timezone: str = "UTC") -> pa.Schema:
    """The Arrow schema Spark expects for batches of ``struct`` (compared field by field)."""
    return to_arrow_schema(struct, timezone=timezone)


def conform(table: pa.Table, target: pa.Schema) -> list[pa.RecordBatch]:
    """``table``'s columns in ``target``'s order and types (Spark matches columns by position):
    columns the slice lacks (older schemas) are nulls, extra ones are dropped."""
    if table.num_rows == 0:
        return []
    columns = []
    for f in target:
        if f.name in table.column_names:
            col = table.column(f.name)
            columns.append(col if col.type == f.type else col.cast(f.type))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=target).to_batches()


def _plain(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _plain(t.value_type)
    if pa.types.is_time32(t):
        return pa.time64("us")
    return t


def _nullable(dt: DataType) -> DataType:
    if isinstance(dt, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in dt.fields])
    if isinstance(dt, ArrayType):
        return ArrayType(_nullable(dt.elementType), containsNull=True)
    if isinstance(dt, MapType):
        return MapType(dt.keyType, _nullable(dt.valueType), valueContainsNull=True)
    return dt


# ---- the fast path --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SliceRunner:
    """The mapInArrow function: task ids in, the tasks' rows out as batches of ``target``."""

    job: ReadJob
    target: pa.Schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = storage_for(self.job.base_uri)
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                for piece in iter_task(self.job, self.job.tasks[task_id], storage):
                    yield from conform(piece, self.target)


def read(
    spark: SparkSession,
    path: str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    filters: Sequence[Filter] | None = None,
    query_type: str = "snapshot",
    as_of: str | _dt.datetime | None = None,
    start: str | _dt.datetime | None = None,
    end: str | _dt.datetime | None = None,
    include_deletes: bool = False,
    fallback_full_scan: bool = False,
) -> DataFrame:
    """Reads the table at ``path`` as a Spark DataFrame, one Spark task per file slice.

    Arguments as :meth:`shoal.Table.read` (``query_type`` ``snapshot`` or ``read_optimized``,
    ``as_of`` for time travel) and :meth:`shoal.Table.read_incremental` (``query_type=
    "incremental"`` with ``start``, ``end``, ``include_deletes``, and ``fallback_full_scan``:
    Hudi's ``hoodie.datasource.read.incr.fallback.fulltablescan.enable``). Only ``columns`` are
    read from the files, and ``filters`` prune partitions and rows in the tasks. The plan is made
    now, on the driver: the DataFrame reads the table as of this call.
    """
    job = plan_read(
        path, columns, filters, query_type, as_of, start, end, include_deletes, fallback_full_scan
    )
    struct = spark_schema(job.schema)
    if not job.tasks:
        return spark.createDataFrame([], struct)
    timezone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    runner = _SliceRunner(job, arrow_target(struct, timezone))
    n = len(job.tasks)
    return spark.range(0, n, 1, n).mapInArrow(runner, struct)


def without_tasks(job: ReadJob) -> ReadJob:
    """The job's shared part, to ship with each task on its own."""
    return replace(job, tasks=())
