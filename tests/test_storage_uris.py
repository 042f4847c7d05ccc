"""A local table's path may be given as a plain path or as a ``file:`` URI, Hadoop's
``file:/data/t`` (as Spark and Hudi spell locations) included: each names the same table."""

from __future__ import annotations

import pyarrow as pa

import shoal
from shoal.fs.storage import Storage
from tests.hudi_oracle import hudi_rs_read


def test_every_spelling_of_a_local_path_names_the_same_table(tmp_path, monkeypatch):
    path = tmp_path / "t"
    shoal.Table.create(f"file:{path}", name="t", record_key="id", ordering_field="ts").upsert(
        pa.table({"id": ["a"], "ts": [1]})
    )
    shoal.Table(f"file://{path}").upsert(pa.table({"id": ["b"], "ts": [1]}))
    monkeypatch.chdir(tmp_path)
    shoal.Table("t").upsert(pa.table({"id": ["c"], "ts": [1]}))
    for spelling in (str(path), f"file:{path}", f"file://{path}", "t"):
        assert sorted(shoal.Table(spelling).read(columns=["id"]).column("id").to_pylist()) == ["a", "b", "c"]
        assert Storage(spelling).base_path == str(path)
    assert sorted(hudi_rs_read(str(path)).column("id").to_pylist()) == ["a", "b", "c"]
    # Nothing was made under a directory named "file:".
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]
