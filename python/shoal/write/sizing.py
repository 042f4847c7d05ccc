"""Average record size for file sizing: from recent commits, else estimated from the incoming data."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from shoal import _native
from shoal.arrays import importable
from shoal.timeline.timeline import Timeline
from shoal.write.base_file import DICTIONARY_PAGE_LIMIT, base_file_rows, constant_strings_as_dictionaries

# Enough rows that parquet's per-file overhead is noise, few enough to cost milliseconds: the
# estimate of a first write runs before any task starts. Written the way base files are (meta
# columns, writer settings), the sample's bytes per record are stable well below this many
# rows (1M benchmark rows: 106 from 20,000, 111 from 5,000, at a quarter of the cost).
_SAMPLE_ROWS = 5_000
# Stand-ins of the real lengths for the meta columns of the sample.
_SAMPLE_INSTANT = "00000000000000000"
_SAMPLE_FILE_NAME = f"{'0' * 8}-{'0' * 4}-{'0' * 4}-{'0' * 4}-{'0' * 12}-0_0-0-0_{_SAMPLE_INSTANT}.parquet"


def average_record_size_from_commits(
    timeline: Timeline, small_file_limit: int, threshold: float
) -> int | None:
    """Bytes per record of the newest commit that wrote enough data to be representative
    (``totalWriteBytes > threshold * small_file_limit``), as Hudi's upsert partitioner does."""
    for inst in reversed(timeline.completed_data_instants()):
        meta = timeline.commit_metadata(inst)
        stats = [s for s in meta.write_stats() if s.path and s.path.endswith(".parquet")]
        total_bytes = sum(s.totalWriteBytes for s in stats)
        records = sum(s.numWrites for s in stats)
        if records > 0 and total_bytes > threshold * small_file_limit:
            return max(1, math.ceil(total_bytes / records))
    return None


def estimate_record_size(data: pa.Table, codec: str) -> int:
    """Bytes per record of ``data`` once written as parquet.

    The Rust sampler measures the in-memory size of one row in a hundred across all of ``data``
    (cheap, and it sees every part of the batch); a parquet-encoded strided sample calibrates it
    to on-disk bytes, since encoding and compression shrink rows by a factor that depends on the
    data (dictionaries, repeated values)."""
    n = data.num_rows
    if n == 0:
        return 1
    sample = data
    if n > _SAMPLE_ROWS:
        step = n // _SAMPLE_ROWS
        sample = data.take(pa.array(np.arange(0, step * _SAMPLE_ROWS, step)))
    on_disk = _base_file_bytes(sample, codec) / sample.num_rows
    in_memory_sample = sampled_size(sample)
    if in_memory_sample <= 0:
        return max(1, math.ceil(on_disk))
    return max(1, math.ceil(sampled_size(data) * on_disk / in_memory_sample))


def _base_file_bytes(records: pa.Table, codec: str) -> int:
    """Parquet bytes of ``records`` written as a base file's rows are (write_base_file), less the
    footer's key entries; with meta columns when ``records`` carry the record key."""
    rows = records
    if "_hoodie_record_key" in records.column_names:
        data = records.drop_columns([c for c in ("_hoodie_partition_path",) if c in records.column_names])
        rows = base_file_rows(data, _SAMPLE_INSTANT, 0, _SAMPLE_FILE_NAME, "")
    rows = constant_strings_as_dictionaries(rows).unify_dictionaries()
    sink = pa.BufferOutputStream()
    pq.write_table(
        rows,
        sink,
        compression=None if codec == "none" else codec,
        dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT,
        # Statistics take a few bytes per column and a comparison of every value.
        write_statistics=False,
        store_schema=False,
    )
    return int(sink.getvalue().size)


def sampled_size(data: pa.Table, every: int = 100) -> float:
    """Average in-memory bytes per row of ``data``, from the Rust sampler (one row in ``every``)."""
    total, rows = 0.0, 0
    for batch in data.to_batches():
        average, sampled = _native.estimate_record_size(importable(batch), every)
        total += average * sampled
        rows += sampled
    return total / rows if rows else 0.0
