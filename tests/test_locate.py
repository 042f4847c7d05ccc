"""A global index's key lookups as executor tasks (shoal.index.locate): on the local executor and
on Spark, the slices holding the keys are those whose base files hold them, and a Spark write
under a global index reads no key column on the driver."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal.executor import LocalExecutor
from shoal.executor.base import balanced_groups
from shoal.fs.view import FileSystemView
from shoal.index.bloom import BloomIndex
from shoal.index.locate import locate_keys
from shoal.index.simple import SimpleIndex
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by

SMALL = {
    "hoodie.parquet.max.file.size": "6000",
    "hoodie.parquet.small.file.limit": "0",
    "hoodie.index.bloom.num_entries": "200",
    "hoodie.bloom.index.filter.dynamic.max.entries": "400",
}


def _table(path: str, seed: int, table_type: str = "COPY_ON_WRITE") -> tuple[shoal.Table, list[str]]:
    """A table of four partitions and several base files each (three commits of new file
    groups, whose key ranges overlap); the keys written."""
    rng = random.Random(seed)
    table = shoal.Table.create(
        path, name="t", record_key="k", partition_by="p", ordering_field="ts", table_type=table_type
    )
    keys = sorted({f"key-{rng.randrange(10**9):09d}" for _ in range(600)})
    for commit in range(3):
        part = keys[commit::3]
        rows = pa.table(
            {
                "k": part,
                "p": [f"p{rng.randrange(4)}" for _ in part],
                "ts": pa.array([1] * len(part), pa.int64()),
                "v": [rng.random() for _ in part],
            }
        )
        table.bulk_insert(rows, options=SMALL)
    return table, keys


def _truth(table: shoal.Table, keys: pa.Array) -> list[tuple[str, list[int]]]:
    """Per latest slice, in the view's order: the indices of ``keys`` its base file holds, read
    straight from the file."""
    view = FileSystemView(table.storage, Timeline.load(table.storage, table.config))
    found = []
    for sl in view.latest_file_slices():
        assert sl.base_file is not None
        base = pq.read_table(table.storage.full_path(sl.base_file.path))
        stored = set(base.column("_hoodie_record_key").to_pylist())
        held = [i for i, k in enumerate(keys.to_pylist()) if k in stored]
        if held:
            found.append((sl.file_id, held))
    return found


def _probe(keys: list[str], seed: int) -> pa.Array:
    rng = random.Random(seed)
    wanted = rng.sample(keys, 200) + [f"absent-{i}" for i in range(100)]
    rng.shuffle(wanted)
    return pa.array(wanted)


@pytest.mark.parametrize("index_type", ["bloom", "simple"])
@pytest.mark.parametrize("workers", [1, 3])
def test_local_lookups_find_what_the_files_hold(tmp_path, index_type, workers):
    table, keys = _table(str(tmp_path / "t"), seed=workers)
    probe = _probe(keys, seed=7)
    index = BloomIndex(table.storage) if index_type == "bloom" else SimpleIndex(table.storage)
    slices = FileSystemView(table.storage, Timeline.load(table.storage, table.config)).latest_file_slices()
    assert len(slices) >= 8
    located = locate_keys(index, LocalExecutor(workers), probe, slices)
    assert [(sl.file_id, held.tolist()) for sl, held in located] == _truth(table, probe)


def test_spark_tasks_find_what_the_files_hold(spark, tmp_path):
    from shoal.spark import SparkExecutor

    table, keys = _table(str(tmp_path / "t"), seed=3)
    probe = _probe(keys, seed=8)
    slices = FileSystemView(table.storage, Timeline.load(table.storage, table.config)).latest_file_slices()
    located = locate_keys(BloomIndex(table.storage), SparkExecutor(spark), probe, slices)
    assert [(sl.file_id, held.tolist()) for sl, held in located] == _truth(table, probe)
    assert located[0][0] is slices[[sl.file_id for sl in slices].index(located[0][0].file_id)]


def test_groups_take_every_item_once_in_order_and_balance_their_weights():
    rng = random.Random(5)
    weights = [rng.randrange(1, 1000) for _ in range(40)]
    for most in (1, 3, 8, 100):
        groups = balanced_groups(list(range(40)), lambda i: weights[i], most)
        assert len(groups) == min(most, 40)
        assert sorted(i for group in groups for i in group) == list(range(40))
        assert all(group == sorted(group) for group in groups)
        loads = [sum(weights[i] for i in group) for group in groups]
        # Heaviest first into the lightest group: no group exceeds another by more than one item.
        assert max(loads) - min(loads) <= max(weights)
    assert balanced_groups([], lambda i: 1, 4) == []


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_spark_global_write_reads_no_data_file_on_the_driver(spark, tmp_path, monkeypatch, table_type):
    """The lookups of the stored keys, and the checks of the records that move, run in Spark
    tasks (other processes): with the driver unable to open a base or log file, a global index
    upsert that moves records still tags every key."""
    import shoal.spark
    from shoal.fs.storage import Storage

    path = str(tmp_path / "t")
    table, keys = _table(path, seed=9, table_type=table_type)
    if table_type == "MERGE_ON_READ":
        # Logs in the slices: the moves are checked against the merged records.
        table.upsert(
            pa.table(
                {
                    "k": keys[1::7],
                    "p": ["p0"] * len(keys[1::7]),
                    "ts": pa.array([1] * len(keys[1::7]), pa.int64()),
                    "v": [0.5] * len(keys[1::7]),
                }
            ),
            options={"hoodie.index.type": "GLOBAL_BLOOM", **SMALL},
        )
    before = {r["k"]: r for r in table.read().to_pylist()}
    opened = Storage.open_input_file

    def no_data_files_here(self, rel):
        if rel.endswith(".parquet") or ".log." in rel:
            raise AssertionError(f"the driver opened {rel}")
        return opened(self, rel)

    monkeypatch.setattr(Storage, "open_input_file", no_data_files_here)
    moved = keys[::5]
    upsert = pa.table(
        {
            "k": [*moved, "new-1", "new-2"],
            "p": ["p9"] * (len(moved) + 2),
            "ts": pa.array([2] * (len(moved) + 2), pa.int64()),
            "v": [-1.0] * (len(moved) + 2),
        }
    )
    result = shoal.spark.write(
        spark.createDataFrame(upsert), path, "upsert", {"hoodie.index.type": "GLOBAL_BLOOM", **SMALL}
    )
    assert "keys" in result.timings
    monkeypatch.undo()
    expected = dict(before)
    for row in upsert.to_pylist():
        expected[row["k"]] = row
    got = rows_by(hudi_rs_read(path), ["_hoodie_partition_path", "k", "p", "ts", "v"], ["k"])
    assert got == [
        {"_hoodie_partition_path": r["p"], "k": r["k"], "p": r["p"], "ts": r["ts"], "v": r["v"]}
        for _, r in sorted(expected.items())
    ]
