"""Which of a few keys a large key column holds, hashing the few: building a hash set costs far
more per key than probing it, and a bucket's or a probe's keys are far fewer than a file's."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def held_by(
    probe: pa.Array | pa.ChunkedArray, stored: pa.Array | pa.ChunkedArray
) -> pa.Array | pa.ChunkedArray:
    """Per key of ``probe``, whether ``stored`` holds it (``pc.is_in(probe, stored)``), with
    only ``probe`` and the stored keys it matches hashed."""
    matched = stored.filter(pc.is_in(stored, value_set=probe))
    return pc.is_in(probe, value_set=matched)
