"""shoal drops Hudi's metadata table before its first change to a table that has one
(``shoal.fs.metadata_table``), as a Hudi writer with ``hoodie.metadata.enable=false`` does.

No version 6 fixture has a metadata table, so these tests give one to a copy of a version 6
fixture. The ``.hoodie/metadata`` directory and the ``hoodie.table.metadata.partitions`` value
both come from the Hudi-written fixture ``mor_avro_v8_trips_8i3u1d``. Expected rows come from the
fixture as read before the change and from what the test writes. hudi-rs reads every changed
table too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shoal
from shoal.config import javaprops
from shoal.config.table_config import METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT, TableConfig
from shoal.errors import ShoalError
from shoal.fs.storage import Storage
from tests.hudi_oracle import hudi_rs_read
from tests.table_files import data_columns, set_table_properties
from tests.test_fixtures import _compare as compare_with_hudi_rs

COW = "cow_v6_simplekeygen_nonhivestyle"
MOR = "mor_avro_v6_trips_8i1u"
DONOR = "mor_avro_v8_trips_8i3u1d"
INFLIGHT = "bloom_filters"
# Archival after the commit drops the metadata table too; without it, only the drop before the
# change (when the write creates its instant) is under test.
NO_ARCHIVAL = {"hoodie.archive.automatic": "false"}


def _properties(root: Path) -> dict[str, str]:
    return javaprops.loads((root / ".hoodie" / "hoodie.properties").read_text("latin-1"))


def _give_metadata_table(fixture_table, root: Path) -> None:
    """Gives the table at ``root`` the metadata table of the donor fixture, as Hudi lists it."""
    donor = fixture_table(DONOR)
    shutil.copytree(donor / ".hoodie" / "metadata", root / ".hoodie" / "metadata")
    partitions = _properties(donor)[METADATA_PARTITIONS]
    set_table_properties(root, {METADATA_PARTITIONS: partitions, METADATA_PARTITIONS_INFLIGHT: INFLIGHT})
    assert "files" in _properties(root)[METADATA_PARTITIONS].split(",")


def _with_metadata_table(fixture_table, name: str) -> Path:
    root = fixture_table(name)
    _give_metadata_table(fixture_table, root)
    return root


def _assert_dropped(root: Path, before: dict[str, str]) -> None:
    after = _properties(root)
    assert after[METADATA_PARTITIONS] == "" and after[METADATA_PARTITIONS_INFLIGHT] == ""
    untouched = {METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT}
    assert {k: v for k, v in after.items() if k not in untouched} == {
        k: v for k, v in before.items() if k not in untouched
    }
    TableConfig.load(Storage(str(root)))  # the checksum still holds
    assert not (root / ".hoodie" / "metadata").exists()


def _changed(table: shoal.Table, key: str, ordering: str, column: str, value: str) -> pa.Table:
    """Two of the table's records with ``column`` set to ``value`` and a later ordering value."""
    rows = table.read()
    rows = rows.select(data_columns(rows)).sort_by(key).slice(0, 2)
    rows = rows.set_column(rows.column_names.index(column), column, pa.array([value] * 2))
    later = pc.add(rows.column(ordering), 1).cast(rows.schema.field(ordering).type)
    return rows.set_column(rows.column_names.index(ordering), ordering, later)


@pytest.mark.parametrize(
    ("name", "key", "ordering", "column"), [(COW, "id", "longField", "name"), (MOR, "uuid", "ts", "rider")]
)
def test_an_upsert_drops_the_metadata_table_and_hudi_rs_reads_it(fixture_table, name, key, ordering, column):
    root = _with_metadata_table(fixture_table, name)
    before = _properties(root)
    table = shoal.Table(str(root))
    rows_before = table.read().num_rows
    changed = _changed(table, key, ordering, column, "changed by shoal")
    table.upsert(changed, NO_ARCHIVAL)

    _assert_dropped(root, before)
    after = shoal.Table(str(root)).read()
    assert after.num_rows == rows_before
    hit = after.filter(pc.is_in(after.column(key), changed.column(key)))
    assert hit.column(column).to_pylist() == ["changed by shoal"] * 2
    compare_with_hudi_rs(str(root), read_optimized=False)
    theirs = hudi_rs_read(str(root))
    assert sorted(
        theirs.filter(pc.equal(theirs.column(column), "changed by shoal")).column(key).to_pylist()
    ) == (sorted(changed.column(key).to_pylist()))


def test_bad_input_leaves_the_metadata_table(fixture_table):
    root = _with_metadata_table(fixture_table, COW)
    properties = (root / ".hoodie" / "hoodie.properties").read_bytes()
    table = shoal.Table(str(root))
    bad = _changed(table, "id", "longField", "name", "x")
    bad = bad.set_column(bad.column_names.index("id"), "id", pa.array([None, None], pa.int32()))
    with pytest.raises(ShoalError, match="null"):
        table.upsert(bad)
    assert (root / ".hoodie" / "hoodie.properties").read_bytes() == properties
    assert (root / ".hoodie" / "metadata" / "files").is_dir()


def test_rollback_and_archival_drop_the_metadata_table(fixture_table):
    root = _with_metadata_table(fixture_table, COW)
    before = _properties(root)
    shoal.Table(str(root)).rollback()
    _assert_dropped(root, before)

    root = _with_metadata_table(fixture_table, MOR)
    before = _properties(root)
    shoal.Table(str(root)).archive()
    _assert_dropped(root, before)


def test_a_crash_between_the_properties_and_the_directory_is_finished_by_the_next_change(
    fixture_table, monkeypatch
):
    root = _with_metadata_table(fixture_table, COW)
    before = _properties(root)
    table = shoal.Table(str(root))
    changed = _changed(table, "id", "longField", "name", "after the crash")

    def crash(self: Storage, rel: str) -> None:
        raise OSError("injected: the process died here")

    with monkeypatch.context() as m:
        m.setattr(Storage, "delete_dir", crash)
        with pytest.raises(OSError, match="injected"):
            table.upsert(changed, NO_ARCHIVAL)
    # The properties no longer name the metadata table, so no reader consults the directory.
    assert _properties(root)[METADATA_PARTITIONS] == ""
    assert (root / ".hoodie" / "metadata").is_dir()
    assert shoal.Table(str(root)).instants() == table.instants()

    shoal.Table(str(root)).upsert(changed, NO_ARCHIVAL)
    _assert_dropped(root, before)
    compare_with_hudi_rs(str(root), read_optimized=False)


def test_a_table_without_a_metadata_table_keeps_its_properties_file(fixture_table):
    root = fixture_table(COW)
    properties = (root / ".hoodie" / "hoodie.properties").read_bytes()
    table = shoal.Table(str(root))
    table.upsert(_changed(table, "id", "longField", "name", "y"))
    assert (root / ".hoodie" / "hoodie.properties").read_bytes() == properties


def test_a_spark_write_drops_the_metadata_table(fixture_table, spark):
    pytest.importorskip("pyspark")
    import shoal.spark

    root = _with_metadata_table(fixture_table, MOR)
    before = _properties(root)
    table = shoal.Table(str(root))
    changed = _changed(table, "uuid", "ts", "rider", "changed on Spark")
    shoal.spark.write(spark.createDataFrame(changed), str(root), "upsert", NO_ARCHIVAL)
    _assert_dropped(root, before)
    compare_with_hudi_rs(str(root), read_optimized=False)


def test_running_a_compaction_planned_elsewhere_drops_the_metadata_table(fixture_table):
    """A compaction requested while the table had a metadata table (here: scheduled, then the
    metadata table put back), run by shoal: running it is a change too."""
    root = fixture_table(MOR)
    table = shoal.Table(str(root))
    planned = table.schedule_compaction()
    assert planned is not None
    _give_metadata_table(fixture_table, root)
    before = _properties(root)

    shoal.Table(str(root)).run_compaction(planned)
    _assert_dropped(root, before)
    compare_with_hudi_rs(str(root), read_optimized=False)
    compare_with_hudi_rs(str(root), read_optimized=True)
