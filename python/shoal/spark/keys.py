"""Record keys in Spark tasks: a stable 64-bit hash of string keys, and exact lookups in a fixed
set of keys that a task builds once and probes batch after batch.

Spark tasks of one write must agree on where a key goes: the hash depends on the key's bytes
alone (not on Python's per-process string hash), so every attempt of a task, and every record of
one key, gets the same value. ``KeyMap`` answers "which of these keys are in the set, with what
value" without rebuilding a hash table per batch (``pyarrow.compute.is_in`` hashes its value set
on every call): it keeps the set's hashes sorted and confirms every hash match by comparing the
keys themselves, so the answer is exact.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal import _native
from shoal.arrays import contiguous


def key_hash(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash (uint64) of every key of a string array without nulls, a function of the
    key's bytes alone (whatever else the batch holds). A key of at most 64 bytes is hashed as
    its length and its 8-byte words (the last one padded with zero bytes); a longer key as its
    length and the words of its first and last 64 bytes: splitmix64's finalizer over the length
    times the golden ratio, then over the running hash xor each little-endian word (Rust:
    ``keyhash.rs``, about a tenth of the cost of doing it column by column in numpy)."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.uint64)
    return _native.key_hashes(contiguous(keys)).to_numpy()


class KeyMap:
    """A fixed map from distinct string keys to values (an array of any type, nulls allowed),
    for exact lookups of many batches of keys."""

    def __init__(self, keys: pa.Array, values: pa.Array, hashes: np.ndarray | None = None) -> None:
        """``hashes``: the keys' ``key_hash``, when already computed."""
        hashes = key_hash(keys) if hashes is None else hashes
        order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[order]
        taken = pa.array(order)
        self.keys = keys.take(taken)
        self.values = values.take(taken)
        # Two keys of the set with one hash (as good as never): exact set lookups then.
        self._distinct_hashes = bool(len(order) < 2 or (np.diff(self.hashes) != 0).all())

    def __len__(self) -> int:
        return len(self.keys)

    def lookup(self, probe: pa.Array, hashes: np.ndarray | None = None) -> tuple[np.ndarray, pa.Array]:
        """(indices into ``probe`` of the keys in the map, their values). ``hashes``: the
        probe's ``key_hash``, when already computed."""
        if len(self.keys) == 0 or len(probe) == 0:
            return np.zeros(0, dtype=np.int64), self.values.slice(0, 0)
        if not self._distinct_hashes:
            at = pc.index_in(probe, value_set=self.keys)
            found = pc.indices_nonzero(pc.is_valid(at))
            return found.to_numpy(zero_copy_only=False), self.values.take(at.filter(pc.is_valid(at)))
        hashes = key_hash(probe) if hashes is None else hashes
        position = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
        candidates = np.flatnonzero(self.hashes[position] == hashes)
        if len(candidates) == 0:
            return candidates, self.values.slice(0, 0)
        at = pa.array(position[candidates])
        same = pc.equal(probe.take(pa.array(candidates)), self.keys.take(at))
        keep = same.to_numpy(zero_copy_only=False)
        return candidates[keep], self.values.take(at.filter(same))


# Insert slots per partition: the route pass packs a partition's new records by the top bits of
# their key hash, before the driver knows how many insert buckets the partition gets.
SLOT_BITS = 5


def insert_slots(hashes: np.ndarray) -> np.ndarray:
    """The insert slot (``< 2**SLOT_BITS``) of each key hash: a contiguous range of hashes."""
    return (hashes >> np.uint64(64 - SLOT_BITS)).astype(np.int32)


def insert_positions(hashes: np.ndarray, total: int) -> np.ndarray:
    """Each key hash's position in ``[0, total)``, non-decreasing in the hash, so a partition's
    new records spread over its insert buckets by cumulative count (Hudi's ``UpsertPartitioner``
    weighting) and each insert slot covers one range of positions."""
    return ((hashes >> np.uint64(32)) * np.uint64(total)) >> np.uint64(32)


def slot_positions(slot: int, total: int) -> tuple[int, int]:
    """The first and last position (:func:`insert_positions`) a hash of insert ``slot`` can have."""
    shift = 32 - SLOT_BITS
    first = np.array([slot << (32 + shift), (((slot + 1) << shift) - 1) << 32], dtype=np.uint64)
    low, high = insert_positions(first, total).tolist()
    return int(low), int(high)
