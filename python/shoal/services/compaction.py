"""Compaction of merge-on-read tables (DESIGN §3.3; HUDI_FORMAT §2.3, §8.1, §9.2 step 5).

**Schedule.** When the trigger strategy says a compaction is due (or when forced), a new
instant T gets a plan: one operation per latest file slice that has log files, except file
groups already planned by a pending compaction or clustering. The plan is Hudi's Avro
``HoodieCompactionPlan`` (version 2: file names relative to the partition), saved as
``T.compaction.requested``. As in Hudi, T must be later than every pending write and every
completed or pending-compaction instant.

**Execute.** ``T.compaction.inflight`` (empty), then one task per operation: the slice's base
file and logs merged (blocks of instants completed before T) into a new base file
``<fileId>_<token>_<T>.parquet``, then ``T.commit`` with ``compacted: true`` and
``operationType: COMPACT``. An inflight compaction found at the next attempt failed: its files
are rolled back from the markers and the same plan runs again.

**Writes during a pending compaction.** Readers merge the empty slice T with the one before it.
Updates of a planned file group go to new log files of slice T (named with T), which end up on
top of the compacted base file. Deletes rewrite the merged slice at the write's own instant W > T
(shoal never writes delete blocks, see tasks/mor_append.py): slice W then supersedes whatever
the compaction produces for that file group, so nothing is lost either way. Java readers merge
slice T's logs with the previous slice while T is pending; hudi-rs 0.5.0 reads only v6 log files
named with a completed instant, so it shows those updates once the compaction commits.

**Concurrency.** Within a process, writes and compaction scheduling take turns, and so do
compaction runners (timeline/lock.py). A write that did not see a compaction scheduled meanwhile
(by another process) and changed a file group it plans is rolled back before it commits
(CommitConflictError). Execution may run in any thread or process while writers write.
"""

from __future__ import annotations

import datetime as _dt
import enum
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from shoal import _native
from shoal.config.table_config import MergeOrdering, TableConfig, TableType
from shoal.config.write_config import (
    BLOOM_DYNAMIC_MAX_ENTRIES,
    BLOOM_FILTER_TYPE,
    BLOOM_FPP,
    BLOOM_NUM_ENTRIES,
    COMPACT_INLINE,
    COMPACT_MAX_DELTA_COMMITS,
    COMPACT_MAX_DELTA_SECONDS,
    COMPACT_SCHEDULE_INLINE,
    COMPACT_TRIGGER_STRATEGY,
    PARQUET_BLOCK_SIZE,
    PARQUET_COMPRESSION,
    PARQUET_MAX_FILE_SIZE,
    PARQUET_PAGE_SIZE,
    WriteConfig,
)
from shoal.errors import (
    CommitConflictError,
    CorruptTableError,
    InstantNotFoundError,
    InvalidArgumentError,
    UnsupportedError,
)
from shoal.executor.base import Executor
from shoal.executor.local import LocalExecutor
from shoal.fs.markers import delete_markers, reconcile_against_markers
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice, FileSystemView
from shoal.schemas import load_schema
from shoal.services.rollback import rollback_inflight_compaction, rollback_instant
from shoal.tasks.compact import CompactionTaskSpec, run_compaction_task
from shoal.timeline.commit_metadata import CommitMetadata, WriteStat
from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.instant_time import parse_instant
from shoal.timeline.lock import COMPACTION, WRITE, table_lock
from shoal.timeline.timeline import DATA_ACTIONS, Timeline
from shoal.write.base_file import BaseFileOptions
from shoal.write.concurrency import Concurrency, check_still_pending, heartbeat_stopped_after

log = logging.getLogger(__name__)

PLAN_SCHEMA = "HoodieCompactionPlan.v8.writer"
# Version 2: operations name files relative to their partition (version 1 held full paths).
PLAN_VERSION = 2
OPERATION_TYPE = "COMPACT"

# Metrics Hudi's CompactionStrategy.captureMetrics records per operation.
TOTAL_LOG_FILES = "TOTAL_LOG_FILES"
TOTAL_LOG_FILES_SIZE = "TOTAL_LOG_FILES_SIZE"
TOTAL_IO_READ_MB = "TOTAL_IO_READ_MB"
TOTAL_IO_WRITE_MB = "TOTAL_IO_WRITE_MB"
TOTAL_IO_MB = "TOTAL_IO_MB"
_MB = 1024 * 1024

Clock = Callable[[], _dt.datetime]
_COMMIT_TIMELINE = (Action.COMPACTION, Action.COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING)


class TriggerStrategy(str, enum.Enum):
    """``hoodie.compact.inline.trigger.strategy`` (Hudi's ``CompactionTriggerStrategy``)."""

    NUM_COMMITS = "NUM_COMMITS"
    TIME_ELAPSED = "TIME_ELAPSED"
    NUM_OR_TIME = "NUM_OR_TIME"
    NUM_AND_TIME = "NUM_AND_TIME"


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact (``HoodieCompactionOperation``)."""

    partition_path: str
    file_id: str
    base_instant: str
    base_file: str | None  # base file name, None for a log-only slice
    log_files: tuple[str, ...]  # log file names, in Hudi's log order
    metrics: Mapping[str, float]

    def to_avro(self) -> dict:
        return {
            "baseInstantTime": self.base_instant,
            "deltaFilePaths": list(self.log_files),
            "dataFilePath": self.base_file,
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "metrics": dict(self.metrics),
            "bootstrapFilePath": None,
        }

    @classmethod
    def from_avro(cls, op: Mapping) -> CompactionOperation:
        if not op.get("fileId") or op.get("baseInstantTime") is None:
            raise CorruptTableError(f"compaction operation without fileId or baseInstantTime: {op}")
        return cls(
            partition_path=op.get("partitionPath") or "",
            file_id=op["fileId"],
            base_instant=op["baseInstantTime"],
            # Plan version 1 held full paths: keep the names.
            base_file=_name(op["dataFilePath"]) if op.get("dataFilePath") else None,
            log_files=tuple(_name(p) for p in op.get("deltaFilePaths") or []),
            metrics=dict(op.get("metrics") or {}),
        )


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def compaction_operations(timeline: Timeline, instant_time: str) -> list[CompactionOperation]:
    """The operations of the compaction plan at ``instant_time``."""
    return [CompactionOperation.from_avro(op) for op in timeline.compaction_plan(instant_time)]


def pending_compaction_file_groups(timeline: Timeline) -> dict[tuple[str, str], str]:
    """``(partition path, file id)`` -> instant of the pending compaction that plans it."""
    out: dict[tuple[str, str], str] = {}
    for inst in timeline.pending_compactions():
        for op in timeline.compaction_plan(inst.requested_time):
            out[(op.get("partitionPath") or "", op["fileId"])] = inst.requested_time
    return out


# ---- scheduling ----------------------------------------------------------------------------


def delta_commits_since_last_compaction(timeline: Timeline) -> tuple[int, str] | None:
    """How many delta commits (any state) came after the last completed compaction, and the
    instant the elapsed time counts from: that compaction, or else the first delta commit.
    None when there is no delta commit at all (Hudi's ``getDeltaCommitsSinceLatestCompaction``,
    whose "compactions" are the completed instants of its commit timeline: commits, which is
    how compactions complete, and replace commits)."""
    last = None
    for inst in timeline.instants:
        if inst.is_completed and inst.action in _COMMIT_TIMELINE:
            last = inst.requested_time
    deltas = [i.requested_time for i in timeline.instants if i.action == Action.DELTA_COMMIT]
    if last is not None:
        return sum(1 for t in deltas if t > last), last
    if not deltas:
        return None
    return len(deltas), deltas[0]


def compaction_due(timeline: Timeline, wc: WriteConfig, now: _dt.datetime) -> bool:
    """Whether the trigger strategy asks for a compaction at ``now``."""
    since = delta_commits_since_last_compaction(timeline)
    if since is None:
        return False
    count, reference = since
    enough_commits = count >= wc.get(COMPACT_MAX_DELTA_COMMITS)
    # Hudi compares whole seconds of the two instants, reading the reference on the table's
    # timeline clock (a naive datetime's timestamp() takes it as the machine's local time).
    moment = parse_instant(reference)
    if timeline.local_clock:
        moment = moment.replace(tzinfo=None)
    elapsed = int(now.timestamp()) - int(moment.timestamp())
    enough_time = elapsed >= wc.get(COMPACT_MAX_DELTA_SECONDS)
    strategy = TriggerStrategy(wc.get(COMPACT_TRIGGER_STRATEGY))
    if strategy == TriggerStrategy.NUM_COMMITS:
        return enough_commits
    if strategy == TriggerStrategy.TIME_ELAPSED:
        return enough_time
    if strategy == TriggerStrategy.NUM_OR_TIME:
        return enough_commits or enough_time
    return enough_commits and enough_time


def validate_compaction_instant(timeline: Timeline, instant_time: str) -> None:
    """Hudi's checks before a compaction plan is saved at ``instant_time``: every pending write
    is later (a compaction must not leave an earlier write's logs behind), and no completed or
    compaction instant is at or after it (the new base files must be the newest slices)."""
    if not (instant_time.isdigit() and len(instant_time) in (14, 17)):
        raise InvalidArgumentError(f"compaction instant must be yyyyMMddHHmmssSSS, got {instant_time!r}")
    pending = [i for i in timeline.pending_data_instants() if i.requested_time <= instant_time]
    if pending:
        raise CommitConflictError(
            f"earliest pending write {pending[0]} must be later than compaction instant {instant_time}: "
            "wait for it to commit (or for the next write to roll it back)"
        )
    conflicting = [
        i
        for i in timeline.instants
        if i.requested_time >= instant_time
        and i.action in DATA_ACTIONS
        and (i.is_completed or i.action == Action.COMPACTION)
    ]
    if conflicting:
        raise InvalidArgumentError(
            f"instants at or after compaction instant {instant_time}: {', '.join(map(str, conflicting))}"
        )


def plan_compaction(storage: Storage, timeline: Timeline, max_file_size: int) -> list[CompactionOperation]:
    """One operation per latest file slice with log files, largest logs first (Hudi's default
    LogFileSizeBasedCompactionStrategy order)."""
    view = FileSystemView(storage, timeline)
    excluded = set(pending_compaction_file_groups(timeline)) | _pending_clustering_file_groups(timeline)
    ops = [
        _operation(sl, max_file_size)
        for sl in view.latest_file_slices()
        if sl.log_files and (sl.partition_path, sl.file_id) not in excluded
    ]
    ops.sort(key=lambda op: (-op.metrics[TOTAL_LOG_FILES_SIZE], op.partition_path, op.file_id))
    return ops


def _operation(sl: FileSlice, max_file_size: int) -> CompactionOperation:
    logs = sorted(sl.log_files, key=lambda lf: lf.parsed.sort_key())
    log_size = sum(lf.size for lf in logs)
    base_size = sl.base_file.size if sl.base_file else 0
    read_mb = (base_size + log_size) // _MB
    write_mb = (sl.base_file.size if sl.base_file else max_file_size) // _MB
    return CompactionOperation(
        partition_path=sl.partition_path,
        file_id=sl.file_id,
        base_instant=sl.base_instant,
        base_file=sl.base_file.name if sl.base_file else None,
        log_files=tuple(lf.name for lf in logs),
        metrics={
            TOTAL_LOG_FILES: float(len(logs)),
            TOTAL_LOG_FILES_SIZE: float(log_size),
            TOTAL_IO_READ_MB: float(read_mb),
            TOTAL_IO_WRITE_MB: float(write_mb),
            TOTAL_IO_MB: float(read_mb + write_mb),
        },
    )


def _pending_clustering_file_groups(timeline: Timeline) -> set[tuple[str, str]]:
    """File groups a pending clustering (a replace commit with a clustering plan) will rewrite."""
    out: set[tuple[str, str]] = set()
    for inst in timeline.pending():
        if inst.action not in (Action.REPLACE_COMMIT, Action.CLUSTERING):
            continue
        try:
            data = timeline.read_instant(Instant(inst.requested_time, inst.action, State.REQUESTED))
        except FileNotFoundError:
            continue
        if not data:
            continue
        try:
            records = json.loads(_native.avro_container_decode(data))
        except ValueError as e:
            raise CorruptTableError(f"cannot decode {inst}: {e}") from e
        plan = (records[0] if records else {}).get("clusteringPlan") or {}
        for group in plan.get("inputGroups") or []:
            for sl in group.get("slices") or []:
                out.add((sl.get("partitionPath") or "", sl["fileId"]))
    return out


def schedule_compaction(
    storage: Storage,
    config: TableConfig,
    wc: WriteConfig,
    instant_time: str | None = None,
    force: bool = False,
    clock: Clock | None = None,
) -> str | None:
    """Saves a compaction plan and returns its instant; None when the trigger strategy says
    no (unless ``force``) or when no file slice has log files. ``instant_time`` defaults to a
    new instant; ``clock`` is what "now" means to the time-based strategies (by default the
    compaction instant itself, as in Hudi)."""
    _check_supported(config)
    # Under the write lock: a write of this process either sees the plan or completes before it.
    # Under optimistic concurrency the table's lock does the same for writers elsewhere.
    with table_lock(storage, WRITE), Concurrency(storage, wc).locked():
        timeline = Timeline.load(storage, config)
        t = instant_time if instant_time is not None else timeline.new_instant_time()
        validate_compaction_instant(timeline, t)
        now = clock() if clock is not None else parse_instant(t)
        if not force and not compaction_due(timeline, wc, now):
            return None
        ops = plan_compaction(storage, timeline, wc.get(PARQUET_MAX_FILE_SIZE))
        if not ops:
            return None
        plan = {
            "operations": [op.to_avro() for op in ops],
            "extraMetadata": None,
            "version": PLAN_VERSION,
            "strategy": None,
            "preserveHoodieMetadata": False,
            "missingSchedulePartitions": [],
        }
        content = _native.avro_container_encode(load_schema(PLAN_SCHEMA), json.dumps([plan]))
        timeline.create_requested(t, Action.COMPACTION, content)
        return t


# ---- execution -----------------------------------------------------------------------------


def run_compaction(
    storage: Storage,
    config: TableConfig,
    wc: WriteConfig,
    instant_time: str,
    executor: Executor | None = None,
) -> CommitMetadata:
    """Executes the compaction plan at ``instant_time`` and returns the committed metadata. A
    compaction left inflight by a failed runner is rolled back and run again; one that already
    completed returns its metadata. Safe to call from any thread or process while writers
    write; within a process, runners of a table take turns. Under optimistic concurrency a
    run keeps a heartbeat, and one still beating elsewhere is not taken for a failed attempt:
    CommitConflictError instead."""
    _check_supported(config)
    executor = executor or LocalExecutor()
    with table_lock(storage, COMPACTION):
        timeline = Timeline.load(storage, config)
        inst = timeline.get(instant_time)
        if inst is None or inst.action != Action.COMPACTION:
            raise InstantNotFoundError(f"no compaction instant {instant_time}")
        if inst.is_completed:
            return timeline.commit_metadata(inst)
        concurrency = Concurrency(storage, wc)
        if inst.state == State.INFLIGHT:
            if concurrency.is_running(instant_time):
                raise CommitConflictError(
                    f"compaction {instant_time} is running in another process (its heartbeat is fresh)"
                )
            rollback_inflight_compaction(storage, timeline, inst)
            timeline = timeline.reload()
        ops = compaction_operations(timeline, instant_time)
        heartbeat = concurrency.start_heartbeat(instant_time)
        with heartbeat_stopped_after(heartbeat):
            requested = Instant(instant_time, Action.COMPACTION, State.REQUESTED)
            inflight = timeline.transition_to_inflight(requested)
            done = timeline.completed_data_instants()
            completed = tuple(i.requested_time for i in done if i.requested_time < instant_time)
            options = base_file_options(config, wc)
            # The table's schema as of the compaction: the new base files are written in it, and
            # the commit records it (Hudi's compactor writes with the latest commit's schema).
            schema = timeline.latest_schema()
            specs = [
                CompactionTaskSpec(
                    base_uri=storage.base_uri,
                    instant=instant_time,
                    task_id=task_id,
                    partition_path=op.partition_path,
                    file_id=op.file_id,
                    base_instant=op.base_instant,
                    base_file=op.base_file,
                    log_files=op.log_files,
                    log_files_size=int(op.metrics.get(TOTAL_LOG_FILES_SIZE, 0)),
                    completed_instants=completed,
                    ordering_field=config.precombine_field,
                    event_time_ordering=config.merge_ordering == MergeOrdering.EVENT_TIME,
                    options=options,
                    table_schema=schema,
                )
                for task_id, op in enumerate(ops)
            ]
            stats = executor.map(run_compaction_task, [(spec, storage) for spec in specs])
            metadata = CommitMetadata(compacted=True, operation_type=OPERATION_TYPE)
            for stat in stats:
                if stat is not None:
                    metadata.add_stat(stat)
            if schema:
                metadata.extra_metadata["schema"] = schema
            with concurrency.locked():
                # A runner elsewhere that took this one for a failed attempt rolled it back.
                check_still_pending(timeline.reload(), inflight)
                # Attempts of a retried task (Spark) leave files of their own: only reported ones stay.
                written = [s.path for s in stats if s is not None and s.path]
                reconcile_against_markers(storage, instant_time, written)
                timeline.complete(inflight, metadata.to_json())
            delete_markers(storage, instant_time)
            return metadata


def run_pending_compactions(
    storage: Storage, config: TableConfig, wc: WriteConfig, executor: Executor | None = None
) -> list[str]:
    """Runs every pending compaction, oldest first (failed attempts included); returns them."""
    done = []
    for inst in Timeline.load(storage, config).pending_compactions():
        run_compaction(storage, config, wc, inst.requested_time, executor)
        done.append(inst.requested_time)
    return done


def compact(
    storage: Storage,
    config: TableConfig,
    wc: WriteConfig,
    executor: Executor | None = None,
    force: bool = True,
    clock: Clock | None = None,
) -> list[str]:
    """Runs pending compactions, then schedules a new one and runs it; returns the instants
    compacted, oldest first."""
    done = run_pending_compactions(storage, config, wc, executor)
    t = schedule_compaction(storage, config, wc, force=force, clock=clock)
    if t is not None:
        run_compaction(storage, config, wc, t, executor)
        done.append(t)
    return done


def base_file_options(config: TableConfig, wc: WriteConfig) -> BaseFileOptions:
    return BaseFileOptions(
        table_name=config.table_name,
        compression=wc.get(PARQUET_COMPRESSION),
        bloom_type=wc.get(BLOOM_FILTER_TYPE),
        bloom_num_entries=wc.get(BLOOM_NUM_ENTRIES),
        bloom_fpp=wc.get(BLOOM_FPP),
        bloom_max_entries=wc.get(BLOOM_DYNAMIC_MAX_ENTRIES),
        row_group_bytes=wc.get(PARQUET_BLOCK_SIZE),
        page_size=wc.get(PARQUET_PAGE_SIZE),
    )


def _check_supported(config: TableConfig) -> None:
    if config.table_type != TableType.MERGE_ON_READ:
        raise InvalidArgumentError("compaction applies to MERGE_ON_READ tables only")
    config.check_writable("compact")
    if not config.populate_meta_fields:
        raise UnsupportedError("compaction of tables written with hoodie.populate.meta.fields=false")


# ---- hooks of the write path ---------------------------------------------------------------


def slice_for_new_logs(existing: FileSlice, pending: Mapping[tuple[str, str], str]) -> FileSlice:
    """The slice a log append to ``existing``'s file group goes to. A file group that a pending
    compaction T plans (and has no slice newer than T) takes new logs in the empty slice T
    opened: named with T, holding only the logs already written there, no base file yet."""
    t = pending.get((existing.partition_path, existing.file_id))
    if t is None or t <= existing.base_instant:
        return existing
    logs = [lf for lf in existing.log_files if lf.instant_time == t]
    return FileSlice(existing.partition_path, existing.file_id, t, None, logs)


def abort_on_compaction_conflict(
    storage: Storage,
    config: TableConfig,
    planned: Timeline,
    now: Timeline,
    inflight: Instant,
    stats: Sequence[WriteStat],
) -> None:
    """Before a write commits: if a compaction that the write's planning did not see (one
    scheduled by another process meanwhile) plans a file group the write changed, the write's
    logs could sit below the compacted base file and be lost. Roll the write back and raise
    CommitConflictError (Hudi's optimistic-concurrency check for compaction vs. writers).
    ``planned``: the timeline the write planned on; ``now``: the one it commits on."""
    known = {i.requested_time for i in planned.instants if i.action == Action.COMPACTION}
    new = [i for i in now.instants if i.action == Action.COMPACTION and i.requested_time not in known]
    if not new:
        return
    touched = {(s.partitionPath or "", s.fileId) for s in stats}
    for inst in new:
        planned_groups = {
            (op.get("partitionPath") or "", op["fileId"]) for op in now.compaction_plan(inst.requested_time)
        }
        overlap = sorted(touched & planned_groups)
        if overlap:
            rollback_instant(storage, config, now, inflight)
            raise CommitConflictError(
                f"compaction {inst.requested_time} was scheduled while write {inflight.requested_time} "
                f"ran and plans file groups it changed ({', '.join(f for _, f in overlap[:3])}); "
                "the write was rolled back"
            )


def run_inline_compaction(
    storage: Storage,
    config: TableConfig,
    wc: WriteConfig,
    executor: Executor | None = None,
    clock: Clock | None = None,
) -> list[str]:
    """After a delta commit: with ``hoodie.compact.inline``, run pending compactions, then
    schedule and run one if the trigger strategy says so; with ``hoodie.compact.schedule.inline``
    only schedule it. Returns the instants compacted or scheduled. The write has committed when
    this runs; if it fails, the compaction stays pending and the next run completes it."""
    if config.table_type != TableType.MERGE_ON_READ:
        return []
    try:
        if wc.get(COMPACT_INLINE):
            return compact(storage, config, wc, executor, force=False, clock=clock)
        if wc.get(COMPACT_SCHEDULE_INLINE):
            t = schedule_compaction(storage, config, wc, clock=clock)
            return [t] if t is not None else []
    except CommitConflictError as exc:
        if not wc.optimistic_concurrency:
            raise
        # Other writers' pending writes, or a compaction another one runs: a later commit
        # schedules (or finishes) it. The write itself has committed.
        log.warning("inline compaction skipped: %s", exc)
    return []
