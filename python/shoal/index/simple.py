"""The simple index: joins incoming keys with the record keys of the latest base files of their
partitions, reading the key column of every one (no footer pruning). Costlier than the bloom
index on large tables, but it needs nothing from the footers."""

from __future__ import annotations

from shoal.fs.storage import Storage
from shoal.index.bloom import BloomIndex


class SimpleIndex(BloomIndex):
    """Hudi's ``SIMPLE`` index type."""

    def __init__(self, storage: Storage, workers: int = 4, cache_keys: bool = False) -> None:
        super().__init__(
            storage, prune_by_ranges=False, workers=workers, use_footers=False, cache_keys=cache_keys
        )
