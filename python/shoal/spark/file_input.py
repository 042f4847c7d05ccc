"""An input DataFrame that is a plain scan of parquet files, read by the route tasks themselves.

For the route pass's ``mapInArrow``, Spark turns every input record into a row and the row into
Arrow: for a scan of 1M records of parquet here, 0.55-0.7 s against 0.9 s for Spark's whole
parquet write of them, and 0.3 s for pyarrow's read in the tasks (benches/spark_upsert.py).
When the input is exactly such a scan (``spark.read.parquet(...)``, or a selection of its
columns), the route tasks read the files with pyarrow instead, and Spark hands them only task
numbers. A global index write's key pass reads the files so too (its key columns only), or
neither pass does: both number the records alike.

The files are the ones Spark listed for the DataFrame (``inputFiles``), split into byte ranges
and packed onto tasks as Spark's file scan does (``maxPartitionBytes``, ``openCostInBytes``); a
range reads the row groups whose middle byte falls in it, as Spark's parquet reader does. The
records come in path order, then file order: that is the input order deduplication breaks ties
with (Spark's own scan orders files by size).

A scan qualifies only when pyarrow reads its records as Spark would:

- no filter, no renamed or computed column, no file two of its paths name (Spark reads it
  twice);
- partition columns from directory names (``day=2024-01-01/``) only of string, integer, date or
  boolean types: their values are the ones Spark parsed, taken from its listing, as constant
  columns of each file's records;
- no read option other than listing ones (``pathGlobFilter``, ``recursiveFileLookup``, ...) and
  ``mergeSchema``, and no session setting that changes what the reader returns (ignoring corrupt
  or missing files, legacy date rebasing, field ids);
- each file has every column under its exact name, of the type Spark reads (a lossless
  timestamp widening, a time zone, large or dictionary encodings aside), and was not written
  with Spark 2's legacy calendar or INT96 timestamps.

Else the write falls back to ``mapInArrow``: before any task when the plan or the first file's
schema disqualifies the scan, or when a task meets a file that does (its pass is discarded).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from py4j.protocol import Py4JError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from shoal.spark.frames import MAX_BATCH_ROWS

log = logging.getLogger(__name__)

# Read options of a parquet scan that only choose the files, or (mergeSchema) the schema each
# file is checked against: any other option may change the records, so the scan goes through
# Spark.
_LISTING_OPTIONS = frozenset(
    {
        "path",
        "paths",
        "basepath",
        "mergeschema",
        "pathglobfilter",
        "recursivefilelookup",
        "modifiedbefore",
        "modifiedafter",
    }
)

# Session settings under which Spark's parquet reader returns other records than the files
# hold, with the value that does.
_CHANGING_SETTINGS = {
    "spark.sql.files.ignoreCorruptFiles": "true",
    "spark.sql.files.ignoreMissingFiles": "true",
    "spark.sql.parquet.datetimeRebaseModeInRead": "LEGACY",
    "spark.sql.parquet.int96RebaseModeInRead": "LEGACY",
    "spark.sql.parquet.fieldId.read.enabled": "true",
}

# Footer keys of files written with Spark 2's hybrid calendar (their dates need rebasing).
_LEGACY_KEYS = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")

_TIME_UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}


class InputMismatch(Exception):
    """A file of the input that pyarrow would not read as Spark does."""


@dataclass(frozen=True)
class FileRange:
    """Bytes ``[start, start + length)`` of one input file (a path of the input's file system)."""

    path: str
    start: int
    length: int
    size: int


@dataclass(frozen=True)
class FileInput:
    """The input's files as route tasks read them: each task's ranges, and the Arrow schema of
    the records Spark's batches would have."""

    filesystem: pafs.FileSystem
    schema: pa.Schema
    tasks: tuple[tuple[FileRange, ...], ...]
    files: int
    # Columns of the input whose values come from directory names (``day=2024-01-01``), and
    # each file's values of them (by path).
    partition_columns: tuple[str, ...] = ()
    partition_values: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, df: DataFrame) -> FileInput | None:
        """The files of ``df`` when it is a plain parquet scan the route tasks can read (see the
        module's text), else None."""
        found = _file_input(df)
        if isinstance(found, FileInput):
            return found
        log.info("the write reads its input through Spark: %s", found)
        return None

    def batches(self, task: int, columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
        """Task ``task``'s records, as batches of :attr:`schema` (of its ``columns`` only, when
        given: each file is checked for all of them all the same, so that every pass over the
        input qualifies or none does).

        Raises:
            InputMismatch: a file pyarrow would not read as Spark does.
        """
        schema = self.schema if columns is None else pa.schema([self.schema.field(c) for c in columns])
        data = _data_schema(self.schema, self.partition_columns)
        for file_range in self.tasks[task]:
            try:
                yield from self._range_batches(file_range, schema, data)
            except (pa.ArrowException, OSError) as exc:
                # Spark's reader reports (or, if told to, skips) what pyarrow cannot read.
                raise InputMismatch(f"pyarrow cannot read {file_range.path}: {exc}") from exc

    def _range_batches(
        self, file_range: FileRange, schema: pa.Schema, data: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        """The records of ``file_range`` as batches of ``schema``; the file is checked against
        ``data``, every column of the input that it stores."""
        with self.filesystem.open_input_file(file_range.path) as source:
            parquet = pq.ParquetFile(source)
            reason = _file_mismatch(file_range.path, parquet, data)
            if reason is not None:
                raise InputMismatch(reason)
            row_groups = _row_groups_in(parquet.metadata, file_range)
            if not row_groups:
                return
            stored = _data_schema(schema, self.partition_columns)
            given = self.partition_values[file_range.path] if self.partition_columns else ()
            values = dict(zip(self.partition_columns, given, strict=True))
            if not stored.names:
                # Only directory values wanted: the row groups' counts say how many.
                for group in row_groups:
                    rows = parquet.metadata.row_group(group).num_rows
                    yield pa.RecordBatch.from_arrays(
                        [_constant(values[f.name], f.type, rows) for f in schema], schema=schema
                    )
                return
            for batch in parquet.iter_batches(
                MAX_BATCH_ROWS, row_groups=row_groups, columns=stored.names, use_threads=False
            ):
                batch = batch.select(stored.names).cast(stored)
                if values:
                    batch = pa.RecordBatch.from_arrays(
                        [
                            _constant(values[f.name], f.type, batch.num_rows)
                            if f.name in values
                            else batch.column(f.name)
                            for f in schema
                        ],
                        schema=schema,
                    )
                yield batch


def _file_input(df: DataFrame) -> FileInput | str:
    """:meth:`FileInput.of`, or why ``df`` does not qualify."""
    try:
        scan = _scanned(df)
    except (AttributeError, Py4JError) as exc:
        # A plan of another shape than this module knows (another Spark version, Spark
        # Connect): Spark reads it.
        return f"its plan cannot be inspected: {exc}"
    if isinstance(scan, str):
        return scan
    uris = sorted(df.inputFiles())
    located = _located(uris)
    if isinstance(located, str):
        return located
    schema = _spark_schema(df)
    if isinstance(schema, str):
        return schema
    if scan.columns and any(uri not in scan.values for uri in uris):
        return "Spark gives no partition values for some of its files"
    filesystem, paths, sizes = located
    reason = _schema_mismatch(filesystem, paths[0], _data_schema(schema, scan.columns))
    if reason is not None:
        return reason
    values = {p: scan.values[u] for u, p in zip(uris, paths, strict=True)} if scan.columns else {}
    tasks = _packed(sizes, df.sparkSession)
    return FileInput(filesystem, schema, tasks, len(sizes), scan.columns, values)


def _data_schema(schema: pa.Schema, partition_columns: Sequence[str]) -> pa.Schema:
    """The fields of ``schema`` the files store (not those from directory names)."""
    return pa.schema([f for f in schema if f.name not in partition_columns])


def _constant(value: Any, type_: pa.DataType, rows: int) -> pa.Array:
    if value is None:
        return pa.nulls(rows, type_)
    return pa.array([value] * rows, type_)


def file_task(
    files: FileInput,
    columns: Sequence[str] | None,
    task: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    mismatch_row: Callable[[int, str], pa.RecordBatch],
    ids: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """A pass over the input's files as ``mapInArrow`` over task numbers (``spark.range``):
    ``task`` over the records (``columns`` of them) each task number's ranges hold. A file
    pyarrow would not read as Spark does gives the pass's ``mismatch_row`` for the task and the
    reason instead; the driver then runs the pass through Spark."""
    for batch in ids:
        for index in batch.column(0).to_pylist():
            try:
                yield from task(files.batches(index, columns))
            except InputMismatch as exc:
                yield mismatch_row(index, str(exc))


@dataclass(frozen=True)
class _Scan:
    """A plain parquet scan: its partition columns from directory names, and their values per
    file (by URI, as ``inputFiles`` gives them)."""

    columns: tuple[str, ...]
    values: Mapping[str, tuple[Any, ...]]


# Partition column types whose values Spark gives as plain Python values through py4j.
_PARTITION_TYPES = frozenset({"string", "integer", "long", "short", "byte", "date", "boolean"})


def _scanned(df: DataFrame) -> _Scan | str:
    """The scan of ``df`` when its plan is a plain parquet scan pyarrow reads as Spark does,
    else why not."""
    # A new plan over ``df``'s: ``df``'s own was made before the data it reads was cached, if
    # it was, and the route pass's mapInArrow would read the cache.
    plan = df.select("*")._jdf.queryExecution().optimizedPlan()
    if _name(plan) == "Project":
        projected = plan.projectList()
        if any(_name(projected.apply(i)) != "AttributeReference" for i in range(projected.size())):
            return "it computes or renames columns"
        plan = plan.child()
    if _name(plan) != "LogicalRelation" or _name(plan.relation()) != "HadoopFsRelation":
        return f"its plan is not a file scan ({_name(plan)})"
    relation = plan.relation()
    if _name(relation.fileFormat()) != "ParquetFileFormat":
        return f"its files are not parquet ({_name(relation.fileFormat())})"
    # Spark reads a file its paths name twice (one path given twice, a directory and a file in
    # it) twice, where ``inputFiles`` names it once.
    listed = relation.location().allFiles()
    if listed.distinct().size() != listed.size():
        return "its paths name a file more than once"
    keys = relation.options().keySet().toSeq()
    options = sorted(str(keys.apply(i)).lower() for i in range(keys.size()))
    changing = [o for o in options if o not in _LISTING_OPTIONS]
    if changing:
        return f"it has read options {changing}"
    conf = df.sparkSession.conf
    for setting, value in _CHANGING_SETTINGS.items():
        if str(conf.get(setting)).lower() == value.lower():
            return f"{setting} is {value}"
    return _partition_values(df, relation)


def _partition_values(df: DataFrame, relation: Any) -> _Scan | str:
    """The scan's partition columns and each file's values of them, as Spark parsed them from
    the directory names."""
    fields = relation.partitionSchema().fields()
    if len(fields) == 0:
        return _Scan((), {})
    types = [str(f.dataType().typeName()) for f in fields]
    odd = [f"{f.name()} ({t})" for f, t in zip(fields, types, strict=True) if t not in _PARTITION_TYPES]
    if odd:
        return f"it has partition columns of types read as other values: {odd}"
    jvm = df.sparkSession._jvm
    assert jvm is not None
    # Scala's empty list: no partition or data filters.
    nil = getattr(getattr(jvm.scala.collection.immutable, "Nil$"), "MODULE$")
    directories = relation.location().listFiles(nil, nil)
    values: dict[str, tuple[Any, ...]] = {}
    for i in range(directories.size()):
        directory = directories.apply(i)
        row = directory.values()
        parsed = tuple(
            None if row.isNullAt(j) else _plain(row.get(j, fields[j].dataType()), types[j])
            for j in range(len(fields))
        )
        files = directory.files()
        for k in range(files.size()):
            values[str(files.apply(k).getPath().toUri().toString())] = parsed
    return _Scan(tuple(str(f.name()) for f in fields), values)


def _plain(value: Any, type_name: str) -> Any:
    # Spark's strings come as its UTF8String; dates as days, as Arrow's date32 takes them.
    return str(value) if type_name == "string" else value


def _name(node: object) -> str:
    return str(node.getClass().getSimpleName())  # type: ignore[attr-defined]


def _located(uris: list[str]) -> tuple[pafs.FileSystem, list[str], dict[str, int]] | str:
    """The file system of the files at ``uris``, their paths on it, and each file's size (in
    the order of ``uris``), or why pyarrow cannot reach them."""
    if not uris:
        return "it has no files"
    # Spark gives URIs, percent-encoded; pyarrow's file systems take decoded paths.
    first = urlsplit(uris[0])
    try:
        if first.scheme == "file":
            filesystem, root = pafs.LocalFileSystem(), ""
        else:
            filesystem, path = pafs.FileSystem.from_uri(uris[0])
            # What pyarrow puts before the URI's path (an S3 or GCS bucket).
            decoded = unquote(first.path)
            if not path.endswith(decoded.rstrip("/")):
                return f"pyarrow names {uris[0]} {path}"
            root = path[: len(path) - len(decoded.rstrip("/"))]
    except (pa.ArrowInvalid, ValueError, OSError) as exc:
        return f"pyarrow cannot open {uris[0]}: {exc}"
    paths = []
    for uri in uris:
        parts = urlsplit(uri)
        if (parts.scheme, parts.netloc) != (first.scheme, first.netloc):
            return f"its files are on several file systems ({uri})"
        paths.append(root + unquote(parts.path))
    infos = filesystem.get_file_info(paths)
    missing = [i.path for i in infos if i.type != pafs.FileType.File]
    if missing:
        return f"a file is missing: {missing[0]}"
    return filesystem, paths, {i.path: int(i.size or 0) for i in infos}


def _spark_schema(df: DataFrame) -> pa.Schema | str:
    """The Arrow schema of the batches Spark's ``mapInArrow`` gives for ``df``, or why there is
    none."""
    conf = df.sparkSession.conf
    large = str(conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")).lower() == "true"
    try:
        return to_arrow_schema(
            df.schema, timezone=conf.get("spark.sql.session.timeZone", None), prefers_large_types=large
        )
    except (TypeError, pa.ArrowException) as exc:
        return f"its schema has no Arrow form here: {exc}"


def _schema_mismatch(filesystem: pafs.FileSystem, path: str, schema: pa.Schema) -> str | None:
    try:
        with filesystem.open_input_file(path) as source:
            return _file_mismatch(path, pq.ParquetFile(source), schema)
    except (pa.ArrowException, OSError) as exc:
        return f"pyarrow cannot read {path}: {exc}"


def _file_mismatch(path: str, parquet: pq.ParquetFile, schema: pa.Schema) -> str | None:
    """Why pyarrow would not read the file ``path`` as Spark reads it into ``schema``, or None."""
    metadata = parquet.metadata.metadata or {}
    if any(key in metadata for key in _LEGACY_KEYS):
        return f"{path} was written with Spark 2's legacy calendar"
    written_by = metadata.get(b"org.apache.spark.version", b"3")
    if written_by[:1] in (b"1", b"2"):
        return f"{path} was written by Spark {written_by.decode(errors='replace')}"
    stored = parquet.schema_arrow
    lower = [n.lower() for n in stored.names]
    for wanted in schema:
        if stored.get_field_index(wanted.name) < 0:
            return f"{path} has no column {wanted.name!r}"
        if lower.count(wanted.name.lower()) > 1:
            return f"{path} has several columns named {wanted.name!r} but for case"
        found = stored.field(wanted.name).type
        if not _reads_as(found, wanted.type):
            return f"column {wanted.name!r} of {path} is {found}, Spark reads {wanted.type}"
    return None


def _reads_as(stored: pa.DataType, spark: pa.DataType) -> bool:
    """Whether a column pyarrow reads as ``stored`` casts losslessly to ``spark``, the type
    Spark's batches have, with the values Spark reads."""
    if pa.types.is_dictionary(stored):
        return _reads_as(stored.value_type, spark)
    if stored == spark:
        return True
    if pa.types.is_timestamp(stored) and pa.types.is_timestamp(spark):
        # An instant stays an instant, a local time a local time; units only widen.
        same_kind = (stored.tz is None) == (spark.tz is None)
        return same_kind and _TIME_UNITS[stored.unit] <= _TIME_UNITS[spark.unit]
    for is_kind in (_is_string, _is_binary):
        if is_kind(stored) and is_kind(spark):
            return True
    if _is_list(stored) and _is_list(spark):
        return _reads_as(stored.value_type, spark.value_type)
    if pa.types.is_map(stored) and pa.types.is_map(spark):
        return _reads_as(stored.key_type, spark.key_type) and _reads_as(stored.item_type, spark.item_type)
    if pa.types.is_struct(stored) and pa.types.is_struct(spark):
        return [f.name for f in stored] == [f.name for f in spark] and all(
            _reads_as(a.type, b.type) for a, b in zip(stored, spark, strict=True)
        )
    return False


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def _packed(sizes: dict[str, int], spark: SparkSession) -> tuple[tuple[FileRange, ...], ...]:
    """The files' ranges on tasks, as Spark's file scan splits and packs them (its
    ``FilePartition.getFilePartitions``), but in path order."""
    conf = spark._jsparkSession.sessionState().conf()
    max_bytes, open_cost = int(conf.filesMaxPartitionBytes()), int(conf.filesOpenCostInBytes())
    least = conf.filesMinPartitionNum()
    min_tasks = int(least.get()) if least.isDefined() else spark.sparkContext.defaultParallelism
    total = sum(size + open_cost for size in sizes.values())
    split = min(max_bytes, max(open_cost, math.ceil(total / max(1, min_tasks))))
    ranges = [
        FileRange(path, start, min(split, size - start), size)
        for path, size in sizes.items()
        for start in range(0, max(size, 1), split)
    ]
    tasks: list[tuple[FileRange, ...]] = []
    current: list[FileRange] = []
    filled = 0
    for file_range in ranges:
        if current and filled + file_range.length > split:
            tasks.append(tuple(current))
            current, filled = [], 0
        current.append(file_range)
        filled += file_range.length + open_cost
    if current:
        tasks.append(tuple(current))
    return tuple(tasks)


def _row_groups_in(metadata: pq.FileMetaData, file_range: FileRange) -> list[int]:
    """The row groups whose middle byte lies in ``file_range`` (parquet's rule for splits)."""
    if file_range.start == 0 and file_range.length >= file_range.size:
        return list(range(metadata.num_row_groups))
    end = file_range.start + file_range.length
    chosen = []
    for i in range(metadata.num_row_groups):
        group = metadata.row_group(i)
        columns = [group.column(c) for c in range(group.num_columns)]
        if not columns:
            continue
        start = min(_first_page(c) for c in columns)
        middle = start + sum(c.total_compressed_size for c in columns) // 2
        if file_range.start <= middle < end:
            chosen.append(i)
    return chosen


def _first_page(column: pq.ColumnChunkMetaData) -> int:
    if column.has_dictionary_page and column.dictionary_page_offset:
        return int(column.dictionary_page_offset)
    return int(column.data_page_offset)
