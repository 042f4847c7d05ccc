"""Checks a table's files against its timeline (``shoal check``), for an operator who suspects
lost or damaged files: readers list files, so a lost file does not fail a read, it silently
takes the records it held out of it (or brings back an older version of them).

What the completed commits recorded (those of the active timeline, and the archived ones when
the archive holds the metadata of every one of them) is compared with storage:

- every active commit's metadata must parse (``unreadable_metadata``);
- the latest base file each file group was given (by a commit, a compaction or a clustering)
  must exist (``missing_file``; a file group a replace commit retired is not checked), with
  the size the commit recorded (``size_mismatch``: a cut-off or rewritten file). Cleans only
  delete older file slices, so the latest slice stays while the table is sound;
- the log files recorded since that base file must exist (``missing_file``), at least as large
  as a completed commit's append left them (``size_mismatch``: a log file only grows, by later
  appends and rollback command blocks);
- a base file of a completed commit that the commit did not record (a failed task attempt's
  file that the commit should have deleted) is read by every reader beside the recorded one
  (``uncommitted_file``);
- a base file of an instant the timeline does not have, newer than its archived part, is left
  by a write that never completed and no rollback removed; readers ignore it
  (``orphan_file``, a warning).

With ``deep``, the footer of every latest base file is read too, and every block of their log
files. A footer that does not read, a block that does not decode where a completed commit's
append starts (readers skip it: its records drop out), and a block of a completed instant whose
records do not decode or lack their record key (readers fail on it) are ``damaged_file``. Other
blocks that do not decode are ``corrupt_log_block``, a warning: a failed append leaves such a
block, which readers skip, in a sound table too. Without the archived commits' metadata (an
archive that lacks or cannot read one), file groups whose latest file was written by a commit
archived since are not checked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from shoal import _native
from shoal.config.table_config import TableConfig
from shoal.errors import CorruptDataError, CorruptTableError, InstantNotFoundError
from shoal.fs.damage import damaged_parquet
from shoal.fs.naming import in_meta_dir, parse_base_file_name, parse_log_file_name
from shoal.fs.storage import FileInfo, Storage
from shoal.timeline.commit_metadata import CommitMetadata
from shoal.timeline.instant import Action, Instant
from shoal.timeline.timeline import Timeline

RECORD_KEY = "_hoodie_record_key"

# Problems that mean readers return wrong rows; the others are warnings.
ERRORS = frozenset(
    {"unreadable_metadata", "missing_file", "size_mismatch", "uncommitted_file", "damaged_file"}
)


@dataclass(frozen=True)
class Problem:
    """One finding: its kind (see the module), the file or instant, and what was found."""

    kind: str
    path: str
    detail: str

    @property
    def is_error(self) -> bool:
        return self.kind in ERRORS


@dataclass
class CheckReport:
    """What :func:`check_table` found, and how much it checked."""

    problems: list[Problem]
    file_groups: int
    files: int

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]


@dataclass
class _Latest:
    """The latest base file the commits gave a file group, and the logs recorded since."""

    base: str | None = None
    base_instant: str = ""
    base_size: int | None = None
    logs: set[str] | None = None


@dataclass
class _Appends:
    """What completed commits recorded of one log file: the largest size it had after one of
    their appends (a log file only grows: later appends, rollback command blocks), and the
    offsets their appends started at (each a block readers must decode)."""

    size: int = 0
    offsets: set[int] = field(default_factory=set)


def check_table(storage: Storage, config: TableConfig, deep: bool = False) -> CheckReport:
    """Checks the table at ``storage`` (see the module); reads only, changes nothing."""
    timeline = Timeline.load(storage, config)
    problems: list[Problem] = []
    latest: dict[tuple[str, str], _Latest] = defaultdict(_Latest)
    recorded: dict[str, set[str]] = defaultdict(set)
    appends: dict[str, _Appends] = defaultdict(_Appends)
    retired: set[tuple[str, str]] = set()
    archived = _archived_metadata(timeline)
    active: list[tuple[Instant, CommitMetadata]] = []
    for inst in timeline.completed_data_instants():
        try:
            active.append((inst, timeline.commit_metadata(inst)))
        except (CorruptTableError, CorruptDataError) as e:
            problems.append(Problem("unreadable_metadata", timeline.path_of(inst), str(e)))
    for inst, metadata in archived + active:
        _record(inst.requested_time, metadata, latest, recorded, appends)
        if inst.action in (Action.REPLACE_COMMIT, Action.CLUSTERING):
            for partition, ids in metadata.replaced_file_ids().items():
                retired.update((partition, fid) for fid in ids)
    completed = {i.requested_time for i, _ in archived} | {i.requested_time for i, _ in active}
    first = timeline.first_data_instant_time()

    def counted(instant: str) -> bool:
        # Readers decode only the blocks of completed instants (an older one was archived).
        return instant in completed or (first is not None and instant < first)

    on_disk = {f.path: f for f in storage.list_files("", recursive=True) if not in_meta_dir(f.path)}
    checked = 0
    for key, group in sorted(latest.items()):
        if key in retired:
            continue
        for path in _expected_files(group):
            checked += 1
            found = on_disk.get(path)
            if found is None:
                problems.append(
                    Problem("missing_file", path, "recorded by a completed commit, not in storage")
                )
            elif path == group.base and group.base_size is not None and found.size != group.base_size:
                detail = f"{found.size} bytes in storage, {group.base_size} recorded by its commit"
                problems.append(Problem("size_mismatch", path, detail))
            elif path in appends and found.size < appends[path].size:
                detail = (
                    f"{found.size} bytes in storage, a completed commit appended up to {appends[path].size}"
                )
                problems.append(Problem("size_mismatch", path, detail))
            elif deep:
                offsets = appends[path].offsets if path in appends else set()
                problems.extend(_damage(storage, path, offsets, config.populate_meta_fields, counted))
    problems.extend(_unrecorded(timeline, on_disk, recorded, completed))
    return CheckReport(problems, len([k for k in latest if k not in retired]), checked)


def _archived_metadata(timeline: Timeline) -> list[tuple[Instant, CommitMetadata]]:
    """The metadata of the completed data instants archived off the active timeline, oldest
    first; none at all when one of them has none or it does not read: the latest files of the
    file groups such a commit wrote would be unknown, and older ones may have been cleaned."""
    try:
        archive = timeline.archived()
        if archive is None:
            return []
        active = {i.requested_time for i in timeline.instants}
        found = []
        for inst in archive.completed_data_instants():
            if inst.requested_time in active:
                continue  # an archival that crashed before deleting what it archived
            metadata = archive.metadata(inst.requested_time)
            if not metadata:
                return []
            found.append((inst, CommitMetadata.from_dict(metadata)))
    except (CorruptTableError, CorruptDataError, InstantNotFoundError, ValueError, LookupError):
        return []
    except (TypeError, AttributeError):
        return []  # metadata of another shape than commit metadata
    return found


def _record(
    instant: str,
    metadata: CommitMetadata,
    latest: dict[tuple[str, str], _Latest],
    recorded: dict[str, set[str]],
    appends: dict[str, _Appends],
) -> None:
    for stat in metadata.write_stats():
        if not stat.path or not stat.fileId:
            continue
        name = stat.path.rsplit("/", 1)[-1]
        group = latest[(stat.partitionPath or "", stat.fileId)]
        base = parse_base_file_name(name)
        if base is not None:
            recorded[instant].add(stat.path)
            if base.instant_time >= group.base_instant:
                group.base, group.base_instant = stat.path, base.instant_time
                group.base_size = stat.fileSizeInBytes or None
                # Logs of older slices may be cleaned: only those after this base must stay.
                group.logs = {p for p in group.logs or () if _log_instant(p) >= base.instant_time}
        elif parse_log_file_name(name) is not None:
            group.logs = (group.logs or set()) | {stat.path}
            appended = appends[stat.path]
            appended.size = max(appended.size, stat.fileSizeInBytes or 0)
            if stat.logOffset is not None:
                appended.offsets.add(stat.logOffset)


def _log_instant(path: str) -> str:
    parsed = parse_log_file_name(path.rsplit("/", 1)[-1])
    return parsed.instant_time if parsed else ""


def _expected_files(group: _Latest) -> list[str]:
    logs = sorted(p for p in group.logs or () if _log_instant(p) >= group.base_instant)
    return ([group.base] if group.base else []) + logs


def _damage(
    storage: Storage, path: str, committed: set[int], keyed: bool, counted: Callable[[str], bool]
) -> list[Problem]:
    """What a deep check finds wrong in one file: a base file's footer that does not read; a log
    block that does not decode (``committed``: offsets where completed commits' appends start;
    ``keyed``: the records carry their key in ``_hoodie_record_key``; ``counted``: whether
    readers decode the blocks of an instant)."""
    try:
        if parse_base_file_name(path.rsplit("/", 1)[-1]) is not None:
            with damaged_parquet(path), storage.open_input_file(path) as f:
                pq.read_metadata(f)
            return []
    except CorruptDataError as e:
        return [Problem("damaged_file", path, str(e))]
    problems = []
    for block in _native.read_log_blocks(storage.read_bytes(path)):
        end = block.offset + block.size
        if block.is_corrupt and any(block.offset <= o < end for o in committed):
            detail = f"{block.size} bytes at {block.offset} (a completed commit's append) do not decode"
            problems.append(Problem("damaged_file", path, detail))
        elif block.is_corrupt:
            detail = f"{block.size} bytes at offset {block.offset} do not decode: readers skip them"
            problems.append(Problem("corrupt_log_block", path, detail))
        elif counted(block.instant_time or "") and (reason := _undecodable(block, keyed)) is not None:
            detail = f"the {block.block_type} at offset {block.offset} does not decode: {reason}"
            problems.append(Problem("damaged_file", path, detail))
    return problems


def _undecodable(block: _native.LogBlock, keyed: bool) -> str | None:
    """Why a block's content does not read as its records (readers fail on it), or None."""
    try:
        if block.block_type == "DELETE_BLOCK":
            block.deletes()
            return None
        if block.block_type == "PARQUET_DATA_BLOCK":
            records = pq.read_table(pa.BufferReader(block.content()))
        elif block.block_type == "AVRO_DATA_BLOCK":
            records = pa.Table.from_batches([block.records()])
        else:
            return None
    except (CorruptDataError, ValueError, OSError, pa.ArrowException) as e:
        return str(e)
    if keyed and RECORD_KEY in records.column_names and records.column(RECORD_KEY).null_count:
        # Bytes changed in place can decode as other values: readers refuse a record without a key.
        return f"{records.column(RECORD_KEY).null_count} records without a record key"
    return None


def _unrecorded(
    timeline: Timeline, on_disk: dict[str, FileInfo], recorded: dict[str, set[str]], completed: set[str]
) -> list[Problem]:
    """Base files that no completed commit recorded, though one whose metadata was read
    (``completed``) completed at their instant, and
    base files of instants the active timeline lacks, newer than its archived part."""
    known = {i.requested_time for i in timeline.instants}
    first = timeline.first_data_instant_time()
    problems = []
    for path in sorted(on_disk):
        base = parse_base_file_name(path.rsplit("/", 1)[-1])
        if base is None:
            continue
        instant = base.instant_time
        if instant in completed and instant in recorded and path not in recorded[instant]:
            detail = f"instant {instant} completed without it: readers read it beside the recorded files"
            problems.append(Problem("uncommitted_file", path, detail))
        elif instant not in known and first is not None and instant > first:
            detail = f"instant {instant} is not on the timeline: a write that never completed left it"
            problems.append(Problem("orphan_file", path, detail))
    return problems
