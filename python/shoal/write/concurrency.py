"""How a writer shares its table with other writers (Hudi's write concurrency modes).

``SINGLE_WRITER`` (the default): one writer at a time. A write rolls back every pending write
before it plans (``EAGER``), taking it for a failed one. If a second writer does that to a
write that is still running, the first one's commit finds its instant gone and raises
CommitConflictError; it never reports success for a write whose files were deleted.

``OPTIMISTIC_CONCURRENCY_CONTROL``: writers run at once, in any processes that share the table.
- Each pending write keeps a heartbeat (:mod:`shoal.timeline.heartbeat`); a write rolls back
  only pending writes whose heartbeat stopped (``LAZY``).
- A write commits under the table's lock (:mod:`shoal.timeline.file_lock`). Under the lock it
  checks that no write that completed since it planned changed a file group it changed, and that
  no commit its planning read was rolled back or restored away; otherwise it rolls itself back
  and raises CommitConflictError, and the caller retries the write. Rollbacks of failed writes
  run under the lock too.
- As in Hudi, the check is per file group: two writers that insert the same new key into
  different file groups both succeed, and the key is then stored twice. Writers that may insert
  the same keys must not run at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager

from shoal.config import write_config as wc
from shoal.config.write_config import WriteConfig
from shoal.errors import CommitConflictError, UnsupportedError
from shoal.fs.storage import Storage
from shoal.timeline.commit_metadata import WriteStat
from shoal.timeline.file_lock import FileLock
from shoal.timeline.heartbeat import HEARTBEAT_DIR, Heartbeat, heartbeat_expired, heartbeat_path
from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.timeline import Timeline


class Concurrency:
    """One writer's side of sharing the table: heartbeats, the lock, and the conflict check."""

    def __init__(self, storage: Storage, config: WriteConfig) -> None:
        self.storage = storage
        self.optimistic = config.optimistic_concurrency
        self.lazy = config.lazy_failed_writes
        self.heartbeat_ms = int(config.get(wc.HEARTBEAT_INTERVAL_MS))
        self.tolerable_misses = int(config.get(wc.HEARTBEAT_TOLERABLE_MISSES))
        self.lock = FileLock(
            storage,
            config.get(wc.FILE_SYSTEM_LOCK_PATH),
            int(config.get(wc.FILE_SYSTEM_LOCK_EXPIRE)),
            int(config.get(wc.LOCK_WAIT_TIME_MS)),
            int(config.get(wc.LOCK_RETRY_WAIT_TIME_MS)),
        )
        if self.optimistic and not self.lock.storage.is_local:
            # As Hudi's provider refuses a file system without atomic creation.
            raise UnsupportedError(
                "optimistic concurrency needs the lock file to be created atomically, which shoal does "
                "on local (and mounted) file systems only; put hoodie.write.lock.filesystem.path on one, "
                "or run one writer at a time"
            )

    def locked(self) -> AbstractContextManager[None]:
        """The table's lock under optimistic concurrency; nothing for a single writer."""
        return self.lock.held() if self.optimistic else contextlib.nullcontext()

    def start_heartbeat(self, instant_time: str) -> Heartbeat | None:
        """Starts the heartbeat of a write about to request ``instant_time`` (LAZY only)."""
        return Heartbeat(self.storage, instant_time, self.heartbeat_ms).start() if self.lazy else None

    def is_running(self, instant_time: str) -> bool:
        """Whether the pending ``instant_time`` belongs to a live writer (LAZY: its heartbeat is
        fresh); a single writer takes every pending instant for a failed one."""
        return self.lazy and not heartbeat_expired(
            self.storage, instant_time, self.heartbeat_ms, self.tolerable_misses
        )

    def forget_heartbeat(self, instant_time: str) -> None:
        """Deletes the heartbeat a rolled-back write left behind."""
        self.storage.delete(heartbeat_path(instant_time), missing_ok=True)

    def failed_writes(self, timeline: Timeline) -> list[Instant]:
        """The pending writes to roll back: all of them (EAGER), or those whose heartbeat
        stopped (LAZY). Under LAZY, it also deletes the stopped heartbeats of instants that are
        not pending on ``timeline``: a writer killed between its first beat and requesting its
        instant leaves one that no rollback would ever delete."""
        if self.lazy:
            self._forget_orphan_heartbeats(timeline)
        return [i for i in timeline.pending_data_instants() if not self.is_running(i.requested_time)]

    def _forget_orphan_heartbeats(self, timeline: Timeline) -> None:
        for info in self.storage.list_files(HEARTBEAT_DIR):
            instant_time = info.path.rsplit("/", 1)[-1]
            instant = timeline.get(instant_time)
            if instant is not None and not instant.is_completed:
                continue
            # A fresh one may be a writer's first beat before its instant is requested.
            if self.is_running(instant_time):
                continue
            self.forget_heartbeat(instant_time)


def check_still_pending(now: Timeline, inflight: Instant) -> None:
    """Raises CommitConflictError when another writer rolled ``inflight`` back (it took the
    write, or compaction, for a failed one): completing it would publish a commit whose files
    are gone."""
    current = now.get(inflight.requested_time)
    if current is None or current.state != State.INFLIGHT:
        # A rolled-back write is gone; a rolled-back compaction is requested again.
        state = (
            "completed" if current is not None and current.is_completed else "rolled back by another writer"
        )
        raise CommitConflictError(
            f"{inflight.action.value} {inflight.requested_time} was {state} while it ran; "
            "nothing was committed. "
            "Run one writer per table, or set hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL "
            "on every writer"
        )


def conflicts(
    planned: Timeline,
    now: Timeline,
    instant_time: str,
    stats: Sequence[WriteStat],
    replaced: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """Why a write planned on ``planned`` that wrote ``stats`` (and replaced the file groups
    ``replaced``) cannot commit on ``now``: one line per data instant completed meanwhile that
    changed (or replaced) one of its file groups, and per commit its planning read that has
    since been rolled back or restored away."""
    done_before = {i.requested_time for i in planned.completed_data_instants()}
    mine = {(s.partitionPath or "", s.fileId) for s in stats}
    mine |= {(p, f) for p, ids in (replaced or {}).items() for f in ids}
    reasons: list[str] = []
    for inst in now.completed_data_instants():
        if inst.requested_time in done_before or inst.requested_time == instant_time:
            continue
        # Compactions have their own check (services/compaction.abort_on_compaction_conflict):
        # one the write saw planned took its logs in the new slice, and is no conflict.
        if inst.action == Action.COMPACTION:
            continue
        metadata = now.commit_metadata(inst)
        theirs = {(s.partitionPath or "", s.fileId) for s in metadata.write_stats()}
        theirs |= {(p, f) for p, ids in metadata.replaced_file_ids().items() for f in ids}
        shared = sorted(f for _, f in mine & theirs)
        if shared:
            groups = ", ".join(shared[:3])
            reasons.append(f"{inst.action.value} {inst.requested_time} also changed file group(s) {groups}")
    first = now.first_data_instant_time()
    still_done = {i.requested_time for i in now.completed_data_instants()}
    # Archival removes the oldest commits only: a later one that is gone was rolled back.
    gone = sorted(t for t in done_before - still_done if first is None or t >= first)
    reasons += [f"commit {t}, which this write read, was rolled back or restored away" for t in gone]
    return reasons


@contextlib.contextmanager
def heartbeat_stopped_after(heartbeat: Heartbeat | None) -> Iterator[None]:
    """Stops ``heartbeat`` when the block ends, however it ends."""
    try:
        yield
    finally:
        if heartbeat is not None:
            heartbeat.stop()
