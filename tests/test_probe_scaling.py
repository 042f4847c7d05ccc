"""Scaling probe: the shortcuts that keep writes and reads on long timelines, many partitions and
large archives from redoing work must give the answers the work would: commit metadata shared
across timeline loads, file slices looked up partition by partition, archive files built from
gathered blocks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

import shoal
from shoal.fs.view import FileSystemView
from shoal.services import archive
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by

QUIET = {"hoodie.archive.automatic": "false", "hoodie.clean.automatic": "false"}


def _table(tmp_path: Path, table_type: str = "COPY_ON_WRITE", **options: str) -> shoal.Table:
    return shoal.Table.create(
        tmp_path / "t",
        "scale",
        table_type=table_type,
        record_key="id",
        partition_by="p",
        ordering_field="ts",
        options={**QUIET, **options},
    )


def _upsert(t: shoal.Table, ids: list[int], parts: list[str], ts: int) -> str:
    return t.upsert(pa.table({"id": ids, "p": parts, "ts": [ts] * len(ids), "v": [float(ts)] * len(ids)}))


def test_commit_metadata_rewritten_in_place_is_read_again(tmp_path):
    """A commit file replaced under the same name (a repair, or damage) is parsed anew by the
    next timeline load, even at the same size, instead of served from what an earlier load
    parsed."""
    t = _table(tmp_path)
    first = _upsert(t, [1, 2], ["a", "b"], 1)
    _upsert(t, [3], ["a"], 2)
    assert Timeline.load(t.storage, t.config).commit_metadata(first).extra_metadata.get("_probe") is None

    path = Path(t.path) / ".hoodie" / f"{first}.commit"
    doc = json.loads(path.read_bytes())
    doc["extraMetadata"]["_probe"] = "one"
    path.write_text(json.dumps(doc))
    stamp = path.stat().st_mtime_ns
    assert Timeline.load(t.storage, t.config).commit_metadata(first).extra_metadata["_probe"] == "one"

    # Same size, other content: only the modification time tells them apart.
    path.write_text(json.dumps(doc).replace('"one"', '"two"'))
    os.utime(path, ns=(stamp + 10**9, stamp + 10**9))
    assert Timeline.load(t.storage, t.config).commit_metadata(first).extra_metadata["_probe"] == "two"
    assert t.commit_metadata_value("_probe") == "two"


def _file_ids_on_disk(partition_dir: Path) -> set[str]:
    """File group ids of a partition from its file names (base ``<id>_<token>_<t>.parquet``,
    log ``.<id>_<t>.log.<n>_<token>``)."""
    ids = set()
    for f in partition_dir.iterdir():
        if f.name.endswith(".parquet"):
            ids.add(f.name.split("_", 1)[0])
        elif ".log." in f.name:
            ids.add(f.name[1:].split("_", 1)[0])
    return ids


def test_slices_of_one_partition_are_that_partitions_file_groups(tmp_path):
    """Many partitions, several file groups each (small files split by a tiny max size), logs on
    merge-on-read: the latest slices asked for partition by partition are exactly the file
    groups in that partition's directory, in file id order."""
    t = _table(
        tmp_path,
        "MERGE_ON_READ",
        **{"hoodie.parquet.max.file.size": "1", "hoodie.parquet.small.file.limit": "0"},
    )
    parts = [f"p{i:02d}" for i in range(12)]
    ids = list(range(48))
    _upsert(t, ids, [parts[i % 12] for i in ids], 1)
    _upsert(t, ids[:20], [parts[i % 12] for i in ids[:20]], 2)
    _upsert(t, [100, 101], ["p03", "p07"], 3)

    view = FileSystemView(t.storage, Timeline.load(t.storage, t.config))
    assert sorted(view.partition_paths) == parts
    for p in parts:
        got = [s.file_id for s in view.latest_file_slices(p)]
        assert {s.partition_path for s in view.latest_file_slices(p)} == {p}
        assert got == sorted(_file_ids_on_disk(Path(t.path) / p))
    assert view.latest_file_slices("p99") == []

    expected = {i: 2 if i < 20 else 1 for i in ids} | {100: 3, 101: 3}
    for p in ("p03", "p07"):
        got = t.read(filters=[("p", "=", p)])
        assert dict(zip(got["id"].to_pylist(), got["ts"].to_pylist(), strict=True)) == {
            i: ts for i, ts in expected.items() if (i % 12 if i < 100 else {100: 3, 101: 7}[i]) == int(p[1:])
        }
    assert rows_by(t.read(), ["id", "ts"], ["id"]) == rows_by(hudi_rs_read(t.path), ["id", "ts"], ["id"])


def test_archive_files_split_at_the_size_limit_keep_every_instant(tmp_path, monkeypatch):
    """Archival of many instants into several archive files (limit lowered to a few blocks):
    every instant that left the active timeline is in the archived timeline once, with the
    metadata it had."""
    monkeypatch.setattr(archive, "ARCHIVE_FILE_MAX_SIZE", 2000)
    t = _table(
        tmp_path,
        **{
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1",
            "hoodie.commits.archival.batch": "2",
        },
    )
    times = [_upsert(t, [i], ["a"], i) for i in range(12)]
    timeline = Timeline.load(t.storage, t.config)
    written = {ts: timeline.commit_metadata(ts).total_records_written() for ts in times}
    t.archive()

    active = [i.requested_time for i in Timeline.load(t.storage, t.config).completed_data_instants()]
    gone = [ts for ts in times if ts not in active]
    assert active == times[-2:] and gone == times[:-2]
    files = [f for f in os.listdir(Path(t.path) / ".hoodie" / "archived") if ".archive." in f]
    assert len(files) > 1
    archived = t.archived_timeline
    assert [i.requested_time for i in archived.completed_data_instants()] == gone
    for ts in gone:
        assert archived.commit_metadata(ts).total_records_written() == written[ts]
    got = t.read()
    assert sorted(got["id"].to_pylist()) == list(range(12))
