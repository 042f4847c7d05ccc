"""Spark writes with the bucket index (hoodie.index.type=BUCKET, simple engine): the same random
operation sequence written by shoal.spark.write and by local writes gives, after every commit,
the rows of a model (also as hudi-rs reads them), every key in the file group of its bucket (by
Java's hashing, written out in tests/test_bucket_index.py), the same file group per key and the
same write stats; bad bucket options leave the timeline as it was; local and Spark writes can
take turns on one table."""

from __future__ import annotations

import os
import random
from collections import defaultdict

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.errors import InvalidOptionError, InvalidRecordKeyError
from shoal.index.bucket import bucket_of_file
from shoal.spark.datasource import register
from shoal.spark.write import write as spark_write
from shoal.timeline.timeline import Timeline
from shoal.write.assigner import Assignment
from shoal.write.writer import Operation
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import committed_paths, data_files, record_listings
from tests.test_bucket_index import expected_bucket
from tests.test_table_model import Model

NUM_BUCKETS = 4
CITIES = ["sf", "nyc"]
# Names with multi-byte and surrogate-pair characters and a ':' (complex keys hash like Hudi's).
NAMES = ["ab", "ñandú", "日本", "\U0001f600", "x:y", "zz"]
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("city", pa.string()),
        ("ts", pa.int64()),
        ("v", pa.int64()),
        ("_hoodie_is_deleted", pa.bool_()),
    ]
)
COLUMNS = ["id", "name", "city", "ts", "v", "_hoodie_is_deleted"]
KEY_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("city", pa.string())])
BUCKET_OPTIONS = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": str(NUM_BUCKETS)}


class Rows:
    """Random rows: a key's name and city are fixed (so ``(city, id)`` identifies it under
    every key layout); batches repeat keys, carry late events and ``_hoodie_is_deleted`` rows."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_id = 0
        self.clock = 1000
        self.ids: list[int] = []

    def row(self, key: int, ts: int | None = None, deleted: bool = False) -> dict:
        if ts is None:
            self.clock += 1
            ts = self.clock
        return {
            "id": key,
            "name": NAMES[key % len(NAMES)],
            "city": CITIES[(key // 3) % len(CITIES)],
            "ts": ts,
            "v": self.rng.randint(0, 999),
            "_hoodie_is_deleted": deleted,
        }

    def fresh(self, n: int) -> list[dict]:
        rows = [self.row(self.next_id + i) for i in range(n)]
        self.ids += range(self.next_id, self.next_id + n)
        self.next_id += n
        return rows

    def existing(self, n: int) -> list[int]:
        return self.rng.sample(self.ids, min(n, len(self.ids)))

    def upserts(self) -> list[dict]:
        batch = self.fresh(self.rng.randint(5, 25))
        for key in self.existing(self.rng.randint(5, 25)):
            late = self.rng.random() < 0.2
            batch.append(self.row(key, ts=self.rng.randint(0, 999) if late else None))
            if self.rng.random() < 0.15:
                batch.append(self.row(key, deleted=True))
            if self.rng.random() < 0.15:
                batch.append(self.row(key))
        # A new key deleted in the batch that brings it: nothing of it remains.
        gone = self.fresh(1)[0]
        batch += [gone, self.row(gone["id"], deleted=True)]
        self.rng.shuffle(batch)
        return batch

    def inserts(self) -> list[dict]:
        # Inserts of keys the table holds (or held) too: the bucket index tags them, so they
        # update (on merge-on-read, and on copy-on-write without allow.duplicate.on.inserts).
        # No key twice: inserts keep duplicates of a batch.
        held = [self.row(k) for k in self.existing(4)]
        return self.fresh(self.rng.randint(5, 20)) + held

    def deletes(self) -> list[dict]:
        victims = [self.row(k) for k in self.existing(self.rng.randint(3, 12))]
        # A key nobody holds, in the bucket of one the table holds and (likely) in one without.
        victims += [self.row(10_000), self.row(10_001)]
        return [{c: r[c] for c in KEY_SCHEMA.names} for r in victims]


def _create(path: str, table_type: str, key_fields: list[str], partitioned: bool, hash_field: str | None):
    return shoal.Table.create(
        path,
        "t",
        table_type=table_type,
        record_key=key_fields if len(key_fields) > 1 else key_fields[0],
        partition_by="city" if partitioned else None,
        ordering_field="ts",
        options=_bucket_options(hash_field),
    )


def _bucket_options(hash_field: str | None) -> dict[str, str]:
    options = dict(BUCKET_OPTIONS)
    if hash_field:
        options["hoodie.bucket.index.hash.field"] = hash_field
    return options


def _file_groups_by_key(table: shoal.Table) -> dict[tuple[str, str], str]:
    """(partition, record key) -> the id of the file group holding it."""
    rows = table.read(columns=["_hoodie_partition_path", "_hoodie_record_key", "_hoodie_file_name"])
    return {
        (p, k): name.split("_")[0]
        for p, k, name in zip(
            *(
                rows.column(c).to_pylist()
                for c in ("_hoodie_partition_path", "_hoodie_record_key", "_hoodie_file_name")
            ),
            strict=True,
        )
    }


def _assert_layout(table: shoal.Table, hash_fields: list[str]) -> dict[tuple[str, str], str]:
    """Every key lives in the file group of its bucket; a partition has one file group per
    bucket at most. Returns the file group of every key."""
    numbers: dict[str, list[int]] = defaultdict(list)
    for sl in table.file_slices():
        number = bucket_of_file(sl.file_id)
        assert number is not None and number < NUM_BUCKETS, sl.file_id
        numbers[sl.partition_path].append(number)
    assert all(len(ns) == len(set(ns)) for ns in numbers.values()), numbers
    groups = _file_groups_by_key(table)
    for (partition, key), file_id in groups.items():
        assert bucket_of_file(file_id) == expected_bucket(key, hash_fields, NUM_BUCKETS), (
            partition,
            key,
            file_id,
        )
    return groups


def _same_file_groups(a: dict[tuple[str, str], str], b: dict[tuple[str, str], str]) -> None:
    """The same keys, grouped into the same file groups, of the same buckets. (The rest of a
    new file group's id is a random uuid: two tables cannot share it.)"""
    assert a.keys() == b.keys()
    pairs = {(fa, b[key]) for key, fa in a.items()}
    assert len({fa for fa, _ in pairs}) == len(pairs) == len({fb for _, fb in pairs})
    assert all(fa[:8] == fb[:8] for fa, fb in pairs)


def _stat_totals(result) -> dict[str, tuple[int, int, int, int]]:
    """Per partition: (records written, inserts, updates, deletes) of a commit."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for stat in result.metadata.write_stats():
        t = out[stat.partitionPath or ""]
        for i, n in enumerate((stat.numWrites, stat.numInserts, stat.numUpdateWrites, stat.numDeletes)):
            t[i] += n
    return {p: tuple(t) for p, t in out.items()}


def _arrow(rows: list[dict], op: str) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=KEY_SCHEMA if op == "delete" else SCHEMA)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_insert_into_a_bucket_keeps_duplicates_on_cow(spark, tmp_path, table_type):
    """As Hudi does: into an existing bucket, a copy-on-write insert goes through the concat
    handle and keeps the stored record of a key it writes again; merge-on-read logs it, and the
    logged record supersedes the stored one."""
    first = [
        {"id": i, "name": f"n{i}", "city": "sf", "ts": 1, "v": i, "_hoodie_is_deleted": False} for i in (1, 2)
    ]
    again = [{**first[0], "ts": 2, "v": 100}, {**first[0], "id": 3, "v": 3}]
    tables = []
    for engine in ("local", "spark"):
        path = str(tmp_path / engine)
        t = _create(path, table_type, ["id"], True, None)
        for op, rows in (("bulk_insert", first), ("insert", again)):
            data = _arrow(rows, op)
            if engine == "local":
                t.write(data, op, options=_bucket_options(None))
            else:
                spark_write(spark.createDataFrame(data), path, op, _bucket_options(None))
        tables.append(t)
    kept = [{"id": 1, "v": 1}] if table_type == "COPY_ON_WRITE" else []
    expected = sorted(
        [*kept, {"id": 1, "v": 100}, {"id": 2, "v": 2}, {"id": 3, "v": 3}], key=lambda r: (r["id"], r["v"])
    )
    for t in tables:
        assert rows_by(t.read(), ["id", "v"], ["id", "v"]) == expected
        assert rows_by(hudi_rs_read(t.path), ["id", "v"], ["id", "v"]) == expected


CASES = [
    ("COPY_ON_WRITE", True, ["id"], None),
    ("MERGE_ON_READ", False, ["id", "name"], "id"),
    ("MERGE_ON_READ", True, ["id", "name"], None),
]


@pytest.mark.parametrize(
    ("table_type", "partitioned", "key_fields", "hash_field"),
    CASES,
    ids=["cow-part-simple", "mor-flat-complex-hash-id", "mor-part-complex"],
)
def test_spark_and_local_writes_give_the_same_bucketed_table(
    spark, tmp_path, table_type, partitioned, key_fields, hash_field
):
    hash_fields = hash_field.split(",") if hash_field else key_fields
    rows = Rows(seed=len(key_fields) * 10 + partitioned)
    local_path, spark_path = str(tmp_path / "local"), str(tmp_path / "spark")
    local = _create(local_path, table_type, key_fields, partitioned, hash_field)
    _create(spark_path, table_type, key_fields, partitioned, hash_field)
    ours = shoal.Table(spark_path)
    model = Model(partitioned)
    steps = ["bulk_insert", "upsert", "insert", "delete", "upsert", "bulk_insert", "upsert"]
    for step, op in enumerate(steps):
        if op == "upsert":
            batch = rows.upserts()
            model.upsert(batch)
        elif op == "delete":
            batch = rows.deletes()
            model.delete(batch)
        else:
            batch = rows.fresh(40) if step == 0 else rows.inserts()
            model.upsert(batch)  # later events: an insert of a held key updates it
        data = _arrow(batch, op)
        options = _bucket_options(hash_field)
        if op == "insert" and table_type == "COPY_ON_WRITE":
            # By default a copy-on-write insert keeps the stored records of its keys beside its
            # own (Hudi's concat handle; test_insert_into_a_bucket_keeps_duplicates_on_cow).
            options["hoodie.merge.allow.duplicate.on.inserts"] = "false"
        local_result = local.write(data, op, options=options)
        spark_result = spark_write(spark.createDataFrame(data), spark_path, op, options)
        assert spark_result.operation == Operation(op.upper())

        expected = rows_by(pa.Table.from_pylist(model.expected(), schema=SCHEMA), COLUMNS, ["id"])
        assert rows_by(ours.read(), COLUMNS, ["id"]) == expected, (step, op)
        assert rows_by(hudi_rs_read(spark_path), COLUMNS, ["id"]) == expected, (step, op)
        assert rows_by(local.read(), COLUMNS, ["id"]) == expected, (step, op)
        _same_file_groups(_assert_layout(ours, hash_fields), _assert_layout(local, hash_fields))
        assert _stat_totals(spark_result) == _stat_totals(local_result), (step, op)
    assert data_files(spark_path) == committed_paths(spark_path)
    assert len(ours.file_slices()) <= NUM_BUCKETS * (len(CITIES) if partitioned else 1)


def _timeline_files(path: str) -> list[str]:
    return sorted(os.listdir(os.path.join(path, ".hoodie")))


@pytest.mark.parametrize(
    "options",
    [
        {"hoodie.bucket.index.num.buckets": "0"},
        {"hoodie.bucket.index.hash.field": "name"},
        {"hoodie.index.bucket.engine": "CONSISTENT_HASHING"},
        {"hoodie.bucket.index.num.buckets": "2"},
        {"hoodie.bucket.index.num.buckets": "8"},
    ],
    ids=["zero", "not-a-key", "engine", "fewer", "more"],
)
def test_bad_bucket_options_leave_the_timeline(spark, tmp_path, options):
    """Refused before the timeline changes: not even the failed write a crash left is rolled
    back (the next good write does that)."""
    path = str(tmp_path / "t")
    table = _create(path, "COPY_ON_WRITE", ["id"], False, None)
    rows = Rows(seed=1)
    table.upsert(_arrow(rows.fresh(60), "upsert"))
    writer = table._writer(None)
    writer.start(Operation.UPSERT, Assignment(), Timeline.load(table.storage, table.config), [])
    before = _timeline_files(path)
    df = spark.createDataFrame(_arrow(rows.upserts(), "upsert"))
    with pytest.raises(InvalidOptionError, match=r"(?i)bucket|simple"):
        spark_write(df, path, "upsert", {**BUCKET_OPTIONS, **options})
    assert _timeline_files(path) == before
    spark_write(df, path, "upsert", BUCKET_OPTIONS)
    assert _timeline_files(path) != before


def test_a_table_of_another_index_cannot_switch_to_buckets(spark, tmp_path):
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, "t", record_key="id", partition_by="city", ordering_field="ts")
    rows = Rows(seed=2)
    table.upsert(_arrow(rows.fresh(20), "upsert"))
    before = _timeline_files(path)
    df = spark.createDataFrame(_arrow(rows.upserts(), "upsert"))
    with pytest.raises(InvalidOptionError, match="bucket"):
        spark_write(df, path, "upsert", BUCKET_OPTIONS)
    assert _timeline_files(path) == before


def test_a_key_hudi_cannot_hash_fails_typed_before_the_timeline_changes(spark, tmp_path):
    """A complex key whose value holds a ',' has a part Hudi's bucket hashing cannot parse."""
    path = str(tmp_path / "t")
    table = _create(path, "MERGE_ON_READ", ["id", "name"], True, None)
    rows = Rows(seed=5)
    table.upsert(_arrow(rows.fresh(10), "upsert"))
    before = _timeline_files(path)
    bad = [*rows.fresh(3), dict(rows.row(7), name="a,b")]
    with pytest.raises(InvalidRecordKeyError, match="bucket"):
        spark_write(spark.createDataFrame(_arrow(bad, "upsert")), path, "upsert", BUCKET_OPTIONS)
    assert _timeline_files(path) == before


def test_the_data_source_writer_stages_bucket_writes(spark, tmp_path):
    """``df.write.format("shoal")`` cannot send a record to its bucket's file group from the
    task that has it: the write is staged, and the commit's write puts every key in its bucket's
    file group, the one a local write gives it."""
    register(spark)
    key_fields = ["id", "name"]
    rows = Rows(seed=6)
    local_path, ds_path = str(tmp_path / "local"), str(tmp_path / "ds")
    local = _create(local_path, "MERGE_ON_READ", key_fields, True, None)
    _create(ds_path, "MERGE_ON_READ", key_fields, True, None)
    ours = shoal.Table(ds_path)
    model = Model(True)
    for step, op in enumerate(["bulk_insert", "upsert", "insert", "delete", "upsert"]):
        if op == "delete":
            batch = rows.deletes()
            model.delete(batch)
        else:
            batch = rows.upserts() if op == "upsert" else rows.fresh(30) if step == 0 else rows.inserts()
            model.upsert(batch)
        data = _arrow(batch, op)
        local.write(data, op, options=_bucket_options(None))
        writer = spark.createDataFrame(data).repartition(3).write.format("shoal")
        writer = writer.option("hoodie.datasource.write.operation", op).options(**_bucket_options(None))
        writer.mode("append").save(ds_path)
        expected = rows_by(pa.Table.from_pylist(model.expected(), schema=SCHEMA), COLUMNS, ["id"])
        assert rows_by(ours.read(), COLUMNS, ["id"]) == expected, (step, op)
        assert rows_by(hudi_rs_read(ds_path), COLUMNS, ["id"]) == expected, (step, op)
        _same_file_groups(_assert_layout(ours, key_fields), _assert_layout(local, key_fields))
    assert data_files(ds_path) == committed_paths(ds_path)


def test_local_and_spark_writes_take_turns(spark, tmp_path):
    path = str(tmp_path / "t")
    table = _create(path, "MERGE_ON_READ", ["id"], True, None)
    rows = Rows(seed=3)
    model = Model(partitioned=True)
    first = rows.fresh(30)
    table.upsert(_arrow(first, "upsert"))
    model.upsert(first)
    for turn, op in enumerate(["upsert", "upsert", "delete", "upsert", "insert", "delete"]):
        batch = rows.deletes() if op == "delete" else rows.upserts() if op == "upsert" else rows.inserts()
        data = _arrow(batch, op)
        if turn % 2 == 0:
            spark_write(spark.createDataFrame(data), path, op, BUCKET_OPTIONS)
        else:
            table.write(data, op)
        if op == "delete":
            model.delete(batch)
        else:
            model.upsert(batch)
        expected = rows_by(pa.Table.from_pylist(model.expected(), schema=SCHEMA), COLUMNS, ["id"])
        assert rows_by(table.read(), COLUMNS, ["id"]) == expected, (turn, op)
        assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == expected, (turn, op)
        _assert_layout(table, ["id"])


def test_write_stats_count_inserts_and_updates(spark, tmp_path):
    """Copy-on-write: the commit counts the batch's new keys as inserts and its held keys as
    updates, also where a new key joins its bucket's file group (tagged as an update), and
    rewrites exactly the file groups of the batch's buckets."""
    path = str(tmp_path / "t")
    _create(path, "COPY_ON_WRITE", ["id"], True, None)
    rows = Rows(seed=4)
    first = rows.fresh(30)
    result = spark_write(spark.createDataFrame(_arrow(first, "upsert")), path, "upsert", BUCKET_OPTIONS)
    assert sum(s.numInserts for s in result.metadata.write_stats()) == 30
    held = rows.existing(5)
    fresh = rows.fresh(4)
    batch = [rows.row(k) for k in held] + fresh
    result = spark_write(spark.createDataFrame(_arrow(batch, "upsert")), path, "upsert", BUCKET_OPTIONS)
    stats = result.metadata.write_stats()
    assert sum(s.numUpdateWrites for s in stats) == 5
    assert sum(s.numInserts for s in stats) == 4

    def place(row: dict) -> tuple[str, int]:
        return row["city"], expected_bucket(str(row["id"]), ["id"], NUM_BUCKETS)

    touched = {place(r) for r in batch}
    assert {(s.partitionPath, bucket_of_file(s.fileId)) for s in stats} == touched
    # A rewrite writes every record of its file group.
    assert sum(s.numWrites for s in stats) == sum(place(r) in touched for r in first + fresh)


def test_a_spark_bucket_write_lists_only_the_partitions_it_touches(spark, tmp_path, monkeypatch):
    """The route pass hashes keys to buckets without the table's files, so the driver lists only
    the partitions the records fall in (as the local writer does)."""
    path = str(tmp_path / "t")
    options = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}
    table = shoal.Table.create(
        path, name="t", record_key="id", partition_by="p", ordering_field="ts", options=options
    )
    n = 200
    table.insert(pa.table({"id": list(range(n)), "p": [f"p{i % 10}" for i in range(n)], "ts": [1] * n}))
    listed = record_listings(monkeypatch)
    batch = pa.table({"id": [0, 10, 5000], "p": ["p0", "p0", "p3"], "ts": [2, 2, 2]})
    spark_write(spark.createDataFrame(batch), path, "upsert", options)
    monkeypatch.undo()
    assert {rel for rel, _ in listed if not rel.startswith(".hoodie")} == {"p0", "p3"}
    expected = [{"id": i, "p": f"p{i % 10}", "ts": 2 if i in (0, 10) else 1} for i in range(n)]
    expected.append({"id": 5000, "p": "p3", "ts": 2})
    assert rows_by(hudi_rs_read(path), ["id", "p", "ts"], ["id"]) == expected
