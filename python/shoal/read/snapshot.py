"""Snapshot and read-optimized reads: planned as one task per file slice (DESIGN §3.2)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from shoal.fs.damage import damaged_parquet
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice
from shoal.read.decode import WHOLE_FILE_ROWS, as_pyarrow_reads, native_batches
from shoal.read.filters import Filter, apply_filters
from shoal.read.projection import rows_without_columns


@dataclass(frozen=True)
class SliceReadSpec:
    """One file slice to read, as plain data."""

    base_uri: str
    partition_path: str
    file_id: str
    base_file_path: str | None
    log_file_paths: tuple[str, ...] = ()
    columns: tuple[str, ...] | None = None
    filters: tuple[Filter, ...] = field(default_factory=tuple)
    # Bytes of the files the read opens (the base file): Spark reads pack tasks by it.
    size: int = 0


def plan_slices(
    base_uri: str,
    slices: Sequence[FileSlice],
    columns: Sequence[str] | None,
    filters: Sequence[Filter] | None,
) -> list[SliceReadSpec]:
    return [
        SliceReadSpec(
            base_uri,
            s.partition_path,
            s.file_id,
            s.base_file.path if s.base_file else None,
            tuple(lf.path for lf in s.log_files),
            tuple(columns) if columns is not None else None,
            tuple(tuple(f) for f in filters or ()),
            s.base_file.size if s.base_file else 0,
        )
        for s in slices
    ]


def read_base_slice(spec: SliceReadSpec, storage: Storage | None = None) -> pa.Table:
    """Reads the base file of a slice with projection and filters (COW snapshot, MOR read-optimized)."""
    if spec.base_file_path is None:
        return pa.table({})
    storage = storage or Storage(spec.base_uri)
    return read_base_file(storage, spec.base_file_path, spec.columns, spec.filters)


def read_base_file(
    storage: Storage, path: str, columns: Sequence[str] | None = None, filters: Sequence[Filter] = ()
) -> pa.Table:
    """The rows of a base file that pass ``filters``, with those of ``columns`` the file has, in
    that order (None: all of its columns), exactly as pyarrow reads them: the same types and the
    footer's key-value metadata on the schema. Decoded by the Rust core where it can
    (:mod:`shoal.read.decode`), by pyarrow otherwise."""
    with damaged_parquet(path), storage.open_input_file(path) as f:
        pf = pq.ParquetFile(f)
        available = pf.schema_arrow.names
        present = None if columns is None else [c for c in columns if c in available]
        wanted = read_columns(present, filters, available)
        reader = native_batches(storage, path, pf.schema_arrow, wanted, WHOLE_FILE_ROWS)
        if reader is None:
            table = pf.read(columns=wanted)
        else:
            table = as_pyarrow_reads(reader, wanted, pf.schema_arrow)
    if filters:
        table = apply_filters(table, filters)
        if present is not None:
            table = table.select(present)
    return table


def read_columns(
    columns: list[str] | None, filters: Sequence[Filter], available: list[str]
) -> list[str] | None:
    """The columns to read from a file for ``columns`` (None: all): them, then the filters'
    other columns the file has (dropped after filtering)."""
    if columns is None:
        return None
    extra = [f[0] for f in filters if f[0] not in columns and f[0] in available]
    return columns + list(dict.fromkeys(extra))


def unify(tables: Sequence[pa.Table], columns: Sequence[str] | None) -> pa.Table:
    """Concatenates slices whose schemas evolved (new columns are null in older files). A slice
    whose file holds none of the read's columns still has its rows: nulls in every column."""
    tables = [t for t in tables if t.num_columns or t.num_rows]
    if not any(t.num_columns for t in tables):
        # pyarrow's concatenation of tables without columns drops their rows.
        return rows_without_columns(sum(t.num_rows for t in tables)) if tables else pa.table({})
    out = pa.concat_tables(tables, promote_options="permissive")
    if columns is not None:
        out = out.select([c for c in columns if c in out.column_names])
    return out


def iter_batches(tables: Iterator[pa.Table], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Casts each slice to the unified schema and yields its batches."""
    for t in tables:
        for name in schema.names:
            if name not in t.column_names:
                t = t.append_column(name, pa.nulls(t.num_rows, schema.field(name).type))
        if not schema.names:
            # No columns to read, only rows to count (a cast would lose the count).
            if t.num_rows:
                yield pa.record_batch([pa.nulls(t.num_rows)], names=["rows"]).select([])
            continue
        t = t.select(schema.names).cast(schema)
        yield from t.to_batches()
