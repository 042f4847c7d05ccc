"""Table services run by Spark: each is the local service with a :class:`SparkExecutor`, so the
plan is made on the driver and its tasks (one per compaction operation, one per partition's clean
deletes) run on the cluster."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

from shoal.services.archive import ArchiveResult
from shoal.spark.executor import SparkExecutor
from shoal.table import Table
from shoal.timeline.commit_metadata import CommitMetadata


def spark_table(spark: SparkSession, path: str, options: Mapping[str, Any] | None = None) -> Table:
    """The table at ``path`` with its tasks (reads, writes, services) run by ``spark``."""
    return Table(path, options=options, executor=SparkExecutor(spark))


def compact(
    spark: SparkSession, path: str, force: bool = True, options: Mapping[str, Any] | None = None
) -> list[str]:
    """Compacts a merge-on-read table with one Spark task per file slice: runs pending
    compactions, then schedules one (``force=False``: only when the trigger strategy says it is
    due) and runs it. Returns the compaction instants completed, oldest first."""
    return spark_table(spark, path, options).compact(force=force)


def run_compaction(
    spark: SparkSession, path: str, instant: str, options: Mapping[str, Any] | None = None
) -> CommitMetadata:
    """Executes the pending compaction ``instant`` with one Spark task per operation (a failed
    earlier attempt is rolled back first) and returns its commit metadata."""
    return spark_table(spark, path, options).run_compaction(instant)


def clean(
    spark: SparkSession, path: str, force: bool = True, options: Mapping[str, Any] | None = None
) -> list[str]:
    """Cleans old file versions (``hoodie.cleaner.*``) with one Spark task per partition's
    deletes; returns the clean instants completed. A retried task reports the files its failed
    attempt already deleted as failed deletes, as Hudi does for files already gone."""
    return spark_table(spark, path, options).clean(force=force)


def archive(spark: SparkSession, path: str, options: Mapping[str, Any] | None = None) -> ArchiveResult:
    """Archives old instants (``hoodie.keep.*``). Archival moves timeline files only and has no
    tasks: it runs on the driver, as ``Table.archive``."""
    return spark_table(spark, path, options).archive()
