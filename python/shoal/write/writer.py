"""Planning and committing a write (DESIGN §3.1): the driver side of every write operation."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.arrays import group_rows
from shoal.config import table_config as tc
from shoal.config.table_config import MergeOrdering, TableConfig, TableType, requested_ordering
from shoal.config.write_config import (
    ALLOW_DUPLICATE_ON_INSERTS,
    BUCKET_INDEX_HASH_FIELD,
    BUCKET_INDEX_NUM_BUCKETS,
    BULKINSERT_SORT_MODE,
    COMBINE_BEFORE_DELETE,
    COMBINE_BEFORE_INSERT,
    COMBINE_BEFORE_UPSERT,
    INDEX_TYPE,
    INSERT_AUTO_SPLIT,
    INSERT_SPLIT_SIZE,
    KEY_SORTED_BULK_INSERT_MODES,
    LOGFILE_DATA_BLOCK_MAX_SIZE,
    LOGFILE_MAX_SIZE,
    MERGE_SMALL_FILE_CANDIDATES,
    PARQUET_COMPRESSION,
    PARQUET_MAX_FILE_SIZE,
    PARQUET_SMALL_FILE_LIMIT,
    PARTITIONS_TO_DELETE,
    PAYLOAD_CLASS,
    RECORD_MERGE_MODE,
    RECORD_SIZE_ESTIMATE,
    RECORD_SIZE_THRESHOLD,
    SCHEMA_ON_WRITE_ADD_COLUMNS,
    WriteConfig,
)
from shoal.errors import CommitConflictError, InvalidArgumentError, InvalidOptionError, UnsupportedError
from shoal.executor.base import Executor, balanced_groups
from shoal.executor.local import LocalExecutor
from shoal.fs.markers import delete_markers, list_marked_files, reconcile_against_markers
from shoal.fs.partition_metadata import ensure_partition_metadata, is_partition, partition_paths
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice, FileSystemView, LatestSlices, LogFile, PartitionSlices
from shoal.index.bloom import BloomIndex, Tagged
from shoal.index.bucket import BucketIndex
from shoal.index.global_index import CheckStored, check_stored_slices, tag_globally
from shoal.index.locate import ITEMS_PER_WORKER, locate_keys
from shoal.keygen import KeyGenerator
from shoal.keygen.options import CONSISTENT_LOGICAL_TIMESTAMP, get_bool
from shoal.read.mor import MorSliceSpec
from shoal.read.settle import check_plan_fresh, plan_again_or_raise
from shoal.schemas import load_schema
from shoal.services.archive import run_inline_archive
from shoal.services.clean import run_inline_clean
from shoal.services.compaction import (
    abort_on_compaction_conflict,
    base_file_options,
    compact,
    pending_compaction_file_groups,
    run_inline_compaction,
    slice_for_new_logs,
)
from shoal.tasks.cow_write import (
    OP_COLUMN,
    OP_HARD_DELETE,
    OP_SOFT_DELETE,
    OP_UPSERT,
    CowWriteSpec,
    run_cow_write,
)
from shoal.tasks.mor_append import LogAppendSpec, names_a_logged_delete, run_log_append
from shoal.timeline.commit_metadata import NULL_COMMIT, CommitMetadata, WriteStat
from shoal.timeline.heartbeat import Heartbeat
from shoal.timeline.instant import Action, Instant
from shoal.timeline.lock import WRITE, table_lock
from shoal.timeline.timeline import Timeline
from shoal.write.assigner import Assignment, BucketAssigner, assign_bucket_file_groups
from shoal.write.base_file import BaseFileOptions, avro_schema_for
from shoal.write.concurrency import Concurrency, check_still_pending, conflicts, heartbeat_stopped_after
from shoal.write.gather import RowGather, key_ordered_gathers
from shoal.write.input import to_arrow_table
from shoal.write.insert_duplicates import (
    DuplicatePolicy,
    StoredKeys,
    duplicate_policy,
    lookup_index,
    without_held_keys,
)
from shoal.write.prepare import (
    PARTITION_PATH,
    RECORD_KEY,
    add_keys,
    check_logged_delete_orderings,
    check_ordering_field,
    dedup_by_key,
    deleted_mask,
    validate_keys,
)
from shoal.write.schema import (
    IS_DELETED_COLUMN,
    META_COLUMNS,
    normalize_types,
    reconcile,
    strip_meta_columns,
    widened_columns,
)
from shoal.write.sizing import average_record_size_from_commits, estimate_record_size
from shoal.write.table_options import check_table_options_agree


class Operation(str, enum.Enum):
    """Write operations, named as Hudi's ``WriteOperationType``."""

    UPSERT = "UPSERT"
    INSERT = "INSERT"
    BULK_INSERT = "BULK_INSERT"
    DELETE = "DELETE"
    INSERT_OVERWRITE = "INSERT_OVERWRITE"
    INSERT_OVERWRITE_TABLE = "INSERT_OVERWRITE_TABLE"
    DELETE_PARTITION = "DELETE_PARTITION"


# Plans a write makes at most when concurrent services delete files it planned with.
PLAN_ATTEMPTS = 3

# Operations that replace file groups: a replace commit names them, and readers skip them.
REPLACING = frozenset(
    {Operation.INSERT_OVERWRITE, Operation.INSERT_OVERWRITE_TABLE, Operation.DELETE_PARTITION}
)
# Operations whose records all go into new file groups, without an index lookup.
WRITES_NEW_FILE_GROUPS = frozenset(
    {Operation.BULK_INSERT, Operation.INSERT_OVERWRITE, Operation.INSERT_OVERWRITE_TABLE}
)


@dataclass
class WriteResult:
    """What a committed write did."""

    instant: str
    operation: Operation
    metadata: CommitMetadata
    # Seconds per phase, for the write paths that measure them (the Spark write).
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def num_writes(self) -> int:
        return self.metadata.total_records_written()


@dataclass
class PendingWrite:
    """A write between ``Writer.start`` (its instant is inflight) and ``Writer.commit``."""

    operation: Operation
    assignment: Assignment
    timeline: Timeline
    instant_time: str
    inflight: Instant
    # File group -> the pending compaction planning it (merge-on-read).
    pending_compactions: dict[tuple[str, str], str]
    # The Avro schema for delete block headers (merge-on-read deletes).
    log_schema: str | None
    # The table's Avro schema when the write started (None before the first write).
    table_schema: str | None = None
    deleted_logs: LogsWithDeletes | None = None
    # Beats while the write is pending (LAZY failed-write cleaning only; driver side).
    heartbeat: Heartbeat | None = None


class Writer:
    """Plans one write against the current table state, runs it, and commits it.

    The phases are public so that every executor's write path runs the same planner:
    :meth:`write` runs them on in-memory Arrow data; ``shoal.spark.write`` runs key generation,
    tagging and the write tasks inside Spark and the rest (:meth:`index`, :meth:`assigner`,
    :meth:`assign`, :meth:`start`, :meth:`task_spec`, :meth:`commit`) on the driver.
    """

    def __init__(
        self,
        storage: Storage,
        config: TableConfig,
        write_config: WriteConfig,
        keygen: KeyGenerator,
        executor: Executor | None = None,
    ) -> None:
        # Before any instant: every write path (local, stream, Spark, the data source) starts here.
        config.check_record_writes()
        check_payload_class(config)
        check_table_options_agree(config, write_config)
        asked = requested_ordering(write_config.get(RECORD_MERGE_MODE), write_config.get(PAYLOAD_CLASS))
        if asked is not None and asked != config.merge_ordering:
            raise InvalidOptionError(
                f"the write options ask for {asked.value}, and the table merges with "
                f"{config.merge_ordering.value}: the ordering is the table's, set when it was created"
            )
        self.storage = storage
        self.config = config
        self.wc = write_config
        self.keygen = keygen
        self.executor: Executor = executor or LocalExecutor()
        self.concurrency = Concurrency(storage, write_config)
        # Gathering rows into buckets is driver-side work: it stays on local threads whatever
        # runs the tasks.
        self.driver = executor if isinstance(executor, LocalExecutor) else LocalExecutor()

    @property
    def merge_on_read(self) -> bool:
        return self.config.table_type == TableType.MERGE_ON_READ

    # ---- public entry --------------------------------------------------------------------

    def write(self, data: Any, operation: Operation) -> WriteResult:
        # One write at a time per table in this process. Compaction scheduling takes the same
        # lock, so a write either plans with a compaction plan in view or commits before it.
        with table_lock(self.storage, WRITE):
            return self._write(data, operation)

    def delete_partitions(self, partitions: Sequence[str]) -> WriteResult:
        """Replaces every file group of ``partitions`` (partition paths as stored) in one
        replace commit; readers no longer see their records, and the cleaner removes them."""
        with table_lock(self.storage, WRITE):
            return self._replace(
                None, Operation.DELETE_PARTITION, Timeline.load(self.storage, self.config), partitions
            )

    def _write(self, data: Any, operation: Operation) -> WriteResult:
        if operation in REPLACING:
            return self._replace(data, operation, Timeline.load(self.storage, self.config))
        # Read once: planning may run again.
        data = to_arrow_table(data)
        for attempt in range(1, PLAN_ATTEMPTS + 1):
            timeline = Timeline.load(self.storage, self.config)
            try:
                return self._planned_write(data, operation, timeline)
            except FileNotFoundError as e:
                # A concurrent clean, archival or rollback deleted a file (a base file, an
                # instant's metadata) the plan read, or listed without it: plan again on the
                # newer timeline. Nothing on the timeline is this write's yet: the instant starts
                # after planning.
                plan_again_or_raise(e, attempt, PLAN_ATTEMPTS, timeline, e)
        raise AssertionError("unreachable")

    def _planned_write(self, data: pa.Table, operation: Operation, timeline: Timeline) -> WriteResult:
        """Plans the write on ``timeline``, then runs it (raises FileNotFoundError only while
        planning)."""
        records = self._prepare(data, operation, timeline)
        self.bucket_index()  # bad bucket index options fail before a rollback changes the timeline
        if operation == Operation.INSERT:
            records = self.resolve_insert_duplicates(records, timeline)
        timeline = self.rollback_failed_writes(timeline)
        timeline = self.compact_before_widening(timeline, records.schema)
        view = FileSystemView(self.storage, timeline, partitions=self.partitions_to_list(records))
        # With the bucket index every record goes to its bucket's file group, bulk inserts too.
        if operation == Operation.BULK_INSERT and self.wc.get(INDEX_TYPE) != "BUCKET":
            assignment, chunks = self._plan_bulk_insert(records, timeline)
        else:
            assignment, chunks = self._plan(records, operation, view, timeline)
        check_plan_fresh(timeline)
        try:
            return self._execute(records, operation, assignment, chunks, timeline)
        except FileNotFoundError as e:
            # Not a planning error: the caller must not plan again.
            raise CommitConflictError(f"a file the write needed went missing while it ran: {e}") from e

    def _replace(
        self, data: Any, operation: Operation, timeline: Timeline, partitions: Sequence[str] | None = None
    ) -> WriteResult:
        """``insert_overwrite``, ``insert_overwrite_table`` and ``delete_partition``: the records
        (none for a partition delete) go into new file groups as a bulk insert writes them, and
        the replace commit names the file groups they replace: those of the partitions the
        records fall in, of every partition, or of ``partitions``."""
        refuse_replacing_buckets(self.wc, operation)
        records = None
        if operation == Operation.DELETE_PARTITION:
            named = self.wc.get(PARTITIONS_TO_DELETE)
            if partitions is None and named:
                partitions = [p.strip() for p in named.split(",") if p.strip()]
            elif partitions is None:
                partitions = pc.unique(self.keygen.partition_paths(to_arrow_table(data))).to_pylist()
            partitions = _known_partitions(self.storage, partitions)
        else:
            records = self._prepare(data, operation, timeline)
            partitions = pc.unique(records.column(PARTITION_PATH)).to_pylist()
        timeline = self.rollback_failed_writes(timeline)
        if records is not None:
            timeline = self.compact_before_widening(timeline, records.schema)
        replaced = replaced_file_groups(operation, FileSystemView(self.storage, timeline), partitions)
        if records is not None and records.num_rows:
            assignment, chunks = self._plan_bulk_insert(records, timeline)
            schema = records.drop_columns([RECORD_KEY, PARTITION_PATH, OP_COLUMN]).schema
        else:
            assignment, chunks, schema = Assignment(), [], None
        return self._execute(records, operation, assignment, chunks, timeline, replaced, schema)

    # ---- preparation (nothing on the timeline changes here) -------------------------------

    def _prepare(self, data: Any, operation: Operation, timeline: Timeline) -> pa.Table:
        incoming = normalize_types(strip_meta_columns(to_arrow_table(data)))
        keyed = key_records(
            incoming,
            operation,
            self.keygen,
            self.config.precombine_field,
            None if operation == Operation.DELETE else self.table_schema(timeline),
            self.wc.get(SCHEMA_ON_WRITE_ADD_COLUMNS),
        )
        if self.merge_on_read and operation == Operation.UPSERT:
            check_logged_delete_orderings(keyed, self.config.precombine_field)
        return finish_records(
            keyed, operation, self.config.precombine_field, self.combine(operation), self.wc.global_index
        )

    def resolve_insert_duplicates(self, records: pa.Table, timeline: Timeline) -> pa.Table:
        """An insert's records (keyed) under the insert duplicate policy
        (``shoal.write.insert_duplicates``): without those of keys the table holds, or
        DuplicateKeyError when the policy is to fail."""
        policy = duplicate_policy(self.wc)
        if policy == DuplicatePolicy.NONE or not records.num_rows:
            return records
        stored = self.stored_keys(timeline, self.partitions_to_list(records))
        return without_held_keys(records, stored.held(records), policy)

    def stored_keys(
        self, timeline: Timeline, partitions: list[str] | None, lazily: bool = False
    ) -> StoredKeys:
        """What finds the keys the latest slices of ``partitions`` (None: every partition) hold.
        ``lazily``: each partition is listed when a lookup first needs it (a global index looks
        everywhere, and lists every partition now)."""
        slices: PartitionSlices
        if lazily and not self.wc.global_index:
            slices = LatestSlices(self.storage, timeline)
        else:
            by_partition: dict[str, list[FileSlice]] = defaultdict(list)
            for sl in FileSystemView(self.storage, timeline, partitions=partitions).latest_file_slices():
                by_partition[sl.partition_path].append(sl)
            slices = dict(by_partition)
        bucket_index = self.bucket_index()
        return StoredKeys(
            base_uri=self.storage.base_uri,
            write_options=dict(self.wc.raw),
            slices=slices,
            global_index=self.wc.global_index,
            buckets=(
                None if bucket_index is None else (tuple(bucket_index.hash_fields), bucket_index.num_buckets)
            ),
            completed_instants=tuple(i.requested_time for i in timeline.completed_data_instants()),
            ordering_field=self.config.precombine_field,
            event_time_ordering=self.config.merge_ordering == MergeOrdering.EVENT_TIME,
        )

    def partitions_to_list(self, records: pa.Table) -> list[str] | None:
        """The partitions whose files a write of ``records`` (keyed) plans with: those the
        records fall in, as Hudi's partitioned indexes load only the affected partitions' files;
        None (every partition) under a global index, which looks keys up everywhere. On an
        object store, listing a large table's every partition for each write would cost more
        than the write."""
        if self.wc.global_index:
            return None
        return sorted(pc.unique(records.column(PARTITION_PATH)).cast(pa.string()).to_pylist())

    def combine(self, operation: Operation) -> bool:
        """Whether records of the batch are deduplicated by key (Hudi's combine-before-*)."""
        return bool(
            self.wc.get(
                {
                    Operation.UPSERT: COMBINE_BEFORE_UPSERT,
                    Operation.INSERT: COMBINE_BEFORE_INSERT,
                    Operation.BULK_INSERT: COMBINE_BEFORE_INSERT,
                    Operation.DELETE: COMBINE_BEFORE_DELETE,
                    Operation.INSERT_OVERWRITE: COMBINE_BEFORE_INSERT,
                    Operation.INSERT_OVERWRITE_TABLE: COMBINE_BEFORE_INSERT,
                }[operation]
            )
        )

    def table_schema(self, timeline: Timeline) -> pa.Schema | None:
        """The latest committed schema without the meta columns; None before the first write."""
        avro = timeline.latest_schema()
        if not avro:
            return None
        schema = _native.avro_to_arrow_schema(avro)
        return pa.schema([f for f in schema if f.name not in META_COLUMNS])

    def rollback_failed_writes(self, timeline: Timeline) -> Timeline:
        """Finishes a restore a crash left pending, then rolls back failed writes; returns the
        timeline to plan with."""
        from shoal.services.restore import finish_pending_restores
        from shoal.services.rollback import rollback_failed_writes

        if any(i.action == Action.RESTORE for i in timeline.pending()):
            # Half restored, the table is in no committed state: writing on it would lose the
            # rest of the restore (Hudi refuses to write until the restore is completed).
            finish_pending_restores(self.storage, self.config)
            timeline = timeline.reload()
        # Failed writes must go before planning: hudi-rs would otherwise read their files.
        if not self.concurrency.failed_writes(timeline):
            return timeline
        with self.concurrency.locked():
            if self.concurrency.optimistic:
                # Under the lock: a write that committed meanwhile is no longer failed.
                timeline = timeline.reload()
            failed = self.concurrency.failed_writes(timeline)
            if rollback_failed_writes(self.storage, self.config, timeline, failed):
                for instant in failed:
                    self.concurrency.forget_heartbeat(instant.requested_time)
                return timeline.reload()
        return timeline

    def compact_before_widening(self, timeline: Timeline, data_schema: pa.Schema) -> Timeline:
        """On a merge-on-read table, a write that widens a column's type (``int`` to ``long``, ...)
        first compacts every file slice with logs, and returns the timeline after (``timeline``
        itself when nothing was compacted). hudi-rs 0.5
        cannot merge a log block that holds a column in an older type once the table's schema
        has also gained a column that block lacks; after the compaction no log block keeps the
        older type, and later writes log the wider one."""
        if not self.merge_on_read or not widened_columns(self.table_schema(timeline), data_schema):
            return timeline
        compact(self.storage, self.config, self.wc, self.executor, force=True)
        return timeline.reload()

    # ---- planning --------------------------------------------------------------------------

    def index(self, operation: Operation) -> BloomIndex | None:
        """The index that tags this operation's records; None when it needs no lookup."""
        return make_index(self.storage, self.wc, operation)

    def bucket_index(self) -> BucketIndex | None:
        """The bucket index when ``hoodie.index.type=BUCKET``, else None."""
        if self.wc.get(INDEX_TYPE) != "BUCKET":
            return None
        return BucketIndex.for_table(
            self.storage,
            self.config.record_key_fields,
            self.wc.get(BUCKET_INDEX_NUM_BUCKETS),
            self.wc.get(BUCKET_INDEX_HASH_FIELD),
        )

    def _average_record_size(self, timeline: Timeline, sample: Callable[[], pa.Table]) -> int:
        from_commits = average_record_size_from_commits(
            timeline, self.wc.get(PARQUET_SMALL_FILE_LIMIT), self.wc.get(RECORD_SIZE_THRESHOLD)
        )
        if from_commits is not None:
            return from_commits
        records = sample()
        if records.num_rows:
            data_cols = [c for c in records.column_names if c != OP_COLUMN]
            return estimate_record_size(records.select(data_cols), self.wc.get(PARQUET_COMPRESSION))
        return int(self.wc.get(RECORD_SIZE_ESTIMATE))

    def assigner(self, timeline: Timeline, sample: Callable[[], pa.Table]) -> BucketAssigner:
        """The bucket assigner, sized by recent commits or else by ``sample()`` (prepared
        records, only called when no commit says how large records are)."""
        return BucketAssigner(
            self.wc.get(PARQUET_MAX_FILE_SIZE),
            self.wc.get(PARQUET_SMALL_FILE_LIMIT),
            self._average_record_size(timeline, sample),
            self.wc.get(MERGE_SMALL_FILE_CANDIDATES),
            None if self.wc.get(INSERT_AUTO_SPLIT) else self.wc.get(INSERT_SPLIT_SIZE),
        )

    def assign(
        self,
        assigner: BucketAssigner,
        assignment: Assignment,
        partition: str,
        num_inserts: int,
        updates_by_file: dict[str, int],
        slices: list[FileSlice],
        inserts_by_bucket: list[tuple[int, int]] | None = None,
    ) -> None:
        """Adds one partition's buckets: its updates per file group and its inserts (with the
        bucket index: ``inserts_by_bucket``, each bucket's new file group and its records)."""
        if inserts_by_bucket is not None:
            assign_bucket_file_groups(assignment, partition, inserts_by_bucket, updates_by_file, slices)
            return
        assigner.assign(
            assignment, partition, num_inserts, updates_by_file, slices, allow_logs=not self.merge_on_read
        )

    def _plan(
        self, records: pa.Table, operation: Operation, view: FileSystemView, timeline: Timeline
    ) -> tuple[Assignment, list[tuple[int, pa.Table | RowGather]]]:
        """Tags records, builds buckets; returns the assignment and, per bucket, its records."""
        assigner = self.assigner(timeline, lambda: records)
        assignment, records, routed = self.route_records(records, operation, view, timeline, assigner)
        # Taking rows from a column of several chunks concatenates them first: once, not per bucket.
        whole = records.combine_chunks()
        return assignment, self._for_tasks([(b, RowGather(whole, rows)) for b, rows in routed])

    def route_records(
        self,
        records: pa.Table,
        operation: Operation,
        view: FileSystemView,
        timeline: Timeline,
        assigner: BucketAssigner,
    ) -> tuple[Assignment, pa.Table, list[tuple[int, pa.Array]]]:
        """Tags ``records`` (keyed, deduplicated) and builds buckets. Returns the assignment, the
        records as tagged (a global index moves some to the partition that holds their key, and
        adds a delete where a moving record was) and, per bucket, the rows of those it takes."""
        assignment = Assignment()
        routed: list[tuple[int, pa.Array]] = []
        bucket_index = self.bucket_index()
        index = bucket_index if bucket_index is not None else self.index(operation)
        global_tags = None
        if isinstance(index, BloomIndex) and self.wc.global_index:
            records, global_tags = tag_globally(
                records,
                functools.partial(locate_keys, index, self.executor),
                view.latest_file_slices(),
                self.wc.update_partition_path,
                self.check_stored(timeline),
            )
        groups = group_rows(records.column(PARTITION_PATH))
        all_keys = records.column(RECORD_KEY)
        keys = [all_keys.take(rows).combine_chunks() for _, rows in groups]
        slices = [view.latest_file_slices(partition) for partition, _ in groups]
        # Per partition: the further file groups holding keys several hold (bloom and simple
        # indexes); the others tag each key with one file group at most.
        also: list[Tagged | None] = [None] * len(groups)
        if global_tags is not None:
            # A global index's records already come once per file group they go to.
            tags = [global_tags.take(rows) for _, rows in groups]
        elif index is None:
            tags = [pa.nulls(len(k), pa.string()) for k in keys]
        elif isinstance(index, BloomIndex):
            # Copy-on-write tasks read every file they update: a key only one file's footer
            # admits is tagged without reading that file (a bloom false positive becomes an
            # insert there). Merge-on-read confirms: a false positive would log a new key.
            every = index.tag_all(list(zip(keys, slices, strict=True)), confirm=self.merge_on_read)
            tags = [tagged.file_ids for tagged in every]
            also = list(every)
        else:
            tags = index.tag(list(zip(keys, slices, strict=True)))
        ops = records.column(OP_COLUMN)
        for (partition, rows), partition_slices, tagged, partition_keys, holders in zip(
            groups, slices, tags, keys, also, strict=True
        ):
            found = pc.is_valid(tagged)
            is_upsert = pc.equal(ops.take(rows), OP_UPSERT)
            # Deletes of keys the table does not hold have nothing to do.
            new_rows = pc.indices_nonzero(pc.and_(pc.invert(found), is_upsert))
            inserts_by_bucket = None
            if bucket_index is not None:
                new_rows, inserts_by_bucket = bucket_index.arrange_inserts(partition_keys, new_rows)
            if holders is not None and len(holders.also_rows):
                # A key several file groups hold (kept by inserts and bulk inserts) goes to each,
                # as Hudi's index joins it with every location: each copy is updated or deleted.
                at, held_by = holders.locations()
                upd_idx = pa.array(at)
            else:
                upd_idx = pc.indices_nonzero(found)
                held_by = tagged.take(upd_idx)
            updates_by_file = {fid: upd_idx.take(ix) for fid, ix in group_rows(held_by)}
            first_bucket = len(assignment.buckets)
            self.assign(
                assigner,
                assignment,
                partition,
                len(new_rows),
                {fid: len(ix) for fid, ix in updates_by_file.items()},
                partition_slices,
                inserts_by_bucket,
            )
            bucket_rows: dict[int, list[pa.Array]] = defaultdict(list)
            by_file = {assignment.buckets[i].file_id: i for i in range(first_bucket, len(assignment.buckets))}
            for fid, ix in updates_by_file.items():
                bucket_rows[by_file[fid]].append(rows.take(ix))
            offset = 0
            for bucket_idx, count in assignment.insert_plan.get(partition, []):
                bucket_rows[bucket_idx].append(rows.take(new_rows.slice(offset, count)))
                offset += count
            for bucket_idx in range(first_bucket, len(assignment.buckets)):
                parts = bucket_rows.get(bucket_idx)
                if parts:
                    routed.append((bucket_idx, pa.concat_arrays(parts)))
        return assignment, records, routed

    def check_stored(self, timeline: Timeline) -> CheckStored:
        """A global index's check of stored records (``CheckStored``) on ``timeline``, run as
        the executor's tasks, each over a group of slices: it gets their incoming keys (and
        ordering values) and reads the slices' key columns with their logs merged."""
        event_time = self.config.merge_ordering == MergeOrdering.EVENT_TIME
        ordering = self.config.precombine_field if event_time else None
        wanted = [RECORD_KEY] + ([ordering] if ordering else [])

        def check(hits: Sequence[tuple[FileSlice, pa.Table]]) -> list[tuple[np.ndarray, np.ndarray]]:
            work = [
                (
                    position,
                    self._slice_spec(existing, timeline, event_time),
                    incoming.select([c for c in wanted if c in incoming.column_names]),
                    existing.total_size(),
                )
                for position, (existing, incoming) in enumerate(hits)
            ]
            groups = balanced_groups(work, lambda item: item[3], self.executor.parallelism * ITEMS_PER_WORKER)
            items = [([(spec, incoming) for _, spec, incoming, _ in group],) for group in groups]
            found = self.executor.map(check_stored_slices, items)
            states = {
                position: state
                for group, results in zip(groups, found, strict=True)
                for (position, _, _, _), state in zip(group, results, strict=True)
            }
            return [states[position] for position in range(len(work))]

        return check

    def _plan_bulk_insert(
        self, records: pa.Table, timeline: Timeline
    ) -> tuple[Assignment, list[tuple[int, pa.Table | RowGather]]]:
        """Grouped by partition, in key order unless ``hoodie.bulkinsert.sort.mode`` says to keep
        the input order, cut into files of ``max file size`` each; no index lookup. On local
        threads each write task gathers its own rows (``RowGather``)."""
        assigner = self.assigner(timeline, lambda: records)
        per_file = assigner.records_per_new_file()
        groups = group_rows(records.column(PARTITION_PATH))
        # Base files take the partition path from their bucket: no need to carry the column,
        # nor the operations (a bulk insert writes records only). Chunked columns are
        # concatenated once here rather than by every partition's take.
        data = records.drop_columns([PARTITION_PATH, OP_COLUMN]).combine_chunks()
        by_key = self.wc.get(BULKINSERT_SORT_MODE) in KEY_SORTED_BULK_INSERT_MODES
        assignment = Assignment()
        chunks: list[tuple[int, RowGather]] = []
        for partition, rows in groups:
            if by_key:
                gathers = key_ordered_gathers(data, rows, per_file)
            else:
                gathers = [RowGather(data, rows.slice(lo, per_file)) for lo in range(0, len(rows), per_file)]
            for gather in gathers:
                assigner.assign(
                    assignment, partition, gather.num_rows, {}, [], allow_logs=True, use_small_files=False
                )
                chunks.append((len(assignment.buckets) - 1, gather))
        return assignment, self._for_tasks(chunks)

    def _for_tasks(self, chunks: list[tuple[int, RowGather]]) -> list[tuple[int, pa.Table | RowGather]]:
        """The buckets' rows as the executor's tasks take them: on local threads each task
        gathers its own (see RowGather); tasks that run elsewhere get their rows, gathered here,
        not the whole input."""
        if self.executor is self.driver:
            return list(chunks)
        tables = self.driver.map(RowGather.table, [(g,) for _, g in chunks])
        return [(b, t) for (b, _), t in zip(chunks, tables, strict=True)]

    # ---- execution and commit --------------------------------------------------------------

    def _base_file_options(self) -> BaseFileOptions:
        return base_file_options(self.config, self.wc)

    def _execute(
        self,
        records: pa.Table | None,
        operation: Operation,
        assignment: Assignment,
        chunks: Sequence[tuple[int, pa.Table | RowGather]],
        timeline: Timeline,
        replaced: dict[str, list[str]] | None = None,
        data_schema: pa.Schema | None = None,
    ) -> WriteResult:
        write = self.start(
            operation, assignment, timeline, {assignment.buckets[b].partition_path for b, _ in chunks}
        )
        try:
            items = [
                (self.task_spec(write, bucket_idx, task_id, _has_ordered_entries(chunk)), chunk, self.storage)
                for task_id, (bucket_idx, chunk) in enumerate(chunks)
            ]
            stats: list[WriteStat] = self.executor.map(run_write_task, items)
        except BaseException:
            self.abandon(write)
            raise
        if data_schema is None and records is not None:
            data_schema = records.drop_columns([RECORD_KEY, PARTITION_PATH, OP_COLUMN]).schema
        return self.commit(write, stats, data_schema, replaced)

    def start(
        self, operation: Operation, assignment: Assignment, timeline: Timeline, partitions: Iterable[str]
    ) -> PendingWrite:
        """Starts the instant (requested, then inflight with the workload profile) and makes sure
        the partitions the buckets write to exist."""
        mor = self.merge_on_read
        # File groups a pending compaction plans take new logs in the slice it opens. A slice
        # rewrite (task_spec) happens at this instant, later than the compaction's: that newer
        # slice supersedes the compacted one (services/compaction.py).
        pending = pending_compaction_file_groups(timeline) if mor else {}
        action = Action.DELTA_COMMIT if mor else Action.COMMIT
        plan = b""
        if operation in REPLACING:
            action = Action.REPLACE_COMMIT
            plan = requested_replace_metadata(operation.value)
        with self.concurrency.locked():
            # Under optimistic concurrency the time is taken under the lock, after every instant
            # other writers created: two writers never share one (nor its heartbeat).
            latest = timeline.reload() if self.concurrency.optimistic else timeline
            instant_time = latest.new_instant_time()
            # The first beat precedes the instant: no writer sees it pending without a heartbeat.
            heartbeat = self.concurrency.start_heartbeat(instant_time)
            try:
                requested = timeline.create_requested(instant_time, action, plan)
            except BaseException:
                if heartbeat is not None:
                    heartbeat.stop()
                raise
        try:
            profile = self._workload_profile(assignment, operation).to_json()
            inflight = timeline.transition_to_inflight(requested, profile)
            log_schema = self._log_block_schema(timeline) if mor and operation == Operation.DELETE else None
            table_schema = timeline.latest_schema()
            for partition in partitions:
                ensure_partition_metadata(self.storage, partition, instant_time)
        except BaseException:
            if heartbeat is not None:
                heartbeat.stop()
            raise
        return PendingWrite(
            operation,
            assignment,
            timeline,
            instant_time,
            inflight,
            pending,
            log_schema,
            table_schema=table_schema,
            heartbeat=heartbeat,
        )

    def abandon(self, write: PendingWrite) -> None:
        """Gives up a started write that will not commit: its heartbeat stops, so the next write
        takes it for a failed one and rolls it back."""
        if write.heartbeat is not None:
            write.heartbeat.stop()

    def task_spec(
        self, write: PendingWrite, bucket_idx: int, task_id: int, has_ordered_entries: bool
    ) -> CowWriteSpec | LogAppendSpec:
        """The task that writes bucket ``bucket_idx``: a log append or a base file (new, or a
        rewrite of the slice). ``has_ordered_entries`` says whether the bucket's records include
        records or ``_hoodie_is_deleted`` deletes (anything but hard deletes)."""
        mor = self.merge_on_read
        timeline = write.timeline
        event_time = self.config.merge_ordering == MergeOrdering.EVENT_TIME
        bucket = write.assignment.buckets[bucket_idx]
        existing: FileSlice | None = bucket.existing
        if mor and existing is not None and bucket.inserts == 0:
            target = slice_for_new_logs(existing, write.pending_compactions)
            append = self._log_spec(write.instant_time, task_id, target, write.log_schema)
            # Hudi's readers collapse a key's log entries before the base record competes:
            # under event-time ordering, a record or an ordered delete logged after a delete
            # of its key collapses to a version that can lose to the deleted base record and
            # bring it back. The task rewrites the slice instead when its records name a key
            # the slice's logs delete (tasks/mor_append.py); only slices whose logs hold
            # deletes need the check.
            if event_time and existing.log_files and has_ordered_entries:
                if write.deleted_logs is None:
                    write.deleted_logs = log_files_with_deletes(timeline)
                here = existing.partition_path
                if any(write.deleted_logs.may_hold(here, lf) for lf in existing.log_files):
                    rewrite = self.rewrite_spec(write, bucket_idx, task_id)
                    return dataclasses.replace(append, rewrite_if_key_deleted=rewrite)
            return append
        return self.rewrite_spec(write, bucket_idx, task_id)

    def rewrite_spec(self, write: PendingWrite, bucket_idx: int, task_id: int) -> CowWriteSpec:
        """A new base file for the bucket: new records, or the slice merged with its records
        (whatever the table type; the streaming writer also merges into a base file the same
        instant wrote before)."""
        mor = self.merge_on_read
        timeline = write.timeline
        event_time = self.config.merge_ordering == MergeOrdering.EVENT_TIME
        bucket = write.assignment.buckets[bucket_idx]
        existing: FileSlice | None = bucket.existing
        old_base = existing.base_file.path if existing is not None and existing.base_file else None
        old_slice = None
        if mor and existing is not None and existing.log_files:
            old_slice = self._slice_spec(existing, timeline, event_time)
        return CowWriteSpec(
            base_uri=self.storage.base_uri,
            instant=write.instant_time,
            partition_path=bucket.partition_path,
            file_id=bucket.file_id,
            task_id=task_id,
            old_base_path=old_base,
            prev_commit=existing.base_instant if existing is not None else NULL_COMMIT,
            ordering_field=self.config.precombine_field,
            event_time_ordering=event_time,
            options=self._base_file_options(),
            old_slice=old_slice,
            concat=existing is not None
            and write.operation == Operation.INSERT
            and not looks_up_keys(self.wc, write.operation),
            table_schema=write.table_schema if existing is not None else None,
        )

    def commit(
        self,
        write: PendingWrite,
        stats: list[WriteStat],
        data_schema: pa.Schema | None,
        replaced: dict[str, list[str]] | None = None,
    ) -> WriteResult:
        """Completes the instant with the tasks' write stats (``data_schema``: the records'
        columns, without the meta and internal ones; None when no record was written), then
        runs inline table services. ``replaced``: per partition, the file groups a replacing
        operation replaces."""
        # Every caller but the data source's commit (a process of its own) holds it already:
        # held, no write in this process changes the timeline the table services are given.
        with table_lock(self.storage, WRITE):
            return self._commit(write, stats, data_schema, replaced)

    def _commit(
        self,
        write: PendingWrite,
        stats: list[WriteStat],
        data_schema: pa.Schema | None,
        replaced: dict[str, list[str]] | None,
    ) -> WriteResult:
        timeline = write.timeline
        metadata = CommitMetadata(operation_type=write.operation.value)
        for stat in stats:
            metadata.add_stat(stat)
        if write.operation in REPLACING:
            metadata.partition_to_replace_file_ids = dict(replaced or {})
        metadata.extra_metadata.update(self.wc.commit_metadata)
        if data_schema is not None and write.operation != Operation.DELETE:
            metadata.extra_metadata["schema"] = avro_schema_for(data_schema, self.config.table_name)
        else:
            schema = timeline.latest_schema()
            if schema:
                metadata.extra_metadata["schema"] = schema
        with heartbeat_stopped_after(write.heartbeat), self.concurrency.locked():
            from shoal.services.rollback import rollback_instant

            now = timeline.reload()
            try:
                check_still_pending(now, write.inflight)
            except CommitConflictError:
                gone = now.get(write.instant_time) is None
                if gone and list_marked_files(self.storage, write.instant_time):
                    # Files written after the other writer's rollback: roll them back too.
                    rollback_instant(self.storage, self.config, now, write.inflight)
                raise
            if self.concurrency.optimistic:
                reasons = conflicts(timeline, now, write.instant_time, stats, replaced)
                if reasons:
                    rollback_instant(self.storage, self.config, now, write.inflight)
                    raise CommitConflictError(
                        f"write {write.instant_time} conflicts with writes that completed while it ran "
                        f"({'; '.join(reasons)}); it was rolled back: retry it"
                    )
            if self.merge_on_read:
                abort_on_compaction_conflict(self.storage, self.config, timeline, now, write.inflight, stats)
            # Attempts of a retried task (Spark) leave files of their own: only reported ones stay.
            reconcile_against_markers(self.storage, write.instant_time, [s.path for s in stats if s.path])
            done = timeline.complete(write.inflight, metadata.to_json())
        delete_markers(self.storage, write.instant_time)
        # The timeline as this commit left it spares the table services a listing. Under
        # optimistic concurrency, other processes may have changed it since: the services use it
        # only to tell whether they have anything to do, and list again under the lock if so.
        known: Timeline | None = now.with_completed(done)
        if self.merge_on_read and run_inline_compaction(self.storage, self.config, self.wc, self.executor):
            known = None
        if run_inline_clean(self.storage, self.config, self.wc, self.executor, known):
            known = None
        run_inline_archive(self.storage, self.config, self.wc, known)
        return WriteResult(write.instant_time, write.operation, metadata)

    def _slice_spec(self, existing: FileSlice, timeline: Timeline, event_time: bool) -> MorSliceSpec:
        return MorSliceSpec.of_slice(
            self.storage.base_uri,
            existing,
            tuple(i.requested_time for i in timeline.completed_data_instants()),
            self.config.precombine_field,
            event_time,
        )

    def _log_block_schema(self, timeline: Timeline) -> str | None:
        """The table's Avro schema with the meta fields, for the header of delete blocks."""
        data = self.table_schema(timeline)
        if data is None:
            return None
        meta = [pa.field(n, pa.string()) for n in META_COLUMNS]
        return avro_schema_for(pa.schema(meta + list(data)), self.config.table_name)

    def _log_spec(
        self, instant_time: str, task_id: int, existing: FileSlice, table_schema: str | None = None
    ) -> LogAppendSpec:
        current = max(existing.log_files, key=lambda lf: lf.parsed.sort_key()) if existing.log_files else None
        return LogAppendSpec(
            base_uri=self.storage.base_uri,
            instant=instant_time,
            partition_path=existing.partition_path,
            file_id=existing.file_id,
            task_id=task_id,
            base_instant=existing.base_instant,
            base_file_name=existing.base_file.name if existing.base_file else "",
            current_log_name=current.name if current else None,
            current_log_version=current.version if current else 0,
            current_log_size=current.size if current else 0,
            max_log_size=self.wc.get(LOGFILE_MAX_SIZE),
            max_data_block_size=self.wc.get(LOGFILE_DATA_BLOCK_MAX_SIZE),
            table_name=self.config.table_name,
            ordering_field=self.config.precombine_field,
            table_schema=table_schema,
            consistent_logical_timestamp=get_bool(self.config.props, CONSISTENT_LOGICAL_TIMESTAMP, False),
            # A task that may run twice, or a writer that others run beside, never appends to
            # a log file in place: each writes a file of its own.
            in_place=not self.executor.retries_tasks and not self.concurrency.optimistic,
        )

    def _workload_profile(self, assignment: Assignment, operation: Operation) -> CommitMetadata:
        """The inflight file's content: inserts/updates per partition, as Hudi writes it."""
        profile = CommitMetadata(operation_type=operation.value)
        per_partition: dict[str, WriteStat] = {}
        for b in assignment.buckets:
            stat = per_partition.setdefault(b.partition_path, WriteStat(fileId="", path=None))
            stat.numInserts += b.inserts
            stat.numUpdateWrites += b.updates
        for partition, stat in per_partition.items():
            profile.partition_to_write_stats[partition] = [stat]
        return profile


def key_records(
    incoming: pa.Table,
    operation: Operation,
    keygen: KeyGenerator,
    ordering: str | None,
    table_schema: pa.Schema | None,
    fill_missing: bool,
) -> pa.Table:
    """Validates ``incoming`` (normalized, without meta columns) against the table schema, adds
    the record key and partition path columns and the operation column (rows marked
    ``_hoodie_is_deleted`` are soft deletes). Works batch by batch: nothing here looks across
    rows, so a Spark task can run it on its share of the input."""
    if operation == Operation.DELETE:
        keyed = add_keys(incoming, keygen)
        validate_keys(keyed.column(RECORD_KEY))
        keep = [RECORD_KEY, PARTITION_PATH] + (
            [ordering] if ordering and ordering in keyed.column_names else []
        )
        keyed = keyed.select(keep)
        return keyed.append_column(OP_COLUMN, pa.repeat(pa.scalar(OP_HARD_DELETE, pa.int8()), keyed.num_rows))
    incoming = reconcile(incoming, table_schema, fill_missing=fill_missing)
    check_ordering_field(incoming, ordering)
    keyed = add_keys(incoming, keygen)
    validate_keys(keyed.column(RECORD_KEY))
    deleted = deleted_mask(keyed)
    if deleted is None:
        ops = pa.repeat(pa.scalar(OP_UPSERT, pa.int8()), keyed.num_rows)
    else:
        ops = pc.if_else(deleted, pa.scalar(OP_SOFT_DELETE, pa.int8()), pa.scalar(OP_UPSERT, pa.int8()))
    return keyed.append_column(OP_COLUMN, ops)


def check_payload_class(config: TableConfig) -> None:
    """Raises UnsupportedError when the table records a payload class whose merge shoal does not
    implement (``hoodie.compaction.payload.class``: a Debezium, AWS DMS or partial-update
    payload, say). Such a payload decides which version of a record wins, and which records are
    deletes, by rules of its own: merging by event or commit time instead would give other
    rows than Hudi's writers give."""
    payload = config.props.get(tc.PAYLOAD_CLASS, "").strip()
    if payload and tc.payload_class_name(payload) not in tc.PAYLOAD_ORDERING:
        known = ", ".join(sorted(c.rsplit(".", 1)[1] for c in tc.PAYLOAD_ORDERING))
        raise UnsupportedError(
            f"cannot write: this table merges records with the payload class {payload} "
            f"({tc.PAYLOAD_CLASS}), whose rules shoal does not implement; shoal merges with {known}"
        )


def finish_records(
    records: pa.Table, operation: Operation, ordering: str | None, combine: bool, global_keys: bool = False
) -> pa.Table:
    """Deduplicates keyed records by key when ``combine`` (the greatest ordering value wins,
    ties to the later row), then drops soft deletes for operations other than upsert, which
    write only the live records. Needs every record of a key: on Spark it runs in the write
    task, which gets all of them. ``global_keys``: a key is one record whatever its partition
    path (a global index), so records of a key in different partitions are duplicates too."""
    if combine:
        records = dedup_by_key(records, None if operation == Operation.DELETE else ordering, global_keys)
    if operation in (Operation.UPSERT, Operation.DELETE) or IS_DELETED_COLUMN not in records.column_names:
        return records
    return records.filter(pc.equal(records.column(OP_COLUMN), OP_UPSERT))


def make_index(
    storage: Storage,
    wc: WriteConfig,
    operation: Operation,
    cache_keys: bool = False,
) -> BloomIndex | None:
    """The index that tags ``operation``'s records (``hoodie.index.type``); None when the
    operation needs no lookup (inserts that allow duplicates). ``cache_keys``: see BloomIndex.
    The bucket index (``Writer.bucket_index``) places records by their buckets, and every
    write path plans it without asking for this index: a caller that asks is refused."""
    if wc.get(INDEX_TYPE) == "BUCKET":
        raise UnsupportedError(
            "hoodie.index.type=BUCKET places records by bucket (Writer.bucket_index), not through "
            "an index lookup"
        )
    if not looks_up_keys(wc, operation):
        return None
    return lookup_index(storage, wc, cache_keys)


def replaced_file_groups(
    operation: Operation, view: FileSystemView, partitions: Iterable[str]
) -> dict[str, list[str]]:
    """The file groups a replacing ``operation`` replaces, per partition: the live ones of
    ``partitions`` (the partitions its records fall in, or those it deletes), or of every
    partition for ``insert_overwrite_table``."""
    targets = None if operation == Operation.INSERT_OVERWRITE_TABLE else set(partitions)
    replaced: dict[str, list[str]] = defaultdict(list)
    for sl in view.latest_file_slices():
        if targets is None or sl.partition_path in targets:
            replaced[sl.partition_path].append(sl.file_id)
    return dict(replaced)


def refuse_replacing_buckets(wc: WriteConfig, operation: Operation) -> None:
    """Raises UnsupportedError for a replacing operation on a bucket-indexed table: its new file
    groups would have to take the ids of their buckets."""
    if operation in REPLACING and wc.get(INDEX_TYPE) == "BUCKET":
        raise UnsupportedError(
            f"{operation.value.lower()} with hoodie.index.type=BUCKET is not supported: the new "
            "file groups would have to take their buckets' ids"
        )


def requested_replace_metadata(operation_type: str) -> bytes:
    """The Avro ``HoodieRequestedReplaceMetadata`` of a replacing write's requested instant:
    the operation and no clustering plan."""
    document = {"operationType": operation_type, "clusteringPlan": None, "extraMetadata": None, "version": 1}
    return _native.avro_container_encode(
        load_schema("HoodieRequestedReplaceMetadata.v6.writer"), json.dumps([document])
    )


def _known_partitions(storage: Storage, partitions: Sequence[str]) -> list[str]:
    """``partitions`` (paths as stored), each checked to be one of the table's partitions. A
    ``*`` matches any characters, ``/`` included, as in Hudi's partitions.to.delete: a pattern
    names every partition it matches (possibly none)."""
    patterns = [p for p in partitions if "*" in p]
    unknown = [p for p in partitions if "*" not in p and not is_partition(storage, p)]
    if unknown:
        raise InvalidArgumentError(
            f"not partitions of the table: {', '.join(repr(p) for p in unknown[:5])} (give partition "
            "paths as stored, e.g. 'city=sf' for hive-style partitioning)"
        )
    named = [p for p in partitions if "*" not in p]
    if patterns:
        every = partition_paths(storage)
        for pattern in patterns:
            regex = re.compile(".*".join(re.escape(piece) for piece in pattern.split("*")))
            named += [p for p in every if regex.fullmatch(p)]
    return list(dict.fromkeys(named))


def looks_up_keys(wc: WriteConfig, operation: Operation) -> bool:
    """Whether ``operation`` looks its records' keys up in the table's index."""
    if operation in WRITES_NEW_FILE_GROUPS or operation == Operation.DELETE_PARTITION:
        return False
    if operation != Operation.INSERT:
        return True
    # Under a duplicate policy the records left hold no key the table holds: nothing to merge
    # (Hudi allows duplicates on inserts then).
    return not wc.get(ALLOW_DUPLICATE_ON_INSERTS) and duplicate_policy(wc) == DuplicatePolicy.NONE


def run_write_task(
    spec: CowWriteSpec | LogAppendSpec, records: pa.Table | RowGather, storage: Storage | None = None
) -> WriteStat:
    """Runs the write task ``spec`` names (one executor job for base files and log appends);
    ``records`` may be rows the task gathers itself (local threads only)."""
    if isinstance(records, RowGather):
        records = records.table()
    if isinstance(spec, LogAppendSpec):
        rewrite = spec.rewrite_if_key_deleted
        if rewrite is None or not names_a_logged_delete(rewrite, records, storage):
            return run_log_append(spec, records, storage)
        # The rewrite is this attempt's too: its file carries the attempt's write token.
        spec = dataclasses.replace(rewrite, stage_id=spec.stage_id, attempt=spec.attempt)
        # It stands for the log append, whose records of a key (a batch that was not combined
        # may repeat one) Hudi's readers collapse by the precombine rule, not to the last one
        # as a merge of the records into the base file would.
        records = dedup_by_key(records, rewrite.ordering_field if rewrite.event_time_ordering else None)
    return run_cow_write(spec, records, storage)


def _has_ordered_entries(chunk: pa.Table | RowGather) -> bool:
    """Whether the chunk holds records or ``_hoodie_is_deleted`` deletes, which compete on
    ordering (hard deletes always apply); a chunk without operations (a bulk insert's gathers
    among them) holds records only."""
    if isinstance(chunk, RowGather):
        if OP_COLUMN not in chunk.data.column_names:
            return chunk.num_rows > 0
        ops = pc.take(chunk.data.column(OP_COLUMN), chunk.rows)
    elif OP_COLUMN not in chunk.column_names:
        return chunk.num_rows > 0
    else:
        ops = chunk.column(OP_COLUMN)
    return bool(pc.any(pc.not_equal(ops, OP_HARD_DELETE)).as_py())


@dataclass(frozen=True)
class LogsWithDeletes:
    """Which log files may hold delete blocks that count: those a completed delta commit on the
    active timeline appended deletes to, and any older than the active timeline (the write stats
    of archived commits are not read)."""

    # (partition, log file name)
    appended: set[tuple[str, str]]
    # Where the active data timeline starts; None: it holds no data instant.
    active_since: str | None

    def may_hold(self, partition: str, log_file: LogFile) -> bool:
        return (
            (partition, log_file.name) in self.appended
            or self.active_since is None
            or log_file.instant_time < self.active_since
        )


def log_files_with_deletes(timeline: Timeline) -> LogsWithDeletes:
    """The log files of the table that may hold deletes (:class:`LogsWithDeletes`)."""
    out: set[tuple[str, str]] = set()
    for inst in timeline.completed_data_instants():
        if inst.action != Action.DELTA_COMMIT:
            continue
        for partition, stats in timeline.commit_metadata(inst).partition_to_write_stats.items():
            for stat in stats:
                if stat.numDeletes and stat.path:
                    out.add((partition, stat.path.rsplit("/", 1)[-1]))
    return LogsWithDeletes(out, timeline.first_data_instant_time())
