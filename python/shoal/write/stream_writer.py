"""The streaming writer (DESIGN §3.4): write buffers per bucket, flushed into one open instant
and committed once per checkpoint.

Batches come in through :meth:`StreamWriter.write` and go through the writer's phases
(``shoal.write.writer``): keyed, validated and deduplicated (``key_records`` /
``finish_records``), tagged by the index against the committed table, and routed to a bucket (a
file group) by a :class:`~shoal.write.assigner.RollingAssigner`, which keeps each partition's
small-file and new-file assign states until the checkpoint, so that later batches keep filling
the file groups earlier ones opened (with the bucket index, the new file group of each bucket).
A key several file groups of its partition hold (kept by inserts and bulk inserts) goes to the
bucket of each, as in ``Writer.route_records``: every copy is updated or deleted. A key written
earlier in the checkpoint (not committed, so the index cannot see it) goes back to the buckets it
went to, and competes with the version written before by the precombine rule: the greatest
ordering value wins, ties to the later.
Under a global index a key is one record in the whole table: a checkpoint writes what one
``shoal.Table`` write of all its batches would (:meth:`StreamWriter._route_global`).

Each bucket buffers its records. Their size is estimated with the Rust record-size sampler run
on one incoming row in a hundred, the estimate reused until the next sample. A bucket above the
per-bucket limit is flushed; while all buffers together exceed the total limit, the largest is.
A flush runs the bucket's write task (``Writer.task_spec``, ``run_write_task``) within the
checkpoint's instant, which the first flush starts (requested, then inflight). Flushing a
bucket again in the same instant appends more blocks to the log file its first flush appended
to (merge-on-read updates), or merges the base file it wrote (new file groups, copy-on-write
merges) with the new records into a replacement base file: same file id and instant, a new
write token; the earlier file is deleted and its write stat replaced. Hudi's Flink writer rolls
its merge handles the same way. :meth:`StreamWriter.checkpoint` flushes every buffer and
commits one commit (copy-on-write) or deltacommit (merge-on-read) with every write stat since
the last checkpoint. A checkpoint that is abandoned (:meth:`StreamWriter.abort`, an exception)
leaves its instant inflight: nothing of it is visible, and the next write rolls it back.

While a checkpoint is open the streaming writer is the table's only writer: it holds the
table's write lock from the first batch of a checkpoint to its commit or abort (compaction
scheduling waits for it). Use it from one thread, and write through the table's other methods
only between checkpoints: their rollback of failed writes would take the open instant for one.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.arrays import importable
from shoal.config.write_config import SCHEMA_ON_WRITE_ADD_COLUMNS
from shoal.errors import (
    CommitConflictError,
    InvalidArgumentError,
    InvalidOptionError,
    SchemaMismatchError,
    UnsupportedError,
)
from shoal.fs.naming import parse_log_file_name
from shoal.fs.partition_metadata import ensure_partition_metadata
from shoal.fs.view import FileSlice, FileSystemView
from shoal.index.bloom import BloomIndex, Tagged
from shoal.index.bucket import BucketIndex
from shoal.index.global_index import tag_globally
from shoal.tasks.cow_write import OP_COLUMN, OP_HARD_DELETE, OP_UPSERT, CowWriteSpec
from shoal.tasks.mor_append import LogAppendSpec
from shoal.timeline.commit_metadata import WriteStat
from shoal.timeline.lock import WRITE, table_lock
from shoal.timeline.timeline import Timeline
from shoal.write.assigner import RollingAssigner
from shoal.write.gather import take_rows
from shoal.write.input import to_arrow_table
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY, check_logged_delete_orderings, java_ordered
from shoal.write.schema import normalize_types, strip_meta_columns, widened_columns
from shoal.write.writer import (
    Operation,
    PendingWrite,
    Writer,
    finish_records,
    group_rows,
    key_records,
    run_write_task,
)

DEFAULT_BUCKET_BUFFER_BYTES = 256 * 2**20
DEFAULT_TOTAL_BUFFER_BYTES = 2**30
# One incoming record in this many is measured.
SAMPLE_EVERY = 100

# Why a bucket was flushed.
FLUSH_BUCKET_FULL = "bucket_full"
FLUSH_TOTAL_FULL = "total_full"
FLUSH_CHECKPOINT = "checkpoint"

_INTERNAL = (RECORD_KEY, PARTITION_PATH, OP_COLUMN)
_NO_BUCKET = -1
# The tags of an index that holds a key in one file group at most: no further holders.
_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_FILE_IDS = pa.array([], pa.string())


class RecordSizeSampler:
    """Estimated in-memory size of incoming records: the Rust sampler
    (``_native.estimate_record_size``) measures one row in ``every``, counted across batches,
    and each measurement stands for every row until the next one."""

    def __init__(self, every: int = SAMPLE_EVERY) -> None:
        self.every = every
        self.estimate: float | None = None
        self.sampled = 0
        self._until_next = 0  # rows to pass before the next measured one

    def measure(self, records: pa.Table) -> float:
        """Estimated bytes of ``records`` (the first row ever seen is always measured)."""
        total = 0.0
        for batch in records.to_batches():
            n = batch.num_rows
            if n == 0:
                continue
            start = 0 if self.estimate is None else self._until_next
            if start >= n:
                assert self.estimate is not None
                total += n * self.estimate
                self._until_next = start - n
                continue
            if start:
                assert self.estimate is not None
                total += start * self.estimate
            average, sampled = _native.estimate_record_size(importable(batch.slice(start)), self.every)
            self.estimate = float(average)
            self.sampled += sampled
            total += (n - start) * self.estimate
            self._until_next = start + sampled * self.every - n
        return total


@dataclass(frozen=True)
class StreamWriterStats:
    """Memory accounting and flush decisions of a :class:`StreamWriter` so far."""

    # Bucket flushes by reason: FLUSH_BUCKET_FULL, FLUSH_TOTAL_FULL, FLUSH_CHECKPOINT.
    flushes: dict[str, int]
    flushed_records: int
    # Estimated bytes and records buffered now, in how many buckets.
    buffered_bytes: int
    buffered_records: int
    buffered_buckets: int
    # The most ever buffered at once (measured after a batch is buffered, before flushing).
    peak_buffered_bytes: int
    # The sampled record size in use (bytes), and how many records were measured.
    record_size: float | None
    sampled_records: int
    # Commits made by checkpoints.
    commits: int


@dataclass
class _Buffer:
    """One bucket's buffered records, oldest first, and their estimated size."""

    chunks: list[pa.Table] = field(default_factory=list)
    bytes: float = 0.0
    rows: int = 0

    def add(self, chunk: pa.Table, size: float) -> None:
        self.chunks.append(chunk)
        self.bytes += size
        self.rows += chunk.num_rows

    def records(self) -> pa.Table:
        if len(self.chunks) == 1:
            return self.chunks[0]
        return pa.concat_tables(self.chunks, promote_options="permissive")


@dataclass
class _Checkpoint:
    """The state of the open checkpoint."""

    timeline: Timeline
    view: FileSystemView
    index: BloomIndex | BucketIndex | None
    assigner: RollingAssigner
    # The data columns so far (the table's, evolved by the batches of this checkpoint).
    data_schema: pa.Schema | None
    owner: int
    slices: dict[str, list[FileSlice]] = field(default_factory=dict)
    # Every key routed in this checkpoint: group (partition path NUL record key), bucket (null
    # for a delete with nothing to delete), and the ordering value of its winning version. Under
    # a global index: the record key alone, and the ordering value.
    seen: pa.Table | None = None
    # The further buckets of keys of ``seen`` that several file groups hold: group, bucket (one
    # row per further file group). None while no key has more than one.
    seen_also: pa.Table | None = None
    # Under a global index: (key, bucket, partition path) of every bucket the winning version of
    # a key went to as a record.
    placed: pa.Table | None = None
    buffers: dict[int, _Buffer] = field(default_factory=dict)
    write: PendingWrite | None = None
    next_task_id: int = 0
    partitions: set[str] = field(default_factory=set)
    # What the instant wrote so far, per bucket: the base file, and the log files appended to.
    base_stats: dict[int, WriteStat] = field(default_factory=dict)
    log_stats: dict[int, dict[str, WriteStat]] = field(default_factory=dict)

    def latest_slices(self, partition: str) -> list[FileSlice]:
        if partition not in self.slices:
            self.slices[partition] = self.view.latest_file_slices(partition)
        return self.slices[partition]

    def flushed(self, bucket: int) -> bool:
        return bucket in self.base_stats or bucket in self.log_stats


class StreamWriter:
    """Writes a stream of batches into a table through write buffers; see the module docs.

    Create one with :meth:`shoal.Table.stream_writer`. Use it as a context manager: leaving
    the block checkpoints (commits what was written), an exception aborts it.
    """

    def __init__(
        self,
        writer: Writer,
        operation: str | Operation = Operation.UPSERT,
        bucket_buffer_bytes: int = DEFAULT_BUCKET_BUFFER_BYTES,
        total_buffer_bytes: int = DEFAULT_TOTAL_BUFFER_BYTES,
    ) -> None:
        op = _parse_operation(operation)
        for name, value in (
            ("bucket_buffer_bytes", bucket_buffer_bytes),
            ("total_buffer_bytes", total_buffer_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidArgumentError(f"{name} must be a positive number of bytes, got {value!r}")
        # Bad bucket index options fail here, before a checkpoint rolls failed writes back.
        self._bucket_index = writer.bucket_index()
        if not writer.combine(op):
            raise InvalidOptionError(
                "a streaming writer combines the records of a key by the precombine rule: "
                f"hoodie.combine.before.{op.value.lower()} cannot be false"
            )
        self.writer = writer
        self.operation = op
        self.bucket_buffer_bytes = bucket_buffer_bytes
        self.total_buffer_bytes = total_buffer_bytes
        self._ordering = None if op == Operation.DELETE else writer.config.precombine_field
        # A global index: a key is one record in the whole table (see _route_global).
        self._global = writer.wc.global_index
        self._lock = table_lock(writer.storage, WRITE)
        self._sampler = RecordSizeSampler()
        self._cp: _Checkpoint | None = None
        self._closed = False
        self._flushes = {FLUSH_BUCKET_FULL: 0, FLUSH_TOTAL_FULL: 0, FLUSH_CHECKPOINT: 0}
        self._flushed_records = 0
        self._peak_bytes = 0.0
        self._commits = 0

    # ---- public API ------------------------------------------------------------------------

    def write(self, data: Any) -> None:
        """Buffers a batch (anything ``Table.upsert`` accepts), flushing buckets the batch fills.

        Bad input raises before anything changes; the batches buffered before stay."""
        self._check_usable()
        incoming = normalize_types(strip_meta_columns(to_arrow_table(data)))
        opening = self._cp is None
        if opening:
            self._lock.acquire()
        try:
            timeline = Timeline.load(self.writer.storage, self.writer.config) if opening else None
            schema = self._table_schema(timeline)
            records = self._prepare(incoming, schema)
            if not opening and self.writer.merge_on_read and widened_columns(schema, records.schema):
                # The compaction a type-changing write needs first cannot run inside a checkpoint.
                raise SchemaMismatchError(
                    f"this batch changes the type of {', '.join(widened_columns(schema, records.schema))} "
                    "(a widened type or a struct given fields) on a merge-on-read table: call "
                    "checkpoint() first, and write it in the next checkpoint"
                )
            if opening:
                assert timeline is not None
                self._cp = self._open(timeline, records)
        except BaseException:
            if opening:
                self._lock.release()
            raise
        try:
            self._buffer(records)
        except BaseException:
            self.abort()
            raise

    def checkpoint(self) -> str | None:
        """Flushes every buffer and commits one commit (copy-on-write) or deltacommit
        (merge-on-read) with everything flushed since the last checkpoint. Returns its instant
        time, or None when nothing was written."""
        self._check_usable()
        cp = self._cp
        if cp is None:
            return None
        try:
            if cp.buffers:
                self._flush(sorted(cp.buffers), FLUSH_CHECKPOINT)
            instant = None
            if cp.write is not None:
                stats = [s for b in sorted(cp.log_stats) for s in cp.log_stats[b].values()]
                stats += [cp.base_stats[b] for b in sorted(cp.base_stats)]
                schema = cp.data_schema if cp.data_schema is not None else pa.schema([])
                instant = self.writer.commit(cp.write, stats, schema).instant
                self._commits += 1
        except BaseException:
            self._abandon()
            raise
        self._abandon()
        return instant

    def abort(self) -> None:
        """Drops the buffers and abandons the open checkpoint: its instant, if a flush started
        one, stays inflight, nothing of it is visible, and the next write rolls it back."""
        if self._cp is not None:
            self._check_thread(self._cp)
            self._abandon()

    def close(self) -> str | None:
        """Checkpoints (see :meth:`checkpoint`) and closes the writer."""
        if self._closed:
            return None
        try:
            return self.checkpoint()
        finally:
            self._closed = True

    @property
    def stats(self) -> StreamWriterStats:
        """Flush counts by reason, buffered bytes and records, and the sampled record size."""
        buffers = self._cp.buffers.values() if self._cp is not None else []
        return StreamWriterStats(
            flushes=dict(self._flushes),
            flushed_records=self._flushed_records,
            buffered_bytes=round(sum(b.bytes for b in buffers)),
            buffered_records=sum(b.rows for b in buffers),
            buffered_buckets=len(buffers),
            peak_buffered_bytes=round(self._peak_bytes),
            record_size=self._sampler.estimate,
            sampled_records=self._sampler.sampled,
            commits=self._commits,
        )

    @property
    def pending_instant(self) -> str | None:
        """The instant the open checkpoint writes in, once a flush started it."""
        cp = self._cp
        return cp.write.instant_time if cp is not None and cp.write is not None else None

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
            self._closed = True

    # ---- checkpoint state --------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closed:
            raise InvalidArgumentError("the stream writer is closed")
        if self._cp is not None:
            self._check_thread(self._cp)

    @staticmethod
    def _check_thread(cp: _Checkpoint) -> None:
        if cp.owner != threading.get_ident():
            raise UnsupportedError("a stream writer's checkpoint is written and committed from one thread")

    def _check_still_inflight(self, write: PendingWrite) -> None:
        """Before a flush: a write through the table's other methods in the same thread takes the
        open instant for a failed write and rolls it back; flushing into it would write files of
        an instant that is gone. (The commit itself checks in ``Writer.commit``.)"""
        if not self.writer.storage.exists(write.timeline.path_of(write.inflight)):
            raise CommitConflictError(
                f"the instant {write.instant_time} of the open checkpoint was rolled back by another write"
            )

    def _table_schema(self, timeline: Timeline | None) -> pa.Schema | None:
        if self.operation == Operation.DELETE:
            return None
        if self._cp is not None:
            return self._cp.data_schema
        assert timeline is not None
        return self.writer.table_schema(timeline)

    def _prepare(self, incoming: pa.Table, table_schema: pa.Schema | None) -> pa.Table:
        writer = self.writer
        keyed = key_records(
            incoming,
            self.operation,
            writer.keygen,
            writer.config.precombine_field,
            table_schema,
            writer.wc.get(SCHEMA_ON_WRITE_ADD_COLUMNS),
        )
        if writer.merge_on_read and self.operation == Operation.UPSERT:
            check_logged_delete_orderings(keyed, writer.config.precombine_field)
        return finish_records(keyed, self.operation, writer.config.precombine_field, True, self._global)

    def _open(self, timeline: Timeline, first: pa.Table) -> _Checkpoint:
        """Starts a checkpoint: failed writes go first, then everything plans against the
        committed table as of now."""
        writer = self.writer
        timeline = writer.rollback_failed_writes(timeline)
        timeline = writer.compact_before_widening(timeline, first.schema)
        sizing = writer.assigner(timeline, lambda: first)
        return _Checkpoint(
            timeline=timeline,
            view=FileSystemView(writer.storage, timeline),
            index=self._bucket_index if self._bucket_index is not None else writer.index(self.operation),
            assigner=RollingAssigner(sizing, allow_logs=not writer.merge_on_read),
            data_schema=None,
            owner=threading.get_ident(),
        )

    def _abandon(self) -> None:
        """Forgets the open checkpoint and releases the table."""
        if self._cp is not None:
            if self._cp.write is not None:
                self.writer.abandon(self._cp.write)
            self._cp = None
            self._lock.release()

    # ---- routing and buffering ---------------------------------------------------------------

    def _buffer(self, records: pa.Table) -> None:
        cp = self._cp
        assert cp is not None
        if self.operation != Operation.DELETE:
            cp.data_schema = records.select([c for c in records.column_names if c not in _INTERNAL]).schema
        if records.num_rows == 0:
            return
        per_row = self._sampler.measure(records) / records.num_rows
        records, buckets = self._route_global(cp, records) if self._global else self._route(cp, records)
        touched = []
        for bucket, rows in group_rows(buckets):
            if bucket == _NO_BUCKET:
                continue
            buf = cp.buffers.setdefault(bucket, _Buffer())
            buf.add(take_rows(records, rows), len(rows) * per_row)
            touched.append(bucket)
        self._peak_bytes = max(self._peak_bytes, self._buffered_bytes())
        full = [b for b in touched if cp.buffers[b].bytes > self.bucket_buffer_bytes]
        if full:
            self._flush(full, FLUSH_BUCKET_FULL)
        while cp.buffers and self._buffered_bytes() > self.total_buffer_bytes:
            largest = max(cp.buffers, key=lambda b: cp.buffers[b].bytes)
            self._flush([largest], FLUSH_TOTAL_FULL)

    def _buffered_bytes(self) -> float:
        return sum(b.bytes for b in self._cp.buffers.values()) if self._cp is not None else 0.0

    def _route(self, cp: _Checkpoint, records: pa.Table) -> tuple[pa.Table, pa.Array]:
        """Drops the records that lose to the version of their key written earlier in the
        checkpoint, and returns the others with their bucket (``_NO_BUCKET``: a delete of a key
        nobody wrote, nothing to do). A key several file groups hold goes to the bucket of each:
        its record comes once per bucket, the copies for further buckets after the batch's
        records."""
        group = _group_keys(records)
        n = records.num_rows
        if cp.seen is None:
            earlier = pa.nulls(n, pa.int64())
        else:
            position = pc.index_in(group, value_set=cp.seen.column("group").combine_chunks())
            if self._ordering is not None:
                before = cp.seen.column("ordering").take(position)
                keep = pc.or_(pc.is_null(position), _incoming_wins(records.column(self._ordering), before))
                if not pc.all(keep).as_py():
                    records, group, position = records.filter(keep), group.filter(keep), position.filter(keep)
                    n = records.num_rows
            earlier = cp.seen.column("bucket").take(position).combine_chunks()
        buckets = np.array(pc.fill_null(earlier, _NO_BUCKET).to_numpy(zero_copy_only=False), dtype=np.int64)
        unseen = pc.is_null(earlier).to_numpy(zero_copy_only=False)
        is_upsert = pc.equal(records.column(OP_COLUMN), OP_UPSERT).to_numpy(zero_copy_only=False)
        # (row, bucket) of every bucket a record goes to besides ``buckets``: the further holders
        # of its key, the ones seen earlier in the checkpoint and the ones the index finds now.
        further = self._earlier_further_buckets(cp, group)
        by_partition = group_rows(records.column(PARTITION_PATH))
        # New keys of the checkpoint: the index says whether the committed table holds them.
        lookups = []
        all_keys = records.column(RECORD_KEY)
        for _, rows in by_partition:
            rows_np = rows.to_numpy()
            unseen_rows = rows_np[unseen[rows_np]]
            lookups.append((unseen_rows, all_keys.take(pa.array(unseen_rows)).combine_chunks()))
        tags = self._tag(
            cp, [(keys, cp.latest_slices(p)) for (p, _), (_, keys) in zip(by_partition, lookups, strict=True)]
        )
        for (partition, rows), (unseen_rows, _), tagged in zip(by_partition, lookups, tags, strict=True):
            slices = cp.latest_slices(partition)
            further += _assign_updates(cp.assigner, partition, slices, unseen_rows, tagged, buckets)
            rows_np = rows.to_numpy()
            new = rows_np[(buckets[rows_np] == _NO_BUCKET) & is_upsert[rows_np]]
            if isinstance(cp.index, BucketIndex):
                # Each bucket without a file group gets one, which later batches keep filling.
                order, per_bucket = cp.index.arrange_inserts(all_keys, pa.array(new, pa.int64()))
                new, plan = order.to_numpy(), cp.assigner.assign_bucket_inserts(partition, per_bucket)
            else:
                plan = cp.assigner.assign_inserts(partition, len(new), slices)
            offset = 0
            for bucket, count in plan:
                buckets[new[offset : offset + count]] = bucket
                offset += count
        also = _concat_pairs(further)
        self._remember(cp, group, pa.array(buckets), records, also)
        if also is None:
            return records, pa.array(buckets)
        rows, also_buckets = also
        copies = pa.concat_tables([records, records.take(pa.array(rows))])
        return copies, pa.array(np.concatenate([buckets, also_buckets]))

    @staticmethod
    def _tag(cp: _Checkpoint, partitions: list[tuple[pa.Array, list[FileSlice]]]) -> list[Tagged]:
        """Every file group holding each key, per partition (``BloomIndex.tag_all``); the bucket
        index holds a key in one file group at most, and without an index nothing is held."""
        if isinstance(cp.index, BloomIndex):
            return cp.index.tag_all(partitions)
        if cp.index is None:
            file_ids = [pa.nulls(len(keys), pa.string()) for keys, _ in partitions]
        else:
            file_ids = cp.index.tag(partitions)
        return [Tagged(tags, _NO_ROWS, _NO_FILE_IDS) for tags in file_ids]

    @staticmethod
    def _earlier_further_buckets(cp: _Checkpoint, group: pa.Array) -> list[tuple[np.ndarray, np.ndarray]]:
        """(rows, buckets) of the further buckets the keys of ``group`` (one row per key) went to
        earlier in the checkpoint: a key goes back to every bucket it went to."""
        if cp.seen_also is None:
            return []
        at = pc.index_in(cp.seen_also.column("group"), value_set=group)
        hit = pc.is_valid(at)
        if not pc.any(hit).as_py():
            return []
        rows = at.filter(hit).to_numpy(zero_copy_only=False).astype(np.int64)
        return [(rows, cp.seen_also.column("bucket").filter(hit).to_numpy(zero_copy_only=False))]

    def _route_global(self, cp: _Checkpoint, records: pa.Table) -> tuple[pa.Table, pa.Array]:
        """:meth:`_route` under a global index, where a key is one record in the whole table:
        the checkpoint writes what one ``shoal.Table`` write of all its batches would.

        A record that loses to the version of its key written earlier in the checkpoint (the
        precombine rule, on the key alone) is dropped. A winner is looked up in every partition
        of the committed table and routed as such a write routes it (``tag_globally``): it may
        update the record where it is, move it (a hard delete there, an insert into its own
        partition) or be inserted. Where the version it beats was sent as a record and it is
        not, a hard delete follows, so that version is gone (a record that moved into another
        partition earlier in the checkpoint, then moves again).

        Returns the records to buffer and their buckets."""
        writer = self.writer
        if cp.seen is not None and self._ordering is not None:
            position = pc.index_in(records.column(RECORD_KEY), value_set=cp.seen.column("group"))
            before = cp.seen.column("ordering").take(position)
            keep = pc.or_(pc.is_null(position), _incoming_wins(records.column(self._ordering), before))
            if not pc.all(keep).as_py():
                records = records.filter(keep)
        assert isinstance(cp.index, BloomIndex)
        # The checkpoint's index keeps the key columns it read (``cache_keys``) for its next
        # batches: its lookups run here.
        tagged, tags = tag_globally(
            records,
            cp.index.locate,
            cp.view.latest_file_slices(),
            writer.wc.update_partition_path,
            writer.check_stored(cp.timeline),
        )
        found = pc.is_valid(tags)
        is_upsert = pc.equal(tagged.column(OP_COLUMN), OP_UPSERT)
        buckets = np.full(tagged.num_rows, _NO_BUCKET, dtype=np.int64)
        for partition, rows in group_rows(tagged.column(PARTITION_PATH)):
            slices = cp.latest_slices(partition)
            here = found.take(rows)
            if pc.any(here).as_py():
                by_id = {sl.file_id: sl for sl in slices}
                held = rows.filter(here)
                for file_id, ix in group_rows(tags.take(held)):
                    at = held.take(ix).to_numpy()
                    buckets[at] = cp.assigner.assign_updates(partition, by_id[file_id], len(at))
            new = rows.filter(pc.and_(pc.invert(here), is_upsert.take(rows))).to_numpy()
            offset = 0
            for bucket, count in cp.assigner.assign_inserts(partition, len(new), slices) if len(new) else []:
                buckets[new[offset : offset + count]] = bucket
                offset += count
        tagged, buckets = self._retract_replaced(cp, records, tagged, buckets)
        self._remember_global(cp, records, tagged, buckets)
        return tagged, pa.array(buckets)

    def _retract_replaced(
        self, cp: _Checkpoint, records: pa.Table, tagged: pa.Table, buckets: np.ndarray
    ) -> tuple[pa.Table, np.ndarray]:
        """``tagged`` and ``buckets`` with a hard delete added wherever an earlier winner of a
        key of ``records`` was sent as a record and the new winner sends nothing."""
        if cp.placed is None or cp.placed.num_rows == 0:
            return tagged, buckets
        keys = records.column(RECORD_KEY).combine_chunks()
        earlier = cp.placed.filter(pc.is_in(cp.placed.column("key"), value_set=keys))
        if earlier.num_rows == 0:
            return tagged, buckets
        now = pa.table({"key": tagged.column(RECORD_KEY).cast(pa.string()), "bucket": pa.array(buckets)})
        gone = earlier.join(now, keys=["key", "bucket"], join_type="left anti")
        if gone.num_rows == 0:
            return tagged, buckets
        partition_type = tagged.schema.field(PARTITION_PATH).type
        deletes = records.take(pc.index_in(gone.column("key"), value_set=keys.cast(pa.string())))
        deletes = _with(deletes, PARTITION_PATH, gone.column("partition").cast(partition_type))
        deletes = _with(deletes, OP_COLUMN, pa.repeat(pa.scalar(OP_HARD_DELETE, pa.int8()), deletes.num_rows))
        retracted = pa.concat_tables([tagged, deletes.select(tagged.column_names)])
        return retracted, np.concatenate([buckets, gone.column("bucket").to_numpy()])

    def _remember_global(
        self, cp: _Checkpoint, records: pa.Table, tagged: pa.Table, buckets: np.ndarray
    ) -> None:
        """Records the winning version of every key of ``records``: its ordering value (for
        later versions to compete with), and the buckets it went to as a record (for a later
        winner to delete it from)."""
        keys = records.column(RECORD_KEY).combine_chunks().cast(pa.string())
        latest: dict[str, Any] = {"group": keys}
        if self._ordering is not None:
            latest["ordering"] = records.column(self._ordering)
        seen = pa.table(latest)
        placed = pa.table(
            {
                "key": tagged.column(RECORD_KEY).cast(pa.string()),
                "bucket": pa.array(buckets),
                "partition": tagged.column(PARTITION_PATH).cast(pa.string()),
            }
        )
        as_record = pc.equal(tagged.column(OP_COLUMN), OP_UPSERT)
        placed = placed.filter(pc.and_(as_record, pc.not_equal(pa.array(buckets), _NO_BUCKET)))
        if cp.seen is not None:
            seen = pa.concat_tables(
                [cp.seen.filter(pc.invert(pc.is_in(cp.seen.column("group"), value_set=keys))), seen],
                promote_options="permissive",
            )
        if cp.placed is not None:
            placed = pa.concat_tables(
                [cp.placed.filter(pc.invert(pc.is_in(cp.placed.column("key"), value_set=keys))), placed]
            )
        cp.seen, cp.placed = seen.combine_chunks(), placed.combine_chunks()

    def _remember(
        self,
        cp: _Checkpoint,
        group: pa.Array,
        buckets: pa.Array,
        records: pa.Table,
        also: tuple[np.ndarray, np.ndarray] | None,
    ) -> None:
        """Records the winning version of every key of the batch: its bucket, ordering value,
        and ``also`` (rows of the batch, buckets) the further buckets of keys several file
        groups hold."""
        columns: dict[str, Any] = {
            "group": group,
            "bucket": pc.if_else(pc.equal(buckets, _NO_BUCKET), pa.scalar(None, pa.int64()), buckets),
        }
        if self._ordering is not None:
            columns["ordering"] = records.column(self._ordering)
        latest = pa.table(columns)
        if cp.seen is None:
            cp.seen = latest.combine_chunks()
        else:
            others = cp.seen.filter(pc.invert(pc.is_in(cp.seen.column("group"), value_set=group)))
            cp.seen = pa.concat_tables([others, latest], promote_options="permissive").combine_chunks()
        if cp.seen_also is not None or also is not None:
            cp.seen_also = _remember_further(cp.seen_also, group, also)

    # ---- flushing ------------------------------------------------------------------------------

    def _flush(self, buckets: list[int], reason: str) -> None:
        """Writes the buffers of ``buckets`` within the checkpoint's instant (started by the
        first flush), one write task per bucket."""
        cp = self._cp
        assert cp is not None
        self._flushes[reason] += len(buckets)
        work: list[tuple[int, pa.Table]] = []
        for bucket in buckets:
            records = finish_records(
                cp.buffers.pop(bucket).records(), self.operation, self.writer.config.precombine_field, True
            )
            if not cp.flushed(bucket) and cp.assigner.assignment.buckets[bucket].existing is None:
                # A new file group: deletes of keys that are only buffered have nothing to delete.
                records = records.filter(pc.equal(records.column(OP_COLUMN), OP_UPSERT))
            if records.num_rows:
                work.append((bucket, records))
        if not work:
            return
        partitions = {cp.assigner.assignment.buckets[b].partition_path for b, _ in work}
        if cp.write is None:
            cp.write = self.writer.start(self.operation, cp.assigner.assignment, cp.timeline, partitions)
        else:
            self._check_still_inflight(cp.write)
            for partition in partitions - cp.partitions:
                ensure_partition_metadata(self.writer.storage, partition, cp.write.instant_time)
        cp.partitions |= partitions
        items = [(self._task_spec(cp, b, records), records, self.writer.storage) for b, records in work]
        stats: list[WriteStat] = self.writer.executor.map(run_write_task, items)
        for (bucket, records), stat in zip(work, stats, strict=True):
            self._flushed_records += records.num_rows
            self._keep_stat(cp, bucket, stat)

    def _task_spec(self, cp: _Checkpoint, bucket: int, records: pa.Table) -> CowWriteSpec | LogAppendSpec:
        """The bucket's write task: the writer's spec for a first flush; for a later one, a merge
        into the base file this instant wrote, or an append to the log file it appended to."""
        write = cp.write
        assert write is not None
        task_id = cp.next_task_id
        cp.next_task_id += 1
        base = cp.base_stats.get(bucket)
        if base is not None:
            rewrite = self.writer.rewrite_spec(write, bucket, task_id)
            return dataclasses.replace(rewrite, old_base_path=base.path, old_slice=None)
        ordered = bool(pc.any(pc.not_equal(records.column(OP_COLUMN), OP_HARD_DELETE)).as_py())
        spec = self.writer.task_spec(write, bucket, task_id, ordered)
        logs = cp.log_stats.get(bucket)
        if not logs:
            return spec
        # Buckets that took a log append take no inserts (RollingAssigner), so stay appends.
        assert isinstance(spec, LogAppendSpec), "a bucket flushed as a log append became a rewrite"
        current = max(logs.values(), key=lambda s: s.logVersion or 0)
        assert current.path is not None
        rewrite_if_deleted = spec.rewrite_if_key_deleted
        if rewrite_if_deleted is not None and rewrite_if_deleted.old_slice is not None:
            # The slice rewrite must carry what this instant appended to the slice so far.
            old = rewrite_if_deleted.old_slice
            logs_now = old.log_file_paths + tuple(p for p in sorted(logs) if p not in old.log_file_paths)
            rewrite_if_deleted = dataclasses.replace(
                rewrite_if_deleted,
                old_slice=dataclasses.replace(
                    old,
                    log_file_paths=logs_now,
                    completed_instants=(*old.completed_instants, write.instant_time),
                ),
            )
        return dataclasses.replace(
            spec,
            current_log_name=current.path.rsplit("/", 1)[-1],
            current_log_version=current.logVersion or 0,
            current_log_size=current.fileSizeInBytes,
            rewrite_if_key_deleted=rewrite_if_deleted,
        )

    def _keep_stat(self, cp: _Checkpoint, bucket: int, stat: WriteStat) -> None:
        """Adds a flush's write stat to the instant's: appends to a log file the instant wrote
        before add up in its stat; a base file replaces the one the instant wrote before."""
        assert stat.path is not None
        if parse_log_file_name(stat.path.rsplit("/", 1)[-1]) is not None:
            logs = cp.log_stats.setdefault(bucket, {})
            before = logs.get(stat.path)
            logs[stat.path] = stat if before is None else _merge_appends(before, stat)
            return
        before = cp.base_stats.get(bucket)
        if before is not None and before.path != stat.path:
            assert before.path is not None
            self.writer.storage.delete(before.path, missing_ok=True)
        if stat.numWrites == 0 and cp.assigner.assignment.buckets[bucket].existing is None:
            # Every record of a new file group was deleted again: no file group after all.
            self.writer.storage.delete(stat.path, missing_ok=True)
            cp.base_stats.pop(bucket, None)
            return
        cp.base_stats[bucket] = stat if before is None else _merge_rewrites(before, stat)


def _parse_operation(operation: str | Operation) -> Operation:
    try:
        op = operation if isinstance(operation, Operation) else Operation(str(operation).strip().upper())
    except ValueError:
        raise InvalidOptionError(f"unknown operation {operation!r}: use upsert or delete") from None
    if op not in (Operation.UPSERT, Operation.DELETE):
        raise InvalidOptionError(
            f"a streaming writer runs upserts or deletes, not {op.value.lower()}: "
            "use Table.insert / Table.bulk_insert for batch loads"
        )
    return op


def _with(records: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return records.set_column(records.schema.get_field_index(name), name, values)


def _assign_updates(
    assigner: RollingAssigner,
    partition: str,
    slices: list[FileSlice],
    rows: np.ndarray,
    tagged: Tagged,
    buckets: np.ndarray,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Sends the records of ``rows`` (a partition's keys the index looked up, ``tagged``) to the
    buckets of the file groups holding their keys: the first holder's bucket into ``buckets``.
    Returns (rows, buckets) of the further holders (kept by inserts and bulk inserts), whose
    copies are updated or deleted too, as Hudi's index joins a key with every location."""
    found = pc.is_valid(tagged.file_ids)
    if not pc.any(found).as_py():
        return []
    found_rows = rows[found.to_numpy(zero_copy_only=False)]
    by_id = {s.file_id: s for s in slices}
    for file_id, ix in group_rows(tagged.file_ids.filter(found)):
        targets = found_rows[ix.to_numpy()]
        buckets[targets] = assigner.assign_updates(partition, by_id[file_id], len(targets))
    further = []
    if len(tagged.also_rows):
        for file_id, ix in group_rows(tagged.also_file_ids):
            targets = rows[tagged.also_rows[ix.to_numpy()]].astype(np.int64)
            bucket = assigner.assign_updates(partition, by_id[file_id], len(targets))
            further.append((targets, np.full(len(targets), bucket, dtype=np.int64)))
    return further


def _concat_pairs(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray] | None:
    """(rows, buckets) pairs as one pair of arrays; None for none."""
    if not pairs:
        return None
    if len(pairs) == 1:
        return pairs[0]
    return np.concatenate([r for r, _ in pairs]), np.concatenate([b for _, b in pairs])


def _remember_further(
    seen_also: pa.Table | None, group: pa.Array, also: tuple[np.ndarray, np.ndarray] | None
) -> pa.Table | None:
    """``seen_also`` (group, bucket of further holders) with the keys of ``group`` now held as
    ``also`` says (rows into ``group``, buckets); None when no key has further buckets."""
    kept = seen_also
    if kept is not None:
        kept = kept.filter(pc.invert(pc.is_in(kept.column("group"), value_set=group)))
    if also is not None:
        rows, buckets = also
        latest = pa.table({"group": group.take(pa.array(rows)), "bucket": pa.array(buckets, pa.int64())})
        kept = latest if kept is None else pa.concat_tables([kept, latest], promote_options="permissive")
    return kept.combine_chunks() if kept is not None and kept.num_rows else None


def _group_keys(records: pa.Table) -> pa.Array:
    """The identity of each record: partition path and record key."""
    joined = pc.binary_join_element_wise(records.column(PARTITION_PATH), records.column(RECORD_KEY), "\x00")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _incoming_wins(incoming: pa.ChunkedArray | pa.Array, before: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Whether each incoming record beats the version written before it by the precombine rule
    (``dedup_by_key``): the greatest ordering value wins, a null never beats a value, and ties
    go to the later record, the incoming one."""
    if before.type != incoming.type:
        before = before.cast(incoming.type)
    in_valid = pc.is_valid(incoming)
    before_valid = pc.is_valid(before)
    not_less = pc.fill_null(pc.greater_equal(java_ordered(incoming), java_ordered(before)), False)
    wins = pc.or_(
        pc.and_(in_valid, pc.or_(pc.invert(before_valid), not_less)),
        pc.and_(pc.invert(in_valid), pc.invert(before_valid)),
    )
    return wins.combine_chunks() if isinstance(wins, pa.ChunkedArray) else wins


def _sum_runtime(a: dict[str, int] | None, b: dict[str, int] | None) -> dict[str, int] | None:
    if a is None or b is None:
        return b if a is None else a
    return {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}


def _merge_appends(first: WriteStat, later: WriteStat) -> WriteStat:
    """One stat for two appends of the instant to the same log file: counts add up; the offset
    stays where the instant's first block begins (restore and rollback read it), the size is
    the file's now."""
    return dataclasses.replace(
        later,
        numWrites=first.numWrites + later.numWrites,
        numDeletes=first.numDeletes + later.numDeletes,
        numUpdateWrites=first.numUpdateWrites + later.numUpdateWrites,
        numInserts=first.numInserts + later.numInserts,
        totalWriteBytes=first.totalWriteBytes + later.totalWriteBytes,
        totalLogRecords=first.totalLogRecords + later.totalLogRecords,
        totalLogBlocks=first.totalLogBlocks + later.totalLogBlocks,
        logOffset=first.logOffset,
        runtimeStats=_sum_runtime(first.runtimeStats, later.runtimeStats),
    )


def _merge_rewrites(first: WriteStat, later: WriteStat) -> WriteStat:
    """The stat of a base file that replaced one the instant wrote before: the file's own
    numbers (records, bytes) are the later one's; the previous commit is the one the first
    rewrite replaced; update, insert and delete counts add up, as Hudi's WriteStatMerger adds
    them (a key inserted and then updated in the instant counts once each way)."""
    return dataclasses.replace(
        later,
        prevCommit=first.prevCommit,
        numDeletes=first.numDeletes + later.numDeletes,
        numUpdateWrites=first.numUpdateWrites + later.numUpdateWrites,
        numInserts=first.numInserts + later.numInserts,
        runtimeStats=_sum_runtime(first.runtimeStats, later.runtimeStats),
    )
