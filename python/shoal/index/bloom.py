"""The bloom index: prune by min/max key ranges, probe footer bloom filters (Rust), then confirm
candidates by reading only the record-key column of candidate files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice
from shoal.index.footer import KeyFooter, read_key_footer

RECORD_KEY = "_hoodie_record_key"


class BloomIndex:
    """Tags record keys with the file group that holds them, partition by partition."""

    def __init__(
        self,
        storage: Storage,
        prune_by_ranges: bool = True,
        workers: int = 4,
        use_footers: bool = True,
        footers: Mapping[str, KeyFooter] | None = None,
    ) -> None:
        self.storage = storage
        self.prune_by_ranges = prune_by_ranges
        self.workers = workers
        self.use_footers = use_footers
        # Footers known in advance by base file path (a Spark driver broadcasts them to its
        # tasks); any other file's footer is read from the file.
        self.footers = footers or {}

    def tag(self, partitions: Sequence[tuple[pa.Array, Sequence[FileSlice]]]) -> list[pa.Array]:
        """For each partition's keys and file slices: per key, the file id of the slice holding
        it, or null for a new record. All (partition, file) lookups share one thread pool."""
        work = [
            (i, keys, s)
            for i, (keys, slices) in enumerate(partitions)
            if len(keys)
            for s in slices
            if s.base_file is not None
        ]
        file_ids = [pa.nulls(len(keys), pa.string()) for keys, _ in partitions]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            hits = pool.map(lambda item: (item, self._lookup(item[1], item[2])), work)
            for (i, keys, sl), found in hits:
                if found is None or len(found) == 0:
                    continue
                mask = _mask_from_indices(found, len(keys))
                file_ids[i] = pc.if_else(mask, pa.scalar(sl.file_id), file_ids[i])
        return file_ids

    def _lookup(self, keys: pa.Array, sl: FileSlice) -> pa.Array | None:
        assert sl.base_file is not None
        idx: pa.Array | None = None
        probe = keys
        if self.use_footers:
            found = self._prune_with_footer(keys, sl)
            if found is None:
                return None
            idx, probe = found
        with self.storage.open_input_file(sl.base_file.path) as f:
            file_keys = pq.read_table(f, columns=[RECORD_KEY]).column(RECORD_KEY)
        # Hash the probed keys, far fewer than the file's, then only the file keys that matched.
        held = file_keys.filter(pc.is_in(file_keys, value_set=probe))
        sel = pc.indices_nonzero(pc.is_in(probe, value_set=held))
        return sel if idx is None else idx.take(sel)

    def _prune_with_footer(self, keys: pa.Array, sl: FileSlice) -> tuple[pa.Array | None, pa.Array] | None:
        """Keys that may be in the file by its min/max keys and bloom filter: (their indices into
        ``keys`` or None for all, the keys themselves); None when no key can be there."""
        assert sl.base_file is not None
        footer = self.footers.get(sl.base_file.path) or read_key_footer(self.storage, sl.base_file.path)
        idx: pa.Array | None = None
        probe = keys
        if self.prune_by_ranges and footer.min_key is not None and footer.max_key is not None:
            in_range = pc.and_(pc.greater_equal(keys, footer.min_key), pc.less_equal(keys, footer.max_key))
            idx = pc.indices_nonzero(in_range)
            if len(idx) == 0:
                return None
            probe = keys.take(idx)
        if footer.bloom is not None:
            maybe = footer.bloom.might_contain_batch(probe)
            sel = pc.indices_nonzero(maybe)
            if len(sel) == 0:
                return None
            idx = sel if idx is None else idx.take(sel)
            probe = probe.take(sel)
        return idx, probe


def _mask_from_indices(indices: pa.Array, n: int) -> pa.Array:
    mask = np.zeros(n, dtype=bool)
    mask[indices.to_numpy(zero_copy_only=False)] = True
    return pa.array(mask)
