"""Instants: (requested time, action, state[, completion time]) and their file names (HUDI_FORMAT §2)."""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass


class State(enum.IntEnum):
    """Instant states; the int order is the order of the state machine."""

    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


class Action(str, enum.Enum):
    """Timeline actions (HoodieTimeline)."""

    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    REPLACE_COMMIT = "replacecommit"
    CLUSTERING = "clustering"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"
    SCHEMA_COMMIT = "schemacommit"


# Actions whose completed file carries another action's extension.
_COMPLETED_EXTENSION = {
    Action.COMPACTION: Action.COMMIT,
    Action.LOG_COMPACTION: Action.DELTA_COMMIT,
    Action.CLUSTERING: Action.REPLACE_COMMIT,
}
_ACTIONS = {a.value: a for a in Action}


@dataclass(frozen=True)
class Instant:
    """One state of one action on the timeline.

    ``completion_time`` is set for completed instants of table version 8 (from the file name).
    """

    requested_time: str
    action: Action
    state: State
    completion_time: str | None = None

    @property
    def timestamp(self) -> str:
        return self.requested_time

    @property
    def is_completed(self) -> bool:
        return self.state == State.COMPLETED

    def sort_key(self) -> tuple[str, str, int]:
        # Java's comparator: time, then action with compaction compared as commit, then state.
        action = Action.COMMIT.value if self.action == Action.COMPACTION else self.action.value
        return (self.requested_time, action, int(self.state))

    def file_name(self, layout_version: int = 1) -> str:
        """The timeline file name of this instant (layout 1 = table v6, layout 2 = v8)."""
        t = self.requested_time
        if self.state == State.REQUESTED:
            return f"{t}.{self.action.value}.requested"
        if self.state == State.INFLIGHT:
            if self.action == Action.COMMIT:
                return f"{t}.inflight"
            return f"{t}.{self.action.value}.inflight"
        ext = _COMPLETED_EXTENSION.get(self.action, self.action).value
        if layout_version >= 2 and self.completion_time:
            return f"{t}_{self.completion_time}.{ext}"
        return f"{t}.{ext}"

    def with_state(self, state: State, completion_time: str | None = None) -> Instant:
        return Instant(self.requested_time, self.action, state, completion_time)

    def __str__(self) -> str:
        done = f" -> {self.completion_time}" if self.completion_time else ""
        return f"[{self.requested_time}{done}, {self.action.value}, {self.state.name}]"


# Every timeline load parses every file name of ``.hoodie/``: thousands when archival is off, and
# a write loads the timeline several times. Instants are immutable, so parses are shared.
@functools.lru_cache(maxsize=1 << 16)
def parse_instant_file_name(name: str) -> Instant | None:
    """Parses a timeline file name of either layout; None for anything else (properties, crc, tmp)."""
    if name.startswith(".") or name.endswith((".crc", ".tmp")) or "." not in name:
        return None
    ts_part, _, ext = name.partition(".")
    completion = None
    if "_" in ts_part:
        ts_part, completion = ts_part.split("_", 1)
        if not completion.isdigit():
            return None
    if not ts_part.isdigit():
        return None
    if ext == "inflight":
        return Instant(ts_part, Action.COMMIT, State.INFLIGHT)
    if ext.endswith(".inflight") or ext.endswith(".requested"):
        action_name, _, state_name = ext.rpartition(".")
        action = _ACTIONS.get(action_name)
        if action is None:
            return None
        state = State.INFLIGHT if state_name == "inflight" else State.REQUESTED
        return Instant(ts_part, action, state)
    action = _ACTIONS.get(ext)
    if action is None:
        return None
    return Instant(ts_part, action, State.COMPLETED, completion)
