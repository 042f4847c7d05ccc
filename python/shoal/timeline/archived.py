"""The archived timeline of table version 6 (HUDI_FORMAT §2.7, §8.5).

Archival moves old instants off the active timeline into ``.hoodie/archived/``: Hudi log files
named ``.commits_.archive.<N>_<writeToken>`` (file id ``commits``, no base instant, extension
``archive``) whose AVRO_DATA_BLOCKs hold ``HoodieArchivedMetaEntry`` records, one per state
file of an archived instant (requested, inflight, completed) with ``commitTime``,
``actionType``, ``actionState`` and the state's plan or metadata in the matching field. Blocks
carry only a ``SCHEMA`` header, as Hudi's archiver writes them.

The entry schema (``schemas/HoodieArchivedMetaEntry.avsc``) follows Hudi 0.14's field list
(with ``HoodieInflightReplaceMetadata``, ``hoodieIndexCommitMetadata`` and
``stateTransitionTime``). Its nested records are the writer schemas Hudi itself writes
(``HoodieCommitMetadata``/``HoodieWriteStat`` and ``HoodieCompactionPlan`` of 1.0;
``HoodieRollbackMetadata``, ``HoodieRequestedReplaceMetadata``, ``HoodieCleanMetadata``,
``HoodieCleanerPlan`` and ``HoodieSavepointMetadata`` of 0.14/0.15) or, for the rest, the avsc
of apache/hudi: every field Java's reader lacks is ignored and every field it has but we lack
has a default, so Avro resolution reads them either way.

Readers decode each block with its own ``SCHEMA`` header, so archives written by Hudi (any
0.x version) read the same way. An instant can be in the archive and still on the active
timeline after an interrupted archival; entries are de-duplicated by (time, action, state).

Table version 8 keeps its archived timeline as Hudi 1.x's LSM timeline instead, read by
:mod:`shoal.timeline.lsm_timeline` (defined by Java's ``LSMTimeline``, ``LSMTimelineWriter``,
``HoodieLSMTimelineManifest`` and ``HoodieLSMTimelineInstant``): one record per completed instant
holding its completion time and the bytes of its completed file (``metadata``) and plan. The same
:class:`ArchivedTimeline` answers for both versions.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shoal import _native
from shoal.config.table_config import TableConfig
from shoal.errors import CorruptDataError, CorruptTableError, InstantNotFoundError
from shoal.fs.storage import Storage
from shoal.schemas import load_schema
from shoal.timeline.commit_metadata import CommitMetadata, decode_instant_content
from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.lsm_timeline import LSMTimelineInstant, load_lsm_timeline
from shoal.timeline.timeline import DATA_ACTIONS, _effective_instants

log = logging.getLogger(__name__)

ARCHIVE_FILE_ID = "commits"
ARCHIVE_FILE_PREFIX = f".{ARCHIVE_FILE_ID}_.archive."
# Hudi's HoodieLogFormat.UNKNOWN_WRITE_TOKEN, the token of every archive file Java writes.
ARCHIVE_WRITE_TOKEN = "1-0-1"
MERGE_PLAN_NAME = "mergeArchivePlan"
_ARCHIVE_NAME = re.compile(r"^\.commits_\.archive\.(\d+)(?:_(\d+-\d+-\d+))?$")

# ArchivedTimelineV1.getMetadataKey: the field holding a completed instant's metadata.
_COMPLETED_METADATA_FIELD = {
    "commit": "hoodieCommitMetadata",
    "deltacommit": "hoodieCommitMetadata",
    "replacecommit": "hoodieReplaceCommitMetadata",
    "clean": "hoodieCleanMetadata",
    "rollback": "hoodieRollbackMetadata",
    "savepoint": "hoodieSavePointMetadata",
    "indexing": "hoodieIndexCommitMetadata",
}
# And the field holding a pending instant's plan.
_PENDING_PLAN_FIELD = {
    "compaction": "hoodieCompactionPlan",
    "logcompaction": "hoodieCompactionPlan",
    "clean": "hoodieCleanerPlan",
    "replacecommit": "hoodieRequestedReplaceMetadata",
    "clustering": "hoodieRequestedReplaceMetadata",
}
_ACTIONS = {a.value: a for a in Action}


@functools.cache
def entry_schema() -> str:
    """The ``HoodieArchivedMetaEntry`` writer schema, compact (as Java's ``Schema.toString``)."""
    return json.dumps(json.loads(load_schema("HoodieArchivedMetaEntry")), separators=(",", ":"))


@functools.cache
def merge_plan_schema() -> str:
    """The ``HoodieMergeArchiveFilePlan`` writer schema."""
    return json.dumps(json.loads(load_schema("HoodieMergeArchiveFilePlan")), separators=(",", ":"))


# ---- archive files ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ArchiveFile:
    """One ``.commits_.archive.<version>_<token>`` file."""

    path: str
    version: int
    size: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def archive_file_name(version: int, write_token: str = ARCHIVE_WRITE_TOKEN) -> str:
    """The name of archive log file ``version`` (``HoodieLogFile`` naming with an empty base
    instant)."""
    return f"{ARCHIVE_FILE_PREFIX}{version}_{write_token}"


def parse_archive_file_version(name: str) -> int | None:
    m = _ARCHIVE_NAME.match(name)
    return int(m.group(1)) if m else None


def list_archive_files(storage: Storage, config: TableConfig) -> list[ArchiveFile]:
    """The archive log files of a version 6 table, oldest (lowest version) first."""
    out = []
    for f in storage.list_files(config.archive_dir):
        version = parse_archive_file_version(f.name)
        if version is not None:
            out.append(ArchiveFile(f.path, version, f.size))
    return sorted(out, key=lambda a: (a.version, a.name))


def encode_archive_blocks(entries: Sequence[dict[str, Any]], batch_size: int) -> bytes:
    """AVRO_DATA_BLOCKs of ``batch_size`` entries each (``hoodie.commits.archival.batch``)."""
    schema = entry_schema()
    blocks = [
        _native.encode_avro_json_block(json.dumps(list(entries[i : i + batch_size])), schema)
        for i in range(0, len(entries), batch_size)
    ]
    return b"".join(blocks)


def decode_archive_file(data: bytes, what: str) -> list[dict[str, Any]]:
    """The entries of an archive log file, in file order.

    A damaged span (a torn write by a crashed writer that appended in place) is skipped with a
    warning, as Hudi's log reader skips corrupt blocks; a block that frames but does not
    decode means the file is not what it claims to be.
    """
    entries: list[dict[str, Any]] = []
    for block in _native.read_log_blocks(data):
        if block.is_corrupt:
            log.warning("skipping %d damaged bytes at offset %d of %s", block.size, block.offset, what)
            continue
        if block.block_type != "AVRO_DATA_BLOCK":
            raise CorruptTableError(f"{what}: unexpected {block.block_type} in an archive file")
        try:
            entries.extend(json.loads(block.records_json()))
        except ValueError as e:
            raise CorruptTableError(f"{what}: cannot decode archived entries: {e}") from e
    return entries


def read_archive_file(storage: Storage, path: str) -> list[dict[str, Any]]:
    return decode_archive_file(storage.read_bytes(path), path)


def entry_key(entry: dict[str, Any]) -> tuple[str, str, str]:
    """(commit time, action type, action state): what identifies an archived state file."""
    return (str(entry.get("commitTime")), str(entry.get("actionType")), str(entry.get("actionState")))


# ---- the timeline -----------------------------------------------------------------------------


def _instant_of(entry: dict[str, Any]) -> Instant | None:
    action = _ACTIONS.get(str(entry.get("actionType")))
    time = entry.get("commitTime")
    if action is None or not time:
        return None
    state_name = entry.get("actionState") or State.COMPLETED.name
    try:
        state = State[state_name]
    except KeyError:
        return None
    return Instant(str(time), action, state)


def _lsm_instant_of(row: LSMTimelineInstant) -> Instant | None:
    action = _ACTIONS.get(row.action)
    if action is None:
        return None
    # The LSM record keeps the completed action only; a plan beside a commit is a compaction's
    # and beside a delta commit a log compaction's (as ArchivedTimelineV2 finds compactions). A
    # replacecommit's plan may be a clustering's or an insert overwrite's: it stays a replacecommit.
    if row.plan is not None and action == Action.COMMIT:
        action = Action.COMPACTION
    elif row.plan is not None and action == Action.DELTA_COMMIT:
        action = Action.LOG_COMPACTION
    return Instant(row.instant_time, action, State.COMPLETED, row.completion_time)


def _decode_lsm_metadata(data: bytes, what: str) -> dict[str, Any] | None:
    """The bytes of an archived completed instant file: an Avro container (v8) or JSON."""
    if not data.strip():
        return None
    try:
        value = decode_instant_content(data)
    except (CorruptDataError, ValueError) as e:
        raise CorruptTableError(f"{what}: cannot decode the archived metadata: {e}") from e
    if value is not None and not isinstance(value, dict):
        raise CorruptTableError(f"{what}: the archived metadata is not a record")
    return value


def has_archived_instants(storage: Storage, config: TableConfig) -> bool:
    """True if instants were moved off the active timeline (v6 archive files, v8 LSM history)."""
    if config.table_version >= 8:
        return any(
            f.name.endswith(".parquet") or f.name.startswith("manifest_")
            for f in storage.list_files(f"{config.timeline_dir}/history")
        )
    return any(f.name.startswith(".commits_.archive") for f in storage.list_files(config.archive_dir))


class ArchivedTimeline:
    """The instants archived off a table's active timeline: ``.hoodie/archived/`` on table
    version 6, the LSM timeline ``.hoodie/timeline/history/`` on version 8.

    ``instants`` holds one entry per archived instant at its furthest archived state (a
    compaction whose completed ``commit`` was archived is reported as a completed compaction,
    as on the active timeline; on version 8 they carry their completion time); ``entries`` the
    raw records: ``HoodieArchivedMetaEntry`` on version 6, ``HoodieLSMTimelineInstant`` (with
    ``metadata`` and ``plan`` as bytes) on version 8.
    """

    def __init__(
        self, entries: Iterable[dict[str, Any]] = (), lsm_instants: Iterable[LSMTimelineInstant] | None = None
    ) -> None:
        self._lsm = lsm_instants is not None
        if lsm_instants is not None:
            self._init_lsm(list(lsm_instants))
            return
        unique: dict[tuple[str, str, str], dict[str, Any]] = {}
        for entry in entries:
            unique.setdefault(entry_key(entry), entry)
        self.entries: list[dict[str, Any]] = sorted(unique.values(), key=entry_key)
        self._by_state = {
            (i.requested_time, i.action, i.state): e
            for e in self.entries
            if (i := _instant_of(e)) is not None
        }
        self._completed = {t: e for (t, _, state), e in self._by_state.items() if state == State.COMPLETED}
        self.instants = _effective_instants(_instant_of(e) for e in self.entries)
        self._by_time = {i.requested_time: i for i in self.instants}

    def _init_lsm(self, rows: list[LSMTimelineInstant]) -> None:
        self.entries = [r.to_record() for r in rows]
        # entry() takes the action as written, so the keys use the stored (completed) action.
        self._by_state = {
            (r.instant_time, _ACTIONS[r.action], State.COMPLETED): e
            for r, e in zip(rows, self.entries, strict=True)
            if r.action in _ACTIONS
        }
        by_instant = {
            i: e for r, e in zip(rows, self.entries, strict=True) if (i := _lsm_instant_of(r)) is not None
        }
        self.instants = sorted(by_instant, key=Instant.sort_key)
        self._by_time = {i.requested_time: i for i in self.instants}
        self._completed = {i.requested_time: by_instant[i] for i in self.instants}

    @classmethod
    def load(cls, storage: Storage, config: TableConfig) -> ArchivedTimeline:
        """Reads the table's archived timeline: every archive file (version 6) or the latest
        snapshot of the LSM timeline (version 8; empty when its directory is empty or missing)."""
        if config.table_version >= 8:
            return cls(lsm_instants=load_lsm_timeline(storage, config))
        entries: list[dict[str, Any]] = []
        for f in list_archive_files(storage, config):
            entries.extend(read_archive_file(storage, f.path))
        return cls(entries)

    # ---- queries -------------------------------------------------------------------------

    def completed(self) -> list[Instant]:
        return [i for i in self.instants if i.is_completed]

    def completed_data_instants(self) -> list[Instant]:
        """Archived commits, delta commits, replace commits and compactions, in time order."""
        return [i for i in self.instants if i.is_completed and i.action in DATA_ACTIONS]

    def get(self, instant_time: str) -> Instant | None:
        return self._by_time.get(instant_time)

    def __len__(self) -> int:
        return len(self.instants)

    def entry(self, instant_time: str, action: Action | str, state: State) -> dict[str, Any] | None:
        """The archived record of one state file (action as in its file name: a completed
        compaction is a ``commit``)."""
        act = action if isinstance(action, Action) else _ACTIONS.get(action)
        if act is None:
            return None
        return self._by_state.get((instant_time, act, state))

    def state_transition_time(self, instant_time: str) -> str | None:
        """When the instant completed, as the archiver recorded it, if it did: on version 6
        ``stateTransitionTime`` (the modification time of the completed file), on version 8 the
        completion time."""
        completed = self._completed.get(instant_time)
        value = completed.get("completionTime" if self._lsm else "stateTransitionTime") if completed else None
        return str(value) if value else None

    def metadata(self, instant_time: str) -> dict[str, Any] | None:
        """The archived metadata of a completed instant (commit metadata, clean metadata,
        rollback metadata, ...) as a dict, or the plan of a pending one; None if none was
        recorded. On version 8 it is the decoded content of the archived completed file."""
        inst = self._by_time.get(instant_time)
        if inst is None:
            raise InstantNotFoundError(f"no archived instant {instant_time}")
        if self._lsm:
            data = self._completed[instant_time].get("metadata")
            return _decode_lsm_metadata(data, f"archived instant {instant_time}") if data else None
        if inst.is_completed:
            entry = self._completed.get(instant_time)
            field = _COMPLETED_METADATA_FIELD.get(str(entry.get("actionType"))) if entry else None
        else:
            entry = self._by_state.get((instant_time, inst.action, State.REQUESTED))
            field = _PENDING_PLAN_FIELD.get(inst.action.value)
        if entry is None or field is None:
            return None
        value = entry.get(field)
        return value if isinstance(value, dict) else None

    def commit_metadata(self, instant: Instant | str) -> CommitMetadata:
        """The commit metadata of an archived completed data instant."""
        time = instant if isinstance(instant, str) else instant.requested_time
        inst = self._by_time.get(time)
        if inst is None or not inst.is_completed or inst.action not in DATA_ACTIONS:
            raise InstantNotFoundError(f"no archived completed commit {time}")
        meta = self.metadata(time)
        return CommitMetadata.from_dict(meta) if meta is not None else CommitMetadata()
