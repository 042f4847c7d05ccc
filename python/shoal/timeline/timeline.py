"""The active timeline: reading instants of table versions 6 and 8, and moving shoal's own
instants through requested -> inflight -> completed (written in the version 6 layout)."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from shoal import _native
from shoal.config.table_config import TIMELINE_TIMEZONE, TableConfig
from shoal.errors import CommitConflictError, CorruptTableError, InstantNotFoundError
from shoal.fs.metadata_table import drop_metadata_table
from shoal.fs.storage import Storage
from shoal.timeline.commit_metadata import CommitMetadata
from shoal.timeline.instant import Action, Instant, State, parse_instant_file_name
from shoal.timeline.instant_time import new_instant_time, runs_on_local_time

if TYPE_CHECKING:
    from shoal.timeline.archived import ArchivedTimeline

# Actions whose completed instants change the data of the table.
DATA_ACTIONS = frozenset(
    {
        Action.COMMIT,
        Action.DELTA_COMMIT,
        Action.REPLACE_COMMIT,
        Action.COMPACTION,
        Action.LOG_COMPACTION,
        Action.CLUSTERING,
    }
)


class Timeline:
    """A snapshot of ``.hoodie/`` (v6) or ``.hoodie/timeline/`` (v8) instants.

    ``instants`` holds the effective state of every instant: one entry per (time, action),
    at its furthest state; a completed compaction is reported with action ``compaction``.
    """

    def __init__(
        self,
        storage: Storage,
        config: TableConfig,
        files: Iterable[str],
        stamps: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        """``stamps``: (size, mtime in ns) of listed file names, which lets completed metadata
        parsed by an earlier Timeline of the same files be reused."""
        self.storage = storage
        self.config = config
        self.layout_version = config.timeline_layout_version
        self.dir = config.timeline_dir
        self._metadata_cache: dict[str, CommitMetadata] = {}
        self._plan_cache: dict[str, list[dict]] = {}
        self._archive_read = False
        self._archive: ArchivedTimeline | None = None
        self._stamps = stamps or {}
        self.instants = _effective_instants(parse_instant_file_name(n) for n in files)

    @classmethod
    def load(cls, storage: Storage, config: TableConfig) -> Timeline:
        listed = [(f.name, f) for f in storage.list_files(config.timeline_dir)]
        stamps = {name: (f.size, f.mtime_ns) for name, f in listed if f.mtime_ns is not None}
        return cls(storage, config, [name for name, _ in listed], stamps)

    def reload(self) -> Timeline:
        return Timeline.load(self.storage, self.config)

    def with_completed(self, done: Instant) -> Timeline:
        """This timeline with ``done``, an instant this process has just completed, at its
        completed state: what a listing right after the completion would show unless another
        writer acted meanwhile, without listing again."""
        after = Timeline(self.storage, self.config, [], self._stamps)
        after.instants = _effective_instants([*self.instants, done])
        return after

    # ---- queries -------------------------------------------------------------------------

    def completed(self) -> list[Instant]:
        return [i for i in self.instants if i.is_completed]

    def pending(self) -> list[Instant]:
        return [i for i in self.instants if not i.is_completed]

    def completed_data_instants(self) -> list[Instant]:
        """Completed commits, delta commits, replace commits and compactions, in time order."""
        return [i for i in self.instants if i.is_completed and i.action in DATA_ACTIONS]

    def pending_compactions(self) -> list[Instant]:
        return [i for i in self.instants if i.action == Action.COMPACTION and not i.is_completed]

    def pending_data_instants(self) -> list[Instant]:
        return [
            i
            for i in self.instants
            if not i.is_completed and i.action in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
        ]

    def last_completed_data_instant(self) -> Instant | None:
        done = self.completed_data_instants()
        return done[-1] if done else None

    def last_instant_time(self) -> str | None:
        return self.instants[-1].requested_time if self.instants else None

    @cached_property
    def _by_time(self) -> dict[str, Instant]:
        # A savepoint carries the time of the commit it pins: a lookup by time means the commit.
        return {i.requested_time: i for i in self.instants if i.action != Action.SAVEPOINT}

    def get(self, instant_time: str) -> Instant | None:
        return self._by_time.get(instant_time)

    def first_instant_time(self) -> str | None:
        return self.instants[0].requested_time if self.instants else None

    def first_data_instant_time(self, until: str | None = None, without: str | None = None) -> str | None:
        """Where the data timeline starts: the first commit, delta commit, replace commit or
        compaction (in any state) that is not savepointed; data instants before it were archived.

        Not simply the first instant: clean and rollback instants are archived by their own
        counts and can be older than archived commits, and with ``hoodie.archive.beyond.savepoint``
        a savepointed commit stays while later ones are archived (Hudi's
        ``getFirstNonSavepointCommit``). When every data instant is savepointed (a restore to the
        latest savepoint leaves only it), the first of them: the commits archived before it stay
        committed, as in Hudi's file-system view, whose commit timeline holds no savepoints.

        ``until``: as if the data instants after it were gone (where a restore to it starts);
        ``without``: as if that data instant were gone (where a rollback of it leaves the start)."""
        if until is None and without is None:
            return self._first_data_instant_time
        return self._first_data_instant_time_of(until, without)

    @cached_property
    def _first_data_instant_time(self) -> str | None:
        # File-system views ask for every file older than the timeline's completed instants.
        return self._first_data_instant_time_of(None, None)

    def _first_data_instant_time_of(self, until: str | None, without: str | None) -> str | None:
        savepointed = {i.requested_time for i in self.instants if i.action == Action.SAVEPOINT}
        first_savepointed = None
        for i in self.instants:
            if i.action not in DATA_ACTIONS or (until is not None and i.requested_time > until):
                continue
            if i.requested_time == without:
                continue
            if i.requested_time not in savepointed:
                return i.requested_time
            first_savepointed = first_savepointed or i.requested_time
        return first_savepointed

    def is_completed_or_before_start(self, instant_time: str) -> bool:
        """True if the instant completed, or predates the active timeline (so it was archived)."""
        inst = self._by_time.get(instant_time)
        if inst is not None:
            return inst.is_completed
        first = self.first_data_instant_time()
        return first is None or instant_time < first

    # ---- instant contents ----------------------------------------------------------------

    def path_of(self, instant: Instant) -> str:
        return f"{self.dir}/{instant.file_name(self.layout_version)}"

    def read_instant(self, instant: Instant) -> bytes:
        return self.storage.read_bytes(self.path_of(instant))

    def commit_metadata(self, instant: Instant | str) -> CommitMetadata:
        """The completed metadata of a data instant (cached: completed files never change)."""
        inst = self._by_time.get(instant) if isinstance(instant, str) else instant
        if inst is None or not inst.is_completed:
            raise InstantNotFoundError(f"no completed instant {instant}")
        key = inst.requested_time
        if key not in self._metadata_cache:
            self._metadata_cache[key] = self._shared_metadata(inst)
        return self._metadata_cache[key]

    def _shared_metadata(self, inst: Instant) -> CommitMetadata:
        # A write loads the timeline several times, and sizing, cleaning and the MOR delete
        # lookup each read commits far back: without sharing, every write re-parses every
        # commit on the active timeline. Shared by file name, size and modification time, so a
        # file rewritten in place (a damaged or repaired commit) is read again.
        path = self.path_of(inst)
        stamp = self._stamps.get(path.rsplit("/", 1)[-1])
        if stamp is None:
            return CommitMetadata.from_bytes(self.read_instant(inst), what=path)
        key = (self.storage.base_uri, path, *stamp)
        cached = _SHARED_METADATA.get(key)
        if cached is None:
            cached = CommitMetadata.from_bytes(self.read_instant(inst), what=path)
            _SHARED_METADATA.put(key, cached, stamp[0])
        return cached

    def compaction_plan(self, instant_time: str) -> list[dict]:
        """The operations of a compaction plan (``HoodieCompactionPlan.operations``); cached,
        since a requested plan never changes."""
        cached = self._plan_cache.get(instant_time)
        if cached is not None:
            return cached
        inst = Instant(instant_time, Action.COMPACTION, State.REQUESTED)
        try:
            data = self.storage.read_bytes(self.path_of(inst))
        except FileNotFoundError:
            raise InstantNotFoundError(f"no compaction plan {inst.file_name(self.layout_version)}") from None
        operations: list[dict] = []
        if data:
            try:
                records = json.loads(_native.avro_container_decode(data))
            except ValueError as e:
                raise CorruptTableError(f"cannot decode compaction plan {instant_time}: {e}") from e
            operations = list((records[0] if records else {}).get("operations") or [])
        self._plan_cache[instant_time] = operations
        return operations

    def archived(self) -> ArchivedTimeline | None:
        """The instants archival moved off this timeline (read once per Timeline: the archive
        changes only with the active timeline); None when nothing was archived."""
        if not self._archive_read:
            # archived.py builds on this module: imported when first needed.
            from shoal.timeline.archived import ArchivedTimeline, has_archived_instants

            if has_archived_instants(self.storage, self.config):
                self._archive = ArchivedTimeline.load(self.storage, self.config)
            self._archive_read = True
        return self._archive

    def latest_schema(self, instants: Sequence[Instant] | None = None) -> str | None:
        """The Avro schema of the latest completed data instant that recorded one (of
        ``instants``, in timeline order, when given)."""
        for inst in reversed(self.completed_data_instants() if instants is None else instants):
            schema = self.commit_metadata(inst).schema
            if schema:
                return schema
        return None

    # ---- writing (layout 1) --------------------------------------------------------------

    @property
    def local_clock(self) -> bool:
        """Whether the table's instants run on the machine's local time rather than UTC
        (``hoodie.table.timeline.timezone``; Hudi's default, the local one, when unset)."""
        return runs_on_local_time(self.config.get(TIMELINE_TIMEZONE))

    def new_instant_time(self) -> str:
        """A time strictly greater than every instant on the timeline, on the table's timeline
        clock (``hoodie.table.timeline.timezone``; Hudi's default, the local one, when unset)."""
        return new_instant_time(after=self.last_instant_time(), local=self.local_clock)

    def create_requested(self, instant_time: str, action: Action, content: bytes = b"") -> Instant:
        """Publishes ``<t>.<action>.requested``; fails if an instant at ``t`` exists already."""
        existing = self.get(instant_time)
        if existing is not None:
            raise CommitConflictError(f"instant {instant_time} already exists: {existing}")
        # Every write, rollback, clean, compaction and restore starts here: the first one drops a
        # metadata table that shoal would leave stale.
        drop_metadata_table(self.storage, self.config)
        inst = Instant(instant_time, action, State.REQUESTED)
        self.storage.create_exclusive(self.path_of(inst), content)
        return inst

    def transition_to_inflight(self, instant: Instant, content: bytes = b"") -> Instant:
        # A plan another writer requested (a compaction, a clean) is run from here.
        drop_metadata_table(self.storage, self.config)
        inflight = instant.with_state(State.INFLIGHT)
        self.storage.create_exclusive(self.path_of(inflight), content)
        return inflight

    def complete(self, instant: Instant, content: bytes) -> Instant:
        """Publishes the completed file atomically: the commit point of the instant."""
        done = instant.with_state(State.COMPLETED)
        self.storage.create_exclusive(self.path_of(done), content)
        return done

    def delete_instant_files(self, instant_time: str) -> None:
        """Removes every state file of an instant (rollback of a failed write), completed last."""
        files = [f.name for f in self.storage.list_files(self.dir)]
        states = [(n, parse_instant_file_name(n)) for n in files]
        mine = [(n, i) for n, i in states if i is not None and i.requested_time == instant_time]
        # Requested, then inflight, then completed, as Java does: a crash midway leaves a state
        # that the next rollback or archival pass recognises and finishes.
        for name, _ in sorted(mine, key=lambda p: int(p[1].state) if p[1] else 0):
            self.storage.delete(f"{self.dir}/{name}", missing_ok=True)
        self.delete_temp_files(instant_time, files)

    def delete_temp_files(self, instant_time: str, files: list[str] | None = None) -> None:
        """Removes the temp files a writer killed while publishing a state file of the instant
        left behind (fs/storage.py publishes through a temp file)."""
        if files is None:
            files = [f.name for f in self.storage.list_files(self.dir)]
        for name in files:
            if name.startswith(f"{instant_time}.") and name.endswith(".tmp"):
                self.storage.delete(f"{self.dir}/{name}", missing_ok=True)


class _MetadataCache:
    """Parsed completed-instant metadata, least recently used out once the files it came from
    exceed ``max_bytes``. Callers treat CommitMetadata from a Timeline as read-only."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple, tuple[CommitMetadata, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple) -> CommitMetadata | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: tuple, metadata: CommitMetadata, size: int) -> None:
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (metadata, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped


# Bounded by the bytes of the JSON parsed: the parsed objects take a small multiple of that.
_SHARED_METADATA = _MetadataCache(max_bytes=32 * 2**20)


def _effective_instants(parsed: Iterable[Instant | None]) -> list[Instant]:
    # Keyed by time, and apart for savepoints: ``T.savepoint`` sits beside the ``T.commit`` it pins.
    best: dict[tuple[str, bool], Instant] = {}
    for inst in parsed:
        if inst is None:
            continue
        key = (inst.requested_time, inst.action == Action.SAVEPOINT)
        cur = best.get(key)
        if cur is None:
            best[key] = inst
            continue
        merged_action = cur.action
        # A compaction completes as a commit: keep calling it a compaction.
        if Action.COMPACTION in (cur.action, inst.action):
            merged_action = Action.COMPACTION
        elif Action.LOG_COMPACTION in (cur.action, inst.action):
            merged_action = Action.LOG_COMPACTION
        elif Action.CLUSTERING in (cur.action, inst.action):
            merged_action = Action.CLUSTERING
        winner = inst if inst.state > cur.state else cur
        if winner.action != merged_action:
            winner = Instant(winner.requested_time, merged_action, winner.state, winner.completion_time)
        best[key] = winner
    return sorted(best.values(), key=Instant.sort_key)
