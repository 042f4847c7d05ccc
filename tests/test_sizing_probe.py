"""Probes of file sizing against Apache Hudi's rules, worked out here from the table's own files
and commit files: the record size estimate (newest commit that wrote more than threshold x
small-file limit, base files only for delta commits, ceil(bytes / records)), small-file packing
(copy-on-write: every small base file, smallest first; merge-on-read: only the smallest
log-free slice, Hudi's ``hoodie.merge.small.file.group.candidates.limit`` default of 1), log
rollover and option validation. Rows are checked against hudi-rs."""

from __future__ import annotations

import itertools
import json
import math
import os
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal import _native
from shoal.errors import InvalidOptionError
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
from tests.hudi_oracle import hudi_rs_read, rows_by

MAX_FILE = 60_000
SMALL_LIMIT = 45_000
# Low enough that one of the small bulk inserts below tells the record size, as Hudi reads it.
THRESHOLD = 0.3
# Blooms sized for small files, so that a file's bytes follow its records.
SMALL_BLOOMS = {
    "hoodie.index.bloom.num_entries": "200",
    "hoodie.bloom.index.filter.dynamic.max.entries": "400",
}
OPTIONS = {
    "hoodie.parquet.max.file.size": str(MAX_FILE),
    "hoodie.parquet.small.file.limit": str(SMALL_LIMIT),
    "hoodie.record.size.estimation.threshold": str(THRESHOLD),
    **SMALL_BLOOMS,
}
COLUMNS = ["id", "city", "ts", "payload"]


def _rows(lo: int, hi: int, ts: int = 1) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": ["sf"] * len(ids),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            # Distinct, incompressible-ish payloads so that bytes grow with records.
            "payload": [f"{(i * 2654435761) % 2**32:08x}" * 4 for i in ids],
        }
    )


def _create(path: Path, table_type: str, options: dict | None = None) -> shoal.Table:
    return shoal.Table.create(
        str(path),
        name="sizing_probe",
        table_type=table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options={**OPTIONS, **(options or {})},
    )


def _base_files(path: Path, partition: str = "sf") -> dict[str, dict[str, int]]:
    """file id -> {base instant: size} of every base file on disk."""
    out: dict[str, dict[str, int]] = {}
    for name in os.listdir(path / partition):
        if name.endswith(".parquet"):
            parsed = parse_base_file_name(name)
            out.setdefault(parsed.file_id, {})[parsed.instant_time] = (path / partition / name).stat().st_size
    return out


def _hudi_average_record_size(path: Path, threshold: float, small_limit: int, fallback: int) -> int:
    """Hudi's averageBytesPerRecord from the completed commit files, newest first."""
    hoodie = path / ".hoodie"
    done = sorted(
        (n for n in os.listdir(hoodie) if n.endswith((".commit", ".deltacommit", ".replacecommit"))),
        reverse=True,
    )
    for name in done:
        meta = json.loads((hoodie / name).read_text())
        stats = [s for per in meta["partitionToWriteStats"].values() for s in per]
        if name.endswith(".deltacommit"):
            stats = [s for s in stats if s["path"] and s["path"].endswith(".parquet")]
        total = sum(s["totalWriteBytes"] for s in stats)
        records = sum(s["numWrites"] for s in stats)
        if total > int(threshold * small_limit) and records > 0:
            return math.ceil(total / records)
    return fallback


def _three_small_files(path: Path, table_type: str) -> tuple[shoal.Table, dict[str, int]]:
    """A table whose partition holds three small base files of different sizes."""
    t = _create(path, table_type)
    # Three bulk inserts make three file groups of different sizes, all below the limit.
    for lo, hi in ((0, 300), (1000, 1500), (2000, 2700)):
        t.bulk_insert(_rows(lo, hi), options={"hoodie.parquet.small.file.limit": "0"})
    files = {fid: max(v.items())[1] for fid, v in _base_files(path).items()}
    assert len(files) == 3 and all(size < SMALL_LIMIT for size in files.values()), files
    return t, files


def _expected_rows(keys: list[tuple[int, int]]) -> list[dict]:
    return rows_by(pa.concat_tables([_rows(lo, hi) for lo, hi in keys]), COLUMNS, ["id"])


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_inserts_pad_small_files_as_hudis_upsert_partitioners_do(tmp_path, table_type):
    """Copy-on-write (UpsertPartitioner) pads every small base file, smallest first; merge-on-read
    (SparkUpsertDeltaCommitPartitioner, bloom index) pads only the smallest log-free slice and
    sends the rest of the inserts to new file groups."""
    t, before = _three_small_files(tmp_path, table_type)
    avg = _hudi_average_record_size(tmp_path, THRESHOLD, SMALL_LIMIT, 1024)
    assert avg < 1024, "no commit tells the record size: the test would not pin it"
    by_size = sorted(before, key=lambda fid: before[fid])
    capacity = {fid: (MAX_FILE - before[fid]) // avg for fid in by_size}
    candidates = by_size if table_type == "COPY_ON_WRITE" else by_size[:1]
    # More inserts than the candidates take, so that new file groups are needed either way.
    n = sum(capacity[fid] for fid in candidates) + MAX_FILE // avg // 2
    instant = t.insert(_rows(10_000, 10_000 + n))

    after = _base_files(tmp_path)
    padded = {fid for fid, versions in after.items() if fid in before and instant in versions}
    new_groups = [fid for fid in after if fid not in before]
    assert padded == set(candidates)
    left = n - sum(capacity[fid] for fid in candidates)
    assert len(new_groups) == math.ceil(left / (MAX_FILE // avg))
    expected = _expected_rows([(0, 300), (1000, 1500), (2000, 2700), (10_000, 10_000 + n)])
    assert rows_by(t.read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(tmp_path)), COLUMNS, ["id"]) == expected


def test_mor_small_file_with_logs_takes_no_inserts(tmp_path):
    """A slice with log files is no small-file candidate on merge-on-read, however small: the
    smallest log-free slice takes the inserts."""
    t, before = _three_small_files(tmp_path, "MERGE_ON_READ")
    smallest, second = sorted(before, key=lambda fid: before[fid])[:2]
    # Key 0 is in the first bulk insert's file group, the smallest (300 records): an update of
    # it gives that slice a log file.
    t.upsert(_rows(0, 1, ts=5))
    logged = {parse_log_file_name(n).file_id for n in os.listdir(tmp_path / "sf") if ".log." in n}
    assert logged == {smallest}
    instant = t.insert(_rows(20_000, 20_010))
    after = _base_files(tmp_path)
    assert {fid for fid, v in after.items() if instant in v} == {second}
    expected = rows_by(
        pa.concat_tables(
            [_rows(0, 1, ts=5), _rows(1, 300), _rows(1000, 1500), _rows(2000, 2700), _rows(20_000, 20_010)]
        ),
        COLUMNS,
        ["id"],
    )
    assert rows_by(hudi_rs_read(str(tmp_path)), COLUMNS, ["id"]) == expected
    assert rows_by(t.read(), COLUMNS, ["id"]) == expected


def test_log_files_roll_over_past_the_size_limit_and_every_version_is_read(tmp_path):
    """Hudi's log writer appends to the current log file and rolls over to the next version once
    an append leaves it past ``hoodie.logfile.max.size``: so every append went to a file at most
    that large before it, every log file but the newest ended past the limit, versions count up
    from 1 under one write token per task, and all versions are read (by shoal and hudi-rs)."""
    max_log = 2500
    t = _create(tmp_path, "MERGE_ON_READ", {"hoodie.logfile.max.size": str(max_log)})
    t.insert(_rows(0, 200))
    model = {r["id"]: r for r in _rows(0, 200).to_pylist()}
    appends: list[tuple[str, int]] = []  # (log file, offset it was appended at)
    for ts, n in zip(range(2, 14), [3, 3, 3, 30, 3, 3, 3, 3, 40, 3, 3, 3], strict=True):
        batch = _rows(0, n, ts=ts)
        instant = t.upsert(batch)
        model.update({r["id"]: r for r in batch.to_pylist()})
        meta = json.loads((tmp_path / ".hoodie" / f"{instant}.deltacommit").read_text())
        (stat,) = meta["partitionToWriteStats"]["sf"]
        appends.append((stat["path"].split("/")[-1], stat["logOffset"]))

    logs = {n: (tmp_path / "sf" / n).stat().st_size for n in os.listdir(tmp_path / "sf") if ".log." in n}
    parsed = sorted((parse_log_file_name(n).version, n) for n in logs)
    assert [v for v, _ in parsed] == list(range(1, len(parsed) + 1))
    assert len(parsed) > 2, "the writes never rolled over: the test would not probe rollover"
    assert all(offset <= max_log for _, offset in appends)
    assert all(logs[n] > max_log for _, n in parsed[:-1])
    # A file is only ever started fresh (offset 0) when the one before was past the limit.
    for (_, prev), (_, cur) in itertools.pairwise(parsed):
        assert logs[prev] > max_log and (cur, 0) in appends
    expected = sorted(model.values(), key=lambda r: r["id"])
    assert rows_by(t.read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(tmp_path)), COLUMNS, ["id"]) == expected


@pytest.mark.parametrize(
    "key, value",
    [
        ("hoodie.parquet.max.file.size", "0"),
        ("hoodie.parquet.max.file.size", "12MB"),
        ("hoodie.parquet.small.file.limit", "-1"),
        ("hoodie.copyonwrite.record.size.estimate", "0"),
        ("hoodie.record.size.estimation.threshold", "-0.5"),
        ("hoodie.record.size.estimation.threshold", "abc"),
        ("hoodie.parquet.block.size", "0"),
        ("hoodie.logfile.max.size", "-5"),
        ("hoodie.logfile.data.block.max.size", "x"),
        ("hoodie.compact.inline.max.delta.commits", "0"),
        ("hoodie.compact.inline.trigger.strategy", "SOMETIMES"),
        ("hoodie.bulkinsert.sort.mode", "SHUFFLE"),
    ],
)
def test_invalid_sizing_options_leave_the_table_unchanged(tmp_path, key, value):
    t = _create(tmp_path, "MERGE_ON_READ")
    t.insert(_rows(0, 10))
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    for write in (t.insert, t.upsert, t.bulk_insert):
        with pytest.raises(InvalidOptionError):
            write(_rows(100, 110), options={key: value})
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    assert rows_by(t.read(), COLUMNS, ["id"]) == rows_by(_rows(0, 10), COLUMNS, ["id"])


@pytest.mark.parametrize("limit", [0, 2, 3])
def test_the_merge_on_read_small_file_candidates_limit_is_an_option(tmp_path, limit):
    """``hoodie.merge.small.file.group.candidates.limit`` (default 1) caps the small files a
    merge-on-read insert pads, smallest first; 0 pads none."""
    t, before = _three_small_files(tmp_path, "MERGE_ON_READ")
    avg = _hudi_average_record_size(tmp_path, THRESHOLD, SMALL_LIMIT, 1024)
    by_size = sorted(before, key=lambda fid: before[fid])
    candidates = by_size[:limit]
    n = sum((MAX_FILE - before[fid]) // avg for fid in candidates) + MAX_FILE // avg // 2
    instant = t.insert(
        _rows(10_000, 10_000 + n), options={"hoodie.merge.small.file.group.candidates.limit": str(limit)}
    )
    padded = {fid for fid, versions in _base_files(tmp_path).items() if fid in before and instant in versions}
    assert padded == set(candidates)
    expected = _expected_rows([(0, 300), (1000, 1500), (2000, 2700), (10_000, 10_000 + n)])
    assert rows_by(t.read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(tmp_path)), COLUMNS, ["id"]) == expected


def test_a_log_file_exactly_at_the_size_limit_takes_the_next_append(tmp_path):
    """Hudi rolls over once a log file is larger than ``hoodie.logfile.max.size``
    (``rolloverIfNeeded``: size > threshold), so a file that ends exactly at the limit is
    appended to."""
    t = _create(tmp_path, "MERGE_ON_READ")
    t.insert(_rows(0, 50))
    t.upsert(_rows(0, 3, ts=2))
    (log,) = [n for n in os.listdir(tmp_path / "sf") if ".log." in n]
    size = (tmp_path / "sf" / log).stat().st_size
    t.upsert(_rows(0, 3, ts=3), options={"hoodie.logfile.max.size": str(size)})
    assert [n for n in os.listdir(tmp_path / "sf") if ".log." in n] == [log]
    assert (tmp_path / "sf" / log).stat().st_size > size
    # One byte over the limit, the next append starts the next version.
    t.upsert(_rows(0, 3, ts=4), options={"hoodie.logfile.max.size": str(size)})
    assert len([n for n in os.listdir(tmp_path / "sf") if ".log." in n]) == 2
    expected = rows_by(pa.concat_tables([_rows(0, 3, ts=4), _rows(3, 50)]), COLUMNS, ["id"])
    assert rows_by(t.read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(tmp_path)), COLUMNS, ["id"]) == expected


def test_data_blocks_split_at_the_block_size_limit(tmp_path):
    """``hoodie.logfile.data.block.max.size`` bounds every data block of an append (a block is
    split by rows), and every block is read."""
    limit = 4096
    t = _create(tmp_path, "MERGE_ON_READ")
    t.insert(_rows(0, 400))
    t.upsert(_rows(0, 400, ts=2), options={"hoodie.logfile.data.block.max.size": str(limit)})
    (log,) = [n for n in os.listdir(tmp_path / "sf") if ".log." in n]
    blocks = [
        b for b in _native.read_log_file(str(tmp_path / "sf" / log)) if b.block_type == "AVRO_DATA_BLOCK"
    ]
    assert len(blocks) > 1
    assert all(b.size <= limit for b in blocks), [b.size for b in blocks]
    assert sum(b.record_count for b in blocks) == 400
    expected = rows_by(_rows(0, 400, ts=2), COLUMNS, ["id"])
    assert rows_by(t.read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(tmp_path)), COLUMNS, ["id"]) == expected
    # The default limit (256 MiB) keeps one block.
    t.upsert(_rows(0, 400, ts=3))
    blocks = [
        b for b in _native.read_log_file(str(tmp_path / "sf" / log)) if b.block_type == "AVRO_DATA_BLOCK"
    ]
    assert blocks[-1].record_count == 400


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_insert_split_size_sizes_new_file_groups_when_auto_split_is_off(tmp_path, table_type):
    """Hudi's UpsertPartitioner: with ``hoodie.copyonwrite.insert.auto.split=false`` an upsert's
    or insert's new file groups take ``hoodie.copyonwrite.insert.split.size`` records each, so
    n records need ceil(n / split) of them; with auto split, the maximum file size over the
    record size decides. A bulk insert is sized by file size either way."""
    split = {"hoodie.copyonwrite.insert.auto.split": "false", "hoodie.copyonwrite.insert.split.size": "70"}
    # No small file to pad: every insert goes to new file groups.
    t = _create(tmp_path, table_type, {"hoodie.parquet.small.file.limit": "0"})
    first = t.upsert(_rows(0, 250), options=split)
    second = t.insert(_rows(1000, 1140), options=split)
    auto = t.upsert(_rows(2000, 2100))
    # Records per file group, by the instant that created it (the file name carries both).
    counts: dict[str, list[int]] = {}
    names = t.read(columns=["_hoodie_file_name"]).column("_hoodie_file_name").to_pylist()
    for name in sorted(set(names)):
        counts.setdefault(parse_base_file_name(name).instant_time, []).append(names.count(name))
    assert sorted(counts[first]) == [250 - 3 * 70, 70, 70, 70]  # ceil(250 / 70) = 4 groups
    assert sorted(counts[second]) == [70, 70]
    assert counts[auto] == [100]
    expected = _expected_rows([(0, 250), (1000, 1140), (2000, 2100)])
    assert rows_by(t.read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(tmp_path)), COLUMNS, ["id"]) == expected
