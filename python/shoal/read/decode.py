"""Base files decoded by shoal's Rust core into exactly what pyarrow decodes, or not at all.

The core decodes about twice as fast as pyarrow on one core. It is used for a file when the core
has the file's codecs and gives every column the type pyarrow gives it, so the rows are the same
either way; the callers read the file with pyarrow when these return None.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from shoal import _native
from shoal.errors import CorruptDataError, UnsupportedError
from shoal.fs.storage import Storage

# A whole-file read takes batches as large as its row groups.
WHOLE_FILE_ROWS = 1 << 20


def native_batches(
    storage: Storage, path: str, schema: pa.Schema, columns: list[str] | None, batch_size: int
) -> _native.BaseFileReader | None:
    """The batches of the base file at ``path`` (local storage only), or None. ``schema``:
    pyarrow's schema of the file."""
    if not storage.is_local:
        return None
    return _checked(
        columns, lambda: _native.BaseFileReader(storage.full_path(path), columns, batch_size), schema
    )


def native_batches_in_memory(
    raw: pa.Array, schema: pa.Schema, columns: list[str] | None, batch_size: int
) -> _native.BaseFileReader | None:
    """The batches of a base file whose bytes ``raw`` (a uint8 array) holds, or None."""
    return _checked(columns, lambda: _native.BaseFileReader.from_bytes(raw, columns, batch_size), schema)


def as_pyarrow_reads(
    reader: _native.BaseFileReader, columns: list[str] | None, schema: pa.Schema
) -> pa.Table:
    """All of ``reader``'s batches as the table pyarrow reads: ``columns`` in that order (the
    core decodes in file order), and ``schema``'s key-value metadata (the file footer's)."""
    table = pa.Table.from_batches(list(reader), schema=reader.schema)
    if columns is not None:
        table = table.select(columns)
    return table.replace_schema_metadata(schema.metadata)


def _checked(
    columns: list[str] | None, open_reader: Callable[[], _native.BaseFileReader], schema: pa.Schema
) -> _native.BaseFileReader | None:
    if columns == []:
        return None  # nothing to decode; pyarrow's table of no columns keeps the row count
    try:
        reader = open_reader()
    except (UnsupportedError, CorruptDataError):
        return None  # a codec the core lacks, or a footer only pyarrow reads
    # Strictly: types that pyarrow calls equal may still differ in nested names (a map's
    # entries), which a schema comparison with metadata sees.
    if any(not f.type.equals(schema.field(f.name).type, check_metadata=True) for f in reader.schema):
        return None
    return reader
