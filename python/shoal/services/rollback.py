"""Rolling back failed or unwanted writes from their markers (HUDI_FORMAT §2.6, §8.3).

A rollback deletes the data files the instant created (its markers name them), neutralises its
appends to existing log files with ROLLBACK command blocks, records a ``.rollback`` instant with
Hudi's Avro plan and metadata, then removes the rolled-back instant's timeline files (requested
first, completed last). A log file it created that a pending compaction plan reads is
neutralised rather than deleted, so that the plan still runs; a rollback of the same instant
that a crash left pending is resumed under its own instant time.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Sequence

from shoal import _native
from shoal.config.table_config import TableConfig
from shoal.errors import CleanedInstantError, CorruptTableError, InvalidArgumentError, UnsupportedError
from shoal.fs.markers import append_offset, create_marker, delete_markers, list_marked_files
from shoal.fs.naming import parse_log_file_name
from shoal.fs.storage import Storage
from shoal.fs.view import FileSystemView
from shoal.read.incremental import predecessor
from shoal.schemas import load_schema
from shoal.services.clean import ensure_retained
from shoal.services.savepoint import decode_record
from shoal.timeline.commit_metadata import NULL_COMMIT
from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.timeline import DATA_ACTIONS, Timeline

_ROLLBACKABLE = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


def rollback_failed_writes(
    storage: Storage, config: TableConfig, timeline: Timeline, failed: Sequence[Instant] | None = None
) -> list[str]:
    """Rolls back the failed writes ``failed`` (by default every pending commit, delta commit and
    replace commit: a single writer takes an instant left pending when it starts for one whose
    writer died). Returns the rolled-back instant times."""
    done = []
    for inst in timeline.pending_data_instants() if failed is None else failed:
        rollback_instant(storage, config, timeline, inst)
        timeline = timeline.reload()
        done.append(inst.requested_time)
    return done


def rollback_instant(storage: Storage, config: TableConfig, timeline: Timeline, target: Instant) -> str:
    """Rolls back one instant (pending, or the last completed one) and returns the rollback time."""
    if target.action not in _ROLLBACKABLE:
        raise InvalidArgumentError(f"cannot roll back a {target.action.value} instant")
    if target.is_completed:
        replay_markers(storage, timeline, target, check_only=False)
    return _rollback(storage, timeline, target, delete_target=True)


def rollback_inflight_compaction(storage: Storage, timeline: Timeline, target: Instant) -> str:
    """Undoes a failed attempt at a compaction: deletes the base files its markers name, records
    a ``.rollback`` instant, and reverts the compaction from inflight to requested so that its
    plan runs again (Hudi's ``rollbackInflightCompaction``). Returns the rollback time."""
    if target.action != Action.COMPACTION or target.state != State.INFLIGHT:
        raise InvalidArgumentError(f"{target} is not an inflight compaction")
    rollback_time = _rollback(storage, timeline, target, delete_target=False)
    storage.delete(timeline.path_of(target), missing_ok=True)
    timeline.delete_temp_files(target.requested_time)
    return rollback_time


def rollback_compaction(storage: Storage, timeline: Timeline, target: Instant) -> str:
    """Removes the compaction ``target`` (pending, or completed and the latest data instant)
    from the table, as Hudi's rollback and restore of a compaction do: deletes the base files it
    wrote, records a ``.rollback`` instant and deletes the compaction's timeline files. Its
    file groups read from the slices before it again, which hold the same records. Returns the
    rollback time."""
    t = target.requested_time
    requested = Instant(t, Action.COMPACTION, State.REQUESTED)
    inflight = requested.with_state(State.INFLIGHT)
    if target.is_completed:
        replay_markers(storage, timeline, target, check_only=False)
        # Back to inflight: readers stop seeing the compacted base files at once.
        storage.delete(timeline.path_of(target), missing_ok=False)
    elif target.state == State.REQUESTED:
        timeline.transition_to_inflight(requested, b"")
    rollback_time = rollback_inflight_compaction(storage, timeline.reload(), inflight)
    timeline.delete_instant_files(t)
    return rollback_time


def _rollback(storage: Storage, timeline: Timeline, target: Instant, delete_target: bool) -> str:
    started = time.monotonic()
    # A rollback of the same instant that a crash left pending is resumed, not left pending for
    # good beside a new one (Hudi reuses it too: getPendingRollbackInfo).
    resumed = pending_rollback_of(timeline, target.requested_time)
    rollback_time = resumed.requested_time if resumed is not None else timeline.new_instant_time()
    marked = list_marked_files(storage, target.requested_time)
    files_by_partition: dict[str, list[str]] = defaultdict(list)
    appended: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for path, io_type in marked:
        partition = path.rsplit("/", 1)[0] if "/" in path else ""
        if io_type in ("CREATE", "MERGE"):
            files_by_partition[partition].append(path)
        elif io_type == "APPEND":
            offset = append_offset(storage, target.requested_time, path)
            if offset == 0:
                fate = _fate_of_created_log(storage, path, target.requested_time, timeline)
                if fate == "delete":
                    files_by_partition[partition].append(path)  # the failed write created the file
                elif fate == "neutralise":
                    appended[partition].append((path, 0))
            elif offset is not None:
                appended[partition].append((path, offset))
    if not marked:
        # No markers (a crash before the first marker): fall back to a listing.
        for path, partition in _files_of_instant(storage, timeline, target):
            files_by_partition[partition].append(path)
    plan = {
        "instantToRollback": {"commitTime": target.requested_time, "action": target.action.value},
        "RollbackRequests": _rollback_requests(storage, files_by_partition, appended),
        "version": 1,
    }
    if resumed is None:
        requested = timeline.create_requested(
            rollback_time,
            Action.ROLLBACK,
            _native.avro_container_encode(load_schema("HoodieRollbackPlan.v6.writer"), json.dumps([plan])),
        )
    else:
        requested = Instant(rollback_time, Action.ROLLBACK, State.REQUESTED)
    if resumed is None or resumed.state == State.REQUESTED:
        inflight = timeline.transition_to_inflight(requested, b"")
    else:
        inflight = requested.with_state(State.INFLIGHT)
    if target.is_completed:
        _unpublish(storage, timeline, target)
    partition_metadata = {}
    total = 0
    failed_logs, command_logs = _neutralise_appends(storage, appended, target.requested_time, rollback_time)
    for partition in sorted(set(files_by_partition) | set(failed_logs)):
        paths = files_by_partition.get(partition, [])
        deleted, failed = [], []
        for p in paths:
            try:
                storage.delete(p, missing_ok=False)
                deleted.append(storage.full_path(p))
            except FileNotFoundError:
                # Never written (crash between marker and file): nothing to undo.
                pass
            except OSError:
                failed.append(storage.full_path(p))
        total += len(deleted)
        partition_metadata[partition] = {
            "partitionPath": partition,
            "successDeleteFiles": deleted,
            "failedDeleteFiles": failed,
            "rollbackLogFiles": command_logs.get(partition) or None,
            "logFilesFromFailedCommit": failed_logs.get(partition) or None,
        }
    metadata = {
        "startRollbackTime": rollback_time,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "totalFilesDeleted": total,
        "commitsRollback": [target.requested_time],
        "partitionMetadata": partition_metadata,
        "version": 1,
        "instantsRollback": [{"commitTime": target.requested_time, "action": target.action.value}],
    }
    timeline.complete(
        inflight,
        _native.avro_container_encode(
            load_schema("HoodieRollbackMetadata.v6.writer"), json.dumps([metadata])
        ),
    )
    if delete_target:
        timeline.delete_instant_files(target.requested_time)
    delete_markers(storage, target.requested_time)
    return rollback_time


def _rollback_requests(
    storage: Storage, files_by_partition: dict[str, list[str]], appended: dict[str, list[tuple[str, int]]]
) -> list[dict]:
    """The plan's ``HoodieRollbackRequest``s, as Hudi's marker-based rollback plans them: the files
    to delete per partition, and one request per log file the instant appended to, naming the
    file group, its slice and the log file (full path and current size) whose blocks a ROLLBACK
    command block neutralises. A Java writer that finds the rollback pending runs this plan: an
    append left out of it would not be neutralised."""
    requests = [
        {
            "partitionPath": partition,
            "fileId": "",
            "latestBaseInstant": "",
            "filesToBeDeleted": [storage.full_path(p) for p in paths],
            "logBlocksToBeDeleted": {},
        }
        for partition, paths in sorted(files_by_partition.items())
    ]
    for partition, items in sorted(appended.items()):
        for path, _ in items:
            parsed = parse_log_file_name(path.rsplit("/", 1)[-1])
            if parsed is None:
                continue
            try:
                size = storage.size(path)
            except FileNotFoundError:
                continue
            requests.append(
                {
                    "partitionPath": partition,
                    "fileId": parsed.file_id,
                    "latestBaseInstant": parsed.instant_time,
                    "filesToBeDeleted": [],
                    "logBlocksToBeDeleted": {storage.full_path(path): size},
                }
            )
    return requests


def _unpublish(storage: Storage, timeline: Timeline, target: Instant) -> None:
    """Reverts the completed ``target`` to inflight before any of its files goes, as Hudi's
    rollback does (``revertToInflight``): readers see the table as it was before it from then
    on, never a commit whose files are half deleted, and a crash leaves a failed write with a
    pending rollback, which a retried rollback or the next write finishes."""
    inflight = target.with_state(State.INFLIGHT)
    if not storage.exists(timeline.path_of(inflight)):
        storage.create_exclusive(timeline.path_of(inflight), b"")
    storage.delete(timeline.path_of(target), missing_ok=True)


def pending_rollback_of(timeline: Timeline, instant_time: str) -> Instant | None:
    """The rollback of ``instant_time`` that a crash left requested or inflight, if any (a plan
    that cannot be read is not taken for one)."""
    for inst in timeline.pending():
        if inst.action == Action.ROLLBACK and _rollback_target(timeline, inst) == instant_time:
            return inst
    return None


def interrupted_rollback(timeline: Timeline) -> Instant | None:
    """The commit or compaction whose rollback a crash interrupted after reverting it to
    inflight: a retried rollback finishes that one, rather than taking the commit before it for
    the last one."""
    for inst in timeline.pending():
        target_time = _rollback_target(timeline, inst) if inst.action == Action.ROLLBACK else None
        target = timeline.get(target_time) if target_time else None
        undoable = (*_ROLLBACKABLE, Action.COMPACTION)
        if target is not None and not target.is_completed and target.action in undoable:
            return target
    return None


def _rollback_target(timeline: Timeline, rollback: Instant) -> str | None:
    """The instant a pending rollback's plan rolls back (None when the plan cannot be read)."""
    requested = Instant(rollback.requested_time, Action.ROLLBACK, State.REQUESTED)
    try:
        plan = decode_record(timeline.read_instant(requested), f"rollback plan {rollback.requested_time}")
    except (FileNotFoundError, CorruptTableError):
        return None
    target = (plan.get("instantToRollback") or {}).get("commitTime")
    return str(target) if target else None


def _fate_of_created_log(storage: Storage, path: str, target: str, timeline: Timeline) -> str:
    """What undoing ``target`` does to the log file ``path`` its marker says it created:
    ``"delete"`` it when it holds no block of another instant still on the timeline (those a
    restore rolled back before do not count); ``"skip"`` it when it holds no block of
    ``target``: the write lost the race for that name to another writer (whose file it is);
    else ``"neutralise"`` ``target``'s blocks with a command block."""
    try:
        blocks = _native.read_log_blocks(storage.read_bytes(path))
    except FileNotFoundError:
        return "skip"
    live = {i.requested_time for i in timeline.instants if i.action in DATA_ACTIONS} - {target}
    data = [b for b in blocks if not b.is_corrupt and b.block_type != "COMMAND_BLOCK"]
    if any(b.instant_time in live for b in data):
        return "neutralise" if any(b.instant_time == target for b in data) else "skip"
    if path.rsplit("/", 1)[-1] in _planned_log_files(timeline):
        # A pending compaction reads it: deleted, the plan could not run any more.
        return "neutralise"
    return "delete"


def _planned_log_files(timeline: Timeline) -> set[str]:
    """Names of the log files the pending compactions' plans read."""
    return {
        str(p).rsplit("/", 1)[-1]
        for inst in timeline.pending_compactions()
        for op in timeline.compaction_plan(inst.requested_time)
        for p in op.get("deltaFilePaths") or []
    }


def _neutralise_appends(
    storage: Storage, appended: dict[str, list[tuple[str, int]]], target: str, rollback_time: str
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Neutralises what a failed instant appended to existing log files, as Hudi does: a ROLLBACK
    command block targeting the instant is appended after its blocks. A torn last block (the
    writer died mid-append) is cut off first, back to the last whole block: readers that meet a
    damaged tail may drop the whole file (hudi-rs does). Returns, per partition, the log files
    the failed commit wrote (sizes before) and those the command blocks went to (sizes after)."""
    failed: dict[str, dict[str, int]] = defaultdict(dict)
    neutralised: dict[str, dict[str, int]] = defaultdict(dict)
    command = _native.encode_rollback_block(rollback_time, target)
    for partition, items in appended.items():
        for path, offset in items:
            full = storage.full_path(path)
            try:
                size = storage.size(path)
            except FileNotFoundError:
                continue
            failed[partition][full] = size
            if size <= offset:
                continue
            if not storage.is_local:
                raise UnsupportedError(f"cannot roll back an append to {path} on this storage")
            with open(full, "rb") as f:
                f.seek(offset)
                tail = f.read()
            whole = 0
            last = None
            for block in _native.read_log_blocks(tail):
                if block.is_corrupt or block.offset != whole:
                    break
                whole, last = block.offset + block.size, block
            if whole < len(tail):
                os.truncate(full, offset + whole)
            if last is not None and _is_rollback_by(last, rollback_time):
                # A resumed rollback: the crashed attempt neutralised this file already.
                neutralised[partition][full] = offset + whole
            elif whole:
                with open(full, "ab") as f:
                    f.write(command)
                neutralised[partition][full] = storage.size(path)
    return failed, neutralised


def _is_rollback_by(block: _native.LogBlock, rollback_time: str) -> bool:
    return block.block_type == "COMMAND_BLOCK" and block.header.get("INSTANT_TIME") == rollback_time


def replay_markers(storage: Storage, timeline: Timeline, target: Instant, check_only: bool) -> None:
    """Writes the markers a completed instant had (deleted at its commit) from its write stats,
    so that its rollback deletes what it created and neutralises its log appends (an append's
    stat records the offset it started at) instead of deleting log files other commits wrote
    to as well. With ``check_only``, only checks that this is possible."""
    meta = timeline.commit_metadata(target)
    marked = {path for path, _ in list_marked_files(storage, target.requested_time)}
    for stat in meta.write_stats():
        if not stat.path or stat.path in marked:
            continue
        is_log = stat.logFiles is not None or stat.logVersion is not None
        if is_log:
            if stat.logOffset is None:
                raise UnsupportedError(
                    f"cannot roll back {target}: its write stat for {stat.path} has no log offset"
                )
            if stat.logOffset > 0 and not storage.is_local:
                raise UnsupportedError(f"cannot roll back log appends on this storage ({stat.path})")
        if check_only:
            continue
        if is_log:
            create_marker(storage, target.requested_time, stat.path, "APPEND", append_offset=stat.logOffset)
        else:
            io_type = "CREATE" if stat.prevCommit in (NULL_COMMIT, None, "") else "MERGE"
            create_marker(storage, target.requested_time, stat.path, io_type)


def _files_of_instant(storage: Storage, timeline: Timeline, target: Instant) -> list[tuple[str, str]]:
    """The base files a pending instant that left no markers created (completed instants have
    their markers replayed from their write stats first)."""
    from shoal.fs.naming import parse_base_file_name

    out = []
    for f in storage.list_files("", recursive=True):
        if f.path.startswith(".hoodie/"):
            continue
        parsed = parse_base_file_name(f.name)
        if parsed is not None and parsed.instant_time == target.requested_time:
            out.append((f.path, f.path.rsplit("/", 1)[0] if "/" in f.path else ""))
    return out


def ensure_restorable_before(storage: Storage, timeline: Timeline, target: Instant) -> None:
    """Raises InvalidArgumentError when rolling back the completed ``target`` would need a file
    slice a later clean removed: the slice a file group it wrote or replaced had before it (the
    cleaner keeping file versions removes replaced file groups at once). The table would show an
    older version of those records, or none.

    Refused too when rolling ``target`` back would move the start of the data timeline past
    archived commits: readers take the files of archived commits as committed only when they
    predate the first active data instant (savepointed commits count only when no other is
    left), so the table would read without them: empty when no data instant is left, or with
    older rows when ``hoodie.archive.beyond.savepoint`` archived commits after a savepointed one
    that would be left first (or whose savepoint was deleted since)."""
    archived = timeline.archived()
    if archived is not None:
        start = timeline.first_data_instant_time(without=target.requested_time)
        hidden = [
            i.requested_time
            for i in archived.completed_data_instants()
            if start is None or i.requested_time > start
        ]
        if hidden:
            raise InvalidArgumentError(
                f"cannot roll back {target.requested_time}: readers would take the archived "
                f"commits from {hidden[0]} on for uncommitted, and the table would read without them"
            )
    metadata = timeline.commit_metadata(target)
    partitions = set(metadata.partition_to_write_stats) | set(metadata.replaced_file_ids())
    if not partitions:
        return
    before = predecessor(target.requested_time)
    view = FileSystemView(storage, timeline, as_of=before, partitions=sorted(partitions))
    try:
        ensure_retained(timeline, view, before)
    except CleanedInstantError as e:
        raise InvalidArgumentError(
            f"cannot roll back {target.requested_time}: a clean after it removed file slices the "
            f"table had before it ({e}); restore a savepoint instead"
        ) from None
