"""The demo pipeline on the embedded engine: create a table, upsert, delete, read back, and
check the result against what hudi-rs reads from the same files (when ``hudi`` is installed).

Run with ``python -m shoal.demo [path]``.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.table import Table as RichTable

import shoal

console = Console()
CITIES = ["san_francisco", "new_york", "chennai", "sao_paulo"]


def _trips(rng: random.Random, ids: range, ts: int) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "trip_id": pa.array([f"trip-{i:06d}" for i in ids]),
            "city": pa.array([CITIES[i % len(CITIES)] for i in ids]),
            "ts": pa.array([ts] * n, pa.int64()),
            "fare": pa.array([round(rng.uniform(5, 80), 2) for _ in ids]),
            "driver": pa.array([f"driver-{rng.randint(1, 50)}" for _ in ids]),
        }
    )


def _step(title: str, started: float, table: shoal.Table, instant: str | None = None) -> None:
    slices = table.file_slices()
    console.print(
        f"[bold]{title}[/]  instant={instant or '-'}  files={len(slices)}  "
        f"({(time.perf_counter() - started) * 1000:.0f} ms)"
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = args[0] if args else tempfile.mkdtemp(prefix="shoal-demo-") + "/trips"
    rng = random.Random(7)
    console.rule("shoal demo: copy-on-write table on the embedded engine")
    console.print(f"table path: {path}")

    t0 = time.perf_counter()
    table = shoal.Table.create(
        path, name="trips", record_key="trip_id", partition_by="city", ordering_field="ts"
    )
    _step("created", t0, table)

    t0 = time.perf_counter()
    instant = table.bulk_insert(_trips(rng, range(0, 10_000), ts=1))
    _step("bulk_insert 10,000 trips", t0, table, instant)

    t0 = time.perf_counter()
    updates = _trips(rng, range(9_000, 12_000), ts=2)  # 1,000 updates and 2,000 new trips
    instant = table.upsert(updates)
    _step("upsert 3,000 (1,000 updates, 2,000 inserts)", t0, table, instant)

    t0 = time.perf_counter()
    late = _trips(rng, range(9_000, 9_100), ts=0)  # late events: older than what the table holds
    instant = table.upsert(late)
    _step("upsert 100 late events (must not win)", t0, table, instant)

    t0 = time.perf_counter()
    instant = table.delete(
        pa.table(
            {
                "trip_id": [f"trip-{i:06d}" for i in range(0, 500)],
                "city": [CITIES[i % len(CITIES)] for i in range(0, 500)],
            }
        )
    )
    _step("delete 500 trips", t0, table, instant)

    t0 = time.perf_counter()
    result = table.read()
    console.print(
        f"[bold]snapshot read[/] {result.num_rows} rows in {(time.perf_counter() - t0) * 1000:.0f} ms"
    )

    summary = RichTable(title="trips per city")
    summary.add_column("city")
    summary.add_column("trips", justify="right")
    summary.add_column("avg fare", justify="right")
    grouped = result.group_by("city").aggregate([("trip_id", "count"), ("fare", "mean")]).sort_by("city")
    for row in grouped.to_pylist():
        summary.add_row(row["city"], str(row["trip_id_count"]), f"{row['fare_mean']:.2f}")
    console.print(summary)

    timeline = RichTable(title="timeline")
    for col in ("instant", "action", "state"):
        timeline.add_column(col)
    for entry in table.timeline:
        timeline.add_row(entry.time, entry.action, entry.state)
    console.print(timeline)

    expected_rows = 12_000 - 500
    late_won = pc.sum(
        pc.equal(
            result.filter(
                pc.is_in(result["trip_id"], pa.array([f"trip-{i:06d}" for i in range(9_000, 9_100)]))
            )["ts"],
            0,
        )
    ).as_py()
    ok = result.num_rows == expected_rows and not late_won
    try:
        from hudi import HudiTableBuilder

        oracle = pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read())
        same = oracle.num_rows == result.num_rows and set(oracle["trip_id"].to_pylist()) == set(
            result["trip_id"].to_pylist()
        )
        console.print(f"hudi-rs reads the same table: {'[green]yes[/]' if same else '[red]NO[/]'}")
        ok = ok and same
    except ImportError:
        console.print("(install `hudi` to cross-check with hudi-rs)")
    console.print(
        f"expected {expected_rows} rows, late events ignored: {'[green]ok[/]' if ok else '[red]FAILED[/]'}"
    )
    mor_ok = _merge_on_read(path + "_mor", rng)
    return 0 if ok and mor_ok else 1


def _merge_on_read(path: str, rng: random.Random) -> bool:
    """The same trips as a merge-on-read table: updates land in log files, reads merge them."""
    console.rule("merge-on-read: updates append to logs, snapshot reads merge")
    table = shoal.Table.create(
        path,
        name="trips_mor",
        table_type="MERGE_ON_READ",
        record_key="trip_id",
        partition_by="city",
        ordering_field="ts",
    )
    t0 = time.perf_counter()
    table.bulk_insert(_trips(rng, range(0, 10_000), ts=1))
    _step("bulk_insert 10,000 trips", t0, table)
    for round_no in range(2, 5):
        t0 = time.perf_counter()
        instant = table.upsert(_trips(rng, range(round_no * 1000, round_no * 1000 + 500), ts=round_no))
        logs = sum(len(s.log_files) for s in table.file_slices())
        _step(f"upsert 500 updates (delta commit {round_no - 1}), log files={logs}", t0, table, instant)
    snapshot = table.read()
    optimized = table.read(query_type="read_optimized")
    updated = pc.sum(pc.greater(snapshot["ts"], 1)).as_py()
    console.print(
        f"snapshot: {snapshot.num_rows} rows, {updated} carry updates from the logs; read-optimized "
        f"(base files only): {pc.sum(pc.greater(optimized['ts'], 1)).as_py()} updated"
    )
    ok = snapshot.num_rows == 10_000 and updated == 1_500
    try:
        from hudi import HudiTableBuilder

        oracle = pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read())
        same = sorted(zip(oracle["trip_id"].to_pylist(), oracle["ts"].to_pylist(), strict=True)) == sorted(
            zip(snapshot["trip_id"].to_pylist(), snapshot["ts"].to_pylist(), strict=True)
        )
        console.print(
            f"hudi-rs merges the logs to the same rows: {'[green]yes[/]' if same else '[red]NO[/]'}"
        )
        ok = ok and same
    except ImportError:
        pass
    console.print(f"merge-on-read check: {'[green]ok[/]' if ok else '[red]FAILED[/]'}")
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
