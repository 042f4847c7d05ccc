"""A record key several file groups of a partition hold (``insert``, which allows duplicates by
default, and ``bulk_insert`` keep keys the table holds, in new file groups): an upsert or delete
of that key reaches every copy, as Hudi's bloom and simple indexes join the incoming records
with every (key, file) location they find. Checked against a model of the table, hudi-rs, and
between ``shoal.Table`` and ``shoal.spark.write``."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import shoal
from shoal.config.write_config import WriteConfig
from shoal.index.bloom import BloomIndex
from shoal.write.writer import Operation, make_index
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "p", "v"]
DELETED = "_hoodie_is_deleted"


def _batch(ids: list[str], ts: int, v: int, partitions: list[str] | None = None, deleted: bool = False):
    n = len(ids)
    return pa.table(
        {
            "id": ids,
            "p": partitions if partitions is not None else ["x"] * n,
            "ts": pa.array([ts] * n, pa.int64()),
            "v": pa.array([v] * n, pa.int64()),
            DELETED: pa.array([deleted] * n, pa.bool_()),
        }
    )


# Key a ends up in three file groups, b in two, c in one; then every copy is updated, a new key
# inserted, and the copies deleted: by a delete, and by a `_hoodie_is_deleted` upsert.
SEQUENCE = [
    ("upsert", _batch(["a", "b", "c"], 1, 1)),
    ("bulk_insert", _batch(["a", "b"], 2, 2)),
    ("bulk_insert", _batch(["a"], 3, 3)),
    ("upsert", _batch(["a", "b", "d"], 9, 9)),
    ("delete", _batch(["a"], 10, 0)),
    ("upsert", _batch(["b", "c"], 11, 0, deleted=True)),
]
# Keys a and b in two partitions: a key is one record per partition (partitioned index).
PARTITIONED = [
    ("upsert", _batch(["a", "a", "b"], 1, 1, ["x", "y", "x"])),
    ("insert", _batch(["a", "b"], 2, 2, ["x", "x"])),
    ("bulk_insert", _batch(["a", "a", "b"], 3, 3, ["x", "y", "y"])),
    ("upsert", _batch(["a", "a", "b", "b"], 9, 9, ["x", "y", "x", "y"])),
    ("delete", _batch(["b"], 10, 0, ["x"])),
    ("upsert", _batch(["a"], 11, 0, ["y"], deleted=True)),
]


def _model(steps: list[tuple[str, pa.Table]]) -> list[list[dict]]:
    """The table's rows (id, p, v) after each step, by Hudi's semantics: inserts keep stored
    keys; an upsert or delete applies to every stored record of its (key, partition). Every step
    orders after the ones before, so event-time and commit-time ordering agree."""
    rows: list[dict] = []
    states = []
    for op, data in steps:
        incoming = data.to_pylist()
        if op in ("insert", "bulk_insert"):
            rows += [{c: r[c] for c in COLUMNS} for r in incoming]
        else:
            for r in incoming:
                where = (r["id"], r["p"])
                held = [s for s in rows if (s["id"], s["p"]) == where]
                rows = [s for s in rows if (s["id"], s["p"]) != where]
                if op == "delete" or r[DELETED]:
                    continue
                rows += [{c: r[c] for c in COLUMNS} for _ in held or [r]]
        states.append(sorted(rows, key=lambda r: (r["id"], r["p"], r["v"])))
    return states


def _rows(table: pa.Table) -> list[dict]:
    return rows_by(table, COLUMNS, ["id", "p", "v"])


def _write_options(index: str, partitioned: bool) -> dict[str, str]:
    """The partitioned sequence's insert goes to a file group of its own, not into a small
    file, where its keys would sit twice in one base file: merge-on-read then updates the first
    copy only (tests/test_duplicate_copies_in_one_file.py), which the model here does not say."""
    return {"hoodie.index.type": index, **({"hoodie.parquet.small.file.limit": "0"} if partitioned else {})}


def _create(path: Path, table_type: str, index: str, partitioned: bool) -> shoal.Table:
    shoal.Table.create(
        str(path),
        name="t",
        table_type=table_type,
        record_key="id",
        partition_by="p" if partitioned else None,
        ordering_field="ts",
    )
    return shoal.Table(str(path), options=_write_options(index, partitioned))


def _check_each_step(path: Path, steps, write_step) -> list[list[dict]]:
    """Writes the steps one by one with ``write_step(op, data)``; after each, the table as
    shoal and hudi-rs read it matches the model. Returns the rows after each step."""
    expected = _model(steps)
    seen = []
    for (op, data), want in zip(steps, expected, strict=True):
        write_step(op, data)
        got = _rows(shoal.Table(str(path)).read(columns=COLUMNS))
        assert got == want, f"after {op} of {data.column('id').to_pylist()}"
        assert _rows(hudi_rs_read(str(path))) == want, f"hudi-rs after {op}"
        seen.append(got)
    return seen


def _updates_and_deletes(result) -> tuple[int, int]:
    stats = result.metadata.write_stats()
    return sum(s.numUpdateWrites for s in stats), sum(s.numDeletes for s in stats)


def _file_groups_holding(path: Path, key: str) -> int:
    """How many file groups hold ``key`` (hudi-rs's snapshot, by file name)."""
    table = hudi_rs_read(str(path))
    ids = table.filter(pc.equal(table.column("_hoodie_record_key"), key))
    return len(set(ids.column("_hoodie_file_name").to_pylist()))


CASES = [
    pytest.param(
        table_type, index, partitioned, id=f"{table_type}-{index}-{'part' if partitioned else 'flat'}"
    )
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ")
    for index in ("BLOOM", "SIMPLE")
    for partitioned in (False, True)
]


def _steps(partitioned: bool):
    return PARTITIONED if partitioned else SEQUENCE


@pytest.mark.parametrize(("table_type", "index", "partitioned"), CASES)
def test_local_upsert_and_delete_reach_every_copy_of_a_key(tmp_path, table_type, index, partitioned):
    path = tmp_path / "t"
    t = _create(path, table_type, index, partitioned)
    results = []
    _check_each_step(path, _steps(partitioned), lambda op, data: results.append(t.write(data, op)))
    if not partitioned:
        # Each copy counts as an update (a: 3, b: 2) and as a delete (a: 3; then b: 2, c: 1).
        assert _updates_and_deletes(results[3]) == (5, 0)
        assert _updates_and_deletes(results[4]) == (0, 3)
        assert _updates_and_deletes(results[5]) == (0, 3)
    else:
        # (a, x): 3 copies, (a, y): 2, (b, x): 2, (b, y): 1.
        assert _updates_and_deletes(results[3]) == (8, 0)
        assert _updates_and_deletes(results[4]) == (0, 2)
        assert _updates_and_deletes(results[5]) == (0, 2)


def test_local_upsert_reaches_every_copy_after_small_file_inserts(tmp_path):
    """Inserts into a small file (Hudi's concat handle) hold a key twice in one file group: the
    upsert updates that file group's copies and the other file group's."""
    path = tmp_path / "t"
    t = _create(path, "COPY_ON_WRITE", "BLOOM", False)
    steps = [
        ("upsert", _batch(["a", "b"], 1, 1)),
        ("insert", _batch(["a"], 2, 2)),
        ("bulk_insert", _batch(["a", "b"], 3, 3)),
        ("upsert", _batch(["a", "b"], 9, 9)),
    ]
    _check_each_step(path, steps, lambda op, data: t.write(data, op))
    assert _file_groups_holding(path, "a") == 2


@pytest.mark.parametrize("confirm", [True, False])
@pytest.mark.parametrize("index_type", ["BLOOM", "SIMPLE"])
def test_tag_all_finds_every_file_group_holding_a_key(tmp_path, confirm, index_type):
    path = tmp_path / "t"
    t = _create(path, "COPY_ON_WRITE", index_type, False)
    for op, data in SEQUENCE[:3]:
        t.write(data, op)
    slices = t.file_slices()
    assert len(slices) == 3
    holders: dict[str, set[str]] = {}
    for sl in slices:
        assert sl.base_file is not None
        for key in pq.read_table(str(path / sl.base_file.path)).column("_hoodie_record_key").to_pylist():
            holders.setdefault(key, set()).add(sl.file_id)
    keys = pa.array(["c", "a", "zz", "b", "a"])
    index = make_index(t.storage, WriteConfig({"hoodie.index.type": index_type}), Operation.UPSERT)
    assert isinstance(index, BloomIndex)
    for order in (slices, slices[::-1]):
        (tagged,) = index.tag_all([(keys, order)], confirm=confirm)
        rows, file_ids = tagged.locations()
        found: dict[int, list[str]] = {}
        for row, fid in zip(rows.tolist(), file_ids.to_pylist(), strict=True):
            found.setdefault(row, []).append(fid)
        assert {r: set(f) for r, f in found.items()} == {
            0: holders["c"],
            1: holders["a"],
            3: holders["b"],
            4: holders["a"],
        }
        assert all(len(f) == len(set(f)) for f in found.values())
        # The first holder in slice order is the tag, whatever the threads' timing.
        first = {k: next(sl.file_id for sl in order if sl.file_id in holders[k]) for k in "abc"}
        assert tagged.file_ids.to_pylist() == [first["c"], first["a"], None, first["b"], first["a"]]
        (plain,) = index.tag([(keys, order)], confirm=confirm)
        assert plain.to_pylist() == tagged.file_ids.to_pylist()


def test_tag_all_gives_no_further_holders_when_each_key_has_one(tmp_path):
    path = tmp_path / "t"
    t = _create(path, "COPY_ON_WRITE", "BLOOM", False)
    t.upsert(_batch(["a", "b"], 1, 1))
    t.bulk_insert(_batch(["c"], 1, 1))
    (tagged,) = BloomIndex(t.storage).tag_all([(pa.array(["a", "c", "q"]), t.file_slices())])
    assert len(tagged.also_rows) == 0 and len(tagged.also_file_ids) == 0
    assert tagged.file_ids.null_count == 1


# ---- Spark ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("table_type", "index", "partitioned"), CASES)
def test_spark_upsert_and_delete_reach_every_copy_like_the_local_writer(
    spark, tmp_path, table_type, index, partitioned
):
    import shoal.spark

    steps = _steps(partitioned)
    local_path, spark_path = tmp_path / "local", tmp_path / "spark"
    local = _create(local_path, table_type, index, partitioned)
    local_results: list[Any] = []
    local_rows = _check_each_step(
        local_path, steps, lambda op, data: local_results.append(local.write(data, op))
    )

    spark_results: list[Any] = []
    first = [True]

    def spark_step(op: str, data: pa.Table) -> None:
        options = _write_options(index, partitioned)
        if first[0]:
            first[0] = False
            options.update(
                {
                    "hoodie.table.name": "t",
                    "hoodie.datasource.write.recordkey.field": "id",
                    "hoodie.datasource.write.precombine.field": "ts",
                    "hoodie.datasource.write.table.type": table_type,
                    "hoodie.datasource.write.partitionpath.field": "p" if partitioned else "",
                }
            )
        # Two input partitions: a key's records come from several route tasks.
        df = spark.createDataFrame(data).repartition(2)
        spark_results.append(shoal.spark.write(df, str(spark_path), op, options))

    spark_rows = _check_each_step(spark_path, steps, spark_step)
    assert spark_rows == local_rows
    for mine, theirs in zip(local_results[3:], spark_results[3:], strict=True):
        assert _updates_and_deletes(theirs) == _updates_and_deletes(mine)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_global_index_updates_every_copy_alike_locally_and_with_spark(spark, tmp_path, table_type):
    """A global index tags a key with every file group holding it too (``tag_globally``)."""
    import shoal.spark

    steps = SEQUENCE[:4]
    options = {"hoodie.index.type": "GLOBAL_BLOOM"}
    local_path, spark_path = tmp_path / "local", tmp_path / "spark"
    local = _create(local_path, table_type, "GLOBAL_BLOOM", False)
    local_rows = _check_each_step(local_path, steps, lambda op, data: local.write(data, op))
    created = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
    }

    def spark_step(op: str, data: pa.Table) -> None:
        extra = created if not spark_path.exists() else {}
        shoal.spark.write(spark.createDataFrame(data), str(spark_path), op, {**options, **extra})

    assert _check_each_step(spark_path, steps, spark_step) == local_rows


def test_probe_sequence_is_the_same_every_run(spark, tmp_path):
    """The reported sequence: which copy an upsert used to update depended on the random file
    ids; now every copy is updated, run after run, by both engines."""
    import shoal.spark

    steps = [(op, data.drop_columns([DELETED])) for op, data in SEQUENCE[:4]]
    outcomes = Counter()
    for trial in range(3):
        for engine in ("local", "spark"):
            path = tmp_path / f"{engine}{trial}"
            shutil.rmtree(path, ignore_errors=True)
            for i, (op, data) in enumerate(steps):
                if engine == "local":
                    if i == 0:
                        shoal.Table.create(str(path), "t", record_key="id", ordering_field="ts")
                    shoal.Table(str(path)).write(data, op)
                else:
                    opts = dict(table_name="t", record_key="id", ordering_field="ts") if i == 0 else {}
                    shoal.spark.write(spark.createDataFrame(data), str(path), op, **opts)
            got = tuple((r["id"], r["v"]) for r in _rows(shoal.Table(str(path)).read(columns=COLUMNS)))
            outcomes[got] += 1
    assert outcomes == Counter({(("a", 9),) * 3 + (("b", 9),) * 2 + (("c", 1), ("d", 9)): 6})
