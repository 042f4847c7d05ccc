"""Every table written by Apache Hudi (COW and MOR, table versions 6 and 8) reads in shoal with
the rows hudi-rs returns for it: snapshot, read-optimized and time travel."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "hudi-java"
ALL_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.zip"))
MOR_FIXTURES = [n for n in ALL_FIXTURES if n.startswith("mor_")]


def unzip_table(name: str, dest: Path) -> Path:
    with zipfile.ZipFile(FIXTURES / f"{name}.zip") as z:
        z.extractall(dest)
    roots = [p.parent.parent for p in dest.glob("*/.hoodie/hoodie.properties") if "__MACOSX" not in str(p)]
    assert len(roots) == 1, roots
    return roots[0]


def _canonical(table, key_columns: list[str]):
    rows = table.sort_by([(c, "ascending") for c in key_columns]).to_pylist()
    return [
        {k: (sorted(v) if isinstance(v, list) and v and isinstance(v[0], tuple) else v) for k, v in r.items()}
        for r in rows
    ]


@pytest.mark.skipif(not ALL_FIXTURES, reason="fixtures not found")
@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_fixture_snapshot_matches_hudi_rs(tmp_path, name):
    _compare(str(unzip_table(name, tmp_path)), read_optimized=False)


@pytest.mark.parametrize("name", MOR_FIXTURES)
def test_mor_fixture_read_optimized_matches_hudi_rs(tmp_path, name):
    _compare(str(unzip_table(name, tmp_path)), read_optimized=True)


def _compare(path: str, read_optimized: bool) -> None:
    query = "read_optimized" if read_optimized else "snapshot"
    ours = shoal.Table(path).read(query_type=query)
    theirs = hudi_rs_read(path, read_optimized=read_optimized)
    assert ours.num_rows == theirs.num_rows
    if theirs.num_rows == 0:
        return
    assert set(ours.column_names) == set(theirs.column_names)
    cols = theirs.column_names
    keys = _sort_keys(shoal.Table(path), cols)
    assert _canonical(ours.select(cols), keys) == _canonical(theirs, keys)


def _sort_keys(table: shoal.Table, columns: list[str]) -> list[str]:
    # Tables written without meta fields have no _hoodie_record_key: sort by the key fields.
    if "_hoodie_record_key" in columns:
        return ["_hoodie_record_key"]
    return table.config.record_key_fields


@pytest.mark.parametrize("name", [n for n in ALL_FIXTURES if "empty" not in n])
def test_fixture_time_travel_to_first_commit(tmp_path, name):
    path = str(unzip_table(name, tmp_path))
    table = shoal.Table(path)
    first = table.timeline[0].time
    ours = table.read(as_of=first)
    theirs = hudi_rs_read(path, as_of=first)
    keys = _sort_keys(table, theirs.column_names)
    assert _canonical(ours.select(theirs.column_names), keys) == _canonical(theirs, keys)
    if "_hoodie_commit_time" in ours.column_names:
        assert set(ours["_hoodie_commit_time"].to_pylist()) <= {first}
