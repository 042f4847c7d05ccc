"""The route pass of a Spark write (``mapInArrow`` over whole records): keys every record as the
write task would, and packs the records (``shoal.spark.packing``) by where they go.

Without a global index the route pass is the write's only pass over its input, and it runs
before the driver plans: each record's *provisional route* is what the driver's plan will turn
into a bucket. A record of a file group goes by (partition, file id): the bloom or simple index
tags it (``BloomIndex.footer_tags``, and the files' key columns read for
keys several footers admit); with the bucket index by (partition, bucket number); a new key by
(partition, insert slot), a range of its key hash (``shoal.spark.keys``). The task returns its
runs and its record counts per provisional route and operation; the driver assigns buckets
from those counts (the workload profile) and lays the runs out on write tasks
(:func:`laid_out_runs`). A slot whose hashes spread over several insert buckets goes to each,
with the range of positions each keeps.

With a global index the driver plans by key first (``shoal.spark.global_keys``), and the route
pass sends every record to its key's destinations, whose route values are bucket numbers.
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
from pyspark.sql.pandas.types import from_arrow_schema

from shoal.arrays import group_rows
from shoal.fs.storage import Storage
from shoal.fs.view import PartitionSlices
from shoal.index.bloom import BloomIndex
from shoal.index.bucket import bucket_ids, bucket_of_file
from shoal.spark.counting import TagContext, task_index
from shoal.spark.global_keys import GlobalRoutePlan
from shoal.spark.keying import KeySpec, chunked, logs_deletes, task_keygen
from shoal.spark.keys import insert_slots, key_hash, slot_positions
from shoal.spark.packing import SEQ_COLUMN, PackedWriter, Run
from shoal.tasks.cow_write import OP_COLUMN, OP_UPSERT
from shoal.write.assigner import Assignment
from shoal.write.insert_duplicates import without_held_keys
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY, check_logged_delete_orderings
from shoal.write.schema import normalize_types, strip_meta_columns
from shoal.write.writer import Operation, key_records

# Records the route pass packs at once: the fewer, larger runs, the fewer reads a write task
# makes; a candidate file's key column is read once per chunk; the bytes bound its memory.
PACK_CHUNK_ROWS = 500_000

PACK_CHUNK_BYTES = 128 * 1024 * 1024

# The route pass's rows. A run row (offset and length set) names a run of a packed file by its
# route value; a count row (offset null) gives the records of one provisional route (partition,
# then file id, insert slot or bucket number) and operation that the task's runs of that route
# value in that file hold.
_PASS_ARROW = pa.schema(
    [
        ("route", pa.int32()),
        ("part", pa.int32()),
        ("file", pa.string()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("partition", pa.string()),
        ("file_id", pa.string()),
        ("slot", pa.int32()),
        ("bucket", pa.int32()),
        ("op", pa.int8()),
        ("n", pa.int64()),
    ]
)
PASS_SCHEMA = from_arrow_schema(_PASS_ARROW)
# The pass columns of a count row.
_PASS_FIELDS = [(f.name, f.type) for f in _PASS_ARROW][5:]
# How many operations there are (OP_UPSERT, OP_SOFT_DELETE, OP_HARD_DELETE).
_OPS = 3

# A provisional route: (partition, file id or None, insert slot or -1, bucket number or -1).
Provisional = tuple[str, str | None, int, int]
# One partition's tags in the route pass: (partition, its rows, per row the file id of the
# first file group holding its key or null, and the further holders of keys several file groups
# hold: positions among the rows, with a file id each).
ConfirmedTags = tuple[str, pa.Array, pa.Array, tuple[np.ndarray, pa.Array]]
_NO_HOLDERS: tuple[np.ndarray, pa.Array] = (np.zeros(0, dtype=np.int64), pa.array([], pa.string()))


@dataclass(frozen=True)
class RecordKeying:
    """How the route pass keys whole records, as the write task will."""

    operation: Operation
    table_properties: dict[str, str]
    ordering_field: str | None
    table_schema: pa.Schema | None
    fill_missing: bool

    def key(self, chunk: pa.Table) -> pa.Table:
        # One chunk per column: the key generator takes a string key field as it is, so the
        # record key column shares its memory, and the packed runs store it once (a copy to
        # pack and to unpack otherwise); the combining costs a fifth of that copy's packing.
        keyed = key_records(
            normalize_types(strip_meta_columns(chunk.combine_chunks())),
            self.operation,
            task_keygen(self.table_properties),
            self.ordering_field,
            self.table_schema,
            self.fill_missing,
        )
        if self.operation == Operation.UPSERT and logs_deletes(self.table_properties):
            check_logged_delete_orderings(keyed, self.ordering_field)
        return keyed


def route_task(
    spec: KeySpec,
    keying: RecordKeying,
    broadcast: Any,
    ordered: bool,
    directory: str,
    batches: Iterator[pa.RecordBatch],
    held: Any = None,
) -> Iterator[pa.RecordBatch]:
    """The route pass over one input partition (``mapInArrow``): keys its records, routes them
    (provisionally, or with a global index by the driver's plan in ``broadcast``) and writes,
    per chunk of input and route, the chunk's records of that route as one run of this
    attempt's packed file in ``directory``; yields the file's run rows and, for provisional
    routes, its count rows (``PASS_SCHEMA``). ``ordered``: each record carries its input
    position (``SEQ_COLUMN``, the value ``monotonically_increasing_id`` would give it), which
    deduplication needs once records of several input partitions meet. ``held``: for an insert
    under a duplicate policy, a broadcast of the policy and the table's ``StoredKeys``
    (``shoal.write.insert_duplicates``): records of keys the table holds are left out here, or
    fail the write."""
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    attempt = context.taskAttemptId() if context is not None else 0
    position = (partition << 33) if ordered else 0
    path = f"{directory}/{partition}-{attempt}.arrow"
    packed = PackedWriter(Storage(spec.base_uri), path, partition)
    routes = None if spec.global_keys else _ProvisionalRoutes(spec, broadcast.value)
    try:
        for chunk in chunked(batches, PACK_CHUNK_ROWS, PACK_CHUNK_BYTES):
            records = keying.key(chunk)
            if held is not None:
                policy, stored = held.value
                records = without_held_keys(records, stored.held(records), policy)
            if ordered:
                seq = np.arange(position, position + records.num_rows, dtype=np.int64)
                records = records.append_column(SEQ_COLUMN, pa.array(seq))
                position += records.num_rows
            if routes is None:
                plan: GlobalRoutePlan = broadcast.value
                records, values = plan.expand(records)
            else:
                records, values = routes.of(records)
            packed.write(records, values)
    finally:
        index = packed.close()
    yield _with_pass_columns(index)
    if routes is not None:
        yield routes.count_rows(path, partition)


def pass_mismatch_row(task: int, reason: str) -> pa.RecordBatch:
    """The route pass's row for a task over the input's files that met a file pyarrow would
    not read as Spark does (``shoal.spark.file_input.file_task``): ``route`` null, ``file`` the
    reason."""
    names = [f.name for f in _PASS_ARROW]
    columns = [pa.nulls(1, f.type) for f in _PASS_ARROW]
    columns[names.index("part")] = pa.array([task], pa.int32())
    columns[names.index("file")] = pa.array([reason], pa.string())
    return pa.RecordBatch.from_arrays(columns, schema=_PASS_ARROW)


def input_mismatch(rows: pa.Table) -> str | None:
    """The first mismatch a route pass over the input's files met (see
    :func:`pass_mismatch_row`), or None."""
    mismatched = rows.filter(pc.is_null(rows.column("route")))
    return None if mismatched.num_rows == 0 else str(mismatched.column("file")[0])


def _with_pass_columns(index: pa.RecordBatch) -> pa.RecordBatch:
    columns = list(index.columns) + [pa.nulls(index.num_rows, t) for _, t in _PASS_FIELDS]
    return pa.RecordBatch.from_arrays(columns, names=[*index.schema.names, *(n for n, _ in _PASS_FIELDS)])


class _ProvisionalRoutes:
    """A route task's provisional routes (numbered as they appear) and its record counts."""

    def __init__(self, spec: KeySpec, tags: TagContext | None) -> None:
        self.spec = spec
        self.slices: PartitionSlices = tags.slices if tags is not None else {}
        self.index: BloomIndex | None = task_index(spec) if tags is not None else None
        self.routes: dict[Provisional, int] = {}
        self.counts = np.zeros(0, dtype=np.int64)

    def _numbered(self, routes: list[Provisional]) -> np.ndarray:
        return np.asarray([self.routes.setdefault(r, len(self.routes)) for r in routes], dtype=np.int32)

    def of(self, records: pa.Table) -> tuple[pa.Table, pa.Array]:
        """The records as their routes take them, and the route value of each; counts them. A
        record whose key several file groups of its partition hold (kept by inserts and bulk
        inserts) goes to each, as Hudi's index joins it with every location: it comes once per
        file group, in input order, so the counts, the runs and the write tasks' records agree."""
        keys = records.column(RECORD_KEY).combine_chunks()
        groups = group_rows(records.column(PARTITION_PATH))
        values = np.zeros(len(keys), dtype=np.int32)
        # Further holders of keys held by several file groups: (rows, route values).
        also: list[tuple[np.ndarray, np.ndarray]] = []
        layout = self.spec.buckets
        if layout is not None:
            numbers = bucket_ids(keys, layout.hash_fields, layout.num_buckets)
            for partition, rows in groups:
                at = rows.to_numpy(zero_copy_only=False)
                distinct, inverse = np.unique(numbers[at], return_inverse=True)
                values[at] = self._numbered([(partition, None, -1, int(b)) for b in distinct])[inverse]
        else:
            for partition, rows, tags, (also_at, also_ids) in self._tagged(keys, groups):
                at = rows.to_numpy(zero_copy_only=False)
                found = pc.is_valid(tags).to_numpy(zero_copy_only=False)
                if found.any():
                    files = pc.dictionary_encode(tags.filter(pa.array(found)))
                    numbered = self._numbered([(partition, f, -1, -1) for f in files.dictionary.to_pylist()])
                    values[at[found]] = numbered[files.indices.to_numpy(zero_copy_only=False)]
                if len(also_at):
                    files = pc.dictionary_encode(also_ids)
                    numbered = self._numbered([(partition, f, -1, -1) for f in files.dictionary.to_pylist()])
                    also.append((at[also_at], numbered[files.indices.to_numpy(zero_copy_only=False)]))
                if not found.all():
                    new = at[~found]
                    slots = insert_slots(key_hash(keys.take(pa.array(new))))
                    distinct, inverse = np.unique(slots, return_inverse=True)
                    values[new] = self._numbered([(partition, None, int(s), -1) for s in distinct])[inverse]
        if also:
            records, values = _with_copies(records, values, also)
        ops = records.column(OP_COLUMN).combine_chunks().to_numpy(zero_copy_only=False).astype(np.int64)
        counted = np.bincount(values.astype(np.int64) * _OPS + ops, minlength=_OPS * len(self.routes))
        self.counts = np.concatenate([self.counts, np.zeros(len(counted) - len(self.counts), np.int64)])
        self.counts += counted
        return records, pa.array(values)

    def _tagged(self, keys: pa.Array, groups: list[tuple[str, pa.Array]]) -> list[ConfirmedTags]:
        """Per partition (name, rows, file ids: null for a key no file holds, further holders)."""
        if self.index is None:
            return [(p, rows, pa.nulls(len(rows), pa.string()), _NO_HOLDERS) for p, rows in groups]
        return confirmed_tags(self.index, self.slices, keys, groups)

    def count_rows(self, path: str, part: int) -> pa.RecordBatch:
        """The count rows (``PASS_SCHEMA``) of the records routed so far."""
        by_value = {v: r for r, v in self.routes.items()}
        nonzero = np.flatnonzero(self.counts)
        routes = [by_value[int(i) // _OPS] for i in nonzero]
        n = len(nonzero)
        return pa.RecordBatch.from_arrays(
            [
                pa.array(nonzero // _OPS, pa.int32()),
                pa.array([part] * n, pa.int32()),
                pa.array([path] * n, pa.string()),
                pa.nulls(n, pa.int64()),
                pa.nulls(n, pa.int64()),
                pa.array([r[0] for r in routes], pa.string()),
                pa.array([r[1] for r in routes], pa.string()),
                pa.array([r[2] for r in routes], pa.int32()),
                pa.array([r[3] for r in routes], pa.int32()),
                pa.array(nonzero % _OPS, pa.int8()),
                pa.array(self.counts[nonzero], pa.int64()),
            ],
            names=["route", "part", "file", "offset", "length", *(name for name, _ in _PASS_FIELDS)],
        )


def confirmed_tags(
    index: BloomIndex,
    slices: PartitionSlices,
    keys: pa.Array,
    groups: list[tuple[str, pa.Array]],
) -> list[ConfirmedTags]:
    """Per partition (name, rows, tags, further holders): the footer tags, with the keys several
    files may hold confirmed by reading the files. A key only one footer admits keeps that
    file's id unread: the write task of its file group takes a bloom false positive as an insert
    (a copy-on-write rewrite, or on merge-on-read ``split_strays``). The further holders are the
    other file groups that hold a confirmed key (``Tagged.also_rows``, as positions among the
    partition's rows, and ``Tagged.also_file_ids``): only confirmed keys can have several."""
    per_partition = [keys.take(rows) for _, rows in groups]
    footer = index.footer_tags(
        [(k, slices.get(p, [])) for k, (p, _) in zip(per_partition, groups, strict=True)]
    )
    confirm = [np.flatnonzero(shared) for _, shared in footer]
    exact = index.tag_all(
        [
            (k.take(pa.array(at)), slices.get(p, []))
            for k, at, (p, _) in zip(per_partition, confirm, groups, strict=True)
        ],
        confirm=True,
    )
    tagged: list[ConfirmedTags] = []
    for (partition, rows), (tags, _), at, right in zip(groups, footer, confirm, exact, strict=True):
        tags = tags.cast(pa.string())
        if len(at):
            tags = replaced_at(tags, at, right.file_ids.cast(pa.string()))
        holders = (at[right.also_rows], right.also_file_ids) if len(right.also_rows) else _NO_HOLDERS
        tagged.append((partition, rows, tags, holders))
    return tagged


def _with_copies(
    records: pa.Table, values: np.ndarray, also: list[tuple[np.ndarray, np.ndarray]]
) -> tuple[pa.Table, np.ndarray]:
    """``records`` with a copy of each row in ``also`` (rows, route values) after it, in input
    order: a key's records keep their order in every route they take."""
    rows = np.concatenate([np.arange(records.num_rows), *(at.astype(np.int64) for at, _ in also)])
    routes = np.concatenate([values, *(v for _, v in also)])
    order = np.argsort(rows, kind="stable")
    return records.take(pa.array(rows[order])), routes[order].astype(np.int32)


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


def pass_counts(rows: pa.Table) -> pa.Table:
    """The count rows of the route pass's output: (partition, file_id, slot, bucket, op, n)."""
    counts = rows.filter(pc.is_null(rows.column("offset")))
    return counts.select([name for name, _ in _PASS_FIELDS])


def laid_out_runs(rows: pa.Table, assignment: Assignment) -> list[tuple[int, int, Run]]:
    """The runs of the route pass's output (provisional routes), each as (bucket, input
    partition, run) for every bucket of ``assignment`` it goes to: a file group's runs to its
    bucket; a bucket number's to the bucket of its file group; an insert slot's to each insert
    bucket of its partition whose range of positions the slot's hashes reach, keeping that
    range when the slot reaches beyond it. Runs of routes no bucket takes (deletes of keys no
    file group holds) are left out.

    Raises:
        ValueError: records of new keys, or of a file group, that no bucket takes.
    """
    by_file: dict[tuple[str, str], int] = {}
    by_number: dict[tuple[str, int], int] = {}
    for b, bucket in enumerate(assignment.buckets):
        by_file[(bucket.partition_path, bucket.file_id)] = b
        number = bucket_of_file(bucket.file_id)
        if number is not None:
            by_number[(bucket.partition_path, number)] = b
    inserts: dict[str, tuple[list[int], list[int], int]] = {}
    for partition, plan in assignment.insert_plan.items():
        if plan:
            ends = np.cumsum([count for _, count in plan]).tolist()
            inserts[partition] = ([b for b, _ in plan], [0, *ends], int(ends[-1]))
    counts = rows.filter(pc.is_null(rows.column("offset")))
    routes: dict[tuple[str, int], Provisional] = {}
    upserts: dict[tuple[str, int], bool] = defaultdict(bool)
    columns = ("file", "route", "partition", "file_id", "slot", "bucket", "op")
    for file, route, partition, file_id, slot, number, op in zip(
        *(counts.column(c).to_pylist() for c in columns), strict=True
    ):
        routes[(file, route)] = (partition, file_id, slot, number)
        upserts[(file, route)] |= op == OP_UPSERT
    out: list[tuple[int, int, Run]] = []
    runs = rows.filter(pc.is_valid(rows.column("offset")))
    for route, part, file, offset, length in zip(
        *(runs.column(c).to_pylist() for c in ("route", "part", "file", "offset", "length")), strict=True
    ):
        partition, file_id, slot, number = routes[(file, route)]
        run = Run(file, offset, length)
        if number >= 0:
            numbered = by_number.get((partition, number))
            if numbered is not None:
                out.append((numbered, part, run))
        elif file_id is not None:
            tagged = by_file.get((partition, file_id))
            if tagged is None:
                raise ValueError(f"records of file group {file_id} in {partition!r} have no bucket")
            out.append((tagged, part, run))
        elif partition in inserts:
            buckets, starts, total = inserts[partition]
            low, high = slot_positions(slot, total)
            for b, start, end in zip(buckets, starts, starts[1:], strict=False):
                if start <= high and end > low:
                    whole = start <= low and end > high
                    out.append((b, part, run if whole else Run(file, offset, length, (start, end, total))))
        elif upserts[(file, route)]:
            raise ValueError(f"new records of partition {partition!r} have no bucket")
    return out
