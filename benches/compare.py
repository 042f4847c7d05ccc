"""shoal against its peers on the same data, in one run; prints ratios (shoal time / peer time).

    .venv/bin/python benches/compare.py [--rows 1000000] [--upsert-rows 100000] [--repeat 3]

Peers: pyarrow.dataset.write_dataset (bulk insert), deltalake merge (upsert), hudi-rs and
pyarrow (snapshot read), pyarrow (a lookup of ten record keys). Each measurement is the best of
``--repeat`` runs on fresh copies; the write comparisons alternate shoal's run and the peer's, so
both see the same machine load, and also record the best process CPU time (all threads), which
load disturbs less than wall time.
Install the peers with ``SHOAL_EXTRAS=bench bash .ci/setup``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from rich.console import Console
from rich.table import Table as RichTable

import shoal

console = Console()


def make_data(n: int, seed: int = 42, key_offset: int = 0) -> pa.Table:
    """key, partition of 10 values, ordering field, 6 payload columns."""
    rng = np.random.default_rng(seed)
    keys = [
        str(uuid.UUID(int=int(x) << 64 | (i + key_offset)))
        for i, x in enumerate(rng.integers(0, 2**63, n, dtype=np.int64))
    ]
    return pa.table(
        {
            "key": pa.array(keys),
            "part": pa.array([f"p{int(x)}" for x in rng.integers(0, 10, n)]),
            "ts": pa.array(rng.integers(0, 1_000_000, n), pa.int64()),
            "f1": pa.array(rng.random(n)),
            "f2": pa.array(rng.random(n)),
            "i1": pa.array(rng.integers(0, 1 << 40, n), pa.int64()),
            "i2": pa.array(rng.integers(0, 1 << 20, n), pa.int64()),
            "s1": pa.array([f"name-{int(x)}" for x in rng.integers(0, 100_000, n)]),
            "s2": pa.array([f"city-{int(x)}" for x in rng.integers(0, 1_000, n)]),
        }
    )


def make_upsert(base: pa.Table, n: int, seed: int = 7) -> pa.Table:
    """Half updates of existing keys (newer ts), half new keys."""
    rng = np.random.default_rng(seed)
    upd_idx = rng.choice(base.num_rows, n // 2, replace=False)
    updates = base.take(pa.array(upd_idx))
    updates = updates.set_column(
        updates.column_names.index("ts"), "ts", pa.array(np.full(updates.num_rows, 2_000_000), pa.int64())
    )
    updates = updates.set_column(
        updates.column_names.index("f1"), "f1", pa.array(rng.random(updates.num_rows))
    )
    inserts = make_data(n - n // 2, seed=seed + 1, key_offset=10**9)
    return pa.concat_tables([updates, inserts])


def report_ratios(
    title: str,
    results: dict[str, float],
    ratios: dict[str, tuple[str, str, str]],
    args: argparse.Namespace,
    out: Path,
    cpu: dict[str, float] | None = None,
) -> None:
    """Prints ``label -> (ours, peer, target)`` as a table of times and ratios (wall, and CPU
    where ``cpu`` has both sides), and saves them with the machine's load averages."""
    cpu = cpu or {}
    table = RichTable(title=title)
    for col in ("comparison", "shoal s", "peer s", "ratio", "target", "CPU ratio"):
        table.add_column(col)
    report: dict = {
        "rows": args.rows,
        "upsert_rows": args.upsert_rows,
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "seconds": results,
        "cpu_seconds": cpu,
        "ratios": {},
        "cpu_ratios": {},
    }
    for label, (ours, peer, target) in ratios.items():
        if ours in results and peer in results:
            ratio = results[ours] / results[peer]
            report["ratios"][label] = ratio
            cpu_ratio = "-"
            if ours in cpu and peer in cpu:
                report["cpu_ratios"][label] = cpu[ours] / cpu[peer]
                cpu_ratio = f"{cpu[ours] / cpu[peer]:.2f}"
            row = (f"{results[ours]:.3f}", f"{results[peer]:.3f}", f"{ratio:.2f}", target, cpu_ratio)
            table.add_row(label, *row)
    console.print(table)
    console.print(f"load average (1, 5, 15 min) at the end: {os.getloadavg()}, {os.cpu_count()} CPUs")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    console.print(f"wrote {out}")


def time_upserts(
    work: Path,
    base: Path,
    copy_name: str,
    data: pa.Table,
    upsert: pa.Table,
    repeat: int,
    results: dict[str, float],
    prefix: str,
    cpu: dict[str, float] | None = None,
) -> Callable[[], None]:
    """Times shoal's upsert into fresh copies of the table at ``base`` and deltalake's merge of
    the same rows into the same data, run after run, as ``<prefix>.shoal`` /
    ``<prefix>.deltalake`` (best wall seconds in ``results``, best CPU seconds in ``cpu``).
    Returns the function that makes a fresh copy (at ``work/copy_name``)."""

    def fresh_copy() -> None:
        shutil.rmtree(work / copy_name, ignore_errors=True)
        shutil.copytree(base, work / copy_name)

    runs: dict[str, Run] = {
        f"{prefix}.shoal": (lambda: shoal.Table(str(work / copy_name)).upsert(upsert), fresh_copy)
    }
    merge = deltalake_merge(work, data, upsert)
    if merge is None:
        console.print("deltalake not installed: skipping the upsert comparison")
    else:
        runs[f"{prefix}.deltalake"] = merge
    record(timed_alternately(runs, repeat), results, cpu)
    return fresh_copy


# A measured function and the setup run before each of its runs (not measured).
Run = tuple[Callable[[], object], Callable[[], None] | None]


def deltalake_merge(work: Path, data: pa.Table, upsert: pa.Table) -> Run | None:
    """deltalake's merge (update all matched, insert all others) of ``upsert`` into a fresh copy
    of a Delta table holding ``data``, and the setup making that copy; None when deltalake is not
    installed."""
    try:
        import deltalake
    except ImportError:
        return None
    base = work / "delta_base"
    if not base.exists():
        deltalake.write_deltalake(str(base), data, partition_by=["part"])

    def fresh_copy() -> None:
        shutil.rmtree(work / "delta_upsert", ignore_errors=True)
        shutil.copytree(base, work / "delta_upsert")

    def merge() -> None:
        dt = deltalake.DeltaTable(str(work / "delta_upsert"))
        (
            dt.merge(
                upsert, predicate="t.key = s.key AND t.part = s.part", source_alias="s", target_alias="t"
            )
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    return merge, fresh_copy


def deltalake_overwrite(work: Path, data: pa.Table, rows: pa.Table, predicate: str) -> Run | None:
    """deltalake's overwrite of the rows matching ``predicate`` with ``rows``, into a fresh copy
    of the Delta table holding ``data``; None when deltalake is not installed."""
    merge = deltalake_merge(work, data, rows)  # makes the base table and its copier
    if merge is None:
        return None
    import deltalake

    def overwrite() -> None:
        deltalake.write_deltalake(str(work / "delta_upsert"), rows, mode="overwrite", predicate=predicate)

    return overwrite, merge[1]


def deltalake_merge_seconds(work: Path, data: pa.Table, upsert: pa.Table, repeat: int) -> float | None:
    """Best time of :func:`deltalake_merge`; None when deltalake is not installed."""
    merge = deltalake_merge(work, data, upsert)
    return None if merge is None else timed(*merge, repeat)


def timed_alternately(runs: dict[str, Run], repeat: int) -> dict[str, tuple[float, float]]:
    """Runs each of ``runs`` in turn, ``repeat`` rounds, so that all see the same machine load;
    per name, the best wall seconds and the best process CPU seconds (all threads)."""
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, (fn, setup) in runs.items():
            if setup:
                setup()
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            walls[name].append(time.perf_counter() - w0)
            cpus[name].append(time.process_time() - c0)
    return {name: (min(walls[name]), min(cpus[name])) for name in runs}


def record(
    best: dict[str, tuple[float, float]], results: dict[str, float], cpu: dict[str, float] | None
) -> None:
    for name, (wall, cpu_seconds) in best.items():
        results[name] = wall
        if cpu is not None:
            cpu[name] = cpu_seconds


def timed(fn: Callable[[], object], setup: Callable[[], None] | None, repeat: int) -> float:
    return timed_alternately({"run": (fn, setup)}, repeat)["run"][0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--upsert-rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="benches/results/compare.json")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="shoal-bench-"))
    data = make_data(args.rows)
    upsert = make_upsert(data, args.upsert_rows)
    results: dict[str, float] = {}
    cpu: dict[str, float] = {}
    console.rule(f"{args.rows:,} rows, upsert of {args.upsert_rows:,} (half updates)")
    console.print(f"load average (1, 5, 15 min) at the start: {os.getloadavg()}, {os.cpu_count()} CPUs")

    # -- bulk insert ------------------------------------------------------------------------
    def fresh_dir(name: str) -> Path:
        p = work / name
        shutil.rmtree(p, ignore_errors=True)
        return p

    def shoal_bulk() -> None:
        t = shoal.Table.create(
            str(work / "shoal_bulk"), name="bench", record_key="key", partition_by="part", ordering_field="ts"
        )
        t.bulk_insert(data)

    def pyarrow_bulk() -> None:
        ds.write_dataset(
            data,
            work / "pa_bulk",
            format="parquet",
            partitioning=["part"],
            partitioning_flavor="hive",
            existing_data_behavior="overwrite_or_ignore",
        )

    bulk_runs: dict[str, Run] = {
        "bulk_insert.shoal": (shoal_bulk, lambda: fresh_dir("shoal_bulk") and None),
        "bulk_insert.pyarrow": (pyarrow_bulk, lambda: fresh_dir("pa_bulk") and None),
    }
    record(timed_alternately(bulk_runs, args.repeat), results, cpu)

    # -- upsert -----------------------------------------------------------------------------
    base_shoal = work / "shoal_base"
    t = shoal.Table.create(
        str(base_shoal), name="bench", record_key="key", partition_by="part", ordering_field="ts"
    )
    t.bulk_insert(data)

    copy_shoal = time_upserts(
        work, base_shoal, "shoal_upsert", data, upsert, args.repeat, results, "upsert", cpu
    )

    # -- insert_overwrite of one partition ----------------------------------------------------
    # New contents for partition p0 (as many new rows as it holds): shoal's replace commit
    # against deltalake's overwrite with a partition predicate, each into a fresh copy.
    refreshed = make_data(int(pc.sum(pc.equal(data["part"], "p0")).as_py()), seed=9)
    refreshed = refreshed.set_column(1, "part", pa.array(["p0"] * refreshed.num_rows))
    overwrite_runs: dict[str, Run] = {
        "overwrite.shoal": (
            lambda: shoal.Table(str(work / "shoal_upsert")).insert_overwrite(refreshed),
            copy_shoal,
        )
    }
    delta_overwrite = deltalake_overwrite(work, data, refreshed, "part = 'p0'")
    if delta_overwrite is not None:
        overwrite_runs["overwrite.deltalake"] = delta_overwrite
    record(timed_alternately(overwrite_runs, args.repeat), results, cpu)

    # -- snapshot read ----------------------------------------------------------------------
    copy_shoal()
    shoal.Table(str(work / "shoal_upsert")).upsert(upsert)
    results["read.shoal"] = timed(lambda: shoal.Table(str(work / "shoal_upsert")).read(), None, args.repeat)
    results["read.pyarrow"] = timed(
        lambda: ds.dataset(work / "pa_bulk", format="parquet", partitioning="hive").to_table(),
        None,
        args.repeat,
    )
    try:
        from hudi import HudiTableBuilder

        results["read.hudi-rs"] = timed(
            lambda: HudiTableBuilder.from_base_uri(str(work / "shoal_upsert")).build().read(),
            None,
            args.repeat,
        )
    except ImportError:
        console.print("hudi not installed: skipping hudi-rs")

    # -- key lookup -------------------------------------------------------------------------
    # Ten record keys (random UUIDs: every file's key range holds them): shoal reads the files
    # whose footer bloom filters admit a key, pyarrow's dataset every file its row-group
    # statistics cannot rule out.
    keys = upsert.column("key").slice(0, 10).to_pylist()
    results["lookup.shoal"] = timed(
        lambda: shoal.Table(str(work / "shoal_upsert")).read(filters=[("key", "in", keys)]), None, args.repeat
    )
    results["lookup.pyarrow"] = timed(
        lambda: ds.dataset(work / "pa_bulk", format="parquet", partitioning="hive").to_table(
            filter=pc.field("key").isin(keys)
        ),
        None,
        args.repeat,
    )

    ratios = {
        "bulk_insert: shoal / pyarrow.write_dataset": ("bulk_insert.shoal", "bulk_insert.pyarrow", "<= 1.5"),
        "upsert: shoal / deltalake merge": ("upsert.shoal", "upsert.deltalake", "<= 0.7"),
        "insert_overwrite of a partition: shoal / deltalake overwrite": (
            "overwrite.shoal",
            "overwrite.deltalake",
            "-",
        ),
        "snapshot read: shoal / hudi-rs": ("read.shoal", "read.hudi-rs", "-"),
        "snapshot read: shoal / pyarrow dataset": ("read.shoal", "read.pyarrow", "-"),
        "key lookup (10 keys): shoal / pyarrow dataset": ("lookup.shoal", "lookup.pyarrow", "-"),
    }
    report_ratios("shoal vs peers (best of runs)", results, ratios, args, Path(args.out), cpu)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
