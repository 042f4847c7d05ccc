"""Listing the partitions a write touches on an object store, simulated: a local table whose
listings each wait ``--latency-ms`` (an S3 or GCS listing takes tens of milliseconds), read as a
remote file system's. Times a file-system view of ``--partitions`` partitions listed one after
another against up to ``hoodie.file.listing.parallelism`` (16 by default) at once.

    .venv/bin/python benches/listing.py [--partitions 200] [--latency-ms 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

import shoal
from shoal.fs import storage as storage_module
from shoal.fs.storage import Storage
from shoal.fs.view import FileSystemView
from shoal.timeline.timeline import Timeline


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    n = args.partitions
    t = shoal.Table.create(
        tempfile.mkdtemp(prefix="shoal-listing-") + "/t", "bench", record_key="id", partition_by="p"
    )
    t.write(
        pa.table({"id": [f"k{i}" for i in range(10 * n)], "p": [f"p{i % n}" for i in range(10 * n)]}),
        "upsert",
    )
    partitions = [f"p{i}" for i in range(n)]
    timeline = Timeline.load(t.storage, t.config)

    original = Storage._list
    delay = args.latency_ms / 1000

    def slow(storage: Storage, rel: str, recursive: bool) -> Any:
        time.sleep(delay)
        return list(original(storage, rel, recursive))

    Storage._list = slow  # type: ignore[method-assign]
    remote = Storage(t.path)
    remote.is_local = False

    def timed(parallelism: int) -> float:
        remote.listing_parallelism = parallelism
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            FileSystemView(remote, timeline, partitions=partitions).latest_file_slices()
            best = min(best, time.perf_counter() - t0)
        return best

    default = storage_module.LISTING_PARALLELISM
    one, many = timed(1), timed(default)
    out = RichTable(
        title=f"view of {n} partitions, {args.latency_ms:g} ms per listing (best of {args.repeat})"
    )
    for col in ("listings at once", "seconds", "ratio"):
        out.add_column(col)
    out.add_row("1", f"{one:.3f}", "1.00")
    out.add_row(str(default), f"{many:.3f}", f"{many / one:.2f}")
    Console().print(out)


if __name__ == "__main__":
    main()
