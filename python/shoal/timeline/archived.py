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
from shoal.errors import CorruptTableError, InstantNotFoundError, UnsupportedError
from shoal.fs.storage import Storage
from shoal.schemas import load_schema
from shoal.timeline.commit_metadata import CommitMetadata
from shoal.timeline.instant import Action, Instant, State
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


class ArchivedTimeline:
    """The instants archived off a table's active timeline, read from ``.hoodie/archived/``.

    ``instants`` holds one entry per archived instant at its furthest archived state (a
    compaction whose completed ``commit`` was archived is reported as a completed compaction,
    as on the active timeline); ``entries`` the raw ``HoodieArchivedMetaEntry`` records.
    """

    def __init__(self, entries: Iterable[dict[str, Any]]) -> None:
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

    @classmethod
    def load(cls, storage: Storage, config: TableConfig) -> ArchivedTimeline:
        """Reads every archive file of the table (version 6 layout)."""
        if config.table_version >= 8:
            raise UnsupportedError(
                "reading the archived timeline of table version 8 (the LSM timeline under "
                ".hoodie/timeline/history) is not supported"
            )
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
        """When the instant completed, as the archiver recorded it (``stateTransitionTime``:
        the modification time of the completed file), if it did."""
        completed = self._completed.get(instant_time)
        value = completed.get("stateTransitionTime") if completed else None
        return str(value) if value else None

    def metadata(self, instant_time: str) -> dict[str, Any] | None:
        """The archived metadata of a completed instant (commit metadata, clean metadata,
        rollback metadata, ...) as a dict, or the plan of a pending one; None if none was
        recorded."""
        inst = self._by_time.get(instant_time)
        if inst is None:
            raise InstantNotFoundError(f"no archived instant {instant_time}")
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
