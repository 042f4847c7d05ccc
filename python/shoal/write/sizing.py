"""Average record size for file sizing: from recent commits, else estimated from the incoming data."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq

from shoal.timeline.timeline import Timeline

# Enough rows that parquet's per-file overhead is noise, few enough to cost milliseconds.
_SAMPLE_ROWS = 20_000


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
    """Bytes per record of ``data`` once written as parquet, measured on an evenly strided sample."""
    n = data.num_rows
    if n == 0:
        return 1
    if n > _SAMPLE_ROWS:
        step = n // _SAMPLE_ROWS
        data = data.take(pa.array(range(0, n, step))[:_SAMPLE_ROWS])
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, compression=None if codec == "none" else codec)
    return max(1, math.ceil(sink.getvalue().size / data.num_rows))
