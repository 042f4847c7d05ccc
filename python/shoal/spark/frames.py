"""The input DataFrame of a Spark write: evaluating it twice with the same rows, the Arrow batches
its jobs use, and a sample of its records for the record size estimate.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DecimalType,
    MapType,
    StringType,
    StructType,
)

from shoal.config import write_config as wc
from shoal.spark.keying import KeySpec
from shoal.write.schema import (
    normalize_types,
    strip_meta_columns,
)
from shoal.write.writer import (
    Writer,
    key_records,
)

# Arrow batches of the write's jobs (see arrow_batches): bytes aimed at, records per batch.
BATCH_BYTES = 32 * 1024 * 1024

MIN_BATCH_ROWS, MAX_BATCH_ROWS = 10_000, 100_000

# Input records sampled for the record size estimate when no commit tells it.
SAMPLE_ROWS = 20_000

# Plan leaves that give the same rows when read again: files listed when the plan was made,
# local data, ranges, and data Spark already holds (checkpointed or cached).
_REPRODUCIBLE_LEAVES = frozenset(
    {"LogicalRelation", "LocalRelation", "Range", "LogicalRDD", "InMemoryRelation", "OneRowRelation"}
)
# Operators whose output rows depend on the order their input arrives in, which a shuffle
# does not keep from one evaluation to the next (``df.limit(n)`` takes whichever rows come first).
_ORDER_SENSITIVE = frozenset(
    {
        "GlobalLimit",
        "LocalLimit",
        "Tail",
        "Offset",
        "GlobalLimitAndOffset",
        "Sample",
        "Window",
        "WindowGroupLimit",
    }
)


# Aggregate functions whose result depends on the order rows arrive in (``dropDuplicates``
# becomes an aggregate of ``first`` values), as they appear in a plan's text.
_ORDER_SENSITIVE_AGGREGATES = (
    "first(",
    "last(",
    "any_value(",
    "collect_list(",
    "collect_set(",
    "max_by(",
    "min_by(",
)


def evaluated_once(df: DataFrame) -> DataFrame:
    """``df``, or ``df`` checkpointed on the executors when evaluating it twice could give
    other rows (see :func:`reproducible`): the write evaluates its input twice, and both passes
    must see the same records."""
    return df if reproducible(df) else df.localCheckpoint(eager=False)


def reproducible(df: DataFrame) -> bool:
    """Whether evaluating ``df`` again gives the same rows: its optimized plan reads only
    reproducible leaves (files, local data, ranges, cached or checkpointed data), has no
    order-sensitive operator or aggregate, and Spark deems all its expressions deterministic
    (no ``rand()``, no UDF marked nondeterministic)."""
    plan = df._jdf.queryExecution().optimizedPlan()
    if not plan.deterministic():
        return False
    stack = [plan]
    while stack:
        node = stack.pop()
        name = node.getClass().getSimpleName()
        children = node.children()
        if name in _ORDER_SENSITIVE or (children.size() == 0 and name not in _REPRODUCIBLE_LEAVES):
            return False
        if name == "Aggregate" and any(f in node.toString().lower() for f in _ORDER_SENSITIVE_AGGREGATES):
            return False
        stack.extend(children.apply(i) for i in range(children.size()))
    return True


@contextmanager
def arrow_batches(spark: SparkSession, schema: StructType) -> Iterator[None]:
    """Arrow batch settings for the write's jobs, whose widest rows are of ``schema``; the
    session's settings are restored afterwards. No byte limit: with one, Spark measures the
    batch after every row it adds. Records per batch: about 32 MiB of rows by a rough width
    estimate, between Spark's default (10,000) and 100,000, so tasks handle few batches. Arrow
    UDFs read rows, not the scan's columnar batches: those have 4,096 rows, whatever the setting."""
    settings = {
        "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(batch_rows(schema)),
        "spark.sql.execution.arrow.pythonUDF.columnarInput.enabled": "false",
    }
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def batch_rows(schema: StructType) -> int:
    """Records per Arrow batch for rows of ``schema`` (see :func:`arrow_batches`)."""
    width = sum(_width(f.dataType) for f in schema.fields)
    return max(MIN_BATCH_ROWS, min(MAX_BATCH_ROWS, BATCH_BYTES // max(1, width)))


def _width(t: DataType) -> int:
    """A rough in-memory width of a value of type ``t``, in bytes."""
    if isinstance(t, StructType):
        return sum(_width(f.dataType) for f in t.fields)
    if isinstance(t, (ArrayType, MapType)):
        return 256
    if isinstance(t, (StringType, BinaryType)):
        return 64
    if isinstance(t, DecimalType):
        return 16
    return 8


def quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def plain(t: pa.DataType) -> pa.DataType:
    """Dictionary types as their values (Spark has none)."""
    return plain(t.value_type) if pa.types.is_dictionary(t) else t


def sample_records(
    source: DataFrame, spec: KeySpec, table_schema: pa.Schema | None, writer: Writer
) -> pa.Table:
    """Keyed records for the record size estimate (only when no commit tells it)."""
    data = normalize_types(strip_meta_columns(source.limit(SAMPLE_ROWS).toArrow()))
    return key_records(
        data,
        spec.operation,
        writer.keygen,
        writer.config.precombine_field,
        table_schema,
        bool(writer.wc.get(wc.SCHEMA_ON_WRITE_ADD_COLUMNS)),
    )
