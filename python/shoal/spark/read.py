"""Reading shoal tables with Spark: the planned file slices run as Spark tasks.

The driver plans with the planner ``Table.read`` and ``Table.read_incremental`` use (plain-data
slice specs); each Spark task runs the same task function the local executor runs on one file
slice and hands Spark Arrow batches of the declared schema. The ``shoal`` data source
(:mod:`shoal.spark.datasource`) runs every slice that way.

:func:`read` hands the slices that are a base file alone (every copy-on-write slice, merge-on-read
slices without log files, read-optimized reads) to Spark's own parquet reader, as Hudi's Spark
integration does: moving rows from Python into the JVM costs more than Spark decoding the file
itself. Only slices that need shoal (log files to merge, files whose column types Spark would read
differently, incremental reads) run as ``mapInArrow`` tasks; the two parts are unioned. Those
tasks are packed into Spark partitions by their files' sizes as Spark packs files
(:mod:`shoal.spark.splits`).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType, TimestampNTZType

from shoal.errors import InvalidArgumentError, UnsupportedError
from shoal.fs.damage import damaged_parquet
from shoal.fs.storage import Storage
from shoal.read import incremental as inc
from shoal.read.decode import native_batches
from shoal.read.filters import Filter, apply_filters
from shoal.read.projection import check_columns
from shoal.read.settle import read_settled
from shoal.read.snapshot import SliceReadSpec, read_columns
from shoal.read.undone import check_start_not_undone
from shoal.spark.splits import SplitPolicy, pack
from shoal.table import Table, _read_slice
from shoal.timeline.timeline import Timeline
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

    @property
    def size(self) -> int:
        """Bytes of the files the task opens (Spark partitions are packed by it)."""
        probes = (p.before.size + (p.after.size if p.after is not None else 0) for p in self.deletes)
        return sum(spec.size for spec in self.changes) + sum(probes)


@dataclass(frozen=True)
class ReadJob:
    """A planned read, as plain data: what every task needs, and the tasks."""

    base_uri: str
    # The output's Arrow schema, with the table's types (Spark's come from it).
    schema: pa.Schema
    incremental: bool
    # The table schema (types of filter columns outside the projection), and the arguments the
    # finishing step of an incremental read needs.
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
    fallback_full_scan: bool = False,
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
    elif fallback_full_scan:
        raise InvalidArgumentError(
            "fallback_full_scan (hoodie.datasource.read.incr.fallback.fulltablescan.enable) needs "
            f"query_type='incremental', not {query_type!r}"
        )


def output_schema(
    table: Table,
    table_schema: pa.Schema | None,
    query_type: str,
    columns: Sequence[str] | None,
    include_deletes: bool,
    written: Sequence[str] | None = None,
) -> pa.Schema:
    """The Arrow schema of a read's rows, as ``Table.read``/``read_incremental`` return them:
    meta columns first (left out when the table does not populate them), projected to
    ``columns`` in their order. Unknown columns are errors.

    An incremental read always returns ``_hoodie_commit_time`` (with ``include_deletes`` the
    key's meta columns too) ahead of ``columns``, and the delete marker after the other columns;
    when the whole schema is read, where ``read_incremental`` puts it
    (:func:`shoal.read.incremental.marker_position`, from the range's ``written`` columns, see
    :func:`shoal.read.incremental.written_columns`)."""
    if table_schema is None:
        # No schema yet (no commit, or only deletes of keys the table never had): the local
        # reads return no columns, whatever the projection or the delete marker.
        return pa.schema([])
    fields = list(table_schema)
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
        names = [f.name for f in fields]
        # With columns the marker comes last, after the projection below.
        at = inc.marker_position(names, table_schema, written) if columns is None else len(fields)
        fields.insert(at, pa.field(IS_DELETED_COLUMN, pa.bool_()))
    schema = pa.schema(fields)
    if columns is None:
        return schema
    names = list(dict.fromkeys(columns))
    if query_type == "incremental":
        # The meta columns read_incremental adds ahead of the requested ones: one definition.
        names = inc._read_columns(names, deletes) or []
        if deletes:
            names.append(IS_DELETED_COLUMN)
    check_columns(names, schema if table_schema is not None else None)
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
    check_arguments(qt, as_of, start, end, include_deletes, fallback_full_scan)
    cols = tuple(columns) if columns is not None else None
    table = Table(path)
    if qt != "incremental":
        # Planned against the timeline as it stands once the files are listed (see read.settle).
        (specs, table_schema), _ = read_settled(
            table._timeline(), table._timeline, lambda tl: table._plan_read(cols, filters, as_of, qt, tl)
        )
        schema = output_schema(table, table_schema, qt, cols, False)
        tasks = tuple(ReadTask((s,)) for s in specs)
        return ReadJob(table.storage.base_uri, schema, False, table_schema, cols, tasks=tasks)
    first = table._timeline()
    check_start_not_undone(first, inc.normalize_bound(start, "start", first.local_clock))

    def planned(timeline: Timeline) -> tuple[inc.IncrementalPlan, pa.Schema | None]:
        schema = table._schema(timeline)
        plan = inc.plan_read(
            table.storage, timeline, schema, start, end, cols, filters, include_deletes, fallback_full_scan
        )
        return plan, schema

    (plan, table_schema), timeline = read_settled(first, table._timeline, planned)
    # The marker's place follows the range alone, as in read_incremental (and the data source's
    # schema, which is declared without planning).
    written = inc.written_columns(timeline, start, end) if include_deletes and cols is None else None
    schema = output_schema(table, table_schema, qt, cols, include_deletes, written)
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
    with damaged_parquet(spec.base_file_path), storage.open_input_file(spec.base_file_path) as f:
        pf = pq.ParquetFile(f)
        available = pf.schema_arrow.names
        columns = None if spec.columns is None else [c for c in spec.columns if c in available]
        wanted = read_columns(columns, spec.filters, available)
        batches = native_batches(storage, spec.base_file_path, pf.schema_arrow, wanted, STREAM_BATCH_ROWS)
        if batches is None:
            batches = pf.iter_batches(batch_size=STREAM_BATCH_ROWS, columns=wanted)
        for batch in batches:
            piece = pa.Table.from_batches([batch])
            if spec.filters:
                piece = apply_filters(piece, spec.filters)
            if columns is not None and piece.column_names != columns:
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
    if not target.names:
        # No column to hand over, only rows to count: Spark takes a batch without columns by its
        # length (a table built from no arrays would have none).
        return [pa.record_batch([pa.nulls(table.num_rows)], names=["rows"]).select([])]
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

    # The tasks of each Spark partition (indexes into the job's tasks).
    partitions: tuple[tuple[int, ...], ...]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = storage_for(self.job.base_uri)
        for batch in batches:
            for partition in batch.column(0).to_pylist():
                for task_id in self.partitions[partition]:
                    for piece in iter_task(self.job, self.job.tasks[task_id], storage):
                        yield from conform(piece, self.target)


# ---- base files through Spark's parquet reader ----------------------------------------------------

# Options of Spark's parquet reader for base files: dates and timestamps as written (proleptic
# Gregorian, as Arrow reads them; no rebase from Spark 2's calendar), and a file that is missing or
# unreadable fails the read rather than being skipped (whatever the session's defaults).
_PARQUET_OPTIONS = {
    "datetimeRebaseMode": "CORRECTED",
    "int96RebaseMode": "CORRECTED",
    "ignoreMissingFiles": "false",
    "ignoreCorruptFiles": "false",
}
# Characters Spark takes for glob patterns in a path (or that Hadoop's Path will not parse as
# written): files with them in their path are read by shoal's tasks.
_UNSAFE_PATH_CHARS = frozenset("*?[]{}\\:%")
# Footer column types per base file, by full path: a base file never changes once written.
_FOOTER_TYPES: dict[str, dict[str, DataType | None]] = {}
_FOOTER_CACHE_LIMIT = 100_000


@dataclass(frozen=True)
class NativeScan:
    """The base files of a read that Spark's parquet reader scans, with what to ask of it."""

    uris: tuple[str, ...]
    # Declared columns, then filter columns outside them: the schema the files are read with.
    read_struct: StructType
    # The declared columns, in order.
    columns: tuple[str, ...]
    filters: tuple[Filter, ...]
    # The Arrow types of the read columns (the filters' literals are checked against them).
    schema: pa.Schema


def split_native(job: ReadJob, storage: Storage) -> tuple[NativeScan | None, tuple[ReadTask, ...]]:
    """Splits a planned snapshot or read-optimized read into the base files Spark's parquet
    reader scans with the rows shoal's task would return, and the tasks left to shoal.

    A slice goes to Spark when it is a base file alone on the local file system, Spark reads each
    of its needed columns with the type the read declares (a column the file lacks is null either
    way), no column is left that Spark would match to another by case, and every filter has a
    Spark expression with the semantics of shoal's Arrow filter (:func:`spark_condition`).
    Anything else (log files, type widening across schema versions, INT96 or nanosecond
    timestamps, object stores) stays on shoal's tasks."""
    if job.incremental or not storage.is_local:
        return None, job.tasks
    if any("`" in name for name in job.schema.names):  # no way to name them in Spark
        return None, job.tasks
    specs = [t.changes[0] for t in job.tasks]
    # Every slice of a read carries the read's filters.
    filters = next((s.filters for s in specs if isinstance(s, SliceReadSpec)), ())
    table_schema = job.table_schema if job.table_schema is not None else job.schema
    extra = [c for c in dict.fromkeys(f[0] for f in filters) if c not in job.schema.names]
    if any(c not in table_schema.names for c in extra):
        return None, job.tasks
    needed = pa.schema([*job.schema, *(table_schema.field(c) for c in extra)])
    read_struct = spark_schema(needed)
    if filters and spark_condition(filters, needed) is None:
        return None, job.tasks
    wanted = {f.name: f.dataType for f in read_struct.fields}
    lowered = {n.lower() for n in wanted}
    uris, rest = [], []
    for task, spec in zip(job.tasks, specs, strict=True):
        if not isinstance(spec, SliceReadSpec):  # log files to merge
            rest.append(task)
            continue
        if spec.base_file_path is None:
            continue  # a slice of log files alone read optimized: no rows
        full = storage.full_path(spec.base_file_path)
        if _UNSAFE_PATH_CHARS.isdisjoint(full) and _reads_alike(
            _footer_types(storage, full), wanted, lowered
        ):
            uris.append("file://" + full)
        else:
            rest.append(task)
    if not uris:
        return None, job.tasks
    scan = NativeScan(tuple(uris), read_struct, tuple(job.schema.names), tuple(filters), needed)
    return scan, tuple(rest)


def _reads_alike(
    file_types: dict[str, DataType | None], wanted: dict[str, DataType], lowered: set[str]
) -> bool:
    """Whether Spark reads the ``wanted`` columns of a file with these column types as declared."""
    for name, typ in file_types.items():
        if name in wanted:
            if typ != wanted[name]:
                return False
        elif name.lower() in lowered:  # Spark matches column names ignoring case
            return False
    return True


def _footer_types(storage: Storage, full_path: str) -> dict[str, DataType | None]:
    """The Spark type of each top-level column of a base file as shoal's tasks hand it to Spark,
    None where Spark's parquet reader would return other values (or where shoal and Spark
    disagree on the type)."""
    types = _FOOTER_TYPES.get(full_path)
    if types is None:
        with damaged_parquet(full_path), storage.fs.open_input_file(full_path) as f:
            schema = pq.read_schema(f)
        types = {f.name: _native_type(f.type) for f in schema}
        if len(_FOOTER_TYPES) >= _FOOTER_CACHE_LIMIT:
            _FOOTER_TYPES.clear()
        _FOOTER_TYPES[full_path] = types
    return types


def _native_type(t: pa.DataType) -> DataType | None:
    if not _native_readable(t):
        return None
    try:
        return _nullable(from_arrow_type(_plain(t), prefer_timestamp_ntz=True))
    except Exception:  # pyspark raises its own type error for unmapped types
        return None


def _native_readable(t: pa.DataType) -> bool:
    """Arrow types of columns Spark's parquet reader returns with the values Arrow reads. Left
    out: nanosecond timestamps (INT96 reads as those, Spark as microseconds of another type),
    times, durations, fixed-size binaries (UUIDs), unsigned integers, wide decimals."""
    if pa.types.is_dictionary(t):
        return _native_readable(t.value_type)
    if pa.types.is_timestamp(t):
        return t.unit != "ns"
    if pa.types.is_struct(t):
        return all(_native_readable(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _native_readable(t.key_type) and _native_readable(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _native_readable(t.value_type)
    return (
        pa.types.is_boolean(t)
        or pa.types.is_signed_integer(t)
        or (pa.types.is_floating(t) and not pa.types.is_float16(t))
        or t in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary(), pa.date32())
        or pa.types.is_decimal128(t)
    )


def spark_condition(filters: Sequence[Filter], schema: pa.Schema) -> Column | None:
    """The Spark condition that keeps the rows shoal's Arrow filter keeps
    (:func:`shoal.read.filters.to_expression`), or None when a filter has no such expression.

    Where Spark and Arrow differ the condition says what Arrow does: NaN is greater than every
    number in Spark and compares false in Arrow; ``not in`` keeps nulls in Arrow. Only literals of
    the column's own kind are taken (Spark would coerce others where Arrow fails)."""
    out: Column | None = None
    for f in filters:
        if len(f) != 3:
            return None
        term = _spark_term(*f, schema)
        if term is None:
            return None
        out = term if out is None else out & term
    return out


def _spark_term(name: str, op: str, value: Any, schema: pa.Schema) -> Column | None:
    if name not in schema.names or "`" in name:
        return None
    t = _plain(schema.field(name).type)
    col = F.col(f"`{name}`")
    if op in ("in", "not in"):
        if not isinstance(value, list | tuple | set | frozenset) or not value:
            return None  # Arrow refuses an empty list (a value set of type null)
        lits = [_spark_literal(t, v, in_list=True) for v in value]
        if any(lit is None for lit in lits):
            return None
        hit = col.isin(*lits)
        return hit if op == "in" else ~hit | col.isNull()
    lit = _spark_literal(t, value, in_list=False)
    if lit is None:
        return None
    if op in ("=", "=="):
        return col == lit
    if op == "!=":
        return col != lit
    if op == "<":
        return col < lit
    if op == "<=":
        return col <= lit
    if op in (">", ">="):
        term = col > lit if op == ">" else col >= lit
        return term & ~F.isnan(col) if pa.types.is_floating(t) else term
    return None


def _spark_literal(t: pa.DataType, v: Any, in_list: bool) -> Column | None:
    """A Spark literal for a filter value compared with a column of type ``t``."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if pa.types.is_boolean(t):
        return F.lit(v) if isinstance(v, bool) else None
    if isinstance(v, bool):
        return None
    if pa.types.is_integer(t):
        # Arrow casts an ``in`` list to the column's type (a float fails), a comparison to a
        # common type (as Spark does).
        if isinstance(v, int):
            return F.lit(v) if -(2**63) <= v < 2**63 else None
        return F.lit(v) if isinstance(v, float) and not in_list and math.isfinite(v) else None
    if pa.types.is_floating(t):
        if isinstance(v, int) and not -(2**63) <= v < 2**63:
            return None
        if not isinstance(v, int | float) or float(v) == 0.0:
            # Zero: Arrow's ``=`` takes -0.0 for 0.0 and its ``in`` does not, where Spark's
            # parquet reader drops a page or row group by its dictionary (which tells -0.0 from
            # 0.0) before Spark's ``=`` and ``in`` would take either for the other.
            return None
        return F.lit(float(v))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return F.lit(v) if isinstance(v, str) else None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return F.lit(bytes(v)) if isinstance(v, bytes) else None
    if pa.types.is_date32(t):
        return F.lit(v) if isinstance(v, _dt.date) and not isinstance(v, _dt.datetime) else None
    if pa.types.is_decimal(t):
        # Only a value the column's type holds exactly: Arrow fails where the common type of
        # the column and an integer (or a wider value) needs more precision than it has.
        if in_list or not isinstance(v, decimal.Decimal):
            return None
        try:
            pa.scalar(v, t)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return None
        return F.lit(v)
    if pa.types.is_timestamp(t) and not in_list and isinstance(v, _dt.datetime):
        # As text, so that the driver's local time zone plays no part: a naive value for a
        # column without a time zone, an aware one (in UTC) for a column of instants.
        if (t.tz is None) != (v.tzinfo is None):
            return None
        if t.tz is None:
            return F.lit(v.isoformat(sep=" ")).cast(TimestampNTZType())
        return F.lit(v.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")).cast("timestamp")
    return None


def native_frame(spark: SparkSession, scan: NativeScan) -> DataFrame:
    """The scan's base files through Spark's parquet reader: filtered, projected, in order."""
    df = spark.read.schema(scan.read_struct).options(**_PARQUET_OPTIONS).parquet(*scan.uris)
    if scan.filters:
        condition = spark_condition(scan.filters, scan.schema)
        assert condition is not None  # split_native checked it
        df = df.where(condition)
    return df.select(*(F.col(f"`{c}`") for c in scan.columns))


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
    native_scan: bool = True,
) -> DataFrame:
    """Reads the table at ``path`` as a Spark DataFrame.

    Arguments as :meth:`shoal.Table.read` (``query_type`` ``snapshot`` or ``read_optimized``,
    ``as_of`` for time travel) and :meth:`shoal.Table.read_incremental` (``query_type=
    "incremental"`` with ``start``, ``end``, ``include_deletes``, and ``fallback_full_scan``:
    Hudi's ``hoodie.datasource.read.incr.fallback.fulltablescan.enable``). Only ``columns`` are
    read from the files, and ``filters`` prune partitions and rows. The plan is made now, on the
    driver: the DataFrame reads the table as of this call.

    Slices that are a base file alone are scanned by Spark's parquet reader (see
    :func:`split_native`; ``native_scan=False`` reads them with shoal's tasks too). The others
    run as shoal tasks, one per file slice (per partition path for incremental reads with
    deletes), merging log files as ``Table.read`` does; they are packed into Spark partitions
    by size under the session's ``spark.sql.files.maxPartitionBytes`` and
    ``spark.sql.files.openCostInBytes``, as Spark packs parquet files.
    """
    job = plan_read(
        path, columns, filters, query_type, as_of, start, end, include_deletes, fallback_full_scan
    )
    struct = spark_schema(job.schema)
    if not job.tasks:
        return spark.createDataFrame([], struct)
    scan, rest = split_native(job, storage_for(job.base_uri)) if native_scan else (None, job.tasks)
    frames = [] if scan is None else [native_frame(spark, scan)]
    if rest:
        timezone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
        partitions = tuple(map(tuple, pack([t.size for t in rest], SplitPolicy.of_session(spark))))
        runner = _SliceRunner(replace(job, tasks=rest), arrow_target(struct, timezone), partitions)
        n = len(partitions)
        frames.append(spark.range(0, n, 1, n).mapInArrow(runner, struct))
    return functools.reduce(DataFrame.unionByName, frames)


def without_tasks(job: ReadJob) -> ReadJob:
    """The job's shared part, to ship with each task on its own."""
    return replace(job, tasks=())
