"""Snapshot and read-optimized reads: planned as one task per file slice (DESIGN §3.2)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from shoal import _native
from shoal.errors import CorruptDataError, UnsupportedError
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice
from shoal.read.filters import Filter, to_expression

# A local read takes a base file whole: batches as large as its row groups.
_WHOLE_FILE_ROWS = 1 << 20


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
    footer's key-value metadata on the schema. Decoded by the Rust core where
    :func:`native_batches` allows it, by pyarrow otherwise."""
    expr = to_expression(filters)
    with storage.open_input_file(path) as f:
        pf = pq.ParquetFile(f)
        available = pf.schema_arrow.names
        present = None if columns is None else [c for c in columns if c in available]
        wanted = read_columns(present, filters, available)
        reader = native_batches(storage, path, pf.schema_arrow, wanted, _WHOLE_FILE_ROWS)
        if reader is None:
            table = pf.read(columns=wanted)
        else:
            table = pa.Table.from_batches(list(reader), schema=reader.schema)
            # As pyarrow reads it: the requested column order, the footer's key-value metadata.
            if wanted is not None:
                table = table.select(wanted)
            table = table.replace_schema_metadata(pf.schema_arrow.metadata)
    if expr is not None:
        table = table.filter(expr)
        if present is not None:
            table = table.select(present)
    return table


def native_batches(
    storage: Storage, path: str, schema: pa.Schema, columns: list[str] | None, batch_size: int
) -> _native.BaseFileReader | None:
    """The base file's batches decoded by shoal's Rust core, or None to read them with pyarrow.

    The core decodes about twice as fast as pyarrow on one core. It is used when the file is
    local, the core has the file's codecs, and it gives every column the type pyarrow gives it
    (``schema``, pyarrow's schema of the file), so the rows are the same either way."""
    if not storage.is_local:
        return None
    try:
        reader = _native.BaseFileReader(storage.full_path(path), columns, batch_size)
    except (UnsupportedError, CorruptDataError):
        return None  # a codec the core lacks, or a footer only pyarrow reads
    # Strictly: types that pyarrow calls equal may still differ in nested names (a map's
    # entries), which a schema comparison with metadata sees.
    if any(not f.type.equals(schema.field(f.name).type, check_metadata=True) for f in reader.schema):
        return None
    return reader


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
    """Concatenates slices whose schemas evolved (new columns are null in older files)."""
    tables = [t for t in tables if t.num_columns]
    if not tables:
        return pa.table({})
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
        t = t.select(schema.names).cast(schema)
        yield from t.to_batches()
