"""Spark upsert against Spark's own parquet writer, in one session; prints the ratio and the
phases of the upsert.

    .venv/bin/python benches/spark_upsert.py [--rows 5000000] [--upsert-rows 1000000] [--repeat 2]

The table (``--rows`` records, 10 partitions, written by shoal's bulk insert; copy-on-write and
merge-on-read, ``--table-type``) gets an upsert of
``--upsert-rows`` records read from parquet by Spark, half updates of existing keys and half new
keys (benches/compare.py's data), with ``shoal.spark.write``. The peer is ``df.write.parquet``
of the same DataFrame in the same session: the cost of just writing the incoming rows. Target:
a ratio of at most 2. Each measurement is the best of ``--repeat`` runs (the upsert on a fresh
copy of the table each time).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

import shoal
from compare import make_data, make_upsert
from shoal.spark import local_session
from shoal.spark import write as spark_write


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--upsert-rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--input-files", type=int, default=4, help="parquet files the upsert is read from")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--table-type", choices=["COPY_ON_WRITE", "MERGE_ON_READ", "both"], default="both")
    ap.add_argument("--out", default="benches/results/spark_upsert.json")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="shoal-spark-bench-"))
    print(f"{args.rows:,} rows, upsert of {args.upsert_rows:,} (half updates); work dir {work}")
    t0 = time.perf_counter()
    data = make_data(args.rows)
    upsert = make_upsert(data, args.upsert_rows)
    types = ["COPY_ON_WRITE", "MERGE_ON_READ"] if args.table_type == "both" else [args.table_type]
    bases = {}
    for table_type in types:
        bases[table_type] = work / f"base_{table_type.lower()}"
        shoal.Table.create(
            str(bases[table_type]),
            name="bench",
            table_type=table_type,
            record_key="key",
            partition_by="part",
            ordering_field="ts",
        ).bulk_insert(data)
    del data
    source = work / "upsert_input"
    source.mkdir()
    per_file = -(-upsert.num_rows // args.input_files)
    for i in range(args.input_files):
        pq.write_table(upsert.slice(i * per_file, per_file), source / f"part-{i}.parquet")
    print(f"setup (data, base table, input files): {time.perf_counter() - t0:.1f} s")

    spark = local_session(
        "local[2]",
        app_name="shoal-spark-upsert-bench",
        conf={"spark.driver.memory": args.driver_memory, "spark.ui.showConsoleProgress": "false"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(str(source))
    # Warm up the JVM and the Python workers with a small job of each kind, untimed.
    df.limit(1000).write.mode("overwrite").parquet(str(work / "warmup_parquet"))
    warm = work / "warmup_table"
    spark_write(df.limit(1000), str(warm), "upsert", table_name="w", record_key="key", partition_by="part")

    plain: list[float] = []
    for _ in range(args.repeat):
        out = work / "plain_parquet"
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        df.write.parquet(str(out))
        plain.append(time.perf_counter() - t0)
    print(f"df.write.parquet:      {min(plain):.2f} s")
    report: dict = {
        "rows": args.rows,
        "upsert_rows": args.upsert_rows,
        "seconds": {"spark_parquet_write": min(plain)},
        "phases": {},
        "ratios": {},
    }
    for table_type, base in bases.items():
        ours: list[float] = []
        phases: list[dict[str, float]] = []
        for _ in range(args.repeat):
            table = work / "upserted"
            shutil.rmtree(table, ignore_errors=True)
            shutil.copytree(base, table)
            t0 = time.perf_counter()
            result = spark_write(df, str(table), "upsert")
            ours.append(time.perf_counter() - t0)
            phases.append(result.timings)
            stats = result.metadata.write_stats()
            print(
                f"  {table_type} run: {ours[-1]:.2f} s ({len(stats)} files written, "
                f"{sum(s.numUpdateWrites for s in stats):,} updates, "
                f"{sum(s.numInserts for s in stats):,} inserts)"
            )
        best = ours.index(min(ours))
        ratio = min(ours) / min(plain)
        print(f"shoal.spark.write upsert, {table_type}: {min(ours):.2f} s")
        for name, seconds in phases[best].items():
            print(f"  {name:<20} {seconds:.2f} s")
        print(f"ratio (shoal upsert / parquet write), {table_type}: {ratio:.2f}  (target <= 2)")
        report["seconds"][f"shoal_spark_upsert.{table_type}"] = min(ours)
        report["phases"][table_type] = phases[best]
        report["ratios"][table_type] = ratio
    spark.stop()

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
