"""The workload profile of a Spark write: the route pass's record counts per (partition, file
group or new key, operation) as the driver sums them, with the bucket index tagged on the
driver; and what route tasks need to tag records against the table's base files.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from shoal.config import write_config as wc
from shoal.fs.storage import Storage
from shoal.fs.view import FileSystemView, LatestSlices
from shoal.index.bloom import BloomIndex
from shoal.index.bucket import BucketIndex, bucket_of_file
from shoal.spark.keying import KeySpec
from shoal.tasks.cow_write import OP_HARD_DELETE, OP_UPSERT
from shoal.write.assigner import Assignment
from shoal.write.writer import (
    make_index,
)


@dataclass(frozen=True)
class TagContext:
    """Broadcast to the route pass: the table's latest slices, each partition listed by the
    first task of a worker process whose keys fall in it, from the timeline the write planned on.
    The tasks read the key footers (key ranges, bloom filters) of those partitions' files, once
    per worker process (``read_key_footer``'s cache): the driver lists and reads none, and a
    write that touches a few partitions of a large table lists and reads only theirs."""

    slices: LatestSlices


class Profile:
    """Record counts per (partition, file group or None for new keys, operation)."""

    def __init__(self, counts: Sequence[tuple[str, str | None, int, int]]) -> None:
        self.counts = counts
        self._by_partition: dict[str, list[tuple[str | None, int, int]]] = defaultdict(list)
        for partition, file_id, op, n in counts:
            self._by_partition[partition].append((file_id, op, n))

    @classmethod
    def summed(cls, counted: pa.Table) -> Profile:
        """The profile of the route pass's counts (``routing.pass_counts``)."""
        total = counted.group_by(["partition", "file_id", "op"], use_threads=False).aggregate([("n", "sum")])
        rows = zip(
            *(total.column(c).to_pylist() for c in ("partition", "file_id", "op", "n_sum")), strict=True
        )
        return cls(sorted(((p, f, int(o), int(n)) for p, f, o, n in rows), key=repr))

    def partitions(self) -> list[str]:
        return sorted(self._by_partition)

    def inserts(self, partition: str) -> int:
        # Deletes of keys the table does not hold have nothing to do.
        return sum(n for fid, op, n in self._by_partition[partition] if fid is None and op == OP_UPSERT)

    def updates(self, partition: str) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for fid, _op, n in self._by_partition[partition]:
            if fid is not None:
                out[fid] += n
        return dict(out)

    def has_ordered_entries(self, partition: str, file_id: str, inserts: int) -> bool:
        """Whether the bucket gets records or soft deletes, not only hard deletes."""
        return inserts > 0 or any(
            fid == file_id and op != OP_HARD_DELETE for fid, op, _n in self._by_partition[partition]
        )

    def routed(self, assignment: Assignment) -> int:
        """Records the route pass sends to a bucket: tagged ones, and new keys of partitions
        that take inserts (deletes of keys the table does not hold go with them)."""
        with_inserts = {p for p, plan in assignment.insert_plan.items() if plan}
        return sum(n for p, fid, _op, n in self.counts if fid is not None or p in with_inserts)


@dataclass(frozen=True)
class BucketCounts:
    """A bucket index write's counts, tagged on the driver as the local writer tags its records:
    a key whose bucket has a file group goes to it (counted as an update, as the local writer
    counts it, whatever the write task then finds); the records of a bucket without one make
    its new file group; deletes there have nothing to do."""

    profile: Profile
    # Per partition: (bucket number, records) of the buckets without a file group, ascending.
    inserts: dict[str, list[tuple[int, int]]]
    # Rows counted per (partition, bucket number).
    per_bucket: dict[tuple[str, int], int]

    @classmethod
    def tagged(cls, counted: pa.Table, index: BucketIndex, view: FileSystemView) -> BucketCounts:
        total = counted.group_by(["partition", "bucket", "op"], use_threads=False).aggregate([("n", "sum")])
        by_partition: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        for p, b, o, n in zip(
            *(total.column(c).to_pylist() for c in ("partition", "bucket", "op", "n_sum")), strict=True
        ):
            by_partition[p].append((int(b), int(o), int(n)))
        counts: list[tuple[str, str | None, int, int]] = []
        inserts: dict[str, list[tuple[int, int]]] = {}
        per_bucket: dict[tuple[str, int], int] = defaultdict(int)
        for partition in sorted(by_partition):
            entries = by_partition[partition]
            ids = np.array([b for b, _, _ in entries], dtype=np.int64)
            file_ids = index.tag_buckets(ids, view.latest_file_slices(partition)).to_pylist()
            new: dict[int, int] = defaultdict(int)
            for (bucket, op, n), file_id in zip(entries, file_ids, strict=True):
                counts.append((partition, file_id, op, n))
                per_bucket[(partition, bucket)] += n
                if file_id is None and op == OP_UPSERT:
                    new[bucket] += n
            inserts[partition] = sorted(new.items())
        return cls(Profile(sorted(counts, key=repr)), inserts, dict(per_bucket))

    def routed(self, assignment: Assignment) -> int:
        """Records the route pass sends to a write task: those of buckets that have one."""
        written = {(b.partition_path, bucket_of_file(b.file_id)) for b in assignment.buckets}
        return sum(n for (p, bucket), n in self.per_bucket.items() if (p, bucket) in written)


def task_index(spec: KeySpec) -> BloomIndex | None:
    """The index a route task tags with: footers read from the files, key columns kept
    for the worker's next tasks."""
    storage, write_config = Storage(spec.base_uri), wc.WriteConfig(spec.write_options)
    return make_index(storage, write_config, spec.operation, cache_keys=True)
