"""Checkpoints of incremental consumers that a rollback or a restore undid.

A consumer that read a commit keeps its instant as its checkpoint. When a rollback (of that
commit) or a restore (to a savepoint before it) undoes the commit afterwards, its rows leave the
table, but reading on from the checkpoint shows nothing of that: the consumer's copy keeps rows
the table no longer has, without a word (Hudi's incremental readers have the same gap). The
checkpoint is the last instant the consumer read, so whenever a commit it read was undone, the
checkpoint itself was: reading on from it raises RolledBackInstantError, which tells the
consumer to rebuild its copy.

Table version 6 only: a version 8 checkpoint is a completion time, which the rollback metadata
does not record. Rollbacks and restores that archival moved off the active timeline are not
seen.
"""

from __future__ import annotations

from shoal.errors import RolledBackInstantError
from shoal.services.restore import undone_instants
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline


def check_start_not_undone(timeline: Timeline, start: str | None) -> None:
    """Raises RolledBackInstantError when ``start`` (an incremental read's exclusive start, a
    consumer's checkpoint) is an instant a completed rollback or restore undid."""
    if start is None or timeline.config.table_version >= 8 or len(start) < 14:
        return
    if any(i.requested_time == start for i in timeline.completed_data_instants()):
        return
    for inst in timeline.instants:
        if not inst.is_completed or inst.action not in (Action.ROLLBACK, Action.RESTORE):
            continue
        # Undoing a compaction takes no rows away: a consumer there reads on.
        undone = [t for action, t in undone_instants(timeline, inst) if action != Action.COMPACTION.value]
        if start in undone:
            what = "restore" if inst.action == Action.RESTORE else "rollback"
            raise RolledBackInstantError(
                f"start {start} is an instant the {what} {inst.requested_time} undid: the rows read "
                "up to it are no longer all in the table. Rebuild the copy from a snapshot read, "
                "then read on from the snapshot's latest instant"
            )
