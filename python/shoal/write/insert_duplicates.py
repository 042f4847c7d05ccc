"""What an insert does with incoming records of keys the table holds: Hudi's
``hoodie.datasource.insert.dup.policy`` (and its older switch
``hoodie.datasource.write.insert.drop.duplicates=true``, the same as ``drop``).

* ``none`` (the default): the records are written; an insert looks no key up.
* ``drop``: they are left out and the rest is written, so a key is ingested only once; a
  replayed batch of inserts writes nothing twice.
* ``fail``: the write fails with :class:`~shoal.errors.DuplicateKeyError` before the timeline
  changes.

Only inserts take notice of the policy, as in Hudi (its ``HoodieSparkSqlWriter``). Hudi finds
the keys with its index's ``tagLocation``; shoal looks them up with the table's index the same
way (the bloom or simple index in the partitions the records fall in, every partition under a
global index; the bucket index in the key's bucket) and then reads, with their logs merged, the
file slices whose logs could have deleted a key or, with the bucket index, inserted one: a key
counts as held when the table's latest snapshot has a record of it, so a key a merge-on-read
log deleted is inserted again rather than dropped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.arrays import contiguous, group_rows
from shoal.config.write_config import (
    BLOOM_PRUNE_BY_RANGES,
    INDEX_TYPE,
    INSERT_DROP_DUPLICATES,
    INSERT_DUP_POLICY,
    WriteConfig,
)
from shoal.errors import DuplicateKeyError
from shoal.fs.storage import Storage
from shoal.fs.view import FileSlice, PartitionSlices
from shoal.index.bloom import BloomIndex
from shoal.index.bucket import bucket_ids, bucket_of_file
from shoal.index.membership import held_by
from shoal.index.simple import SimpleIndex
from shoal.read.mor import MorSliceSpec, read_mor_slice
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY

# Keys named in a DuplicateKeyError's message.
_KEYS_SHOWN = 5


class DuplicatePolicy(str, enum.Enum):
    """An insert's policy for incoming records of keys the table holds."""

    NONE = "NONE"
    DROP = "DROP"
    FAIL = "FAIL"


def duplicate_policy(wc: WriteConfig) -> DuplicatePolicy:
    """The insert duplicate policy ``wc`` sets; ``fail`` wins over ``insert.drop.duplicates``,
    as Hudi checks it first."""
    policy = DuplicatePolicy(wc.get(INSERT_DUP_POLICY))
    if policy == DuplicatePolicy.NONE and wc.get(INSERT_DROP_DUPLICATES):
        return DuplicatePolicy.DROP
    return policy


def lookup_index(storage: Storage, wc: WriteConfig, cache_keys: bool = False) -> BloomIndex:
    """The bloom or simple index ``hoodie.index.type`` names (not the bucket index)."""
    if wc.get(INDEX_TYPE) in ("SIMPLE", "GLOBAL_SIMPLE"):
        return SimpleIndex(storage, cache_keys=cache_keys)
    return BloomIndex(storage, prune_by_ranges=wc.get(BLOOM_PRUNE_BY_RANGES), cache_keys=cache_keys)


@dataclass(frozen=True)
class StoredKeys:
    """Finds which incoming keys the table's latest snapshot holds. Plain data: Spark's route
    tasks get it in a broadcast and look their records up themselves."""

    base_uri: str
    write_options: dict[str, str]
    # The latest file slices by partition: of the partitions the records fall in (listed up
    # front, or as lookups need them: Spark's route tasks list the partitions they meet), or of
    # every partition under a global index.
    slices: PartitionSlices
    global_index: bool
    # With the bucket index: (hash fields, number of buckets).
    buckets: tuple[tuple[str, ...], int] | None
    # What a merged read of a slice needs.
    completed_instants: tuple[str, ...]
    ordering_field: str | None
    event_time_ordering: bool

    def held(self, records: pa.Table) -> np.ndarray:
        """Per record of ``records`` (keyed), whether the table holds its key."""
        keys = contiguous(records.column(RECORD_KEY))
        held = np.zeros(len(keys), dtype=bool)
        for sl, rows, confirmed in self._located(keys, records.column(PARTITION_PATH)):
            if not confirmed:
                stored = self._merged_keys(sl)
                rows = rows[held_by(keys.take(pa.array(rows)), stored).to_numpy(zero_copy_only=False)]
            held[rows] = True
        return held

    def _located(
        self, keys: pa.Array, partitions: pa.Array | pa.ChunkedArray
    ) -> list[tuple[FileSlice, np.ndarray, bool]]:
        """The slices that may hold some of ``keys``, each with the rows of those keys and
        whether the index's lookup settled that the slice holds them (a slice without logs
        whose key column was read)."""
        if self.global_index:
            # A global index's slices are listed up front (Writer.stored_keys).
            assert isinstance(self.slices, dict)
            every = [sl for group in self.slices.values() for sl in group]
            return [(sl, found, not sl.log_files) for sl, found in self._index().locate(keys, every)]
        out: list[tuple[FileSlice, np.ndarray, bool]] = []
        for partition, rows in group_rows(partitions):
            slices = self.slices.get(partition, [])
            if not slices:
                continue
            at = rows.to_numpy(zero_copy_only=False)
            partition_keys = keys.take(rows)
            if self.buckets is not None:
                # A key can only be in its bucket's file group, in its base file or its logs.
                numbers = bucket_ids(partition_keys, *self.buckets)
                for sl in slices:
                    mine = np.flatnonzero(numbers == bucket_of_file(sl.file_id))
                    if len(mine):
                        out.append((sl, at[mine], False))
            else:
                located = self._index().locate(partition_keys, slices)
                out += [(sl, at[found], not sl.log_files) for sl, found in located]
        return out

    def _index(self) -> BloomIndex:
        return lookup_index(Storage(self.base_uri), WriteConfig(self.write_options), cache_keys=True)

    def _merged_keys(self, sl: FileSlice) -> pa.ChunkedArray:
        """The keys of the slice's records once its logs are merged."""
        spec = MorSliceSpec.of_slice(
            self.base_uri,
            sl,
            self.completed_instants,
            self.ordering_field,
            self.event_time_ordering,
            columns=(RECORD_KEY,),
        )
        merged = read_mor_slice(spec)
        if RECORD_KEY not in merged.column_names:
            return pa.chunked_array([], pa.string())
        return merged.column(RECORD_KEY)


def without_held_keys(records: pa.Table, held: np.ndarray, policy: DuplicatePolicy) -> pa.Table:
    """``records`` under ``policy``, given which of them have keys the table holds: those left
    out (DROP), or DuplicateKeyError when there is any (FAIL)."""
    if not held.any():
        return records
    if policy == DuplicatePolicy.FAIL:
        keys = pc.unique(contiguous(records.column(RECORD_KEY)).filter(pa.array(held)))
        shown = ", ".join(repr(k) for k in keys.slice(0, _KEYS_SHOWN).to_pylist())
        more = f" and {len(keys) - _KEYS_SHOWN} more" if len(keys) > _KEYS_SHOWN else ""
        raise DuplicateKeyError(
            f"hoodie.datasource.insert.dup.policy=fail: the table holds {len(keys)} of the "
            f"inserted keys ({shown}{more}); nothing was written"
        )
    return records.filter(pa.array(~held))
