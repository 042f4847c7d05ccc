"""Packed records (shoal.spark.packing): the route pass's packed files and their index, laid out
on write tasks, read back whole and in input order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from shoal.errors import CorruptDataError, InvalidArgumentError
from shoal.fs.storage import Storage
from shoal.spark.packing import PackedReader, PackedWriter, Run, planned_runs, runs_by_task, unpack


def _records(n: int, rng: np.random.Generator, first: int = 0) -> pa.Table:
    keys = pa.array([f"key-{i:06d}" for i in range(first, first + n)])
    table = pa.table(
        {
            "key": keys,
            "value": rng.normal(size=n),
            "tags": pa.array([[i, i + 1] if i % 3 else None for i in range(n)], pa.list_(pa.int64())),
            # The record key column of a string key field is the same array: packed once.
            "_hoodie_record_key": keys,
        }
    )
    return table.cast(table.schema.set(3, pa.field("_hoodie_record_key", pa.string(), nullable=False)))


def _pack(storage: Storage, part: int, chunks: list[tuple[pa.Table, pa.Array]]) -> pa.RecordBatch:
    storage.makedirs("packed")  # the driver's part
    writer = PackedWriter(storage, f"packed/{part}-{100 + part}.arrow", part)
    for records, routes in chunks:
        writer.write(records, routes)
    return writer.close()


def test_each_bucket_gets_its_records_in_input_order_from_every_file(tmp_path):
    rng = np.random.default_rng(7)
    storage = Storage(str(tmp_path))
    n, buckets = 3_000, 9
    records = _records(n, rng)
    route_values = rng.integers(0, buckets, size=n).astype(np.int32)
    dropped = rng.random(n) < 0.1
    routes = pa.array(route_values, mask=dropped)
    # Three route tasks (input partitions), the middle one packing two chunks; listed out of
    # order, as the index rows may come back.
    cuts = [(0, 1_000), (1_000, 1_600), (1_600, 2_000), (2_000, 3_000)]
    chunks = [(records.slice(a, b - a), routes.slice(a, b - a)) for a, b in cuts]
    index = pa.Table.from_batches(
        [_pack(storage, 2, chunks[3:]), _pack(storage, 0, chunks[:1]), _pack(storage, 1, chunks[1:3])]
    )
    task_of = [b % 4 for b in range(buckets)]
    order = [8, *range(8)]
    layout = runs_by_task(planned_runs(index), task_of, order)
    assert len(layout) == 4
    seen = []
    for task, runs in enumerate(layout):
        assert [task_of[b] for b, _ in runs] == [task] * len(runs)
        assert [b for b, _ in runs] == sorted((b for b, _ in runs), key=order.index)
        reader = PackedReader(storage)
        for bucket, bucket_runs in runs:
            seen.append(bucket)
            unpacked = pa.concat_tables([unpack(reader.read(run)) for run in bucket_runs])
            rows = np.flatnonzero((route_values == bucket) & ~dropped)
            assert unpacked.schema.equals(records.schema), bucket
            assert unpacked.equals(records.take(pa.array(rows))), bucket
        reader.close()
    assert sorted(seen) == sorted(set(route_values[~dropped].tolist()))
    # The repeated column is written once.
    first = layout[0][0][1][0]
    raw = pa.ipc.open_stream(PackedReader(storage).read(first))
    assert raw.schema.names == ["key", "value", "tags"]


def test_no_run_when_no_row_has_a_route(tmp_path):
    storage = Storage(str(tmp_path))
    index = _pack(storage, 0, [(_records(100, np.random.default_rng(1)), pa.nulls(100, pa.int32()))])
    assert index.num_rows == 0
    assert runs_by_task(planned_runs(pa.Table.from_batches([index])), [0, 0], [0, 1]) == [[]]


def test_a_route_no_bucket_has_fails(tmp_path):
    storage = Storage(str(tmp_path))
    records = _records(10, np.random.default_rng(2))
    index = _pack(storage, 0, [(records, pa.array(np.full(10, 3, np.int32)))])
    with pytest.raises(InvalidArgumentError, match="unknown route value 3"):
        runs_by_task(planned_runs(pa.Table.from_batches([index])), [0, 1], [0, 1])


def test_a_truncated_packed_file_fails(tmp_path):
    storage = Storage(str(tmp_path))
    records = _records(2_000, np.random.default_rng(2))
    index = _pack(storage, 0, [(records, pa.array(np.zeros(2_000, np.int32)))])
    (run,) = runs_by_task(planned_runs(pa.Table.from_batches([index])), [0], [0])[0][0][1]
    path = tmp_path / run.file
    path.write_bytes(path.read_bytes()[: run.length // 2])
    with pytest.raises(CorruptDataError, match="ends within its run"):
        PackedReader(storage).read(Run(run.file, run.offset, run.length))


def _pass_rows(
    storage: Storage, partition: str, records: pa.Table, routes: np.ndarray, keys_of: dict
) -> pa.Table:
    """A route task's output for ``records`` of one partition: its runs by ``routes`` (route
    values), and a count row per route value (upserts) naming ``keys_of[route]``: (file id,
    slot)."""
    index = _pack(storage, 0, [(records, pa.array(routes, pa.int32()))])
    values = sorted(set(routes.tolist()))
    n = len(values)
    counts = pa.table(
        {
            "route": pa.array(values, pa.int32()),
            "part": pa.array([0] * n, pa.int32()),
            "file": pa.array([index.column(2)[0].as_py()] * n),
            "offset": pa.nulls(n, pa.int64()),
            "length": pa.nulls(n, pa.int64()),
            "partition": [partition] * n,
            "file_id": pa.array([keys_of[v][0] for v in values], pa.string()),
            "slot": pa.array([keys_of[v][1] for v in values], pa.int32()),
            "bucket": pa.array([-1] * n, pa.int32()),
            "op": pa.array([0] * n, pa.int8()),
            "n": pa.array([int((routes == v).sum()) for v in values], pa.int64()),
        }
    )
    runs = pa.Table.from_batches([index])
    runs = pa.table(
        {
            **{c: runs.column(c) for c in runs.column_names},
            **{c: pa.nulls(runs.num_rows, counts.schema.field(c).type) for c in counts.column_names[5:]},
        }
    )
    return pa.concat_tables([runs, counts.cast(runs.schema)])


def test_new_records_spread_over_insert_buckets_by_position_each_exactly_once(tmp_path):
    from shoal.spark.keys import insert_positions, insert_slots, key_hash
    from shoal.spark.routing import laid_out_runs
    from shoal.write.assigner import Assignment, Bucket

    storage = Storage(str(tmp_path))
    records = _records(5_000, np.random.default_rng(4))
    hashes = key_hash(records.column("_hoodie_record_key"))
    slots = insert_slots(hashes)
    # Route value: the slot, plus one of a file group for the first 100 records.
    routes = slots.copy()
    routes[:100] = 99
    keys_of = {int(s): (None, int(s)) for s in np.unique(slots)} | {99: ("fg-1", -1)}
    rows = _pass_rows(storage, "p", records, routes, keys_of)
    plan = [(1, 1_500), (2, 2_000), (3, 1_400)]
    buckets = [Bucket("p", "fg-1", None, updates=100)] + [Bucket("p", f"new-{b}", None) for b, _ in plan]
    runs = laid_out_runs(rows, Assignment(buckets, {"p": plan}))
    reader = PackedReader(storage)
    got: dict[int, pa.Table] = {}
    for bucket, _, run in runs:
        got[bucket] = pa.concat_tables([*([got[bucket]] if bucket in got else []), reader.records(run)])
    assert got[0].equals(records.slice(0, 100))
    new = records.slice(100)
    positions = insert_positions(hashes[100:], 4_900)
    ends = np.cumsum([0] + [c for _, c in plan])
    for (b, _), start, end in zip(plan, ends, ends[1:], strict=False):
        wanted = new.filter(pa.array((positions >= start) & (positions < end)))
        assert sorted(got[b].column("key").to_pylist()) == sorted(wanted.column("key").to_pylist())
        # Near the planned count: the hashes spread evenly.
        assert abs(got[b].num_rows - (end - start)) < 0.2 * (end - start)
    assert sum(t.num_rows for t in got.values()) == records.num_rows


def test_new_records_of_a_partition_without_inserts_fail_unless_they_are_deletes(tmp_path):
    from shoal.spark.routing import laid_out_runs
    from shoal.write.assigner import Assignment

    storage = Storage(str(tmp_path))
    records = _records(10, np.random.default_rng(5))
    rows = _pass_rows(storage, "p", records, np.zeros(10, np.int64), {0: (None, 3)})
    with pytest.raises(ValueError, match="new records of partition 'p' have no bucket"):
        laid_out_runs(rows, Assignment([], {}))
    deletes = rows.set_column(rows.schema.get_field_index("op"), "op", pa.array([None, 2], pa.int8()))
    assert laid_out_runs(deletes, Assignment([], {})) == []


def test_a_packed_file_is_not_written_once_its_directory_is_gone(tmp_path):
    """An attempt Spark gave up on may still run after the write deleted its scratch directory:
    its file must not bring the directory back."""
    storage = Storage(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        PackedWriter(storage, "gone/0-1.arrow", 0)
    assert not (tmp_path / "gone").exists()


def test_runs_whose_packed_columns_match_keep_their_own_repeated_columns(tmp_path):
    # Two writes' records whose packed schemas differ only in their metadata (which columns the
    # packing left out as repeats): each must unpack to its own columns, as written.
    storage = Storage(str(tmp_path))
    keys = pa.array(["a", "b", "c"])
    first = pa.table({"key": keys, "_hoodie_record_key": keys})
    second = pa.table({"key": keys, "copy": keys})
    third = pa.table(
        {"key": keys, "copy": keys},
        schema=pa.schema([("key", pa.string()), pa.field("copy", pa.string(), False)]),
    )
    routes = pa.array([0, 0, 0], pa.int32())
    index = pa.Table.from_batches(
        [_pack(storage, p, [(t, routes)]) for p, t in enumerate([first, second, third])]
    )
    reader = PackedReader(storage)
    got = [reader.records(run) for _, _, run in sorted(planned_runs(index), key=lambda r: r[1])]
    reader.close()
    for table, want in zip(got, [first, second, third], strict=True):
        assert table.equals(want) and table.schema.equals(want.schema, check_metadata=True)
