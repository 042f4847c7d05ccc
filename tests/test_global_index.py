"""Global indexes (GLOBAL_BLOOM, GLOBAL_SIMPLE): a record key is one record in the whole table.

A model of Hudi's rules (HoodieIndexUtils.tagGlobalLocationBackToRecords) runs beside random
sequences of upserts that change records' partitions (late events, soft deletes, duplicates of
a key in several partitions within a batch), inserts and deletes given the wrong partition; after
every commit shoal's snapshot and hudi-rs's equal the model, partition paths included, and no
key is held twice.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import InvalidOptionError
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import SMALL_FILES, committed_paths, data_files, file_digests

CITIES = ["sf", "nyc", "chennai", "paris"]
COLUMNS = ["_hoodie_partition_path", "id", "city", "ts", "v"]


def _schema(soft_deletes: bool = True) -> pa.Schema:
    fields = [("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.string())]
    if soft_deletes:
        fields.append(("_hoodie_is_deleted", pa.bool_()))
    return pa.schema(fields)


class GlobalModel:
    """id -> (partition path, row). ``move``: hoodie.*.index.update.partition.path;
    ``event_time``: a stored record with a greater ordering value wins over a late one."""

    def __init__(self, move: bool, event_time: bool) -> None:
        self.move = move
        self.event_time = event_time
        self.rows: dict[int, tuple[str, dict]] = {}

    def upsert(self, batch: list[dict]) -> None:
        best: dict[int, dict] = {}
        for row in batch:  # the batch is combined by key alone; later rows win ties
            if row["id"] not in best or row["ts"] >= best[row["id"]]["ts"]:
                best[row["id"]] = row
        for key, row in best.items():
            current = self.rows.get(key)
            if current is not None and self.event_time and current[1]["ts"] > row["ts"]:
                continue
            if row["_hoodie_is_deleted"]:
                self.rows.pop(key, None)
            elif current is None or self.move:
                self.rows[key] = (row["city"], row)
            else:
                self.rows[key] = (current[0], row)  # updated where it is, partition field and all

    def insert(self, batch: list[dict]) -> None:
        for row in batch:
            self.rows[row["id"]] = (row["city"], row)

    def delete(self, keys: list[int]) -> None:
        for key in keys:
            self.rows.pop(key, None)

    def expected(self) -> list[dict]:
        out = []
        for key in sorted(self.rows):
            partition, row = self.rows[key]
            out.append({"_hoodie_partition_path": partition, **{c: row[c] for c in COLUMNS[1:]}})
        return out


def _create(path: str, table_type: str, index: str, move: bool, ordering: str, **extra: str) -> shoal.Table:
    update_option = (
        "hoodie.simple.index.update.partition.path"
        if index == "GLOBAL_SIMPLE"
        else "hoodie.bloom.index.update.partition.path"
    )
    return shoal.Table.create(
        path,
        name="g",
        table_type=table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options={
            "hoodie.index.type": index,
            update_option: str(move).lower(),
            "hoodie.record.merge.mode": ordering,
            # Small files: several file groups per partition, each read and probed.
            **SMALL_FILES,
            **extra,
        },
    )


def _check(table: shoal.Table, path: str, model: GlobalModel, step: int) -> None:
    expected = model.expected()
    ours = table.read()
    assert len(set(ours.column("id").to_pylist())) == ours.num_rows, f"a key is held twice after step {step}"
    assert rows_by(ours, COLUMNS, ["id"]) == expected, f"shoal differs from the model after step {step}"
    theirs = rows_by(hudi_rs_read(path), COLUMNS, ["id"])
    assert theirs == expected, f"hudi-rs differs from the model after step {step}"


def _run(path: str, table: shoal.Table, model: GlobalModel, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    clock = 1000
    next_key = 0

    def row(key: int, city: str, ts: int, deleted: bool = False) -> dict:
        return {
            "id": key,
            "city": city,
            "ts": ts,
            "v": f"v{rng.randint(0, 999)}",
            "_hoodie_is_deleted": deleted,
        }

    for step in range(steps):
        op = "insert" if step == 0 else rng.choice(["upsert", "upsert", "upsert", "insert", "delete"])
        known = sorted(model.rows)
        if op == "insert":
            batch = []
            for _ in range(rng.randint(20, 80)):
                clock += 1
                batch.append(row(next_key, rng.choice(CITIES), clock))
                next_key += 1
            table.insert(pa.Table.from_pylist(batch, schema=_schema()))
            model.insert(batch)
        elif op == "upsert":
            batch = []
            for key in rng.sample(known, min(len(known), rng.randint(1, 40))):
                clock += 1
                # Half the updates change the record's partition; some are late events.
                ts = clock if rng.random() < 0.75 else rng.randint(0, 1000)
                batch.append(row(key, rng.choice(CITIES), ts, deleted=rng.random() < 0.1))
                if rng.random() < 0.2:  # the same key again, maybe in another partition
                    batch.append(row(key, rng.choice(CITIES), ts + rng.choice([-1, 0, 1])))
            for _ in range(rng.randint(0, 10)):
                clock += 1
                batch.append(row(next_key, rng.choice(CITIES), clock))
                next_key += 1
            rng.shuffle(batch)
            table.upsert(pa.Table.from_pylist(batch, schema=_schema()))
            model.upsert(batch)
        else:
            victims = rng.sample(known, min(len(known), rng.randint(1, 15)))
            # A delete names the key with any partition: the index finds where it is.
            keys = [{"id": k, "city": rng.choice(CITIES)} for k in victims]
            table.delete(pa.Table.from_pylist(keys))
            model.delete(victims)
        _check(table, path, model, step)


@pytest.mark.parametrize(
    ("table_type", "index", "move", "ordering"),
    [
        ("COPY_ON_WRITE", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING"),
        ("MERGE_ON_READ", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING"),
        ("COPY_ON_WRITE", "GLOBAL_SIMPLE", False, "EVENT_TIME_ORDERING"),
        ("MERGE_ON_READ", "GLOBAL_SIMPLE", False, "EVENT_TIME_ORDERING"),
        ("MERGE_ON_READ", "GLOBAL_BLOOM", True, "COMMIT_TIME_ORDERING"),
        ("COPY_ON_WRITE", "GLOBAL_SIMPLE", True, "COMMIT_TIME_ORDERING"),
    ],
)
def test_random_operations_against_the_model(tmp_path, table_type, index, move, ordering):
    path = str(tmp_path / "t")
    table = _create(path, table_type, index, move, ordering)
    _run(path, table, GlobalModel(move, ordering == "EVENT_TIME_ORDERING"), seed=7, steps=14)
    assert data_files(path) <= committed_paths(path)  # no file of a failed or rolled-back write


def test_merge_on_read_with_compaction_and_logged_deletes(tmp_path):
    """Records move out of file groups whose logs hold their latest versions and deletes, with
    compactions in between: the merged slices decide."""
    path = str(tmp_path / "t")
    table = _create(
        path,
        "MERGE_ON_READ",
        "GLOBAL_BLOOM",
        True,
        "EVENT_TIME_ORDERING",
        **{"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "3"},
    )
    _run(path, table, GlobalModel(True, True), seed=11, steps=16)
    completed = Timeline.load(table.storage, table.config).completed()
    assert sum(i.action == Action.COMPACTION for i in completed) >= 3


def test_a_record_moves_only_when_it_beats_the_stored_one(tmp_path):
    path = str(tmp_path / "t")
    table = _create(path, "MERGE_ON_READ", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING")
    rows = [{"id": 1, "city": "sf", "ts": 10, "v": "a", "_hoodie_is_deleted": False}]
    table.insert(pa.Table.from_pylist(rows, schema=_schema()))
    late = [{"id": 1, "city": "nyc", "ts": 5, "v": "late", "_hoodie_is_deleted": False}]
    table.upsert(pa.Table.from_pylist(late, schema=_schema()))
    want = [{"_hoodie_partition_path": "sf", "id": 1, "city": "sf", "ts": 10, "v": "a"}]
    assert rows_by(table.read(), COLUMNS, ["id"]) == want
    assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == want
    newer = [{"id": 1, "city": "nyc", "ts": 11, "v": "moved", "_hoodie_is_deleted": False}]
    table.upsert(pa.Table.from_pylist(newer, schema=_schema()))
    want = [{"_hoodie_partition_path": "nyc", "id": 1, "city": "nyc", "ts": 11, "v": "moved"}]
    assert rows_by(table.read(), COLUMNS, ["id"]) == want
    assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == want
    # The move logged a delete in the old partition's file group and inserted a base file in the new.
    read_optimized = table.read(query_type="read_optimized").column("_hoodie_partition_path").to_pylist()
    assert sorted(read_optimized) == ["nyc", "sf"]


def test_a_key_deleted_in_the_logs_is_inserted_into_its_new_partition(tmp_path):
    path = str(tmp_path / "t")
    table = _create(path, "MERGE_ON_READ", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING")
    rows = [{"id": 1, "city": "sf", "ts": 10, "v": "a", "_hoodie_is_deleted": False}]
    table.insert(pa.Table.from_pylist(rows, schema=_schema()))
    table.delete(pa.Table.from_pylist([{"id": 1, "city": "sf"}]))
    # Lower than the deleted record's ordering value: with the key gone, nothing outranks it.
    back = [{"id": 1, "city": "nyc", "ts": 3, "v": "back", "_hoodie_is_deleted": False}]
    table.upsert(pa.Table.from_pylist(back, schema=_schema()))
    want = [{"_hoodie_partition_path": "nyc", "id": 1, "city": "nyc", "ts": 3, "v": "back"}]
    assert rows_by(table.read(), COLUMNS, ["id"]) == want
    assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == want


def test_a_partitioned_index_keeps_a_copy_per_partition(tmp_path):
    """The contrast that makes the global index necessary for a partition field that changes."""
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, name="g", record_key="id", partition_by="city", ordering_field="ts")
    table.insert(pa.table({"id": [1], "city": ["sf"], "ts": [1], "v": ["a"]}))
    table.upsert(pa.table({"id": [1], "city": ["nyc"], "ts": [2], "v": ["b"]}))
    assert table.read().num_rows == 2
    table.upsert(
        pa.table({"id": [1], "city": ["paris"], "ts": [3], "v": ["c"]}),
        options={"hoodie.index.type": "GLOBAL_BLOOM"},
    )
    # Both copies are found: each gets a delete, and the record lands once in its new partition.
    want = [{"_hoodie_partition_path": "paris", "id": 1, "city": "paris", "ts": 3, "v": "c"}]
    assert rows_by(table.read(), COLUMNS, ["id"]) == want
    assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == want


def test_bad_options_fail_before_the_timeline_changes(tmp_path):
    path = tmp_path / "t"
    table = _create(str(path), "COPY_ON_WRITE", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING")
    table.insert(
        pa.Table.from_pylist([{"id": 1, "city": "sf", "ts": 1, "v": "a", "_hoodie_is_deleted": False}])
    )
    before = file_digests(path)
    with pytest.raises(InvalidOptionError, match=r"update\.partition\.path"):
        table.upsert(
            pa.table({"id": [1], "city": ["nyc"], "ts": [2], "v": ["b"]}),
            options={"hoodie.bloom.index.update.partition.path": "maybe"},
        )
    with pytest.raises(InvalidOptionError, match="GLOBAL_HBASE"):
        table.upsert(
            pa.table({"id": [1], "city": ["nyc"], "ts": [2], "v": ["b"]}),
            options={"hoodie.index.type": "GLOBAL_HBASE"},
        )
    assert file_digests(path) == before


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_shoal_spark_write_gives_the_table_a_local_write_gives(spark, tmp_path: Path, table_type):
    """The first write creates the table; later ones move records between partitions, with a late
    event and a delete naming the wrong partition: the same rows, partition paths included, as
    the same writes through shoal.Table, read by hudi-rs."""
    import shoal.spark

    schema = "id long, city string, ts long, v string"
    options = {
        "hoodie.table.name": "g",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.index.type": "GLOBAL_BLOOM",
    }
    batches = [
        ("upsert", [(i, CITIES[i % 4], 1, "a") for i in range(40)]),
        ("upsert", [(i, CITIES[(i + 1) % 4], 2, "b") for i in range(0, 40, 3)] + [(1, "paris", 0, "late")]),
        ("delete", [(i, "nowhere", 3, "") for i in range(0, 40, 7)]),
        ("upsert", [(i, CITIES[(i + 2) % 4], 4, "c") for i in range(0, 40, 5)] + [(99, "sf", 4, "new")]),
    ]
    local_path, spark_path = str(tmp_path / "local"), str(tmp_path / "spark")
    for operation, rows in batches:
        shoal.spark.write(spark.createDataFrame(rows, schema), spark_path, operation, options)
        data = pa.Table.from_pylist([dict(zip(["id", "city", "ts", "v"], r, strict=True)) for r in rows])
        if not (tmp_path / "local").exists():
            _create(local_path, table_type, "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING")
        getattr(shoal.Table(local_path), operation)(data, options={"hoodie.index.type": "GLOBAL_BLOOM"})
    local = rows_by(hudi_rs_read(local_path), COLUMNS, ["id"])
    assert rows_by(hudi_rs_read(spark_path), COLUMNS, ["id"]) == local
    assert rows_by(shoal.Table(spark_path).read(), COLUMNS, ["id"]) == local
    by_id = {r["id"]: r for r in local}
    assert by_id[1]["v"] == "a" and by_id[1]["_hoodie_partition_path"] == CITIES[1]  # the late event lost
    assert 7 not in by_id and by_id[10]["_hoodie_partition_path"] == CITIES[0]
    assert len(by_id) == 40 - 6 + 2 + 1  # 0 and 35 come back in the last batch, 99 is new
    assert len(shoal.Table(spark_path).instants()) == len(batches)


class _SparkWrites:
    """The writes of ``_run`` through shoal.spark.write, with the options the table was created with."""

    def __init__(self, spark, path: str, options: dict[str, str]) -> None:
        self.spark, self.path, self.options = spark, path, options
        self.results: list = []

    def _write(self, data: pa.Table, operation: str) -> None:
        import shoal.spark

        frame = self.spark.createDataFrame(data)
        self.results.append(shoal.spark.write(frame, self.path, operation, self.options))

    def insert(self, data: pa.Table) -> None:
        self._write(data, "insert")

    def upsert(self, data: pa.Table) -> None:
        self._write(data, "upsert")

    def delete(self, data: pa.Table) -> None:
        self._write(data, "delete")

    def read(self) -> pa.Table:
        return shoal.Table(self.path).read()


@pytest.mark.parametrize(
    ("table_type", "index", "move", "ordering"),
    [
        ("COPY_ON_WRITE", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING"),
        ("MERGE_ON_READ", "GLOBAL_SIMPLE", False, "EVENT_TIME_ORDERING"),
        ("MERGE_ON_READ", "GLOBAL_BLOOM", True, "COMMIT_TIME_ORDERING"),
    ],
)
def test_spark_writes_against_the_model(spark, tmp_path, table_type, index, move, ordering):
    """The model's random sequences through shoal.spark.write: the keys come to the driver,
    the records stay in Spark (a key pass, then the route pass and the write tasks)."""
    path = str(tmp_path / "t")
    _create(path, table_type, index, move, ordering)
    update_option = f"hoodie.{'simple' if index == 'GLOBAL_SIMPLE' else 'bloom'}.index.update.partition.path"
    options = {
        "hoodie.index.type": index,
        update_option: str(move).lower(),
        "hoodie.record.merge.mode": ordering,
        **SMALL_FILES,
    }
    writes = _SparkWrites(spark, path, options)
    _run(path, writes, GlobalModel(move, ordering == "EVENT_TIME_ORDERING"), seed=11, steps=12)  # type: ignore[arg-type]
    # Every upsert and delete ran the key pass: no write collected its records on the driver.
    looked_up = [r for r in writes.results if r.operation.value in ("UPSERT", "DELETE")]
    assert looked_up and all("keys" in r.timings and "collect" not in r.timings for r in looked_up)
    assert data_files(path) <= committed_paths(path)


@pytest.mark.parametrize("operation", ["upsert", "insert"])
def test_spark_writes_that_keep_repeated_keys(spark, tmp_path, operation):
    """Without deduplication, records of one key in a batch may go different ways, which a plan
    by key cannot say: such a batch is planned on the driver, whole, as a local write plans it
    (the same rows as shoal.Table, read by hudi-rs); a batch without repeats runs the key pass."""
    import shoal.spark

    options = {"hoodie.index.type": "GLOBAL_BLOOM", **SMALL_FILES}
    if operation == "upsert":
        options["hoodie.combine.before.upsert"] = "false"
    else:
        options["hoodie.merge.allow.duplicate.on.inserts"] = "false"
    first = [{"id": i, "city": CITIES[i % 4], "ts": 1, "v": "a"} for i in range(20)]
    distinct = [{"id": i, "city": CITIES[(i + 1) % 4], "ts": 2, "v": "b"} for i in range(0, 20, 4)]
    repeated = [
        {"id": 3, "city": "paris", "ts": 3, "v": "c"},
        {"id": 3, "city": "sf", "ts": 3, "v": "d"},
        {"id": 30, "city": "nyc", "ts": 3, "v": "e"},
    ]
    read = {}
    for name in ("local", "spark"):
        path = str(tmp_path / name)
        table = _create(path, "MERGE_ON_READ", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING")
        for batch in (first, distinct, repeated):
            data = pa.Table.from_pylist(batch, schema=_schema(soft_deletes=False))
            if name == "local":
                getattr(table, operation)(data, options=options)
                continue
            result = shoal.spark.write(spark.createDataFrame(data), path, operation, options)
            if batch is distinct:
                assert "keys" in result.timings and "collect" not in result.timings
            elif batch is repeated:
                assert "collect" in result.timings
        read[name] = rows_by(hudi_rs_read(path), COLUMNS, ["id", "v"])
    assert read["spark"] == read["local"]
    assert rows_by(shoal.Table(str(tmp_path / "spark")).read(), COLUMNS, ["id", "v"]) == read["local"]


def _stream_step(
    rng: random.Random, known: list[int], next_key: int, clock: int
) -> tuple[str, list[list[dict]], int]:
    """A random step for the streaming writer: its operation and its batches (one to three),
    with partition changes, late events, soft deletes and keys repeated within and across
    batches. Returns the operation, the batches and the next new key."""
    op = "delete" if rng.random() < 0.25 else "upsert"
    batches = []
    for _ in range(rng.randint(1, 3)):
        rows = []
        for key in rng.sample(known, min(len(known), rng.randint(1, 25))):
            clock += 1
            ts = clock if rng.random() < 0.75 else rng.randint(0, 1000)
            rows.append(
                {
                    "id": key,
                    "city": rng.choice(CITIES),
                    "ts": ts,
                    "v": f"v{clock}",
                    "_hoodie_is_deleted": False,
                }
            )
            if op == "upsert" and rng.random() < 0.1:
                rows[-1]["_hoodie_is_deleted"] = True
            if rng.random() < 0.15:
                rows.append({**rows[-1], "city": rng.choice(CITIES), "ts": ts + rng.choice([-1, 0, 1])})
        if op == "upsert":
            for _ in range(rng.randint(0, 8)):
                clock += 1
                rows.append(
                    {
                        "id": next_key,
                        "city": rng.choice(CITIES),
                        "ts": clock,
                        "v": "new",
                        "_hoodie_is_deleted": False,
                    }
                )
                known.append(next_key)
                next_key += 1
        rng.shuffle(rows)
        batches.append(rows)
    return op, batches, next_key


@pytest.mark.parametrize(
    ("table_type", "index", "move", "ordering", "seed"),
    [
        ("COPY_ON_WRITE", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING", 1),
        ("MERGE_ON_READ", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING", 2),
        ("MERGE_ON_READ", "GLOBAL_SIMPLE", False, "EVENT_TIME_ORDERING", 3),
        ("COPY_ON_WRITE", "GLOBAL_SIMPLE", False, "COMMIT_TIME_ORDERING", 4),
        ("MERGE_ON_READ", "GLOBAL_BLOOM", True, "COMMIT_TIME_ORDERING", 5),
    ],
)
def test_a_streaming_checkpoint_writes_what_one_write_of_its_batches_does(
    tmp_path, table_type, index, move, ordering, seed
):
    """The batches of a checkpoint, written through the streaming writer (small buffers, so
    buckets flush and flush again within a checkpoint), give the table that one shoal.Table
    write of all of them gives: a key's versions compete across the batches by the precombine
    rule, and the winner moves, stays or is inserted by the global index's rules, even when an
    earlier version had already moved the record within the checkpoint; hudi-rs agrees."""
    local = _create(str(tmp_path / "local"), table_type, index, move, ordering)
    stream_path = str(tmp_path / "stream")
    stream = _create(stream_path, table_type, index, move, ordering)
    rng = random.Random(seed)
    first = [
        {"id": i, "city": CITIES[i % 4], "ts": 1, "v": "a", "_hoodie_is_deleted": False} for i in range(60)
    ]
    local.upsert(pa.Table.from_pylist(first, schema=_schema()))
    with stream.stream_writer("upsert") as w:
        w.write(pa.Table.from_pylist(first, schema=_schema()))
    known, next_key, clock = list(range(60)), 60, 1000
    for step in range(10):
        op, batches, next_key = _stream_step(rng, known, next_key, clock)
        clock += 200
        with stream.stream_writer(op, bucket_buffer_bytes=1500, total_buffer_bytes=4000) as w:
            for rows in batches:
                data = pa.Table.from_pylist(rows, schema=_schema())
                w.write(data.select(["id", "city"]) if op == "delete" else data)
        whole = pa.Table.from_pylist([r for rows in batches for r in rows], schema=_schema())
        getattr(local, op)(whole.select(["id", "city"]) if op == "delete" else whole)
        expected = rows_by(local.read(), COLUMNS, ["id"])
        ours = stream.read()
        assert len(set(ours.column("id").to_pylist())) == ours.num_rows, (
            f"a key is held twice after step {step}"
        )
        assert rows_by(ours, COLUMNS, ["id"]) == expected, f"the stream differs after step {step}"
        assert rows_by(hudi_rs_read(stream_path), COLUMNS, ["id"]) == expected, (
            f"hudi-rs differs, step {step}"
        )
    assert data_files(stream_path) <= committed_paths(stream_path)


def test_spark_tasks_run_the_global_plan(spark, tmp_path):
    """shoal.spark.spark_table plans on the driver and writes with Spark tasks: same table as a
    local write of the same batches."""
    from shoal.spark.services import spark_table

    tables = {}
    for name in ("local", "spark"):
        path = str(tmp_path / name)
        _create(path, "MERGE_ON_READ", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING")
        table = spark_table(spark, path) if name == "spark" else shoal.Table(path)
        opts = {"hoodie.index.type": "GLOBAL_BLOOM"}
        first = [
            {"id": i, "city": CITIES[i % 4], "ts": 1, "v": "a", "_hoodie_is_deleted": False}
            for i in range(30)
        ]
        table.insert(pa.Table.from_pylist(first, schema=_schema()), options=opts)
        moved = [
            {"id": i, "city": CITIES[(i + 1) % 4], "ts": 2, "v": "b", "_hoodie_is_deleted": False}
            for i in range(0, 30, 3)
        ]
        table.upsert(pa.Table.from_pylist(moved, schema=_schema()), options=opts)
        tables[name] = rows_by(hudi_rs_read(path), COLUMNS, ["id"])
    assert tables["spark"] == tables["local"]
    assert sum(1 for r in tables["local"] if r["v"] == "b" and r["_hoodie_partition_path"] == r["city"]) == 10


_MAX_RESULT_SIZE_SCRIPT = """
import sys
import pyarrow as pa
import shoal
import shoal.spark
from shoal.spark import local_session

path, n = sys.argv[1], int(sys.argv[2])
spark = local_session(
    "local[2]",
    conf={"spark.driver.maxResultSize": "1m", "spark.ui.showConsoleProgress": "false"},
    fast_start=True,
)
spark.sparkContext.setLogLevel("ERROR")
options = {"hoodie.index.type": "GLOBAL_BLOOM"}
table = shoal.Table.create(
    path, name="g", record_key="id", partition_by="city", ordering_field="ts", options=options
)
ids = list(range(n))
table.insert(pa.table({"id": ids[: n // 2], "city": ["sf"] * (n // 2), "ts": [1] * (n // 2)}))
# Every stored key moves to nyc; the other half is new.
batch = pa.table({"id": ids, "city": ["nyc"] * n, "ts": [2] * n})
result = shoal.spark.write(spark.createDataFrame(batch), path, "upsert", options)
assert "keys" in result.timings and "collect" not in result.timings, result.timings
spark.stop()
"""


def test_a_global_write_takes_more_keys_than_the_drivers_max_result_size(tmp_path):
    """The key pass's rows reach the driver through files in the table's storage, not through
    the Spark driver's JVM: a batch whose keys are far over ``spark.driver.maxResultSize`` is
    written (in a Spark session of its own with a 1 MB limit)."""
    import subprocess
    import sys

    path, n = str(tmp_path / "t"), 80_000
    done = subprocess.run(
        [sys.executable, "-c", _MAX_RESULT_SIZE_SCRIPT, path, str(n)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_by(hudi_rs_read(path), ["_hoodie_partition_path", "id", "ts"], ["id"])
    assert rows == [{"_hoodie_partition_path": "nyc", "id": i, "ts": 2} for i in range(n)]


def _key_dirs(path: str) -> list[str]:
    temp = Path(path) / ".hoodie" / ".temp"
    return sorted(p.name for p in temp.iterdir() if p.name.startswith("shoal-keys-")) if temp.exists() else []


def test_the_key_files_are_deleted_after_the_write_and_after_a_failure(spark, tmp_path):
    import time

    import shoal.spark
    from shoal.errors import InvalidRecordKeyError

    path = str(tmp_path / "t")
    _create(path, "MERGE_ON_READ", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING")
    temp = Path(path) / ".hoodie" / ".temp"
    # Left by writes that crashed: two days ago (deleted by the next key pass) and a minute ago
    # (perhaps a write still running: kept).
    old = temp / f"shoal-keys-{int(time.time()) - 2 * 86400}-{'a' * 32}"
    recent = temp / f"shoal-keys-{int(time.time()) - 60}-{'b' * 32}"
    for d in (old, recent):
        d.mkdir(parents=True)
        (d / "0-0.arrow").write_bytes(b"")
    rows = [
        {"id": i, "city": CITIES[i % 4], "ts": 1, "v": "a", "_hoodie_is_deleted": False} for i in range(20)
    ]
    options = {"hoodie.index.type": "GLOBAL_BLOOM"}
    frame = spark.createDataFrame(pa.Table.from_pylist(rows, schema=_schema()))
    shoal.spark.write(frame, path, "upsert", options)
    assert _key_dirs(path) == [recent.name]
    bad = pa.Table.from_pylist([{**rows[0], "id": None}], schema=_schema())
    with pytest.raises(InvalidRecordKeyError):
        shoal.spark.write(spark.createDataFrame(bad), path, "upsert", options)
    assert _key_dirs(path) == [recent.name]
    assert rows_by(hudi_rs_read(path), ["id", "ts"], ["id"]) == [{"id": i, "ts": 1} for i in range(20)]


def test_failed_first_attempts_of_the_passes_leave_no_trace(spark, tmp_path):
    """The first attempt of every task over the input (the key pass's, then the route pass's)
    fails partway through its rows: the retries finish the write, every key is written once, and
    no key file or data file is left over."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    import shoal.spark

    def flaky(key):
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.partitionId() == 0 and context.attemptNumber() == 0 and key == 30:
            raise RuntimeError("injected failure of a first attempt")
        return key

    path = str(tmp_path / "t")
    _create(path, "MERGE_ON_READ", "GLOBAL_BLOOM", True, "EVENT_TIME_ORDERING")
    rows = [
        {"id": i, "city": CITIES[i % 4], "ts": 1, "v": "a", "_hoodie_is_deleted": False} for i in range(40)
    ]
    frame = spark.createDataFrame(pa.Table.from_pylist(rows, schema=_schema())).coalesce(1)
    frame = frame.withColumn("id", F.udf(flaky, LongType())(F.col("id")))
    options = {"hoodie.index.type": "GLOBAL_BLOOM"}
    result = shoal.spark.write(frame, path, "upsert", options)
    assert "keys" in result.timings
    assert _key_dirs(path) == []
    got = rows_by(hudi_rs_read(path), ["_hoodie_partition_path", "id", "ts"], ["id"])
    assert got == [{"_hoodie_partition_path": CITIES[i % 4], "id": i, "ts": 1} for i in range(40)]
    assert data_files(path) <= committed_paths(path)
