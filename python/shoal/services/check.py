"""Checks a table's files against its timeline (``shoal check``), for an operator who suspects
lost or damaged files: readers list files, so a lost file does not fail a read, it silently
takes the records it held out of it (or brings back an older version of them).

What the completed commits of the active timeline recorded is compared with storage:

- every commit's metadata must parse (``unreadable_metadata``);
- the latest base file each file group was given (by a commit, a compaction or a clustering)
  must exist (``missing_file``; a file group a replace commit retired is not checked), with
  the size the commit recorded (``size_mismatch``: a cut-off or rewritten file). Cleans only
  delete older file slices, so the latest slice stays while the table is sound;
- the log files recorded since that base file must exist (``missing_file``);
- a base file of a completed commit that the commit did not record (a failed task attempt's
  file that the commit should have deleted) is read by every reader beside the recorded one
  (``uncommitted_file``);
- a base file of an instant the timeline does not have, newer than its archived part, is left
  by a write that never completed and no rollback removed; readers ignore it
  (``orphan_file``, a warning).

With ``deep``, the footer of every latest base file is read too (``damaged_file``), and the
blocks of every log file (``corrupt_log_block``, a warning: a failed append leaves such a block,
which readers skip, in a sound table too). File groups whose latest file was written by a
commit archived since are not checked: their commit's metadata is not on the active timeline.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pyarrow.parquet as pq

from shoal import _native
from shoal.config.table_config import TableConfig
from shoal.errors import CorruptDataError, CorruptTableError
from shoal.fs.damage import damaged_parquet
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
from shoal.fs.storage import FileInfo, Storage
from shoal.timeline.commit_metadata import CommitMetadata
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline

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


def check_table(storage: Storage, config: TableConfig, deep: bool = False) -> CheckReport:
    """Checks the table at ``storage`` (see the module); reads only, changes nothing."""
    timeline = Timeline.load(storage, config)
    problems: list[Problem] = []
    latest: dict[tuple[str, str], _Latest] = defaultdict(_Latest)
    recorded: dict[str, set[str]] = defaultdict(set)
    retired: set[tuple[str, str]] = set()
    for inst in timeline.completed_data_instants():
        try:
            metadata = timeline.commit_metadata(inst)
        except (CorruptTableError, CorruptDataError) as e:
            problems.append(Problem("unreadable_metadata", timeline.path_of(inst), str(e)))
            continue
        _record(inst.requested_time, metadata, latest, recorded)
        if inst.action in (Action.REPLACE_COMMIT, Action.CLUSTERING):
            for partition, ids in metadata.replaced_file_ids().items():
                retired.update((partition, fid) for fid in ids)

    on_disk = {f.path: f for f in storage.list_files("", recursive=True) if not _in_meta_dir(f.path)}
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
            elif deep:
                problems.extend(_damage(storage, path))
    problems.extend(_unrecorded(timeline, on_disk, recorded))
    return CheckReport(problems, len([k for k in latest if k not in retired]), checked)


def _record(
    instant: str,
    metadata: CommitMetadata,
    latest: dict[tuple[str, str], _Latest],
    recorded: dict[str, set[str]],
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


def _log_instant(path: str) -> str:
    parsed = parse_log_file_name(path.rsplit("/", 1)[-1])
    return parsed.instant_time if parsed else ""


def _expected_files(group: _Latest) -> list[str]:
    logs = sorted(p for p in group.logs or () if _log_instant(p) >= group.base_instant)
    return ([group.base] if group.base else []) + logs


def _in_meta_dir(path: str) -> bool:
    return path.startswith(".hoodie/") or "/.hoodie/" in path


def _damage(storage: Storage, path: str) -> list[Problem]:
    try:
        if parse_base_file_name(path.rsplit("/", 1)[-1]) is not None:
            with damaged_parquet(path), storage.open_input_file(path) as f:
                pq.read_metadata(f)
            return []
    except CorruptDataError as e:
        return [Problem("damaged_file", path, str(e))]
    blocks = _native.read_log_blocks(storage.read_bytes(path))
    return [
        Problem(
            "corrupt_log_block", path, f"{b.size} bytes at offset {b.offset} do not decode: readers skip them"
        )
        for b in blocks
        if b.block_type == "CORRUPT_BLOCK"
    ]


def _unrecorded(
    timeline: Timeline, on_disk: dict[str, FileInfo], recorded: dict[str, set[str]]
) -> list[Problem]:
    """Base files that no completed commit recorded, though one completed at their instant, and
    base files of instants the active timeline lacks, newer than its archived part."""
    completed = {i.requested_time for i in timeline.completed_data_instants()}
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
