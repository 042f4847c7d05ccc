"""The two ways the demo pipeline runs: the embedded engine (threads in this process) and Spark
(every task inside ``mapInArrow``). Both execute the same plans; the demo drives them through
this one small interface so it can run the same change stream through each and compare."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa

import shoal
from shoal.read.filters import Filter


class Engine(Protocol):
    name: str

    def write(self, path: str, data: pa.Table, operation: str) -> str | None: ...

    def compact_if_due(self, path: str) -> list[str]: ...

    def read(
        self, path: str, columns: Sequence[str] | None = None, filters: Sequence[Filter] | None = None
    ) -> pa.Table: ...

    def read_incremental(
        self, path: str, start: str | None, end: str, columns: Sequence[str], include_deletes: bool
    ) -> pa.Table: ...


class LocalEngine:
    """The embedded engine: shoal.Table on a thread pool."""

    name = "embedded"

    def write(self, path: str, data: pa.Table, operation: str) -> str | None:
        if data.num_rows == 0:
            return None
        return shoal.Table(path).write(data, operation).instant

    def compact_if_due(self, path: str) -> list[str]:
        return shoal.Table(path).compact(force=False)

    def read(
        self, path: str, columns: Sequence[str] | None = None, filters: Sequence[Filter] | None = None
    ) -> pa.Table:
        return shoal.Table(path).read(columns=columns, filters=filters)

    def read_incremental(
        self, path: str, start: str | None, end: str, columns: Sequence[str], include_deletes: bool
    ) -> pa.Table:
        return shoal.Table(path).read_incremental(
            start, end, columns=list(columns), include_deletes=include_deletes
        )


class SparkEngine:
    """Spark: writes, compaction and reads run as Spark jobs of mapInArrow tasks."""

    name = "spark"

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def write(self, path: str, data: pa.Table, operation: str) -> str | None:
        from shoal.spark.write import write

        if data.num_rows == 0:
            return None
        return write(self.spark.createDataFrame(data), path, operation=operation).instant

    def compact_if_due(self, path: str) -> list[str]:
        from shoal.spark.services import compact

        return compact(self.spark, path, force=False)

    def read(
        self, path: str, columns: Sequence[str] | None = None, filters: Sequence[Filter] | None = None
    ) -> pa.Table:
        from shoal.spark.read import read

        df = read(self.spark, path, columns=list(columns) if columns else None, filters=filters)
        return df.toArrow()

    def read_incremental(
        self, path: str, start: str | None, end: str, columns: Sequence[str], include_deletes: bool
    ) -> pa.Table:
        from shoal.spark.read import read

        df = read(
            self.spark,
            path,
            columns=list(columns),
            query_type="incremental",
            start=start,
            end=end,
            include_deletes=include_deletes,
        )
        return df.toArrow()
