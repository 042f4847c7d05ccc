"""The route pass of a Spark write (``mapInArrow`` over whole records): gives every record the
route value of its bucket's write task, by the tags the count pass counted (or, with the bucket
index, the key's bucket; with a global index, the driver's plan by key) and packs them by route
(``shoal.spark.packing``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext

from shoal.errors import InvalidArgumentError
from shoal.fs.storage import Storage
from shoal.index.bucket import bucket_ids, bucket_of_file
from shoal.spark.counting import TagContext, replaced_at, task_index
from shoal.spark.global_keys import GlobalRoutePlan
from shoal.spark.keying import KeySpec, chunked, task_keygen
from shoal.spark.keys import KeyMap, key_hash
from shoal.spark.packing import SEQ_COLUMN, PackedWriter
from shoal.spark.write_tasks import BucketTaskSpec
from shoal.tasks.cow_write import OP_COLUMN, OP_UPSERT
from shoal.write.assigner import Assignment
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY
from shoal.write.schema import (
    normalize_types,
    strip_meta_columns,
)
from shoal.write.writer import (
    group_rows,
    key_records,
)

# Records the route pass packs at once: the fewer, larger runs, the fewer reads a write task
# makes; the bytes bound the memory a chunk takes.
PACK_CHUNK_ROWS = 200_000

PACK_CHUNK_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class RoutePlan:
    """Broadcast to the route pass: the keys whose tags the count pass corrected (by
    partition: keys and file ids, null for a new key), the bucket of each file group by
    partition, and each partition's insert buckets (cumulative record counts and buckets).
    A record's route value is its bucket's number in the assignment."""

    tags: TagContext | None
    corrections: dict[str, tuple[pa.Array, pa.Array]]
    updates: dict[str, dict[str, int]]
    inserts: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]


@dataclass(frozen=True)
class BucketRoutePlan:
    """Broadcast to the route pass of a bucket index write: per partition, the bucket index's
    bucket numbers (ascending) that take records and the assignment's buckets (route values)
    of their file groups."""

    routes: dict[str, tuple[np.ndarray, np.ndarray]]


def route_plan(
    tags: TagContext | None,
    corrections: dict[str, tuple[pa.Array, pa.Array]],
    assignment: Assignment,
) -> RoutePlan:
    """Where the route pass sends rows: tagged rows to their file group's bucket; the rest of a
    partition over its insert buckets by ``key_hash(key) % inserts`` against the buckets'
    cumulative counts (Hudi's UpsertPartitioner weighting). Deletes of new keys go where an
    insert of the same key would, so deduplication sees both; rows of partitions without
    inserts that match nothing are dropped."""
    updates: dict[str, dict[str, int]] = defaultdict(dict)
    for b, bucket in enumerate(assignment.buckets):
        # Tags name existing file groups only; a new bucket's fresh file id matches no row.
        updates[bucket.partition_path][bucket.file_id] = b
    inserts = {}
    for partition, plan in assignment.insert_plan.items():
        if plan:
            cumulative = np.cumsum([count for _, count in plan]).tolist()
            inserts[partition] = (tuple(int(c) for c in cumulative), tuple(b for b, _ in plan))
    return RoutePlan(tags, corrections, dict(updates), inserts)


def bucket_route_plan(assignment: Assignment) -> BucketRoutePlan:
    """Where the route pass of a bucket index write sends rows: to the task of their
    (partition, bucket number), existing file group or new; rows of other buckets (deletes of
    keys no file group holds) are dropped."""
    by_partition: dict[str, dict[int, int]] = defaultdict(dict)
    for b, bucket in enumerate(assignment.buckets):
        number = bucket_of_file(bucket.file_id)
        assert number is not None, bucket.file_id  # the bucket index names every file group
        by_partition[bucket.partition_path][number] = b
    routes = {}
    for partition, values in by_partition.items():
        numbers = sorted(values)
        routes[partition] = (
            np.asarray(numbers, dtype=np.int64),
            np.asarray([values[k] for k in numbers], dtype=np.int32),
        )
    return BucketRoutePlan(routes)


_CORRECTIONS: dict[str, dict[str, KeyMap]] = {}


def pack_task(
    spec: KeySpec,
    task: BucketTaskSpec,
    broadcast: Any,
    ordered: bool,
    directory: str,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """The route pass over whole records (``mapInArrow``): keys them as the write task would
    (``key_records``), gives each its route value (``_routes``) and writes, per chunk of
    input and route, the chunk's records of that route as one run of this attempt's packed
    file in ``directory`` (``shoal.spark.packing``); yields the file's index rows.
    ``ordered``: each record carries its input position (``SEQ_COLUMN``, the value
    ``monotonically_increasing_id`` would give it), which deduplication needs once records of
    several input partitions meet."""
    keygen = task_keygen(task.table_properties)
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    attempt = context.taskAttemptId() if context is not None else 0
    position = (partition << 33) if ordered else 0
    packed = PackedWriter(Storage(spec.base_uri), f"{directory}/{partition}-{attempt}.arrow", partition)
    try:
        for chunk in chunked(batches, PACK_CHUNK_ROWS, PACK_CHUNK_BYTES):
            records = key_records(
                normalize_types(strip_meta_columns(chunk)),
                task.operation,
                keygen,
                task.ordering_field,
                task.table_schema,
                task.fill_missing,
            )
            if ordered:
                seq = np.arange(position, position + records.num_rows, dtype=np.int64)
                records = records.append_column(SEQ_COLUMN, pa.array(seq))
                position += records.num_rows
            if spec.global_keys:
                plan: GlobalRoutePlan = broadcast.value
                records, routes = plan.expand(records)
            else:
                routes = _routes(
                    spec,
                    broadcast,
                    records.column(RECORD_KEY).combine_chunks(),
                    records.column(PARTITION_PATH).combine_chunks(),
                    records.column(OP_COLUMN).combine_chunks(),
                )
            packed.write(records, routes)
    finally:
        index = packed.close()
    yield index


def _routes(spec: KeySpec, broadcast: Any, keys: pa.Array, partitions: pa.Array, ops: pa.Array) -> pa.Array:
    """The route value of every keyed record: null for rows to drop (deletes of keys nobody
    holds, in partitions without inserts). Tags are the footer tags with the count pass's
    corrections: no file is read."""
    if spec.buckets is not None:
        return route_buckets(
            bucket_ids(keys, spec.buckets.hash_fields, spec.buckets.num_buckets),
            partitions,
            ops,
            broadcast.value,
        )
    plan: RoutePlan = broadcast.value
    groups = group_rows(partitions)
    hashes = key_hash(keys)
    if plan.tags is None:
        tagged = [(p, rows, pa.nulls(len(rows), pa.string())) for p, rows in groups]
    else:
        index = task_index(spec)
        assert index is not None
        per_partition = [keys.take(rows) for _, rows in groups]
        footer = index.footer_tags(
            [(k, plan.tags.slices.get(p, [])) for k, (p, _) in zip(per_partition, groups, strict=True)]
        )
        corrections = _correction_maps(spec.write_token, plan)
        tagged = []
        for (partition, rows), k, (tags, _) in zip(groups, per_partition, footer, strict=True):
            tags = tags.cast(pa.string())
            fixes = corrections.get(partition)
            if fixes is not None:
                at, right = fixes.lookup(k, hashes[rows.to_numpy(zero_copy_only=False)])
                if len(at):
                    tags = replaced_at(tags, at, right)
            tagged.append((partition, rows, tags))
    return route_rows(hashes, ops, tagged, plan, len(keys))


def _correction_maps(token: str, plan: RoutePlan) -> dict[str, KeyMap]:
    maps = _CORRECTIONS.get(token)
    if maps is None:
        _CORRECTIONS.clear()
        maps = _CORRECTIONS[token] = {p: KeyMap(k, f) for p, (k, f) in plan.corrections.items()}
    return maps


def route_rows(
    hashes: np.ndarray, ops: pa.Array, tagged: list[tuple[str, pa.Array, pa.Array]], plan: RoutePlan, n: int
) -> pa.Array:
    """Route values (int32, null: dropped) of ``n`` keyed and tagged rows (per partition: its
    name, rows and tags), by ``plan``; ``hashes``: the rows' ``key_hash``."""
    route = np.zeros(n, dtype=np.int32)
    routed = np.zeros(n, dtype=bool)
    for partition, rows, here in tagged:
        at = rows.to_numpy(zero_copy_only=False)
        found = pc.is_valid(here)
        tagged_rows = pc.indices_nonzero(found).to_numpy(zero_copy_only=False)
        if len(tagged_rows):
            files = pc.dictionary_encode(here.take(pa.array(tagged_rows)))
            buckets = plan.updates.get(partition, {})
            values = [buckets.get(fid) for fid in files.dictionary.to_pylist()]
            if None in values:
                raise InvalidArgumentError(
                    f"the input changed between its two evaluations: an update of file group "
                    f"{files.dictionary[values.index(None)]} in partition {partition!r} was not counted. "
                    "Checkpoint or cache an input that is not deterministic"
                )
            codes = files.indices.to_numpy(zero_copy_only=False)
            route[at[tagged_rows]] = np.asarray(values, dtype=np.int32)[codes]
            routed[at[tagged_rows]] = True
        new = at[pc.indices_nonzero(pc.invert(found)).to_numpy(zero_copy_only=False)]
        if not len(new):
            continue
        inserts = plan.inserts.get(partition)
        if inserts is None:
            if pc.any(pc.equal(ops.take(pa.array(new)), OP_UPSERT)).as_py():
                raise InvalidArgumentError(
                    f"the input changed between its two evaluations: a new record of partition "
                    f"{partition!r} was not counted. Checkpoint or cache an input that is not deterministic"
                )
            continue
        cumulative, routes = inserts
        position = hashes[new] % np.uint64(cumulative[-1])
        slot = np.searchsorted(np.asarray(cumulative, dtype=np.uint64), position, side="right")
        route[new] = np.asarray(routes, dtype=np.int32)[slot]
        routed[new] = True
    return pa.array(route, mask=~routed)


def route_buckets(
    numbers: np.ndarray, partitions: pa.Array, ops: pa.Array, plan: BucketRoutePlan
) -> pa.Array:
    """Route values (int32, null: dropped) of keyed rows by their bucket ``numbers``: the task of
    their (partition, bucket). Every record's bucket has one (a file group, or its new one)."""
    n = len(numbers)
    route = np.zeros(n, dtype=np.int32)
    routed = np.zeros(n, dtype=bool)
    for partition, rows in group_rows(partitions):
        at = rows.to_numpy(zero_copy_only=False)
        known = plan.routes.get(partition)
        if known is not None:
            buckets, values = known
            ids = numbers[at]
            position = np.minimum(np.searchsorted(buckets, ids), len(buckets) - 1)
            hit = buckets[position] == ids
            route[at[hit]] = values[position[hit]]
            routed[at[hit]] = True
            at = at[~hit]
        lost = (
            at[pc.equal(ops.take(pa.array(at)), OP_UPSERT).to_numpy(zero_copy_only=False)] if len(at) else at
        )
        if len(lost):
            raise InvalidArgumentError(
                f"the input changed between its two evaluations: a record of bucket {int(numbers[lost[0]])} "
                f"in partition {partition!r} was not counted. Checkpoint or cache an input that is not "
                "deterministic"
            )
    return pa.array(route, mask=~routed)
