"""The count pass of a Spark write (``mapInArrow`` over the key columns of the input): keys,
validates and tags the records against the base files' footers, and returns record counts per
(partition, file group or bucket, operation) with the corrected tags; and the driver's view of
those counts (the workload profile).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from shoal.config import write_config as wc
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice, FileSystemView
from shoal.index.bloom import BloomIndex
from shoal.index.bucket import BucketIndex, bucket_ids, bucket_of_file
from shoal.spark.keying import BucketLayout, KeySpec, chunked, keyed_columns
from shoal.tasks.cow_write import OP_HARD_DELETE, OP_UPSERT
from shoal.write.assigner import Assignment
from shoal.write.writer import (
    group_rows,
    make_index,
)

# Rows a count task tags at once: the key column of a candidate file is read once per chunk.
TAG_CHUNK_ROWS = 1_000_000

# Count rows: records per (partition, file id or null, operation), or with the bucket index per
# (partition, bucket number, operation); rows with a key are the bloom index's corrected tags.
COUNT_SCHEMA = "partition string, file_id string, op tinyint, n long, key string, bucket int"

COUNT_ARROW_SCHEMA = pa.schema(
    [
        ("partition", pa.string()),
        ("file_id", pa.string()),
        ("op", pa.int8()),
        ("n", pa.int64()),
        ("key", pa.string()),
        ("bucket", pa.int32()),
    ]
)


@dataclass(frozen=True)
class TagContext:
    """Broadcast to the count and route passes: the latest slices of every partition. The tasks
    read the key footers (key ranges, bloom filters) of the partitions their keys fall in, once
    per worker process (``read_key_footer``'s cache): the driver reads none, and a write that
    touches a few partitions of a large table reads only theirs."""

    slices: dict[str, list[FileSlice]]


class Profile:
    """Record counts per (partition, file group or None for new keys, operation)."""

    def __init__(self, counts: Sequence[tuple[str, str | None, int, int]]) -> None:
        self.counts = counts
        self._by_partition: dict[str, list[tuple[str | None, int, int]]] = defaultdict(list)
        for partition, file_id, op, n in counts:
            self._by_partition[partition].append((file_id, op, n))

    @classmethod
    def summed(cls, counted: pa.Table) -> Profile:
        """The profile of the count tasks' output (count rows have no key)."""
        counts = counted.filter(pc.is_null(counted.column("key")))
        total = counts.group_by(["partition", "file_id", "op"], use_threads=False).aggregate([("n", "sum")])
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


def corrections_of(counted: pa.Table) -> dict[str, tuple[pa.Array, pa.Array]]:
    """The count tasks' corrected tags by partition: (keys, file ids), null for a new key."""
    rows = counted.filter(pc.is_valid(counted.column("key")))
    return {
        partition: (
            rows.column("key").take(at).combine_chunks(),
            rows.column("file_id").take(at).combine_chunks(),
        )
        for partition, at in group_rows(rows.column("partition"))
    }


def one_count_task_per_core(keys: DataFrame, spark: SparkSession) -> DataFrame:
    """``keys`` in at most as many partitions as the cluster runs tasks at once (no shuffle).
    A count task that tags against the table's files reads (once per worker) and hashes every
    candidate file's key column for each chunk of keys it tags: the fewer, larger tasks, the
    fewer times each file is hashed, while every core still gets a task."""
    cores = spark.sparkContext.defaultParallelism
    return keys.coalesce(cores) if keys.rdd.getNumPartitions() > cores else keys


def count_task(spec: KeySpec, broadcast: Any, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Keys, validates and tags the key columns of one input partition; yields its record counts
    per (partition, file id or null, operation), and the keys whose tags differ from their
    footer tags (``BloomIndex.footer_tags``), with the right ones."""
    if spec.buckets is not None:
        yield from _count_buckets(spec, spec.buckets, batches)
        return
    context: TagContext | None = broadcast.value
    index = task_index(spec) if context is not None else None
    counts: dict[tuple[str, str | None, int], int] = defaultdict(int)
    corrected: list[pa.RecordBatch] = []
    for chunk in chunked(batches, TAG_CHUNK_ROWS):
        keys, partitions, ops = keyed_columns(spec, chunk)
        groups = group_rows(partitions)
        if index is None or context is None:
            tagged = [(p, rows, pa.nulls(len(rows), pa.string())) for p, rows in groups]
        else:
            tagged, fixes = _confirmed_tags(index, context.slices, keys, groups)
            corrected += fixes
        for partition, rows, tags in tagged:
            grouped = (
                pa.table({"f": tags, "o": ops.take(rows)})
                .group_by(["f", "o"], use_threads=False)
                .aggregate([([], "count_all")])
            )
            for f, o, n in zip(
                *(grouped.column(c).to_pylist() for c in ("f", "o", "count_all")), strict=True
            ):
                counts[(partition, f, o)] += n
    if counts:
        rows = [{"partition": p, "file_id": f, "op": o, "n": n} for (p, f, o), n in counts.items()]
        yield pa.RecordBatch.from_pylist(rows, schema=COUNT_ARROW_SCHEMA)
    yield from corrected


def _count_buckets(
    spec: KeySpec, layout: BucketLayout, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The bucket index's count task: record counts per (partition, bucket number, operation)."""
    parts: list[pa.Table] = []
    for chunk in chunked(batches, TAG_CHUNK_ROWS):
        keys, partitions, ops = keyed_columns(spec, chunk)
        numbers = bucket_ids(keys, layout.hash_fields, layout.num_buckets).astype(np.int32)
        parts.append(
            pa.table({"partition": partitions, "bucket": numbers, "op": ops})
            .group_by(["partition", "bucket", "op"], use_threads=False)
            .aggregate([([], "count_all")])
            .rename_columns(["partition", "bucket", "op", "n"])
        )
    if not parts:
        return
    total = pa.concat_tables(parts)
    if len(parts) > 1:
        total = (
            total.group_by(["partition", "bucket", "op"], use_threads=False)
            .aggregate([("n", "sum")])
            .rename_columns(["partition", "bucket", "op", "n"])
        )
    nulls = pa.nulls(total.num_rows, pa.string())
    columns = {"file_id": nulls, "key": nulls}
    yield from (
        pa.Table.from_pydict(
            {
                f.name: columns[f.name] if f.name in columns else total.column(f.name)
                for f in COUNT_ARROW_SCHEMA
            },
            schema=COUNT_ARROW_SCHEMA,
        )
        .combine_chunks()
        .to_batches()
    )


def _confirmed_tags(
    index: BloomIndex,
    slices: Mapping[str, list[FileSlice]],
    keys: pa.Array,
    groups: list[tuple[str, pa.Array]],
) -> tuple[list[tuple[str, pa.Array, pa.Array]], list[pa.RecordBatch]]:
    """Per partition (name, rows, tags): the footer tags, with the keys several files may hold
    confirmed by reading the files; and the corrections (count-schema batches of the keys whose
    confirmed tag differs). A key only one footer admits keeps that file's id unread: the write
    task of its file group takes a bloom false positive as an insert (a copy-on-write rewrite,
    or on merge-on-read ``split_strays``)."""
    per_partition = [keys.take(rows) for _, rows in groups]
    footer = index.footer_tags(
        [(k, slices.get(p, [])) for k, (p, _) in zip(per_partition, groups, strict=True)]
    )
    confirm = [np.flatnonzero(shared) for _, shared in footer]
    exact = index.tag(
        [
            (k.take(pa.array(at)), slices.get(p, []))
            for k, at, (p, _) in zip(per_partition, confirm, groups, strict=True)
        ],
        confirm=True,
    )
    tagged: list[tuple[str, pa.Array, pa.Array]] = []
    fixes: list[pa.RecordBatch] = []
    for (partition, rows), k, (tags, _), at, right in zip(
        groups, per_partition, footer, confirm, exact, strict=True
    ):
        tags = tags.cast(pa.string())
        if len(at):
            taken = pa.array(at)
            guessed = tags.take(taken)
            differs = pc.fill_null(pc.not_equal(guessed, right), True)
            differs = pc.and_(differs, pc.or_(pc.is_valid(guessed), pc.is_valid(right)))
            if pc.any(differs).as_py():
                wrong = pc.indices_nonzero(differs)
                fixed = right.take(wrong).cast(pa.string())
                fixes.append(
                    pa.RecordBatch.from_arrays(
                        [
                            pa.array([partition] * len(wrong), pa.string()),
                            fixed,
                            pa.array(np.zeros(len(wrong), dtype=np.int8)),
                            pa.array(np.zeros(len(wrong), dtype=np.int64)),
                            k.take(taken.take(wrong)),
                            pa.nulls(len(wrong), pa.int32()),
                        ],
                        schema=COUNT_ARROW_SCHEMA,
                    )
                )
            tags = replaced_at(tags, at, right.cast(pa.string()))
        tagged.append((partition, rows, tags))
    return tagged, fixes


def replaced_at(values: pa.Array, at: np.ndarray, new: pa.Array) -> pa.Array:
    """``values`` with the elements at ``at`` (ascending) replaced by ``new``."""
    order = np.empty(len(values), dtype=np.int64)
    keep = np.ones(len(values), dtype=bool)
    keep[at] = False
    kept = np.flatnonzero(keep)
    # Gather from [kept values..., new values...] in row order.
    order[kept] = np.arange(len(kept))
    order[at] = len(kept) + np.arange(len(at))
    return pa.concat_arrays([values.take(pa.array(kept)), new]).take(pa.array(order))


def task_index(spec: KeySpec) -> BloomIndex | None:
    """The index a count or route task tags with: footers read from the files, key columns kept
    for the worker's next tasks."""
    storage, write_config = Storage(spec.base_uri), wc.WriteConfig(spec.write_options)
    return make_index(storage, write_config, spec.operation, cache_keys=True)
