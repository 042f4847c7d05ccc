"""The main job: a CDC pipeline.

A generated change stream of an RDBMS ``orders`` table (inserts, updates, deletes, duplicates,
late and out-of-order events, in micro-batches) is upserted into a merge-on-read table, compacted
on schedule; an incremental consumer keeps a downstream aggregate (live orders and revenue per
customer) up to date from only the changes. At the end the downstream result is checked against
a recomputation from scratch, the table against the source database, and hudi-rs reads the same
rows as shoal.

The pipeline runs on local Spark (every task in ``mapInArrow``) and then, by default, the same
change stream through the embedded engine: both engines must produce the same tables.

    python -m shoal.demo [--engine both|spark|embedded] [--batches N] [--orders N] [--path DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

import shoal
from shoal.demo.changes import ChangeStream
from shoal.demo.consumer import Consumer, aggregate
from shoal.demo.engines import Engine, LocalEngine, SparkEngine

# Wide enough for the step table when the output is not a terminal (CI logs).
console = Console(width=None if Console().is_terminal else 140)
SOURCE_OPTIONS = {
    # Compaction on schedule: after every third delta commit.
    "hoodie.compact.inline.trigger.strategy": "NUM_COMMITS",
    "hoodie.compact.inline.max.delta.commits": "3",
}


def run_pipeline(
    engine: Engine, root: Path, batches: int, seed: int, orders: int = 20_000
) -> tuple[bool, pa.Table]:
    """Runs the whole pipeline on ``engine`` under ``root`` (``orders`` in the first batch, a
    fifth as many change events in each later one); returns (checks passed, the table's rows)."""
    console.rule(f"CDC pipeline on the {engine.name} engine")
    source = str(root / "orders")
    shoal.Table.create(
        source,
        name="orders",
        table_type="MERGE_ON_READ",
        record_key="order_id",
        partition_by="region",
        ordering_field="updated_at",
        options=SOURCE_OPTIONS,
    )
    stream = ChangeStream(seed=seed, first_batch_orders=orders, batch_events=max(1, orders // 5))
    consumer = Consumer(str(root / "downstream"), engine)
    steps = RichTable(title=f"{engine.name}: ingestion, compaction and the incremental consumer")
    for col in ("batch", "events", "ins/upd/del", "late/dup", "delta commit", "slices/logs", "ms"):
        steps.add_column(col, justify="right")
    steps.add_column("compaction")
    steps.add_column("consumer: changed/deleted/customers", justify="right")
    for n in range(batches):
        batch, stats = stream.next_batch(last=n == batches - 1)
        started = time.perf_counter()
        instant = engine.write(source, batch, "upsert")
        compactions = engine.compact_if_due(source)
        ingest_ms = (time.perf_counter() - started) * 1000
        consumed = consumer.run(source)
        table = shoal.Table(source)
        slices = table.file_slices()
        logs = sum(len(s.log_files) for s in slices)
        steps.add_row(
            str(n + 1),
            f"{batch.num_rows:,}",
            f"{stats.inserts}/{stats.updates}/{stats.deletes}",
            f"{stats.late}/{stats.duplicates}",
            instant or "-",
            f"{len(slices)}/{logs}",
            f"{ingest_ms:.0f}",
            ", ".join(compactions) or "-",
            "-" if consumed is None else f"{consumed.changed}/{consumed.deleted}/{consumed.customers}",
        )
    console.print(steps)
    return _check(engine, source, consumer, stream), engine.read(source, columns=_SOURCE_COLUMNS)


_SOURCE_COLUMNS = ["order_id", "customer_id", "region", "status", "amount", "updated_at"]


def _check(engine: Engine, source: str, consumer: Consumer, stream: ChangeStream) -> bool:
    ok = True
    table = engine.read(source, columns=_SOURCE_COLUMNS)
    truth = stream.source_rows().select(_SOURCE_COLUMNS)
    same_as_source = _rows(table, "order_id") == _rows(truth, "order_id")
    ok &= _verdict(f"table equals the source database ({truth.num_rows:,} live orders)", same_as_source)
    downstream = engine.read(consumer.totals, columns=aggregate(truth).column_names)
    recomputed = aggregate(table)
    ok &= _verdict(
        f"downstream aggregate ({downstream.num_rows:,} customers) equals a recomputation from scratch",
        _close(_rows(downstream, "customer_id"), _rows(recomputed, "customer_id")),
    )
    try:
        from hudi import HudiTableBuilder
    except ImportError:
        console.print("(install `hudi` to cross-check with hudi-rs)")
        return ok
    theirs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(source).build().read())
    same = _rows(theirs.select(_SOURCE_COLUMNS), "order_id") == _rows(table, "order_id")
    ok &= _verdict("hudi-rs reads the same rows", same)
    return ok


def _rows(table: pa.Table, key: str) -> list[dict[str, Any]]:
    return table.sort_by(key).to_pylist()


def _close(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """Equal rows, with revenue sums allowed a rounding difference."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.keys() != y.keys():
            return False
        for k, v in x.items():
            differs = abs(v - y[k]) > 0.011 if isinstance(v, float) else v != y[k]
            if differs:
                return False
    return True


def _verdict(what: str, good: bool) -> bool:
    console.print(f"{'[green]ok[/]' if good else '[red]FAILED[/]'}  {what}")
    return good


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shoal.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["both", "spark", "embedded"], default=None)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--orders", type=int, default=20_000, help="orders in the first batch")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--path", default=None, help="where to put the tables (default: a temp dir)")
    args = parser.parse_args(argv)
    root = Path(args.path or tempfile.mkdtemp(prefix="shoal-demo-"))
    engine_choice = args.engine or ("both" if _has_spark() else "embedded")
    console.print(f"tables under {root}")
    results: dict[str, pa.Table] = {}
    ok = True
    if engine_choice in ("both", "spark"):
        from shoal.spark import local_session

        started = time.perf_counter()
        quiet = {"spark.ui.showConsoleProgress": "false"}
        spark = local_session("local[2]", app_name="shoal-demo", conf=quiet)
        spark.sparkContext.setLogLevel("ERROR")
        console.print(f"local Spark started in {time.perf_counter() - started:.1f} s")
        try:
            good, results["spark"] = run_pipeline(
                SparkEngine(spark), root / "spark", args.batches, args.seed, args.orders
            )
            ok &= good
        finally:
            spark.stop()
    if engine_choice in ("both", "embedded"):
        good, results["embedded"] = run_pipeline(
            LocalEngine(), root / "embedded", args.batches, args.seed, args.orders
        )
        ok &= good
    if len(results) == 2:
        ok &= _verdict(
            "Spark and the embedded engine wrote the same table",
            _rows(results["spark"], "order_id") == _rows(results["embedded"], "order_id"),
        )
    console.print("[bold green]pipeline OK[/]" if ok else "[bold red]pipeline FAILED[/]")
    return 0 if ok else 1


def _has_spark() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return True
