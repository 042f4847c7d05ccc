"""What Spark's own machinery costs a shoal write, measured without shoal: the jobs a Spark
upsert runs, with trivial Python functions in place of shoal's, against ``df.write.parquet`` of
the same records (the spark_upsert.py peer), in one local[2] session.

    .venv/bin/python benches/spark_floor.py [--rows 1000000] [--repeat 3]

Jobs: a scan alone; an Arrow UDF computing a route column from the key columns; a shuffle by a
route column into 30 tasks or 4; each followed by a ``mapInArrow`` function that only counts its
rows. Then packed records: a ``mapInArrow`` over whole records that cuts each batch by a route
value and packs each route's records as one Arrow IPC stream, a shuffle of those packed rows
into 4 tasks sorted by route, and a ``mapInArrow`` that unpacks and counts them (what shoal's
write did until 2026-11-23); the same packing into a file per task instead, whose runs 4 tasks
read back and count (what shoal's write does: it hands packed records over through storage);
and the key pass alone (a ``mapInArrow`` over the key columns, one task per core). The key pass
plus the packed files is the floor under a write that hands its records to Python write tasks.
Last, a route computed by Spark alone (a broadcast join of half the keys with their routes, a
hash for the rest), then the shuffle of rows sorted by route and a ``mapInArrow``:
the floor of a write whose routes the JVM could compute from a tagging pass's results.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import functions as F
from pyspark.sql.functions import arrow_udf
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType
from rich.console import Console
from rich.table import Table as RichTable

from compare import make_data, make_upsert
from shoal.spark import local_session

COUNT_SCHEMA = StructType([StructField("n", LongType())])


def route(keys: pa.Array) -> pa.Array:
    """A route value per row from the key struct, as cheap as a function can be."""
    lengths = pc.binary_length(keys.field(0)).to_numpy(zero_copy_only=False)
    return pa.array((lengths % 30).astype(np.int32))


def count_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield pa.record_batch([pa.array([sum(b.num_rows for b in batches)], pa.int64())], names=["n"])


PACKED_SCHEMA = StructType([StructField("r", IntegerType()), StructField("b", BinaryType())])


def packed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each batch cut by a cheap route value, each route's rows as one Arrow IPC stream."""
    for batch in batches:
        table = pa.Table.from_batches([batch])
        lengths = pc.binary_length(table.column(0)).to_numpy(zero_copy_only=False)
        routes = ((lengths * 7 + np.arange(len(lengths))) % 30).astype(np.int32)
        order = np.argsort(routes, kind="stable")
        table, routes = table.take(pa.array(order)), routes[order]
        cuts = np.concatenate([[0], np.flatnonzero(routes[1:] != routes[:-1]) + 1, [len(routes)]])
        values, payloads = [], []
        for start, end in itertools.pairwise(cuts.tolist()):
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as stream:
                stream.write_table(table.slice(start, end - start))
            values.append(int(routes[start]))
            payloads.append(sink.getvalue().to_pybytes())
        yield pa.record_batch(
            [pa.array(values, pa.int32()), pa.array(payloads, pa.binary())], names=["r", "b"]
        )


RUNS_SCHEMA = StructType(
    [
        StructField("r", IntegerType()),
        StructField("p", StringType()),
        StructField("o", LongType()),
        StructField("n", LongType()),
    ]
)


def packed_to_file(directory: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """:func:`packed`'s streams appended to one file per task; yields (route, file, offset,
    length) of each."""
    path = f"{directory}/{uuid.uuid4().hex}.arrow"
    runs: list[tuple[int, int, int]] = []
    with pa.OSFile(path, "wb") as sink:
        for batch in packed(batches):
            for route, payload in zip(batch.column(0).to_pylist(), batch.column(1), strict=True):
                runs.append((route, sink.tell(), len(payload.as_buffer())))
                sink.write(payload.as_buffer())
    route, offset, length = zip(*runs, strict=True) if runs else ((), (), ())
    yield pa.record_batch(
        [pa.array(route, pa.int32()), pa.array([path] * len(runs)), pa.array(offset), pa.array(length)],
        names=["r", "p", "o", "n"],
    )


def through_files(spark, df, directory: str) -> None:  # type: ignore[no-untyped-def]
    """Packs into a file per task; then 4 tasks read their routes' runs back and count."""
    runs = df.mapInArrow(functools.partial(packed_to_file, directory), RUNS_SCHEMA).collect()
    layout: list[list[tuple[str, int, int]]] = [[] for _ in range(4)]
    for run in sorted(runs, key=lambda r: (r.r, r.p, r.o)):
        layout[run.r % 4].append((run.p, run.o, run.n))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = 0
        for batch in batches:
            for task in batch.column(0).to_pylist():
                for path, offset, length in layout[task]:
                    with pa.OSFile(path) as f:
                        f.seek(offset)
                        rows += pa.ipc.open_stream(f.read_buffer(length)).read_all().num_rows
        yield pa.record_batch([pa.array([rows], pa.int64())], names=["n"])

    spark.range(0, 4, 1, 4).mapInArrow(read, COUNT_SCHEMA).collect()
    for path in Path(directory).iterdir():
        path.unlink()


def unpacked_count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    rows = sum(pa.ipc.open_stream(p.as_buffer()).read_all().num_rows for b in batches for p in b.column(1))
    yield pa.record_batch([pa.array([rows], pa.int64())], names=["n"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="shoal-spark-floor-"))
    upsert = make_upsert(make_data(5 * args.rows), args.rows)
    source = work / "input"
    source.mkdir()
    per_file = -(-upsert.num_rows // 4)
    for i in range(4):
        pq.write_table(upsert.slice(i * per_file, per_file), source / f"part-{i}.parquet")
    spark = local_session(
        "local[2]", conf={"spark.driver.memory": "6g", "spark.ui.showConsoleProgress": "false"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.execution.arrow.maxBytesPerBatch", str(2**31 - 1))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50000")
    df = spark.read.parquet(str(source))
    udf = arrow_udf(route, IntegerType())  # type: ignore[call-overload]
    keys = F.struct("key", "part")

    # Half the records' keys with a route each, as a tagging pass could hand them to the JVM: a
    # route computed by Spark alone (a broadcast join for these, a hash for the others).
    tagged = upsert.select(["key"]).take(pa.array(np.arange(0, upsert.num_rows, 2)))
    tagged = tagged.append_column("t", pa.array(np.arange(tagged.num_rows) % 30, pa.int32()))
    tags = spark.createDataFrame(tagged.to_pandas()).cache()
    tags.count()
    jvm_routed = df.join(F.broadcast(tags), "key", "left").withColumn(
        "r", F.coalesce(F.col("t"), F.abs(F.hash("key")) % 30)
    )

    packed_dir = work / "packed"
    packed_dir.mkdir()

    def noop(frame):  # type: ignore[no-untyped-def]
        frame.write.format("noop").mode("overwrite").save()

    jobs: dict[str, Callable[[], object]] = {
        "df.write.parquet (the peer)": lambda: df.write.mode("overwrite").parquet(str(work / "out")),
        "scan": lambda: noop(df),
        "scan + route UDF": lambda: noop(df.withColumn("r", udf(keys))),
        "scan + mapInArrow (no shuffle)": lambda: df.mapInArrow(count_rows, COUNT_SCHEMA).collect(),
        "shuffle into 30 tasks + mapInArrow": lambda: (
            df.withColumn("r", F.abs(F.hash("key")) % 30)
            .repartition(30, "r")
            .mapInArrow(count_rows, COUNT_SCHEMA)
            .collect()
        ),
        "shuffle into 4 tasks + mapInArrow": lambda: (
            df.withColumn("r", F.abs(F.hash("key")) % 30)
            .repartition(4, "r")
            .mapInArrow(count_rows, COUNT_SCHEMA)
            .collect()
        ),
        "route UDF + shuffle into 4 sorted + mapInArrow": lambda: (
            df.withColumn("r", udf(keys))
            .repartition(4, "r")
            .sortWithinPartitions("r")
            .mapInArrow(count_rows, COUNT_SCHEMA)
            .collect()
        ),
        "route in the JVM (broadcast join + hash) + shuffle into 4 sorted + mapInArrow": lambda: (
            jvm_routed.repartition(4, "r")
            .sortWithinPartitions("r")
            .mapInArrow(count_rows, COUNT_SCHEMA)
            .collect()
        ),
        "route in the JVM (broadcast join + hash) + shuffle into 4 + mapInArrow (unsorted)": lambda: (
            jvm_routed.repartition(4, "r").mapInArrow(count_rows, COUNT_SCHEMA).collect()
        ),
        "key pass (key columns, one task per core)": lambda: (
            df.select("key", "part").coalesce(2).mapInArrow(count_rows, COUNT_SCHEMA).collect()
        ),
        "pack by route into a file per task + 4 tasks read their runs + unpack": lambda: through_files(
            spark, df, str(packed_dir)
        ),
        "pack by route + shuffle packed rows into 4 sorted + unpack": lambda: (
            df.mapInArrow(packed, PACKED_SCHEMA)
            .repartition(4, "r")
            .sortWithinPartitions("r")
            .mapInArrow(unpacked_count, COUNT_SCHEMA)
            .collect()
        ),
    }
    for job in jobs.values():  # warm-up
        job()
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, job in jobs.items():
            t0 = time.perf_counter()
            job()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
    table = RichTable(title=f"Spark jobs over {args.rows:,} records, best of {args.repeat} (local[2])")
    table.add_column("job")
    table.add_column("seconds", justify="right")
    for name, seconds in best.items():
        table.add_row(name, f"{seconds:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
