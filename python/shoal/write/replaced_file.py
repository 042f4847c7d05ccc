"""The base file a merge or a compaction replaces, read whole into memory: its new version is
written from its rows and copies the column chunks that did not change from these bytes
(write/base_file.py, ``write_spliced_base_file``)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from shoal.fs.damage import damaged_parquet
from shoal.fs.storage import Storage
from shoal.read.decode import WHOLE_FILE_ROWS, as_pyarrow_reads, native_batches_in_memory


@dataclass(frozen=True)
class ReplacedFile:
    """A base file's bytes (``content``, and ``raw``: the same bytes as a uint8 array for the
    Rust core), its footer, and its path (for errors)."""

    content: pa.Buffer
    raw: pa.Array
    metadata: pq.FileMetaData
    path: str = ""

    @property
    def group_rows(self) -> list[int]:
        """Rows of each row group."""
        return [self.metadata.row_group(g).num_rows for g in range(self.metadata.num_row_groups)]

    def reader(self) -> pa.BufferReader:
        """A file over the bytes, for pyarrow's parquet reader."""
        return pa.BufferReader(self.content)

    def rows(self) -> pa.Table:
        """All of the file's rows, as pyarrow reads them; decoded by the Rust core where it can
        (:mod:`shoal.read.decode`)."""
        with damaged_parquet(self.path):
            schema = pq.ParquetFile(self.reader(), metadata=self.metadata).schema_arrow
            reader = native_batches_in_memory(self.raw, schema, None, WHOLE_FILE_ROWS)
            if reader is None:
                return pq.read_table(self.reader())
            return as_pyarrow_reads(reader, None, schema)


def read_replaced_file(storage: Storage, path: str) -> ReplacedFile:
    """Reads the base file at ``path`` into memory (one read: a merge decodes nearly all of it)."""
    with storage.open_input_file(path) as f:
        content = f.read_buffer()
    raw = pa.Array.from_buffers(pa.uint8(), len(content), [None, content])
    with damaged_parquet(path):
        metadata = pq.read_metadata(pa.BufferReader(content))
    return ReplacedFile(content, raw, metadata, path)


def plain_columns(metadata: pq.FileMetaData) -> list[str]:
    """Top-level columns without a dictionary page in any row group: the writer judged (or was
    told) that a dictionary does not pay for them, and a merge keeps most of their values."""
    if metadata.num_row_groups == 0:
        return []
    names = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    return [
        name
        for i, name in enumerate(names)
        if not any(
            metadata.row_group(g).column(i).has_dictionary_page for g in range(metadata.num_row_groups)
        )
    ]
