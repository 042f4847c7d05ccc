"""Arrow arrays in the one shape the Rust core and some compute functions take."""

from __future__ import annotations

import pyarrow as pa


def contiguous(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``values`` as one array: a chunked array's only chunk as it is (no copy), its chunks
    combined otherwise (an empty array for none)."""
    if not isinstance(values, pa.ChunkedArray):
        return values
    return values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()
