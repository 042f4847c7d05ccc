"""The bloom index: prune by min/max key ranges, probe footer bloom filters (Rust), then confirm
candidates by reading only the record-key column of candidate files."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice
from shoal.index.footer import KeyFooter, read_key_footer
from shoal.index.membership import held_by
from shoal.read.snapshot import read_base_file

RECORD_KEY = "_hoodie_record_key"


class BloomIndex:
    """Tags record keys with the file group that holds them, partition by partition."""

    def __init__(
        self,
        storage: Storage,
        prune_by_ranges: bool = True,
        workers: int = 4,
        use_footers: bool = True,
        cache_keys: bool = False,
    ) -> None:
        self.storage = storage
        self.prune_by_ranges = prune_by_ranges
        self.workers = workers
        self.use_footers = use_footers
        # Keep key columns read for confirmation in this process (bounded; base files never
        # change): a Spark worker tags one input partition after another against the same files.
        self.cache_keys = cache_keys

    def tag(
        self, partitions: Sequence[tuple[pa.Array, Sequence[FileSlice]]], confirm: bool = True
    ) -> list[pa.Array]:
        """For each partition's keys and file slices: per key, the file id of the slice holding
        it, or null for a new record. All (partition, file) lookups share one thread pool.

        ``confirm=False`` is for writers whose task for a file group reads that file anyway (the
        Spark writer): a key that only one file may hold by its footer (key range and bloom
        filter) is tagged with that file unread. Such a tag can be a bloom false positive, a key
        no file holds, which the file group's write then takes as an insert. Keys that several
        files may hold are confirmed by reading the key columns, as with ``confirm=True``."""
        work = _work(partitions)
        file_ids = [pa.nulls(len(keys), pa.string()) for keys, _ in partitions]
        if not confirm and self.use_footers:
            return self._tag_unconfirmed(partitions, work, file_ids)
        with _lookup_pool(self.workers) as pool:
            hits = pool.map(lambda item: (item, self._lookup(item[1], item[2])), work)
            for (i, keys, sl), found in hits:
                if found is None or len(found) == 0:
                    continue
                mask = _mask_from_indices(found, len(keys))
                file_ids[i] = pc.if_else(mask, pa.scalar(sl.file_id), file_ids[i])
        return file_ids

    def locate(self, keys: pa.Array, slices: Sequence[FileSlice]) -> list[tuple[FileSlice, np.ndarray]]:
        """Every slice among ``slices`` that holds some of ``keys``, with the indices of the keys
        it holds, confirmed by reading key columns: a global index looks each key up in every
        partition, and a key written under a partitioned index may be in several."""
        work = _work([(keys, slices)])
        with _lookup_pool(self.workers) as pool:
            hits = pool.map(lambda item: (item[2], self._lookup(item[1], item[2])), work)
            return [(sl, found.to_numpy()) for sl, found in hits if found is not None and len(found)]

    def footer_tags(
        self, partitions: Sequence[tuple[pa.Array, Sequence[FileSlice]]]
    ) -> list[tuple[pa.Array, np.ndarray]]:
        """For each partition's keys and file slices, reading no file: per key, the file id of
        the one slice whose footer (key range and bloom filter) admits it, else null; and a mask
        of the keys other files may hold as well: admitted by several footers, or by the key
        range of a file without a bloom filter (or by any file, without footers). A function of
        the keys and the footers alone, so separate passes over the same keys agree: the Spark
        writer routes rows with it, after correcting the keys a counting pass confirmed."""
        work = _work(partitions)
        tags = [pa.nulls(len(keys), pa.string()) for keys, _ in partitions]
        shared = [np.zeros(len(keys), dtype=bool) for keys, _ in partitions]
        if not self.use_footers:
            for i, _, _ in work:
                shared[i][:] = True
            return list(zip(tags, shared, strict=True))
        with _lookup_pool(self.workers) as pool:
            found, counts = self._footer_candidates(partitions, work, pool)
        _tag_single_admissions(found, counts, tags)
        for (i, _, _), idx, _ in found:
            shared[i][idx[counts[i][idx] > 1]] = True
        return list(zip(tags, shared, strict=True))

    def _footer_candidates(
        self,
        partitions: Sequence[tuple[pa.Array, Sequence[FileSlice]]],
        work: list[tuple[int, pa.Array, FileSlice]],
        pool: ThreadPoolExecutor,
    ) -> tuple[list[tuple[tuple[int, pa.Array, FileSlice], np.ndarray, int]], list[np.ndarray]]:
        """The keys each file's footer admits (indices into its partition's keys, and how much
        each counts), and per partition how many files admit each key: a file without a bloom
        filter counts twice, so its candidates always count as shared."""

        def candidates(item: tuple[int, pa.Array, FileSlice]) -> tuple[np.ndarray, int] | None:
            _, keys, sl = item
            found = self._prune_with_footer(keys, sl)
            if found is None:
                return None
            idx = found[0]
            assert sl.base_file is not None
            weight = 1 if self._footer(sl.base_file.path).bloom is not None else 2
            return (np.arange(len(keys)) if idx is None else idx.to_numpy(zero_copy_only=False)), weight

        found = [(item, c[0], c[1]) for item, c in zip(work, pool.map(candidates, work), strict=True) if c]
        counts = [np.zeros(len(keys), dtype=np.int32) for keys, _ in partitions]
        for (i, _, _), idx, weight in found:
            counts[i][idx] += weight
        return found, counts

    def _tag_unconfirmed(
        self,
        partitions: Sequence[tuple[pa.Array, Sequence[FileSlice]]],
        work: list[tuple[int, pa.Array, FileSlice]],
        file_ids: list[pa.Array],
    ) -> list[pa.Array]:
        with _lookup_pool(self.workers) as pool:
            found, counts = self._footer_candidates(partitions, work, pool)
            _tag_single_admissions(found, counts, file_ids)
            shared = []
            for (i, keys, sl), idx, _ in found:
                elsewhere_too = idx[counts[i][idx] > 1]
                if len(elsewhere_too):
                    shared.append((i, keys, sl, pa.array(elsewhere_too)))
            confirmed = pool.map(lambda item: self._lookup(item[1].take(item[3]), item[2]), shared)
            for (i, keys, sl, idx), held in zip(shared, confirmed, strict=True):
                if held is not None and len(held):
                    mask = _mask_from_indices(idx.take(held), len(keys))
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
        file_keys = self._file_keys(sl.base_file.path)
        sel = pc.indices_nonzero(held_by(probe, file_keys))
        return sel if idx is None else idx.take(sel)

    def _file_keys(self, path: str) -> pa.ChunkedArray:
        full = self.storage.full_path(path)
        cached = _key_columns.get(full) if self.cache_keys else None
        if cached is not None:
            return cached
        keys = read_base_file(self.storage, path, [RECORD_KEY]).column(RECORD_KEY)
        if self.cache_keys:
            _key_columns.put(full, keys)
        return keys

    def _footer(self, path: str) -> KeyFooter:
        return read_key_footer(self.storage, path)

    def _prune_with_footer(self, keys: pa.Array, sl: FileSlice) -> tuple[pa.Array | None, pa.Array] | None:
        """Keys that may be in the file by its min/max keys and bloom filter: (their indices into
        ``keys`` or None for all, the keys themselves); None when no key can be there."""
        assert sl.base_file is not None
        footer = self._footer(sl.base_file.path)
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


def _tag_single_admissions(
    found: list[tuple[tuple[int, pa.Array, FileSlice], np.ndarray, int]],
    counts: list[np.ndarray],
    file_ids: list[pa.Array],
) -> None:
    """Tags, in ``file_ids``, every key that exactly one file's footer admits with that file
    (``found`` and ``counts`` as ``_footer_candidates`` gives them)."""
    for (i, keys, sl), idx, _ in found:
        only_here = idx[counts[i][idx] == 1]
        if len(only_here):
            mask = _mask_from_indices(pa.array(only_here), len(keys))
            file_ids[i] = pc.if_else(mask, pa.scalar(sl.file_id), file_ids[i])


def _work(
    partitions: Sequence[tuple[pa.Array, Sequence[FileSlice]]],
) -> list[tuple[int, pa.Array, FileSlice]]:
    """(partition index, keys, slice) of every slice with a base file, for partitions with keys."""
    return [
        (i, keys, s)
        for i, (keys, slices) in enumerate(partitions)
        if len(keys)
        for s in slices
        if s.base_file is not None
    ]


@functools.lru_cache(maxsize=4)
def _shared_pool(workers: int, pid: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="shoal-bloom-index")


@contextlib.contextmanager
def _lookup_pool(workers: int) -> Iterator[ThreadPoolExecutor]:
    """A thread pool for footer and key lookups, kept for the process: starting threads for
    every write costs milliseconds when the machine is busy. The lookups never submit work to
    the pool themselves, so tags running at once cannot starve each other. Keyed by process id:
    a forked child has none of its parent's threads."""
    yield _shared_pool(workers, os.getpid())


def _mask_from_indices(indices: pa.Array, n: int) -> pa.Array:
    mask = np.zeros(n, dtype=bool)
    mask[indices.to_numpy(zero_copy_only=False)] = True
    return pa.array(mask)


class _KeyColumnCache:
    """Record-key columns of base files by full path, least recently used out first, within a
    byte budget."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._items: OrderedDict[str, pa.ChunkedArray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, path: str) -> pa.ChunkedArray | None:
        with self._lock:
            keys = self._items.get(path)
            if keys is not None:
                self._items.move_to_end(path)
            return keys

    def put(self, path: str, keys: pa.ChunkedArray) -> None:
        if keys.nbytes > self.capacity_bytes:
            return
        with self._lock:
            if path in self._items:
                return
            self._items[path] = keys
            self._bytes += keys.nbytes
            while self._bytes > self.capacity_bytes:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= evicted.nbytes


_key_columns = _KeyColumnCache(capacity_bytes=512 * 1024 * 1024)
