"""Spark upsert against Spark's own parquet writer, in one session; prints the ratio and the
phases of the upsert.

    .venv/bin/python benches/spark_upsert.py [--rows 5000000] [--upsert-rows 1000000] [--repeat 2]
        [--index BLOOM|GLOBAL_BLOOM|...]

The table (``--rows`` records, 10 partitions, written by shoal's bulk insert; copy-on-write and
merge-on-read, ``--table-type``) gets an upsert of ``--upsert-rows`` records read from parquet by
Spark, half updates of existing keys and half new keys (benches/compare.py's data), with
``shoal.spark.write``: its route tasks read the input's parquet files themselves, and (``--input``)
again with Spark turning the input's rows into Arrow for them, as for an input that is not a plain
file scan (labels ``<table type>.spark_rows``). The peer is ``df.write.parquet`` of the same
DataFrame in the same session: the cost of just writing the incoming rows. Target: a ratio of at most 2.

Each measurement is the best of ``--repeat`` rounds; a round runs the peer, then each upsert, so
all see the same machine load. Each round's own ratio is reported too, with their median: the
JVM speeds up over the first full-size jobs, so one untimed full-size round (``--warmup-rounds``)
runs first. Every upsert goes into a fresh copy of the table under a new
path, so no worker process has its key columns cached from an earlier round. Besides wall time,
the CPU time of the session's processes (driver, JVM, Python workers) is recorded for each run:
on a shared machine it varies less than wall time.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pyarrow.parquet as pq

import shoal
from compare import make_data, make_upsert
from shoal.spark import local_session
from shoal.spark import write as spark_write

T = TypeVar("T")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--upsert-rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--warmup-rounds", type=int, default=1, help="untimed full-size rounds run first")
    ap.add_argument("--input-files", type=int, default=4, help="parquet files the upsert is read from")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--table-type", choices=["COPY_ON_WRITE", "MERGE_ON_READ", "both"], default="both")
    ap.add_argument(
        "--index",
        choices=["BLOOM", "GLOBAL_BLOOM", "GLOBAL_SIMPLE", "SIMPLE"],
        default="BLOOM",
        help="hoodie.index.type of the upsert (the base tables are the same)",
    )
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the session (repeatable), e.g. spark.shuffle.compress=false",
    )
    ap.add_argument(
        "--input",
        choices=["files", "spark", "both"],
        default="both",
        help="how the route tasks get the input: its parquet files read by the tasks (the default for "
        "such an input), Spark's rows (shoal.spark.write.direct.parquet.input=false), or both, each timed",
    )
    ap.add_argument("--out", default="benches/results/spark_upsert.json")
    ap.add_argument(
        "--keep-data",
        help="a directory for the base tables and the input, kept and reused by later runs of the same sizes",
    )
    args = ap.parse_args()

    types = ["COPY_ON_WRITE", "MERGE_ON_READ"] if args.table_type == "both" else [args.table_type]
    if args.keep_data:
        work = Path(args.keep_data) / f"{args.rows}_{args.upsert_rows}_{args.input_files}"
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="shoal-spark-bench-"))
    print(f"{args.rows:,} rows, upsert of {args.upsert_rows:,} (half updates); work dir {work}")
    source = work / "upsert_input"
    bases = {t: work / f"base_{t.lower()}" for t in types}
    if not (source.exists() and all(b.exists() for b in bases.values())):
        make_tables(args, work, bases, source)
    else:
        print("reusing the base tables and the input")
    run(args, work, bases, source)


def make_tables(args: argparse.Namespace, work: Path, bases: dict[str, Path], source: Path) -> None:
    """The base tables (bulk inserted by shoal) and the upsert's input files."""
    t0 = time.perf_counter()
    data = make_data(args.rows)
    upsert = make_upsert(data, args.upsert_rows)
    for table_type, base in bases.items():
        shutil.rmtree(base, ignore_errors=True)
        shoal.Table.create(
            str(base),
            name="bench",
            table_type=table_type,
            record_key="key",
            partition_by="part",
            ordering_field="ts",
        ).bulk_insert(data)
    del data
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir()
    per_file = -(-upsert.num_rows // args.input_files)
    for i in range(args.input_files):
        pq.write_table(upsert.slice(i * per_file, per_file), source / f"part-{i}.parquet")
    print(f"setup (data, base table, input files): {time.perf_counter() - t0:.1f} s")


def run(args: argparse.Namespace, work: Path, bases: dict[str, Path], source: Path) -> None:
    spark = local_session(
        "local[2]",
        app_name="shoal-spark-upsert-bench",
        conf={
            "spark.driver.memory": args.driver_memory,
            "spark.ui.showConsoleProgress": "false",
            **dict(kv.split("=", 1) for kv in args.conf),
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(str(source))
    # Warm up the JVM and the Python workers with a small job of each kind, untimed.
    df.limit(1000).write.mode("overwrite").parquet(str(work / "warmup_parquet"))
    warm = work / "warmup_table"
    spark_write(df.limit(1000), str(warm), "upsert", table_name="w", record_key="key", partition_by="part")

    # Each upsert measured: (label, base table, options).
    inputs = {"files": "true", "spark": "false"}
    chosen = list(inputs) if args.input == "both" else [args.input]
    upserts = [
        (
            table_type if mode == "files" else f"{table_type}.spark_rows",
            base,
            {"hoodie.index.type": args.index, "shoal.spark.write.direct.parquet.input": inputs[mode]},
        )
        for table_type, base in bases.items()
        for mode in chosen
    ]
    for round_ in range(args.warmup_rounds):
        shutil.rmtree(work / "plain_parquet", ignore_errors=True)
        df.write.parquet(str(work / "plain_parquet"))
        for label, base, options in upserts:
            table = work / f"warmup_{label.lower()}"
            shutil.rmtree(table, ignore_errors=True)
            shutil.copytree(base, table)
            spark_write(df, str(table), "upsert", options)
            shutil.rmtree(table, ignore_errors=True)
        print(f"  warm-up round {round_ + 1} done (untimed)")

    names = ["spark_parquet_write"] + [f"shoal_spark_upsert.{label}" for label, _, _ in upserts]
    walls: dict[str, list[float]] = {name: [] for name in names}
    cpus: dict[str, list[float]] = {name: [] for name in names}
    phases: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in upserts}
    loads = [os.getloadavg()]
    for round_ in range(args.repeat):
        out = work / "plain_parquet"
        shutil.rmtree(out, ignore_errors=True)
        wall, cpu, _ = measured(functools.partial(df.write.parquet, str(out)))
        walls["spark_parquet_write"].append(wall)
        cpus["spark_parquet_write"].append(cpu)
        print(f"  df.write.parquet: {wall:.2f} s, CPU {cpu:.2f} s")
        for label, base, options in upserts:
            table = work / f"upserted_{label.lower()}_{round_}"
            shutil.copytree(base, table)
            upsert = functools.partial(spark_write, df, str(table), "upsert", options)
            wall, cpu, result = measured(upsert)
            walls[f"shoal_spark_upsert.{label}"].append(wall)
            cpus[f"shoal_spark_upsert.{label}"].append(cpu)
            phases[label].append(result.timings)
            stats = result.metadata.write_stats()
            print(
                f"  {label} upsert: {wall:.2f} s, CPU {cpu:.2f} s ({len(stats)} files written, "
                f"{sum(s.numUpdateWrites for s in stats):,} updates, "
                f"{sum(s.numInserts for s in stats):,} inserts)"
            )
            shutil.rmtree(table, ignore_errors=True)
        loads.append(os.getloadavg())
    plain, plain_cpu = min(walls["spark_parquet_write"]), min(cpus["spark_parquet_write"])
    print(f"df.write.parquet: {plain:.2f} s, CPU {plain_cpu:.2f} s")
    report: dict = {
        "rows": args.rows,
        "upsert_rows": args.upsert_rows,
        "index": args.index,
        "input": args.input,
        "cpus": os.cpu_count(),
        "load_averages": loads,
        "seconds": {name: min(v) for name, v in walls.items()},
        "cpu_seconds": {name: min(v) for name, v in cpus.items()},
        "phases": {},
        "ratios": {},
        "cpu_ratios": {},
        "round_ratios": {},
        "median_round_ratios": {},
    }
    for table_type, _, _ in upserts:
        name = f"shoal_spark_upsert.{table_type}"
        best = walls[name].index(min(walls[name]))
        ratio, cpu_ratio = min(walls[name]) / plain, min(cpus[name]) / plain_cpu
        rounds = [w / p for w, p in zip(walls[name], walls["spark_parquet_write"], strict=True)]
        print(
            f"shoal.spark.write upsert, {table_type}: {min(walls[name]):.2f} s, CPU {min(cpus[name]):.2f} s"
        )
        for phase, seconds in phases[table_type][best].items():
            print(f"  {phase:<20} {seconds:.2f} s")
        print(f"ratio (shoal upsert / parquet write), {table_type}: {ratio:.2f}, CPU {cpu_ratio:.2f}")
        print(
            f"  each round's own ratio: {', '.join(f'{r:.2f}' for r in rounds)}; "
            f"median {statistics.median(rounds):.2f}"
        )
        report["round_ratios"][table_type] = rounds
        report["median_round_ratios"][table_type] = statistics.median(rounds)
        report["phases"][table_type] = phases[table_type][best]
        report["ratios"][table_type] = ratio
        report["cpu_ratios"][table_type] = cpu_ratio
    print(f"load average (1, 5, 15 min) before and after each round: {loads}")
    # The driver process's peak resident memory over the whole run (the base tables are made by
    # an earlier run with --keep-data, or it includes them).
    report["driver_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"driver peak RSS: {report['driver_peak_rss_mb']:.0f} MB")
    spark.stop()

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    if not args.keep_data:
        shutil.rmtree(work, ignore_errors=True)


def measured(run: Callable[[], T]) -> tuple[float, float, T]:
    """Wall seconds, CPU seconds of this process and its descendants (the JVM and its Python
    workers), and the result of ``run()``."""
    cpu0, wall0 = session_cpu_seconds(), time.perf_counter()
    result = run()
    return time.perf_counter() - wall0, session_cpu_seconds() - cpu0, result


def session_cpu_seconds() -> float:
    """User and system CPU seconds of this process and every live descendant (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        pid = int(entry)
        parent[pid] = int(fields[1])
        # utime, stime, and those of waited-for children (Python workers that exited)
        used[pid] = sum(int(x) for x in fields[11:15]) / tick
    total, stack = 0.0, [os.getpid()]
    while stack:
        pid = stack.pop()
        total += used.get(pid, 0.0)
        stack.extend(child for child, p in parent.items() if p == pid)
    return total


if __name__ == "__main__":
    main()
