"""Reads of past file slices that a concurrent clean or archival cannot silently empty.

A read of past changes (an incremental range, a time travel) plans against a timeline loaded
before it lists and opens files. A clean requested after that load deletes slices the plan needs:
the listing no longer shows them, and the read would return the rows of another slice, or none,
without an error. A stream is most exposed, as it reads instant after instant from one poll's
timeline while its consumer works. So the read is checked against the timeline loaded after it:
when a clean (of any state) or an archival happened meanwhile, it is read again against that
newer timeline, which knows what was removed (and raises CleanedInstantError, or falls back, as a
read planned after the clean does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from shoal.errors import CommitConflictError
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline

T = TypeVar("T")


def removal_marks(timeline: Timeline) -> tuple[frozenset[str], str | None]:
    """What ``timeline`` records of files and instants going away: its cleans, pending or
    completed, and the first instant of its active timeline (archival moves instants, and the
    cleans it archives, off it)."""
    cleans = frozenset(i.requested_time for i in timeline.instants if i.action == Action.CLEAN)
    first = timeline.instants[0].requested_time if timeline.instants else None
    return cleans, first


def undone_marks(timeline: Timeline) -> frozenset[str]:
    """The rollbacks and restores ``timeline`` records: a rollback deletes the files of the
    write it undoes (a failed write's log files too, which a merge-on-read plan lists)."""
    return frozenset(
        i.requested_time for i in timeline.instants if i.action in (Action.ROLLBACK, Action.RESTORE)
    )


class StalePlan(FileNotFoundError):
    """A write's plan listed files after a concurrent clean, archival or rollback had removed
    some: a key whose files went is planned as new, and would be written twice. Writers plan
    again on the newer timeline, as for a file found missing."""

    def conflict(self, plans: int) -> CommitConflictError:
        """The error of a write whose every one of ``plans`` plans went stale."""
        return CommitConflictError(
            f"the table's files kept changing while the write planned ({plans} plans): "
            "concurrent cleans, archivals or rollbacks; retry it"
        )


def check_plan_fresh(planned_on: Timeline) -> None:
    """Raises StalePlan when a clean, an archival, a rollback or a restore happened since
    ``planned_on`` was loaded: the listings a plan made since may lack files it needed, with no
    error to show it (see the module)."""
    if files_went_away(planned_on, planned_on.reload()):
        raise StalePlan("a concurrent clean, archival or rollback removed files while the write planned")


def plan_again_or_raise(
    missing: FileNotFoundError, plans: int, attempts: int, planned_on: Timeline, cause: BaseException
) -> None:
    """What a write does with ``missing``, a file its ``plans``-th plan (of at most ``attempts``)
    on ``planned_on`` found gone or listed without: returns when a clean, archival, rollback or
    restore explains it and a plan is left (plan again on the newer timeline); raises otherwise,
    ``missing`` itself, or CommitConflictError when every plan went stale. ``cause``: the error
    ``missing`` was found in (itself, or a Spark error naming a task's)."""
    if isinstance(missing, StalePlan) and plans == attempts:
        raise missing.conflict(attempts) from cause
    if plans == attempts or not files_went_away(planned_on, planned_on.reload()):
        if missing is cause:
            raise missing
        raise missing from cause


def files_went_away(before: Timeline, after: Timeline) -> bool:
    """Whether a clean, an archival, a rollback or a restore happened between two loads of a
    timeline: what explains a file that a plan made on ``before`` no longer finds."""
    return removal_marks(after) != removal_marks(before) or undone_marks(after) != undone_marks(before)


def read_settled(
    timeline: Timeline, load: Callable[[], Timeline], read: Callable[[Timeline], T]
) -> tuple[T, Timeline]:
    """``read(timeline)``, read again against a newer timeline from ``load`` for as long as
    a clean or an archival happened during the read (see the module docstring). Returns the
    result and the timeline it was read against. A file that went missing during the read is
    an error only when no such change, nor a rollback, explains it."""
    while True:
        try:
            result = read(timeline)
        except FileNotFoundError:
            after = load()
            if not files_went_away(timeline, after):
                raise
            timeline = after
            continue
        after = load()
        if removal_marks(after) == removal_marks(timeline):
            return result, timeline
        timeline = after
