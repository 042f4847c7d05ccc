"""Packed records: how the route pass of a Spark write hands each bucket's records to the write
task planned for it, through files in the table's storage rather than Spark's shuffle.

Each attempt of a route pass task writes one *packed file* in the write's scratch directory
(``shoal.spark.scratch``): per chunk of its input and route value, that chunk's records of the
route as one Arrow IPC stream (a *run*). It returns an index row per run (route, its input
partition, file, offset, length); the driver collects the index of the attempts that succeeded
and gives each write task the runs of its buckets, in input order. A write task reads exactly
those byte ranges.

Spark's shuffle would copy every packed byte from Python into the JVM, compress, write, read,
decompress and sort it, and copy it back into Python: about half a second per million records
here, half the time of writing them as plain parquet. A run written once by the task that made
it and read once by the task that needs it costs a copy each way. Retries stay safe: an attempt
writes a file of its own, a failed or speculative attempt's file is named by no collected
index row and is deleted with the directory, and a retried write task reads the same bytes
again.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from shoal.errors import CorruptDataError, InvalidArgumentError
from shoal.fs.storage import Storage
from shoal.spark.keys import insert_positions, key_hash
from shoal.write.gather import column_identity, take_rows
from shoal.write.prepare import RECORD_KEY

# The input position of a record in its route pass task (what Spark's monotonically_increasing_id
# would give it), carried in the packed records when deduplication needs the input order.
SEQ_COLUMN = "_shoal_seq"
# A scratch directory of packed files per write.
PACKED_DIR_NAME = "shoal-packed-"
# Bytes the packed file's writes are gathered in.
_SINK_BUFFER = 1 << 20
# Schema metadata of a packed stream naming the columns it leaves out because they repeat another.
_REPEATS_KEY = b"shoal.repeated_columns"


def runs(values: np.ndarray) -> list[tuple[int, int, int]]:
    """(value, start, length) of each run of equal values of a sorted int array."""
    if not len(values):
        return []
    cuts = np.flatnonzero(values[1:] != values[:-1]) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(values)]])
    return [(int(values[a]), int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)]


def _stable_order(values: np.ndarray) -> np.ndarray:
    """The indices that sort the ints ``values``, equal values in input order. Route values in
    ``[0, 2**16)`` sort as uint16, which numpy sorts stably by radix: about five times as fast as
    its merge sort of int32."""
    if len(values) and int(values.min()) >= 0 and int(values.max()) < 1 << 16:
        values = values.astype(np.uint16)
    return np.argsort(values, kind="stable")


class PackedWriter:
    """The packed file of one route pass task attempt, and its index rows."""

    def __init__(self, storage: Storage, path: str, part: int) -> None:
        self.path = path
        self.part = part
        # The IPC writer makes a dozen small writes per run; unbuffered, each is a system call,
        # which made a run cost three times as much (26 against 9 microseconds).
        # The driver made the directory (see key_task).
        sink = storage.open_output_stream(path, make_parents=False)
        self._sink = pa.BufferedOutputStream(sink, _SINK_BUFFER)
        self._index: tuple[list[int], list[int], list[int]] = ([], [], [])

    def write(self, records: pa.Table, routes: pa.Array) -> None:
        """Appends ``records`` cut by route value (rows of a null route dropped), in input order
        within a route, one run per route."""
        values = routes.fill_null(-1).to_numpy(zero_copy_only=False)
        if routes.null_count:
            kept = np.flatnonzero(routes.is_valid().to_numpy(zero_copy_only=False))
            order = kept[_stable_order(values[kept])]
        else:
            order = _stable_order(values)
        in_place = len(order) == records.num_rows and bool(np.all(order == np.arange(len(order))))
        ordered = _without_repeats(records if in_place else take_rows(records, pa.array(order)))
        for value, start, length in runs(values[order]):
            begin = self._sink.tell()
            with pa.ipc.new_stream(self._sink, ordered.schema) as stream:
                stream.write_table(ordered.slice(start, length))
            self._index[0].append(value)
            self._index[1].append(begin)
            self._index[2].append(self._sink.tell() - begin)

    def close(self) -> pa.RecordBatch:
        """Closes the file; its index rows: (route, part, file, offset, length) of each run."""
        self._sink.close()
        route, offset, length = self._index
        return pa.record_batch(
            [
                pa.array(route, pa.int32()),
                pa.array([self.part] * len(route), pa.int32()),
                pa.array([self.path] * len(route), pa.string()),
                pa.array(offset, pa.int64()),
                pa.array(length, pa.int64()),
            ],
            names=["route", "part", "file", "offset", "length"],
        )


@dataclass(frozen=True)
class Run:
    """A byte range of a packed file: one IPC stream of records. ``keep``: (start, end, total)
    when only the records whose insert position (``shoal.spark.keys.insert_positions`` of their
    key hash, out of ``total``) falls in ``[start, end)`` belong to the bucket reading it."""

    file: str
    offset: int
    length: int
    keep: tuple[int, int, int] | None = None


# Per write task: its buckets in the order it writes them, each with its runs in input order.
TaskRuns = list[tuple[int, list[Run]]]


def planned_runs(index: pa.Table) -> list[tuple[int, int, Run]]:
    """(bucket, input partition, run) of each run of a route pass whose route values are bucket
    numbers."""
    columns = [index.column(c).to_pylist() for c in ("route", "part", "file", "offset", "length")]
    return [(route, part, Run(f, o, n)) for route, part, f, o, n in zip(*columns, strict=True)]


def runs_by_task(
    runs: Sequence[tuple[int, int, Run]], task_of: Sequence[int], write_order: Sequence[int]
) -> list[TaskRuns]:
    """``runs`` (bucket, input partition, run) laid out on the write tasks: each bucket's in task
    ``task_of[bucket]``, the buckets of a task in the order of ``write_order``, the runs of a
    bucket in input order (input partition, then offset).

    Raises:
        InvalidArgumentError: a run names no planned bucket.
    """
    rank = {b: i for i, b in enumerate(write_order)}
    by_bucket: dict[int, list[tuple[int, int, Run]]] = defaultdict(list)
    for bucket, part, run in runs:
        if not 0 <= bucket < len(task_of):
            raise InvalidArgumentError(f"the route pass sent records with the unknown route value {bucket}")
        by_bucket[bucket].append((part, run.offset, run))
    tasks: list[TaskRuns] = [[] for _ in range(max(task_of, default=-1) + 1)]
    for bucket in sorted(by_bucket, key=lambda b: rank[b]):
        ordered = sorted(by_bucket[bucket], key=lambda r: (r[0], r[1]))
        tasks[task_of[bucket]].append((bucket, [run for _, _, run in ordered]))
    return tasks


class PackedReader:
    """Reads runs of packed files, each file opened once per task."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._files: dict[str, Any] = {}

    def read(self, run: Run) -> pa.Buffer:
        """The bytes of ``run``.

        Raises:
            CorruptDataError: the file is shorter than its index says.
        """
        f = self._files.get(run.file)
        if f is None:
            f = self._files[run.file] = self.storage.open_input_file(run.file)
        f.seek(run.offset)
        data = f.read_buffer(run.length)
        if data.size != run.length:
            raise CorruptDataError(
                f"the packed file {run.file} ends within its run at {run.offset} ({run.length} bytes)"
            )
        return data

    def records(self, run: Run) -> pa.Table:
        """The records of ``run`` that belong to the bucket reading it."""
        records = unpack(self.read(run))
        if run.keep is None:
            return records
        start, end, total = run.keep
        positions = insert_positions(key_hash(records.column(RECORD_KEY)), total)
        return records.filter(pa.array((positions >= start) & (positions < end)))

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


def unpack(run: pa.Buffer) -> pa.Table:
    """The records of a packed run."""
    return _with_repeats(pa.ipc.open_stream(run).read_all())


def _without_repeats(records: pa.Table) -> pa.Table:
    """``records`` without the columns that repeat an earlier column's memory (a string record
    key field and ``_hoodie_record_key`` are one array), each named in the schema's metadata
    with the column it repeats and its nullability, so :func:`_with_repeats` puts it back."""
    first: dict[tuple[Any, ...], str] = {}
    repeats: dict[str, tuple[str, bool]] = {}
    for field, column in zip(records.schema, records.columns, strict=True):
        identity = column_identity(column)
        if identity in first:
            repeats[field.name] = (first[identity], field.nullable)
        else:
            first[identity] = field.name
    if not repeats:
        return records
    kept = records.drop_columns(list(repeats))
    layout = {"columns": records.column_names, "repeats": repeats}
    return kept.replace_schema_metadata({**(kept.schema.metadata or {}), _REPEATS_KEY: json.dumps(layout)})


def _with_repeats(records: pa.Table) -> pa.Table:
    """The inverse of :func:`_without_repeats`."""
    metadata = records.schema.metadata
    layout = metadata.get(_REPEATS_KEY) if metadata else None
    if layout is None:
        return records
    schema, sources = _restored(records.schema, layout)
    columns = records.columns
    return pa.Table.from_arrays([columns[i] for i in sources], schema=schema)


# Packed schemas by layout, each with its records' schema and source columns (see _restored).
_RESTORED: dict[bytes, list[tuple[pa.Schema, pa.Schema, list[int]]]] = {}
_RESTORED_MAX = 64


def _restored(packed: pa.Schema, layout: bytes) -> tuple[pa.Schema, list[int]]:
    """The schema of the records a packed stream of schema ``packed`` (of repeats ``layout``)
    holds, and for each of their columns the packed column holding it. Cached: a task reads
    thousands of runs of one schema, and working it out for each cost about as much as reading
    the run. Schemas are told apart with their metadata, which their ``==`` ignores."""
    known = _RESTORED.get(layout, [])
    for schema, restored, sources in known:
        if schema.equals(packed, check_metadata=True):
            return restored, sources
    metadata = dict(packed.metadata or {})
    del metadata[_REPEATS_KEY]
    spec = json.loads(layout)
    repeats: dict[str, tuple[str, bool]] = {
        name: (source, nullable) for name, (source, nullable) in spec["repeats"].items()
    }
    fields, sources = [], []
    for name in spec["columns"]:
        if name in repeats:
            source, nullable = repeats[name]
            field = packed.field(source).with_name(name).with_nullable(nullable)
        else:
            source = name
            field = packed.field(name)
        fields.append(field)
        sources.append(packed.get_field_index(source))
    restored = pa.schema(fields, metadata=metadata or None)
    if sum(len(entries) for entries in _RESTORED.values()) >= _RESTORED_MAX:
        _RESTORED.clear()
    _RESTORED.setdefault(layout, []).append((packed, restored, sources))
    return restored, sources
