"""The write tasks of a Spark write: each reads and unpacks one bucket's records at a time
(``shoal.spark.packing``), deduplicates them and runs the local writer's task for the bucket's
spec; a merge-on-read log append writes the bloom false positives it finds to a base file.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.arrays import contiguous
from shoal.config.table_config import MergeOrdering
from shoal.fs.naming import new_file_id
from shoal.fs.storage import Storage
from shoal.index.membership import held_by
from shoal.read.snapshot import read_base_file
from shoal.services.compaction import base_file_options
from shoal.spark.executor import name_attempt
from shoal.spark.packing import SEQ_COLUMN, PackedReader, TaskRuns
from shoal.tasks.cow_write import OP_COLUMN, OP_UPSERT, CowWriteSpec
from shoal.tasks.mor_append import LogAppendSpec
from shoal.timeline.commit_metadata import NULL_COMMIT, WriteStat
from shoal.write.gather import take_rows
from shoal.write.prepare import RECORD_KEY
from shoal.write.writer import (
    WRITES_NEW_FILE_GROUPS,
    Operation,
    Writer,
    finish_records,
    run_write_task,
)

RESULT_SCHEMA = "result string"


@dataclass(frozen=True)
class BucketTaskSpec:
    """What the write tasks need: each bucket's task spec, and how to finish the records (the
    route pass keyed them)."""

    specs: tuple[CowWriteSpec | LogAppendSpec, ...]
    operation: Operation
    ordering_field: str | None
    combine: bool
    sort_by_key: bool
    # Per bucket: for a merge-on-read log append, the new file group that takes the records
    # whose keys its base file does not hold (bloom false positives); None otherwise.
    stray_specs: tuple[CowWriteSpec | None, ...] = ()
    # Per bucket: for a log append, the bucket of its task (written after it) whose base file
    # takes those records instead of a file group of their own; None otherwise.
    stray_targets: tuple[int | None, ...] = ()


def write_task(
    task: BucketTaskSpec,
    broadcast: Any,
    after_write: Callable[[CowWriteSpec | LogAppendSpec, WriteStat], None] | None,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Writes the buckets of the write tasks whose numbers ``batches`` hold (``spark.range``,
    one per Spark task): each bucket's packed runs (``broadcast``: a ``TaskRuns`` per write
    task) are read and written one bucket at a time, in the order the driver laid out."""
    layout: list[TaskRuns] = broadcast.value
    storage = Storage(task.specs[0].base_uri)
    for batch in batches:
        for number in batch.column(0).to_pylist():
            writer = _TaskWriter(task, after_write)
            reader = PackedReader(storage)
            try:
                for bucket, runs in layout[number]:
                    yield writer.bucket(bucket, [reader.records(run) for run in runs])
            finally:
                reader.close()
            yield from writer.leftover_strays()


class _TaskWriter:
    """The buckets of one write task, written in the driver's order. A log append's bloom false
    positives go to its stray target when that comes later in the task, else to a file group
    of their own."""

    def __init__(
        self,
        task: BucketTaskSpec,
        after_write: Callable[[CowWriteSpec | LogAppendSpec, WriteStat], None] | None,
    ) -> None:
        self.task = task
        self.after_write = after_write
        self.written: set[int] = set()
        # Per target bucket: (log bucket, records) waiting for it.
        self.carried: dict[int, list[tuple[int, pa.Table]]] = defaultdict(list)

    def bucket(self, bucket: int, runs: list[pa.Table]) -> pa.RecordBatch:
        """Writes one bucket's records (all of them, keyed by the route pass, in runs) and
        returns its result row."""
        task = self.task
        self.written.add(bucket)
        data = pa.concat_tables(runs).combine_chunks()
        seq = data.column(SEQ_COLUMN) if SEQ_COLUMN in data.column_names else None
        records = _finish(data.drop_columns([SEQ_COLUMN]) if seq is not None else data, seq, task)
        carried = self.carried.pop(bucket, [])
        if carried:
            records = pa.concat_tables([records, *(strays for _, strays in carried)])
        stray_spec = task.stray_specs[bucket] if task.stray_specs else None
        writes: list[tuple[CowWriteSpec | LogAppendSpec, pa.Table]] = [(task.specs[bucket], records)]
        if stray_spec is not None and records.num_rows:
            log_spec = task.specs[bucket]
            assert isinstance(log_spec, LogAppendSpec)
            held, strays = split_strays(log_spec, records)
            writes = [(log_spec, held)]
            target = task.stray_targets[bucket] if task.stray_targets else None
            if target is not None and target not in self.written and strays.num_rows:
                self.carried[target].append((bucket, strays))
            else:
                writes.append((stray_spec, strays))
        return self._result(data.num_rows, writes)

    def leftover_strays(self) -> Iterator[pa.RecordBatch]:
        """Strays whose target got no records in this task (the input changed): each log's in
        a file group of its own."""
        for items in self.carried.values():
            for bucket, strays in items:
                stray_spec = self.task.stray_specs[bucket]
                assert stray_spec is not None
                yield self._result(0, [(stray_spec, strays)])
        self.carried.clear()

    def _result(
        self, received: int, writes: list[tuple[CowWriteSpec | LogAppendSpec, pa.Table]]
    ) -> pa.RecordBatch:
        stats: list[WriteStat] = []
        for write_spec, rows in writes:
            if rows.num_rows and not _creates_nothing(write_spec, rows):
                spec = name_attempt(write_spec)
                stats.append(run_write_task(spec, rows))
                if self.after_write is not None:
                    self.after_write(spec, stats[-1])
        result = {"received": received, "stats": [s.to_dict() for s in stats]}
        return pa.RecordBatch.from_pydict({"result": [json.dumps(result)]})


def stray_spec(
    writer: Writer, spec: CowWriteSpec | LogAppendSpec, bucket: int, buckets: int
) -> CowWriteSpec | None:
    """For a merge-on-read log append: the spec of a new file group in its partition for the
    records whose keys its base file turns out not to hold; None for other tasks. Its file id is
    fixed here, so every attempt of the task writes the same file group."""
    if not isinstance(spec, LogAppendSpec):
        return None
    return CowWriteSpec(
        base_uri=spec.base_uri,
        instant=spec.instant,
        partition_path=spec.partition_path,
        file_id=new_file_id(),
        # Task ids beyond the buckets': the write token names this file apart from the bucket's.
        task_id=buckets + bucket,
        old_base_path=None,
        prev_commit=NULL_COMMIT,
        ordering_field=writer.config.precombine_field,
        event_time_ordering=writer.config.merge_ordering == MergeOrdering.EVENT_TIME,
        options=base_file_options(writer.config, writer.wc),
    )


def split_strays(spec: LogAppendSpec, records: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``records`` routed to a merge-on-read file group by its footer alone, split into those
    whose keys its base file holds (updates and deletes: the log append) and the new records
    among the rest (bloom false positives): they go to a base file, where a later write's bloom
    index finds them, never to a log. Deletes of keys the base file does not hold are dropped,
    as the exact tagging of the local writer drops them."""
    if not spec.base_file_name:
        # A slice of logs alone has no footer: no footer tag routed these records here.
        return records, records.slice(0, 0)
    path = f"{spec.partition_path}/{spec.base_file_name}" if spec.partition_path else spec.base_file_name
    base_keys = read_base_file(Storage(spec.base_uri), path, [RECORD_KEY]).column(RECORD_KEY)
    held = held_by(records.column(RECORD_KEY), base_keys)
    if pc.all(held).as_py():
        # As good as always (a bloom false positive is one in a billion keys): no copies.
        return records, records.slice(0, 0)
    strays = records.filter(pc.and_(pc.invert(held), pc.equal(records.column(OP_COLUMN), OP_UPSERT)))
    return records.filter(held), strays


def _creates_nothing(spec: CowWriteSpec | LogAppendSpec, records: pa.Table) -> bool:
    """Whether ``spec`` creates a file group that ``records`` would leave empty: deletes of new
    keys only (the insert of a key and its later delete in one batch, deduplicated here). The
    local writer, which deduplicates before it plans, creates no file group for them."""
    if not isinstance(spec, CowWriteSpec) or spec.old_base_path is not None or spec.old_slice is not None:
        return False
    ops = records.column(OP_COLUMN) if OP_COLUMN in records.column_names else None
    return ops is not None and not pc.any(pc.equal(ops, OP_UPSERT)).as_py()


def _finish(records: pa.Table, seq: pa.ChunkedArray | None, task: BucketTaskSpec) -> pa.Table:
    """Deduplicated (the later of two equal records wins, so the input order is restored first
    when keys repeat) and, for a bulk insert, in key or input order."""
    op = task.operation
    keys = records.column(RECORD_KEY)
    repeats = task.combine and not _native.keys_distinct(contiguous(keys))
    if seq is not None and (repeats or (op in WRITES_NEW_FILE_GROUPS and not task.sort_by_key)):
        records = take_rows(records, pc.sort_indices(seq))
    records = finish_records(records, op, task.ordering_field, repeats)
    if op in WRITES_NEW_FILE_GROUPS and task.sort_by_key and records.num_rows:
        keys = records.column(RECORD_KEY)
        records = take_rows(records, _native.sort_key_indices(keys.combine_chunks()))
    return records
