"""shoal reads and writes parquet base files only. A table whose ``hoodie.table.base.file.format``
is ORC or HFILE fails every read and write with UnsupportedError. Without the check, shoal
would see no base files in such a table and read it as empty, and a write would add parquet
files that Hudi, which takes base files by the table's extension, would not see.

The tables are copies of a Hudi-written parquet fixture, with the format property changed and
the checksum recomputed. The refusal comes from the property alone, whatever the files hold.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import shoal
from shoal.cli import main
from shoal.config.table_config import BASE_FILE_FORMAT
from shoal.errors import UnsupportedError
from tests.table_files import data_columns, file_digests, set_table_properties

FIXTURE = "mor_parquet_v6_simplekeygen_nonhivestyle"


def _with_format(fixture_table, value: str) -> Path:
    root = fixture_table(FIXTURE)
    set_table_properties(root, {BASE_FILE_FORMAT: value})
    return root


@pytest.mark.parametrize("value", ["ORC", "HFILE", "orc"])
def test_reads_and_writes_of_a_non_parquet_table_raise(fixture_table, value):
    root = _with_format(fixture_table, value)
    table = shoal.Table(str(root))
    # The timeline is still there to inspect.
    assert table.instants()
    files = file_digests(root)
    with pytest.raises(UnsupportedError, match=rf"base files are {value.upper()}"):
        table.read()
    with pytest.raises(UnsupportedError, match="PARQUET base files only"):
        table.read_incremental(start=None)
    with pytest.raises(UnsupportedError, match="base files are"):
        table.file_slices()
    with pytest.raises(UnsupportedError, match="base files are"):
        table.upsert(shoal.Table(str(fixture_table(FIXTURE))).read())
    with pytest.raises(UnsupportedError, match="base files are"):
        table.compact()
    assert file_digests(root) == files


def test_the_format_is_case_insensitive_and_parquet_reads(fixture_table):
    root = _with_format(fixture_table, "parquet")
    expected = shoal.Table(str(fixture_table(FIXTURE))).read()
    assert shoal.Table(str(root)).read().num_rows == expected.num_rows > 0


def test_cli_show_of_an_orc_table_fails_clearly(fixture_table, capsys):
    root = _with_format(fixture_table, "ORC")
    assert main(["show", str(root)]) == 2
    err = capsys.readouterr().err
    assert "UnsupportedError" in err and "ORC" in err
    assert main(["timeline", str(root)]) == 0


def test_a_metadata_only_bootstrap_skeleton_file_is_refused(fixture_table):
    """A metadata-only bootstrap (Hudi's instant 00000000000001) leaves skeleton base files
    holding the meta columns only; the records' data stays in the source files. Built here from
    a Hudi fixture: one base file copied under a new file group at that instant, with the
    bootstrap commit completed on the timeline."""
    root = fixture_table("cow_v6_nonpartitioned")
    rows = shoal.Table(str(root)).read()
    records = rows.select(data_columns(rows)).slice(0, 1)
    base = sorted(root.glob("*.parquet"))[0]
    skeleton = root / "0f0f0f0f-0000-0000-0000-000000000000-0_0-1-1_00000000000001.parquet"
    shutil.copyfile(base, skeleton)
    commit = sorted((root / ".hoodie").glob("*.commit"))[0]
    shutil.copyfile(commit, root / ".hoodie" / "00000000000001.commit")
    table = shoal.Table(str(root))
    assert "00000000000001" in [i.requested_time for i in table.instants()]
    with pytest.raises(UnsupportedError, match="skeleton file of a metadata-only bootstrap"):
        table.read()
    with pytest.raises(UnsupportedError, match="skeleton"):
        table.upsert(records)
    assert [i.requested_time for i in shoal.Table(str(root)).instants()] == [
        i.requested_time for i in table.instants()
    ]

    skeleton.unlink()
    assert shoal.Table(str(root)).read().num_rows == rows.num_rows
