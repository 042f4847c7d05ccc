"""Spark reads pack file slices into Spark partitions as Spark's parquet scan packs files."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

import shoal
import shoal.spark
from shoal.errors import InvalidOptionError
from shoal.spark.datasource import register
from shoal.spark.splits import (
    LEAF_PARALLELISM,
    MAX_PARTITION_BYTES,
    MIN_PARTITIONS,
    OPEN_COST_BYTES,
    SplitPolicy,
    pack,
    parse_bytes,
)

# ---- the rule -----------------------------------------------------------------------------------


def test_tasks_go_largest_first_until_a_partition_would_pass_the_split_size():
    # Every task with its open cost: 150 + 5 * 10 = 200 bytes over 2 partitions, so a partition
    # takes up to min(100, max(10, 200 / 2)) = 100 bytes. 50 opens the first (60 with its open
    # cost), 40 still fits (60 + 40 is not more than 100); 30 would pass it and opens the second
    # (40), where 20 (60 + 20) and 10 (80 + 10) fit.
    policy = SplitPolicy(max_partition_bytes=100, open_cost_bytes=10, min_partitions=2)
    sizes = [10, 40, 30, 50, 20]
    assert pack(sizes, policy) == [[3, 1], [2, 4, 0]]


def test_max_partition_bytes_caps_the_split_size_and_the_open_cost_floors_it():
    # 4 tasks of 100 bytes with open cost 1: 404 bytes over 1 partition, capped at 150: one
    # task per partition once a second would pass 150.
    assert pack([100] * 4, SplitPolicy(150, 1, 1)) == [[0], [1], [2], [3]]
    # Empty tasks with a large open cost: each counts 1000. Over one partition the split size is
    # 3000 and all fit; over three it is 1000, and a task joins while the partition's bytes
    # before it (its own 0 included) are at most 1000: two do, the third opens a partition.
    assert pack([0, 0, 0], SplitPolicy(128 << 20, 1000, 1)) == [[0, 1, 2]]
    assert pack([0, 0, 0], SplitPolicy(128 << 20, 1000, 3)) == [[0, 1], [2]]
    # A task larger than the split size gets a partition of its own; slices are never split.
    assert pack([10, 500, 10], SplitPolicy(100, 0, 1)) == [[1], [0, 2]]


def test_an_empty_plan_packs_into_no_partition():
    assert pack([], SplitPolicy()) == []


def test_without_a_session_the_policy_spreads_over_this_machines_cores():
    cores = os.cpu_count() or 1
    sizes = [1 << 20] * (4 * cores)
    # Spark's defaults: 128 MB partitions, 4 MB open cost; 5 MB per task over the cores.
    assert SplitPolicy().max_split_bytes(sizes) == 4 * 5 * (1 << 20)
    assert len(pack(sizes, SplitPolicy())) == cores


class _ConnectLike:
    """A session without a SparkContext, as Spark Connect's, with the given conf."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.conf = self
        self._conf = conf

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._conf.get(key, default)

    @property
    def sparkContext(self):
        raise NotImplementedError("[NOT_IMPLEMENTED] sparkContext() is not implemented.")


def test_a_session_without_a_spark_context_takes_the_conf_or_this_machines_cores():
    policy = SplitPolicy.of_session(_ConnectLike({"spark.default.parallelism": "6", OPEN_COST_BYTES: "1m"}))
    assert policy == SplitPolicy(128 << 20, 1 << 20, 6)
    assert SplitPolicy.of_session(_ConnectLike({})) == SplitPolicy()
    with pytest.raises(InvalidOptionError, match=r"spark\.default\.parallelism must be a positive integer"):
        SplitPolicy.of_session(_ConnectLike({"spark.default.parallelism": "zero"}))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("134217728", 134217728), ("128m", 128 << 20), ("128MB", 128 << 20), ("4 kb", 4096), ("1g", 1 << 30)],
)
def test_byte_sizes_read_as_spark_reads_them(text, expected):
    assert parse_bytes(text, MAX_PARTITION_BYTES) == expected


@pytest.mark.parametrize("text", ["1.5g", "-4", "lots", "12 parsecs"])
def test_a_bad_byte_size_is_a_typed_error(text):
    with pytest.raises(InvalidOptionError, match=r"spark\.sql\.files\.maxPartitionBytes must be a byte size"):
        parse_bytes(text, MAX_PARTITION_BYTES)


# ---- against Spark's parquet scan ---------------------------------------------------------------


def _rows(n: int, part: str) -> pa.Table:
    return pa.table(
        {
            "id": [f"{part}-{i:06d}" for i in range(n)],
            "part": [part] * n,
            "v": [float(i) for i in range(n)],
            "note": [f"note {i * 7919 % 10007}" for i in range(n)],
        }
    )


@pytest.fixture(scope="module")
def cow_table(tmp_path_factory):
    """A copy-on-write table whose base files all differ in size (ties would let Spark and
    shoal order equal files differently)."""
    path = tmp_path_factory.mktemp("splits") / "t"
    table = shoal.Table.create(path, "t", record_key="id", partition_by="part")
    counts = [300, 700, 1500, 2600, 4100, 900]
    table.bulk_insert(pa.concat_tables(_rows(n, f"p{i}") for i, n in enumerate(counts)))
    sizes = [s.base_file.size for s in table.file_slices() if s.base_file]
    assert len(sizes) >= 6 and len(set(sizes)) == len(sizes)
    return table


def _groups(rows: list, file_column: str) -> list[tuple[str, ...]]:
    by_partition: dict[int, set[str]] = {}
    for row in rows:
        by_partition.setdefault(row["pid"], set()).add(os.path.basename(row[file_column]))
    return sorted(tuple(sorted(files)) for files in by_partition.values())


def _parquet_groups(spark, files: list[str]) -> list[tuple[str, ...]]:
    df = spark.read.parquet(*files)
    df = df.select(F.input_file_name().alias("f"), F.spark_partition_id().alias("pid"))
    return _groups(df.distinct().collect(), "f")


def _shoal_groups(df) -> list[tuple[str, ...]]:
    rows = df.select("_hoodie_file_name", F.spark_partition_id().alias("pid")).distinct().collect()
    return _groups(rows, "_hoodie_file_name")


@pytest.fixture
def session_conf(spark) -> Iterator:
    """Sets Spark's file-split confs for one test, then restores them and the registration."""
    keys = (MAX_PARTITION_BYTES, OPEN_COST_BYTES, MIN_PARTITIONS, LEAF_PARALLELISM)
    saved = {k: spark.conf.get(k, None) for k in keys}

    def set_conf(**values: str) -> None:
        for key, value in values.items():
            spark.conf.set(key, value)
        register(spark)

    yield set_conf
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
    register(spark)


def _confs(sizes: list[int]) -> list[dict[str, str]]:
    largest, total = max(sizes), sum(sizes)
    return [
        {},  # Spark's defaults over local[2]: tiny files, a few per partition
        # At most the largest file per partition (Spark would split a larger file), with a small
        # open cost and one minimum partition: several partitions of one or more files.
        {MAX_PARTITION_BYTES: f"{largest}b", OPEN_COST_BYTES: "1k", MIN_PARTITIONS: "1"},
        # The split size from the minimum partitions: total / 3 with a 0-byte open cost.
        {MAX_PARTITION_BYTES: "128m", OPEN_COST_BYTES: "0", MIN_PARTITIONS: "3"},
        {MAX_PARTITION_BYTES: f"{(total // 2) // 1024}k", OPEN_COST_BYTES: "4MB", LEAF_PARALLELISM: "4"},
    ]


def test_the_data_source_packs_slices_as_spark_packs_parquet_files(spark, cow_table, session_conf):
    files = [cow_table.storage.full_path(s.base_file.path) for s in cow_table.file_slices() if s.base_file]
    sizes = [s.base_file.size for s in cow_table.file_slices() if s.base_file]
    seen = set()
    for conf in _confs(sizes):
        session_conf(**conf)
        expected = _parquet_groups(spark, files)
        seen.add(len(expected))
        df = spark.read.format("shoal").load(str(cow_table.path))
        assert df.rdd.getNumPartitions() == len(expected), conf
        assert _shoal_groups(df) == expected, conf
        assert df.count() == cow_table.read().num_rows
    # The confs reach several partition counts (the test is not one case four times).
    assert len(seen) >= 3


def test_shoal_tasks_of_spark_read_pack_by_the_session_conf(spark, cow_table, session_conf):
    files = [cow_table.storage.full_path(s.base_file.path) for s in cow_table.file_slices() if s.base_file]
    sizes = [s.base_file.size for s in cow_table.file_slices() if s.base_file]
    # No register needed: shoal.spark.read reads the session's conf when it plans.
    conf = _confs(sizes)[1]
    for key, value in conf.items():
        spark.conf.set(key, value)
    expected = _parquet_groups(spark, files)
    assert len(expected) > 2
    df = shoal.spark.read(spark, cow_table.path, native_scan=False)
    assert df.rdd.getNumPartitions() == len(expected)
    assert _shoal_groups(df) == expected
    assert sorted(df.toArrow().column("id").to_pylist()) == sorted(cow_table.read().column("id").to_pylist())
    session_conf()  # restores the confs
