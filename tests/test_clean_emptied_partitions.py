"""The cleaner deletes the directory of a partition that replace commits emptied (Hudi's
``partitionsToBeDeleted``), once it deletes the partition's last data files, and only then: a
savepointed file, or a file that appeared after the plan, keeps it. Rows are checked against a
model with shoal and hudi-rs."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import CleanedInstantError
from shoal.fs.storage import Storage
from shoal.services.clean import clean_metadata, run_clean, schedule_clean
from shoal.services.savepoint import decode_record
from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "city", "v"]
KEEP_ONE = {"hoodie.cleaner.commits.retained": "1", "hoodie.clean.automatic": "false"}


def _rows(rows: list[tuple[int, str, str]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "city": [r[1] for r in rows],
            "ts": pa.array([1] * len(rows), pa.int64()),
            "v": [r[2] for r in rows],
        }
    )


def _table(path: Path, table_type: str = "COPY_ON_WRITE") -> shoal.Table:
    return shoal.Table.create(
        str(path),
        "t",
        table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options=KEEP_ONE,
    )


def _check(path: Path, model: dict[int, tuple[int, str, str]]) -> None:
    expected = [dict(zip(COLUMNS, r, strict=True)) for _, r in sorted(model.items())]
    assert rows_by(shoal.Table(str(path)).read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(path)), COLUMNS, ["id"]) == expected


def _plan(path: Path, instant: str) -> dict:
    timeline = Timeline.load(Storage(str(path)), shoal.Table(str(path)).config)
    return decode_record(timeline.read_instant(Instant(instant, Action.CLEAN, State.REQUESTED)), "plan")


def _plan_and_metadata(path: Path, instant: str) -> tuple[dict, dict]:
    timeline = Timeline.load(Storage(str(path)), shoal.Table(str(path)).config)
    return _plan(path, instant), clean_metadata(timeline, instant)


def _nyc_deleted(path: Path) -> tuple[shoal.Table, dict[int, tuple[int, str, str]]]:
    """Rows in sf and nyc, nyc deleted, then a write in sf (the delete leaves the retained
    commits): the table and the model of its rows."""
    table = _table(path)
    stored = [(i, ["sf", "nyc"][i % 2], "a") for i in range(10)]
    table.upsert(_rows(stored))
    table.delete_partitions(["nyc"])
    table.upsert(_rows([(100, "sf", "new")]))
    return table, {r[0]: r for r in stored if r[1] == "sf"} | {100: (100, "sf", "new")}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_deleted_partition_loses_its_directory_when_cleaned(tmp_path, table_type):
    path = tmp_path / "t"
    table = _table(path, table_type)
    stored = [(i, ["sf", "nyc", "paris"][i % 3], "a") for i in range(30)]
    table.upsert(_rows(stored))
    # A second slice in nyc (logs on merge-on-read): every slice of the partition goes.
    table.upsert(_rows([(1, "nyc", "b")]))
    model = {r[0]: r for r in stored if r[1] != "nyc"}
    before_delete = table.latest_instant()
    deleted = table.delete_partitions(["nyc"])
    table.upsert(_rows([(100, "sf", "new")]))  # the replace leaves the retained commits
    model[100] = (100, "sf", "new")
    assert (path / "nyc").is_dir()

    [cleaned] = table.clean()
    plan, metadata = _plan_and_metadata(path, cleaned)
    assert plan["partitionsToBeDeleted"] == ["nyc"]
    assert metadata["partitionMetadata"]["nyc"]["isPartitionDeleted"] is True
    assert not metadata["partitionMetadata"].get("sf", {}).get("isPartitionDeleted")
    assert not (path / "nyc").exists()
    assert (path / "sf").is_dir() and (path / "paris").is_dir()
    _check(path, model)
    # A read as of before the delete needs the partition's files: an error, not rows without
    # them. As of the delete, the partition was empty already.
    with pytest.raises(CleanedInstantError, match="partition nyc"):
        table.read(as_of=before_delete)
    as_of_delete = {k: v for k, v in model.items() if k != 100}
    expected = [dict(zip(COLUMNS, r, strict=True)) for _, r in sorted(as_of_delete.items())]
    assert rows_by(table.read(as_of=deleted), COLUMNS, ["id"]) == expected

    # The partition comes back with a later write.
    table.upsert(_rows([(200, "nyc", "back")]))
    model[200] = (200, "nyc", "back")
    _check(path, model)


def test_emptied_nested_partitions_go_with_their_empty_parents(tmp_path):
    path = tmp_path / "t"
    table = _table(path)
    days = ["2023/01/30", "2023/01/31", "2023/02/01"]
    stored = [(i, days[i % 3], "a") for i in range(12)]
    table.upsert(_rows(stored))
    table.delete_partitions(["2023/01/*"])
    table.upsert(_rows([(100, "2023/02/01", "new")]))
    model = {r[0]: r for r in stored if not r[1].startswith("2023/01/")} | {100: (100, "2023/02/01", "new")}
    [cleaned] = table.clean()
    plan, _ = _plan_and_metadata(path, cleaned)
    assert plan["partitionsToBeDeleted"] == ["2023/01/30", "2023/01/31"]
    assert not (path / "2023" / "01").exists()
    assert (path / "2023" / "02" / "01").is_dir()
    _check(path, model)


def test_a_savepointed_file_keeps_the_partition(tmp_path):
    path = tmp_path / "t"
    table = _table(path)
    stored = [(i, ["sf", "nyc"][i % 2], "a") for i in range(10)]
    table.upsert(_rows(stored))
    table.savepoint()
    pinned = {p.name for p in (path / "nyc").glob("*.parquet")}
    # A slice of nyc the savepoint does not pin: the clean deletes it, and the partition stays.
    table.upsert(_rows([(1, "nyc", "b")]))
    table.delete_partitions(["nyc"])
    table.upsert(_rows([(100, "sf", "new")]))
    table.upsert(_rows([(101, "sf", "new")]))
    for cleaned in table.clean():
        plan, metadata = _plan_and_metadata(path, cleaned)
        assert plan["partitionsToBeDeleted"] == []
        assert not any(m["isPartitionDeleted"] for m in metadata["partitionMetadata"].values())
    assert {p.name for p in (path / "nyc").glob("*.parquet")} == pinned
    model = {r[0]: r for r in stored if r[1] == "sf"} | {i: (i, "sf", "new") for i in (100, 101)}
    _check(path, model)


def test_a_file_that_appears_after_the_plan_keeps_the_partition(tmp_path):
    path = tmp_path / "t"
    table, model = _nyc_deleted(path)
    storage = Storage(str(path))
    instant = schedule_clean(storage, table.config, table.write_config)
    assert instant is not None
    assert _plan(path, instant)["partitionsToBeDeleted"] == ["nyc"]
    (path / "nyc" / "arrived.txt").write_text("another writer's file")

    metadata = run_clean(storage, table.config, instant)
    assert metadata["partitionMetadata"]["nyc"]["isPartitionDeleted"] is False
    assert sorted(p.name for p in (path / "nyc").iterdir() if not p.name.startswith(".")) == ["arrived.txt"]
    _check(path, model)


def test_a_directory_inside_the_partition_is_reported(tmp_path):
    """An empty directory inside the partition keeps it: the clean reports it not deleted,
    though its partition metadata went and no reader lists it."""
    path = tmp_path / "t"
    table, model = _nyc_deleted(path)
    (path / "nyc" / "tmp").mkdir()
    [cleaned] = table.clean()
    _, metadata = _plan_and_metadata(path, cleaned)
    assert metadata["partitionMetadata"]["nyc"]["isPartitionDeleted"] is False
    assert [p.name for p in (path / "nyc").iterdir()] == ["tmp"]
    _check(path, model)
