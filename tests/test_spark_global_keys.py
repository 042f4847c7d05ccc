"""The plan by key of a Spark write under a global index (shoal.spark.global_keys), without
Spark: how the driver groups each key's destinations and how the route pass expands records."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from shoal.spark import global_keys
from shoal.spark.global_keys import GlobalRoutePlan, _grouped_by_key
from shoal.spark.keys import KeyMap
from shoal.tasks.cow_write import OP_COLUMN, OP_HARD_DELETE, OP_SOFT_DELETE, OP_UPSERT
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY


def _groups(keys: list[str]) -> list[list[int]]:
    order, first, _ = _grouped_by_key(pa.array(keys))
    bounds = [*first.tolist(), len(keys)]
    return sorted(sorted(order[a:b].tolist()) for a, b in itertools.pairwise(bounds))


def _length_hash(keys: pa.Array) -> np.ndarray:
    return pc.binary_length(keys).to_numpy().astype(np.uint64)


@pytest.mark.parametrize("weak_hash", [False, True])
def test_equal_keys_are_grouped_even_when_distinct_keys_share_a_hash(monkeypatch, weak_hash):
    keys = ["b", "a", "ccc", "b", "dd", "a", "b", "ee"]
    if weak_hash:
        # Every key of one length shares a hash: "dd" and "ee" collide, as do "a" and "b".
        monkeypatch.setattr(global_keys, "key_hash", _length_hash)
    assert _groups(keys) == [[0, 3, 6], [1, 5], [2], [4], [7]]


def test_a_record_goes_to_each_destination_of_its_key():
    # Key "m" moves: its record goes to route 7 under "nyc" and a hard delete goes to route 3
    # under "sf"; "u" goes to route 5 as it is; "x" goes nowhere.
    keys = pa.array(["m", "u"])
    plan = GlobalRoutePlan(
        key_map=KeyMap(keys, pa.array([0, 1], pa.int64())),
        first=np.array([0, 2]),
        count=np.array([2, 1]),
        route=np.array([7, 3, 5], dtype=np.int32),
        partition=pa.array(["nyc", "sf", "paris"]),
        op=np.array([-1, OP_HARD_DELETE, -1], dtype=np.int8),
    )
    records = pa.table(
        {
            RECORD_KEY: ["u", "x", "m", "m"],
            PARTITION_PATH: ["chennai", "sf", "nyc", "sf"],
            OP_COLUMN: pa.array([OP_UPSERT, OP_UPSERT, OP_UPSERT, OP_SOFT_DELETE], pa.int8()),
            "v": [1, 2, 3, 4],
        }
    )
    expanded, routes = plan.expand(records)
    got = sorted(
        zip(
            expanded.column("v").to_pylist(),
            expanded.column(PARTITION_PATH).to_pylist(),
            expanded.column(OP_COLUMN).to_pylist(),
            routes.to_pylist(),
            strict=True,
        )
    )
    assert got == [
        (1, "paris", OP_UPSERT, 5),
        (3, "nyc", OP_UPSERT, 7),
        (3, "sf", OP_HARD_DELETE, 3),
        (4, "nyc", OP_SOFT_DELETE, 7),
        (4, "sf", OP_HARD_DELETE, 3),
    ]


def test_records_that_each_go_to_one_place_stay_as_they_are():
    keys = pa.array(["a", "b"])
    plan = GlobalRoutePlan(
        key_map=KeyMap(keys, pa.array([0, 1], pa.int64())),
        first=np.array([0, 1]),
        count=np.array([1, 1]),
        route=np.array([2, 4], dtype=np.int32),
        partition=pa.array(["p", "q"]),
        op=np.array([-1, -1], dtype=np.int8),
    )
    records = pa.table(
        {
            RECORD_KEY: ["b", "a"],
            PARTITION_PATH: ["x", "y"],
            OP_COLUMN: pa.array([OP_UPSERT, OP_UPSERT], pa.int8()),
        }
    )
    expanded, routes = plan.expand(records)
    assert expanded.column(PARTITION_PATH).to_pylist() == ["q", "p"]
    assert routes.to_pylist() == [4, 2]


def test_the_driver_reads_only_the_key_files_of_successful_attempts(tmp_path):
    """Files of failed attempts may lie beside them; a file that holds other than the rows its
    task counted is refused."""
    from shoal.errors import CorruptDataError
    from shoal.fs.storage import Storage
    from shoal.spark.global_keys import key_pass_schema, read_keys

    storage = Storage(str(tmp_path))
    schema = key_pass_schema(None)

    def written(name: str, keys: list[str]) -> str:
        rows = pa.table(
            {
                "_shoal_seq": pa.array(range(len(keys)), pa.int64()),
                RECORD_KEY: keys,
                PARTITION_PATH: ["p"] * len(keys),
                OP_COLUMN: pa.array([OP_UPSERT] * len(keys), pa.int8()),
            },
            schema=schema,
        )
        path = f"keys/{name}.arrow"
        with storage.open_output_stream(path) as sink, pa.ipc.new_stream(sink, schema) as stream:
            stream.write_table(rows)
        return path

    ok_0, _failed, ok_1 = written("0-1", ["a", "b"]), written("1-2", ["x"]), written("1-3", ["c"])
    files = pa.table({"file": [ok_0, ok_1], "rows": pa.array([2, 1], pa.int64())})
    assert read_keys(storage, files, schema).column(RECORD_KEY).to_pylist() == ["a", "b", "c"]
    assert read_keys(storage, files.slice(0, 0), schema).num_rows == 0
    miscounted = pa.table({"file": [ok_0], "rows": pa.array([3], pa.int64())})
    with pytest.raises(CorruptDataError, match="holds 2 rows"):
        read_keys(storage, miscounted, schema)
