"""Streaming incremental reads: follow a table's timeline and hand out the changes of each newly
completed instant, in commit order, each with a checkpoint to resume from.

A consumer stores ``change.checkpoint`` once it has processed a change and passes it back as
``start`` after a restart: the stream then continues with the next instant, so nothing is skipped
and nothing is repeated. The checkpoint is a position on the incremental axis (the requested time
in table version 6, the completion time in version 8), never a row count.

Table version 6 orders instants by requested time, so an older instant that completes after a
newer one would land behind a checkpoint that moved past it. The stream therefore holds back
every completed instant younger than the oldest pending write (commit, delta commit or replace
commit): a write still in flight, or a failed one awaiting rollback (the next write rolls it back),
pauses the stream instead of letting it skip records. Version 8 orders by completion time and
needs no such hold.

A checkpoint older than the active timeline of a table whose older instants were archived is
treated as an incremental read would treat it: the first change raises InstantNotFoundError
naming the earliest instant still available (not when the checkpoint is the latest archived
instant itself: nothing after it was archived), or, with
``hoodie.datasource.read.incr.fallback.fulltablescan.enable``, carries every row of the latest
snapshot written after the checkpoint up to its own instant (the full-table-scan fallback, with
its limits: rows overwritten since come back only as their latest version, deleted ones not at
all). The changes after it are read from the active timeline as usual.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa

from shoal.errors import InvalidArgumentError
from shoal.read.filters import Filter
from shoal.read.incremental import instant_key, normalize_bound, range_key
from shoal.read.settle import read_settled
from shoal.read.undone import check_start_not_undone
from shoal.timeline.instant import Instant
from shoal.timeline.timeline import Timeline

if TYPE_CHECKING:
    from shoal.table import Table


@dataclass(frozen=True)
class Change:
    """The changes one completed instant made to the table."""

    instant: str
    """Requested time of the instant: the ``_hoodie_commit_time`` of the records it wrote."""
    action: str
    completion_time: str | None
    checkpoint: str
    """Pass back as ``start`` to resume right after this instant."""
    table: pa.Table

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    @property
    def batches(self) -> list[pa.RecordBatch]:
        return self.table.to_batches()


class ChangeStream(Iterator[Change]):
    """Iterates over :class:`Change`s as instants complete; see :meth:`shoal.Table.stream`.

    Polls the timeline every ``poll_interval`` seconds while nothing is new, and stops after
    ``max_polls`` polls or ``timeout`` seconds (both unbounded when None).
    """

    def __init__(
        self,
        table: Table,
        start: str | _dt.datetime | None = None,
        poll_interval: float = 1.0,
        max_polls: int | None = None,
        timeout: float | None = None,
        columns: Sequence[str] | None = None,
        filters: Sequence[Filter] | None = None,
        include_deletes: bool = False,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if poll_interval < 0:
            raise InvalidArgumentError("poll_interval must not be negative")
        if max_polls is not None and max_polls < 1:
            raise InvalidArgumentError("max_polls must be at least 1")
        self._table = table
        # A datetime start is read on the table's timeline clock, as every read's bounds are.
        self._checkpoint = normalize_bound(start, "start", table._timeline().local_clock)
        self._poll_interval = poll_interval
        self._max_polls = max_polls
        self._timeout = timeout
        self._columns = list(columns) if columns is not None else None
        self._filters = list(filters) if filters is not None else None
        self._include_deletes = include_deletes
        self._sleep = sleep
        self._clock = clock
        self._changes = self._run()

    @property
    def checkpoint(self) -> str | None:
        """The checkpoint of the last change handed out (or the start)."""
        return self._checkpoint

    def __iter__(self) -> ChangeStream:
        return self

    def __next__(self) -> Change:
        return next(self._changes)

    def _run(self) -> Iterator[Change]:
        deadline = None if self._timeout is None else self._clock() + self._timeout
        polls = 0
        while True:
            timeline = self._table._timeline()
            polls += 1
            # A commit this stream handed out was rolled back or restored away since: the
            # consumer's copy holds rows the table no longer does.
            check_start_not_undone(timeline, self._checkpoint)
            ready = self._ready(timeline)
            for inst in ready:
                key = range_key(inst, timeline.config.table_version >= 8)
                # The consumer may take long between changes, while cleans go on.
                data, timeline = read_settled(timeline, self._table._timeline, partial(self._read, key))
                self._checkpoint = key
                yield Change(inst.requested_time, inst.action.value, inst.completion_time, key, data)
            if self._max_polls is not None and polls >= self._max_polls:
                return
            if deadline is not None and self._clock() >= deadline:
                return
            if not ready:
                wait = self._poll_interval
                if deadline is not None:
                    wait = max(0.0, min(wait, deadline - self._clock()))
                self._sleep(wait)

    def _read(self, end: str, timeline: Timeline) -> pa.Table:
        return self._table._read_incremental(
            timeline, self._checkpoint, end, self._columns, self._filters, self._include_deletes
        )

    def _ready(self, timeline: Timeline) -> list[Instant]:
        return ready_instants(timeline, self._checkpoint)


def ready_instants(timeline: Timeline, checkpoint: str | None) -> list[Instant]:
    """Completed data instants after ``checkpoint`` (a position on the incremental axis, None
    for the beginning) that a stream can hand out now, in order: on table version 6, none at or
    after the oldest pending write (see the module docstring)."""
    by_completion = timeline.config.table_version >= 8
    done = sorted(
        timeline.completed_data_instants(),
        key=lambda i: (range_key(i, by_completion), i.requested_time),
    )
    if checkpoint is not None:
        done = [i for i in done if range_key(i, by_completion) > checkpoint]
    if not by_completion:
        # A pending write behind the checkpoint can no longer be waited for.
        pending = [
            i.requested_time
            for i in timeline.pending_data_instants()
            if checkpoint is None or instant_key(i.requested_time) > checkpoint
        ]
        if pending:
            oldest = min(pending)
            done = [i for i in done if i.requested_time < oldest]
    return done
