"""The cleaner (DESIGN §3.3; HUDI_FORMAT §2.3, §2.5, §8.2): removing the file slices that no
retained commit, pending compaction or savepoint needs any more.

**Policies** (``hoodie.cleaner.policy``, Hudi's ``CleanPlanner``):

* ``KEEP_LATEST_COMMITS``: the earliest commit to retain (ECTR) is the N-th latest completed
  commit (``hoodie.cleaner.commits.retained``; delta commits, replace commits and compactions
  count), moved back before the earliest pending write or compaction. Every file slice a read as
  of an instant >= ECTR needs stays: the slices based at or after ECTR, the last slice before it,
  and the latest one. Nothing is cleaned until there are more than N commits.
* ``KEEP_LATEST_BY_HOURS``: the same, with ECTR the first commit at or after now minus
  ``hoodie.cleaner.hours.retained`` hours, on the table's timeline clock
  (``hoodie.table.timeline.timezone``: UTC, or the machine's local time, Hudi's default).
* ``KEEP_LATEST_FILE_VERSIONS``: the N latest slices of each file group
  (``hoodie.cleaner.fileversions.retained``); no time-travel guarantee.

Never removed: the latest slice of a file group, a slice a pending compaction reads or writes
(based at or after the slice its plan names), a slice holding a file a savepoint lists. A file
group replaced by a replace commit older than ECTR goes whole (savepointed slices excepted).
Files of pending writes are not in any committed slice and are left to rollback.

**Emptied partitions** (Hudi's ``partitionsToBeDeleted``): a partition whose every file group a
replace commit replaced (``delete_partition``, an overwrite that left it nothing) loses its
directory once this clean deletes the last of its data files: no live file group, no file of a
pending write, savepoint or pending compaction, nothing else in it. Readers that list
directories (hudi-rs, Hudi without the metadata table) then stop listing it. The clean checks
again before deleting the directory: a file that appeared since the plan keeps it.

**Instants.** ``T.clean.requested`` holds the plan (Avro ``HoodieCleanerPlan`` version 2: full
paths per partition), ``T.clean.inflight`` the same bytes, ``T.clean`` the Avro
``HoodieCleanMetadata`` version 2 (per partition the names planned, deleted and not deleted,
ECTR and the last completed commit). No instant is created when there is nothing to delete. The
deletes of a partition are one task of the executor. A clean left pending by a crash is run
again, from its plan, by the next clean (deleting is idempotent; as in Hudi, a file already gone
counts as a failed delete).

**Incremental planning** (``hoodie.cleaner.incremental.mode``): after a clean, only the
partitions written by the commits between that clean's ECTR and the new one (and those of
savepoints deleted since) can hold newly cleanable slices, so only they are listed.

**Time travel.** :func:`ensure_retained` raises :class:`CleanedInstantError` when a read as of an
instant needs a slice a clean removed (or a pending clean is removing): it never returns rows
from a wrong slice.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import enum
import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from shoal import _native
from shoal.config.table_config import TableConfig
from shoal.config.write_config import (
    CLEAN_AUTOMATIC,
    CLEAN_MAX_COMMITS,
    CLEANER_COMMITS_RETAINED,
    CLEANER_FILE_VERSIONS_RETAINED,
    CLEANER_HOURS_RETAINED,
    CLEANER_INCREMENTAL_MODE,
    CLEANER_POLICY,
    WriteConfig,
)
from shoal.errors import CleanedInstantError, CommitConflictError, InstantNotFoundError
from shoal.executor.base import Executor
from shoal.executor.local import LocalExecutor
from shoal.fs.naming import PARTITION_METADATA_FILE, parse_base_file_name, parse_log_file_name
from shoal.fs.storage import Storage
from shoal.fs.view import FileGroup, FileSlice, FileSystemView
from shoal.schemas import load_schema
from shoal.services.savepoint import decode_record, savepointed_files, savepointed_instants
from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.instant_time import instant_hours_before
from shoal.timeline.lock import WRITE, table_lock
from shoal.timeline.timeline import DATA_ACTIONS, Timeline
from shoal.write.concurrency import Concurrency

log = logging.getLogger(__name__)

PLAN_SCHEMA = "HoodieCleanerPlan.v6.writer"
METADATA_SCHEMA = "HoodieCleanMetadata.v6.writer"
# Version 2 plans give full paths (``filePathsToBeDeletedPerPartition``); version 1 gave names.
PLAN_VERSION = 2
METADATA_VERSION = 2
# The plan's and metadata's extraMetadata key listing the savepoints seen at planning, so that
# an incremental plan can tell which savepoints were deleted since (Hudi's CleanPlanner).
SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"

Clock = Callable[[], _dt.datetime]
GroupId = tuple[str, str]  # (partition path, file id)
_REPLACE_ACTIONS = (Action.REPLACE_COMMIT, Action.CLUSTERING)


class CleaningPolicy(str, enum.Enum):
    """``hoodie.cleaner.policy`` (Hudi's ``HoodieCleaningPolicy``)."""

    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
    KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"


@dataclass(frozen=True)
class CleanPlan:
    """What one clean deletes: paths relative to the table, per partition."""

    policy: CleaningPolicy
    earliest_commit_to_retain: Instant | None
    last_completed_commit: str
    files_by_partition: Mapping[str, list[str]]
    savepoints: tuple[str, ...]
    # Partitions whose directory goes once their files are deleted (see the module's text).
    partitions_to_delete: tuple[str, ...] = ()

    def to_avro(self, storage: Storage) -> dict:
        ectr = self.earliest_commit_to_retain
        return {
            "earliestInstantToRetain": None
            if ectr is None
            else {"timestamp": ectr.requested_time, "action": _action_name(ectr), "state": ectr.state.name},
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "policy": self.policy.value,
            "filesToBeDeletedPerPartition": {},
            "version": PLAN_VERSION,
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": storage.full_path(f), "isBootstrapBaseFile": False} for f in files]
                for p, files in sorted(self.files_by_partition.items())
            },
            "partitionsToBeDeleted": list(self.partitions_to_delete),
            "extraMetadata": {SAVEPOINTED_TIMESTAMPS: ",".join(self.savepoints)} if self.savepoints else {},
        }


@dataclass(frozen=True)
class CleanTaskSpec:
    """The deletes of one partition, as plain data."""

    base_uri: str
    partition_path: str
    file_paths: tuple[str, ...]  # relative to the base path


# ---- the earliest commit to retain ----------------------------------------------------------


def earliest_commit_to_retain(
    timeline: Timeline,
    policy: CleaningPolicy,
    commits_retained: int,
    hours_retained: int,
    now: _dt.datetime,
) -> Instant | None:
    """ECTR (Hudi's ``CleanerUtils.getEarliestCommitToRetain``); None when the policy retains
    everything (too few commits) or does not use one (file versions)."""
    completed = timeline.completed_data_instants()
    if policy == CleaningPolicy.KEEP_LATEST_COMMITS:
        if len(completed) <= commits_retained:
            return None
        nth = completed[len(completed) - commits_retained]
        pending = [i for i in timeline.instants if not i.is_completed and i.action in DATA_ACTIONS]
        if pending and nth.sort_key() > pending[0].sort_key():
            # A pending write or compaction reads the slices of the commits before it.
            before = [i for i in completed if i.requested_time < pending[0].requested_time]
            return before[-1] if before else None
        return nth
    if policy == CleaningPolicy.KEEP_LATEST_BY_HOURS:
        # On the table's timeline clock: on a table on local time, a cutoff in UTC would be off by
        # the zone's offset (and clean commits still inside the window, west of Greenwich).
        cutoff = instant_hours_before(now, hours_retained, timeline.local_clock)
        return next((i for i in completed if i.requested_time >= cutoff), None)
    return None


def latest_clean_earliest_retained(timeline: Timeline) -> str | None:
    """The ECTR recorded by the latest completed clean (None without one, or when that clean
    used a policy without ECTR). Archival keeps every commit from it on."""
    for inst in reversed(_completed_cleans(timeline)):
        return clean_metadata(timeline, inst.requested_time).get("earliestCommitToRetain") or None
    return None


# ---- planning -----------------------------------------------------------------------------


def plan_clean(storage: Storage, timeline: Timeline, wc: WriteConfig, now: _dt.datetime) -> CleanPlan | None:
    """The clean the policy asks for now; None when there is nothing to delete."""
    policy = CleaningPolicy(wc.get(CLEANER_POLICY))
    ectr = earliest_commit_to_retain(
        timeline, policy, wc.get(CLEANER_COMMITS_RETAINED), wc.get(CLEANER_HOURS_RETAINED), now
    )
    if policy != CleaningPolicy.KEEP_LATEST_FILE_VERSIONS and ectr is None:
        return None
    savepoints = tuple(savepointed_instants(timeline))
    pinned = savepointed_files(timeline, savepoints)
    partitions = None
    if policy != CleaningPolicy.KEEP_LATEST_FILE_VERSIONS and wc.get(CLEANER_INCREMENTAL_MODE):
        assert ectr is not None
        partitions = _partitions_since_last_clean(timeline, ectr.requested_time, savepoints)
        if partitions is not None and not partitions:
            return None
    view = FileSystemView(storage, timeline, partitions=partitions)
    compacting = _pending_compaction_bases(timeline)
    files: dict[str, list[str]] = defaultdict(list)
    for fg in view.all_file_groups():
        slices = [s for s in reversed(fg.ordered_slices()) if s.base_file is not None or s.log_files]
        if policy == CleaningPolicy.KEEP_LATEST_FILE_VERSIONS:
            doomed = slices_to_clean_by_versions(
                slices, wc.get(CLEANER_FILE_VERSIONS_RETAINED), compacting.get(_gid(fg)), pinned
            )
        else:
            assert ectr is not None
            doomed = slices_to_clean_by_commits(slices, ectr.requested_time, compacting.get(_gid(fg)), pinned)
        for sl in doomed:
            files[fg.partition_path].extend(_slice_paths(sl))
    replaced_before = None if ectr is None else ectr.requested_time
    live = {fg.partition_path for fg in view.all_file_groups()}
    emptied = []
    for partition, paths, whole in _replaced_files(
        storage, timeline, view.partition_paths, replaced_before, pinned, compacting
    ):
        files[partition].extend(paths)
        if whole and partition and partition not in live:
            emptied.append(partition)
    if not files:
        return None
    last = timeline.last_completed_data_instant()
    return CleanPlan(
        policy, ectr, last.requested_time if last else "", dict(files), savepoints, tuple(sorted(emptied))
    )


def slices_to_clean_by_commits(
    slices: list[FileSlice], ectr: str, compaction_base: str | None, pinned: set[str]
) -> list[FileSlice]:
    """KEEP_LATEST_COMMITS / BY_HOURS for one file group (``slices`` newest first): the slices
    based before ECTR, except the last of them (reads as of ECTR use it), the latest slice,
    those a pending compaction based at ``compaction_base`` needs, and savepointed ones."""
    if not slices:
        return []
    latest = slices[0].base_instant
    before = next((s.base_instant for s in slices if s.base_instant < ectr), None)
    return [
        s
        for s in slices
        if s.base_instant < ectr
        and s.base_instant not in (latest, before)
        and not _needed_by_compaction(s, compaction_base)
        and not _is_pinned(s, pinned)
    ]


def slices_to_clean_by_versions(
    slices: list[FileSlice], versions: int, compaction_base: str | None, pinned: set[str]
) -> list[FileSlice]:
    """KEEP_LATEST_FILE_VERSIONS for one file group (``slices`` newest first): all but the
    ``versions`` latest, where the slice a pending compaction reads counts as one of them."""
    candidates = [s for s in slices if not _needed_by_compaction(s, compaction_base)]
    keep = versions - (1 if compaction_base is not None else 0)
    return [s for s in candidates[max(keep, 0) :] if not _is_pinned(s, pinned)]


def _needed_by_compaction(sl: FileSlice, compaction_base: str | None) -> bool:
    return compaction_base is not None and sl.base_instant >= compaction_base


def _is_pinned(sl: FileSlice, pinned: set[str]) -> bool:
    if sl.base_file is not None and sl.base_file.name in pinned:
        return True
    return any(lf.name in pinned for lf in sl.log_files)


def _slice_paths(sl: FileSlice) -> list[str]:
    paths = [sl.base_file.path] if sl.base_file is not None else []
    return paths + [lf.path for lf in sl.log_files]


def _gid(fg: FileGroup) -> GroupId:
    return (fg.partition_path, fg.file_id)


def _pending_compaction_bases(timeline: Timeline) -> dict[GroupId, str]:
    """File group -> base instant of the slice its pending compaction plan reads."""
    out: dict[GroupId, str] = {}
    for inst in timeline.pending_compactions():
        for op in timeline.compaction_plan(inst.requested_time):
            out[(op.get("partitionPath") or "", op["fileId"])] = op.get("baseInstantTime") or ""
    return out


def _replaced_groups(timeline: Timeline, before: str | None) -> dict[GroupId, str]:
    """File groups replaced by completed replace commits (older than ``before`` when given),
    with the time of the replace commit."""
    out: dict[GroupId, str] = {}
    for inst in timeline.completed_data_instants():
        if inst.action not in _REPLACE_ACTIONS or (before is not None and inst.requested_time >= before):
            continue
        for partition, ids in timeline.commit_metadata(inst).replaced_file_ids().items():
            out.update({(partition, fid): inst.requested_time for fid in ids})
    return out


def _replaced_files(
    storage: Storage,
    timeline: Timeline,
    partitions: Iterable[str],
    before: str | None,
    pinned: set[str],
    compacting: Mapping[GroupId, str],
) -> list[tuple[str, list[str], bool]]:
    """Per partition, the files of replaced file groups, slice by slice, savepointed slices and
    those a pending compaction needs excepted (a compaction planned before the replace still
    reads its slice), and whether they are all the partition holds but its partition metadata."""
    replaced = _replaced_groups(timeline, before)
    if not replaced:
        return []
    out = []
    for partition in partitions:
        if not any(p == partition for p, _ in replaced):
            continue
        slices: dict[tuple[str, str], list[str]] = defaultdict(list)
        listed = storage.list_files(partition)
        for f in listed:
            parsed = parse_base_file_name(f.name) or parse_log_file_name(f.name)
            if parsed is None or (partition, parsed.file_id) not in replaced:
                continue
            base = compacting.get((partition, parsed.file_id))
            if base is None or parsed.instant_time < base:
                slices[(parsed.file_id, parsed.instant_time)].append(f.name)
        paths = [
            f"{partition}/{name}" if partition else name
            for names in slices.values()
            if not pinned.intersection(names)
            for name in sorted(names)
        ]
        if paths:
            kept = {f.name for f in listed if not f.name.startswith(PARTITION_METADATA_FILE)}
            out.append((partition, paths, kept <= {_name(p) for p in paths}))
    return out


def _partitions_since_last_clean(
    timeline: Timeline, ectr: str, savepoints: tuple[str, ...]
) -> list[str] | None:
    """Incremental mode: the partitions that commits in [last clean's ECTR, ``ectr``) wrote;
    None when a full listing is needed: the window starts before the active timeline, or a
    savepoint was deleted since that clean (as in Hudi's ``isAnySavepointDeleted``). A savepoint
    pins the slices of every partition as of its commit, not only those its commit wrote, and a
    partition no later commit writes would keep them for good."""
    cleans = _completed_cleans(timeline)
    if not cleans:
        return None
    last = clean_metadata(timeline, cleans[-1].requested_time)
    previous = last.get("earliestCommitToRetain") or ""
    completed = timeline.completed_data_instants()
    if not previous or not completed or previous < completed[0].requested_time:
        return None  # the window starts before the active timeline: commits are missing
    seen = ((last.get("extraMetadata") or {}).get(SAVEPOINTED_TIMESTAMPS) or "").split(",")
    if set(filter(None, seen)) - set(savepoints):
        return None
    partitions: set[str] = set()
    for inst in completed:
        if previous <= inst.requested_time < ectr:
            partitions.update(_partitions_of(timeline, inst))
    return sorted(partitions)


def _partitions_of(timeline: Timeline, inst: Instant) -> set[str]:
    meta = timeline.commit_metadata(inst)
    return set(meta.partition_to_write_stats) | set(meta.replaced_file_ids())


# ---- scheduling and running ------------------------------------------------------------------


def _clean_due(timeline: Timeline, wc: WriteConfig) -> bool:
    """Whether an inline clean has anything to do on ``timeline``: a pending clean to finish,
    or ``hoodie.clean.max.commits`` commits since the last clean."""
    if any(i.action == Action.CLEAN for i in timeline.pending()):
        return True
    return commits_since_last_clean(timeline) >= wc.get(CLEAN_MAX_COMMITS)


def commits_since_last_clean(timeline: Timeline) -> int:
    """Completed commits after the last commit the latest clean saw (all of them before a
    first clean): what ``hoodie.clean.max.commits`` is compared with."""
    completed = timeline.completed_data_instants()
    cleans = _completed_cleans(timeline)
    if not cleans:
        return len(completed)
    seen = clean_metadata(timeline, cleans[-1].requested_time).get("lastCompletedCommitTimestamp") or ""
    return sum(1 for i in completed if i.requested_time > seen)


def schedule_clean(
    storage: Storage,
    config: TableConfig,
    wc: WriteConfig,
    force: bool = True,
    clock: Clock | None = None,
    known: Timeline | None = None,
) -> str | None:
    """Saves a clean plan and returns its instant; None when nothing is to be deleted, or (unless
    ``force``) when fewer than ``hoodie.clean.max.commits`` commits completed since the last
    clean. ``clock`` is "now" for KEEP_LATEST_BY_HOURS. ``known``: the table's current
    timeline, when the caller knows it (else it is listed)."""
    config.check_writable("clean")
    # Under optimistic concurrency the plan and its instant time are taken under the table's lock.
    with table_lock(storage, WRITE), Concurrency(storage, wc).locked():
        timeline = known if known is not None else Timeline.load(storage, config)
        if not force and commits_since_last_clean(timeline) < wc.get(CLEAN_MAX_COMMITS):
            return None
        now = clock() if clock is not None else _dt.datetime.now(_dt.timezone.utc)
        plan = plan_clean(storage, timeline, wc, now)
        if plan is None:
            return None
        t = timeline.new_instant_time()
        content = _native.avro_container_encode(load_schema(PLAN_SCHEMA), json.dumps([plan.to_avro(storage)]))
        timeline.create_requested(t, Action.CLEAN, content)
        return t


def run_clean(
    storage: Storage, config: TableConfig, instant_time: str, executor: Executor | None = None
) -> dict:
    """Executes the clean plan at ``instant_time`` (requested, or inflight after a crash) and
    returns the ``HoodieCleanMetadata``; a completed clean just returns its metadata. Several
    processes may run one plan at once: the first to complete it records what it deleted, and
    the others return that."""
    config.check_writable("clean")
    executor = executor or LocalExecutor()
    with table_lock(storage, WRITE):
        started = time.monotonic()
        timeline = Timeline.load(storage, config)
        inst = timeline.get(instant_time)
        if inst is None or inst.action != Action.CLEAN:
            raise InstantNotFoundError(f"no clean instant {instant_time}")
        if inst.is_completed:
            return clean_metadata(timeline, instant_time)
        requested = Instant(instant_time, Action.CLEAN, State.REQUESTED)
        content = timeline.read_instant(requested)
        plan = decode_record(content, f"clean plan {instant_time}")
        inflight = inst.with_state(State.INFLIGHT)
        if inst.state == State.REQUESTED:
            # Another process may run this plan too: deleting the planned files twice is
            # harmless, and whichever completes the clean first records it.
            with contextlib.suppress(CommitConflictError):
                timeline.transition_to_inflight(requested, content)
        # A savepoint made after planning pins its files: they are left alone.
        pinned = savepointed_files(timeline)
        planned = {
            p: [f for f in files if f.rsplit("/", 1)[-1] not in pinned]
            for p, files in plan_files(plan).items()
        }
        specs = [
            CleanTaskSpec(storage.base_uri, p, tuple(files)) for p, files in sorted(planned.items()) if files
        ]
        results = executor.map(run_clean_task, [(spec, storage) for spec in specs])
        ectr = plan.get("earliestInstantToRetain") or {}
        partition_metadata = {}
        for spec, (deleted, failed) in zip(specs, results, strict=True):
            partition_metadata[spec.partition_path] = {
                "partitionPath": spec.partition_path,
                "policy": plan.get("policy") or "",
                "deletePathPatterns": [_name(f) for f in spec.file_paths],
                "successDeleteFiles": deleted,
                "failedDeleteFiles": failed,
                "isPartitionDeleted": False,
            }
        for partition in plan.get("partitionsToBeDeleted") or []:
            if partition and delete_emptied_partition(storage, partition):
                entry = partition_metadata.setdefault(
                    partition,
                    {
                        "partitionPath": partition,
                        "policy": plan.get("policy") or "",
                        "deletePathPatterns": [],
                        "successDeleteFiles": [],
                        "failedDeleteFiles": [],
                    },
                )
                entry["isPartitionDeleted"] = True
        metadata = {
            "startCleanTime": instant_time,
            "timeTakenInMillis": int((time.monotonic() - started) * 1000),
            "totalFilesDeleted": sum(len(d) for d, _ in results),
            "earliestCommitToRetain": ectr.get("timestamp") or "",
            "lastCompletedCommitTimestamp": plan.get("lastCompletedCommitTimestamp") or "",
            "partitionMetadata": partition_metadata,
            "version": METADATA_VERSION,
            "bootstrapPartitionMetadata": {},
            "extraMetadata": plan.get("extraMetadata") or {},
        }
        try:
            timeline.complete(
                inflight, _native.avro_container_encode(load_schema(METADATA_SCHEMA), json.dumps([metadata]))
            )
        except CommitConflictError:
            # Another process completed this clean meanwhile: its metadata is the clean's.
            return clean_metadata(timeline.reload(), instant_time)
        return metadata


def run_clean_task(spec: CleanTaskSpec, storage: Storage | None = None) -> tuple[list[str], list[str]]:
    """Deletes the files of one partition; returns the names deleted and the names already gone
    (Hudi reports those as failed deletes). Any other error propagates, as in Hudi's cleaner:
    the clean stays pending and the next clean runs its plan again, rather than completing
    with the file left behind for good (a completed clean is never planned again)."""
    storage = storage or Storage(spec.base_uri)
    deleted, failed = [], []
    for path in spec.file_paths:
        try:
            storage.delete(path)
            deleted.append(_name(path))
        except FileNotFoundError:
            failed.append(_name(path))
    return deleted, failed


def delete_emptied_partition(storage: Storage, partition: str) -> bool:
    """Deletes ``partition``'s directory when it holds nothing but its partition metadata, and
    then its parent directories that are left empty; returns whether it did."""
    listed = storage.list_files(partition, recursive=True) if storage.is_dir(partition) else []
    if any(not f.name.startswith(PARTITION_METADATA_FILE) for f in listed):
        return False
    for f in listed:
        storage.delete(f.path, missing_ok=True)
    if not storage.remove_empty_dir(partition):
        return False  # an empty directory inside it: no reader lists it any more all the same
    parent = partition.rsplit("/", 1)[0] if "/" in partition else ""
    while parent and storage.remove_empty_dir(parent):
        parent = parent.rsplit("/", 1)[0] if "/" in parent else ""
    return True


def run_pending_cleans(
    storage: Storage, config: TableConfig, executor: Executor | None = None, known: Timeline | None = None
) -> list[str]:
    """Runs every clean left requested or inflight, oldest first; returns their instants.
    ``known``: the table's current timeline, when the caller knows it (else it is listed)."""
    with table_lock(storage, WRITE):
        timeline = known if known is not None else Timeline.load(storage, config)
        pending = [i for i in timeline.pending() if i.action == Action.CLEAN]
        for inst in pending:
            run_clean(storage, config, inst.requested_time, executor)
        return [i.requested_time for i in pending]


def clean(
    storage: Storage,
    config: TableConfig,
    wc: WriteConfig,
    executor: Executor | None = None,
    force: bool = True,
    clock: Clock | None = None,
    known: Timeline | None = None,
) -> list[str]:
    """Runs pending cleans, then plans a clean and runs it; returns the clean instants completed.
    ``known``: the table's current timeline, when the caller knows it (else it is listed)."""
    with table_lock(storage, WRITE):
        done = run_pending_cleans(storage, config, executor, known)
        t = schedule_clean(storage, config, wc, force=force, clock=clock, known=None if done else known)
        if t is not None:
            run_clean(storage, config, t, executor)
            done.append(t)
        return done


def run_inline_clean(
    storage: Storage,
    config: TableConfig,
    wc: WriteConfig,
    executor: Executor | None = None,
    known: Timeline | None = None,
) -> list[str]:
    """After a commit: with ``hoodie.clean.automatic``, clean when ``hoodie.clean.max.commits``
    commits completed since the last clean. The commit is complete when this runs; a clean that
    fails midway stays pending and the next clean finishes it. ``known``: the timeline as the
    commit left it. A single writer's clean plans on it, listing nothing unless it acts. Under
    optimistic concurrency other processes may have changed the timeline since: the clean lists
    it again under the lock, unless ``known`` shows no pending clean and too few commits (a
    writer that completed instants since cleans after them)."""
    if not wc.get(CLEAN_AUTOMATIC) or config.table_version >= 8:
        return []
    if not wc.optimistic_concurrency:
        return clean(storage, config, wc, executor, force=False, known=known)
    if known is not None and not _clean_due(known, wc):
        return []
    try:
        return clean(storage, config, wc, executor, force=False)
    except CommitConflictError as exc:
        # The lock stayed taken: the write has committed, and a later commit cleans.
        log.warning("inline clean skipped: %s", exc)
        return []


# ---- clean metadata and plans -------------------------------------------------------------


def clean_metadata(timeline: Timeline, instant_time: str) -> dict:
    """The decoded ``HoodieCleanMetadata`` of the completed clean at ``instant_time``."""
    try:
        data = timeline.read_instant(Instant(instant_time, Action.CLEAN, State.COMPLETED))
    except FileNotFoundError:
        raise InstantNotFoundError(f"no completed clean {instant_time}") from None
    return decode_record(data, f"clean metadata {instant_time}")


def plan_files(plan: Mapping) -> dict[str, list[str]]:
    """Partition -> paths (relative to the table) a ``HoodieCleanerPlan`` deletes, from version 2
    full paths or version 1 names; a file is always inside its partition's directory."""
    out: dict[str, list[str]] = {}
    by_path = plan.get("filePathsToBeDeletedPerPartition")
    by_name = plan.get("filesToBeDeletedPerPartition") or {}
    source = (
        {p: [i.get("filePath") or "" for i in infos or []] for p, infos in by_path.items()}
        if by_path
        else {p: list(names or []) for p, names in by_name.items()}
    )
    for partition, paths in source.items():
        names = [_name(p) for p in paths if p]
        out[partition] = [f"{partition}/{n}" if partition else n for n in names]
    return out


def _completed_cleans(timeline: Timeline) -> list[Instant]:
    return [i for i in timeline.instants if i.action == Action.CLEAN and i.is_completed]


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _action_name(inst: Instant) -> str:
    # A completed compaction is a commit on Hudi's timeline.
    if inst.is_completed and inst.action == Action.COMPACTION:
        return Action.COMMIT.value
    return inst.action.value


# ---- time travel over cleaned slices ------------------------------------------------------


def cleaned_slices(timeline: Timeline, as_of: str | None = None) -> dict[GroupId, set[str]]:
    """File group -> base instants of its slices that completed cleans removed, or that a
    pending clean is removing (savepointed files excepted). With ``as_of``, the cleans archived
    off the active timeline count too when a read as of it may need what they removed."""
    out: dict[GroupId, set[str]] = defaultdict(set)

    def add(partition: str, names: Iterable[str]) -> None:
        for name in names:
            parsed = parse_base_file_name(name) or parse_log_file_name(name)
            if parsed is not None:
                out[(partition, parsed.file_id)].add(parsed.instant_time)

    pinned: set[str] | None = None
    for inst in timeline.instants:
        if inst.action != Action.CLEAN:
            continue
        if inst.is_completed:
            for partition, pm in (
                clean_metadata(timeline, inst.requested_time).get("partitionMetadata") or {}
            ).items():
                add(partition, pm.get("deletePathPatterns") or [])
            continue
        requested = Instant(inst.requested_time, Action.CLEAN, State.REQUESTED)
        plan = decode_record(timeline.read_instant(requested), f"clean plan {inst.requested_time}")
        pinned = savepointed_files(timeline) if pinned is None else pinned
        for partition, paths in plan_files(plan).items():
            add(partition, (n for n in map(_name, paths) if n not in pinned))
    for metadata in _archived_clean_metadata(timeline, as_of):
        for partition, pm in (metadata.get("partitionMetadata") or {}).items():
            add(partition, pm.get("deletePathPatterns") or [])
    return dict(out)


def _archived_clean_metadata(timeline: Timeline, as_of: str | None) -> list[Mapping]:
    """The metadata of the archived cleans, when a read as of ``as_of`` may need slices they
    removed. Cleans are archived by their own count, so commits they cleaned can stay active
    (behind a savepoint, say). A clean removes no slice that a read as of a later instant
    needs, and archival takes the oldest cleans first: reads as of the first active clean or
    later never need the archive, which is then not read."""
    if as_of is None:
        return []
    active = [i.requested_time for i in timeline.instants if i.action == Action.CLEAN]
    if active and as_of >= active[0]:
        return []
    archived = timeline.archived()
    if archived is None:
        return []
    cleans = [i.requested_time for i in archived.completed() if i.action == Action.CLEAN]
    return [m for t in cleans if t > as_of and (m := archived.metadata(t)) is not None]


def ensure_retained(timeline: Timeline, view: FileSystemView, as_of: str) -> None:
    """Raises CleanedInstantError when reading ``view`` (built as of ``as_of``) would need a
    file slice that was cleaned: for some file group, the slice a read as of ``as_of`` uses is
    gone, and the view would silently show an older slice or none."""
    removed = cleaned_slices(timeline, as_of)
    if not removed:
        return
    replaced = {g for g, t in _replaced_groups(timeline, None).items() if t <= as_of}
    archived_replaced: set[GroupId] | None = None
    # Partitions the view covers: all, or those asked for, even when a clean deleted one (its
    # groups then have no slice left, as if retired, and are checked all the same).
    asked = view.requested_partitions
    for group, bases in sorted(removed.items()):
        older = [b for b in bases if b <= as_of]
        if not older or group in replaced or (asked is not None and group[0] not in asked):
            continue
        fg = view.file_groups.get(group)
        # A pending clean's slices are still listed, and about to go.
        live = (
            {s.base_instant for s in fg.slices.values() if s.base_file or s.log_files} - bases
            if fg
            else set()
        )
        if not live:
            # The cleaner keeps the latest slice of a group it does not retire: a group with
            # none left was replaced, perhaps by a replace commit archival took off the timeline.
            if archived_replaced is None:
                archived_replaced = _archived_replaced_groups(timeline, as_of)
            if group in archived_replaced:
                continue
        needed = max(older + [b for b in live if b <= as_of])
        if needed not in live:
            earliest = earliest_readable_instant(view.storage, timeline, removed)
            pins = savepointed_instants(timeline)
            raise CleanedInstantError(
                f"as_of {as_of} needs file slice {needed} of file group {group[1]} "
                f"(partition {group[0] or '/'}), which the cleaner removed; the earliest instant "
                f"still readable is {earliest or 'none'}"
                + (f" (savepointed instants stay readable: {', '.join(pins)})" if pins else "")
            )


def _archived_replaced_groups(timeline: Timeline, as_of: str) -> set[GroupId]:
    """File groups that archived replace commits at or before ``as_of`` replaced."""
    archived = timeline.archived()
    if archived is None:
        return set()
    out: set[GroupId] = set()
    for inst in archived.completed_data_instants():
        if inst.action in _REPLACE_ACTIONS and inst.requested_time <= as_of:
            ids = archived.commit_metadata(inst).replaced_file_ids()
            out.update((partition, fid) for partition, fids in ids.items() for fid in fids)
    return out


def earliest_readable_instant(
    storage: Storage, timeline: Timeline, removed: Mapping[GroupId, set[str]] | None = None
) -> str | None:
    """The earliest completed commit from which on every read as of an instant finds its file
    slices: after the successor of every cleaned slice (or the replace commit of its group)."""
    removed = cleaned_slices(timeline) if removed is None else removed
    view = FileSystemView(storage, timeline)
    replaced = _replaced_groups(timeline, None)
    bound = ""
    for group, bases in removed.items():
        fg = view.file_groups.get(group)
        live = {s.base_instant for s in fg.slices.values() if s.base_file or s.log_files} if fg else set()
        every = sorted(live | bases)
        for b in bases:
            later = [x for x in every if x > b]
            successor = later[0] if later else replaced.get(group, "")
            bound = max(bound, successor)
    return next(
        (i.requested_time for i in timeline.completed_data_instants() if i.requested_time >= bound), None
    )
