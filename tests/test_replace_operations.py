"""insert_overwrite, insert_overwrite_table and delete_partition: replace commits as Hudi writes
them (tests/test_services_model.py mixes them with every table service against a model).

Each test checks the timeline files against the format, and reads the table back with hudi-rs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal import _native
from shoal.cli import main
from shoal.errors import InvalidArgumentError, UnsupportedError
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import SMALL_FILES, file_digests

COLUMNS = ["_hoodie_partition_path", "id", "city", "v"]


def _rows(ids, cities, v="a", ts=1) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": [cities[i % len(cities)] for i in range(len(ids))],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "v": [f"{v}{i}" for i in ids],
        }
    )


def _table(path: Path, table_type: str = "COPY_ON_WRITE", **options: str) -> shoal.Table:
    return shoal.Table.create(
        str(path),
        "r",
        table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        # Small files, and blooms sized for them: several file groups per partition.
        options={
            **SMALL_FILES,
            **options,
        },
    )


def _both(path: Path) -> list[dict]:
    ours = rows_by(shoal.Table(str(path)).read(), COLUMNS, ["id"])
    assert rows_by(hudi_rs_read(str(path)), COLUMNS, ["id"]) == ours
    return ours


def _live_groups(table: shoal.Table) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for sl in table.file_slices():
        out.setdefault(sl.partition_path, []).append(sl.file_id)
    return {p: sorted(ids) for p, ids in out.items()}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_insert_overwrite_replaces_the_partitions_it_writes(tmp_path, table_type):
    table = _table(tmp_path / "t", table_type)
    table.bulk_insert(_rows(range(30), ["sf", "nyc", "paris"]))
    table.bulk_insert(_rows(range(30, 60), ["sf", "nyc", "paris"]))
    table.upsert(_rows(range(0, 60, 4), ["sf", "nyc", "paris"], v="b", ts=2))  # logs on MOR
    before = _live_groups(table)
    assert len(before["sf"]) > 1  # several file groups replaced at once
    instant = table.insert_overwrite(_rows(range(100, 105), ["sf"], v="new"))
    rows = _both(tmp_path / "t")
    assert {r["id"] for r in rows if r["city"] == "sf"} == set(range(100, 105))
    assert {r["id"] for r in rows if r["city"] != "sf"} == {i for i in range(60) if i % 3 != 0}
    # The timeline, as Hudi writes it.
    hoodie = tmp_path / "t" / ".hoodie"
    requested = json.loads(
        _native.avro_container_decode((hoodie / f"{instant}.replacecommit.requested").read_bytes())
    )
    assert requested[0]["operationType"] == "INSERT_OVERWRITE" and requested[0]["clusteringPlan"] is None
    inflight = json.loads((hoodie / f"{instant}.replacecommit.inflight").read_text())
    assert inflight["operationType"] == "INSERT_OVERWRITE"
    completed = json.loads((hoodie / f"{instant}.replacecommit").read_text())
    assert completed["operationType"] == "INSERT_OVERWRITE"
    assert {p: sorted(ids) for p, ids in completed["partitionToReplaceFileIds"].items()} == {
        "sf": before["sf"]
    }
    assert set(completed["partitionToWriteStats"]) == {"sf"}
    # Reads before it still see the old partition; an incremental read sees the new records.
    previous = table.instants()[-2].requested_time
    assert len(table.read(as_of=previous)) == 60
    assert sorted(table.read_incremental(previous).column("id").to_pylist()) == list(range(100, 105))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_insert_overwrite_table_and_delete_partitions(tmp_path, table_type):
    table = _table(tmp_path / "t", table_type)
    table.upsert(_rows(range(30), ["sf", "nyc", "paris"]))
    table.delete_partitions(["nyc", "paris"])
    assert {r["city"] for r in _both(tmp_path / "t")} == {"sf"}
    completed = json.loads(
        (tmp_path / "t" / ".hoodie" / f"{table.latest_instant()}.replacecommit").read_text()
    )
    assert completed["operationType"] == "DELETE_PARTITION" and completed["partitionToWriteStats"] == {}
    assert set(completed["partitionToReplaceFileIds"]) == {"nyc", "paris"}
    table.insert_overwrite_table(_rows(range(200, 204), ["tokyo", "sf"]))
    assert [r["id"] for r in _both(tmp_path / "t")] == list(range(200, 204))
    table.insert_overwrite_table(_rows([], ["sf"]))
    assert _both(tmp_path / "t") == []
    # Deleting a partition again (its directory stays until the cleaner runs) replaces nothing.
    table.delete_partitions("nyc")
    assert _both(tmp_path / "t") == []


def test_delete_partitions_by_pattern(tmp_path):
    """A ``*`` in a partition path matches any characters, ``/`` included (Hudi's
    partitions.to.delete): dates of a month go at once; a pattern may match nothing."""
    table = _table(tmp_path / "t")
    days = ["2023/01/30", "2023/01/31", "2023/02/01", "2024/01/31"]
    table.upsert(_rows(range(40), days))
    table.delete_partitions(["2023/01/*", "2022*"])
    assert {r["city"] for r in _both(tmp_path / "t")} == {"2023/02/01", "2024/01/31"}
    completed = json.loads(
        (tmp_path / "t" / ".hoodie" / f"{table.latest_instant()}.replacecommit").read_text()
    )
    assert set(completed["partitionToReplaceFileIds"]) == {"2023/01/30", "2023/01/31"}
    table.delete_partitions(["*/01/31"])
    assert {r["city"] for r in _both(tmp_path / "t")} == {"2023/02/01"}
    with pytest.raises(InvalidArgumentError, match="'2023/02/02'"):
        table.delete_partitions(["2023/02/02", "2023/*"])


def test_rollback_and_clean_of_a_replace_commit(tmp_path):
    table = _table(
        tmp_path / "t", **{"hoodie.cleaner.commits.retained": "1", "hoodie.clean.automatic": "false"}
    )
    table.upsert(_rows(range(20), ["sf", "nyc"]))
    before = _both(tmp_path / "t")
    table.insert_overwrite(_rows(range(50, 53), ["sf"]))
    table.rollback()
    assert _both(tmp_path / "t") == before
    table.insert_overwrite(_rows(range(50, 53), ["sf"]))
    overwrite = table.latest_instant()
    old_sf = {p.name for p in (tmp_path / "t" / "sf").glob("*.parquet")}
    table.upsert(_rows([0], ["nyc"], v="z", ts=5))  # a commit after it, so it leaves retention
    assert table.clean()
    left = {p.name for p in (tmp_path / "t" / "sf").glob("*.parquet")}
    # The replaced file groups are gone, the new ones stay.
    assert left == {p for p in old_sf if p.endswith(f"_{overwrite}.parquet")} and left < old_sf
    assert {r["id"] for r in _both(tmp_path / "t") if r["city"] == "sf"} == {50, 51, 52}


def test_bad_replacing_writes_change_nothing(tmp_path):
    path = tmp_path / "t"
    table = _table(path)
    table.upsert(_rows(range(10), ["sf", "nyc"]))
    before = file_digests(path)
    with pytest.raises(InvalidArgumentError, match="not partitions of the table: 'sfo'"):
        table.delete_partitions(["sf", "sfo"])
    with pytest.raises(UnsupportedError, match="BUCKET"):
        table.insert_overwrite(_rows([1], ["sf"]), options={"hoodie.index.type": "BUCKET"})
    with pytest.raises(shoal.SchemaMismatchError):
        table.insert_overwrite(pa.table({"id": [1], "city": ["sf"], "ts": ["not a number"]}))
    assert file_digests(path) == before


def test_hive_style_partitions_and_the_cli(tmp_path, capsys):
    path = tmp_path / "t"
    table = _table(path, **{"hoodie.datasource.write.hive_style_partitioning": "true"})
    table.upsert(_rows(range(10), ["sf", "nyc"]))
    with pytest.raises(InvalidArgumentError, match="as stored"):
        table.delete_partitions(["sf"])
    groups = sorted(sl.file_id for sl in table.file_slices() if sl.partition_path == "city=sf")
    assert main(["delete-partition", str(path), "city=sf"]) == 0
    assert "replace commit" in capsys.readouterr().out
    assert main(["commit", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "DELETE_PARTITION" in shown and f"replaced in city=sf: {len(groups)} file group(s)" in shown
    assert all(g in shown.replace("\n", "") for g in groups)
    assert {r["city"] for r in _both(path)} == {"nyc"}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_spark_writes_give_the_table_local_writes_give(spark, tmp_path, table_type):
    import shoal.spark

    options = {
        "hoodie.table.name": "r",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
    }
    steps = [
        ("upsert", _rows(range(40), ["sf", "nyc", "paris"])),
        ("insert_overwrite", _rows(range(100, 110), ["sf", "tokyo"], v="o")),
        ("delete_partition", _rows([0], ["paris"])),
        ("upsert", _rows(range(0, 40, 5), ["nyc"], v="u", ts=3)),
    ]
    local = _table(tmp_path / "local", table_type)
    for operation, rows in steps:
        shoal.spark.write(
            spark.createDataFrame(rows.to_pandas()), str(tmp_path / "spark"), operation, options
        )
        local.write(rows, operation)
    want = _both(tmp_path / "local")
    assert _both(tmp_path / "spark") == want
    assert not any(r["city"] == "paris" for r in want) and {100, 101} <= {r["id"] for r in want}
    # delete_partition by option, then insert_overwrite_table.
    opts = {**options, "hoodie.datasource.write.partitions.to.delete": "tokyo"}
    shoal.spark.write(
        spark.createDataFrame(_rows([0], ["x"]).to_pandas()),
        str(tmp_path / "spark"),
        "delete_partition",
        opts,
    )
    assert not any(r["city"] == "tokyo" for r in _both(tmp_path / "spark"))
    shoal.spark.write(
        spark.createDataFrame(_rows([7, 8], ["rome"]).to_pandas()),
        str(tmp_path / "spark"),
        "insert_overwrite_table",
        options,
    )
    assert [r["id"] for r in _both(tmp_path / "spark")] == [7, 8]
    before = shoal.Table(str(tmp_path / "spark")).instants()
    with pytest.raises(UnsupportedError, match="BUCKET"):
        bucketed = {**options, "hoodie.index.type": "BUCKET"}
        shoal.spark.write(
            spark.createDataFrame(_rows([1], ["sf"]).to_pandas()),
            str(tmp_path / "spark"),
            "insert_overwrite",
            bucketed,
        )
    assert shoal.Table(str(tmp_path / "spark")).instants() == before
    actions = [t.action for t in shoal.Table(str(tmp_path / "spark")).timeline]
    assert actions.count("replacecommit") == 4


def test_data_source_overwrite(spark, tmp_path):
    from shoal.spark.datasource import register

    register(spark)
    path = str(tmp_path / "t")
    create = {
        "hoodie.table.name": "r",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
    }

    def save(rows, mode, **opts):
        frame = spark.createDataFrame(rows.to_pandas())
        frame.write.format("shoal").options(**create, **opts).mode(mode).save(path)

    save(_rows(range(20), ["sf", "nyc"]), "append", **{"hoodie.datasource.write.operation": "insert"})
    save(_rows(range(50, 53), ["sf"]), "append", **{"hoodie.datasource.write.operation": "insert_overwrite"})
    assert {(r["city"], r["id"] >= 50) for r in _both(Path(path))} == {("sf", True), ("nyc", False)}
    save(_rows(range(60, 62), ["rome"]), "overwrite")  # the whole table, as insert_overwrite_table
    assert [r["id"] for r in _both(Path(path))] == [60, 61]
    with pytest.raises(Exception, match=r"mode\('overwrite'\) with hoodie.datasource.write.operation=upsert"):
        save(_rows([1], ["sf"]), "overwrite", **{"hoodie.datasource.write.operation": "upsert"})
    assert [t.action for t in shoal.Table(path).timeline] == ["commit", "replacecommit", "replacecommit"]
