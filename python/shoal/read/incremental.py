"""Incremental reads: the records that the instants completed in ``(start, end]`` changed
(DESIGN §3.2, HUDI_FORMAT §9.6).

The range selects completed data instants by requested time in table version 6 and by completion
time in version 8 (as Hudi 1.x and hudi-rs do). Planning reads the commit metadata of those
instants only: their write stats name the file groups they touched, and only the latest slice of
each of those groups (as of ``end``) is read, its rows kept when ``_hoodie_commit_time`` is one of
the range's instants. So the cost follows the change, not the table:

* copy-on-write: the slice's base file, filtered by commit time;
* merge-on-read: the base file only when it was itself written in the range (a delete rewrite,
  a compaction), plus the log blocks of instants in the range. Tables that order records by event
  time merge the whole slice instead: a log record of the range can lose against an older version
  (a late event), and it is a change only if it wins.

Deletes (``include_deletes=True``) are derived per instant from the write stats that report
``numDeletes``: the file group's rows just before the instant, minus the keys it holds right after
it. A file group replaced in the range (insert overwrite) loses all of its keys. A key deleted in
the range and written again later in it is a change, not a delete. Each deleted key comes back as
its last row image before the delete, with ``_hoodie_commit_time`` set to the deleting instant and
``_hoodie_is_deleted = true`` (changed rows carry ``false``): Hudi's own delete marker, so the
output can be upserted into another Hudi table as is, or applied by key
(``_hoodie_partition_path``, ``_hoodie_record_key``) anywhere else. Every key appears at most once.

Rows come in commit order; within one instant its deleted keys come before its changed rows, so
that a consumer keyed by record key alone applying them in order keeps a key that a global index
moved to another partition (a delete in the old partition and a change in the new one).

Over the whole schema, the delete marker sits where the table's schema has ``_hoodie_is_deleted``
as a data column (a CDC table whose writes carry it); otherwise right after the columns of the
latest schema a data instant up to ``end`` recorded, ahead of columns added later. The place
depends on the timeline alone, not on which files the range reads, so Spark's reads
(:mod:`shoal.spark.read`) declare the same order.

A range that reaches before the active timeline of a table whose older instants were archived
raises InstantNotFoundError naming the earliest instant still available. A range starting at the
latest archived instant itself (the checkpoint of a consumer that read it before archival moved
it) misses nothing and is read as usual. A range ending in the past whose file slices the cleaner
removed raises CleanedInstantError. With ``hoodie.datasource.read.incr.fallback.fulltablescan.enable``
either range is read from the latest snapshot of every file group instead, filtered by
``_hoodie_commit_time`` in ``(start, end]``: Hudi's fallback, taken on both conditions as in Hudi's
``IncrementalRelation``, with its limits (a record overwritten later is seen only as its latest
version, and only if that version is in the range; a deleted one not at all; no deletes).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.config.table_config import MergeOrdering, TableType
from shoal.errors import (
    CleanedInstantError,
    CommitConflictError,
    InstantNotFoundError,
    InvalidArgumentError,
    UnsupportedError,
)
from shoal.executor.base import Executor
from shoal.fs.naming import parse_log_file_name
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice, FileSystemView
from shoal.read.filters import Filter, check_filters
from shoal.read.mor import MorSliceSpec, read_mor_slice
from shoal.read.projection import check_columns, conform, project, without_file_metadata
from shoal.read.pruning import prune_partitions
from shoal.read.snapshot import SliceReadSpec, read_base_slice, unify
from shoal.services.clean import ensure_retained
from shoal.timeline.archived import has_archived_instants
from shoal.timeline.instant import Action, Instant
from shoal.timeline.instant_time import instant_of
from shoal.timeline.timeline import Timeline
from shoal.write.schema import IS_DELETED_COLUMN, META_COLUMNS

COMMIT_TIME = "_hoodie_commit_time"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
# Columns that identify a change; always part of the output when deletes are included.
IDENTITY_COLUMNS = (COMMIT_TIME, RECORD_KEY, PARTITION_PATH)
# Operations that rewrite records without changing them: never a source of deletes.
_REWRITES = frozenset({"COMPACT", "LOG_COMPACT", "CLUSTER"})
_REWRITE_ACTIONS = frozenset({Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING})

ReadSpec = SliceReadSpec | MorSliceSpec


# ---- the instant range ------------------------------------------------------------------------


def instant_key(instant_time: str) -> str:
    """An instant time in comparable form: 14-digit legacy times mean the end of their second,
    as Java's ``fixInstantTimeCompatibility`` has it."""
    return instant_time + "999" if len(instant_time) == 14 else instant_time


def range_key(instant: Instant, by_completion_time: bool) -> str:
    """Where an instant sits on the incremental axis: its completion time in table version 8,
    its requested time before."""
    if by_completion_time and instant.completion_time:
        return instant_key(instant.completion_time)
    return instant_key(instant.requested_time)


def normalize_bound(value: str | int | _dt.date | None, name: str, local: bool = False) -> str | None:
    """A range bound as a comparable instant time, on the table's timeline clock (UTC, or with
    ``local`` the machine's local time, as ``hoodie.table.timeline.timezone`` says): an aware
    datetime is converted to that clock, a naive one is a time on it already (as Hudi reads
    ``yyyy-MM-dd HH:mm:ss``); a date is its midnight; digits are ``yyyyMMddHHmmss[SSS]``
    (separators allowed), where a date or a time short of its milliseconds stands for its first
    millisecond (``yyyy-MM-dd`` is ``yyyyMMdd000000000``, as Hudi's ``formatQueryInstant`` has it)
    except whole seconds, which mean their last one (Java's ``fixInstantTimeCompatibility``);
    values shorter than a date, such as ``"0"``, are earlier than every instant.

    Raises:
        InvalidArgumentError: anything else, or digits that name no moment (a 13th month, a
            25th hour): compared as text they would silently select a wrong range.
    """
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return instant_of(value, local)
    if isinstance(value, _dt.date):
        value = value.isoformat()
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidArgumentError(
            f"{name} must be an instant time like 20250101120000000 or a datetime, got {value!r}"
        )
    text = str(value).strip()
    digits = "".join(ch for ch in text if ch not in "-: T.")
    if not digits.isdigit() or len(digits) > 17 or not _names_a_moment(digits):
        raise InvalidArgumentError(f"{name} must be an instant time like 20250101120000000, got {value!r}")
    if len(digits) >= 8 and len(digits) != 14:
        # Compared as text, "20250301" would sort before the commit at its very midnight.
        digits = digits.ljust(17, "0")
    return instant_key(digits)


def _names_a_moment(digits: str) -> bool:
    """Whether ``digits`` (a prefix of ``yyyyMMddHHmmssSSS``) is a valid date and time. Values
    shorter than a date, and Hudi's special instants of year 0 (``00000000000000`` and the
    bootstrap instants), stand for "before everything" and are not checked."""
    if len(digits) < 8 or digits.startswith("0000"):
        return True
    try:
        _dt.datetime.strptime(digits.ljust(17, "0")[:14], "%Y%m%d%H%M%S")
    except ValueError:
        return False
    return True


def predecessor(instant_time: str) -> str:
    """The latest time before ``instant_time`` (1 ms earlier; instants are at least 1 ms apart)."""
    t = instant_key(instant_time)
    return str(int(t) - 1).zfill(len(t))


@dataclass(frozen=True)
class InstantRange:
    """The completed data instants in ``(start, end]``, in the order of the range's axis."""

    start: str | None
    end: str | None
    instants: tuple[Instant, ...]
    by_completion_time: bool
    # Requested-time bound of the file-system view as of ``end`` (None: nothing completed yet).
    view_as_of: str | None
    # The range reaches archived instants and is read from the latest snapshot (see
    # ``plan_full_scan``).
    full_scan: bool = False

    @property
    def commit_times(self) -> tuple[str, ...]:
        """The requested times of the instants: the ``_hoodie_commit_time`` of their records."""
        return tuple(i.requested_time for i in self.instants)


def pending_writes_in(timeline: Timeline, lo: str | None, hi: str) -> list[str]:
    """Requested times of the writes (commits, delta commits, replace commits) still pending
    in ``(lo, hi]`` (comparable instant times, ``lo=None`` for the beginning)."""
    return sorted(
        i.requested_time
        for i in timeline.pending_data_instants()
        if (lo is None or instant_key(i.requested_time) > lo) and instant_key(i.requested_time) <= hi
    )


def check_no_pending_write(timeline: Timeline, lo: str | None, hi: str, what: str) -> None:
    """Raises CommitConflictError when a write is still pending in ``(lo, hi]``: once it
    completes, its records belong there, so an answer given now would change, and a consumer
    that moved its checkpoint past it would never see them. Hudi refuses such reads alike
    (``hoodie.read.timeline.holes.resolution.policy=FAIL``, its default; ``validateTimestampAsOf``
    for time travel). Incremental ranges of table version 8 need no such check: they place
    instants by completion time, and a write completing later lands after every checkpoint."""
    pending = pending_writes_in(timeline, lo, hi)
    if pending:
        raise CommitConflictError(
            f"{what} up to {hi} holds write {pending[0]}, which has not completed: its records "
            "would be missed, and the answer would change once it completes. Read up to "
            f"{predecessor(pending[0])} (Table.stream waits for it), or retry once it completed "
            "(a failed write is rolled back by the next write)"
        )


def is_latest_view(timeline: Timeline, as_of: str) -> bool:
    """Whether a view as of ``as_of`` (a requested time) is the table's latest one: no data
    instant completed after it. The cleaner never removes a latest file slice, so such a view
    needs no check against cleaned files."""
    return all(i.requested_time <= as_of for i in timeline.completed_data_instants())


def _resumes_at_archive_end(timeline: Timeline, lo: str | None, by_completion: bool) -> bool:
    """Whether ``lo`` is the position of the latest archived data instant: the checkpoint of a
    consumer that read up to it before archival moved it. Every instant after it is then still
    active, so the range misses nothing (a v8 instant archived without its completion time is
    not placed, and does not count as such a position)."""
    archive = timeline.archived()
    if lo is None or archive is None:
        return False
    done = archive.completed_data_instants()
    if not done or (by_completion and any(not i.completion_time for i in done)):
        return False
    return max(range_key(i, by_completion) for i in done) == lo


def resolve_range(
    storage: Storage,
    timeline: Timeline,
    start: str | _dt.datetime | None,
    end: str | _dt.datetime | None,
    fallback_full_scan: bool = False,
) -> InstantRange:
    """The instants of ``(start, end]``; ``start=None`` reads from the beginning, ``end=None`` up
    to the latest completed instant.

    When the range reaches before the active timeline and older instants were archived, their
    write stats are no longer at hand: this raises InstantNotFoundError naming the earliest
    instant still available, or with ``fallback_full_scan`` returns a range marked
    ``full_scan`` (Hudi's ``hoodie.datasource.read.incr.fallback.fulltablescan.enable``).
    """
    by_completion = timeline.config.table_version >= 8
    lo = normalize_bound(start, "start", timeline.local_clock)
    hi = normalize_bound(end, "end", timeline.local_clock)
    completed = sorted(
        timeline.completed_data_instants(), key=lambda i: (range_key(i, by_completion), i.requested_time)
    )
    # Archival moves the oldest data instants off the timeline; every archived one is older
    # than the first active one (by requested time, the only order archival keeps).
    first = timeline.first_data_instant_time()
    archived = (
        first is not None
        and (lo is None or lo < predecessor(first))
        and has_archived_instants(storage, timeline.config)
        and not _resumes_at_archive_end(timeline, lo, by_completion)
    )
    if first is not None and archived and not fallback_full_scan:
        shown = "the beginning" if lo is None else lo
        raise InstantNotFoundError(
            f"incremental range from {shown} reaches before the active timeline: instants before "
            f"{first} were archived. The earliest instant still available is {first}; read from "
            f"start={predecessor(first)} or later, or set "
            "hoodie.datasource.read.incr.fallback.fulltablescan.enable=true to read the range "
            "from the latest snapshot"
        )
    if hi is None:
        hi = range_key(completed[-1], by_completion) if completed else None
    if hi is None or (lo is not None and lo >= hi):
        return InstantRange(lo, hi, (), by_completion, None)
    if not by_completion:
        check_no_pending_write(timeline, lo, hi, "incremental range")
    chosen = tuple(
        i
        for i in completed
        if (lo is None or range_key(i, by_completion) > lo) and range_key(i, by_completion) <= hi
    )
    visible = [i.requested_time for i in completed if range_key(i, by_completion) <= hi]
    return InstantRange(lo, hi, chosen, by_completion, max(visible) if visible else None, archived)


# ---- planning ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeleteProbeSpec:
    """The keys one file group lost at one instant, as plain data: its rows just before the
    instant (``before``) minus the keys it holds right after (``after``; None when the instant
    replaced the file group)."""

    partition_path: str
    file_id: str
    commit_time: str
    before: SliceReadSpec | MorSliceSpec
    after: SliceReadSpec | MorSliceSpec | None


@dataclass
class IncrementalPlan:
    """What an incremental read touches: one read per changed file slice, one probe per file
    group and deleting instant."""

    range: InstantRange
    changes: list[ReadSpec] = field(default_factory=list)
    deletes: list[DeleteProbeSpec] = field(default_factory=list)


@dataclass
class _Touched:
    """What the range's write stats say about one file group."""

    log_written: bool = False
    # (instant, prevCommit) of every write that reported deletes.
    deletes: list[tuple[Instant, str]] = field(default_factory=list)
    replaced_at: list[Instant] = field(default_factory=list)


class _Planner:
    def __init__(
        self,
        storage: Storage,
        timeline: Timeline,
        rng: InstantRange,
        columns: Sequence[str] | None,
        filters: Sequence[Filter] | None,
        schema: pa.Schema | None,
        fallback_full_scan: bool = False,
    ) -> None:
        self.storage = storage
        self.fallback_full_scan = fallback_full_scan
        self.timeline = timeline
        self.config = timeline.config
        self.rng = rng
        self.columns = tuple(columns) if columns is not None else None
        self.filters = tuple(tuple(f) for f in filters or ())
        self.schema = schema
        self.mor = self.config.table_type == TableType.MERGE_ON_READ
        self.event_time = self.config.merge_ordering == MergeOrdering.EVENT_TIME
        self._completed = sorted(i.requested_time for i in timeline.completed_data_instants())

    def plan(self, include_deletes: bool) -> IncrementalPlan:
        plan = IncrementalPlan(self.rng)
        if not self.rng.instants:
            return plan
        touched = self._touched()
        partitions = prune_partitions(
            sorted({p for p, _ in touched}),
            self.filters,
            self.config.partition_fields,
            self.config.hive_style_partitioning,
            self.schema,
            config=self.config,
        )
        kept = set(partitions)
        touched = {k: v for k, v in touched.items() if k[0] in kept}
        if not touched:
            return plan
        view = FileSystemView(self.storage, self.timeline, self.rng.view_as_of, partitions=partitions)
        if self.rng.view_as_of is not None and not is_latest_view(self.timeline, self.rng.view_as_of):
            # A range ending in the past reads the slices as of its end: they must still exist.
            try:
                ensure_retained(self.timeline, view, self.rng.view_as_of)
            except CleanedInstantError:
                # Hudi falls back to the full table scan when files of the range were deleted.
                if not self.fallback_full_scan:
                    raise
                return self.plan_full_scan(include_deletes)
        latest = {(s.partition_path, s.file_id): s for s in view.latest_file_slices()}
        commit_filter: Filter = (COMMIT_TIME, "in", list(self.rng.commit_times))
        for key in sorted(touched):
            sl = latest.get(key)
            if sl is not None:
                spec = self._change_spec(sl, touched[key], commit_filter)
                if spec is not None:
                    plan.changes.append(spec)
        if include_deletes:
            plan.deletes = self._delete_probes(touched)
        return plan

    def plan_full_scan(self, include_deletes: bool) -> IncrementalPlan:
        """The fallback for a range that reaches archived instants, whose write stats are gone, or
        whose file slices were cleaned:
        every latest file slice of the table (as a snapshot read would merge it), keeping the
        rows whose ``_hoodie_commit_time`` is in ``(start, end]``.

        What it cannot see, as in Hudi's full-table-scan fallback: a record written in the
        range and overwritten later comes back only as its latest version, and only if that
        version was written in the range too; a record deleted later is not returned at all;
        and deletes cannot be derived.
        """
        if include_deletes:
            raise UnsupportedError(
                "include_deletes needs the write stats and file slices of every instant in the "
                "range, and some were archived or cleaned: the full-table-scan fallback cannot "
                "derive deletes"
            )
        plan = IncrementalPlan(self.rng)
        if self.rng.end is None:
            return plan
        view = FileSystemView(self.storage, self.timeline)
        partitions = prune_partitions(
            view.partition_paths,
            self.filters,
            self.config.partition_fields,
            self.config.hive_style_partitioning,
            self.schema,
            config=self.config,
        )
        bounds: tuple[Filter, ...] = ((COMMIT_TIME, "<=", self.rng.end),)
        if self.rng.start is not None:
            bounds = ((COMMIT_TIME, ">", self.rng.start), *bounds)
        filters = (*self.filters, *bounds)
        plan.changes = [
            self._snapshot_spec(sl, None, self.columns, filters)
            for p in partitions
            for sl in view.latest_file_slices(p)
        ]
        return plan

    def _touched(self) -> dict[tuple[str, str], _Touched]:
        out: dict[tuple[str, str], _Touched] = {}
        for inst in self.rng.instants:
            meta = self.timeline.commit_metadata(inst)
            rewrite = inst.action in _REWRITE_ACTIONS or meta.operation_type in _REWRITES
            for partition, stats in meta.partition_to_write_stats.items():
                for stat in stats:
                    if not stat.fileId:
                        continue
                    t = out.setdefault((partition, stat.fileId), _Touched())
                    name = (stat.path or "").rsplit("/", 1)[-1]
                    if parse_log_file_name(name) is not None:
                        t.log_written = True
                    if stat.numDeletes and not rewrite:
                        t.deletes.append((inst, stat.prevCommit))
            if not rewrite:
                for partition, ids in meta.replaced_file_ids().items():
                    for fid in ids:
                        out.setdefault((partition, fid), _Touched()).replaced_at.append(inst)
        return out

    def _change_spec(self, sl: FileSlice, touched: _Touched, commit_filter: Filter) -> ReadSpec | None:
        commit_times = set(self.rng.commit_times)
        base_in_range = sl.base_file is not None and sl.base_file.instant_time in commit_times
        filters = (*self.filters, commit_filter)
        if self.mor and touched.log_written and sl.log_files:
            if self.event_time and not base_in_range:
                # A late event in the range may lose against an older version: merge the whole
                # slice as of the end of the range, then keep what the range wrote.
                return self._snapshot_spec(sl, self.rng.view_as_of, self.columns, filters)
            times = sorted(commit_times)
            base = sl.base_file if base_in_range else None
            return MorSliceSpec(
                self.storage.base_uri,
                sl.partition_path,
                sl.file_id,
                base.path if base else None,
                tuple(lf.path for lf in sl.log_files),
                tuple(times),
                times[-1],
                self.config.precombine_field,
                self.event_time,
                self.columns,
                filters,
                instant_range=(predecessor(times[0]), times[-1]),
                size=sum(lf.size for lf in sl.log_files) + (base.size if base else 0),
            )
        if not base_in_range or sl.base_file is None:
            return None
        return SliceReadSpec(
            self.storage.base_uri,
            sl.partition_path,
            sl.file_id,
            sl.base_file.path,
            (),
            self.columns,
            filters,
            sl.base_file.size,
        )

    def _snapshot_spec(
        self,
        sl: FileSlice,
        as_of: str | None,
        columns: tuple[str, ...] | None,
        filters: tuple[Filter, ...],
    ) -> ReadSpec:
        """The slice read as a snapshot as of ``as_of`` (a requested time)."""
        base = sl.base_file.path if sl.base_file else None
        if self.mor and sl.log_files:
            completed = tuple(t for t in self._completed if as_of is None or t <= as_of)
            return MorSliceSpec.of_slice(
                self.storage.base_uri,
                sl,
                completed,
                self.config.precombine_field,
                self.event_time,
                max_instant=as_of,
                columns=columns,
                filters=filters,
                size=sl.total_size(),
            )
        size = sl.base_file.size if sl.base_file else 0
        return SliceReadSpec(
            self.storage.base_uri, sl.partition_path, sl.file_id, base, (), columns, filters, size
        )

    def _delete_probes(self, touched: dict[tuple[str, str], _Touched]) -> list[DeleteProbeSpec]:
        # (instant, replaced?) -> the file groups it deleted from, with their prevCommit.
        events: dict[tuple[str, bool], list[tuple[str, str, str]]] = {}
        for (partition, fid), t in touched.items():
            for inst, prev in t.deletes:
                events.setdefault((inst.requested_time, False), []).append((partition, fid, prev))
            for inst in t.replaced_at:
                events.setdefault((inst.requested_time, True), []).append((partition, fid, "null"))
        before_columns = None
        if self.columns is not None:
            before_columns = tuple(dict.fromkeys([*IDENTITY_COLUMNS, *self.columns]))
        probes: list[DeleteProbeSpec] = []
        for (instant, replaced), groups in sorted(events.items()):
            partitions = sorted({p for p, _, _ in groups})
            before_view = self._slices(predecessor(instant), partitions)
            after_view = {} if replaced else self._slices(instant, partitions)
            for partition, fid, prev in groups:
                before = before_view.get((partition, fid))
                expected = prev not in ("null", instant, "")
                if expected and (before is None or before.base_instant != prev):
                    raise InstantNotFoundError(
                        f"the version of file group {fid} in {partition!r} written at {prev}, which "
                        f"instant {instant} changed, is no longer in storage (cleaned): the keys it "
                        "deleted cannot be derived; read without include_deletes"
                    )
                if before is None:
                    continue
                after = after_view.get((partition, fid))
                probes.append(
                    DeleteProbeSpec(
                        partition,
                        fid,
                        instant,
                        self._snapshot_spec(before, predecessor(instant), before_columns, self.filters),
                        None if after is None else self._snapshot_spec(after, instant, (RECORD_KEY,), ()),
                    )
                )
        return probes

    def _slices(self, as_of: str, partitions: list[str]) -> dict[tuple[str, str], FileSlice]:
        view = FileSystemView(self.storage, self.timeline, as_of, partitions=partitions)
        return {(s.partition_path, s.file_id): s for s in view.latest_file_slices()}


def plan_incremental(
    storage: Storage,
    timeline: Timeline,
    rng: InstantRange,
    columns: Sequence[str] | None = None,
    filters: Sequence[Filter] | None = None,
    include_deletes: bool = False,
    schema: pa.Schema | None = None,
    fallback_full_scan: bool = False,
) -> IncrementalPlan:
    """Plans the reads of an incremental query over ``rng`` (see the module docs);
    ``fallback_full_scan`` also reads a range whose slices were cleaned from the latest snapshot."""
    planner = _Planner(storage, timeline, rng, columns, filters, schema, fallback_full_scan)
    if rng.full_scan:
        return planner.plan_full_scan(include_deletes)
    return planner.plan(include_deletes)


# ---- tasks ------------------------------------------------------------------------------------


def read_slice(spec: ReadSpec, storage: Storage) -> pa.Table:
    """Reads one planned slice (a base file, or a base file merged with log blocks)."""
    if isinstance(spec, MorSliceSpec):
        return without_file_metadata(read_mor_slice(spec, storage))
    return without_file_metadata(read_base_slice(spec, storage))


def read_deleted(spec: DeleteProbeSpec, storage: Storage) -> pa.Table:
    """The rows a file group lost at ``spec.commit_time``, stamped with that instant."""
    before = read_slice(spec.before, storage)
    if before.num_rows == 0 or RECORD_KEY not in before.column_names:
        return pa.table({})
    if spec.after is not None:
        after = read_slice(spec.after, storage)
        if after.num_rows:
            kept = pc.is_in(before.column(RECORD_KEY), value_set=after.column(RECORD_KEY).combine_chunks())
            before = before.filter(pc.invert(kept))
    stamp = pa.repeat(pa.scalar(spec.commit_time, pa.string()), before.num_rows)
    return _set_column(before, COMMIT_TIME, stamp)


# ---- the read ---------------------------------------------------------------------------------


def read_incremental(
    storage: Storage,
    timeline: Timeline,
    executor: Executor,
    schema: pa.Schema | None,
    start: str | _dt.datetime | None = None,
    end: str | _dt.datetime | None = None,
    columns: Sequence[str] | None = None,
    filters: Sequence[Filter] | None = None,
    include_deletes: bool = False,
    fallback_full_scan: bool = False,
) -> pa.Table:
    """The changes of ``(start, end]`` as one table (see the module docs and
    :meth:`shoal.Table.read_incremental`)."""
    plan = plan_read(
        storage, timeline, schema, start, end, columns, filters, include_deletes, fallback_full_scan
    )
    changed = executor.map(read_slice, [(s, storage) for s in plan.changes])
    deleted = executor.map(read_deleted, [(d, storage) for d in plan.deletes]) if include_deletes else []
    written = written_columns(timeline, start, end) if include_deletes and columns is None else None
    return finish_read(changed, deleted, schema, columns, include_deletes, written)


def plan_read(
    storage: Storage,
    timeline: Timeline,
    schema: pa.Schema | None,
    start: str | _dt.datetime | None,
    end: str | _dt.datetime | None,
    columns: Sequence[str] | None,
    filters: Sequence[Filter] | None,
    include_deletes: bool,
    fallback_full_scan: bool = False,
) -> IncrementalPlan:
    """The tasks of an incremental read: ``read_slice`` per change, ``read_deleted`` per probe
    (the planner every executor shares). ``fallback_full_scan`` answers a range that reaches
    archived instants from the latest snapshot instead of raising (see
    ``_Planner.plan_full_scan`` for what that cannot see), as it does one whose file slices were
    cleaned."""
    if not timeline.config.populate_meta_fields:
        raise UnsupportedError(
            "incremental reads need _hoodie_commit_time, and this table was written with "
            "hoodie.populate.meta.fields=false"
        )
    check_columns(columns, schema, [IS_DELETED_COLUMN] if include_deletes else [])
    check_filters(filters, schema)
    rng = resolve_range(storage, timeline, start, end, fallback_full_scan)
    read_columns = _read_columns(columns, include_deletes)
    return plan_incremental(
        storage, timeline, rng, read_columns, filters, include_deletes, schema, fallback_full_scan
    )


def finish_read(
    changed: Sequence[pa.Table],
    deleted: Sequence[pa.Table],
    schema: pa.Schema | None,
    columns: Sequence[str] | None,
    include_deletes: bool,
    written: Collection[str] | None = None,
) -> pa.Table:
    """The output of an incremental read from its tasks' tables. Deletes are settled against the
    changes by (partition path, record key), so the tasks of each partition path can also be
    finished on their own. ``written``: the range's :func:`written_columns`, which place the
    delete marker (see :func:`marker_position`)."""
    out = unify(changed, None)
    if include_deletes:
        out = _with_deletes(out, unify(deleted, None))
    return _finish(out, schema, _read_columns(columns, include_deletes), include_deletes, written)


def _read_columns(columns: Sequence[str] | None, include_deletes: bool) -> list[str] | None:
    if columns is None:
        return None
    if not include_deletes:
        return list(dict.fromkeys([COMMIT_TIME, *columns]))
    return list(dict.fromkeys([*IDENTITY_COLUMNS, *(c for c in columns if c != IS_DELETED_COLUMN)]))


def _with_deletes(changed: pa.Table, deleted: pa.Table) -> pa.Table:
    """Changed rows marked ``_hoodie_is_deleted = false`` and the deleted keys that are still gone
    at the end of the range (their latest delete only) marked ``true``."""
    if changed.num_columns:
        changed = _set_column(changed, IS_DELETED_COLUMN, pa.repeat(pa.scalar(False), changed.num_rows))
    if deleted.num_rows == 0:
        return changed
    ident = _identity(deleted)
    if changed.num_rows:
        deleted = deleted.filter(pc.invert(pc.is_in(ident, value_set=_identity(changed))))
        ident = _identity(deleted)
    if deleted.num_rows:
        # Keep the latest delete of each key (the probes are in instant order).
        idx = pa.table({"k": ident, "i": pa.array(range(deleted.num_rows), pa.int64())})
        last = idx.group_by("k").aggregate([("i", "max")]).column("i_max")
        deleted = deleted.take(pc.sort_indices(last))
    deleted = _set_column(deleted, IS_DELETED_COLUMN, pa.repeat(pa.scalar(True), deleted.num_rows))
    if not changed.num_columns:
        return deleted
    return pa.concat_tables([changed, deleted], promote_options="permissive")


def _identity(table: pa.Table) -> pa.Array:
    parts = table.column(PARTITION_PATH).combine_chunks().cast(pa.string())
    keys = table.column(RECORD_KEY).combine_chunks().cast(pa.string())
    return pc.binary_join_element_wise(pc.fill_null(parts, ""), keys, "\x00")


def _set_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, values)
    return table.append_column(name, values)


def written_columns(
    timeline: Timeline, start: str | _dt.datetime | None, end: str | _dt.datetime | None
) -> list[str] | None:
    """The columns the files of an incremental read of ``(start, end]`` hold: the meta columns
    and those of the latest schema a data instant up to ``end`` recorded (columns added later
    are in none of them). None when the range holds no instant."""
    by_completion = timeline.config.table_version >= 8
    lo, hi = (
        normalize_bound(start, "start", timeline.local_clock),
        normalize_bound(end, "end", timeline.local_clock),
    )
    completed = timeline.completed_data_instants()
    visible = [i for i in completed if hi is None or range_key(i, by_completion) <= hi]
    if not any(lo is None or range_key(i, by_completion) > lo for i in visible):
        return None
    avro = timeline.latest_schema(visible)
    return [*META_COLUMNS, *_native.avro_to_arrow_schema(avro).names] if avro else None


def marker_position(names: Sequence[str], schema: pa.Schema | None, written: Collection[str] | None) -> int:
    """Where the delete marker goes among ``names`` (the other columns of an incremental read
    of the whole schema, in order): where ``schema`` (the table's) has ``_hoodie_is_deleted`` as
    a data column written by the range, else right after the ``written`` columns (every column
    when None: the range holds no instant). One rule for the local read and Spark's."""
    if (
        schema is not None
        and IS_DELETED_COLUMN in schema.names
        and (written is None or IS_DELETED_COLUMN in written)
    ):
        ahead = set(schema.names[: schema.names.index(IS_DELETED_COLUMN)])
        return max((i + 1 for i, n in enumerate(names) if n in ahead), default=0)
    held = set(names) if written is None else set(written)
    return max((i + 1 for i, n in enumerate(names) if n in held), default=0)


def _finish(
    table: pa.Table,
    schema: pa.Schema | None,
    columns: Sequence[str] | None,
    include_deletes: bool,
    written: Collection[str] | None = None,
) -> pa.Table:
    if table.num_columns == 0:
        if schema is None:
            return table
        fields = list(schema)
        if include_deletes:
            fields = [f for f in fields if f.name != IS_DELETED_COLUMN]
            fields.append(pa.field(IS_DELETED_COLUMN, pa.bool_()))
        table = pa.schema(fields).empty_table()
    table = conform(table, schema)
    marked = include_deletes and IS_DELETED_COLUMN in table.column_names
    if COMMIT_TIME in table.column_names and table.num_rows > 1:
        keys = [(COMMIT_TIME, "ascending")]
        if marked:
            # An instant's deletes first: a key it moved between partitions ends up written.
            keys.append((IS_DELETED_COLUMN, "descending"))
        table = table.take(pc.sort_indices(table, sort_keys=keys))
    if marked and columns is None:
        # The tasks' tables append the marker after the columns their files hold, which vary
        # with the files a range reads: its place follows the timeline instead.
        names = [n for n in table.column_names if n != IS_DELETED_COLUMN]
        names.insert(marker_position(names, schema, written), IS_DELETED_COLUMN)
        table = table.select(names)
    if columns is not None:
        names = list(columns) + ([IS_DELETED_COLUMN] if include_deletes else [])
        table = project(table, names, schema)
    return table
