"""The file-system view: partitions -> file groups -> file slices, as of an instant (HUDI_FORMAT §9.2-9.3)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from shoal.errors import UnsupportedError
from shoal.fs.naming import (
    PARTITION_METADATA_FILE,
    LogFileName,
    in_meta_dir,
    parse_base_file_name,
    parse_log_file_name,
)
from shoal.fs.storage import FileInfo, Storage
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline


@dataclass(frozen=True)
class BaseFile:
    """A parquet base file of a file slice."""

    partition_path: str
    name: str
    file_id: str
    instant_time: str
    size: int

    @property
    def path(self) -> str:
        return f"{self.partition_path}/{self.name}" if self.partition_path else self.name


@dataclass(frozen=True)
class LogFile:
    """A log file of a file slice."""

    partition_path: str
    parsed: LogFileName
    size: int

    @property
    def name(self) -> str:
        return self.parsed.name

    @property
    def file_id(self) -> str:
        return self.parsed.file_id

    @property
    def instant_time(self) -> str:
        return self.parsed.instant_time

    @property
    def version(self) -> int:
        return self.parsed.version

    @property
    def path(self) -> str:
        return f"{self.partition_path}/{self.name}" if self.partition_path else self.name


@dataclass
class FileSlice:
    """One version of a file group: a base file and the log files appended after it."""

    partition_path: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None = None
    log_files: list[LogFile] = field(default_factory=list)

    @property
    def has_logs(self) -> bool:
        return bool(self.log_files)

    def total_size(self) -> int:
        return (self.base_file.size if self.base_file else 0) + sum(lf.size for lf in self.log_files)


@dataclass
class FileGroup:
    """Every version of the records of one file id in one partition."""

    partition_path: str
    file_id: str
    slices: dict[str, FileSlice] = field(default_factory=dict)

    def slice_at(self, base_instant: str) -> FileSlice:
        sl = self.slices.get(base_instant)
        if sl is None:
            sl = self.slices[base_instant] = FileSlice(self.partition_path, self.file_id, base_instant)
        return sl

    def ordered_slices(self) -> list[FileSlice]:
        return [self.slices[k] for k in sorted(self.slices)]


# Hudi's instant of a metadata-only bootstrap (HoodieTimeline.METADATA_BOOTSTRAP_INSTANT_TS): its
# base files are skeletons holding the meta columns only.
METADATA_BOOTSTRAP_INSTANT = "00000000000001"


class FileSystemView:
    """File groups of a table as of an instant, built by listing storage (metadata table off)."""

    def __init__(
        self,
        storage: Storage,
        timeline: Timeline,
        as_of: str | None = None,
        partitions: list[str] | None = None,
    ) -> None:
        # Base files are taken by their .parquet extension: another format's table would look empty.
        timeline.config.check_base_file_format()
        self.storage = storage
        self.timeline = timeline
        self.as_of = as_of
        # The partitions the view was asked for (None: all), listed or not: one a clean deleted
        # is asked for but not found.
        self.requested_partitions = None if partitions is None else frozenset(partitions)
        self.table_version = timeline.config.table_version
        completed = timeline.completed_data_instants()
        if as_of is not None:
            completed = [i for i in completed if i.requested_time <= as_of]
        self._completed_times = {i.requested_time for i in completed}
        self._completion_time = {i.requested_time: i.completion_time for i in completed}
        self._pending_compactions = {
            i.requested_time
            for i in timeline.pending_compactions()
            if as_of is None or i.requested_time <= as_of
        }
        self._replaced = self._replaced_file_ids(completed)
        self.partition_paths, files_by_partition = self._discover(partitions)
        self.file_groups: dict[tuple[str, str], FileGroup] = {}
        # File ids of each partition: a read or write asks partition by partition, and scanning
        # every file group of the table per partition is quadratic in the partitions.
        self._file_ids: dict[str, list[str]] = defaultdict(list)
        for partition, files in files_by_partition.items():
            self._add_partition(partition, files)

    # ---- building ------------------------------------------------------------------------

    def _discover(self, only: list[str] | None) -> tuple[list[str], dict[str, list[FileInfo]]]:
        by_dir: dict[str, list[FileInfo]] = defaultdict(list)
        if only is None:
            listing = self.storage.list_files("", recursive=True)
        else:
            listing = self.storage.list_files_of(only)
        for f in listing:
            if in_meta_dir(f.path):
                continue
            parent = f.path.rsplit("/", 1)[0] if "/" in f.path else ""
            by_dir[parent].append(f)
        partitions = sorted(
            d
            for d, files in by_dir.items()
            if any(f.name.startswith(PARTITION_METADATA_FILE) for f in files)
            or any(parse_base_file_name(f.name) for f in files)
        )
        return partitions, {p: by_dir[p] for p in partitions}

    def _replaced_file_ids(self, completed: list) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        for inst in completed:
            if inst.action not in (Action.REPLACE_COMMIT, Action.CLUSTERING):
                continue
            for partition, ids in self.timeline.commit_metadata(inst).replaced_file_ids().items():
                out.update((partition, fid) for fid in ids)
        return out

    def _base_visible(self, instant: str) -> bool:
        if instant in self._completed_times:
            return True
        if self.as_of is not None and instant > self.as_of:
            return False
        if self.timeline.get(instant) is not None:
            return False
        # Older than the active data timeline: archived, hence committed.
        first = self.timeline.first_data_instant_time()
        return first is not None and instant < first

    def _add_partition(self, partition: str, files: list[FileInfo]) -> None:
        logs: list[LogFile] = []
        for f in files:
            base = parse_base_file_name(f.name)
            if base is not None:
                if (partition, base.file_id) in self._replaced:
                    continue
                if not self._base_visible(base.instant_time):
                    continue
                if base.instant_time == METADATA_BOOTSTRAP_INSTANT:
                    raise UnsupportedError(
                        f"{partition}/{f.name} is a skeleton file of a metadata-only bootstrap: its "
                        "records' data stays in the bootstrap source files, which shoal does not read"
                    )
                fg = self._group(partition, base.file_id)
                fg.slice_at(base.instant_time).base_file = BaseFile(
                    partition, f.name, base.file_id, base.instant_time, f.size
                )
                continue
            parsed = parse_log_file_name(f.name)
            if parsed is not None and (partition, parsed.file_id) not in self._replaced:
                logs.append(LogFile(partition, parsed, f.size))
        for fid in {lf.file_id for lf in logs} | set(self._pending_compaction_ids(partition)):
            self._group(partition, fid)
        for c in self._pending_compactions:
            # A pending compaction opens a new (empty) slice in every file group it plans.
            for fid in self._compaction_file_ids(c, partition):
                self._group(partition, fid).slice_at(c)
        for lf in sorted(logs, key=lambda x: x.parsed.sort_key()):
            self._place_log(partition, lf)

    def _pending_compaction_ids(self, partition: str) -> list[str]:
        ids: list[str] = []
        for c in self._pending_compactions:
            ids.extend(self._compaction_file_ids(c, partition))
        return ids

    def _compaction_file_ids(self, compaction_time: str, partition: str) -> list[str]:
        plan = self.timeline.compaction_plan(compaction_time)
        return [op["fileId"] for op in plan if (op.get("partitionPath") or "") == partition]

    def _place_log(self, partition: str, lf: LogFile) -> None:
        fg = self._group(partition, lf.file_id)
        if self.table_version >= 8:
            # v8: the log belongs to the slice whose base instant is the greatest one at or before
            # the completion time of the delta commit that wrote it; uncommitted logs are ignored.
            completion = self._completion_time.get(lf.instant_time)
            if completion is None:
                return
            keys = [k for k in fg.slices if k <= completion]
            fg.slice_at(max(keys) if keys else lf.instant_time).log_files.append(lf)
            return
        if self.as_of is not None and lf.instant_time > self.as_of:
            return
        committed = self._base_visible(lf.instant_time) or lf.instant_time in self._pending_compactions
        # Log-only slices (e.g. Flink) are keyed by their first delta commit; a log whose slice
        # has a visible base file is kept too.
        if not committed and lf.instant_time not in fg.slices:
            return
        fg.slice_at(lf.instant_time).log_files.append(lf)

    def _group(self, partition: str, file_id: str) -> FileGroup:
        key = (partition, file_id)
        fg = self.file_groups.get(key)
        if fg is None:
            fg = self.file_groups[key] = FileGroup(partition, file_id)
            self._file_ids[partition].append(file_id)
        return fg

    # ---- queries -------------------------------------------------------------------------

    def latest_file_slices(self, partition: str | None = None) -> list[FileSlice]:
        """The latest committed slice of every live file group, merging a pending compaction's
        empty slice with the slice before it so that readers see base + all logs."""
        if partition is None:
            groups = [fg for _, fg in sorted(self.file_groups.items())]
        else:
            groups = [self.file_groups[(partition, f)] for f in sorted(self._file_ids.get(partition, ()))]
        out: list[FileSlice] = []
        for fg in groups:
            sl = self._latest_slice(fg)
            if sl is not None:
                out.append(sl)
        return out

    def _latest_slice(self, fg: FileGroup) -> FileSlice | None:
        slices = [
            s
            for s in fg.ordered_slices()
            if s.base_file is not None or s.log_files or s.base_instant in self._pending_compactions
        ]
        if not slices:
            return None
        latest = slices[-1]
        if latest.base_instant in self._pending_compactions and len(slices) > 1:
            prev = slices[-2]
            return FileSlice(
                fg.partition_path,
                fg.file_id,
                prev.base_instant,
                prev.base_file,
                prev.log_files + latest.log_files,
            )
        if latest.base_file is None and not latest.log_files:
            return None
        return latest

    def all_file_groups(self) -> list[FileGroup]:
        return [self.file_groups[k] for k in sorted(self.file_groups)]


class LatestSlices:
    """The latest file slices of a table's partitions as of ``timeline``, each partition listed
    when first asked for: a write that touches a few partitions of a large table lists only
    those, as Hudi's partitioned indexes load only the affected partitions' files. Plain data
    until asked: Spark tasks get it in a broadcast and list what their records need."""

    def __init__(self, storage: Storage, timeline: Timeline) -> None:
        self.storage = storage
        self.timeline = timeline
        self._listed: dict[str, list[FileSlice]] = {}

    def get(self, partition: str, default: list[FileSlice] | None = None) -> list[FileSlice]:
        """The latest slices of ``partition``, none for a partition the table does not have
        (``default``, taken as a dict's ``get`` takes it, is never needed)."""
        if partition not in self._listed:
            view = FileSystemView(self.storage, self.timeline, partitions=[partition])
            self._listed[partition] = view.latest_file_slices(partition)
        return self._listed[partition]


# Latest slices by partition: listed up front, or as asked for.
PartitionSlices = dict[str, list[FileSlice]] | LatestSlices
