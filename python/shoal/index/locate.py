"""Where a global index finds its keys: every latest file slice of the table looked up, the
lookups run as an executor's tasks.

Under a global index each incoming key is looked up in every partition, so on a large table
the lookups (footer probes, then reading the key columns of the candidate files) are most of a
write's tagging. They run as the executor's tasks, as Hudi's global bloom index runs them as
Spark tasks: the keys are shared with the tasks once (a Spark broadcast), and each task looks
them up in a group of files. On a Spark executor the driver then reads no file; on the local
executor the groups run on threads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from shoal.executor.base import Executor, Shared, balanced_groups
from shoal.fs.view import FileSlice
from shoal.index.bloom import BloomIndex

# A slice that holds some of the keys, with the indices of those keys.
Located = list[tuple[FileSlice, np.ndarray]]
# Items per unit of the executor's parallelism, so one slow file does not hold up the rest.
ITEMS_PER_WORKER = 2


def locate_keys(
    index: BloomIndex, executor: Executor, keys: pa.Array, slices: Sequence[FileSlice]
) -> Located:
    """Every slice among ``slices`` that holds some of ``keys``, with the indices of the keys it
    holds (as ``BloomIndex.locate``), in the order of ``slices``; the lookups run as
    ``executor``'s tasks, each over a group of slices of about equal bytes."""
    with_base = [(i, sl) for i, sl in enumerate(slices) if sl.base_file is not None]
    if not len(keys) or not with_base:
        return []
    groups = balanced_groups(with_base, _base_size, executor.parallelism * ITEMS_PER_WORKER)
    with executor.share(keys) as shared:
        found = executor.map(_locate_group, [(index, shared, group) for group in groups])
    hits = sorted((hit for group in found for hit in group), key=lambda hit: hit[0])
    return [(slices[position], held) for position, held in hits]


def _locate_group(
    index: BloomIndex, keys: Shared[pa.Array], group: list[tuple[int, FileSlice]]
) -> list[tuple[int, np.ndarray]]:
    """One task: the positions (among all slices) of the slices of ``group`` that hold some of
    the shared keys, with the indices of the keys each holds."""
    position = {id(sl): i for i, sl in group}
    return [(position[id(sl)], held) for sl, held in index.locate(keys.value, [sl for _, sl in group])]


def _base_size(item: tuple[int, FileSlice]) -> int:
    base = item[1].base_file
    return base.size if base is not None else 0
