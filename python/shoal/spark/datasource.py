"""The ``shoal`` Spark data source (``pyspark.sql.datasource``).

After :func:`register`, ``spark.read.format("shoal").load(path)`` reads a table,
``spark.readStream.format("shoal").load(path)`` streams its changes (:mod:`shoal.spark.stream`)
and ``df.write.format("shoal").mode("append").save(path)`` inserts into one, with Hudi's option
names.

Reads are planned by the same planner as ``Table.read`` / ``Table.read_incremental``: one task
per file slice, each running the local executor's task function (:mod:`shoal.spark.read`), packed
into Spark partitions as Spark packs parquet files (:mod:`shoal.spark.splits`).
A Python data source hands Spark every row through Arrow batches, which the JVM turns into rows
and copies once more: even batches already in memory take about 1.15-1.3 times as long as Spark's
parquet scan of the same files (``benches/spark_read.py``). :func:`shoal.spark.read` scans base
files with Spark's own parquet reader instead, and is the fast path.
Spark gives a Python data source no column pruning (``read`` sees every column after a
``select``): project with the ``columns`` option, or read with :func:`shoal.spark.read`. Filters
go in the ``filters`` option (partition pruning and row filters in the tasks). The reader takes
no filters from Spark's ``where``: in Spark 4.3 a pushed-down reader is kept on the relation and
reused by later queries of the same DataFrame, so an unfiltered ``count()`` after a filtered one
would return the filtered rows.

Writes take every operation. Spark's data source writer can neither repartition its input nor
see the table's index, so its tasks cannot route records to the file groups holding their keys,
as an upsert or a delete must, nor bring a key's records together. Such writes (upsert, delete,
an insert that deduplicates or looks keys up, and any write of a bucket-indexed table) are
*staged*, as the streaming sink stages its micro-batches (:mod:`shoal.spark.staging`): each task
stages its rows in the table's ``.hoodie/.temp``, and ``commit()`` writes them all with the
embedded engine as one write, index, deduplication and table services included. That write runs
in the driver-side process and holds the input in its memory: for large upserts,
``shoal.spark.write`` runs the same write in Spark tasks. An abort deletes the staged rows, and
the timeline does not change until the commit.

``insert``, ``bulk_insert``, ``insert_overwrite`` and ``insert_overwrite_table``
(``mode("overwrite")``) run in the tasks.
Each task writes its rows into new file groups with the copy-on-write task; the instant is
requested on the driver before the tasks run (their markers name it) and completed by
``commit()``, which runs in a separate driver-side Python process and so reopens the table from
storage. ``abort()`` rolls the instant back. With LAZY failed-write cleaning (optimistic
concurrency), the planning process hands the write's heartbeat to a detached keeper
(:mod:`shoal.timeline.heartbeat_keeper`) that beats while the Spark driver lives and the write
is pending; the commit checks the writes completed since the planning against the timeline the
write was planned on.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from shoal.config import write_config as wc
from shoal.config.table_config import TableConfig
from shoal.errors import CommitConflictError, InvalidArgumentError, InvalidOptionError, UnsupportedError
from shoal.fs.markers import MARKER_DIR
from shoal.fs.partition_metadata import ensure_partition_metadata
from shoal.fs.storage import Storage
from shoal.fs.view import FileSystemView
from shoal.read import incremental as inc
from shoal.read.filter_values import typed_filters
from shoal.read.filters import Filter, check_filters
from shoal.read.incremental import check_no_pending_write
from shoal.services.rollback import rollback_instant
from shoal.spark.options import (
    OPERATION_OPTION,
    NewTablePath,
    is_write_option,
    new_table_path,
    open_or_create,
    parse_options,
    undo_new_table,
)
from shoal.spark.read import (
    arrow_target,
    check_arguments,
    normalize_query_type,
    output_schema,
    plan_read,
    spark_schema,
)
from shoal.spark.splits import SplitPolicy
from shoal.spark.staging import StagedRows, delete_abandoned, delete_staging, read_staged, stage_rows
from shoal.spark.stream import ShoalStreamReader, read_partition, slice_partitions, split_stream_options
from shoal.table import Table, _resolve_as_of
from shoal.timeline.commit_metadata import WriteStat
from shoal.timeline.heartbeat import Heartbeat, heartbeat_path
from shoal.timeline.heartbeat_keeper import ancestor_named, start_keeper
from shoal.timeline.instant import State
from shoal.timeline.timeline import Timeline
from shoal.write.assigner import Assignment
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY
from shoal.write.schema import normalize_types, strip_meta_columns
from shoal.write.writer import (
    OP_COLUMN,
    REPLACING,
    Operation,
    PendingWrite,
    Writer,
    finish_records,
    key_records,
    replaced_file_groups,
    run_write_task,
)

# Read options: Hudi's names, and shoal's short ones.
QUERY_TYPE = "hoodie.datasource.query.type"
BEGIN_INSTANT = "hoodie.datasource.read.begin.instanttime"
END_INSTANT = "hoodie.datasource.read.end.instanttime"
AS_OF_INSTANT = "as.of.instant"
FALLBACK_FULL_SCAN = "hoodie.datasource.read.incr.fallback.fulltablescan.enable"
_READ_ALIASES = {
    QUERY_TYPE: "query_type",
    "query_type": "query_type",
    BEGIN_INSTANT: "start",
    "start": "start",
    END_INSTANT: "end",
    "end": "end",
    AS_OF_INSTANT: "as_of",
    "as_of": "as_of",
    "columns": "columns",
    "filters": "filters",
    "include_deletes": "include_deletes",
    FALLBACK_FULL_SCAN: "fallback_full_scan",
}


def register(spark: SparkSession) -> None:
    """Registers the ``shoal`` data source with ``spark``.

    Reads pack file slices into Spark partitions as Spark packs parquet files, by the session's
    ``spark.sql.files.maxPartitionBytes``, ``spark.sql.files.openCostInBytes`` and default
    parallelism (``spark.sql.files.minPartitionNum`` when set) as they are now: register again
    after changing them.
    """
    policy = SplitPolicy.of_session(spark)
    # A class of this session's own: Spark pickles the registered class by value, policy and all.
    source = type(ShoalDataSource.__name__, (ShoalDataSource,), {"split_policy": policy})
    spark.dataSource.register(source)


# ---- options ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    """The read options of one ``load``, validated."""

    path: str
    query_type: str = "snapshot"
    as_of: str | None = None
    start: str | None = None
    end: str | None = None
    columns: tuple[str, ...] | None = None
    filters: tuple[Filter, ...] = ()
    include_deletes: bool = False
    fallback_full_scan: bool = False


def read_options(options: Mapping[str, str]) -> ReadOptions:
    """Parses the options of ``spark.read.format("shoal")`` (keys are case-insensitive).

    Raises InvalidOptionError (naming the option as given) for an instant time in no format
    Hudi's time travel takes and an option of another query type; these are settled here, when
    ``load()`` declares the schema, before any Spark job. A begin instant after the end one reads
    nothing, as in Hudi and :meth:`shoal.Table.read_incremental`."""
    values: dict[str, str] = {}
    given: dict[str, str] = {}
    for key, value in options.items():
        low = key.lower()
        if low == "path" or (low not in _READ_ALIASES and is_write_option(key)):
            # A temporary view's options serve its reads and its INSERTs alike.
            continue
        name = _READ_ALIASES.get(low)
        if name is None:
            known = ", ".join(sorted(_READ_ALIASES))
            raise InvalidOptionError(f"unknown read option {key!r}; the shoal data source takes {known}")
        if name in values and values[name] != value:
            raise InvalidOptionError(f"option {key!r} conflicts with another spelling of {name!r}")
        values[name] = value
        given[name] = key
    path = _path(options)
    for name in _INSTANTS:
        if name in values:
            _check_instant_option(given[name], values[name])
    qt = normalize_query_type(values.get("query_type", "snapshot"))
    columns = None
    if "columns" in values:
        columns = tuple(c.strip() for c in values["columns"].split(",") if c.strip())
    opts = ReadOptions(
        path,
        qt,
        values.get("as_of"),
        values.get("start"),
        values.get("end"),
        columns,
        _parse_filters(values.get("filters")),
        _parse_bool("include_deletes", values.get("include_deletes", "false")),
        _parse_bool(FALLBACK_FULL_SCAN, values.get("fallback_full_scan", "false")),
    )
    check_arguments(qt, opts.as_of, opts.start, opts.end, opts.include_deletes)
    if opts.fallback_full_scan and qt != "incremental" and "query_type" in values:
        # Without a query type the options may be a stream's, which reads incremental changes
        # and takes the fallback: a batch read refuses it in ShoalDataSource.reader.
        raise _fallback_refused(given["fallback_full_scan"], qt)
    return opts


def _fallback_refused(key: str, query_type: str) -> InvalidOptionError:
    return InvalidOptionError(
        f"option {key!r} is for incremental reads, not a {query_type} read: "
        f"set {QUERY_TYPE}=incremental, or leave the option out"
    )


# The read options that hold instant times.
_INSTANTS = ("as_of", "start", "end")


def _check_instant_option(key: str, value: str) -> None:
    """Raises InvalidOptionError naming the option when ``value`` is no instant time the read
    takes."""
    try:
        inc.normalize_bound(value, key)
    except InvalidArgumentError:
        raise InvalidOptionError(
            f"option {key!r} must be an instant time (yyyyMMddHHmmssSSS, yyyyMMddHHmmss, "
            f"'yyyy-MM-dd HH:mm:ss[.SSS]' or 'yyyy-MM-dd'), got {value!r}"
        ) from None


def _with_typed_filters(opts: ReadOptions) -> ReadOptions:
    """``opts`` with the JSON filter values for date, timestamp and decimal columns read as those
    types (read/filter_values.py)."""
    if not opts.filters:
        return opts
    return replace(opts, filters=typed_filters(opts.filters, Table(opts.path).schema()))


def _given(options: Mapping[str, str]) -> set[str]:
    """The names (as ReadOptions fields) of the read options given."""
    return {_READ_ALIASES[k.lower()] for k in options if k.lower() in _READ_ALIASES}


def _path(options: Mapping[str, str]) -> str:
    if "paths" in options:
        raise InvalidOptionError("the shoal data source reads one table: pass one path to load()")
    path = options.get("path")
    if not path:
        if not options:
            # Spark 4.3 hands a Python data source none of the options of a table in its
            # catalog when it reads or writes it.
            raise InvalidOptionError(f"no table path: use load(path) or save(path); {_IN_SQL}")
        raise InvalidOptionError("no table path: use load(path) or save(path)")
    return str(path)


# How SQL reaches a shoal table.
_IN_SQL = (
    "in SQL, read and write a shoal table through a temporary view: "
    "CREATE TEMPORARY VIEW name USING shoal OPTIONS (path '...')"
)
# Properties Spark's catalog gives the data source of a table it holds (TableCatalog's reserved
# properties), and never a load's or a temporary view's options.
_CATALOG_PROPERTIES = frozenset({"owner", "provider", "location"})


def refuse_catalog_table(options: Mapping[str, str]) -> None:
    """Raises UnsupportedError for the options of a table in Spark's catalog (``CREATE TABLE ...
    USING shoal``): Spark would read and write it with no options, so not even its path."""
    if any(k.lower() in _CATALOG_PROPERTIES for k in options):
        raise UnsupportedError(
            "a shoal table cannot be a table in Spark's catalog: Spark 4.3 gives a Python data "
            "source none of a catalog table's options (not even its location) when it reads or "
            f"writes it; {_IN_SQL}"
        )


def _parse_bool(name: str, value: str) -> bool:
    low = str(value).strip().lower()
    if low not in ("true", "false"):
        raise InvalidOptionError(f"option {name!r} must be true or false, got {value!r}")
    return low == "true"


def _parse_filters(text: str | None) -> tuple[Filter, ...]:
    """The ``filters`` option: a JSON list of ``[column, op, value]`` triples, ANDed."""
    if text is None:
        return ()
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidOptionError(f"option 'filters' is not JSON: {exc}") from None
    if not isinstance(raw, list) or not all(
        isinstance(f, list) and len(f) == 3 and isinstance(f[0], str) and isinstance(f[1], str) for f in raw
    ):
        raise InvalidOptionError(
            "option 'filters' must be a JSON list of [column, op, value] triples, "
            'e.g. [["city", "=", "sf"]]'
        )
    return tuple((c, op, v) for c, op, v in raw)


# ---- reading ------------------------------------------------------------------------------------


class ShoalDataSource(DataSource):
    """``spark.read.format("shoal")`` and ``df.write.format("shoal")``."""

    # How reads pack file slices into Spark partitions. Spark plans a Python data source in a
    # Python process that cannot see the session's conf: :func:`register` takes it from the
    # session when it registers the source; registered as it is, the source packs by Spark's
    # defaults and this machine's cores.
    split_policy = SplitPolicy()

    @classmethod
    def name(cls) -> str:
        return "shoal"

    def schema(self) -> StructType:
        refuse_catalog_table(self.options)
        # Spark asks batch and streaming reads alike; a stream's own options are not read options.
        opts = read_options(split_stream_options(self.options)[1])
        table = Table(opts.path)
        timeline = table._timeline()
        written = None
        if opts.query_type == "incremental" and opts.include_deletes and opts.columns is None:
            # Where the delete marker goes among the columns, as shoal.spark.read places it
            # (there from the planned tasks; here without planning: a range that holds
            # instants but nothing to read puts it among them, not last).
            written = inc.written_columns(timeline, opts.start, opts.end)
        table_schema = table._schema(timeline)
        arrow = output_schema(
            table, table_schema, opts.query_type, opts.columns, opts.include_deletes, written
        )
        # What the timeline and the schema settle fails here, at load(), as the local read fails
        # when it is called: time travel before the first commit or past a pending write, and
        # filters the columns cannot take. The read checks them again when it is planned.
        if opts.as_of is not None:
            instant = _resolve_as_of(timeline, opts.as_of)
            if instant is not None:
                check_no_pending_write(timeline, None, instant, "time travel")
        check_filters(typed_filters(opts.filters, table_schema), table_schema)
        return spark_schema(arrow)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = read_options(self.options)
        if opts.fallback_full_scan and opts.query_type != "incremental":
            key = next(k for k in self.options if k.lower() == FALLBACK_FULL_SCAN)
            raise _fallback_refused(key, opts.query_type)
        return ShoalReader(_with_typed_filters(opts), schema, self.split_policy)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        stream, rest = split_stream_options(self.options)
        opts = _with_typed_filters(read_options(rest))
        if opts.query_type != "incremental" and "query_type" in _given(rest):
            raise InvalidOptionError(
                f"a stream reads incremental changes: query type {opts.query_type!r} does not apply"
            )
        if opts.columns is not None and "query_type" not in _given(rest):
            # schema() cannot tell a stream from a batch read: without the query type it
            # declares a snapshot's projection, which has no _hoodie_commit_time.
            raise InvalidOptionError(
                "a stream's columns option needs query_type=incremental (or "
                f"{QUERY_TYPE}=incremental): its changes come with _hoodie_commit_time"
            )
        if opts.as_of is not None or opts.start is not None or opts.end is not None:
            raise InvalidOptionError(
                "a stream starts at hoodie.datasource.streaming.startOffset (start_offset) and has "
                "no end: as.of.instant and the begin/end instant times are for batch reads"
            )
        if not Table(opts.path).config.populate_meta_fields:
            raise UnsupportedError(
                "a stream reads incremental changes, which need _hoodie_commit_time, and this table "
                "was written with hoodie.populate.meta.fields=false"
            )
        return ShoalStreamReader(
            opts.path,
            opts.filters,
            opts.include_deletes,
            opts.fallback_full_scan,
            stream,
            schema,
            self.split_policy,
            follows_table=schema == self.schema(),
            fixed_columns=opts.columns is not None,
        )

    def writer(self, schema: StructType, overwrite: bool) -> ShoalWriter:
        return ShoalWriter(begin_write(self.options, schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # Imported here: the sink prepares records as this module's batch writer does.
        from shoal.spark.stream_sink import ShoalStreamWriter, begin_stream_write

        return ShoalStreamWriter(begin_stream_write(self.options, schema, overwrite))


class ShoalReader(DataSourceReader):
    """Plans one task per file slice, packs the tasks into Spark partitions by size, and reads
    each with the local task function."""

    def __init__(self, options: ReadOptions, schema: StructType, policy: SplitPolicy) -> None:
        self.options = options
        self.policy = policy
        # The columns Spark declared (the table's, the ``columns`` option's or a user schema's).
        self.columns = tuple(schema.names)
        # Python data source batches are checked against the UTC form of the schema.
        self.target = arrow_target(schema, "UTC")

    def partitions(self) -> list[InputPartition]:
        o = self.options
        job = plan_read(
            o.path,
            self.columns,
            o.filters,
            o.query_type,
            o.as_of,
            o.start,
            o.end,
            o.include_deletes,
            o.fallback_full_scan,
        )
        return slice_partitions(job, self.policy)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.target)


# ---- writing ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteJob:
    """One data source write, as plain data: the instant the tasks write under."""

    base_uri: str
    instant: str
    operation: Operation
    # The table's write options (hoodie.* keys as the user gave them).
    options: dict[str, str]
    # The records' columns (no meta or internal ones): the schema the commit records.
    data_schema: pa.Schema
    # The timeline the write was planned on, as its file names: the commit checks the writes
    # completed since against it (optimistic concurrency).
    timeline_files: tuple[str, ...] = ()
    # The heartbeat interval, when the write keeps a heartbeat (LAZY failed-write cleaning).
    heartbeat_ms: int | None = None
    # Set when the write created the table at a path that held nothing: an abort leaves it so.
    new_table: NewTablePath | None = None
    # Set for a staged write (see the module): the directory its tasks stage their rows in. Such
    # a write has no instant until its commit.
    staging: str | None = None


@dataclass
class ShoalCommitMessage(WriterCommitMessage):
    """What one task wrote."""

    stats: list[WriteStat] = field(default_factory=list)


class ShoalWriter(DataSourceArrowWriter):
    """Writes each Spark partition into new file groups; commits or rolls back the instant."""

    def __init__(self, job: WriteJob) -> None:
        self.job = job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ShoalCommitMessage | StagedRows:
        if self.job.staging is not None:
            return stage_rows(self.job.base_uri, self.job.staging, iterator)
        batches = [b for b in iterator if b.num_rows]
        if not batches:
            return ShoalCommitMessage()
        ctx = TaskContext.get()
        attempt = (ctx.partitionId(), ctx.stageId(), ctx.taskAttemptId()) if ctx is not None else (0, 0, 0)
        return ShoalCommitMessage(write_new_file_groups(self.job, pa.Table.from_batches(batches), *attempt))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.job.staging is not None:
            commit_staged(self.job, messages)
        else:
            commit_write(self.job, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_write(self.job)


def _writer(table: Table) -> Writer:
    return Writer(table.storage, table.config, table.write_config, table.keygen)


def _prepare(writer: Writer, data: pa.Table, operation: Operation, timeline: Timeline) -> pa.Table:
    """Validated, keyed and deduplicated records, as the local writer prepares its input."""
    keyed = key_records(
        normalize_types(strip_meta_columns(data)),
        operation,
        writer.keygen,
        writer.config.precombine_field,
        writer.table_schema(timeline),
        writer.wc.get(wc.SCHEMA_ON_WRITE_ADD_COLUMNS),
    )
    return finish_records(keyed, operation, writer.config.precombine_field, writer.combine(operation))


def begin_write(options: Mapping[str, str], schema: StructType, overwrite: bool) -> WriteJob:
    """Driver side, before any task runs: validates the options and the input schema against
    the table (created on the first write), rolls back failed writes, and starts the instant."""
    path = _path(options)
    # A temporary view's options serve its reads and its INSERTs alike.
    given = {k: v for k, v in options.items() if k != "path" and k.lower() not in _READ_ALIASES}
    operation, table_type, hoodie = parse_options(None, given)
    named = any(k.lower() == OPERATION_OPTION for k in options)
    replaceable = (Operation.INSERT, Operation.BULK_INSERT, Operation.INSERT_OVERWRITE_TABLE)
    if overwrite and (not named or operation in replaceable):
        # mode("overwrite") replaces the table's contents in one replace commit: the history
        # stays for time travel and incremental reads until the cleaner removes it.
        operation = Operation.INSERT_OVERWRITE_TABLE
    elif overwrite and operation != Operation.INSERT_OVERWRITE:
        raise UnsupportedError(
            f"mode('overwrite') with {OPERATION_OPTION}={operation.value.lower()}: overwrite replaces "
            "the table (insert_overwrite_table) or the partitions written (insert_overwrite)"
        )
    new = new_table_path(Storage(path))
    # writer() runs in a driver-side Python process without a SparkSession: the writer built
    # below runs nothing through the table's executor.
    table = open_or_create(path, table_type, hoodie, executor=None)  # type: ignore[arg-type]
    try:
        if _staged(_writer(table), operation):
            return _plan_staged_write(table, operation, hoodie, schema, new)
        return _start_write(table, operation, hoodie, schema, new)
    except BaseException:
        if new is not None:
            undo_new_table(table.storage, new)
        raise


def _staged(writer: Writer, operation: Operation) -> bool:
    """Whether the write must bring a key's records together, or find the file groups holding
    them, which tasks that each see some of the input cannot: an upsert or a delete, a
    deduplicated or looked-up insert, and every write of a table with the bucket index."""
    return (
        writer.bucket_index() is not None
        or operation not in _DATA_SOURCE_WRITES
        or writer.combine(operation)
        or writer.index(operation) is not None
    )


def _plan_staged_write(
    table: Table, operation: Operation, hoodie: dict[str, str], schema: StructType, new: NewTablePath | None
) -> WriteJob:
    """A staged write: checks the input's schema through the preparation the commit's write
    runs (a missing key, partition or ordering field, or a schema the table cannot take fails
    here) and names the staging directory. Nothing on the timeline changes until the commit."""
    writer = _writer(table)
    timeline = Timeline.load(table.storage, table.config)
    records = _prepare(writer, arrow_target(schema, "UTC").empty_table(), operation, timeline)
    data_schema = records.drop_columns([RECORD_KEY, PARTITION_PATH, OP_COLUMN]).schema
    delete_abandoned(table.storage, MARKER_DIR, _STAGED_WRITE_PREFIX, ABANDONED_STAGING_S)
    staging = f"{MARKER_DIR}/{_STAGED_WRITE_PREFIX}{uuid.uuid4().hex}"
    return WriteJob(
        table.storage.base_uri, "", operation, hoodie, data_schema, new_table=new, staging=staging
    )


def commit_staged(job: WriteJob, messages: Sequence[WriterCommitMessage | None]) -> str | None:
    """Driver side: writes the rows the tasks staged as one write of the job's operation with
    the embedded engine, then deletes the staging directory. Returns the instant written (None:
    the input had no rows)."""
    assert job.staging is not None
    staged = [m for m in messages if isinstance(m, StagedRows)]
    try:
        table = Table(job.base_uri, options=job.options)
        data = read_staged(table.storage, staged)
        if data is None:
            return None
        return table._writer(None).write(data, job.operation).instant
    finally:
        delete_staging(job.base_uri, job.staging, staged)


def _start_write(
    table: Table, operation: Operation, hoodie: dict[str, str], schema: StructType, new: NewTablePath | None
) -> WriteJob:
    writer = _writer(table)
    timeline = Timeline.load(table.storage, table.config)
    # The input schema goes through the tasks' preparation: a missing key, partition or
    # ordering field, or a schema the table cannot take, fails here.
    records = _prepare(writer, arrow_target(schema, "UTC").empty_table(), operation, timeline)
    data_schema = records.drop_columns([RECORD_KEY, PARTITION_PATH, OP_COLUMN]).schema
    timeline = writer.rollback_failed_writes(timeline)
    # As every write path does on merge-on-read: logs of an older type would be unreadable to
    # hudi-rs once the schema changed (the compaction runs here, on the driver, on local threads).
    timeline = writer.compact_before_widening(timeline, data_schema)
    planned = tuple(f.name for f in table.storage.list_files(table.config.timeline_dir))
    # The workload profile is empty: how many records go where is known only to the tasks.
    pending = writer.start(operation, Assignment(), timeline, [])
    heartbeat_ms = None
    if pending.heartbeat is not None:
        # This process ends before the job does: a detached keeper beats while the Spark driver
        # (the JVM that runs this planning) lives and the write is pending.
        heartbeat_ms = writer.concurrency.heartbeat_ms
        driver = ancestor_named("java") or os.getpid()
        start_keeper(table.storage.base_uri, pending.instant_time, heartbeat_ms, driver)
        # This process beats until the keeper is started, then hands over.
        pending.heartbeat.detach()
    return WriteJob(
        table.storage.base_uri,
        pending.instant_time,
        operation,
        hoodie,
        data_schema,
        planned,
        heartbeat_ms,
        new_table=new,
    )


# The staging directories of staged writes are .hoodie/.temp/<prefix><random id>.
_STAGED_WRITE_PREFIX = "ds-write-"
# A staged write deletes the staging directories of others untouched for this long: no Spark
# job stages its rows for a week before its commit, so their drivers died.
ABANDONED_STAGING_S = 7 * 24 * 3600

# Writes whose tasks each write the rows they are given into new file groups.
_DATA_SOURCE_WRITES = (
    Operation.INSERT,
    Operation.BULK_INSERT,
    Operation.INSERT_OVERWRITE,
    Operation.INSERT_OVERWRITE_TABLE,
)


def _pending(
    writer: Writer, job: WriteJob, assignment: Assignment, timeline: Timeline, planned: Timeline | None = None
) -> PendingWrite:
    """The started write ``job`` as the writer's phases take it, rebuilt from storage: tasks and
    ``commit()`` run in other processes than ``begin_write``. ``planned``: the timeline the
    write was planned on (for the commit), else ``timeline``."""
    instant = timeline.get(job.instant)
    if instant is None or instant.state != State.INFLIGHT:
        raise CommitConflictError(
            f"instant {job.instant} is no longer inflight ({instant}): another writer rolled it back"
        )
    # The commit deletes the heartbeat file (the keeper then stops).
    heartbeat = Heartbeat(writer.storage, job.instant, job.heartbeat_ms) if job.heartbeat_ms else None
    return PendingWrite(
        job.operation,
        assignment,
        planned if planned is not None else timeline,
        job.instant,
        instant,
        {},
        None,
        heartbeat=heartbeat,
    )


def write_new_file_groups(
    job: WriteJob, data: pa.Table, task_id: int, stage_id: int, attempt: int
) -> list[WriteStat]:
    """One Spark task: prepares its rows as the local writer does, sorts them by partition and
    key, and writes them into new file groups of the bulk-insert size with the write task the
    local writer runs (markers first, so files of a failed attempt can be found and deleted).
    ``attempt`` is unique per task attempt: it names the files in their write token."""
    table = Table(job.base_uri, options=job.options)
    writer = _writer(table)
    timeline = Timeline.load(table.storage, table.config)
    records = _prepare(writer, data, job.operation, timeline)
    if job.operation == Operation.INSERT:
        # This write's own files are not committed: only what the table held before counts.
        records = writer.resolve_insert_duplicates(records, timeline)
    assignment, chunks = writer._plan_bulk_insert(records, timeline)
    pending = _pending(writer, job, assignment, timeline)
    stats = []
    for bucket_index, chunk in chunks:
        ensure_partition_metadata(table.storage, assignment.buckets[bucket_index].partition_path, job.instant)
        spec = writer.task_spec(pending, bucket_index, task_id, has_ordered_entries=True)
        spec = replace(spec, stage_id=stage_id, attempt=attempt)
        stats.append(run_write_task(spec, chunk, table.storage))
    return stats


def commit_write(job: WriteJob, messages: Sequence[WriterCommitMessage | None]) -> None:
    """Completes the instant with the tasks' write stats (driver side, in a process of its own)
    through the local writer's commit: files of failed or speculative task attempts, which carry
    markers but are in no task's stats, are deleted first."""
    table = Table(job.base_uri, options=job.options)
    writer = _writer(table)
    timeline = Timeline.load(table.storage, table.config)
    stats = [s for m in messages if isinstance(m, ShoalCommitMessage) for s in m.stats]
    replaced = None
    if job.operation in REPLACING:
        # The file groups live before this write: its own are not committed yet.
        view = FileSystemView(table.storage, timeline)
        replaced = replaced_file_groups(job.operation, view, {s.partitionPath or "" for s in stats})
    planned = Timeline(table.storage, table.config, job.timeline_files)
    writer.commit(_pending(writer, job, Assignment(), timeline, planned), stats, job.data_schema, replaced)


def abort_write(job: WriteJob) -> None:
    """Rolls the instant back: deletes the files its markers name, then the instant. A staged
    write (which has no instant) deletes its staging directory."""
    storage = Storage(job.base_uri)
    if job.staging is not None:
        delete_staging(job.base_uri, job.staging, [])
    else:
        config = TableConfig.load(storage)
        timeline = Timeline.load(storage, config)
        instant = timeline.get(job.instant)
        if instant is not None and instant.state != State.COMPLETED:
            rollback_instant(storage, config, timeline, instant)
        storage.delete(heartbeat_path(job.instant), missing_ok=True)
    if job.new_table is not None:
        undo_new_table(storage, job.new_table)
