"""Which of a few keys a large key column holds, hashing the few: building a hash set costs far
more per key than probing it, and a bucket's or a probe's keys are far fewer than a file's."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.arrays import contiguous


def held_by(
    probe: pa.Array | pa.ChunkedArray, stored: pa.Array | pa.ChunkedArray
) -> pa.Array | pa.ChunkedArray:
    """Per key of ``probe``, whether ``stored`` holds it (``pc.is_in(probe, stored)``), with
    only ``probe`` hashed into a set, and each stored key hashed once to look it up. String and
    binary keys (every record key) go to the Rust core; other types to Arrow's ``is_in``."""
    if _is_text(probe.type) and _is_text(stored.type):
        return _native.keys_held_by(contiguous(probe), contiguous(stored))
    matched = stored.filter(pc.is_in(stored, value_set=probe))
    return pc.is_in(probe, value_set=matched)


def _is_text(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )
