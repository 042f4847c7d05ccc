"""Spark reads of a shoal table vs Spark's own parquet scan of the same base files.

One local Spark session reads a 1M-row copy-on-write table (written by a local bulk insert) in
several ways, each forced to materialise every column (a ``noop`` write, and an xor of an xxhash64
over all columns):

* ``shoal.spark.read(spark, path)``: base-file slices through Spark's parquet reader,
* ``shoal.spark.read(..., native_scan=False)``: every slice as a ``mapInArrow`` task (the path
  merge-on-read slices with log files take),
* ``spark.read.format("shoal").load(path)``: the Python data source,
* two floors, which do no shoal work: a Python data source, and ``spark.range(n).mapInArrow``,
  that yield the table's rows as Arrow batches already in memory (memory-mapped Arrow IPC files
  in the declared schema, in the Spark partitions shoal packs the base files into). No reader
  built on those APIs can be faster than its floor,
* ``spark.read.parquet(<the table's latest base files>)`` (the reference).

Target: shoal / parquet <= 1.5. A projection of two columns is timed too (the data source gets
no column pruning from Spark: its ``columns`` option projects). Readers run in turn, round after
round, so that all see the same machine load; the best of ``--repeat`` rounds counts, for wall
time and for the CPU time of the Spark processes (the JVM and its Python workers, from
``/proc``), which other jobs on a shared machine disturb less. The load average is recorded
beside the times: on a loaded machine only the ratios mean much.

    .venv/bin/python benches/spark_read.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType
from rich.console import Console
from rich.table import Table as RichTable

import shoal
import shoal.spark
from compare import make_data
from shoal.spark.read import arrow_target, conform, spark_schema
from shoal.spark.splits import SplitPolicy, pack

console = Console(width=150)
TARGET = 1.5
BATCH_ROWS = 65_536


# ---- the floors: Arrow batches already in memory, no shoal work ---------------------------------


def write_ipc_copies(files: list[str], struct: StructType, work: Path) -> list[str]:
    """Each base file's rows as an Arrow IPC file in the schema Spark expects (batches of the
    size shoal streams), to be memory-mapped by the floor readers."""
    target = arrow_target(struct, "UTC")
    out = []
    for i, f in enumerate(files):
        dest = str(work / f"floor-{i}.arrow")
        with ipc.new_file(dest, target) as w:
            for batch in conform(pq.read_table(f), target):
                for offset in range(0, batch.num_rows, BATCH_ROWS):
                    w.write_batch(batch.slice(offset, BATCH_ROWS))
        out.append(dest)
    return out


def mapped_batches(path: str) -> Iterator[pa.RecordBatch]:
    with pa.memory_map(path) as source:
        reader = ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


class FloorPartition(InputPartition):
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths


class FloorReader(DataSourceReader):
    def __init__(self, groups: list[list[str]]) -> None:
        self.groups = groups

    def partitions(self) -> list[InputPartition]:
        return [FloorPartition(g) for g in self.groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FloorPartition)
        for path in partition.paths:
            yield from mapped_batches(path)


class FloorDataSource(DataSource):
    """``spark.read.format("floor").option("groups", json).option("schema", json)``: each
    group of files one Spark partition, as shoal packs the base files they copy."""

    @classmethod
    def name(cls) -> str:
        return "floor"

    def schema(self) -> StructType:
        return StructType.fromJson(json.loads(self.options["schema"]))

    def reader(self, schema: StructType) -> DataSourceReader:
        return FloorReader(json.loads(self.options["groups"]))


def floor_map_in_arrow(spark: SparkSession, groups: list[list[str]], struct: StructType) -> DataFrame:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                for path in groups[i]:
                    yield from mapped_batches(path)

    return spark.range(0, len(groups), 1, len(groups)).mapInArrow(run, struct)


# ---- actions --------------------------------------------------------------------------------------


def _noop(df: Callable[[], DataFrame]) -> Callable[[], None]:
    return lambda: df().write.format("noop").mode("overwrite").save()


def _hash_all(df: Callable[[], DataFrame]) -> Callable[[], None]:
    def run() -> None:
        frame = df()
        frame.select(F.bit_xor(F.xxhash64(*frame.columns))).collect()

    return run


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of process ``root`` and its descendants (the Spark JVM and its
    Python workers), reaped children included. Linux ``/proc`` only."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        # Fields after the command: state, ppid, ..., utime (14th of the line), stime, cutime, cstime.
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(x) for x in fields[11:15]) / tick
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [c for c, p in parents.items() if p == pid and c not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(times.get(pid, 0.0) for pid in tree)


def best_of(runs: dict[str, Callable[[], None]], repeat: int, jvm_pid: int) -> dict[str, tuple[float, float]]:
    """One warm-up round, then ``repeat`` rounds running each in turn; per run the best wall
    seconds and the best CPU seconds of the Spark processes (which load disturbs less)."""
    for run in runs.values():
        run()  # warm the Python workers, the JIT and the page cache
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            c0, t0 = tree_cpu_seconds(jvm_pid), time.perf_counter()
            run()
            walls[name].append(time.perf_counter() - t0)
            cpus[name].append(tree_cpu_seconds(jvm_pid) - c0)
    return {name: (min(walls[name]), min(cpus[name])) for name in runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default="benches/results/spark_read.json")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="shoal-spark-read-"))
    path = str(work / "t")
    table = shoal.Table.create(path, "bench", record_key="key", partition_by="part", ordering_field="ts")
    table.bulk_insert(make_data(args.rows))
    files = [table.storage.full_path(s.base_file.path) for s in table.file_slices() if s.base_file]
    console.rule(f"{args.rows:,} rows in {len(files)} base files, Spark {args.master}")

    spark = shoal.spark.local_session(
        args.master, app_name="shoal-bench", conf={"spark.ui.showConsoleProgress": "false"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    shoal.spark.register(spark)
    spark.dataSource.register(FloorDataSource)
    struct = spark_schema(pq.read_schema(files[0]).remove_metadata())
    floor_files = write_ipc_copies(files, struct, work)
    # The floors' Spark partitions hold the copies of the files shoal's hold.
    packed = pack([os.path.getsize(f) for f in files], SplitPolicy.of_session(spark))
    groups = [[floor_files[i] for i in tasks] for tasks in packed]
    floor = spark.read.format("floor").options(groups=json.dumps(groups), schema=struct.json())
    readers: dict[str, Callable[[], DataFrame]] = {
        "shoal.spark.read": lambda: shoal.spark.read(spark, path),
        "shoal.spark.read, native_scan=False": lambda: shoal.spark.read(spark, path, native_scan=False),
        "data source": lambda: spark.read.format("shoal").load(path),
        "floor: Python data source": lambda: floor.load(),
        "floor: mapInArrow": lambda: floor_map_in_arrow(spark, groups, struct),
        "parquet": lambda: spark.read.parquet(*files),
    }
    two = ["key", "ts"]
    projected: dict[str, Callable[[], DataFrame]] = {
        "shoal.spark.read": lambda: shoal.spark.read(spark, path, columns=two),
        "shoal.spark.read, native_scan=False": lambda: shoal.spark.read(
            spark, path, columns=two, native_scan=False
        ),
        "data source": lambda: spark.read.format("shoal").option("columns", ",".join(two)).load(path),
        "parquet": lambda: spark.read.parquet(*files).select(*two),
    }
    counts = {name: df().count() for name, df in readers.items()}
    assert set(counts.values()) == {args.rows}, counts

    jvm_pid = spark.sparkContext._gateway.proc.pid  # type: ignore[union-attr]
    load_before = os.getloadavg()
    results: dict[str, dict[str, float]] = {}
    cpu: dict[str, dict[str, float]] = {}
    for scan, frames in (("all columns", readers), ("2 columns", projected)):
        for how, action in (("noop", _noop), ("xxhash64 of every column", _hash_all)):
            if scan == "2 columns" and how == "noop":
                continue
            best = best_of({n: action(df) for n, df in frames.items()}, args.repeat, jvm_pid)
            results[f"{scan}, {how}"] = {name: wall for name, (wall, _) in best.items()}
            cpu[f"{scan}, {how}"] = {name: c for name, (_, c) in best.items()}
    load_after = os.getloadavg()
    spark.stop()
    shutil.rmtree(work)  # the table and the floors' copies: about 370 MB per million rows

    out_table = RichTable(title=f"Spark reads, {args.rows:,} rows (best of {args.repeat})")
    for col in ("scan", "reader", "wall s", "ratio", "CPU s", "CPU ratio", "target"):
        out_table.add_column(col)
    ratios: dict[str, float] = {}
    cpu_ratios: dict[str, float] = {}
    for scan, times in results.items():
        for name, seconds in times.items():
            ratio = seconds / times["parquet"]
            cpu_ratio = cpu[scan][name] / cpu[scan]["parquet"]
            if name != "parquet":
                ratios[f"{scan}: {name}"] = ratio
                cpu_ratios[f"{scan}: {name}"] = cpu_ratio
            target = "" if name == "parquet" or name.startswith("floor") else f"<= {TARGET}"
            out_table.add_row(
                scan,
                name,
                f"{seconds:.3f}",
                f"{ratio:.2f}",
                f"{cpu[scan][name]:.2f}",
                f"{cpu_ratio:.2f}",
                target,
            )
    console.print(out_table)
    console.print(f"load average (1, 5, 15 min): before {load_before}, after {load_after}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    report = {
        "rows": args.rows,
        "master": args.master,
        "repeat": args.repeat,
        "load_average": {"before": load_before, "after": load_after},
        "seconds": results,
        "cpu_seconds": cpu,
        "ratios": ratios,
        "cpu_ratios": cpu_ratios,
    }
    Path(args.out).write_text(json.dumps(report, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
