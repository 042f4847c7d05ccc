"""Workload profile and bucket assignment (DESIGN §3.1 step 6-7).

Updates go to the file group that holds them. Inserts first fill small files (a base file below
``hoodie.parquet.small.file.limit``; capacity ``(max file size - size) / average record size``),
then new file groups of ``max file size / average record size`` records each. With the bucket
index, a bucket's records all go to its one file group (:func:`assign_bucket_file_groups`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from shoal.fs.naming import new_file_id
from shoal.fs.view import FileSlice
from shoal.index.bucket import bucket_file_id

# Hudi's default ``hoodie.merge.small.file.group.candidates.limit``: on merge-on-read, a batch's
# inserts pad at most this many of a partition's smallest log-free file slices, since each one
# padded is a base file rewritten where the rest of the batch only appends logs.
MOR_SMALL_FILE_CANDIDATES = 1


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

    def __init__(
        self,
        max_file_size: int,
        small_file_limit: int,
        avg_record_size: int,
        mor_small_file_candidates: int = MOR_SMALL_FILE_CANDIDATES,
        insert_split_size: int | None = None,
    ) -> None:
        self.max_file_size = max_file_size
        self.small_file_limit = small_file_limit
        self.avg_record_size = max(1, avg_record_size)
        # hoodie.merge.small.file.group.candidates.limit
        self.mor_small_file_candidates = mor_small_file_candidates
        # hoodie.copyonwrite.insert.split.size, when hoodie.copyonwrite.insert.auto.split is off.
        self.insert_split_size = insert_split_size

    def records_per_new_file(self) -> int:
        return max(1, self.max_file_size // self.avg_record_size)

    def records_per_insert_bucket(self) -> int:
        """Records per new file group of an upsert or insert, as Hudi's UpsertPartitioner sizes
        its insert buckets: the maximum file size over the record size, or the fixed
        ``insert.split.size`` when auto split is off. A bulk insert rolls its files over by size
        alone."""
        return self.insert_split_size if self.insert_split_size is not None else self.records_per_new_file()

    def small_file_capacity(self, sl: FileSlice) -> int:
        """Records a small file can take before it reaches the maximum file size."""
        assert sl.base_file is not None
        return (self.max_file_size - sl.base_file.size) // self.avg_record_size

    def small_files(
        self,
        slices: Sequence[FileSlice],
        allow_logs: bool,
        exclude: frozenset[str] = frozenset(),
        limit: int | None = None,
    ) -> list[FileSlice]:
        """Slices whose base file is small, smallest first, at most ``limit`` of them; on MOR only
        slices without log files qualify, since inserts into a slice with logs would need a merge
        the reader does anyway."""
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
        out.sort(key=lambda s: (s.base_file.size if s.base_file else 0, s.file_id))
        return out if limit is None else out[:limit]

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
            # Hudi's SparkUpsertDeltaCommitPartitioner takes only the smallest candidates on MOR
            # (its bloom and simple indexes cannot find keys in logs); copy-on-write takes all.
            limit = None if allow_logs else self.mor_small_file_candidates
            for sl in self.small_files(slices, allow_logs, exclude, limit):
                if remaining <= 0:
                    break
                take = min(remaining, self.small_file_capacity(sl))
                if take <= 0:
                    continue
                if sl.file_id not in index_of:
                    index_of[sl.file_id] = len(assignment.buckets)
                    assignment.buckets.append(Bucket(partition, sl.file_id, sl))
                assignment.buckets[index_of[sl.file_id]].inserts += take
                plan.append((index_of[sl.file_id], take))
                remaining -= take
        per_file = self.records_per_insert_bucket()
        while remaining > 0:
            take = min(remaining, per_file)
            idx = len(assignment.buckets)
            assignment.buckets.append(Bucket(partition, new_file_id(), None, inserts=take))
            plan.append((idx, take))
            remaining -= take
        if plan:
            assignment.insert_plan[partition] = plan


def assign_bucket_file_groups(
    assignment: Assignment,
    partition: str,
    inserts_by_bucket: Sequence[tuple[int, int]],
    updates_by_file: dict[str, int],
    slices: Sequence[FileSlice],
) -> None:
    """The bucket index's assignment of one partition: each tagged file group takes its
    records (updates, and new keys of its bucket), and each bucket without a file group gets a
    new one named after it that takes all its records. No small-file packing and no size limit:
    a bucket is one file group."""
    by_id = {s.file_id: s for s in slices}
    for fid, count in sorted(updates_by_file.items()):
        assignment.buckets.append(Bucket(partition, fid, by_id.get(fid), updates=count))
    plan: list[tuple[int, int]] = []
    for bucket, count in inserts_by_bucket:
        plan.append((len(assignment.buckets), count))
        assignment.buckets.append(Bucket(partition, bucket_file_id(bucket), None, inserts=count))
    if plan:
        assignment.insert_plan[partition] = plan


@dataclass
class SmallFileAssign:
    """A small file picked for a partition's inserts, and the records it can still take."""

    slice: FileSlice
    capacity: int


@dataclass
class PartitionAssignState:
    """Where a partition's inserts go over the rounds of one write: the small files picked at
    its first inserts (with their room left), then the newest new file group (with its room
    left). Hudi's Flink BucketAssigner keeps the same small-file and new-file states."""

    small_files: list[SmallFileAssign]
    new_bucket: int | None = None
    new_capacity: int = 0


class RollingAssigner:
    """Assigns the records of one write in rounds, as the streaming writer routes each incoming
    batch within the same open instant (DESIGN §3.4).

    Buckets persist across rounds: a file group has one bucket, whatever round its updates come
    in; inserts keep filling the small files and the new file group earlier rounds opened before
    new file groups are added. Sizing (small files, capacities) is the :class:`BucketAssigner`'s.
    """

    def __init__(self, sizing: BucketAssigner, allow_logs: bool) -> None:
        self.sizing = sizing
        # On merge-on-read, inserts go only to small files without logs, and not to a file group
        # whose bucket takes updates only: that bucket is a cheap log append.
        self.allow_logs = allow_logs
        self.assignment = Assignment()
        self._bucket_of: dict[tuple[str, str], int] = {}
        self._states: dict[str, PartitionAssignState] = {}
        # (partition, bucket number) -> bucket, for the bucket index's new file groups.
        self._bucket_numbers: dict[tuple[str, int], int] = {}

    def bucket_of(self, partition: str, file_id: str) -> int | None:
        """The bucket of a file group, if one was assigned."""
        return self._bucket_of.get((partition, file_id))

    def _bucket(self, partition: str, file_id: str, existing: FileSlice | None) -> int:
        idx = self._bucket_of.get((partition, file_id))
        if idx is None:
            idx = self._bucket_of[(partition, file_id)] = len(self.assignment.buckets)
            self.assignment.buckets.append(Bucket(partition, file_id, existing))
        return idx

    def assign_updates(self, partition: str, existing: FileSlice, count: int) -> int:
        """The bucket of the file group holding ``count`` more updated (or deleted) records."""
        idx = self._bucket(partition, existing.file_id, existing)
        self.assignment.buckets[idx].updates += count
        return idx

    def assign_inserts(
        self, partition: str, count: int, slices: Sequence[FileSlice]
    ) -> list[tuple[int, int]]:
        """Buckets for ``count`` new records of ``partition``, as (bucket index, records), in
        order: small files first, then the newest new file group, then new ones."""
        state = self._states.get(partition)
        if state is None:
            picked = self.sizing.small_files(slices, self.allow_logs)
            state = self._states[partition] = PartitionAssignState(
                [SmallFileAssign(sl, self.sizing.small_file_capacity(sl)) for sl in picked]
            )
        plan: list[tuple[int, int]] = []
        remaining = count
        for small in state.small_files:
            if remaining <= 0:
                break
            take = min(remaining, small.capacity)
            if take <= 0 or not self._takes_inserts(partition, small.slice.file_id):
                continue
            idx = self._bucket(partition, small.slice.file_id, small.slice)
            self.assignment.buckets[idx].inserts += take
            small.capacity -= take
            plan.append((idx, take))
            remaining -= take
        while remaining > 0:
            if state.new_bucket is None or state.new_capacity <= 0:
                state.new_bucket = self._bucket(partition, new_file_id(), None)
                state.new_capacity = self.sizing.records_per_new_file()
            take = min(remaining, state.new_capacity)
            self.assignment.buckets[state.new_bucket].inserts += take
            state.new_capacity -= take
            plan.append((state.new_bucket, take))
            remaining -= take
        return plan

    def assign_bucket_inserts(
        self, partition: str, per_bucket: Sequence[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """The bucket index's inserts of ``partition``: (bucket number, records) of buckets
        without a committed file group, each to the new file group of its bucket, which the
        checkpoint opens at the bucket's first records. Returns (bucket index, records)."""
        plan = []
        for number, count in per_bucket:
            idx = self._bucket_numbers.get((partition, number))
            if idx is None:
                idx = self._bucket_numbers[(partition, number)] = self._bucket(
                    partition, bucket_file_id(number), None
                )
            self.assignment.buckets[idx].inserts += count
            plan.append((idx, count))
        return plan

    def _takes_inserts(self, partition: str, file_id: str) -> bool:
        if self.allow_logs:
            return True
        idx = self._bucket_of.get((partition, file_id))
        if idx is None:
            return True
        bucket = self.assignment.buckets[idx]
        return bucket.inserts > 0 or bucket.updates == 0
