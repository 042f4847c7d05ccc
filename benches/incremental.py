"""Incremental read of one small commit vs a full snapshot read of the same table.

A table of 1M rows in 100 file groups (one per partition) takes a commit that updates rows of
1% of the file groups; the incremental read of that commit should cost a small fraction of a
snapshot read (target: ratio <= 0.05), because it reads only the file groups the commit wrote.

    .venv/bin/python benches/incremental.py [--rows 1000000] [--groups 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

import shoal


def _data(ids: np.ndarray, groups: int, version: int) -> pa.Table:
    rng = np.random.default_rng(version)
    return pa.table(
        {
            "id": ids,
            "part": pa.array([f"p{g:03d}" for g in ids % groups]),
            "ts": np.full(len(ids), version, dtype=np.int64),
            "amount": rng.random(len(ids)),
            "name": pa.array([f"name-{i}-{version}" for i in ids]),
        }
    )


def _best(fn: Callable[[], pa.Table], repeat: int) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        rows = fn().num_rows
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rows


def run(table_type: str, rows: int, groups: int, repeat: int, root: Path) -> float:
    table = shoal.Table.create(
        root / table_type, "bench", table_type=table_type, record_key="id", partition_by="part"
    )
    table.bulk_insert(_data(np.arange(rows, dtype=np.int64), groups, 1))
    before = table.latest_instant()
    touched = max(1, groups // 100)
    per_group = rows // groups
    # Update a tenth of the rows of `touched` file groups (ids with id % groups < touched).
    ids = np.arange(0, rows, groups, dtype=np.int64)[: per_group // 10]
    ids = np.concatenate([ids + g for g in range(touched)])
    commit = table.upsert(_data(ids, groups, 2))
    file_groups = len({s.file_id for s in table.file_slices()})

    full, full_rows = _best(lambda: table.read(), repeat)
    incr, incr_rows = _best(lambda: table.read_incremental(before, commit), repeat)
    assert incr_rows == len(ids), (incr_rows, len(ids))
    ratio = incr / full
    print(
        f"{table_type:14s} rows={full_rows:>9,d} file_groups={file_groups} touched={touched} "
        f"changed_rows={incr_rows:,d}  snapshot={full * 1e3:8.1f} ms  incremental={incr * 1e3:7.1f} ms  "
        f"ratio={ratio:.4f}"
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--types", default="COPY_ON_WRITE,MERGE_ON_READ")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for table_type in args.types.split(","):
            run(table_type, args.rows, args.groups, args.repeat, Path(tmp))
    print("target: ratio <= 0.05")


if __name__ == "__main__":
    main()
