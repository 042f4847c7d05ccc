"""Compaction writes a slice's new base file with the base file's records in place (a log record
where the base record it replaces was, records only the logs hold after them, deleted ones
gone) and copies the column chunks no log record changed; the rows shoal and hudi-rs read, and
the commit's statistics, are those of a full rewrite."""

from __future__ import annotations

import glob
import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import column_chunk_bytes

COLUMNS = ["id", "city", "ts", "fare", "note"]


def _data(ids, ts=1, fare=None, city="sf") -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array([f"id-{i:05d}" for i in ids]),
            "city": pa.array([city] * len(ids)),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "fare": pa.array(fare if fare is not None else [i / 7 for i in ids], pa.float64()),
            "note": pa.array([f"note {i % 89}" for i in ids]),
        }
    )


def _base_files(path: str) -> list[str]:
    return sorted(
        glob.glob(os.path.join(path, "sf", "*.parquet")),
        key=lambda f: f.rsplit("_", 1)[1].removesuffix(".parquet"),
    )


def test_compaction_keeps_base_order_and_copies_unchanged_chunks(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "t"),
        name="trips",
        table_type="MERGE_ON_READ",
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        # One bucket: new records join the file group's logs, as Hudi's bucket index logs them.
        options={"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "1"},
    )
    t.bulk_insert(_data(range(3000)))
    assert len(_base_files(t.path)) == 1
    # Logs: updates of fare (a new ts), a delete, new records, and a late update that loses.
    updates = _data(range(0, 3000, 25), ts=5, fare=[-1.0] * 120)
    t.upsert(updates)
    t.delete(_data([7, 8]))
    inserts = _data(range(9000, 9050), ts=5)
    t.upsert(inserts)
    t.upsert(_data([25], ts=2, fare=[99.0]))  # older than the logged ts=5: loses
    before = t.read(columns=COLUMNS)

    (instant,) = t.compact()
    new_file = _base_files(t.path)[-1]
    assert instant in os.path.basename(new_file)
    after = t.read(columns=COLUMNS)
    assert rows_by(after, COLUMNS, ["id"]) == rows_by(before, COLUMNS, ["id"])
    assert rows_by(hudi_rs_read(t.path), COLUMNS, ["id"]) == rows_by(before, COLUMNS, ["id"])

    stored = pq.read_table(new_file)
    ids = [f"id-{i:05d}" for i in range(3000) if i not in (7, 8)] + inserts.column("id").to_pylist()
    assert stored.column("id").to_pylist() == ids
    fares = dict(zip(stored.column("id").to_pylist(), stored.column("fare").to_pylist(), strict=True))
    assert fares["id-00025"] == -1.0 and fares["id-00050"] == -1.0 and fares["id-00001"] == 1 / 7
    # Updated records keep the commit time of the write that logged them.
    times = dict(
        zip(stored.column("id").to_pylist(), stored.column("_hoodie_commit_time").to_pylist(), strict=True)
    )
    assert times["id-00025"] != times["id-00001"]

    md = pq.read_metadata(new_file)
    assert md.created_by.startswith("parquet-rs")
    assert md.num_row_groups == 2 and md.row_group(1).num_rows == 50
    # The deletes change every chunk of the first row group; with no delete the id column would be
    # copied (checked below on a second compaction).
    assert md.metadata[b"hoodie_min_record_key"] == b"id-00000"
    assert md.metadata[b"hoodie_max_record_key"] == b"id-09049"

    # The commit reports what a full rewrite reports.
    commit = json.loads((tmp_path / "t" / ".hoodie" / f"{instant}.commit").read_text())
    (stat,) = [s for stats in commit["partitionToWriteStats"].values() for s in stats]
    assert stat["numWrites"] == 3048
    assert stat["numUpdateWrites"] == 120
    assert stat["numInserts"] == 50
    assert stat["numDeletes"] == 2

    # A second round of updates only: the stored rows keep their row group, and every column the
    # updates leave alone is the previous base file's chunk, byte for byte.
    t.upsert(_data(range(1, 3000, 50), ts=9, fare=[5.0] * 60))
    t.compact()
    newest = _base_files(t.path)[-1]
    assert newest != new_file
    for column in ("_hoodie_record_key", "_hoodie_partition_path", "id", "city", "note"):
        assert column_chunk_bytes(newest, column) == column_chunk_bytes(new_file, column), column
    for column in ("fare", "ts", "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name"):
        assert column_chunk_bytes(newest, column) != column_chunk_bytes(new_file, column), column
    expected = t.read(columns=COLUMNS)
    assert rows_by(hudi_rs_read(t.path), COLUMNS, ["id"]) == rows_by(expected, COLUMNS, ["id"])
    got = expected.filter(pc.equal(expected.column("id"), "id-00051")).column("fare").to_pylist()
    assert got == [5.0]


def test_merge_statistics_match_their_definitions():
    """SliceMerge.stats() hashes only the log's keys; the numbers are those of the definitions
    (written = surviving base rows and log records; updated: written keys both the base file and
    the logs hold; inserted: written keys only the logs hold; deleted: keys dropped)."""
    import random

    import numpy as np

    from shoal.read.mor import RECORD_KEY, SliceMerge

    rng = random.Random(5)
    for _ in range(50):
        base_ids = rng.sample(range(200), rng.randint(0, 60))
        log_ids = [rng.randrange(250) for _ in range(rng.randint(0, 40))]
        keep = np.array([rng.random() < 0.7 or k not in log_ids for k in base_ids], dtype=bool)
        # Survivors: log keys whose base row (if any) was dropped, once each.
        dropped = {k for k, kept in zip(base_ids, keep, strict=True) if not kept}
        survivor_ids = sorted({k for k in log_ids if k not in base_ids or k in dropped if rng.random() < 0.8})
        key = lambda ids: pa.array([f"k{i:03d}" for i in ids], pa.string())  # noqa: E731
        base = pa.table({RECORD_KEY: key(base_ids)}) if base_ids or rng.random() < 0.5 else None
        if base is None:
            keep = np.ones(0, dtype=bool)
            base_ids = []
        survivors = pa.table({RECORD_KEY: key(survivor_ids)})
        entries = [(key(log_ids), None, pa.array(np.zeros(len(log_ids), dtype=np.int8)))] if log_ids else []
        merge = SliceMerge(
            base, pa.array(keep) if base is not None else None, survivors, entries, len(entries)
        )
        got = merge.stats()
        written = [k for k, kept in zip(base_ids, keep, strict=True) if kept] + survivor_ids
        in_base, in_logs = set(base_ids), set(log_ids)
        assert got.written == len(written)
        assert got.updated == sum(1 for k in written if k in in_base and k in in_logs)
        assert got.inserted == sum(1 for k in written if k not in in_base)
        assert got.log_keys == len(in_logs)
        assert got.deleted == len(base_ids) + len(in_logs - in_base) - len(written)
