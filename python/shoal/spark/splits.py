"""Packing read tasks into Spark partitions, by the rule Spark's file sources follow.

A read plans one task per file slice. One Spark partition per task costs a Python round trip
and a task launch per slice, which dominates for small slices; one partition for everything
leaves cores idle. Spark's parquet scan settles the same question with
``spark.sql.files.maxPartitionBytes``, ``spark.sql.files.openCostInBytes`` and the default
parallelism: a partition holds at most

    min(maxPartitionBytes, max(openCostInBytes, bytes of every file with its open cost / min partitions))

bytes, files are taken largest first, and each counts its size plus the open cost. Reads of shoal
tables follow that rule, with a slice's files (base file and logs) as its size. Slices are never
split: a merge-on-read slice merges its logs in one task.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from shoal.errors import InvalidOptionError

MAX_PARTITION_BYTES = "spark.sql.files.maxPartitionBytes"
OPEN_COST_BYTES = "spark.sql.files.openCostInBytes"
MIN_PARTITIONS = "spark.sql.files.minPartitionNum"
LEAF_PARALLELISM = "spark.sql.leafNodeDefaultParallelism"
DEFAULT_PARALLELISM = "spark.default.parallelism"

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_BYTES = re.compile(r"^\s*(\d+)\s*([kmgtp]?)b?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class SplitPolicy:
    """Spark's sizes for packing read tasks (bytes; ``min_partitions`` 0 means this machine's
    CPU count, the default parallelism of a local session)."""

    max_partition_bytes: int = 128 << 20
    open_cost_bytes: int = 4 << 20
    min_partitions: int = 0

    @classmethod
    def of_session(cls, spark: SparkSession) -> SplitPolicy:
        """The policy ``spark``'s parquet scans follow now."""
        conf = spark.conf
        max_bytes = conf.get(MAX_PARTITION_BYTES, None)
        open_cost = conf.get(OPEN_COST_BYTES, None)
        minimum = conf.get(MIN_PARTITIONS, None) or conf.get(LEAF_PARALLELISM, None)
        return cls(
            parse_bytes(max_bytes, MAX_PARTITION_BYTES) if max_bytes else cls.max_partition_bytes,
            parse_bytes(open_cost, OPEN_COST_BYTES) if open_cost else cls.open_cost_bytes,
            _positive(minimum, MIN_PARTITIONS) if minimum else _default_parallelism(spark),
        )

    def max_split_bytes(self, sizes: Sequence[int]) -> int:
        """The most bytes one partition takes, for tasks of ``sizes``."""
        partitions = self.min_partitions or os.cpu_count() or 1
        total = sum(size + self.open_cost_bytes for size in sizes)
        return min(self.max_partition_bytes, max(self.open_cost_bytes, total // partitions))


def pack(sizes: Sequence[int], policy: SplitPolicy) -> list[list[int]]:
    """The tasks (indexes into ``sizes``) of each Spark partition, largest task first."""
    limit = policy.max_split_bytes(sizes)
    partitions: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for task in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        if current and filled + sizes[task] > limit:
            partitions.append(current)
            current, filled = [], 0
        current.append(task)
        filled += sizes[task] + policy.open_cost_bytes
    if current:
        partitions.append(current)
    return partitions


def _default_parallelism(spark: SparkSession) -> int:
    try:
        return int(spark.sparkContext.defaultParallelism)
    except (AttributeError, NotImplementedError):
        # A Spark Connect session has no SparkContext: its conf, else this machine's cores.
        value = spark.conf.get(DEFAULT_PARALLELISM, None)
        return _positive(value, DEFAULT_PARALLELISM) if value else 0


def parse_bytes(text: str, name: str) -> int:
    """A Spark byte size (``134217728``, ``128m``, ``128MB``, ``4 kb``), in bytes."""
    m = _BYTES.match(str(text))
    if m is None:
        raise InvalidOptionError(f"{name} must be a byte size such as 128MB, got {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def _positive(text: str, name: str) -> int:
    value = str(text).strip()
    if not value.isdigit() or int(value) < 1:
        raise InvalidOptionError(f"{name} must be a positive integer, got {text!r}")
    return int(value)
