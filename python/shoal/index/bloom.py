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
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.arrays import contiguous
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice
from shoal.index.footer import KeyFooter, order_sensitive, read_key_footer
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
        """For each partition's keys and file slices: per key, the file id of a slice holding
        it (the first in slice order), or null for a new record. A key several file groups
        hold (inserts that allow duplicates and bulk inserts write keys the table holds) is
        tagged with one of them only: writers that update records use :meth:`tag_all`, which
        gives the others too. ``confirm`` as in :meth:`tag_all`."""
        return [tagged.file_ids for tagged in self.tag_all(partitions, confirm)]

    def tag_all(
        self, partitions: Sequence[tuple[pa.Array, Sequence[FileSlice]]], confirm: bool = True
    ) -> list[Tagged]:
        """For each partition's keys and file slices: every file group that holds each key
        (:class:`Tagged`), as Hudi's bloom and simple indexes join the incoming keys with every
        (key, file) pair they find: a record whose key several file groups hold updates (or
        deletes) each. All (partition, file) lookups share one thread pool.

        ``confirm=False`` is for writers whose task for a file group reads that file anyway (the
        Spark writer): a key that only one file may hold by its footer (key range and bloom
        filter) is tagged with that file unread. Such a tag can be a bloom false positive, a key
        no file holds, which the file group's write then takes as an insert. Keys that several
        files may hold are confirmed by reading the key columns, as with ``confirm=True``."""
        work = _work(partitions)
        file_ids = _FileIds(partitions)
        holders = _Holders(len(partitions))
        if not confirm and self.use_footers:
            self._tag_unconfirmed(partitions, work, file_ids, holders)
            return holders.tagged(file_ids.columns())
        with _lookup_pool(self.workers) as pool:
            hits = pool.map(lambda item: (item, self._lookup(item[1], item[2])), work)
            for (i, keys, sl), found in hits:
                if found is None or len(found) == 0:
                    continue
                first = holders.first_holder(i, len(keys), found.to_numpy(zero_copy_only=False), sl.file_id)
                file_ids.tag(i, first, sl.file_id)
        return holders.tagged(file_ids.columns())

    def locate(self, keys: pa.Array, slices: Sequence[FileSlice]) -> list[tuple[FileSlice, np.ndarray]]:
        """Every slice among ``slices`` that holds some of ``keys``, with the indices of the keys
        it holds, confirmed by reading key columns: a global index looks each key up in every
        partition, and a key written under a partitioned index may be in several."""
        work = _work([(keys, slices)])
        with _lookup_pool(self.workers) as pool:
            hits = pool.map(lambda item: (item[2], self._lookup(item[1], item[2])), work)
            return [(sl, found.to_numpy()) for sl, found in hits if found is not None and len(found)]

    def admits(self, keys: pa.Array, slices: Sequence[FileSlice]) -> list[bool]:
        """Per slice, whether its base file may hold one of ``keys`` by its footer (key range and
        bloom filter), reading no data; a slice without a base file is admitted."""
        admitted = [s.base_file is None for s in slices]
        work = [(i, s) for i, s in enumerate(slices) if s.base_file is not None and len(keys)]
        with _lookup_pool(self.workers) as pool:
            found = pool.map(lambda item: (item[0], self._prune_with_footer(keys, item[1])), work)
            for i, candidates in found:
                admitted[i] = candidates is not None
        return admitted

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
        tags = _FileIds(partitions)
        shared = [np.zeros(len(keys), dtype=bool) for keys, _ in partitions]
        if not self.use_footers:
            for i, _, _ in work:
                shared[i][:] = True
            return list(zip(tags.columns(), shared, strict=True))
        with _lookup_pool(self.workers) as pool:
            found, counts = self._footer_candidates(partitions, work, pool)
        _tag_single_admissions(found, counts, tags)
        for (i, _, _), idx, _ in found:
            shared[i][idx[counts[i][idx] > 1]] = True
        return list(zip(tags.columns(), shared, strict=True))

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
        file_ids: _FileIds,
        holders: _Holders,
    ) -> None:
        with _lookup_pool(self.workers) as pool:
            found, counts = self._footer_candidates(partitions, work, pool)
            # A key only one footer admits is in no other file (bloom filters have no false
            # negatives): only the confirmed keys can have several holders.
            _tag_single_admissions(found, counts, file_ids)
            shared = []
            for (i, keys, sl), idx, _ in found:
                elsewhere_too = idx[counts[i][idx] > 1]
                if len(elsewhere_too):
                    shared.append((i, keys, sl, elsewhere_too))
            confirmed = pool.map(lambda item: self._lookup(item[1].take(pa.array(item[3])), item[2]), shared)
            for (i, keys, sl, idx), held in zip(shared, confirmed, strict=True):
                if held is not None and len(held):
                    at = idx[held.to_numpy(zero_copy_only=False)]
                    file_ids.tag(i, holders.first_holder(i, len(keys), at, sl.file_id), sl.file_id)

    def _lookup(self, keys: pa.Array, sl: FileSlice) -> pa.Array | None:
        assert sl.base_file is not None
        idx: pa.Array | None = None
        probe = keys
        if self.use_footers:
            found = self._prune_with_footer(keys, sl)
            if found is None:
                return None
            idx = found[0]
            probe = keys if idx is None else keys.take(idx)
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

    def _prune_with_footer(self, keys: pa.Array, sl: FileSlice) -> tuple[pa.Array | None] | None:
        """Keys that may be in the file by its min/max keys and bloom filter: (their indices into
        ``keys``, or None for all); None when no key can be there. Keys are copied only for the
        bloom filter, and only when the range leaves some out: footer tags need the indices
        alone, and with random keys every key is within every file's range."""
        assert sl.base_file is not None
        if len(keys) == 0:
            return None
        footer = self._footer(sl.base_file.path)
        idx: pa.Array | None = None
        probe = keys
        if self.prune_by_ranges and footer.min_key is not None and footer.max_key is not None:
            in_range = _in_key_range(keys, footer.min_key, footer.max_key)
            if _true_count(in_range) < len(keys):
                idx = pc.indices_nonzero(in_range)
                if len(idx) == 0:
                    return None
                probe = keys.take(idx)
        if footer.bloom is not None:
            maybe = footer.bloom.might_contain_batch(probe)
            if _true_count(maybe) < len(probe):
                sel = pc.indices_nonzero(maybe)
                if len(sel) == 0:
                    return None
                idx = sel if idx is None else idx.take(sel)
        return (idx,)


def _true_count(mask: pa.Array | pa.ChunkedArray) -> int:
    """How many values of a boolean array are true (nulls are not)."""
    chunks = mask.chunks if isinstance(mask, pa.ChunkedArray) else [mask]
    return sum(chunk.true_count for chunk in chunks)


def _in_key_range(keys: pa.Array, lo: str, hi: str) -> pa.Array:
    """Per key, whether it may lie within a footer's ``[lo, hi]``: in UTF-16 code-unit order,
    which Hudi writes the bounds in and prunes by, or in byte (code point) order, which shoal
    wrote them in before 2026-11-24. Pruning only spares reads, so a key either order admits is
    kept. The orders differ only where a key and a bound first differ at a character of
    U+E000..U+FFFF against one of U+10000 and up; bounds without the former (UUIDs, any ASCII
    key) take Arrow's byte comparison alone."""
    by_bytes = pc.and_(pc.greater_equal(keys, lo), pc.less_equal(keys, hi))
    if not order_sensitive(lo, hi):
        return by_bytes
    return pc.or_(_native.keys_in_range(contiguous(keys), lo, hi), by_bytes)


@dataclass(frozen=True)
class Tagged:
    """One partition's tags (:meth:`BloomIndex.tag_all`): per key, the first file group (in
    slice order) holding it, or null; and the key's other holders, one (key index, file id)
    pair per further file group. Mostly no key has another holder, and the pairs are empty."""

    file_ids: pa.Array
    # Indices (into the partition's keys) of keys held by further file groups, in no order.
    also_rows: np.ndarray
    # The file id of each such further holder.
    also_file_ids: pa.Array

    def locations(self) -> tuple[np.ndarray, pa.Array]:
        """Every (key index, file id) pair of a key and a file group holding it, in key order
        (a key's pairs in slice order): the keys without a file group are left out."""
        rows = np.flatnonzero(pc.is_valid(self.file_ids).to_numpy(zero_copy_only=False))
        file_ids = self.file_ids.take(pa.array(rows))
        if not len(self.also_rows):
            return rows, file_ids
        every = np.concatenate([rows, self.also_rows])
        # Stable: a key's first holder stays ahead of the others.
        order = np.argsort(every, kind="stable")
        return every[order], pa.concat_arrays([file_ids, self.also_file_ids]).take(pa.array(order))


class _Holders:
    """Which keys of each partition a file group was already found to hold, and the further
    holders of keys found in several."""

    def __init__(self, num_partitions: int) -> None:
        self._claimed: list[np.ndarray | None] = [None] * num_partitions
        self._also: list[list[tuple[np.ndarray, str]]] = [[] for _ in range(num_partitions)]

    def first_holder(self, i: int, n: int, held: np.ndarray, file_id: str) -> np.ndarray:
        """Of the keys (indices ``held`` into partition ``i``'s ``n`` keys) that file ``file_id``
        holds, those no file was found to hold before; the others are kept as further holders.
        Called in slice order, so the first holder of a key does not depend on thread timing."""
        claimed = self._claimed[i]
        if claimed is None:
            claimed = self._claimed[i] = np.zeros(n, dtype=bool)
        again = claimed[held]
        if again.any():
            self._also[i].append((held[again], file_id))
            held = held[~again]
        claimed[held] = True
        return held

    def tagged(self, file_ids: list[pa.Array]) -> list[Tagged]:
        out = []
        for first, also in zip(file_ids, self._also, strict=True):
            if not also:
                out.append(Tagged(first, _NO_ROWS, _NO_FILE_IDS))
                continue
            rows = np.concatenate([held for held, _ in also]).astype(np.int64)
            which = np.repeat(np.arange(len(also)), [len(held) for held, _ in also])
            ids = pa.array([fid for _, fid in also], pa.string()).take(pa.array(which))
            out.append(Tagged(first, rows, ids))
        return out


_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_FILE_IDS = pa.array([], pa.string())


def _tag_single_admissions(
    found: list[tuple[tuple[int, pa.Array, FileSlice], np.ndarray, int]],
    counts: list[np.ndarray],
    file_ids: _FileIds,
) -> None:
    """Tags, in ``file_ids``, every key that exactly one file's footer admits with that file
    (``found`` and ``counts`` as ``_footer_candidates`` gives them)."""
    for (i, _, sl), idx, _ in found:
        file_ids.tag(i, idx[counts[i][idx] == 1], sl.file_id)


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


class _FileIds:
    """Per partition, the file id each key is tagged with, null while untagged; a later tag of
    a key replaces an earlier one. Kept as indices into the file ids and built as Arrow columns
    once: an Arrow call per tagging file costs more than the lookups when a partition holds
    hundreds of small files."""

    def __init__(self, partitions: Sequence[tuple[pa.Array, Sequence[FileSlice]]]) -> None:
        self._owner = [np.full(len(keys), -1, dtype=np.int64) for keys, _ in partitions]
        self._names: list[list[str]] = [[] for _ in partitions]

    def tag(self, i: int, indices: np.ndarray, file_id: str) -> None:
        """Tags the keys at ``indices`` of partition ``i`` with ``file_id``."""
        if len(indices):
            self._owner[i][indices] = len(self._names[i])
            self._names[i].append(file_id)

    def columns(self) -> list[pa.Array]:
        """Per partition, the file id of each key (null for keys not tagged)."""
        return [
            pa.array(names, pa.string()).take(pa.array(owner, mask=owner < 0))
            if names
            else pa.nulls(len(owner), pa.string())
            for owner, names in zip(self._owner, self._names, strict=True)
        ]


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
