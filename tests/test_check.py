"""``shoal check``: sound tables (every Hudi fixture, and tables shoal wrote through every
operation and table service) have no problem; each kind of damage done to a file is reported as
its kind, on the file damaged, and the command's exit code tells errors from warnings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal import _native
from shoal.cli import main
from shoal.errors import ShoalError
from shoal.fs.view import FileSlice
from shoal.services.check import check_table
from tests.test_fixtures import ALL_FIXTURES

OPTIONS = {
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
    "hoodie.parquet.small.file.limit": "0",
}


def _rows(ids: range, version: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "city": [["sf", "nyc"][i % 2] for i in ids],
            "ts": pa.array([version] * len(ids), pa.int64()),
            "v": [f"v{version}-{i}" for i in ids],
        }
    )


def _table(path: Path, table_type: str) -> shoal.Table:
    t = shoal.Table.create(
        str(path),
        "t",
        table_type=table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options=OPTIONS,
    )
    t.bulk_insert(_rows(range(0, 20), 1))
    for version in range(2, 6):
        t.upsert(_rows(range(version, 30, 3), version))
    t.delete(pa.table({"id": pa.array([4, 5], pa.int64()), "city": ["sf", "nyc"]}))
    return t


def _problems(t: shoal.Table, deep: bool = True) -> list[tuple[str, str]]:
    return [(p.kind, p.path) for p in check_table(t.storage, t.config, deep=deep).problems]


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_hudi_fixtures_are_sound(fixture_table, name):
    t = shoal.Table(str(fixture_table(name)))
    assert _problems(t) == []


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_tables_shoal_wrote_through_every_operation_are_sound(tmp_path, table_type):
    t = _table(tmp_path / "t", table_type)
    t.insert_overwrite(_rows(range(100, 104), 9).set_column(1, "city", pa.array(["sf"] * 4)))
    if table_type == "MERGE_ON_READ":
        t.compact()
        t.upsert(_rows(range(0, 6), 10))
    t.clean()
    t.archive()
    t.upsert(_rows(range(200, 210), 11))
    report = check_table(t.storage, t.config, deep=True)
    assert report.problems == []
    assert report.files >= report.file_groups > 0
    assert main(["check", "--deep", t.path]) == 0


def _latest(t: shoal.Table, with_logs: bool = False) -> FileSlice:
    slices = [s for s in t.file_slices() if s.base_file and (s.log_files or not with_logs)]
    return slices[0]


def test_a_lost_base_file_is_missing(tmp_path, capsys):
    t = _table(tmp_path / "t", "COPY_ON_WRITE")
    lost = _latest(t).base_file.path
    os.remove(os.path.join(t.path, lost))
    assert _problems(t) == [("missing_file", lost)]
    assert main(["check", t.path]) == 1
    assert lost in capsys.readouterr().out


def test_a_lost_log_file_is_missing(tmp_path):
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    lost = _latest(t, with_logs=True).log_files[-1].path
    os.remove(os.path.join(t.path, lost))
    assert _problems(t) == [("missing_file", lost)]


def test_a_cut_off_base_file_has_the_wrong_size(tmp_path):
    t = _table(tmp_path / "t", "COPY_ON_WRITE")
    cut = _latest(t).base_file.path
    full = os.path.join(t.path, cut)
    with open(full, "r+b") as f:
        f.truncate(os.path.getsize(full) - 100)
    assert _problems(t) == [("size_mismatch", cut)]


def test_damaged_bytes_of_the_right_size_are_found_by_a_deep_check(tmp_path):
    t = _table(tmp_path / "t", "COPY_ON_WRITE")
    damaged = _latest(t).base_file.path
    full = os.path.join(t.path, damaged)
    with open(full, "r+b") as f:
        f.seek(-8, os.SEEK_END)
        f.write(b"\xff" * 8)  # the footer's length and the magic
    assert _problems(t, deep=False) == []
    assert _problems(t) == [("damaged_file", damaged)]


def test_a_log_block_that_does_not_decode_is_a_warning(tmp_path):
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    log = _latest(t, with_logs=True).log_files[-1].path
    with open(os.path.join(t.path, log), "ab") as f:
        f.write(b"#HUDI#" + b"\x00" * 40)  # a block cut off after its magic
    assert _problems(t) == [("corrupt_log_block", log)]
    assert main(["check", "--deep", t.path]) == 0


def test_a_file_its_commit_did_not_record_and_an_orphan(tmp_path, capsys):
    t = _table(tmp_path / "t", "COPY_ON_WRITE")
    base = _latest(t).base_file
    # A failed task attempt's copy under another write token, at the same completed instant.
    stray = base.path.replace(base.name.split("_")[1], "9-9-9")
    shutil.copy(os.path.join(t.path, base.path), os.path.join(t.path, stray))
    # A file of an instant the timeline never had, after its last commit.
    orphan = base.path.replace(base.instant_time, "29991231235959999")
    shutil.copy(os.path.join(t.path, base.path), os.path.join(t.path, orphan))
    assert sorted(_problems(t)) == [("orphan_file", orphan), ("uncommitted_file", stray)]
    assert main(["check", t.path]) == 1
    out = capsys.readouterr().out
    assert "1 errors, 1 warnings" in out


def test_commit_metadata_that_does_not_parse(tmp_path):
    t = _table(tmp_path / "t", "COPY_ON_WRITE")
    last = t.latest_instant()
    path = os.path.join(t.path, ".hoodie", f"{last}.commit")
    with open(path, "w") as f:
        f.write('{"partitionToWriteStats": ')
    assert _problems(t) == [("unreadable_metadata", f".hoodie/{last}.commit")]


def test_a_lost_file_of_a_group_last_written_by_an_archived_commit_is_missing(tmp_path):
    t = _table(tmp_path / "t", "COPY_ON_WRITE")
    archived = {i.requested_time for i in t.archived_timeline.completed_data_instants()}
    old = [s.base_file for s in t.file_slices() if s.base_file.instant_time in archived]
    assert old, "the table has no file group an archived commit wrote last"
    lost = old[0].path
    os.remove(os.path.join(t.path, lost))
    assert _problems(t) == [("missing_file", lost)]


def _log_with_blocks(t: shoal.Table) -> tuple[str, list]:
    path = _latest(t, with_logs=True).log_files[-1].path
    with open(os.path.join(t.path, path), "rb") as f:
        blocks = _native.read_log_blocks(f.read())
    return path, blocks


def test_a_cut_off_log_file_has_the_wrong_size(tmp_path):
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    cut, _ = _log_with_blocks(t)
    full = os.path.join(t.path, cut)
    with open(full, "r+b") as f:
        f.truncate(os.path.getsize(full) - 30)  # the last block, a completed commit's, loses its end
    assert _problems(t, deep=False) == [("size_mismatch", cut)]


def test_a_block_a_completed_commit_appended_that_does_not_decode_is_damage(tmp_path):
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    log, _ = _log_with_blocks(t)
    with open(os.path.join(t.path, log), "r+b") as f:
        f.write(b"XXXXXX")  # the first block's magic: readers skip the block, and its records
    assert _problems(t, deep=False) == []
    assert _problems(t) == [("damaged_file", log)]


def test_a_block_whose_records_do_not_decode_is_damage(tmp_path):
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    log, blocks = _log_with_blocks(t)
    data = next(b for b in blocks if b.block_type == "AVRO_DATA_BLOCK")
    with open(os.path.join(t.path, log), "r+b") as f:
        f.seek(data.offset + data.size - 150)  # inside the records, framing intact
        f.write(b"\xff" * 20)
    with pytest.raises(ShoalError):
        shoal.Table(t.path).read()
    assert _problems(t, deep=False) == []
    assert _problems(t) == [("damaged_file", log)]


def test_a_zeroed_record_that_decodes_without_its_key_is_damage(tmp_path):
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    log, blocks = _log_with_blocks(t)
    full = os.path.join(t.path, log)
    content = next(b for b in blocks if b.block_type == "AVRO_DATA_BLOCK").content()
    # Content: format version, record count, then each record's length and bytes.
    first = int.from_bytes(content[8:12], "big")
    with open(full, "rb") as f:
        start = f.read().find(content) + 12
    with open(full, "r+b") as f:
        f.seek(start)
        f.write(b"\x00" * first)  # zeros decode as nulls: the record loses its key
    with pytest.raises(ShoalError):
        shoal.Table(t.path).read()
    assert _problems(t) == [("damaged_file", log)]


def test_records_of_a_write_that_never_completed_are_not_decoded(tmp_path):
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    last = t.upsert(_rows(range(0, 4), 7))
    os.remove(os.path.join(t.path, ".hoodie", f"{last}.deltacommit"))  # its write died before completing
    log, failed = next(
        (log.path, b)
        for s in t.file_slices()
        for log in s.log_files
        for b in _native.read_log_file(os.path.join(t.path, log.path))
        if b.instant_time == last
    )
    with open(os.path.join(t.path, log), "r+b") as f:
        f.seek(failed.offset + failed.size - 150)
        f.write(b"\xff" * 20)
    shoal.Table(t.path).read()  # readers skip the block without decoding it
    assert _problems(t) == []
