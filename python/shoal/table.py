"""The public ``Table``: create, open, write and read a Hudi table."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shoal import _native
from shoal.config import table_config as tc
from shoal.config import write_config as wc
from shoal.config.table_config import TableConfig, TableType
from shoal.config.write_config import WriteConfig
from shoal.errors import InstantNotFoundError, InvalidArgumentError, InvalidOptionError, TableExistsError
from shoal.executor.base import Executor
from shoal.executor.local import LocalExecutor
from shoal.fs.damage import damaged_parquet
from shoal.fs.storage import Storage
from shoal.fs.view import FileSystemView
from shoal.keygen import CustomKeyGenerator, KeyGenerator, key_generator_from_properties, keygen_properties
from shoal.keygen import options as kgo
from shoal.read.filters import Filter, check_filters
from shoal.read.incremental import check_no_pending_write, is_latest_view, normalize_bound
from shoal.read.incremental import read_incremental as read_changes
from shoal.read.key_pruning import bases_admitting, without_base
from shoal.read.mor import MorSliceSpec, read_mor_slice
from shoal.read.projection import (
    check_columns,
    conform,
    conformed_schema,
    project,
    requested_columns,
    without_file_metadata,
)
from shoal.read.pruning import prune_partitions
from shoal.read.settle import read_settled
from shoal.read.snapshot import SliceReadSpec, iter_batches, plan_slices, read_base_slice, unify
from shoal.read.stream import ChangeStream
from shoal.read.undone import check_start_not_undone
from shoal.services.archive import ArchiveJob, ArchiveResult
from shoal.services.clean import ensure_retained
from shoal.timeline.archived import ArchivedTimeline
from shoal.timeline.commit_metadata import CommitMetadata
from shoal.timeline.instant import Action, Instant
from shoal.timeline.timeline import Timeline
from shoal.write.input import to_arrow_table
from shoal.write.schema import IS_DELETED_COLUMN, META_COLUMNS, strip_meta_columns
from shoal.write.stream_writer import DEFAULT_BUCKET_BUFFER_BYTES, DEFAULT_TOTAL_BUFFER_BYTES, StreamWriter
from shoal.write.writer import Operation, Writer, WriteResult

# Options that define the table and are persisted in hoodie.properties at creation.
_TABLE_DEFINING = {
    wc.HIVE_STYLE: tc.HIVE_STYLE_PARTITIONING,
    wc.URL_ENCODE: tc.URL_ENCODE_PARTITIONING,
    wc.DATABASE_NAME: tc.DATABASE_NAME,
}


@dataclass(frozen=True)
class TimelineEntry:
    """A completed instant as shown to users."""

    time: str
    action: str
    state: str
    completion_time: str | None = None


class Table:
    """A Hudi table at ``path`` (local path or URI understood by ``pyarrow.fs``).

    Open an existing table with ``Table(path)``; create one with :meth:`Table.create`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        options: Mapping[str, Any] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.storage = Storage(self.path)
        self.config = TableConfig.load(self.storage)
        self.write_config = WriteConfig(options)
        self.storage.listing_parallelism = self.write_config.get(wc.FILE_LISTING_PARALLELISM)
        self.executor = executor or LocalExecutor()
        self._keygen: KeyGenerator | None = None

    # ---- creation --------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        name: str,
        table_type: str = "COPY_ON_WRITE",
        record_key: str | Sequence[str] = "id",
        partition_by: str | Sequence[str] | None = None,
        ordering_field: str | None = None,
        key_generator: str | None = None,
        merge_ordering: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Table:
        """Creates a new table (table version 6) and returns it opened.

        ``record_key`` and ``partition_by`` take a field name or a list of them. ``merge_ordering``
        is ``"EVENT_TIME_ORDERING"`` (the greatest ``ordering_field`` wins, the default when an
        ordering field is set) or ``"COMMIT_TIME_ORDERING"`` (the latest write wins).
        """
        path = os.fspath(path)
        storage = Storage(path)
        if storage.exists(".hoodie/hoodie.properties"):
            raise TableExistsError(f"a table already exists at {path}")
        if storage.is_file(""):
            raise InvalidArgumentError(f"{path} is a file: a table is a directory")
        if not name or "." in name or "/" in name:
            raise InvalidOptionError(f"invalid table name {name!r}")
        write_config = WriteConfig(options)
        table_type_enum = TableType.parse(table_type)
        keys = [record_key] if isinstance(record_key, str) else list(record_key)
        parts = (
            []
            if partition_by is None
            else [partition_by]
            if isinstance(partition_by, str)
            else list(partition_by)
        )
        if not keys or any(not k for k in keys):
            raise InvalidOptionError("record_key must name at least one field")
        # Hudi's writers take the ordering from these write options: so does a table made by one.
        payload = write_config.get(wc.PAYLOAD_CLASS)
        asked = tc.requested_ordering(write_config.get(wc.RECORD_MERGE_MODE), payload)
        ordering_mode = _merge_ordering(merge_ordering or (asked.value if asked else None), ordering_field)
        if asked is not None and asked != ordering_mode:
            raise InvalidOptionError(
                f"merge_ordering={merge_ordering!r} conflicts with the write options, "
                f"which ask for {asked.value}"
            )
        props: dict[str, str] = {
            tc.TABLE_NAME: name,
            tc.TABLE_TYPE: table_type_enum.value,
            tc.TABLE_VERSION: "6",
            tc.TIMELINE_LAYOUT_VERSION: "1",
            tc.RECORDKEY_FIELDS: ",".join(keys),
            tc.PARTITION_FIELDS: ",".join(parts),
            tc.BASE_FILE_FORMAT: "PARQUET",
            tc.ARCHIVELOG_FOLDER: tc.ARCHIVELOG_FOLDER_DEFAULT,
            tc.HIVE_STYLE_PARTITIONING: "false",
            tc.URL_ENCODE_PARTITIONING: "false",
            tc.DROP_PARTITION_COLUMNS: "false",
            tc.TIMELINE_TIMEZONE: write_config.get(wc.TIMELINE_TIMEZONE),
            tc.PAYLOAD_CLASS: (
                tc.payload_class_name(payload)
                if payload
                else tc.DEFAULT_PAYLOAD
                if ordering_mode == tc.MergeOrdering.EVENT_TIME
                else tc.OVERWRITE_WITH_LATEST_PAYLOAD
            ),
            tc.MERGER_STRATEGY: tc.DEFAULT_MERGER_STRATEGY_UUID,
        }
        if ordering_field:
            props[tc.PRECOMBINE_FIELD] = ordering_field
        for option_key, prop_key in _TABLE_DEFINING.items():
            if write_config.is_set(option_key):
                props[prop_key] = write_config.raw[option_key]
        for key, value in write_config.raw.items():
            if key.startswith("hoodie.keygen.timebased."):
                props[key] = value
        keygen_props = dict(props)
        if key_generator:
            keygen_props[tc.KEYGENERATOR_CLASS if "." in key_generator else tc.KEYGENERATOR_TYPE] = (
                key_generator
            )
        elif write_config.is_set(wc.KEYGENERATOR_CLASS):
            keygen_props[tc.KEYGENERATOR_CLASS] = write_config.raw[wc.KEYGENERATOR_CLASS]
        elif write_config.is_set(wc.KEYGENERATOR_TYPE):
            keygen_props[tc.KEYGENERATOR_TYPE] = write_config.raw[wc.KEYGENERATOR_TYPE]
        keygen = key_generator_from_properties(keygen_props)
        props.update(keygen.table_properties())
        props.pop(tc.KEYGENERATOR_TYPE, None)  # v6 records the class
        if isinstance(keygen, CustomKeyGenerator):
            # Table version 6 records the partition fields' names only, and Hudi's writers take
            # each part's type from the write option: the table keeps it for every later write.
            props[kgo.WRITE_PARTITIONPATH_FIELD] = ",".join(p.spec() for p in keygen.partition_parts)
        for d in (
            ".hoodie/.temp",
            ".hoodie/.aux/.bootstrap/.partitions",
            ".hoodie/.aux/.bootstrap/.fileids",
            ".hoodie/.schema",
            ".hoodie/archived",
        ):
            storage.makedirs(d)
        TableConfig(props).save(storage)
        return cls(path, options=options)

    # ---- state -----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.config.table_name

    @property
    def table_type(self) -> str:
        return self.config.table_type.value

    @property
    def keygen(self) -> KeyGenerator:
        if self._keygen is None:
            self._keygen = _table_keygen(self.config, self.write_config.raw)
        return self._keygen

    def _timeline(self) -> Timeline:
        return Timeline.load(self.storage, self.config)

    @property
    def timeline(self) -> list[TimelineEntry]:
        """Completed instants, oldest first."""
        return [
            TimelineEntry(i.requested_time, i.action.value, i.state.name, i.completion_time)
            for i in self._timeline().completed()
        ]

    def instants(self) -> list[Instant]:
        """Every instant on the active timeline, pending ones included."""
        return list(self._timeline().instants)

    def latest_instant(self) -> str | None:
        last = self._timeline().last_completed_data_instant()
        return last.requested_time if last else None

    def commit_metadata_value(self, key: str) -> str | None:
        """The value of ``key`` in the extraMetadata of the latest completed commit that records
        it; None when no commit on the active timeline does. Write options named with
        ``hoodie.datasource.write.commitmeta.key.prefix`` (``_`` by default) land there: a pipeline
        that writes ``options={"_checkpoint": position}`` with its output resumes from
        ``commit_metadata_value("_checkpoint")`` after a restart, atomically with what it wrote."""
        timeline = self._timeline()
        for instant in reversed(timeline.completed_data_instants()):
            value = timeline.commit_metadata(instant).extra_metadata.get(key)
            if value is not None:
                return str(value)
        return None

    # ---- writes ----------------------------------------------------------------------------

    def _writer(self, options: Mapping[str, Any] | None) -> Writer:
        config = self.write_config.merged(options) if options else self.write_config
        keygen = self.keygen if config is self.write_config else _table_keygen(self.config, config.raw)
        return Writer(self.storage, self.config, config, keygen, self.executor)

    def upsert(self, data: Any, options: Mapping[str, Any] | None = None) -> str:
        """Inserts new records and updates existing ones by record key; returns the instant time."""
        return self._writer(options).write(data, Operation.UPSERT).instant

    def insert(self, data: Any, options: Mapping[str, Any] | None = None) -> str:
        """Inserts records; returns the instant time. Records of keys the table holds are kept
        beside the stored ones, unless ``hoodie.datasource.insert.dup.policy`` is ``drop``
        (they are left out) or ``fail`` (DuplicateKeyError, nothing written)."""
        return self._writer(options).write(data, Operation.INSERT).instant

    def bulk_insert(self, data: Any, options: Mapping[str, Any] | None = None) -> str:
        """Writes records sorted by partition and key into new files of the target size."""
        return self._writer(options).write(data, Operation.BULK_INSERT).instant

    def delete(self, data: Any, options: Mapping[str, Any] | None = None) -> str:
        """Deletes records by key: pass whole records or just their key (and partition) columns."""
        return self._writer(options).write(data, Operation.DELETE).instant

    def insert_overwrite(self, data: Any, options: Mapping[str, Any] | None = None) -> str:
        """Replaces the contents of the partitions ``data`` falls in with ``data`` (Hudi's
        ``insert_overwrite``): one replace commit; other partitions keep their records. Returns
        the instant time."""
        return self._writer(options).write(data, Operation.INSERT_OVERWRITE).instant

    def insert_overwrite_table(self, data: Any, options: Mapping[str, Any] | None = None) -> str:
        """Replaces the contents of the whole table with ``data`` (``insert_overwrite_table``);
        empty ``data`` empties the table. Returns the instant time."""
        return self._writer(options).write(data, Operation.INSERT_OVERWRITE_TABLE).instant

    def delete_partitions(self, partitions: Sequence[str], options: Mapping[str, Any] | None = None) -> str:
        """Deletes whole partitions (Hudi's ``delete_partition``), named by their paths as
        stored (``"city=sf"`` under hive-style partitioning; a ``*`` matches any characters, as
        in ``"dt=2023-*"``): one replace commit; the cleaner removes their files later, so time
        travel and incremental reads before it still work. Returns the instant time. Raises
        InvalidArgumentError for a path without ``*`` that is not a partition."""
        if isinstance(partitions, str):
            partitions = [partitions]
        return self._writer(options).delete_partitions(list(partitions)).instant

    def soft_delete(self, keys: Any, options: Mapping[str, Any] | None = None) -> str | None:
        """Soft-deletes records: they stay in the table, with every field other than the record
        key, partition and ordering fields set to null.

        ``keys`` holds the key (and partition) columns, or whole records. The stored ordering
        value is kept, so the soft delete wins under event-time ordering too. Returns the instant,
        or None when none of the keys is in the table.
        """
        incoming = strip_meta_columns(to_arrow_table(keys))
        wanted = self.keygen.record_keys(incoming)
        current = self.read(filters=[("_hoodie_record_key", "in", pc.unique(wanted).to_pylist())])
        if current.num_rows == 0:
            return None
        keep = {*self.config.record_key_fields, *self.config.partition_fields}
        if self.config.precombine_field:
            keep.add(self.config.precombine_field)
        columns, names = [], []
        for name in current.column_names:
            if name in META_COLUMNS:
                continue
            col = current.column(name)
            if name == IS_DELETED_COLUMN:
                col = pa.chunked_array([pa.repeat(pa.scalar(False), current.num_rows)])
            elif name not in keep:
                col = pa.chunked_array([pa.nulls(current.num_rows, col.type)])
            columns.append(col)
            names.append(name)
        return (
            self._writer(options).write(pa.Table.from_arrays(columns, names=names), Operation.UPSERT).instant
        )

    def write(
        self, data: Any, operation: str = "upsert", options: Mapping[str, Any] | None = None
    ) -> WriteResult:
        """Runs ``operation`` and returns the full :class:`WriteResult` (commit metadata included)."""
        try:
            op = Operation(operation.upper())
        except ValueError:
            raise InvalidOptionError(f"unknown operation {operation!r}") from None
        return self._writer(options).write(data, op)

    def stream_writer(
        self,
        operation: str = "upsert",
        bucket_buffer_bytes: int = DEFAULT_BUCKET_BUFFER_BYTES,
        total_buffer_bytes: int = DEFAULT_TOTAL_BUFFER_BYTES,
        options: Mapping[str, Any] | None = None,
    ) -> StreamWriter:
        """A streaming writer (``upsert`` or ``delete``): ``write(batch)`` buffers records per
        file group, flushing a buffer above ``bucket_buffer_bytes`` and, while all of them
        exceed ``total_buffer_bytes``, the largest; ``checkpoint()`` commits one commit (or
        deltacommit) with everything since the last one. Use it as a context manager: leaving
        the block checkpoints, an exception abandons the open checkpoint (nothing of it is
        visible; the next write rolls it back). See ``shoal.write.stream_writer``."""
        return StreamWriter(self._writer(options), operation, bucket_buffer_bytes, total_buffer_bytes)

    def rollback(self, instant: str | None = None) -> str:
        """Rolls back the last completed data commit (or the given one, which must be the last);
        a completed compaction goes back to the slices before it (the same records). A
        savepointed commit is refused (delete the savepoint first), as in Hudi, and so is one
        whose file groups' earlier slices a later clean removed (the table would show older
        records, or none). A rollback that a crash interrupted is finished first, and is what
        this call does then."""
        from shoal.services.rollback import (
            ensure_restorable_before,
            interrupted_rollback,
            rollback_compaction,
            rollback_instant,
        )
        from shoal.services.savepoint import savepointed_instants
        from shoal.timeline.lock import COMPACTION, WRITE, table_lock

        self.config.check_writable("roll back")
        self._finish_pending_restore()
        with table_lock(self.storage, WRITE), self._service_lock():
            timeline = self._timeline()
            unfinished = interrupted_rollback(timeline)
            if unfinished is not None:
                # A crash interrupted the rollback of the last commit: finish that one first.
                if instant is not None and instant != unfinished.requested_time:
                    raise InvalidArgumentError(
                        f"the rollback of {unfinished.requested_time} was interrupted: finish it "
                        "first (rollback() with no instant)"
                    )
                if unfinished.action == Action.COMPACTION:
                    with table_lock(self.storage, COMPACTION):
                        return rollback_compaction(self.storage, timeline, unfinished)
                return rollback_instant(self.storage, self.config, timeline, unfinished)
            last = timeline.last_completed_data_instant()
            if last is None:
                raise InstantNotFoundError("nothing to roll back")
            if instant is not None and instant != last.requested_time:
                target = timeline.get(instant)
                if target is None:
                    raise InstantNotFoundError(f"no instant {instant}")
                raise InvalidArgumentError(
                    f"only the latest commit ({last.requested_time}) can be rolled back; "
                    "use restore for older ones"
                )
            if last.requested_time in savepointed_instants(timeline):
                raise InvalidArgumentError(
                    f"commit {last.requested_time} is savepointed: delete the savepoint to roll it back"
                )
            ensure_restorable_before(self.storage, timeline, last)
            if last.action == Action.COMPACTION:
                # A running compaction must not see its instant go (restore takes the lock too).
                with table_lock(self.storage, COMPACTION):
                    return rollback_compaction(self.storage, timeline, last)
            return rollback_instant(self.storage, self.config, timeline, last)

    # ---- compaction (merge-on-read) --------------------------------------------------------

    def compact(self, force: bool = True, options: Mapping[str, Any] | None = None) -> list[str]:
        """Compacts the table: runs pending compactions (re-running failed attempts), then
        schedules a new one and runs it. Returns the compaction instants completed, oldest
        first. ``force=False`` schedules only when the trigger strategy
        (``hoodie.compact.inline.trigger.strategy``) says a compaction is due."""
        from shoal.services.compaction import compact

        config = self.write_config.merged(options) if options else self.write_config
        self._finish_pending_restore()
        return compact(self.storage, self.config, config, self.executor, force=force)

    def schedule_compaction(
        self, instant: str | None = None, force: bool = True, options: Mapping[str, Any] | None = None
    ) -> str | None:
        """Saves a compaction plan (``<instant>.compaction.requested``) covering every latest
        file slice with log files that no pending compaction plans yet, and returns its instant;
        None when there is nothing to compact (or, with ``force=False``, when the trigger
        strategy says no). Writes may go on while it is pending: updates of planned file groups
        go to the new slice. Raises CommitConflictError while an earlier write is pending, and
        InvalidArgumentError for an ``instant`` that is not later than every completed one."""
        from shoal.services.compaction import schedule_compaction

        config = self.write_config.merged(options) if options else self.write_config
        self._finish_pending_restore()
        return schedule_compaction(self.storage, self.config, config, instant_time=instant, force=force)

    def run_compaction(self, instant: str, options: Mapping[str, Any] | None = None) -> CommitMetadata:
        """Executes the pending compaction ``instant`` and returns its commit metadata. Can run
        on another thread, or in another process, while writers write; a failed earlier attempt
        is rolled back first, and a completed compaction just returns its metadata."""
        from shoal.services.compaction import run_compaction

        config = self.write_config.merged(options) if options else self.write_config
        self._finish_pending_restore()
        return run_compaction(self.storage, self.config, config, instant, self.executor)

    def pending_compactions(self) -> list[str]:
        """Instants of the compactions scheduled but not completed, oldest first."""
        return [i.requested_time for i in self._timeline().pending_compactions()]

    # ---- archival --------------------------------------------------------------------------

    def archive(self, options: Mapping[str, Any] | None = None) -> ArchiveResult:
        """Archives old instants now: once more than ``hoodie.keep.max.commits`` commits (or
        cleans, or rollbacks) are completed, moves the oldest into ``.hoodie/archived/`` down to
        ``hoodie.keep.min.commits``, never past a pending instant, the first savepoint, what the
        last clean retains or what compaction still counts (:mod:`shoal.services.archive`).
        Runs after every commit too, unless ``hoodie.archive.automatic=false``."""
        from shoal.services.archive import archive

        config = self.write_config.merged(options) if options else self.write_config
        self._finish_pending_restore()
        return archive(self.storage, self.config, config)

    def archive_async(self, options: Mapping[str, Any] | None = None) -> ArchiveJob:
        """Starts :meth:`archive` on a background thread (or returns the one still running);
        ``job.result()`` waits for it. It runs between writes, never inside one."""
        from shoal.services.archive import archive_async

        config = self.write_config.merged(options) if options else self.write_config
        self._finish_pending_restore()
        return archive_async(self.storage, self.config, config)

    def wait_for_archive(self, timeout: float | None = None) -> ArchiveResult | None:
        """Waits for the last background archival of this table (``archive_async``, or the
        one a commit started with ``hoodie.archive.async=true``) and returns its result, or
        raises its error; None when none was started."""
        from shoal.services.archive import latest_archive_job

        job = latest_archive_job(self.storage)
        return job.result(timeout) if job is not None else None

    @property
    def archived_timeline(self) -> ArchivedTimeline:
        """The instants archived off the active timeline, with their metadata."""
        return ArchivedTimeline.load(self.storage, self.config)

    # ---- cleaning, savepoints and restore --------------------------------------------------

    def clean(self, force: bool = True, options: Mapping[str, Any] | None = None) -> list[str]:
        """Cleans the table: finishes cleans left pending, then removes the file slices the
        cleaner policy (``hoodie.cleaner.policy``) no longer retains. Returns the clean instants
        completed. ``force=False`` plans a clean only after ``hoodie.clean.max.commits`` commits
        since the last one, as the inline clean after each commit does."""
        from shoal.services.clean import clean

        config = self.write_config.merged(options) if options else self.write_config
        self._finish_pending_restore()
        return clean(self.storage, self.config, config, self.executor, force=force)

    def savepoint(self, instant: str | None = None, user: str | None = None, comment: str = "") -> str:
        """Savepoints the completed commit ``instant`` (default: the latest): the cleaner keeps
        its file slices, so reads as of it and :meth:`restore` to it keep working. Returns the
        instant. Raises CleanedInstantError when the cleaner already removed slices it needs."""
        from shoal.services.savepoint import create_savepoint

        self._finish_pending_restore()
        with self._service_lock():
            return create_savepoint(self.storage, self.config, instant, user=user, comment=comment)

    def savepoints(self) -> list[str]:
        """The savepointed instants, oldest first."""
        from shoal.services.savepoint import savepointed_instants

        return savepointed_instants(self._timeline())

    def delete_savepoint(self, instant: str) -> None:
        """Deletes the savepoint at ``instant``; the next clean may remove the slices it kept."""
        from shoal.services.savepoint import delete_savepoint

        self._finish_pending_restore()
        with self._service_lock():
            delete_savepoint(self.storage, self.config, instant)

    def restore(self, instant: str) -> str:
        """Rolls the table back to the savepoint at ``instant``: every commit, delta commit and
        compaction after it, completed or pending, is rolled back. Returns the restore instant.
        Refused while a later savepoint exists."""
        from shoal.services.restore import restore

        with self._service_lock():
            return restore(self.storage, self.config, instant, self.executor)

    def _service_lock(self) -> AbstractContextManager[None]:
        """The table's lock under optimistic concurrency (a no-op for a single writer): a
        rollback, restore or savepoint started by hand does not interleave with other writers'
        commits."""
        from shoal.write.concurrency import Concurrency

        return Concurrency(self.storage, self.write_config).locked()

    def _finish_pending_restore(self) -> None:
        """Finishes a restore a crash left pending before another service runs: half restored,
        the table is in no committed state (Hudi refuses its services until the restore is
        completed; shoal's writes finish it first, and so do its services)."""
        if any(i.action == Action.RESTORE for i in self._timeline().pending()):
            from shoal.services.restore import finish_pending_restores

            finish_pending_restores(self.storage, self.config)

    # ---- reads -----------------------------------------------------------------------------

    def file_slices(self, as_of: str | None = None) -> list[Any]:
        """The latest file slice of every file group (as of an instant)."""
        timeline = self._timeline()
        return FileSystemView(self.storage, timeline, _resolve_as_of(timeline, as_of)).latest_file_slices()

    def read(
        self,
        columns: Sequence[str] | None = None,
        filters: Sequence[Filter] | None = None,
        as_of: str | _dt.datetime | None = None,
        query_type: str = "snapshot",
        start: str | _dt.datetime | None = None,
        end: str | _dt.datetime | None = None,
        include_deletes: bool = False,
    ) -> pa.Table:
        """Reads the table as a ``pyarrow.Table``.

        ``query_type``: ``snapshot`` (the default; merge-on-read tables merge their logs),
        ``read_optimized`` (base files only) or ``incremental`` (:meth:`read_incremental` with
        ``start``, ``end`` and ``include_deletes``). ``filters`` are ``(column, op, value)``
        tuples ANDed together (ops ``= != < <= > >= in not in``); filters on partition fields
        prune partitions. ``as_of`` travels back to the table as of that instant time
        (``yyyyMMddHHmmssSSS``) or datetime; while a write requested at or before it is still
        pending, that answer could still change, and CommitConflictError is raised (as Hudi's
        time travel does). ``columns`` named twice come back once.
        """
        if query_type.lower() == "incremental":
            if as_of is not None:
                raise InvalidArgumentError("as_of does not apply to incremental reads; use start/end")
            return self.read_incremental(start, end, columns, filters, include_deletes)
        if start is not None or end is not None or include_deletes:
            raise InvalidArgumentError("start, end and include_deletes need query_type='incremental'")
        columns = requested_columns(columns)

        def read(timeline: Timeline) -> tuple[pa.Table, pa.Schema | None]:
            specs, schema = self._plan_read(columns, filters, as_of, query_type, timeline)
            tables = self.executor.map(_read_slice, [(s, self.storage) for s in specs])
            return unify(tables, columns), schema

        (out, schema), _ = read_settled(self._timeline(), self._timeline, read)
        if out.num_columns == 0 and out.num_rows == 0 and schema is not None:
            out = schema.empty_table()
        out = conform(out, schema)
        if columns is not None:
            out = project(out, columns, schema)
        return self._without_unpopulated_meta(out)

    def read_batches(
        self,
        columns: Sequence[str] | None = None,
        filters: Sequence[Filter] | None = None,
        as_of: str | _dt.datetime | None = None,
        query_type: str = "snapshot",
    ) -> pa.RecordBatchReader:
        """Like :meth:`read`, but streams one file slice at a time: for tables larger than memory."""
        columns = requested_columns(columns)
        # Planned against the timeline as it stands once the files are listed (a clean in between
        # would hide slices); a file the cleaner removes after that fails the batch that opens it.
        (specs, schema), _ = read_settled(
            self._timeline(),
            self._timeline,
            lambda timeline: self._plan_read(columns, filters, as_of, query_type, timeline),
        )
        footer_schemas = []
        for s in specs:
            if s.base_file_path:  # a MOR slice's log records have the base schema or a newer one
                with damaged_parquet(s.base_file_path), self.storage.open_input_file(s.base_file_path) as f:
                    footer_schemas.append(pq.read_schema(f))
        if footer_schemas:
            unified = pa.unify_schemas(footer_schemas, promote_options="permissive")
            if schema is not None:
                unified = conformed_schema(unified, schema)
        else:
            unified = schema or pa.schema([])
        if columns is not None:
            # A column no file read holds yet (added to the schema later) comes as nulls.
            known = [unified] + ([schema] if schema is not None else [])
            unified = pa.schema(
                [
                    next(k.field(c) for k in known if c in k.names).with_nullable(True)
                    for c in dict.fromkeys(columns)
                    if any(c in k.names for k in known)
                ]
            )
        unified = unified.remove_metadata()
        if not self.config.populate_meta_fields:
            unified = pa.schema([f for f in unified if f.name not in META_COLUMNS])
        tables = (_read_slice(s, self.storage) for s in specs)
        return pa.RecordBatchReader.from_batches(unified, iter_batches(tables, unified))

    # ---- incremental reads -----------------------------------------------------------------

    def read_incremental(
        self,
        start: str | _dt.datetime | None = None,
        end: str | _dt.datetime | None = None,
        columns: Sequence[str] | None = None,
        filters: Sequence[Filter] | None = None,
        include_deletes: bool = False,
    ) -> pa.Table:
        """The records changed by the instants completed in ``(start, end]``, each with the
        ``_hoodie_commit_time`` of the instant that wrote it (always part of the output).

        The range is over requested times in table version 6 and over completion times in
        version 8. ``start=None`` reads from the beginning, ``end=None`` up to the latest commit.
        Only the file groups the range's commits wrote are read, so the cost follows the change.

        ``include_deletes=True`` adds a boolean ``_hoodie_is_deleted`` column: ``false`` on
        changed rows, ``true`` on one row per key deleted in the range (and not written again
        after): the key's last row image, stamped with the deleting instant's commit time.
        Every key appears at most once, so a downstream copy that held the table as of
        ``start`` equals the table as of ``end`` after upserting the changed rows and deleting
        the deleted keys (by ``_hoodie_partition_path`` and ``_hoodie_record_key``); the output
        can also be upserted as is into a Hudi table, which reads the marker as a delete.
        With ``columns``, the meta columns naming the key are kept too.

        When the range reaches before the active timeline of a table whose older instants
        were archived, raises InstantNotFoundError naming the earliest instant still available;
        with the table option ``hoodie.datasource.read.incr.fallback.fulltablescan.enable=true``
        the range is read from the latest snapshot instead, filtered by commit time (a record
        overwritten later is then seen only as its latest version, a deleted one not at all, and
        ``include_deletes`` is refused).

        In table version 6, a range holding a write that is still pending (requested before
        a later write completed) raises CommitConflictError, as Hudi's default
        ``hoodie.read.timeline.holes.resolution.policy=FAIL`` does: its records would belong to
        the range once it completes, and a consumer whose checkpoint moved past it would miss
        them. :meth:`stream` waits for such a write instead.
        """
        return read_settled(
            self._timeline(),
            self._timeline,
            lambda timeline: self._read_incremental(timeline, start, end, columns, filters, include_deletes),
        )[0]

    def _read_incremental(
        self,
        timeline: Timeline,
        start: str | _dt.datetime | None,
        end: str | _dt.datetime | None,
        columns: Sequence[str] | None,
        filters: Sequence[Filter] | None,
        include_deletes: bool,
    ) -> pa.Table:
        check_start_not_undone(timeline, normalize_bound(start, "start", timeline.local_clock))
        return read_changes(
            self.storage,
            timeline,
            self.executor,
            self._schema(timeline),
            start,
            end,
            requested_columns(columns),
            filters,
            include_deletes,
            fallback_full_scan=self.write_config.get(wc.INCR_FALLBACK_FULL_SCAN),
        )

    def stream(
        self,
        start: str | _dt.datetime | None = None,
        poll_interval: float = 1.0,
        max_polls: int | None = None,
        columns: Sequence[str] | None = None,
        filters: Sequence[Filter] | None = None,
        include_deletes: bool = False,
        timeout: float | None = None,
    ) -> ChangeStream:
        """Follows the table: yields a :class:`~shoal.read.stream.Change` for every data instant
        completed after ``start``, in commit order, with its changes (as
        :meth:`read_incremental`) and a ``checkpoint``.

        Store ``change.checkpoint`` after processing a change and pass it back as ``start`` to
        resume exactly after it. While nothing is new the timeline is polled every
        ``poll_interval`` seconds; the iterator ends after ``max_polls`` polls or ``timeout``
        seconds (never, when both are None).
        """
        return ChangeStream(
            self,
            start,
            poll_interval=poll_interval,
            max_polls=max_polls,
            timeout=timeout,
            columns=columns,
            filters=filters,
            include_deletes=include_deletes,
        )

    def _plan_read(
        self,
        columns: Sequence[str] | None,
        filters: Sequence[Filter] | None,
        as_of: str | _dt.datetime | None,
        query_type: str,
        timeline: Timeline | None = None,
    ) -> tuple[list[Any], pa.Schema | None]:
        qt = query_type.lower().replace("-", "_")
        if qt not in ("snapshot", "read_optimized"):
            raise InvalidArgumentError(f"unknown query type {query_type!r}")
        columns = requested_columns(columns)
        timeline = self._timeline() if timeline is None else timeline
        instant = _resolve_as_of(timeline, as_of)
        if instant is not None:
            check_no_pending_write(timeline, None, instant, "time travel")
        view = FileSystemView(self.storage, timeline, instant)
        if instant is not None and not is_latest_view(timeline, instant):
            # A read as of the past needs the slices of then: they must not have been cleaned.
            ensure_retained(timeline, view, instant)
        schema = self._schema(timeline)
        check_columns(columns, schema)
        check_filters(filters, schema)
        partitions = prune_partitions(
            view.partition_paths,
            filters,
            self.config.partition_fields,
            self.config.hive_style_partitioning,
            schema,
            config=self.config,
        )
        slices = [s for p in partitions for s in view.latest_file_slices(p)]
        merge = self.config.table_type == TableType.MERGE_ON_READ and qt == "snapshot"
        # A read whose filters pin record keys skips the base files that hold none of them.
        admitted = bases_admitting(self.storage, slices, filters, self.keygen, schema)
        if admitted is not None:
            slices = [
                s if keep else without_base(s)
                for s, keep in zip(slices, admitted, strict=True)
                if keep or (merge and s.log_files)
            ]
        base_slices = [s for s in slices if not (merge and s.log_files)]
        specs: list[Any] = plan_slices(self.storage.base_uri, base_slices, columns, filters)
        if merge:
            completed = [
                i.requested_time
                for i in timeline.completed_data_instants()
                if instant is None or i.requested_time <= instant
            ]
            event_time = self.config.merge_ordering == tc.MergeOrdering.EVENT_TIME
            specs += [
                MorSliceSpec.of_slice(
                    self.storage.base_uri,
                    s,
                    tuple(completed),
                    self.config.precombine_field,
                    event_time,
                    max_instant=instant,
                    columns=tuple(columns) if columns is not None else None,
                    filters=tuple(tuple(f) for f in filters or ()),
                    size=s.total_size(),
                )
                for s in slices
                if s.log_files
            ]
        return specs, schema

    def _without_unpopulated_meta(self, table: pa.Table) -> pa.Table:
        """Tables written with ``hoodie.populate.meta.fields=false`` hold only nulls in the meta
        columns (when present at all); like hudi-rs, leave them out."""
        if self.config.populate_meta_fields:
            return table
        return table.select([c for c in table.column_names if c not in META_COLUMNS])

    def _schema(self, timeline: Timeline) -> pa.Schema | None:
        avro = timeline.latest_schema() or self.config.create_schema
        if not avro:
            return None
        data = _native.avro_to_arrow_schema(avro)
        meta = [pa.field(n, pa.string()) for n in META_COLUMNS]
        return pa.schema(meta + [f for f in data if f.name not in META_COLUMNS])

    def schema(self) -> pa.Schema | None:
        """The Arrow schema of the table (meta columns first), or None before the first write."""
        return self._schema(self._timeline())

    def __repr__(self) -> str:
        return f"Table({self.path!r}, name={self.name!r}, type={self.table_type})"


def _table_keygen(config: TableConfig, options: Mapping[str, Any]) -> KeyGenerator:
    return key_generator_from_properties(keygen_properties(config.as_dict(), options))


def _read_slice(spec: SliceReadSpec | MorSliceSpec, storage: Storage) -> pa.Table:
    if isinstance(spec, MorSliceSpec):
        return without_file_metadata(read_mor_slice(spec, storage))
    return without_file_metadata(read_base_slice(spec, storage))


def _merge_ordering(value: str | None, ordering_field: str | None) -> tc.MergeOrdering:
    if value is None:
        return tc.MergeOrdering.EVENT_TIME if ordering_field else tc.MergeOrdering.COMMIT_TIME
    try:
        mode = tc.MergeOrdering(value.upper())
    except ValueError:
        raise InvalidOptionError(f"unknown merge ordering {value!r}") from None
    if mode == tc.MergeOrdering.EVENT_TIME and not ordering_field:
        raise InvalidOptionError("EVENT_TIME_ORDERING needs an ordering_field")
    return mode


def _resolve_as_of(timeline: Timeline, as_of: str | _dt.datetime | None) -> str | None:
    # A datetime is read on the table's timeline clock (hoodie.table.timeline.timezone).
    digits = normalize_bound(as_of, "as_of", timeline.local_clock)
    if digits is None:
        return None
    first = timeline.first_instant_time()
    if first is not None and digits < first and timeline.last_completed_data_instant() is not None:
        completed = timeline.completed_data_instants()
        if digits < completed[0].requested_time:
            raise InstantNotFoundError(
                f"as_of {as_of} is before the earliest instant on the timeline "
                f"({completed[0].requested_time})"
            )
    return digits
