"""Restoring a table to a savepoint (HUDI_FORMAT §2.3, §8.4; Hudi's ``restoreToSavepoint``).

``restore(S)`` needs a savepoint at S and no later savepoint. It records ``R.restore.requested``
(Avro ``HoodieRestorePlan``: every commit, delta commit, compaction and replace commit after S,
completed or pending, newest first), then ``R.restore.inflight``, rolls each of them back with
services/rollback.py (a rollback instant each, as Hudi does), completes ``R.restore`` (Avro
``HoodieRestoreMetadata`` holding those rollbacks' metadata) and finally removes the rollback
instants it made, which Hudi also does once the restore is complete. Cleans and rollbacks after S
stay: they removed nothing S needs (the savepoint pinned its file slices).

A completed write's markers are gone, so its rollback gets them back from its commit metadata:
a base file it created or merged is deleted, and so is a log file it created (``logOffset`` 0 in
its delta write stat); its appends to an existing log file (from ``logOffset`` on) are
neutralised as rollback.py does for failed writes, with a ROLLBACK command block. Rolled back
newest first, every log file reads as it did at S. A completed compaction is reverted to
inflight first, then rolled back as a failed attempt, then its plan is removed.

A restore that crashed stays pending; the next ``restore`` (or :func:`finish_pending_restores`)
resumes it from its plan, skipping instants already rolled back.
"""

from __future__ import annotations

import json
import time

from shoal import _native
from shoal.config.table_config import TableConfig
from shoal.errors import InstantNotFoundError, InvalidArgumentError, UnsupportedError
from shoal.executor.base import Executor
from shoal.fs.storage import Storage
from shoal.schemas import load_schema
from shoal.services.clean import run_pending_cleans
from shoal.services.rollback import replay_markers, rollback_compaction, rollback_instant
from shoal.services.savepoint import decode_record, savepointed_instants
from shoal.timeline.archived import ArchivedTimeline
from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.lock import COMPACTION, WRITE, table_lock
from shoal.timeline.timeline import Timeline

PLAN_SCHEMA = "HoodieRestorePlan.v6.writer"
METADATA_SCHEMA = "HoodieRestoreMetadata.v6.writer"
PLAN_VERSION = 2
METADATA_VERSION = 1
# Hudi's write timeline: what a restore rolls back.
_RESTORED_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.COMPACTION, Action.REPLACE_COMMIT)
_UNSUPPORTED_ACTIONS = (Action.LOG_COMPACTION, Action.CLUSTERING)


def restore(
    storage: Storage, config: TableConfig, savepoint_time: str, executor: Executor | None = None
) -> str:
    """Rolls the table back to the savepoint at ``savepoint_time`` and returns the restore
    instant. Writers and compaction runners of this process wait meanwhile."""
    config.check_writable("restore")
    with table_lock(storage, WRITE), table_lock(storage, COMPACTION):
        resumed = finish_pending_restores(storage, config)
        # A clean planned before the restore may hold slices the restore makes latest again.
        run_pending_cleans(storage, config, executor)
        timeline = Timeline.load(storage, config)
        savepoints = savepointed_instants(timeline)
        if savepoint_time not in savepoints:
            raise InstantNotFoundError(
                f"no savepoint at {savepoint_time} (savepoints: {', '.join(savepoints) or 'none'})"
            )
        later = [t for t in savepoints if t > savepoint_time]
        if later:
            raise InvalidArgumentError(
                f"savepoints after {savepoint_time} exist ({', '.join(later)}): delete them first"
            )
        archived = _archived_after(storage, config, timeline, savepoint_time)
        if archived:
            # Hudi refuses these too (HUDI-4501): a restore rolls back only what the active
            # timeline holds, and would leave the archived commits' files behind.
            raise UnsupportedError(
                f"cannot restore to {savepoint_time}: commits after it were archived "
                f"(hoodie.archive.beyond.savepoint), the first {archived[0]}"
            )
        targets = instants_to_roll_back(timeline, savepoint_time)
        if not targets and savepoint_time in resumed.values():
            # The crashed restore to this savepoint, now finished, did it all.
            return max(t for t, s in resumed.items() if s == savepoint_time)
        for inst in targets:
            if inst.is_completed and inst.action != Action.COMPACTION:
                replay_markers(storage, timeline, inst, check_only=True)
        restore_time = timeline.new_instant_time()
        plan = {
            "instantsToRollback": [_instant_info(i) for i in targets],
            "version": PLAN_VERSION,
            "savepointToRestoreTimestamp": savepoint_time,
        }
        requested = timeline.create_requested(
            restore_time,
            Action.RESTORE,
            _native.avro_container_encode(load_schema(PLAN_SCHEMA), json.dumps([plan])),
        )
        _execute(storage, config, requested, plan)
        return restore_time


def _archived_after(
    storage: Storage, config: TableConfig, timeline: Timeline, savepoint_time: str
) -> list[str]:
    """Archived commits that the timeline left by the restore would no longer take for
    archived: those later than where its data timeline would start (archival beyond savepoints
    leaves such commits between savepointed ones). Readers would hide their files."""
    start = timeline.first_data_instant_time(until=savepoint_time)
    first = timeline.first_data_instant_time()
    savepointed = {i.requested_time for i in timeline.instants if i.action == Action.SAVEPOINT}
    if start is not None and first is not None and first not in savepointed and start >= first:
        # Archival takes the oldest commits that are not savepointed: all are older than this.
        return []
    archived = ArchivedTimeline.load(storage, config).completed_data_instants()
    return [i.requested_time for i in archived if start is None or i.requested_time > start]


def instants_to_roll_back(timeline: Timeline, savepoint_time: str) -> list[Instant]:
    """Every write-timeline instant after the savepoint, any state, newest first."""
    after = [i for i in timeline.instants if i.requested_time > savepoint_time]
    unsupported = [i for i in after if i.action in _UNSUPPORTED_ACTIONS]
    if unsupported:
        raise UnsupportedError(f"cannot restore over {unsupported[0]}: shoal does not roll back that action")
    return [i for i in reversed(after) if i.action in _RESTORED_ACTIONS]


def finish_pending_restores(storage: Storage, config: TableConfig) -> dict[str, str]:
    """Completes every restore a crash left requested or inflight; returns restore instant ->
    the savepoint it restored."""
    with table_lock(storage, WRITE), table_lock(storage, COMPACTION):
        done = {}
        for inst in Timeline.load(storage, config).pending():
            if inst.action != Action.RESTORE:
                continue
            requested = Instant(inst.requested_time, Action.RESTORE, State.REQUESTED)
            timeline = Timeline.load(storage, config)
            plan = decode_record(timeline.read_instant(requested), f"restore plan {inst.requested_time}")
            _execute(storage, config, inst, plan)
            done[inst.requested_time] = plan.get("savepointToRestoreTimestamp") or ""
        return done


def restore_metadata(timeline: Timeline, instant_time: str) -> dict:
    """The decoded ``HoodieRestoreMetadata`` of the completed restore at ``instant_time``."""
    try:
        data = timeline.read_instant(Instant(instant_time, Action.RESTORE, State.COMPLETED))
    except FileNotFoundError:
        raise InstantNotFoundError(f"no completed restore {instant_time}") from None
    return decode_record(data, f"restore metadata {instant_time}")


def _execute(storage: Storage, config: TableConfig, restore_instant: Instant, plan: dict) -> None:
    started = time.monotonic()
    timeline = Timeline.load(storage, config)
    requested = Instant(restore_instant.requested_time, Action.RESTORE, State.REQUESTED)
    if restore_instant.state == State.REQUESTED:
        inflight = timeline.transition_to_inflight(requested, b"")
    else:
        inflight = requested.with_state(State.INFLIGHT)
    rollbacks: dict[str, list[dict]] = {}
    for info in plan.get("instantsToRollback") or []:
        timeline = timeline.reload()
        target = timeline.get(info["commitTime"])
        if target is None or target.action not in _RESTORED_ACTIONS:
            continue  # rolled back by an earlier attempt of this restore
        rollback_time = _roll_back(storage, config, timeline, target)
        rollbacks[target.requested_time] = [_rollback_metadata(timeline.reload(), rollback_time)]
    infos = list(plan.get("instantsToRollback") or [])
    metadata = {
        "startRestoreTime": restore_instant.requested_time,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "instantsToRollback": [i["commitTime"] for i in infos],
        "hoodieRestoreMetadata": rollbacks,
        "version": METADATA_VERSION,
        "restoreInstantInfo": infos,
        "extraMetadata": None,
    }
    timeline.complete(
        inflight, _native.avro_container_encode(load_schema(METADATA_SCHEMA), json.dumps([metadata]))
    )
    # The rollbacks are part of the restore: once it completed, Hudi removes every rollback
    # instant after it (a crashed attempt's unfinished ones too).
    for inst in timeline.reload().instants:
        if inst.action == Action.ROLLBACK and inst.requested_time > restore_instant.requested_time:
            timeline.delete_instant_files(inst.requested_time)


def _roll_back(storage: Storage, config: TableConfig, timeline: Timeline, target: Instant) -> str:
    """Rolls back one instant with services/rollback.py and returns the rollback time."""
    if target.action == Action.COMPACTION:
        return rollback_compaction(storage, timeline, target)
    return rollback_instant(storage, config, timeline, target)


def _rollback_metadata(timeline: Timeline, rollback_time: str) -> dict:
    data = timeline.read_instant(Instant(rollback_time, Action.ROLLBACK, State.COMPLETED))
    return decode_record(data, f"rollback metadata {rollback_time}")


def undone_instants(timeline: Timeline, inst: Instant) -> list[tuple[str | None, str]]:
    """(action, instant time) of each instant the completed rollback or restore ``inst`` rolled
    back, as its metadata names them (the action None where the metadata records times alone)."""
    if inst.action == Action.RESTORE:
        metadata = restore_metadata(timeline, inst.requested_time)
        infos, times = metadata.get("restoreInstantInfo"), metadata.get("instantsToRollback")
    else:
        metadata = _rollback_metadata(timeline, inst.requested_time)
        infos, times = metadata.get("instantsRollback"), metadata.get("commitsRollback")
    if infos:
        return [(i.get("action"), str(i.get("commitTime"))) for i in infos]
    return [(None, str(t)) for t in times or []]


def _instant_info(inst: Instant) -> dict:
    # Hudi's timeline shows a completed compaction as a commit.
    action = Action.COMMIT if inst.is_completed and inst.action == Action.COMPACTION else inst.action
    return {"commitTime": inst.requested_time, "action": action.value}
