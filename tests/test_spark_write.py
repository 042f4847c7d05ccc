"""Spark writes (shoal.spark.write): the same random operation sequence written by the local
writer and by Spark gives the same table, equal to a model and to what hudi-rs reads; a failed
write task attempt leaves neither duplicate rows nor files behind; options and bad input."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.errors import InvalidOptionError, InvalidRecordKeyError, SchemaMismatchError
from shoal.fs.naming import parse_log_file_name
from shoal.spark.write import _write
from shoal.spark.write import write as spark_write
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import committed_paths, data_files
from tests.test_table_model import USER_COLUMNS, Model

CITIES = ["sf", "nyc", "chennai"]
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("city", pa.string()),
        ("ts", pa.int64()),
        ("fare", pa.float64()),
        ("rider", pa.string()),
        ("_hoodie_is_deleted", pa.bool_()),
    ]
)
# Tiny files (and blooms sized for them): small-file packing and several file groups per partition.
SMALL_FILES = {
    "hoodie.parquet.max.file.size": "6000",
    "hoodie.parquet.small.file.limit": "4500",
    "hoodie.index.bloom.num_entries": "200",
    "hoodie.bloom.index.filter.dynamic.max.entries": "400",
}


def _table_options(name: str, table_type: str) -> dict[str, str]:
    return {
        "hoodie.table.name": name,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
        **SMALL_FILES,
    }


def _local_table(path: str, name: str, table_type: str) -> shoal.Table:
    """A table keyed by ``id``, partitioned by ``city``, ordered by ``ts``, with small files."""
    return shoal.Table.create(
        path,
        name=name,
        table_type=table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options=SMALL_FILES,
    )


class Batches:
    """Random batches like tests/test_table_model.py's: duplicates within a batch, late events,
    ``_hoodie_is_deleted`` rows, inserts of new keys and deletes of existing ones."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.city_of: dict[int, str] = {}
        self.next_key = 0
        self.clock = 1000

    def row(self, key: int, ts: int, deleted: bool = False) -> dict:
        return {
            "id": key,
            "city": self.city_of[key],
            "ts": ts,
            "fare": round(self.rng.uniform(1, 100), 2),
            "rider": f"rider-{self.rng.randint(0, 999)}",
            "_hoodie_is_deleted": deleted,
        }

    def fresh(self, n: int) -> list[dict]:
        rows = []
        for _ in range(n):
            self.city_of[self.next_key] = self.rng.choice(CITIES)
            self.clock += 1
            rows.append(self.row(self.next_key, self.clock))
            self.next_key += 1
        return rows

    def upserts(self) -> list[dict]:
        existing = list(self.city_of)
        batch = self.fresh(self.rng.randint(0, 30))
        for key in self.rng.sample(existing, min(len(existing), self.rng.randint(1, 40))):
            self.clock += 1
            ts = self.clock if self.rng.random() < 0.7 else self.rng.randint(0, 1000)
            batch.append(self.row(key, ts, deleted=self.rng.random() < 0.1))
            if self.rng.random() < 0.2:
                batch.append(self.row(key, ts + self.rng.choice([-1, 0, 1])))
        self.rng.shuffle(batch)
        return batch

    def deletes(self) -> list[dict]:
        victims = self.rng.sample(list(self.city_of), min(len(self.city_of), self.rng.randint(1, 20)))
        return [{"id": k, "city": self.city_of[k]} for k in victims]


def _arrow(rows: list[dict], delete: bool) -> pa.Table:
    if delete:
        return pa.Table.from_pylist(rows, schema=pa.schema([("id", pa.int64()), ("city", pa.string())]))
    return pa.Table.from_pylist(rows, schema=SCHEMA)


@pytest.mark.parametrize(
    ("table_type", "seed"), [("COPY_ON_WRITE", 5), ("MERGE_ON_READ", 6)], ids=["cow", "mor"]
)
def test_same_sequence_local_and_spark_give_the_same_table(spark, tmp_path, table_type, seed):
    batches = Batches(seed)
    local_path, spark_path = str(tmp_path / "local"), str(tmp_path / "spark")
    local = _local_table(local_path, "local", table_type)
    model = Model(partitioned=True)
    ops = ["bulk_insert", "upsert", "insert", "upsert", "delete", "upsert"]
    for step, op in enumerate(ops):
        if op in ("bulk_insert", "insert"):
            rows = batches.fresh(batches.rng.randint(60, 120))
            model.insert(rows)
        elif op == "upsert":
            rows = batches.upserts()
            model.upsert(rows)
        else:
            rows = batches.deletes()
            model.delete(rows)
        data = _arrow(rows, op == "delete")
        local.write(data, op)
        options = _table_options("sparkt", table_type) if step == 0 else {}
        df = spark.createDataFrame(data)
        if step % 2:
            # More input partitions than cores (each route task packs a file of its own),
            # rows still in batch order: ties on the ordering value go to the later record.
            order = pa.array(range(data.num_rows), pa.int64())
            df = (
                spark.createDataFrame(data.append_column("__order", order))
                .repartitionByRange(5, "__order")
                .sortWithinPartitions("__order")
                .drop("__order")
            )
            assert df.rdd.getNumPartitions() > spark.sparkContext.defaultParallelism
        result = spark_write(df, spark_path, op, options)
        assert result.operation.value == op.upper()

        expected = model.expected()
        ours = rows_by(shoal.Table(spark_path).read(), USER_COLUMNS, ["id", "city"])
        assert ours == expected, f"Spark-written table differs from the model after step {step} ({op})"
        assert rows_by(local.read(), USER_COLUMNS, ["id", "city"]) == expected
        oracle = rows_by(hudi_rs_read(spark_path), USER_COLUMNS, ["id", "city"])
        assert oracle == expected, f"hudi-rs reads other rows after step {step} ({op})"
    _assert_no_stray_files(spark_path)
    if table_type == "MERGE_ON_READ":
        # Updates of file groups went to log files, not only base file rewrites.
        assert any(parse_log_file_name(p.name) for p in Path(spark_path).rglob(".*.log.*"))


def _assert_no_stray_files(path: str) -> None:
    """Every base and log file on disk is one a completed commit reports, no markers remain,
    and no packed records of a write (``shoal.spark.packing``)."""
    assert data_files(path) == committed_paths(path)
    temp = Path(path) / ".hoodie" / ".temp"
    assert not list(temp.rglob("*.marker.*"))
    assert not list(temp.glob("shoal-packed-*"))


def _bulk_inserted(spark, path: str, seed: int, table_type: str) -> tuple[Batches, Model]:
    """A table of 80 records bulk inserted through Spark, with its model and batch source."""
    batches = Batches(seed)
    model = Model(partitioned=True)
    first = batches.fresh(80)
    spark_write(
        spark.createDataFrame(_arrow(first, False)), path, "bulk_insert", _table_options("retry", table_type)
    )
    model.insert(first)
    return batches, model


def _first_attempt_fails_after(record_dir: Path, files: int, partition: int | None = None):
    """A hook run after each file a write task writes: a first attempt (in Spark partition
    ``partition``, or any) records each file in ``record_dir`` and fails once it has written
    ``files`` of them."""

    def hook(spec, stat):
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.attemptNumber() != 0 or (partition is not None and context.partitionId() != partition):
            return
        (record_dir / str(len(list(record_dir.iterdir())))).write_text(stat.path)
        if len(list(record_dir.iterdir())) == files:
            raise RuntimeError(f"injected failure of a write task's first attempt after {files} files")

    return hook


def _assert_model_rows_once(path: str, model: Model) -> None:
    """shoal and hudi-rs read the model's rows, each key once, and no stray files are left."""
    _assert_no_stray_files(path)
    expected = model.expected()
    for got in (shoal.Table(path).read(), hudi_rs_read(path)):
        rows = rows_by(got, USER_COLUMNS, ["id", "city"])
        assert len({(r["city"], r["id"]) for r in rows}) == len(rows), "duplicate rows"
        assert rows == expected


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"], ids=["cow", "mor"])
def test_failed_task_attempt_leaves_no_duplicates_or_files(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    batches, model = _bulk_inserted(spark, path, 9, table_type)
    failed_dir = tmp_path / "failed_attempts"
    failed_dir.mkdir()
    # Spark partition 0's first attempt fails right after writing its first file.
    fail_first_attempt = _first_attempt_fails_after(failed_dir, 1, partition=0)

    updates = batches.upserts()
    result = _write(spark.createDataFrame(_arrow(updates, False)), path, "upsert", {}, fail_first_attempt)
    model.upsert(updates)

    failed = [p.read_text() for p in failed_dir.iterdir()]
    assert len(failed) == 1, "the failure was injected exactly once"
    assert failed[0] not in {s.path for s in result.metadata.write_stats()}
    assert not (Path(path) / failed[0]).exists(), "the failed attempt's file is left behind"
    _assert_model_rows_once(path, model)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"], ids=["cow", "mor"])
def test_a_failed_first_attempt_of_the_route_pass_leaves_no_trace(spark, tmp_path, table_type):
    """The first attempt of the route task (the write's one pass over its input), which has
    opened its packed file, fails partway through its rows: the retry finishes the write, every
    record is written once, and no packed records are left."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    path = str(tmp_path / "t")
    batches, model = _bulk_inserted(spark, path, 21, table_type)
    updates = batches.upserts()
    failing = updates[len(updates) // 2]["id"]

    def flaky(key):
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.partitionId() == 0 and context.attemptNumber() == 0 and key == failing:
            raise RuntimeError("injected failure of a first attempt")
        return key

    frame = spark.createDataFrame(_arrow(updates, False)).coalesce(1)
    frame = frame.withColumn("id", F.udf(flaky, LongType())(F.col("id")))
    result = spark_write(frame, path, "upsert", {})
    assert "route" in result.timings
    model.upsert(updates)
    _assert_model_rows_once(path, model)


def test_options_create_and_must_match_the_table(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.createDataFrame(pa.table({"k": ["a", "b"], "p": ["x", "y"], "v": [1, 2]}))
    with pytest.raises(InvalidOptionError, match=r"hoodie\.table\.name"):
        spark_write(df, path, record_key="k")
    with pytest.raises(InvalidOptionError, match="unknown operation"):
        spark_write(df, path, "merge", table_name="t", record_key="k")
    with pytest.raises(InvalidOptionError, match="unknown or unsupported option"):
        spark_write(df, path, table_name="t", record_key="k", **{"hoodie.not.an.option": "1"})
    spark_write(
        df,
        path,
        options={
            "hoodie.table.name": "t",
            "hoodie.datasource.write.recordkey.field": "k",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.operation": "insert",
        },
    )
    table = shoal.Table(path)
    assert (table.name, table.table_type, table.config.partition_fields) == ("t", "MERGE_ON_READ", ["p"])
    assert rows_by(hudi_rs_read(path), ["k", "p", "v"], ["k"]) == [
        {"k": "a", "p": "x", "v": 1},
        {"k": "b", "p": "y", "v": 2},
    ]
    with pytest.raises(InvalidOptionError, match="recordkey"):
        spark_write(df, path, record_key="v")
    with pytest.raises(InvalidOptionError, match=r"table\.type"):
        spark_write(df, path, table_type="COPY_ON_WRITE")
    with pytest.raises(InvalidOptionError, match="conflicts"):
        spark_write(df, path, "upsert", **{"hoodie.datasource.write.operation": "delete"})


def test_bad_input_fails_typed_before_the_timeline_changes(spark, tmp_path):
    path = str(tmp_path / "t")
    good = spark.createDataFrame(pa.table({"k": ["a"], "v": [1]}))
    spark_write(good, path, table_name="t", record_key="k")
    before = shoal.Table(path).instants()
    null_key = spark.createDataFrame(pa.table({"k": pa.array(["b", None]), "v": [2, 3]}))
    with pytest.raises(InvalidRecordKeyError, match="null"):
        spark_write(null_key, path)
    with pytest.raises(SchemaMismatchError):
        spark_write(spark.createDataFrame(pa.table({"k": ["c"]})), path)
    assert shoal.Table(path).instants() == before
    assert rows_by(hudi_rs_read(path), ["k", "v"], ["k"]) == [{"k": "a", "v": 1}]


def test_unconfirmed_tags_differ_from_exact_ones_only_by_bloom_false_positives(tmp_path):
    """The Spark writer tags a key without reading a file when only that file's footer lets
    the key through: keys the table holds get the exact tags, and a key no file holds may get
    a file id (a bloom false positive, which that file group's write takes as an insert)."""
    from shoal.index.bloom import BloomIndex

    table = shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        record_key="id",
        options={
            "hoodie.parquet.max.file.size": "4000",
            "hoodie.parquet.small.file.limit": "0",
            "hoodie.index.bloom.num_entries": "20",
            "hoodie.index.bloom.fpp": "0.2",
            "hoodie.bloom.index.filter.type": "SIMPLE",
        },
    )
    for start in (0, 2, 4, 6):  # interleaved keys: every file's key range overlaps the others'
        ids = list(range(start, 400, 8))
        table.insert(pa.table({"id": pa.array(ids, pa.int64()), "v": ids}))
    slices = table.file_slices()
    assert len(slices) >= 4
    keys = pa.array([str(k) for k in range(400)])
    index = BloomIndex(table.storage)
    (exact,) = index.tag([(keys, slices)])
    (loose,) = index.tag([(keys, slices)], confirm=False)
    exact, loose = exact.to_pylist(), loose.to_pylist()
    assert all(exact[k] is not None for k in range(0, 400, 2))
    assert all(loose[k] == exact[k] for k in range(0, 400, 2))
    false_positives = [k for k in range(1, 400, 2) if loose[k] is not None]
    assert false_positives, "the tiny blooms should let some new keys through"
    assert all(exact[k] is None for k in range(1, 400, 2))


# A merge-on-read table whose bloom filters (5 entries at fpp 0.5) let most keys through.
_SATURATED_BLOOM_MOR = {
    "hoodie.table.name": "fp",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.index.bloom.num_entries": "5",
    "hoodie.index.bloom.fpp": "0.5",
    "hoodie.bloom.index.filter.type": "SIMPLE",
}


def _id_ts(ids, ts: int, key_type: pa.DataType) -> pa.Table:
    return pa.table({"id": pa.array(ids, key_type), "ts": pa.array([ts] * len(ids), pa.int64())})


def test_merge_on_read_new_keys_never_land_in_logs_on_bloom_false_positives(spark, tmp_path):
    """With filters that let most keys through, Spark upserts into merge-on-read file groups
    (log appends) must still put new keys into base files: the bloom index of a later write
    looks at base files only, and would insert such a key a second time."""
    path = str(tmp_path / "t")
    options = {**_SATURATED_BLOOM_MOR, "hoodie.bloom.index.prune.by.ranges": "false"}

    def rows(ids, ts):
        return _id_ts(ids, ts, pa.int64())

    spark_write(spark.createDataFrame(rows(range(0, 60, 2), 1)), path, "bulk_insert", options)
    # Updates of even keys (log appends) and new odd keys, many of them bloom false positives.
    spark_write(spark.createDataFrame(rows(list(range(0, 60, 2)) + list(range(1, 60, 2)), 2)), path)
    # Every new key is in a base file: the read-optimized view (base files only) has them all.
    base_ids = shoal.Table(path).read(columns=["id"], query_type="read_optimized").column("id").to_pylist()
    assert set(range(1, 60, 2)) <= set(base_ids)
    assert any(".log." in s.path for stats in _commits(path) for s in stats if s.path)
    # The upsert logged the 30 updates only; the 30 new keys went to base files.
    upsert_stats = _commits(path)[1]
    assert sum(s.numWrites for s in upsert_stats if ".log." in s.path) == 30
    assert sum(s.numInserts for s in upsert_stats if ".log." not in s.path) == 30
    # A local (exact) upsert of the new keys finds them, in base files.
    shoal.Table(path).upsert(rows(range(1, 60, 2), 3))
    want = [{"id": i, "ts": 2 if i % 2 == 0 else 3} for i in range(60)]
    assert rows_by(shoal.Table(path).read(), ["id", "ts"], ["id"]) == want
    assert rows_by(hudi_rs_read(path), ["id", "ts"], ["id"]) == want


def _commits(path: str) -> list[list]:
    table = shoal.Table(path)
    timeline = Timeline.load(table.storage, table.config)
    return [timeline.commit_metadata(i).write_stats() for i in timeline.completed_data_instants()]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"], ids=["cow", "mor"])
def test_a_task_of_several_buckets_fails_after_writing_some(spark, tmp_path, table_type, monkeypatch):
    """Every bucket in one write task, whose first attempt fails after its second bucket: the
    retry writes all of them again, and only its files are committed."""
    import sys

    write_module = sys.modules["shoal.spark.write"]
    monkeypatch.setattr(write_module, "write_task_count", lambda weights, parallelism: 1)
    path = str(tmp_path / "t")
    batches, model = _bulk_inserted(spark, path, 11, table_type)
    written_dir = tmp_path / "first_attempt"
    written_dir.mkdir()

    fail_after_second_bucket = _first_attempt_fails_after(written_dir, 2)

    updates = batches.upserts()
    result = _write(
        spark.createDataFrame(_arrow(updates, False)), path, "upsert", {}, fail_after_second_bucket
    )
    model.upsert(updates)
    assert len(result.metadata.write_stats()) > 2, "the write has more buckets than the failed attempt wrote"
    first_attempt = [p.read_text() for p in written_dir.iterdir()]
    assert len(first_attempt) == 2
    committed = {s.path for s in result.metadata.write_stats()}
    for stale in first_attempt:
        assert stale not in committed and not (Path(path) / stale).exists()
    _assert_model_rows_once(path, model)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"], ids=["cow", "mor"])
def test_records_of_many_input_partitions_reach_their_buckets_in_input_order(spark, tmp_path, table_type):
    """An input of many partitions: every bucket's records come in runs of many packed files
    (one per route task), and records of one key in different partitions are deduplicated in
    input order (the later of two equal ones wins)."""
    path = str(tmp_path / "t")
    batches, model = _bulk_inserted(spark, path, 13, table_type)
    for _ in range(2):
        updates = batches.upserts()
        # Half the records again with the same ordering values and other fares, later in the
        # input (in a later partition): these win.
        again = [{**r, "fare": r["fare"] + 1000} for r in updates[: len(updates) // 2]]
        rows = updates + again
        table = _arrow(rows, False)
        ranged = (
            spark.createDataFrame(table.append_column("pos", pa.array(range(len(rows)))))
            .repartitionByRange(6, "pos")
            .sortWithinPartitions("pos")
        )
        df = ranged.drop("pos")
        assert df.rdd.getNumPartitions() == 6
        spark_write(df, path, "upsert", {})
        model.upsert(rows)
        _assert_model_rows_once(path, model)


def test_bloom_false_positives_join_the_partitions_new_base_file(spark, tmp_path):
    """A log append's bloom false positives (new keys its base file's footer admitted) go into
    the base file its partition's inserts create, when the two buckets share a task, rather
    than into a small file group of their own."""
    path = str(tmp_path / "t")
    # Every key within the file's key range passes its saturated filter.
    options = _SATURATED_BLOOM_MOR

    def rows(ids, ts):
        return _id_ts(ids, ts, pa.string())

    stored = [f"k{i:04d}" for i in range(0, 400, 2)]
    spark_write(spark.createDataFrame(rows(stored, 1)), path, "bulk_insert", options)
    # Updates (log appends), new keys inside the file's key range (bloom false positives) and
    # new keys beyond it (plain inserts, which make a new file group).
    admitted = [f"k{i:04d}" for i in range(1, 400, 2)]
    beyond = [f"z{i:04d}" for i in range(50)]
    spark_write(spark.createDataFrame(rows(stored[:60] + admitted + beyond, 2)), path)

    upsert_stats = _commits(path)[1]
    logs = [s for s in upsert_stats if ".log." in s.path]
    bases = [s for s in upsert_stats if ".log." not in s.path]
    assert sum(s.numWrites for s in logs) == 60
    assert len(bases) == 1, [s.path for s in bases]
    assert bases[0].numInserts == len(admitted) + len(beyond)
    want = {
        r: 2 if r in set(stored[:60]) | set(admitted) | set(beyond) else 1 for r in stored + admitted + beyond
    }
    expected = [{"id": k, "ts": want[k]} for k in sorted(want)]
    assert rows_by(shoal.Table(path).read(), ["id", "ts"], ["id"]) == expected
    assert rows_by(hudi_rs_read(path), ["id", "ts"], ["id"]) == expected
    # A local (exact) upsert of the admitted keys finds them in that base file: no duplicates.
    shoal.Table(path).upsert(rows(admitted, 3))
    got = rows_by(shoal.Table(path).read(), ["id", "ts"], ["id"])
    assert len(got) == len(want) and all(r["ts"] == 3 for r in got if r["id"] in set(admitted))


def test_a_spark_write_that_widens_a_type_compacts_merge_on_read_first(spark, tmp_path):
    """As Table writes do (docs/compatibility.md, "Schema evolution"): hudi-rs reads the table
    after a widening write and a later new column, over a log block of the old type."""
    import shoal.spark

    path = str(tmp_path / "t")
    options = {
        "hoodie.table.name": "w",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    }
    shoal.spark.write(
        spark.createDataFrame([(1, 1, 1), (2, 1, 2)], "id long, ts long, n int"), path, "upsert", options
    )
    shoal.spark.write(spark.createDataFrame([(1, 2, 3)], "id long, ts long, n int"), path, "upsert", options)
    shoal.spark.write(
        spark.createDataFrame([(2, 3, 2**40)], "id long, ts long, n long"), path, "upsert", options
    )
    later = spark.createDataFrame([(1, 4, 7, "x")], "id long, ts long, n long, extra string")
    shoal.spark.write(later, path, "upsert", options)
    want = [{"id": 1, "n": 7, "extra": "x"}, {"id": 2, "n": 2**40, "extra": None}]
    assert rows_by(shoal.Table(path).read(), ["id", "n", "extra"], ["id"]) == want
    assert rows_by(hudi_rs_read(path), ["id", "n", "extra"], ["id"]) == want
    actions = [t.action for t in shoal.Table(path).timeline]
    assert actions == ["deltacommit", "deltacommit", "compaction", "deltacommit", "deltacommit"]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_bloom_index_write_reads_only_the_footers_of_the_partitions_it_touches(
    spark, tmp_path, monkeypatch, table_type
):
    """The driver reads no footer (the Spark tasks read those they need), and no footer of a
    partition the write does not touch is read at all: a base file there whose footer cannot be
    read stands in the way of nothing."""
    from shoal.fs.storage import Storage

    path = str(tmp_path / "t")
    local = _local_table(path, "t", table_type)
    rows = [
        {"id": i, "city": CITIES[i % 3], "ts": 1, "fare": float(i), "rider": "a", "_hoodie_is_deleted": False}
        for i in range(60)
    ]
    local.insert(pa.Table.from_pylist(rows, schema=SCHEMA))
    untouched = sorted((tmp_path / "t" / "chennai").glob("*.parquet"))
    assert untouched
    saved = {p: p.read_bytes() for p in untouched}
    for p in untouched:
        p.write_bytes(b"not a parquet file")
    opened = Storage.open_input_file

    def no_base_files_here(self, rel):
        if rel.endswith(".parquet"):
            raise AssertionError(f"the driver opened {rel}")
        return opened(self, rel)

    monkeypatch.setattr(Storage, "open_input_file", no_base_files_here)
    # Updates and new keys in sf and nyc only.
    batch = [
        {"id": i, "city": CITIES[i % 3], "ts": 2, "fare": -1.0, "rider": "b", "_hoodie_is_deleted": False}
        for i in [*range(0, 60, 3), *range(1, 60, 3), 60, 61]
        if CITIES[i % 3] != "chennai"
    ]
    spark_write(spark.createDataFrame(pa.Table.from_pylist(batch, schema=SCHEMA).to_pandas()), path, "upsert")
    monkeypatch.undo()
    for p, data in saved.items():
        p.write_bytes(data)
    expected = {r["id"]: r for r in rows}
    expected.update({r["id"]: r for r in batch})
    columns = ["id", "city", "ts", "fare", "rider"]
    got = rows_by(hudi_rs_read(path), columns, ["id"])
    assert got == [{c: expected[i][c] for c in columns} for i in sorted(expected)]


def test_a_refused_first_write_leaves_the_path_as_it_was(spark, tmp_path):
    """A first write that fails (bad input, or a task failure) does not leave the table it
    created behind for the corrected retry to conflict with."""
    bad = spark.createDataFrame(pa.table({"id": ["a", None], "k2": ["x", "y"], "ts": [1, 1]}))
    new = tmp_path / "new"
    with pytest.raises(InvalidRecordKeyError):
        spark_write(bad, str(new), "upsert", table_name="t", record_key="id", ordering_field="ts")
    assert not new.exists()
    empty = tmp_path / "empty"
    empty.mkdir()

    def fail(spec, stat):
        raise RuntimeError("injected task failure")

    with pytest.raises(Exception, match="injected task failure"):
        _write(bad, str(empty), "upsert", {"table_name": "t", "record_key": "k2"}, fail)
    assert empty.exists() and not any(empty.iterdir())
    # The retry creates the table it asks for.
    spark_write(bad, str(new), "upsert", table_name="t", record_key="k2", table_type="MERGE_ON_READ")
    assert shoal.Table(str(new)).table_type == "MERGE_ON_READ"
    assert rows_by(hudi_rs_read(str(new)), ["k2"], ["k2"]) == [{"k2": "x"}, {"k2": "y"}]
    # A refused write into an existing table changes nothing there.
    before = sorted(p.relative_to(new) for p in new.rglob("*"))
    null_key = spark.createDataFrame(pa.table({"id": ["c"], "k2": pa.array([None], pa.string()), "ts": [2]}))
    with pytest.raises(InvalidRecordKeyError):
        spark_write(null_key, str(new), "upsert")
    assert sorted(p.relative_to(new) for p in new.rglob("*")) == before
