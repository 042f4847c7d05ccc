"""Savepoints (HUDI_FORMAT §2.3, §8.4): pinning a commit against cleaning and archival.

A savepoint of the completed commit T is the instant ``T.savepoint.inflight`` (empty), then
``T.savepoint``: Hudi's Avro ``HoodieSavepointMetadata``, listing per partition the names of the
files of every latest file slice as of T (base file and log files). The cleaner keeps every file
slice holding one of those files, so the table stays readable as of T (time travel, and
``Table.restore``) for as long as the savepoint exists. Deleting the savepoint removes its two
instant files; the next clean may then remove the slices it pinned.
"""

from __future__ import annotations

import getpass
import json
import time
from collections.abc import Iterable

from shoal import _native
from shoal.config.table_config import TableConfig
from shoal.errors import (
    CorruptTableError,
    InstantNotFoundError,
    InvalidArgumentError,
)
from shoal.fs.storage import Storage
from shoal.fs.view import FileSystemView
from shoal.schemas import load_schema
from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.lock import WRITE, table_lock
from shoal.timeline.timeline import Timeline

SAVEPOINT_SCHEMA = "HoodieSavepointMetadata.v6.writer"
SAVEPOINT_VERSION = 1
# The commits timeline of Hudi: what a savepoint may pin (a compaction completes as a commit).
_SAVEPOINTABLE = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION)


# ---- reading savepoints -------------------------------------------------------------------


def savepointed_instants(timeline: Timeline) -> list[str]:
    """Times of the completed savepoints on the active timeline, oldest first. Archival must
    keep these commits (and everything after the earliest) on the active timeline."""
    return sorted(
        i.requested_time for i in timeline.instants if i.action == Action.SAVEPOINT and i.is_completed
    )


def savepoint_metadata(timeline: Timeline, instant_time: str) -> dict:
    """The decoded ``HoodieSavepointMetadata`` of the savepoint at ``instant_time``."""
    inst = Instant(instant_time, Action.SAVEPOINT, State.COMPLETED)
    try:
        data = timeline.read_instant(inst)
    except FileNotFoundError:
        raise InstantNotFoundError(f"no savepoint at {instant_time}") from None
    return decode_record(data, f"savepoint metadata {instant_time}")


def savepointed_files(timeline: Timeline, instants: Iterable[str] | None = None) -> set[str]:
    """Names of the files pinned by the savepoints ``instants`` (by default, all of them).
    Names, not paths, as Hudi's cleaner compares them: a file name is unique in a table."""
    out: set[str] = set()
    for t in savepointed_instants(timeline) if instants is None else instants:
        for part in (savepoint_metadata(timeline, t).get("partitionMetadata") or {}).values():
            out.update(part.get("savepointDataFile") or [])
    return out


# ---- creating and deleting ----------------------------------------------------------------


def create_savepoint(
    storage: Storage,
    config: TableConfig,
    instant_time: str | None = None,
    user: str | None = None,
    comment: str = "",
) -> str:
    """Savepoints the completed commit ``instant_time`` (by default the latest one) and returns
    its time. Refused for an instant that is not a completed commit, delta commit, replace
    commit or compaction, one already savepointed, and one whose file slices the cleaner has
    already removed (CleanedInstantError)."""
    from shoal.services.clean import ensure_retained

    config.check_writable("savepoint")
    with table_lock(storage, WRITE):
        timeline = Timeline.load(storage, config)
        if instant_time is None:
            last = timeline.last_completed_data_instant()
            if last is None:
                raise InstantNotFoundError("nothing to savepoint: the table has no completed commit")
            instant_time = last.requested_time
        target = timeline.get(instant_time)
        if target is None or not target.is_completed:
            raise InstantNotFoundError(f"no completed commit {instant_time} to savepoint")
        if target.action not in _SAVEPOINTABLE:
            raise InvalidArgumentError(f"cannot savepoint a {target.action.value} instant ({instant_time})")
        if instant_time in savepointed_instants(timeline):
            raise InvalidArgumentError(f"commit {instant_time} is savepointed already")
        view = FileSystemView(storage, timeline, as_of=instant_time)
        ensure_retained(timeline, view, instant_time)
        partitions: dict[str, dict] = {
            p: {"partitionPath": p, "savepointDataFile": []} for p in view.partition_paths
        }
        for sl in view.latest_file_slices():
            files = partitions.setdefault(
                sl.partition_path, {"partitionPath": sl.partition_path, "savepointDataFile": []}
            )["savepointDataFile"]
            if sl.base_file is not None:
                files.append(sl.base_file.name)
            files.extend(lf.name for lf in sl.log_files)
        metadata = {
            "savepointedBy": _user() if user is None else user,
            "savepointedAt": int(time.time() * 1000),
            "comments": comment,
            "partitionMetadata": partitions,
            "version": SAVEPOINT_VERSION,
        }
        content = _native.avro_container_encode(load_schema(SAVEPOINT_SCHEMA), json.dumps([metadata]))
        inflight = Instant(instant_time, Action.SAVEPOINT, State.INFLIGHT)
        # A savepoint that a crash left inflight (an empty file) is completed by this one.
        if not storage.exists(timeline.path_of(inflight)):
            storage.create_exclusive(timeline.path_of(inflight), b"")
        timeline.complete(inflight, content)
        return instant_time


def delete_savepoint(storage: Storage, config: TableConfig, instant_time: str) -> None:
    """Removes the savepoint at ``instant_time`` (completed file first, as Hudi reverts it to
    inflight, then the inflight file), or one that a crash left inflight."""
    config.check_writable("delete a savepoint")
    with table_lock(storage, WRITE):
        timeline = Timeline.load(storage, config)
        left_by_a_crash = storage.exists(
            timeline.path_of(Instant(instant_time, Action.SAVEPOINT, State.INFLIGHT))
        )
        if instant_time not in savepointed_instants(timeline) and not left_by_a_crash:
            raise InstantNotFoundError(f"no savepoint at {instant_time}")
        for state in (State.COMPLETED, State.INFLIGHT):
            storage.delete(timeline.path_of(Instant(instant_time, Action.SAVEPOINT, state)), missing_ok=True)


def decode_record(data: bytes, what: str) -> dict:
    """The one record of an Avro container file (a timeline plan or metadata)."""
    try:
        records = json.loads(_native.avro_container_decode(data))
    except ValueError as e:
        raise CorruptTableError(f"cannot decode {what}: {e}") from e
    if not records:
        raise CorruptTableError(f"{what} holds no record")
    return dict(records[0])


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in this environment
        return ""
