"""A Spark write under a global index (``GLOBAL_BLOOM``, ``GLOBAL_SIMPLE``): the keys come to the
driver, the records stay in Spark.

Under a global index a record key names one record in the whole table: every incoming key is
looked up in every partition before any record is routed, and records of one key in different
partitions are duplicates of each other. So:

1. the *key pass* (``mapInArrow`` over the input's key and ordering columns) writes every
   record's key, partition path, operation, ordering value and input position (the one the
   route pass gives it) to a file of its task's in the table's storage
   (``.hoodie/.temp/shoal-keys-*``), which the driver reads and deletes: the keys never pass
   through the Spark driver's JVM, so neither its heap nor ``spark.driver.maxResultSize`` bounds
   them;
2. the driver deduplicates those by key (``finish_records``), tags them with the local writer's
   global tagging and assigns buckets (``Writer.route_records``), as a ``shoal.Table`` write
   plans; only keys and ordering values are held there, never whole records. The lookups of the
   keys in the stored files run as Spark tasks (``shoal.index.locate``: the keys broadcast, each
   task probing the footers and reading the key columns of a group of files), as do the reads
   of the slices that a moving record leaves, so the driver reads no data file;
3. the plan it broadcasts gives every key its destinations: the route value of each bucket it
   goes to, the partition path it is written under there (a record that stays where the table
   holds it takes that partition's), and an operation for the delete that a moving record
   leaves where it was;
4. the route pass sends every record of a key to each of its key's destinations. The write
   task deduplicates what it gets with the same rules and the same input order, so it keeps the
   record the driver kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext

from shoal import _native
from shoal.arrays import contiguous
from shoal.errors import CorruptDataError
from shoal.fs.storage import Storage
from shoal.fs.view import FileSystemView
from shoal.spark.keying import KeySpec, chunked, key_columns_of, keyed_table, logs_deletes
from shoal.spark.keys import KeyMap, key_hash
from shoal.spark.scratch import scratch_dir
from shoal.tasks.cow_write import OP_COLUMN, OP_HARD_DELETE, OP_UPSERT
from shoal.timeline.timeline import Timeline
from shoal.write.assigner import Assignment, BucketAssigner
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY, check_logged_delete_orderings
from shoal.write.writer import Operation, Writer, finish_records

# The input position of a record in the key pass's rows: (Spark partition id << 33) + its row
# in that partition, as the route pass numbers records.
POSITION = "_shoal_seq"
# Rows a key pass task keys at once.
KEY_CHUNK_ROWS = 1_000_000


def key_pass_schema(ordering: pa.Field | None) -> pa.Schema:
    """The key pass's rows: input position, record key, partition path, operation and, when the
    table orders records by a field, that field's value."""
    fields = [
        pa.field(POSITION, pa.int64()),
        pa.field(RECORD_KEY, pa.string()),
        pa.field(PARTITION_PATH, pa.string()),
        pa.field(OP_COLUMN, pa.int8()),
    ]
    return pa.schema(fields + ([ordering] if ordering is not None else []))


# Where the key pass's tasks write their keys: a scratch directory per write.
KEYS_DIR_NAME = "shoal-keys-"
# The key pass's rows: one per task attempt that finished, naming its file.
KEY_FILES_SCHEMA = "file string, rows long"


def keys_dir(storage: Storage) -> str:
    """A new directory for one write's key files (``shoal.spark.scratch``)."""
    return scratch_dir(storage, KEYS_DIR_NAME)


def key_task(
    spec: KeySpec, schema: pa.Schema, directory: str, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The key pass over one input partition (``mapInArrow``): keys and validates its records
    and writes rows of ``schema`` (:func:`key_pass_schema`) as an Arrow stream to a file of its
    own attempt in ``directory``; yields that file's name and row count."""
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    attempt = context.taskAttemptId() if context is not None else 0
    position = partition << 33
    ordering = spec.ordering
    storage = Storage(spec.base_uri)
    path = f"{directory}/{partition}-{attempt}.arrow"
    # The driver made the directory: an attempt Spark gave up on that still runs once the write
    # has deleted it does not make it again (and leave its file there).
    with (
        storage.open_output_stream(path, make_parents=False) as sink,
        pa.ipc.new_stream(sink, schema) as stream,
    ):
        for chunk in chunked(batches, KEY_CHUNK_ROWS):
            keyed = keyed_table(spec, chunk)
            if (
                ordering is not None
                and spec.operation == Operation.UPSERT
                and logs_deletes(spec.table_properties)
            ):
                check_logged_delete_orderings(keyed, ordering.name)
            keys, partitions, ops = key_columns_of(spec, keyed)
            n = len(keys)
            columns = [
                pa.array(np.arange(position, position + n, dtype=np.int64)),
                keys.cast(pa.string()),
                partitions.cast(pa.string()),
                ops,
            ]
            if ordering is not None:
                if ordering.name in keyed.column_names:
                    columns.append(keyed.column(ordering.name).combine_chunks().cast(ordering.type))
                else:
                    columns.append(pa.nulls(n, ordering.type))
            position += n
            stream.write_table(pa.Table.from_arrays(columns, schema=schema))
    rows = position - (partition << 33)
    yield pa.RecordBatch.from_pydict({"file": [path], "rows": pa.array([rows], pa.int64())})


def key_mismatch_row(task: int, reason: str) -> pa.RecordBatch:
    """The key pass's row (``KEY_FILES_SCHEMA``) for a task over the input's files that met a
    file pyarrow would not read as Spark does (``shoal.spark.file_input.file_task``): ``rows``
    -1, ``file`` the reason."""
    return pa.RecordBatch.from_pydict({"file": [reason], "rows": pa.array([-1], pa.int64())})


def key_input_mismatch(files: pa.Table) -> str | None:
    """The first mismatch a key pass over the input's files met, or None."""
    mismatched = files.filter(pc.equal(files.column("rows"), -1))
    return None if mismatched.num_rows == 0 else str(mismatched.column("file")[0])


def read_keys(storage: Storage, files: pa.Table, schema: pa.Schema) -> pa.Table:
    """The rows of the key files the key pass's successful attempts name in ``files``.

    Raises:
        CorruptDataError: a file holds other than the rows its task counted.
    """
    tables = []
    for path, rows in zip(files.column("file").to_pylist(), files.column("rows").to_pylist(), strict=True):
        with storage.open_input_file(path) as f:
            table = pa.ipc.open_stream(f).read_all()
        if table.num_rows != rows:
            raise CorruptDataError(f"the key file {path} holds {table.num_rows} rows; its task wrote {rows}")
        tables.append(table)
    return pa.concat_tables(tables).cast(schema) if tables else schema.empty_table()


@dataclass(frozen=True)
class GlobalRoutePlan:
    """Broadcast to the route pass: the destinations of every key that goes anywhere. The key
    that ``key_map`` maps to ``i`` has the destinations ``first[i]`` to ``first[i] + count[i] -
    1``, each a route value, a partition path and an operation (-1: the record's own)."""

    key_map: KeyMap
    first: np.ndarray
    count: np.ndarray
    route: np.ndarray
    partition: pa.Array
    op: np.ndarray

    def expand(self, records: pa.Table) -> tuple[pa.Table, pa.Array]:
        """``records`` (keyed) as their destinations take them: each record once per destination
        of its key, under that destination's partition path and operation; and their route
        values. Records whose key goes nowhere are left out."""
        found, index = self.key_map.lookup(records.column(RECORD_KEY).combine_chunks())
        index = index.to_numpy(zero_copy_only=False)
        counts = self.count[index]
        rows = np.repeat(found, counts)
        starts = np.repeat(self.first[index], counts)
        # The k-th copy of a record takes its key's k-th destination.
        run_starts = np.repeat(np.cumsum(counts) - counts, counts)
        destination = starts + (np.arange(len(rows)) - run_starts)
        # Mostly every record goes to one place: then the records stay as they are.
        same_rows = len(rows) == records.num_rows and bool((rows == np.arange(len(rows))).all())
        expanded = records if same_rows else records.take(pa.array(rows))
        at = pa.array(destination)
        partitions = self.partition.take(at).cast(expanded.schema.field(PARTITION_PATH).type)
        expanded = _replace_column(expanded, PARTITION_PATH, partitions)
        op = self.op[destination]
        if (op >= 0).any():
            ops = np.where(op >= 0, op, expanded.column(OP_COLUMN).to_numpy()).astype(np.int8)
            expanded = _replace_column(expanded, OP_COLUMN, pa.array(ops))
        return expanded, pa.array(self.route[destination])


def _replace_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


@dataclass(frozen=True)
class GlobalPlan:
    """The driver's plan of a global index write: its buckets, which of them take records or
    soft deletes (not hard deletes alone), every key's destinations (as in
    :class:`GlobalRoutePlan`, with the bucket of each), and the records the route pass sends in
    all."""

    assignment: Assignment
    ordered_entries: tuple[bool, ...]
    key_map: KeyMap
    first: np.ndarray
    count: np.ndarray
    bucket: np.ndarray
    partition: pa.Array
    op: np.ndarray
    routed: int

    def route_plan(self) -> GlobalRoutePlan:
        """The broadcast to the route pass (a record's route value is its bucket's number)."""
        return GlobalRoutePlan(
            key_map=self.key_map,
            first=self.first,
            count=self.count,
            route=self.bucket.astype(np.int32),
            partition=self.partition,
            op=self.op,
        )


def _grouped_by_key(keys: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An order of ``keys`` that puts equal keys together, where each distinct key starts in
    it, and the keys' hashes (``key_hash``) in that order."""
    hashes = key_hash(keys)
    order = np.argsort(hashes, kind="stable")
    hashes = hashes[order]
    same_hash = np.flatnonzero(hashes[1:] == hashes[:-1])
    if len(same_hash):
        grouped = keys.take(pa.array(order))
        same_key = pc.equal(grouped.take(pa.array(same_hash)), grouped.take(pa.array(same_hash + 1)))
        if not pc.all(same_key).as_py():
            # Two keys with one hash (as good as never): order by the keys themselves.
            order = np.asarray(pc.sort_indices(keys))
            hashes = key_hash(keys.take(pa.array(order)))
            grouped = keys.take(pa.array(order))
            starts = np.ones(len(keys), dtype=bool)
            starts[1:] = pc.not_equal(grouped.slice(1), grouped.slice(0, len(keys) - 1)).to_numpy(
                zero_copy_only=False
            )
            return order, np.flatnonzero(starts), hashes
    starts = np.ones(len(keys), dtype=bool)
    starts[1:] = hashes[1:] != hashes[:-1]
    return order, np.flatnonzero(starts), hashes


def plan_global(
    writer: Writer,
    keyed: pa.Table,
    operation: Operation,
    view: FileSystemView,
    timeline: Timeline,
    assigner: BucketAssigner,
) -> GlobalPlan | None:
    """Plans the key pass's rows ``keyed`` as a ``shoal.Table`` write plans its records. None
    when the write does not deduplicate and a key repeats: records of one key would then go
    different ways, which a plan by key cannot say."""
    keyed = keyed.take(pc.sort_indices(keyed.column(POSITION)))
    ordering = writer.config.precombine_field
    combine = writer.combine(operation)
    all_keys = keyed.column(RECORD_KEY)
    repeats = not _native.keys_distinct(contiguous(all_keys))
    if not combine and repeats:
        return None
    records = finish_records(keyed, operation, ordering, combine, global_keys=True)
    if operation not in (Operation.UPSERT, Operation.DELETE):
        # Other operations write live records only (finish_records reads the flag column,
        # which the key pass turned into operations).
        records = records.filter(pc.equal(records.column(OP_COLUMN), OP_UPSERT))
    assignment, tagged, routed = writer.route_records(records, operation, view, timeline, assigner)
    bucket = np.full(tagged.num_rows, -1, dtype=np.int64)
    for b, rows in routed:
        bucket[rows.to_numpy(zero_copy_only=False)] = b
    ops = tagged.column(OP_COLUMN).to_numpy()
    # In a write that is no delete, a hard delete is the one a moving record leaves behind.
    leaves = (ops == OP_HARD_DELETE) if operation != Operation.DELETE else np.zeros(len(ops), dtype=bool)
    ordered_entries = [False] * len(assignment.buckets)
    for b in np.unique(bucket[(bucket >= 0) & (ops != OP_HARD_DELETE)]):
        ordered_entries[int(b)] = True
    going = np.flatnonzero(bucket >= 0)
    keys = tagged.column(RECORD_KEY).take(pa.array(going)).combine_chunks()
    order, first, hashes = _grouped_by_key(keys)
    at = going[order]
    count = np.diff(np.append(first, len(order)))
    distinct = keys.take(pa.array(order[first]))
    key_map = KeyMap(distinct, pa.array(np.arange(len(first), dtype=np.int64)), hashes[first])
    # Every record of a key, the one kept or not, goes to each of the key's destinations.
    if not repeats:
        sent = len(going)
    else:
        _, index = key_map.lookup(all_keys.combine_chunks())
        sent = int(count[index.to_numpy(zero_copy_only=False)].sum())
    return GlobalPlan(
        assignment=assignment,
        ordered_entries=tuple(ordered_entries),
        key_map=key_map,
        first=first,
        count=count,
        bucket=bucket[at],
        partition=tagged.column(PARTITION_PATH).take(pa.array(at)).combine_chunks().cast(pa.string()),
        op=np.where(leaves[at], OP_HARD_DELETE, -1).astype(np.int8),
        routed=sent,
    )
