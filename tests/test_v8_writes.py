"""Table version 8 (Hudi 1.x) is read-only to shoal: every write path and table service refuses it
with UnsupportedError before touching the table.

shoal writes version 6 instants. Written into a version 8 table they are invisible to Hudi 1.x and
hudi-rs: a completed instant's file name lacks the completion time version 8 requires. The
regression test below shows the damage on a copy of a Hudi fixture: hudi-rs reads that table
without the commit. The refusal tests then check that the table's files are byte for byte what
they were, and that shoal and hudi-rs still read the same rows.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

import shoal
from shoal.cli import main
from shoal.errors import UnsupportedError
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read
from tests.table_files import data_columns, file_digests
from tests.test_fixtures import _canonical, _sort_keys
from tests.test_fixtures import _compare as compare_with_hudi_rs

COW = "cow_v8_simplekeygen_nonhivestyle"
MOR = "mor_avro_v8_trips_8i3u1d"
V8_FIXTURES = [
    "cow_v8_complexkeygen_hivestyle",
    "cow_v8_nonpartitioned",
    COW,
    "cow_v8_simplekeygen_hivestyle_no_metafields",
    MOR,
]


def _data(table: shoal.Table) -> pa.Table:
    """Two of the table's rows as input records: its data columns only."""
    rows = table.read()
    return rows.select(data_columns(rows)).slice(0, 2)


def _sorted_rows(table: shoal.Table) -> list[dict]:
    rows = table.read()
    return _canonical(rows, _sort_keys(table, rows.column_names))


def _attempts(table: shoal.Table, latest: str) -> dict[str, Callable[[], object]]:
    data = _data(table)
    attempts: dict[str, Callable[[], object]] = {
        "upsert": lambda: table.upsert(data),
        "insert": lambda: table.insert(data),
        "bulk_insert": lambda: table.bulk_insert(data),
        "delete": lambda: table.delete(data),
        "stream_writer": lambda: table.stream_writer(),
        "rollback": lambda: table.rollback(),
        "clean": lambda: table.clean(),
        "savepoint": lambda: table.savepoint(latest),
        "delete_savepoint": lambda: table.delete_savepoint(latest),
        "restore": lambda: table.restore(latest),
        "archive": lambda: table.archive(),
    }
    if table.table_type == "MERGE_ON_READ":
        attempts["compact"] = lambda: table.compact()
        attempts["schedule_compaction"] = lambda: table.schedule_compaction()
    return attempts


def test_a_version_6_commit_in_a_version_8_table_is_invisible_to_hudi_rs(fixture_table):
    """Why writes are refused: the layout shoal writes is lost on a version 8 table.

    The commit file here is named and filled the way shoal writes version 6 commits (as the
    fixture's own commit, renamed without its completion time). hudi-rs drops the instant, so
    the table reads as if it had never been written."""
    root = fixture_table(COW)
    table = shoal.Table(str(root))
    before = hudi_rs_read(str(root))
    timeline = Timeline.load(table.storage, table.config)
    last = timeline.completed()[-1]
    assert last.completion_time is not None
    timeline_dir = root / table.config.timeline_dir
    completed = timeline_dir / f"{last.requested_time}_{last.completion_time}.commit"
    assert completed.is_file()
    completed.rename(timeline_dir / f"{last.requested_time}.commit")

    after = hudi_rs_read(str(root))
    assert set(after.column("_hoodie_commit_time").to_pylist()) < set(
        before.column("_hoodie_commit_time").to_pylist()
    )
    assert last.requested_time not in after.column("_hoodie_commit_time").to_pylist()


@pytest.mark.parametrize("fixture", V8_FIXTURES)
def test_every_write_and_table_service_refuses_a_version_8_table(fixture_table, fixture):
    root = fixture_table(fixture)
    table = shoal.Table(str(root))
    assert table.config.table_version == 8
    latest = table.latest_instant()
    assert latest is not None
    rows_before = _sorted_rows(table)
    files_before = file_digests(root)

    attempts = _attempts(table, latest)
    for name, attempt in attempts.items():
        with pytest.raises(UnsupportedError, match=r"this table is version 8 \(Hudi 1\.x\)") as raised:
            attempt()
        assert "cannot " in str(raised.value), name
        assert file_digests(root) == files_before, f"{name} changed the table"

    assert _sorted_rows(shoal.Table(str(root))) == rows_before
    compare_with_hudi_rs(str(root), read_optimized=False)


@pytest.mark.parametrize(
    "command",
    [["rollback"], ["compact"], ["clean"], ["archive"], ["savepoint"], ["restore", "20251220210129235"]],
)
def test_cli_refuses_to_change_a_version_8_table(fixture_table, capsys, command):
    root = fixture_table(MOR)
    files_before = file_digests(root)
    code = main([command[0], str(root), *command[1:]])
    assert code == 2
    err = capsys.readouterr().err
    assert "UnsupportedError" in err and "version 8" in err
    assert file_digests(root) == files_before


def test_spark_writes_refuse_a_version_8_table(fixture_table, spark):
    pytest.importorskip("pyspark")
    import shoal.spark
    from shoal.spark.datasource import register

    root = fixture_table(COW)
    table = shoal.Table(str(root))
    files_before = file_digests(root)
    df = spark.createDataFrame(_data(table))
    with pytest.raises(UnsupportedError, match="cannot write: this table is version 8"):
        shoal.spark.write(df, str(root), "upsert")
    register(spark)
    with pytest.raises(Exception, match="UnsupportedError: cannot write: this table is version 8"):
        df.write.format("shoal").option("hoodie.datasource.write.operation", "insert").mode("append").save(
            str(root)
        )
    assert file_digests(root) == files_before
