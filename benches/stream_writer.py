"""The streaming writer's buffer sizes: one checkpoint of N batches through ``Table.stream_writer``
at several buffer limits, against one ``Table.upsert`` of the same batches.

A table of ``--rows`` rows in 4 partitions takes ``--batches`` batches of ``--batch`` rows, half
updates and half inserts, as one checkpoint. Small limits flush more often: merge-on-read
flushes append log blocks (cheap), copy-on-write flushes rewrite the file group's base file.

    .venv/bin/python benches/stream_writer.py [--rows 200000] [--batches 10] [--batch 25000]
        [--index BLOOM|GLOBAL_BLOOM|GLOBAL_SIMPLE|SIMPLE]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import shoal

LIMITS = [
    ("one Table.upsert", None, None),
    ("256 MiB / 1 GiB (default)", 256 * 2**20, 2**30),
    ("2 MiB / 8 MiB", 2 * 2**20, 8 * 2**20),
    ("256 KiB / 1 MiB", 2**18, 2**20),
]


def _batch(lo: int, n: int, ts: int) -> pa.Table:
    ids = np.arange(lo, lo + n)
    rng = np.random.default_rng(ts)
    return pa.table(
        {
            "id": ids,
            "city": pa.array(np.array(["sf", "nyc", "la", "chi"])[ids % 4]),
            "ts": np.full(n, ts, dtype=np.int64),
            "fare": rng.random(n),
            "rider": pa.array([f"rider-{i}" for i in ids]),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch", type=int, default=25_000)
    parser.add_argument("--index", default="BLOOM", help="hoodie.index.type of the writes")
    args = parser.parse_args()
    options = {"hoodie.index.type": args.index}
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        for label, bucket, total in LIMITS:
            with tempfile.TemporaryDirectory() as tmp:
                table = shoal.Table.create(
                    Path(tmp) / "t",
                    name="bench",
                    table_type=table_type,
                    record_key="id",
                    partition_by="city",
                    ordering_field="ts",
                )
                table.upsert(_batch(0, args.rows, 0))
                start = args.rows - args.batches * args.batch // 2
                batches = [_batch(start + i * args.batch, args.batch, i + 1) for i in range(args.batches)]
                began = time.perf_counter()
                if bucket is None or total is None:
                    table.upsert(pa.concat_tables(batches), options=options)
                    detail = ""
                else:
                    limits = {"bucket_buffer_bytes": bucket, "total_buffer_bytes": total}
                    with table.stream_writer(**limits, options=options) as writer:
                        for b in batches:
                            writer.write(b)
                    s = writer.stats
                    detail = (
                        f"flushes {s.flushes}, peak buffered {s.peak_buffered_bytes / 2**20:.1f} MiB, "
                        f"record size {s.record_size:.0f} B"
                    )
                elapsed = time.perf_counter() - began
                print(f"{table_type:14s} {label:26s} {elapsed:6.2f} s  {detail}")


if __name__ == "__main__":
    main()
