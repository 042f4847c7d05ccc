"""Workload profile and bucket assignment (DESIGN §3.1 step 6-7).

Updates go to the file group that holds them. Inserts first fill small files (a base file below
``hoodie.parquet.small.file.limit``; capacity ``(max file size - size) / average record size``),
then new file groups of ``max file size / average record size`` records each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from shoal.fs.naming import new_file_id
from shoal.fs.view import FileSlice


@dataclass
class Bucket:
    """One write task's target: an existing file group (merge/append) or a new one (create)."""

    partition_path: str
    file_id: str
    existing: FileSlice | None
    inserts: int = 0
    updates: int = 0

    @property
    def is_new(self) -> bool:
        return self.existing is None


@dataclass
class Assignment:
    """Buckets per partition, and where each partition's inserts go (bucket index, count)."""

    buckets: list[Bucket] = field(default_factory=list)
    insert_plan: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


class BucketAssigner:
    """Assigns one partition's inserts and updates to buckets."""

    def __init__(self, max_file_size: int, small_file_limit: int, avg_record_size: int) -> None:
        self.max_file_size = max_file_size
        self.small_file_limit = small_file_limit
        self.avg_record_size = max(1, avg_record_size)

    def records_per_new_file(self) -> int:
        return max(1, self.max_file_size // self.avg_record_size)

    def small_files(
        self, slices: Sequence[FileSlice], allow_logs: bool, exclude: frozenset[str] = frozenset()
    ) -> list[FileSlice]:
        """Slices whose base file is small; on MOR only slices without log files qualify, since
        inserts into a slice with logs would need a merge the reader does anyway."""
        if self.small_file_limit <= 0:
            return []
        out = [
            s
            for s in slices
            if s.base_file is not None
            and s.base_file.size < self.small_file_limit
            and (allow_logs or not s.log_files)
            and s.file_id not in exclude
        ]
        return sorted(out, key=lambda s: (s.base_file.size if s.base_file else 0, s.file_id))

    def assign(
        self,
        assignment: Assignment,
        partition: str,
        num_inserts: int,
        updates_by_file: dict[str, int],
        slices: Sequence[FileSlice],
        allow_logs: bool,
        use_small_files: bool = True,
    ) -> None:
        by_id = {s.file_id: s for s in slices}
        index_of: dict[str, int] = {}
        for fid, count in sorted(updates_by_file.items()):
            index_of[fid] = len(assignment.buckets)
            assignment.buckets.append(Bucket(partition, fid, by_id.get(fid), updates=count))
        plan: list[tuple[int, int]] = []
        remaining = num_inserts
        if use_small_files:
            # On MOR a file group updated in this batch takes the updates as a cheap log append;
            # packing inserts into it as well would turn that append into a rewrite.
            exclude = frozenset() if allow_logs else frozenset(updates_by_file)
            for sl in self.small_files(slices, allow_logs, exclude):
                if remaining <= 0:
                    break
                assert sl.base_file is not None
                capacity = (self.max_file_size - sl.base_file.size) // self.avg_record_size
                take = min(remaining, capacity)
                if take <= 0:
                    continue
                if sl.file_id not in index_of:
                    index_of[sl.file_id] = len(assignment.buckets)
                    assignment.buckets.append(Bucket(partition, sl.file_id, sl))
                assignment.buckets[index_of[sl.file_id]].inserts += take
                plan.append((index_of[sl.file_id], take))
                remaining -= take
        per_file = self.records_per_new_file()
        while remaining > 0:
            take = min(remaining, per_file)
            idx = len(assignment.buckets)
            assignment.buckets.append(Bucket(partition, new_file_id(), None, inserts=take))
            plan.append((idx, take))
            remaining -= take
        if plan:
            assignment.insert_plan[partition] = plan
