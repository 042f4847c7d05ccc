"""Archival: moving old instants off the active timeline into ``.hoodie/archived/`` (Hudi's
``HoodieTimelineArchiver`` for table version 6; the file layout is in
:mod:`shoal.timeline.archived`).

Which instants go (``instants_to_archive``):

* cleans and rollbacks, per action: once more than ``hoodie.keep.max.commits`` are completed,
  the oldest down to ``hoodie.keep.min.commits``;
* completed commits, delta commits, replace commits and compactions: once more than
  ``hoodie.keep.max.commits`` are completed, the oldest down to ``hoodie.keep.min.commits``,
  but never one at or after
  - the oldest pending write, compaction or replace commit (and the last completed commit
    before it, so the timeline keeps no hole around an inflight instant),
  - the first savepoint. With ``hoodie.archive.beyond.savepoint`` on a copy-on-write table,
    savepointed commits stay and the commits after them may go up to the first one whose base
    files are still in a latest file slice, or that replaced file groups: readers such as
    hudi-rs take only instants older than the first active commit as archived, so they would
    hide those files, and the replaced file groups would come back. Merge-on-read tables stop
    at the first savepoint all the same: log scanners would skip the blocks of commits
    archived after a commit that stays,
  - the earliest commit the last completed clean retains (``earliestCommitToRetain``): the
    cleaner still reads those commits' metadata, and incremental reads need them,
  - a completed replace commit the cleaner has not passed yet: without it on the timeline the
    file groups it replaced would be visible again,
  - merge-on-read with the NUM_COMMITS or NUM_AND_TIME compaction trigger: the last
    compaction, or the delta commit from which ``hoodie.compact.inline.max.delta.commits``
    delta commits are still to be counted (``CompactionUtils.getOldestInstantToRetainForCompaction``).

How (``archive``), so that a crash at any point loses nothing and leaves the table readable:

1. a merge of small archive files that a crash interrupted is completed or undone;
2. the entries of every state file of the chosen instants are written to a new archive file
   (published atomically; files roll over past 512 MiB, Hudi's log size threshold); state
   files already in the newest archive file, left by an interrupted run, are not written again;
3. the instant files are deleted from the active timeline: requested and inflight files first,
   then completed ones in time order (Hudi's order: a pending file never outlives its completed
   one, which would look like a failed write or a pending compaction);
4. the marker directories of archived instants are removed;
5. with ``hoodie.archive.merge.enable``, small archive files are merged (see ``merge_small_archive_files``).

Readers need none of the archived instants: instants older than the first active data instant
are taken as committed (``Timeline.first_data_instant_time``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import logging
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shoal import _native
from shoal.config.table_config import TableConfig, TableType
from shoal.config.write_config import (
    ARCHIVE_ASYNC,
    ARCHIVE_AUTOMATIC,
    ARCHIVE_BATCH,
    ARCHIVE_BEYOND_SAVEPOINT,
    ARCHIVE_MAX_COMMITS,
    ARCHIVE_MERGE_ENABLE,
    ARCHIVE_MERGE_FILES_BATCH,
    ARCHIVE_MERGE_SMALL_FILE_LIMIT,
    ARCHIVE_MIN_COMMITS,
    COMPACT_MAX_DELTA_COMMITS,
    COMPACT_TRIGGER_STRATEGY,
    WriteConfig,
)
from shoal.errors import CorruptTableError, ShoalError
from shoal.fs.markers import delete_markers
from shoal.fs.metadata_table import drop_metadata_table
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
from shoal.fs.storage import Storage
from shoal.fs.view import FileSystemView
from shoal.timeline.archived import (
    MERGE_PLAN_NAME,
    archive_file_name,
    encode_archive_blocks,
    entry_key,
    entry_schema,
    list_archive_files,
    merge_plan_schema,
    read_archive_file,
)
from shoal.timeline.commit_metadata import AVRO_CONTAINER_MAGIC, decode_instant_content
from shoal.timeline.instant import Action, Instant, State, parse_instant_file_name
from shoal.timeline.instant_time import format_instant
from shoal.timeline.lock import WRITE, table_lock
from shoal.timeline.timeline import DATA_ACTIONS, Timeline
from shoal.write.concurrency import Concurrency

log = logging.getLogger(__name__)

# HoodieLogFormat's default size threshold: an archive file rolls over past it.
ARCHIVE_FILE_MAX_SIZE = 512 * 1024 * 1024

# Actions whose state files belong together (HoodieInstant.getComparableAction): a compaction's
# requested and inflight files and its completed ``commit`` are one instant.
_COMPARABLE = {
    Action.COMPACTION: Action.COMMIT,
    Action.LOG_COMPACTION: Action.DELTA_COMMIT,
    Action.CLUSTERING: Action.REPLACE_COMMIT,
}


@dataclass(frozen=True)
class ArchivalSettings:
    """The options archival reads, resolved from a :class:`WriteConfig`."""

    min_commits: int = 20
    max_commits: int = 30
    batch: int = 10
    beyond_savepoint: bool = False
    merge_enable: bool = False
    merge_small_file_limit: int = 20 * 1024 * 1024
    merge_files_batch: int = 10
    compaction_trigger: str = "NUM_COMMITS"
    max_delta_commits: int = 5

    @classmethod
    def from_config(cls, wc: WriteConfig) -> ArchivalSettings:
        return cls(
            min_commits=wc.get(ARCHIVE_MIN_COMMITS),
            max_commits=wc.get(ARCHIVE_MAX_COMMITS),
            batch=wc.get(ARCHIVE_BATCH),
            beyond_savepoint=wc.get(ARCHIVE_BEYOND_SAVEPOINT),
            merge_enable=wc.get(ARCHIVE_MERGE_ENABLE),
            merge_small_file_limit=wc.get(ARCHIVE_MERGE_SMALL_FILE_LIMIT),
            merge_files_batch=wc.get(ARCHIVE_MERGE_FILES_BATCH),
            compaction_trigger=wc.get(COMPACT_TRIGGER_STRATEGY),
            max_delta_commits=wc.get(COMPACT_MAX_DELTA_COMMITS),
        )


@dataclass
class ArchiveResult:
    """What one archival run did."""

    archived: list[Instant] = field(default_factory=list)
    """The instants moved off the active timeline, in time order."""
    archive_files: list[str] = field(default_factory=list)
    """Archive files written (paths relative to the table)."""
    already_archived: int = 0
    """State files found in the archive already (left behind by an interrupted run)."""
    merged_file: str | None = None
    """The archive file small files were merged into, if a merge ran."""
    recovered_merge: str | None = None
    """What became of a merge a crash interrupted, if there was one."""


# ---- which instants ---------------------------------------------------------------------------


def instants_to_archive(
    timeline: Timeline, table_config: TableConfig, settings: ArchivalSettings
) -> list[Instant]:
    """The instants (effective: one per time and action) archival would move now, in time order."""
    chosen = _cleans_and_rollbacks_to_archive(timeline, settings) + _commits_to_archive(
        timeline, table_config, settings
    )
    return sorted(chosen, key=Instant.sort_key)


def _over_retained(timeline: Timeline, settings: ArchivalSettings) -> bool:
    """Whether ``timeline`` holds more completed data instants, cleans or rollbacks than
    ``hoodie.keep.max.commits``: without that, :func:`instants_to_archive` chooses nothing."""
    counts = Counter(
        "data" if i.action in DATA_ACTIONS else i.action for i in timeline.instants if i.is_completed
    )
    return max(counts["data"], counts[Action.CLEAN], counts[Action.ROLLBACK]) > settings.max_commits


def _cleans_and_rollbacks_to_archive(timeline: Timeline, settings: ArchivalSettings) -> list[Instant]:
    out: list[Instant] = []
    for action in (Action.CLEAN, Action.ROLLBACK):
        done = [i for i in timeline.instants if i.action == action and i.is_completed]
        if len(done) > settings.max_commits:
            out += done[: len(done) - settings.min_commits]
    return out


def _commits_to_archive(
    timeline: Timeline, table_config: TableConfig, settings: ArchivalSettings
) -> list[Instant]:
    commits = timeline.completed_data_instants()
    if len(commits) <= settings.max_commits:
        return []
    savepoints = [
        i.requested_time for i in timeline.instants if i.action == Action.SAVEPOINT and i.is_completed
    ]
    limits = [
        ("the oldest pending write or table service", _oldest_commit_to_retain(timeline, commits)),
        ("the earliest commit the last clean retains", earliest_commit_retained_by_clean(timeline)),
        ("a replace commit not yet cleaned", _oldest_replace_to_retain(timeline)),
        (
            "delta commits still counted by compaction",
            _oldest_to_retain_for_compaction(timeline, table_config, settings),
        ),
    ]
    if savepoints and not settings.beyond_savepoint:
        limits.append(("the first savepoint", savepoints[0]))
    elif savepoints and table_config.table_type == TableType.MERGE_ON_READ:
        # Log scanners (shoal's, hudi-rs's, Hudi's) take a block's instant as archived only when
        # it predates the first active commit: with the savepointed commit staying, the log
        # blocks of commits archived after it would be skipped as uncommitted.
        limits.append(("the first savepoint (merge-on-read logs)", savepoints[0]))
    elif savepoints:
        limits.append(
            (
                "a commit after a savepoint that readers still need",
                _first_needed_after(timeline, savepoints[0]),
            )
        )
    bounds = [t for _, t in limits if t is not None]
    bound = min(bounds) if bounds else None
    pinned = set(savepoints)
    eligible = [
        c for c in commits if (bound is None or c.requested_time < bound) and c.requested_time not in pinned
    ]
    return eligible[: len(commits) - settings.min_commits]


def _first_needed_after(timeline: Timeline, savepoint: str) -> str | None:
    """Archiving beyond a savepoint on a copy-on-write table: the first commit after it that
    must stay. With the savepointed commit staying, a reader that takes only instants older
    than the first active commit as archived (hudi-rs does) hides the files of the commits
    archived after it: those commits may go only while no base file of theirs is in a latest
    file slice. A replace commit after the savepoint stays too: the cleaner keeps savepointed
    files, so the file groups it replaced may still be on storage, and without it they would be
    visible again."""
    later = [i for i in timeline.completed_data_instants() if i.requested_time > savepoint]
    if not later:
        return None
    live = {
        sl.base_file.instant_time
        for sl in FileSystemView(timeline.storage, timeline).latest_file_slices()
        if sl.base_file is not None
    }
    return next(
        (
            i.requested_time
            for i in later
            if i.requested_time in live or i.action in (Action.REPLACE_COMMIT, Action.CLUSTERING)
        ),
        None,
    )


def _oldest_commit_to_retain(timeline: Timeline, commits: list[Instant]) -> str | None:
    """The greatest completed commit before the oldest pending write-timeline instant (or that
    pending instant itself when no commit precedes it): nothing from it on may be archived."""
    pending = [i for i in timeline.instants if i.action in DATA_ACTIONS and not i.is_completed]
    if not pending:
        return None
    oldest = pending[0].requested_time
    before = [c.requested_time for c in commits if c.requested_time < oldest]
    return before[-1] if before else oldest


def earliest_commit_retained_by_clean(timeline: Timeline) -> str | None:
    """``earliestCommitToRetain`` of the latest completed clean (HoodieCleanMetadata), if any."""
    meta = _last_clean_metadata(timeline)
    value = meta.get("earliestCommitToRetain") if meta else None
    return str(value) if value else None


def _last_clean_metadata(timeline: Timeline) -> dict[str, Any] | None:
    cleans = [i for i in timeline.instants if i.action == Action.CLEAN and i.is_completed]
    if not cleans:
        return None
    data = timeline.read_instant(cleans[-1])
    if not data:
        return None
    try:
        records = json.loads(_native.avro_container_decode(data))
    except ValueError as e:
        raise CorruptTableError(f"cannot decode clean metadata {cleans[-1]}: {e}") from e
    return records[0] if records else None


def _oldest_replace_to_retain(timeline: Timeline) -> str | None:
    """Hudi's ``ClusteringUtils.getOldestInstantToRetainForClustering``: the first completed
    replace commit at or after the last clean's earliest retained commit, or the first one
    when nothing was cleaned yet. Archiving it earlier would expose the file groups it
    replaced, which only the cleaner removes.

    A clean without an earliest retained commit (``KEEP_LATEST_FILE_VERSIONS``) removed the
    file groups replaced before it, so, as in Hudi, the clean's own time is the bound; a
    replace commit before it whose replaced file groups still have files (kept for a
    compaction pending during that clean) stays all the same (Hudi's HUDI-6352)."""
    replaces = [
        i
        for i in timeline.instants
        if i.is_completed and i.action in (Action.REPLACE_COMMIT, Action.CLUSTERING)
    ]
    if not replaces:
        return None
    meta = _last_clean_metadata(timeline)
    if meta is None:
        return replaces[0].requested_time
    retained = str(meta.get("earliestCommitToRetain") or "")
    if not retained:
        cleans = [i for i in timeline.instants if i.action == Action.CLEAN and i.is_completed]
        retained = cleans[-1].requested_time
        kept = next(
            (r for r in replaces if r.requested_time < retained and _replaced_files_remain(timeline, r)), None
        )
        if kept is not None:
            return kept.requested_time
    later = [r.requested_time for r in replaces if r.requested_time >= retained]
    return later[0] if later else None


def _replaced_files_remain(timeline: Timeline, replace: Instant) -> bool:
    """Whether a file of a file group ``replace`` replaced is still on storage."""
    for partition, file_ids in timeline.commit_metadata(replace).replaced_file_ids().items():
        replaced = set(file_ids)
        for f in timeline.storage.list_files(partition):
            parsed = parse_base_file_name(f.name) or parse_log_file_name(f.name)
            if parsed is not None and parsed.file_id in replaced:
                return True
    return False


def _oldest_to_retain_for_compaction(
    timeline: Timeline, table_config: TableConfig, settings: ArchivalSettings
) -> str | None:
    """For merge-on-read tables whose compaction counts delta commits: the instant from which
    the scheduler still counts (``CompactionUtils.getOldestInstantToRetainForCompaction``)."""
    if table_config.table_type != TableType.MERGE_ON_READ:
        return None
    if settings.compaction_trigger not in ("NUM_COMMITS", "NUM_AND_TIME"):
        return None
    compactions = [
        i
        for i in timeline.instants
        if i.is_completed
        and i.action in (Action.COMMIT, Action.COMPACTION, Action.REPLACE_COMMIT, Action.CLUSTERING)
    ]
    deltas = [i for i in timeline.instants if i.action == Action.DELTA_COMMIT]
    if compactions:
        anchor = compactions[-1].requested_time
        since = [d for d in deltas if d.requested_time > anchor]
    elif deltas:
        anchor = deltas[0].requested_time
        since = deltas
    else:
        return None
    if len(since) < settings.max_delta_commits:
        return anchor
    return since[len(since) - settings.max_delta_commits].requested_time


# ---- archiving --------------------------------------------------------------------------------


def archive(storage: Storage, table_config: TableConfig, write_config: WriteConfig) -> ArchiveResult:
    """Archives what the rules allow now (see the module docs); safe to re-run after a crash."""
    table_config.check_writable("archive")
    settings = ArchivalSettings.from_config(write_config)
    with table_lock(storage, WRITE):
        # Hudi limits archival by the metadata table's compactions; shoal has none to keep.
        drop_metadata_table(storage, table_config)
        result = ArchiveResult(recovered_merge=recover_merge(storage, table_config))
        timeline = Timeline.load(storage, table_config)
        chosen = instants_to_archive(timeline, table_config, settings)
        if chosen:
            _archive_instants(storage, table_config, timeline, chosen, settings, result)
        if settings.merge_enable:
            result.merged_file = merge_small_archive_files(storage, table_config, settings)
        return result


def _archive_instants(
    storage: Storage,
    table_config: TableConfig,
    timeline: Timeline,
    chosen: list[Instant],
    settings: ArchivalSettings,
    result: ArchiveResult,
) -> None:
    files = _state_files(storage, timeline)
    # Every state file of every chosen instant, oldest instant first, each in state order.
    states: list[tuple[str, Instant]] = []
    for inst in chosen:
        states += sorted(
            files.get((inst.requested_time, _COMPARABLE.get(inst.action, inst.action)), []),
            key=lambda f: int(f[1].state),
        )
    done = _keys_in_newest_archive_file(storage, table_config)
    entries = []
    for name, raw in states:
        entry = _entry(storage, timeline, name, raw)
        if entry_key(entry) in done:
            result.already_archived += 1
        else:
            entries.append(entry)
    result.archive_files = _write_archive_files(storage, table_config, entries, settings.batch)
    pending = [(n, raw) for n, raw in states if not raw.is_completed]
    completed = sorted((p for p in states if p[1].is_completed), key=lambda p: p[1].requested_time)
    for name, _ in pending + completed:
        storage.delete(f"{timeline.dir}/{name}", missing_ok=True)
    for inst in chosen:
        delete_markers(storage, inst.requested_time)
    result.archived = chosen


def _state_files(storage: Storage, timeline: Timeline) -> dict[tuple[str, Action], list[tuple[str, Instant]]]:
    """Timeline file names by (time, comparable action), each with its parsed state."""
    out: dict[tuple[str, Action], list[tuple[str, Instant]]] = defaultdict(list)
    for f in storage.list_files(timeline.dir):
        raw = parse_instant_file_name(f.name)
        if raw is not None:
            out[(raw.requested_time, _COMPARABLE.get(raw.action, raw.action))].append((f.name, raw))
    return out


def _keys_in_newest_archive_file(storage: Storage, table_config: TableConfig) -> set[tuple[str, str, str]]:
    # An interrupted run leaves its entries in the file it wrote, which stays the newest: the
    # next run archives before it merges, and a merge's output holds its inputs' entries.
    files = list_archive_files(storage, table_config)
    if not files:
        return set()
    return {entry_key(e) for e in read_archive_file(storage, files[-1].path)}


def _write_archive_files(
    storage: Storage, table_config: TableConfig, entries: list[dict[str, Any]], batch: int
) -> list[str]:
    if not entries:
        return []
    existing = list_archive_files(storage, table_config)
    version = existing[-1].version + 1 if existing else 1
    # Blocks are gathered and joined once per file: appending each block to the file's bytes
    # copies all of them again, quadratic in a file of up to ARCHIVE_FILE_MAX_SIZE.
    files: list[list[bytes]] = [[]]
    size = 0
    for i in range(0, len(entries), batch):
        if size > ARCHIVE_FILE_MAX_SIZE:
            files.append([])
            size = 0
        block = encode_archive_blocks(entries[i : i + batch], batch)
        files[-1].append(block)
        size += len(block)
    written = []
    for blocks in files:
        path = f"{table_config.archive_dir}/{archive_file_name(version)}"
        storage.create_exclusive(path, b"".join(blocks))
        written.append(path)
        version += 1
    return written


# ---- HoodieArchivedMetaEntry records ----------------------------------------------------------


def _entry(storage: Storage, timeline: Timeline, name: str, raw: Instant) -> dict[str, Any]:
    """The archive record of one timeline state file (Hudi's ``MetadataConversionUtils``)."""
    path = f"{timeline.dir}/{name}"
    content = storage.read_bytes(path)
    entry: dict[str, Any] = {
        "commitTime": raw.requested_time,
        "actionType": raw.action.value,
        "actionState": raw.state.name,
        "stateTransitionTime": _modification_time(storage, path),
        # Java builds the record with its no-arg constructor, which leaves ``version`` null.
        "version": None,
    }
    metadata_field = _metadata_field(raw)
    if metadata_field is not None and content.strip():
        entry[metadata_field] = _metadata_value(metadata_field, content, path)
    return entry


def _metadata_field(raw: Instant) -> str | None:
    action, state = raw.action, raw.state
    if action in (Action.COMMIT, Action.DELTA_COMMIT):
        return "hoodieCommitMetadata"
    if action == Action.REPLACE_COMMIT:
        return {
            State.COMPLETED: "hoodieReplaceCommitMetadata",
            State.INFLIGHT: "HoodieInflightReplaceMetadata",
            State.REQUESTED: "hoodieRequestedReplaceMetadata",
        }[state]
    if action in (Action.COMPACTION, Action.LOG_COMPACTION):
        return "hoodieCompactionPlan" if state == State.REQUESTED else None
    if action == Action.CLEAN:
        return "hoodieCleanMetadata" if state == State.COMPLETED else "hoodieCleanerPlan"
    if state != State.COMPLETED:
        return None
    return {
        Action.ROLLBACK: "hoodieRollbackMetadata",
        Action.SAVEPOINT: "hoodieSavePointMetadata",
        Action.INDEXING: "hoodieIndexCommitMetadata",
    }.get(action)


_JSON_COMMIT_FIELDS = ("hoodieCommitMetadata", "hoodieReplaceCommitMetadata", "HoodieInflightReplaceMetadata")


def _metadata_value(metadata_field: str, content: bytes, path: str) -> dict[str, Any]:
    try:
        value = decode_instant_content(content)
        if value is None and content[:4] == AVRO_CONTAINER_MAGIC:
            value = {}
    except ValueError as e:
        raise CorruptTableError(f"cannot decode {path} for archival: {e}") from e
    if metadata_field in _JSON_COMMIT_FIELDS:
        # Jackson's conversion into the Avro record: the Avro version field is left unset.
        value = {**value, "version": None}
    return _conform(value, _entry_field_types()[metadata_field], _named_types(), path)


def _modification_time(storage: Storage, path: str) -> str | None:
    # Hudi 0.14 records each state file's modification time as its state transition time.
    mtime = storage.fs.get_file_info(storage.full_path(path)).mtime
    if mtime is None:
        return None
    return format_instant(mtime.astimezone(_dt.timezone.utc))


# Projection of decoded JSON onto the entry schema: keeps the fields the schema has (a newer
# writer's extra fields are dropped, as Avro resolution would drop them).


@functools.cache
def _named_types() -> dict[str, Any]:
    names: dict[str, Any] = {}
    _collect_names(json.loads(entry_schema()), names)
    return names


def _collect_names(node: Any, names: dict[str, Any]) -> None:
    if isinstance(node, dict):
        if node.get("type") in ("record", "enum", "fixed"):
            names[node["name"]] = node
        for v in node.values():
            _collect_names(v, names)
    elif isinstance(node, list):
        for v in node:
            _collect_names(v, names)


@functools.cache
def _entry_field_types() -> dict[str, Any]:
    return {f["name"]: f["type"] for f in json.loads(entry_schema())["fields"]}


def _conform(value: Any, schema: Any, names: dict[str, Any], where: str) -> Any:
    if isinstance(schema, str):
        schema = names.get(schema.rsplit(".", 1)[-1], schema)
    if isinstance(schema, list):
        if value is None:
            return None
        for branch in schema:
            resolved = names.get(branch, branch) if isinstance(branch, str) else branch
            if _shape_matches(value, resolved):
                return _conform(value, resolved, names, where)
        return value
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record" and isinstance(value, dict):
            out = {}
            for f in schema["fields"]:
                if f["name"] in value:
                    out[f["name"]] = _conform(value[f["name"]], f["type"], names, where)
                elif "default" not in f:
                    raise CorruptTableError(
                        f"{where}: {schema['name']}.{f['name']} is missing and has no default"
                    )
            return out
        if kind == "array" and isinstance(value, list):
            return [_conform(v, schema["items"], names, where) for v in value]
        if kind == "map" and isinstance(value, dict):
            return {k: _conform(v, schema["values"], names, where) for k, v in value.items()}
        if isinstance(kind, (dict, list)):
            return _conform(value, kind, names, where)
    return value


def _shape_matches(value: Any, schema: Any) -> bool:
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if isinstance(value, dict):
        return kind in ("record", "map")
    if isinstance(value, list):
        return kind == "array"
    if value is None:
        return kind == "null"
    return kind not in ("record", "map", "array", "null")


# ---- merging small archive files ----------------------------------------------------------------


def _plan_path(table_config: TableConfig) -> str:
    return f"{table_config.archive_dir}/{MERGE_PLAN_NAME}"


def merge_small_archive_files(
    storage: Storage, table_config: TableConfig, settings: ArchivalSettings
) -> str | None:
    """Merges the newest run of small archive files (each at most
    ``hoodie.archive.merge.small.file.limit.bytes``, at least
    ``hoodie.archive.merge.files.batch.size`` of them) into one new file, and returns its path.

    Older files past the first large one are left alone, so archive files stay in time order.
    A plan (``mergeArchivePlan``, Avro ``HoodieMergeArchiveFilePlan``) is saved first, then the
    merged file is published, then the small files and finally the plan are deleted; a crash
    in between is resolved by :func:`recover_merge`.
    """
    newest_first = list(reversed(list_archive_files(storage, table_config)))
    candidates = []
    for f in newest_first:
        if f.size > settings.merge_small_file_limit:
            break
        candidates.append(f)
    if len(candidates) < settings.merge_files_batch:
        return None
    candidates.reverse()
    merged = f"{table_config.archive_dir}/{archive_file_name(newest_first[0].version + 1)}"
    plan = {
        "version": 1,
        "candidate": [storage.full_path(c.path) for c in candidates],
        "mergedArchiveFileName": merged.rsplit("/", 1)[-1],
    }
    storage.write_bytes(
        _plan_path(table_config), _native.avro_container_encode(merge_plan_schema(), json.dumps([plan]))
    )
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    for c in candidates:
        for e in read_archive_file(storage, c.path):
            entries.setdefault(entry_key(e), e)
    storage.create_exclusive(merged, encode_archive_blocks(list(entries.values()), settings.batch))
    for c in candidates:
        storage.delete(c.path, missing_ok=True)
    storage.delete(_plan_path(table_config), missing_ok=True)
    return merged


def recover_merge(storage: Storage, table_config: TableConfig) -> str | None:
    """Finishes or undoes a merge of archive files that a crash interrupted (Hudi's
    ``verifyLastMergeArchiveFilesIfNecessary``): with every small file still present the merged
    file (if any) is deleted; otherwise the merged file exists and the remaining small files are
    deleted. Returns what was done, or None when there was no leftover plan."""
    plan_path = _plan_path(table_config)
    if not storage.exists(plan_path):
        return None
    try:
        records = json.loads(_native.avro_container_decode(storage.read_bytes(plan_path)))
        plan = records[0]
        names = [str(c).rsplit("/", 1)[-1] for c in plan.get("candidate") or []]
        merged_name = str(plan["mergedArchiveFileName"])
    except (ValueError, ShoalError, IndexError, KeyError, TypeError):
        storage.delete(plan_path, missing_ok=True)
        return "discarded an unreadable merge plan"
    archive_dir = table_config.archive_dir
    candidates = [f"{archive_dir}/{n}" for n in names]
    merged = f"{archive_dir}/{merged_name}"
    if all(storage.exists(c) for c in candidates):
        storage.delete(merged, missing_ok=True)
        outcome = f"undid the merge into {merged_name}"
    elif storage.exists(merged):
        for c in candidates:
            storage.delete(c, missing_ok=True)
        outcome = f"completed the merge into {merged_name}"
    else:
        outcome = "found neither all merge inputs nor the merged file"
        log.error("archive merge plan %s: %s", plan_path, outcome)
    storage.delete(plan_path, missing_ok=True)
    return outcome


# ---- inline and asynchronous archival ----------------------------------------------------------


class ArchiveJob:
    """An archival running on a background thread. A request that arrives while it runs
    (a commit finished meanwhile) makes it run once more before it ends, so no commit's
    archival is skipped; its result then covers every run."""

    def __init__(self, run: Callable[[], ArchiveResult]) -> None:
        self._run = run
        self._result = ArchiveResult()
        self._error: BaseException | None = None
        self._again = False
        self._finished = False
        self._thread = threading.Thread(target=self._main, name="shoal-archive", daemon=False)

    def _main(self) -> None:
        try:
            while True:
                with _jobs_lock:
                    self._again = False
                self._add(self._run())
                with _jobs_lock:
                    if not self._again:
                        self._finished = True
                        return
        except BaseException as e:  # handed to whoever waits for the job
            log.exception("asynchronous archival failed")
            self._error = e
            with _jobs_lock:
                self._finished = True

    def _add(self, run: ArchiveResult) -> None:
        r = self._result
        r.archived += run.archived
        r.archive_files += run.archive_files
        r.already_archived += run.already_archived
        r.merged_file = run.merged_file or r.merged_file
        r.recovered_merge = run.recovered_merge or r.recovered_merge

    def start(self) -> ArchiveJob:
        self._thread.start()
        return self

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout: float | None = None) -> ArchiveResult:
        """Waits for the job and returns its result, or raises its error."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("the archival is still running")
        if self._error is not None:
            raise self._error
        return self._result


_jobs: dict[str, ArchiveJob] = {}
_jobs_lock = threading.Lock()


def archive_async(storage: Storage, table_config: TableConfig, write_config: WriteConfig) -> ArchiveJob:
    """Starts an archival on a background thread; while one runs for this table, asks it to
    run once more instead. It takes the table's write lock, so it runs between writes, never
    inside one."""
    key = storage.full_path("")
    with _jobs_lock:
        job = _jobs.get(key)
        if job is not None and not job._finished:
            job._again = True
            return job
        job = _jobs[key] = ArchiveJob(lambda: archive(storage, table_config, write_config))
    return job.start()


def latest_archive_job(storage: Storage) -> ArchiveJob | None:
    """The last asynchronous archival started for the table at ``storage``, if any."""
    with _jobs_lock:
        return _jobs.get(storage.full_path(""))


def run_inline_archive(
    storage: Storage, table_config: TableConfig, write_config: WriteConfig, known: Timeline | None = None
) -> None:
    """The post-commit hook: archive when ``hoodie.archive.automatic`` (on a background thread
    with ``hoodie.archive.async``). The commit is already durable, so a failure is logged rather
    than raised; archival is re-run after the next commit and picks up where it stopped.
    ``known``: the timeline as the commit left it; when it holds no more instants of any kind
    than archival keeps, and archive files are not merged, nothing is listed (a merge a crash
    interrupted is then recovered by the next archival that runs)."""
    if not write_config.get(ARCHIVE_AUTOMATIC) or table_config.table_version >= 8:
        return
    settings = ArchivalSettings.from_config(write_config)
    if known is not None and not settings.merge_enable and not _over_retained(known, settings):
        return
    if write_config.get(ARCHIVE_ASYNC):
        archive_async(storage, table_config, write_config)
        return
    try:
        # Writers in other processes archive too: under optimistic concurrency one at a time.
        with Concurrency(storage, write_config).locked():
            archive(storage, table_config, write_config)
    except (ShoalError, OSError):
        log.exception("archival after the commit failed; it is retried after the next commit")


__all__ = [
    "ArchivalSettings",
    "ArchiveJob",
    "ArchiveResult",
    "archive",
    "archive_async",
    "earliest_commit_retained_by_clean",
    "instants_to_archive",
    "latest_archive_job",
    "merge_small_archive_files",
    "recover_merge",
    "run_inline_archive",
]
