"""Keying records in Spark tasks: what a task needs to compute record keys, partition paths and
operations from the input's key columns, as the write task will from whole records."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from shoal.config.table_config import TABLE_TYPE, TableType
from shoal.keygen import KeyGenerator, key_generator_from_properties
from shoal.tasks.cow_write import OP_HARD_DELETE, OP_SOFT_DELETE, OP_UPSERT
from shoal.write.prepare import PARTITION_PATH, RECORD_KEY, add_keys, deleted_mask, validate_keys
from shoal.write.schema import normalize_types, reconcile
from shoal.write.writer import Operation

# Key generators by table properties, per Python worker (workers are reused across tasks).
_KEYGENS: dict[tuple[tuple[str, str], ...], KeyGenerator] = {}


@dataclass(frozen=True)
class KeySpec:
    """What the key and route passes need to key and tag records, as plain data."""

    base_uri: str
    operation: Operation
    table_properties: dict[str, str]
    write_options: dict[str, str]
    # The input columns that key generation reads, and whether rows mark deletes
    # (``_hoodie_is_deleted``) among them.
    columns: tuple[str, ...]
    # Key columns of the table schema, to reconcile the key columns as the write task will.
    key_schema: pa.Schema | None
    # Whether to tag (an index lookup is needed).
    tag: bool
    # With hoodie.index.type=BUCKET: how the tasks compute a key's bucket (then ``tag`` is false).
    buckets: BucketLayout | None = None
    # With a global index: the driver deduplicates and tags the keys (``shoal.spark.global_keys``;
    # then ``tag`` is false), and the field ordering records, which the key pass carries.
    global_keys: bool = False
    ordering: pa.Field | None = None


@dataclass(frozen=True)
class BucketLayout:
    """The bucket index's hashing, as plain data: a record's bucket is
    ``bucket_ids(key, hash_fields, num_buckets)``."""

    hash_fields: tuple[str, ...]
    num_buckets: int


def keyed_table(spec: KeySpec, data: pa.Table) -> pa.Table:
    """The key columns ``data`` with the types the table gives them (as the write task will
    reconcile the whole records), and the record key and partition path added; a null or empty
    key fails here."""
    data = normalize_types(data)
    if spec.key_schema is not None:
        data = reconcile(data, spec.key_schema)
    keyed = add_keys(data, task_keygen(spec.table_properties))
    validate_keys(keyed.column(RECORD_KEY))
    return keyed


def logs_deletes(table_properties: dict[str, str]) -> bool:
    """Whether the table of ``table_properties`` writes soft deletes to log delete blocks (a
    merge-on-read table), whose ordering values ``check_logged_delete_orderings`` checks."""
    return table_properties.get(TABLE_TYPE, "").upper() == TableType.MERGE_ON_READ.value


def key_columns_of(spec: KeySpec, keyed: pa.Table) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Record keys, partition paths and operations of a :func:`keyed_table`."""
    keys = keyed.column(RECORD_KEY).combine_chunks()
    partitions = keyed.column(PARTITION_PATH).combine_chunks()
    n = len(keys)
    deleted = None if spec.operation == Operation.DELETE else deleted_mask(keyed)
    if spec.operation == Operation.DELETE:
        ops = pa.array(np.full(n, OP_HARD_DELETE, dtype=np.int8))
    elif deleted is None:
        ops = pa.array(np.full(n, OP_UPSERT, dtype=np.int8))
    else:
        flags = deleted.combine_chunks().to_numpy(zero_copy_only=False)
        ops = pa.array(np.where(flags, OP_SOFT_DELETE, OP_UPSERT).astype(np.int8))
    return keys, partitions, ops


def task_keygen(properties: dict[str, str]) -> KeyGenerator:
    key = tuple(sorted(properties.items()))
    keygen = _KEYGENS.get(key)
    if keygen is None:
        keygen = _KEYGENS[key] = key_generator_from_properties(properties)
    return keygen


def chunked(batches: Iterator[pa.RecordBatch], rows: int, max_bytes: int | None = None) -> Iterator[pa.Table]:
    """The batches gathered into tables of at least ``rows`` rows (the last one smaller), or of
    ``max_bytes`` bytes when that comes first: a candidate file's key column is read once per
    chunk."""
    buffered: list[pa.RecordBatch] = []
    count = size = 0
    for batch in batches:
        if batch.num_rows:
            buffered.append(batch)
            count += batch.num_rows
            size += batch.nbytes
        if count >= rows or (max_bytes is not None and size >= max_bytes):
            yield pa.Table.from_batches(buffered)
            buffered, count, size = [], 0, 0
    if count:
        yield pa.Table.from_batches(buffered)
