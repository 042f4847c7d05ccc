"""Spark reads of a shoal table vs Spark's own parquet scan of the same base files.

One local Spark session reads a 1M-row copy-on-write table (written by a local bulk insert) in
three ways, each forced to materialise every column (a ``noop`` write, and an xor of an xxhash64
over all columns):

* ``spark.read.format("shoal").load(path)`` (the data source),
* ``shoal.spark.read(spark, path)`` (``spark.range(n).mapInArrow`` over the file slices),
* ``spark.read.parquet(<the table's latest base files>)`` (the reference).

Target: shoal / parquet <= 1.5. A projection of two columns is timed too (the data source gets
no column pruning from Spark; ``shoal.spark.read(columns=...)`` does).

    .venv/bin/python benches/spark_read.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table as RichTable

import shoal
import shoal.spark
from compare import make_data, timed

console = Console()
TARGET = 1.5


def _noop(df: Callable[[], DataFrame]) -> Callable[[], None]:
    return lambda: df().write.format("noop").mode("overwrite").save()


def _hash_all(df: Callable[[], DataFrame]) -> Callable[[], None]:
    def run() -> None:
        frame = df()
        frame.select(F.bit_xor(F.xxhash64(*frame.columns))).collect()

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default="benches/results/spark_read.json")
    args = ap.parse_args()

    path = str(Path(tempfile.mkdtemp(prefix="shoal-spark-read-")) / "t")
    table = shoal.Table.create(path, "bench", record_key="key", partition_by="part", ordering_field="ts")
    table.bulk_insert(make_data(args.rows))
    files = [table.storage.full_path(s.base_file.path) for s in table.file_slices() if s.base_file]
    console.rule(f"{args.rows:,} rows in {len(files)} base files, Spark {args.master}")

    spark = shoal.spark.local_session(args.master, app_name="shoal-bench")
    spark.sparkContext.setLogLevel("ERROR")
    shoal.spark.register(spark)
    readers: dict[str, Callable[[], DataFrame]] = {
        "data source": lambda: spark.read.format("shoal").load(path),
        "shoal.spark.read": lambda: shoal.spark.read(spark, path),
        "parquet": lambda: spark.read.parquet(*files),
    }
    two = ["key", "ts"]
    projected: dict[str, Callable[[], DataFrame]] = {
        "data source": lambda: spark.read.format("shoal").option("columns", ",".join(two)).load(path),
        "shoal.spark.read": lambda: shoal.spark.read(spark, path, columns=two),
        "parquet": lambda: spark.read.parquet(*files).select(*two),
    }
    counts = {name: df().count() for name, df in readers.items()}
    assert set(counts.values()) == {args.rows}, counts

    results: dict[str, dict[str, float]] = {}
    for scan, frames in (("all columns", readers), ("2 columns", projected)):
        for how, action in (("noop", _noop), ("xxhash64 of every column", _hash_all)):
            if scan == "2 columns" and how == "noop":
                continue
            times = {}
            for name, df in frames.items():
                run = action(df)
                run()  # warm the Python workers and the JIT
                times[name] = timed(run, None, args.repeat)
            results[f"{scan}, {how}"] = times
    spark.stop()

    out_table = RichTable(title=f"Spark reads, {args.rows:,} rows (best of {args.repeat})")
    for col in ("scan", "reader", "seconds", "rows/s", "vs parquet", "target"):
        out_table.add_column(col)
    ratios: dict[str, float] = {}
    for scan, times in results.items():
        for name, seconds in times.items():
            ratio = seconds / times["parquet"]
            if name != "parquet":
                ratios[f"{scan}: {name}"] = ratio
            target = "" if name == "parquet" else f"<= {TARGET}"
            out_table.add_row(
                scan, name, f"{seconds:.3f}", f"{args.rows / seconds / 1e6:.2f} M", f"{ratio:.2f}", target
            )
    console.print(out_table)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    report = {"rows": args.rows, "master": args.master, "seconds": results, "ratios": ratios}
    Path(args.out).write_text(json.dumps(report, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
