"""Writing a Spark DataFrame into a shoal (Hudi) table: ``shoal.spark.write(df, path, ...)``.

The write runs the local writer's phases (``shoal.write.writer.Writer``), with the data staying
in Spark (DESIGN §3.1). Whole records cross from the JVM into Python once, in the route pass,
the write's one pass over its input (moving rows into Python is the expensive direction:
/work/shared/spec/SPARK_NOTES.md), unless the input is a plain scan of parquet files: the route
tasks then read the files themselves (``shoal.spark.file_input``):

1. *route* (``mapInArrow`` over whole records, ``shoal.spark.routing``): key generation and
   validation (``key_records``: a null or empty key fails here, before the timeline changes),
   and tagging against the latest base files of the partitions the keys fall in, whose footers
   (key ranges, bloom filters) each worker reads once: the driver broadcasts only the timeline,
   and each worker lists the partitions its keys fall in (``LatestSlices``), so the cost follows
   the partitions a write touches, not the table's size. Keys several files may hold are
   confirmed by reading the files' key columns. A key only one footer admits keeps that file's
   id unread: on copy-on-write tables the rewrite of
   that file group takes a bloom false positive as an insert; on merge-on-read the log append
   task of the file group reads its base file's keys once and writes the false positives to a
   base file (``write_tasks.split_strays``): a new key must not land in a log, where no bloom
   index finds it. That base file is the one the partition's inserts create when the driver
   paired the two buckets into one task (``task_layout.stray_targets``), else a new file
   group's. Each record gets a provisional route: (partition, file group), or for a new key
   (partition, insert slot), a range of its key hash (``shoal.spark.keys``). Each task packs its
   records by provisional route (``shoal.spark.packing``): per chunk of input and route, the
   route's keyed records as one Arrow IPC stream (a run) appended to a packed file of the task
   attempt's own, in a scratch directory of the table's storage. It returns the file's runs and
   its record counts per (partition, file group or new, operation): the workload profile.
2. *assign* buckets on the driver with the local writer's ``BucketAssigner``: updates go to the
   file group holding their key; inserts fill small files, then new file groups. A partition's
   new keys spread over its insert buckets by position (their key hash scaled to the
   partition's inserts) against the buckets' cumulative counts, as Hudi's
   ``UpsertPartitioner`` weights them; an insert slot whose positions reach several buckets
   goes to each, which keeps its own positions. The driver lays the buckets out on write tasks
   (``shoal.spark.task_layout``) and gives each task the runs of its buckets. Handing runs over
   through storage instead of Spark's shuffle spares Spark a copy of every byte into the JVM,
   its compression, a sort and a copy back; and no second pass over the input is needed.
3. *write* (``shoal.spark.write_tasks``, one task per planned task): each task reads and
   unpacks one bucket's runs at a time, deduplicates the records (``finish_records``, in
   input order restored from a sequence column when keys repeat) and runs the local writer's
   task for the bucket's spec (``run_cow_write`` / ``run_log_append``). Tasks return their write
   stats and how many records they received. The scratch directory is deleted when the write
   ends.
4. *commit* on the driver (``Writer.commit``): files of failed or speculative attempts, which
   carry markers but are in no returned stat, are deleted first.

With the bucket index (``hoodie.index.type=BUCKET``, ``shoal.index.bucket``) no file is read
and no tag is carried: the route tasks hash each key to its bucket number (Hudi's
``BucketIdentifier``, vectorised), pack records by (partition, bucket number) and count them
so; the driver tags those buckets with their file groups as the local writer tags keys
(checking the layout: a table of another index or other bucket options fails here, before the
timeline changes) and assigns them with the local writer's ``Writer.assign``: each bucket's
file group takes its records, a bucket without one gets a new file group named after it.

With a global index (``GLOBAL_BLOOM``, ``GLOBAL_SIMPLE``) a key pass comes first: the keys,
partition paths, operations and ordering values of every record come to the driver, which
deduplicates and tags them as the local writer does and plans by key
(``shoal.spark.global_keys``); the route pass then packs every record for its key's buckets.
That input is evaluated twice: one that could give other rows when evaluated again (a plan
with ``limit``, ``sample``, ``rand()``, windows, ``dropDuplicates``, or a source other than
files, local data, ranges and cached or checkpointed data: ``shoal.spark.frames.reproducible``)
is checkpointed first (``localCheckpoint``). One that changes all the same (a UDF wrongly
taken for deterministic) fails the write before its commit: the rows written differ from the
rows planned.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from shoal.config import write_config as wc
from shoal.errors import CommitConflictError, CorruptDataError, InvalidArgumentError
from shoal.fs.view import FileSystemView, LatestSlices
from shoal.index.bucket import BucketIndex
from shoal.keygen import keygen_properties
from shoal.read.settle import check_plan_fresh, plan_again_or_raise
from shoal.spark.counting import BucketCounts, Profile, TagContext
from shoal.spark.executor import SparkExecutor, spark_job
from shoal.spark.file_input import FileInput, file_task
from shoal.spark.frames import arrow_batches, evaluated_once, plain, quoted, sample_records
from shoal.spark.global_keys import (
    KEY_FILES_SCHEMA,
    key_input_mismatch,
    key_mismatch_row,
    key_pass_schema,
    key_task,
    keys_dir,
    plan_global,
    read_keys,
)
from shoal.spark.keying import BucketLayout, KeySpec
from shoal.spark.missing_files import missing_file
from shoal.spark.options import parse_options, table_for_write
from shoal.spark.packing import PACKED_DIR_NAME, Run, planned_runs, runs_by_task
from shoal.spark.routing import (
    PASS_SCHEMA,
    RecordKeying,
    input_mismatch,
    laid_out_runs,
    pass_counts,
    pass_mismatch_row,
    route_task,
)
from shoal.spark.scratch import scratch_dir
from shoal.spark.task_layout import (
    bucket_weight,
    pack_with_targets,
    stray_targets,
    write_order,
    write_task_count,
)
from shoal.spark.write_tasks import RESULT_SCHEMA, BucketTaskSpec, stray_spec, write_task
from shoal.table import Table
from shoal.tasks.cow_write import OP_COLUMN, CowWriteSpec
from shoal.tasks.mor_append import LogAppendSpec
from shoal.timeline.commit_metadata import WriteStat
from shoal.timeline.lock import WRITE, table_lock
from shoal.timeline.timeline import Timeline
from shoal.write.assigner import Assignment, BucketAssigner
from shoal.write.insert_duplicates import DuplicatePolicy, duplicate_policy
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY
from shoal.write.schema import (
    IS_DELETED_COLUMN,
    normalize_types,
    strip_meta_columns,
)
from shoal.write.writer import (
    PLAN_ATTEMPTS,
    REPLACING,
    WRITES_NEW_FILE_GROUPS,
    Operation,
    Writer,
    WriteResult,
    key_records,
    looks_up_keys,
    make_index,
    refuse_replacing_buckets,
    replaced_file_groups,
)

log = logging.getLogger(__name__)

# Whether the passes read the input's files is decided once per write.
_UNDECIDED = object()

# Columns the local writer adds to records (not part of the table's data schema).
_INTERNAL = (RECORD_KEY, PARTITION_PATH, OP_COLUMN)


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

    As the local writer, the write plans again (up to three plans) when a clean, an archival,
    a rollback or a restore run concurrently (another process's) deleted a file its plan read
    before its instant started; a file missing with no such cause raises FileNotFoundError, and
    one missing once the instant started raises CommitConflictError, nothing committed. Planning
    again evaluates ``df`` again: it should give the same rows (an input that would not, such as
    one sampling at random, is written as its last evaluation gave it; cache or checkpoint it to
    pin one).
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
    with table_for_write(path, table_type, hoodie, SparkExecutor(spark)) as table:
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
    distinct = df.select(*[F.col(quoted(f)) for f in fields]).distinct().toArrow()
    return writer.write(distinct, Operation.DELETE_PARTITION)


def _partitions_of(counted: pa.Table) -> list[str]:
    """The partitions the route pass found records in."""
    return sorted(p for p in pc.unique(counted.column("partition")).to_pylist() if p is not None)


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


# ---- the driver side ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Planned:
    """A write planned on the driver, before its instant starts: its buckets, what each takes,
    and how the route pass finds them."""

    view: FileSystemView
    assignment: Assignment
    avg_record_size: int
    # Per bucket: whether it takes records or soft deletes (not hard deletes alone).
    ordered_entries: tuple[bool, ...]
    # Each run of the route pass as (bucket, input partition, run); with a global index, the
    # route pass's broadcast instead (it runs once the instant started).
    runs: list[tuple[int, int, Run]] | None
    global_plan: Callable[[], Any] | None
    # Records the route pass sends to the write tasks in all.
    routed: int
    # The partitions the records fall in (a replace commit replaces their file groups).
    partitions: list[str]
    # Whether a log append may get bloom false positives (keys tagged by a footer alone).
    strays_possible: bool = False


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
        self._scratch: list[str] = []  # deleted after the write
        # Whether this write compacted the table before widening a column's type.
        self._compacted = False
        # A global index write's input as its passes read it (``evaluated_once``).
        self._evaluated: DataFrame | None = None
        # The input's files when the passes read them (``_file_input``).
        self._files: FileInput | object | None = _UNDECIDED

    def run(self, df: DataFrame) -> WriteResult:
        """Writes ``df``. Planning runs again when a concurrent clean, archival, rollback or
        restore deleted a file it read (as the local writer's does, up to ``PLAN_ATTEMPTS``
        plans), and evaluates ``df`` again (see :func:`write`): each plan's route pass reads the
        input once, and a global index write's passes share one evaluation across plans
        (``evaluated_once``). A file missing once the instant started fails the write with
        CommitConflictError, nothing committed (the next write rolls it back)."""
        with table_lock(self.table.storage, WRITE):
            try:
                result = self._run(df)
            finally:
                self._release()
            result.timings.update(self.timings)
            return result

    def _release(self) -> None:
        """Releases what the plans so far left: broadcasts, and the packed records of the
        scratch directories."""
        for broadcast in self._broadcasts:
            broadcast.unpersist()
        self._broadcasts.clear()
        for directory in self._scratch:
            self.table.storage.delete_dir(directory)
        self._scratch.clear()

    def _phase(self, name: str, started: float) -> float:
        now = time.perf_counter()
        self.timings[name] = now - started
        return now

    def _broadcast(self, value: Any) -> Any:
        broadcast = self.spark.sparkContext.broadcast(value)
        self._broadcasts.append(broadcast)
        return broadcast

    def _run(self, df: DataFrame) -> WriteResult:
        """Plans the write and runs it, planning again while a plan finds a file missing that
        a clean, an archival, a rollback or a restore explains, or after compacting the table."""
        failed_plans = 0
        while True:
            timeline = Timeline.load(self.table.storage, self.table.config)
            try:
                result = self._planned_run(df, timeline)
            except Exception as exc:
                missing = missing_file(exc)
                if missing is None:
                    raise
                failed_plans += 1
                # Nothing on the timeline is this write's yet: the instant starts after planning.
                plan_again_or_raise(missing, failed_plans, PLAN_ATTEMPTS, timeline, exc)
                result = None
            if result is not None:
                return result
            self._release()

    def _planned_run(self, df: DataFrame, timeline: Timeline) -> WriteResult | None:
        """Plans the write on ``timeline``, then runs it. Returns the result, or None when the
        write compacted the table first and must plan again. Raises a missing file only while
        planning."""
        t = time.perf_counter()
        storage, writer, op = self.table.storage, self.writer, self.operation
        # Bad bucket index options fail before any job (as in the local writer).
        bucket_index = writer.bucket_index()
        spec, data_schema, table_schema = self._key_spec(df, timeline, bucket_index)
        keyed = counted = pass_rows = bucketed = None
        if spec.global_keys:
            # The key pass and the route pass evaluate the input: it must give the same rows.
            # One evaluation serves every plan.
            if self._evaluated is None:
                self._evaluated = evaluated_once(df)
            source = self._evaluated
            t = self._phase("plan_tagging", t)
            keyed = self._key_pass(source, spec)
            t = self._phase("keys", t)
        else:
            source = df
            tag_context = self._tag_context(timeline) if spec.tag else None
            t = self._phase("plan_tagging", t)
            tags = self._broadcast(tag_context)
            held = self._held_keys(timeline)
            pass_rows = self._route_pass(source, spec, table_schema, tags, held)
            counted = pass_counts(pass_rows)
            if bucket_index is not None:
                # Tags the counted buckets: a table laid out otherwise fails here.
                view = FileSystemView(storage, timeline, partitions=_partitions_of(counted))
                bucketed = BucketCounts.tagged(counted, bucket_index, view)
            t = self._phase("route", t)

        # The passes tagged against files listed since the timeline's load: none may have gone.
        check_plan_fresh(timeline)
        # Nothing on the timeline changed so far: bad input failed above.
        timeline = writer.rollback_failed_writes(timeline)
        if not self._compacted and writer.compact_before_widening(timeline, data_schema) is not timeline:
            # The compaction rewrote the base files the passes tagged against: plan again.
            self._compacted = True
            return None
        # A partitioned index plans with the partitions its records fall in (a global index,
        # and a replace of the whole table, with all of them).
        listed = _partitions_of(counted) if counted is not None and op not in REPLACING else None
        view = FileSystemView(storage, timeline, partitions=listed)
        if keyed is not None:
            assigner = writer.assigner(timeline, lambda: sample_records(source, spec, table_schema, writer))
            global_plan = plan_global(writer, keyed, op, view, timeline, assigner)
            if global_plan is None:
                return _write_planned_on_the_driver(df, self.table, op)
            planned = _Planned(
                view,
                global_plan.assignment,
                assigner.avg_record_size,
                global_plan.ordered_entries,
                None,
                global_plan.route_plan,
                global_plan.routed,
                [],
            )
        else:
            assert counted is not None and pass_rows is not None
            planned = self._assign(counted, pass_rows, bucketed, timeline, view, source, spec, table_schema)
        t = self._phase("assign", t)
        # The view (and a global index's lookups) listed files after this timeline's load.
        check_plan_fresh(timeline)
        try:
            return self._execute(source, spec, planned, data_schema, table_schema, t)
        except Exception as exc:
            missing = missing_file(exc)
            if missing is None:
                raise
            # Not a planning error: the caller must not plan again.
            raise CommitConflictError(
                f"a file the write needed went missing while it ran: {missing}"
            ) from exc

    def _key_pass(self, source: DataFrame, spec: KeySpec) -> pa.Table:
        """A global index write's key pass: every record's key, partition path, operation,
        ordering value and input position, on the driver (``shoal.spark.global_keys``): the
        tasks write them to files in the table's temp directory, which the driver reads, then
        deletes."""
        keys = source.select(*[F.col(quoted(c)) for c in spec.columns])
        schema = key_pass_schema(spec.ordering)
        storage = self.table.storage
        directory = keys_dir(storage)
        storage.makedirs(directory)
        task = functools.partial(key_task, spec, schema, directory)
        job = f"shoal {self.operation.value.lower()}: keys"
        try:
            inputs = self._file_input(source)
            if inputs is not None:
                with spark_job(self.spark.sparkContext, f"{job} ({inputs.files} files)"):
                    files = self._over_files(inputs, spec.columns, task, key_mismatch_row, KEY_FILES_SCHEMA)
                mismatch = key_input_mismatch(files)
                if mismatch is None:
                    return read_keys(storage, files, schema)
                self._through_spark(mismatch)
                storage.delete_dir(directory)
                storage.makedirs(directory)
            with arrow_batches(self.spark, keys.schema), spark_job(self.spark.sparkContext, job):
                files = keys.mapInArrow(task, KEY_FILES_SCHEMA).toArrow()
            return read_keys(storage, files, schema)
        finally:
            storage.delete_dir(directory)

    def _held_keys(self, timeline: Timeline) -> Any:
        """For an insert under a duplicate policy, a broadcast of the policy and what finds the
        keys the table holds (the route tasks leave their records out, or fail); else None."""
        policy = duplicate_policy(self.table.write_config)
        if self.operation != Operation.INSERT or policy == DuplicatePolicy.NONE:
            return None
        # The partitions the records fall in are known only to the route tasks.
        return self._broadcast((policy, self.writer.stored_keys(timeline, None, lazily=True)))

    def _route_pass(
        self,
        source: DataFrame,
        spec: KeySpec,
        table_schema: pa.Schema | None,
        broadcast: Any,
        held: Any = None,
    ) -> pa.Table:
        """The route pass (``shoal.spark.routing``): packs every record into the write's scratch
        directory, by its provisional route or (with a global index) by the plan in
        ``broadcast``; returns the pass's run and count rows. ``held``: see ``_held_keys``."""
        directory = scratch_dir(self.table.storage, PACKED_DIR_NAME)
        self._scratch.append(directory)
        self.table.storage.makedirs(directory)
        config, write_config = self.table.config, self.table.write_config
        keying = RecordKeying(
            operation=self.operation,
            table_properties=spec.table_properties,
            ordering_field=config.precombine_field,
            table_schema=table_schema,
            fill_missing=bool(write_config.get(wc.SCHEMA_ON_WRITE_ADD_COLUMNS)),
        )
        _, _, ordered = self._ordering()
        task = functools.partial(route_task, spec, keying, broadcast, ordered, directory, held=held)
        job = f"shoal {self.operation.value.lower()}: route"
        files = self._file_input(source)
        if files is not None:
            with spark_job(self.spark.sparkContext, f"{job} ({files.files} files)"):
                rows = self._over_files(files, None, task, pass_mismatch_row, PASS_SCHEMA)
            mismatch = input_mismatch(rows)
            if mismatch is None:
                return rows
            if spec.global_keys:
                # The key pass read every file, checked for every column: one changed since.
                raise CorruptDataError(f"the input changed between the write's passes: {mismatch}")
            self._through_spark(mismatch)
            self.table.storage.delete_dir(directory)
            self.table.storage.makedirs(directory)
        with arrow_batches(self.spark, source.schema), spark_job(self.spark.sparkContext, job):
            return source.mapInArrow(task, PASS_SCHEMA).toArrow()

    def _file_input(self, source: DataFrame) -> FileInput | None:
        """The input's files, when the passes read them themselves (``shoal.spark.file_input``):
        decided once per write, so that a global index write's two passes read the input alike."""
        if self._files is _UNDECIDED:
            if not self.table.write_config.get(wc.SPARK_DIRECT_PARQUET_INPUT):
                self._through_spark(f"{wc.SPARK_DIRECT_PARQUET_INPUT}=false")
            else:
                self._files = FileInput.of(source)
        return self._files if isinstance(self._files, FileInput) else None

    def _through_spark(self, reason: str) -> None:
        log.info("the write reads its input through Spark: %s", reason)
        self._files = None

    def _over_files(
        self,
        files: FileInput,
        columns: Sequence[str] | None,
        task: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
        mismatch_row: Callable[[int, str], pa.RecordBatch],
        schema: StructType | str,
    ) -> pa.Table:
        """A pass over the input's files: one Spark task per packed range of them."""
        n = len(files.tasks)
        runner = functools.partial(file_task, files, columns, task, mismatch_row)
        return self.spark.range(0, n, 1, n).mapInArrow(runner, schema).toArrow()

    def _ordering(self) -> tuple[bool, bool, bool]:
        """Whether the write deduplicates, whether a bulk insert sorts by key, and whether the
        records carry their input order (deduplication needs it: the later of two equal records
        wins; so does a bulk insert that keeps the input order)."""
        op = self.operation
        combine = self.writer.combine(op)
        # The local writer plans a bulk insert with the bucket index as an upsert: records stay
        # in input order.
        sort_by_key = (
            op in WRITES_NEW_FILE_GROUPS
            and self.writer.bucket_index() is None
            and self.table.write_config.get(wc.BULKINSERT_SORT_MODE) in wc.KEY_SORTED_BULK_INSERT_MODES
        )
        return combine, sort_by_key, combine or (op in WRITES_NEW_FILE_GROUPS and not sort_by_key)

    def _assign(
        self,
        counted: pa.Table,
        pass_rows: pa.Table,
        bucketed: BucketCounts | None,
        timeline: Timeline,
        view: FileSystemView,
        source: DataFrame,
        spec: KeySpec,
        table_schema: pa.Schema | None,
    ) -> _Planned:
        """Buckets from the route pass's counts (``bucketed``: with the bucket index, tagged), as
        the local writer assigns them, and the pass's runs laid out on them."""
        writer, op = self.writer, self.operation
        if bucketed is not None:
            profile = bucketed.profile
            # A bucket's records all go to its one file group: no sizing, so no size estimate.
            assigner = BucketAssigner(1, 0, 1)
        else:
            profile = Profile.summed(counted)
            assigner = writer.assigner(timeline, lambda: sample_records(source, spec, table_schema, writer))
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
                laid_out_runs(pass_rows, assignment),
                None,
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
            laid_out_runs(pass_rows, assignment),
            None,
            bucketed.routed(assignment),
            profile.partitions(),
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
            stats: list[WriteStat] = []
            received = 0
            if n:
                combine, sort_by_key, _ = self._ordering()
                task = BucketTaskSpec(
                    specs=specs,
                    operation=op,
                    ordering_field=config.precombine_field,
                    combine=combine,
                    sort_by_key=sort_by_key,
                    stray_specs=tuple(stray_spec(writer, spec, b, n) for b, spec in enumerate(specs))
                    if strays_possible
                    else (),
                    stray_targets=tuple(targets) if strays_possible else (),
                )
                runs = planned.runs
                if runs is None:
                    assert planned.global_plan is not None
                    plan = self._broadcast(planned.global_plan())
                    runs = planned_runs(self._route_pass(source, spec, table_schema, plan))
                    t = self._phase("route", t)
                stats, received = self._write_tasks(task, runs, task_of, targets)
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

    def _write_tasks(
        self,
        task: BucketTaskSpec,
        runs: list[tuple[int, int, Run]],
        task_of: list[int],
        targets: Sequence[int | None],
    ) -> tuple[list[WriteStat], int]:
        """One write task per planned task: each reads its buckets' runs of the route pass's
        packed files and writes them. Returns the tasks' write stats and the records they
        received."""
        layout = runs_by_task(runs, task_of, write_order(targets))
        broadcast = self._broadcast(layout)
        tasks = self.spark.range(0, len(layout), 1, max(1, len(layout)))
        written = tasks.mapInArrow(
            functools.partial(write_task, task, broadcast, self.after_task_write), RESULT_SCHEMA
        )
        label = f"shoal {self.operation.value.lower()}: write {len(task.specs)} file groups"
        with spark_job(self.spark.sparkContext, label):
            results = [json.loads(r[0]) for r in written.collect()]
        stats = [WriteStat.from_dict(s) for result in results for s in result["stats"]]
        return stats, sum(result["received"] for result in results)

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
            [f.with_type(plain(f.type)).with_nullable(True) for f in keyed.schema if f.name not in _INTERNAL]
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
            table_properties=keygen_properties(config.as_dict(), self.table.write_config.raw),
            write_options=dict(self.table.write_config.raw),
            columns=columns,
            key_schema=key_schema,
            # The bucket index tags by hashing keys alone (make_index refuses it).
            tag=not global_keys
            and bucket_index is None
            and make_index(self.table.storage, self.table.write_config, op) is not None,
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
        """What lists the latest slices of the partitions the route tasks meet (they read the
        footers they need)."""
        return TagContext(LatestSlices(self.table.storage, timeline))
