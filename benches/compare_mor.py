"""Merge-on-read against peers on the data of ``compare.py``, in one run; prints ratios.

    .venv/bin/python benches/compare_mor.py [--rows 1000000] [--upsert-rows 100000] [--repeat 3]

1. MOR upsert of ``--upsert-rows`` (half updates, half inserts) into the ``--rows`` table, against
   deltalake's merge of the same rows into the same data (target ratio <= 0.3).
2. Snapshot read of the MOR table with those updates still in log files, against hudi-rs reading
   the same table (target <= 0.8). Both read every column and merge the logs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
import shoal
from compare import make_data, make_upsert, report_ratios, time_upserts, timed

console = Console()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--upsert-rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="benches/results/compare_mor.json")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="shoal-bench-mor-"))
    data = make_data(args.rows)
    upsert = make_upsert(data, args.upsert_rows)
    results: dict[str, float] = {}
    console.rule(f"merge-on-read: {args.rows:,} rows, upsert of {args.upsert_rows:,} (half updates)")

    base = work / "mor_base"
    t = shoal.Table.create(
        str(base),
        name="bench",
        table_type="MERGE_ON_READ",
        record_key="key",
        partition_by="part",
        ordering_field="ts",
    )
    t.bulk_insert(data)

    fresh_copy = time_upserts(work, base, "mor_upsert", data, upsert, args.repeat, results, "mor_upsert")

    # The table as left by one upsert: updates in log files, inserts in base files.
    fresh_copy()
    table = shoal.Table(str(work / "mor_upsert"))
    table.upsert(upsert)
    logs = sum(len(s.log_files) for s in table.file_slices())
    results["mor_read.shoal"] = timed(lambda: shoal.Table(str(work / "mor_upsert")).read(), None, args.repeat)
    try:
        from hudi import HudiTableBuilder

        results["mor_read.hudi-rs"] = timed(
            lambda: HudiTableBuilder.from_base_uri(str(work / "mor_upsert")).build().read(), None, args.repeat
        )
    except ImportError:
        console.print("hudi not installed: skipping hudi-rs")

    ratios = {
        "MOR upsert: shoal / deltalake merge": ("mor_upsert.shoal", "mor_upsert.deltalake", "<= 0.3"),
        f"MOR snapshot read ({logs} log files): shoal / hudi-rs": (
            "mor_read.shoal",
            "mor_read.hudi-rs",
            "<= 0.8",
        ),
    }
    report_ratios("merge-on-read vs peers (best of runs)", results, ratios, args, Path(args.out))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
