"""How shoal.spark.write finds each record's bucket without carrying tags from one pass to the
next: the key hash and exact key lookups the tasks use, footer tags (a function of the keys and
the footers), which inputs are evaluated twice and which are checkpointed first, and what
happens when an input changes between its two evaluations."""

from __future__ import annotations

import dataclasses
import random
import string
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.errors import InvalidArgumentError
from shoal.index.bloom import BloomIndex
from shoal.index.footer import read_key_footer
from shoal.spark import keys as keys_module
from shoal.spark.keys import KeyMap, key_hash
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import committed_paths


def _random_keys(rng: random.Random, n: int, max_length: int = 150) -> list[str]:
    alphabet = string.ascii_letters + string.digits + "-_/é€\x00 "
    return list({"".join(rng.choices(alphabet, k=rng.randint(1, max_length))) for _ in range(n)})


def test_key_hash_depends_on_the_key_alone():
    rng = random.Random(3)
    edge = ["ab", "ab\x00", "ab ", "a" * 64, "a" * 65, "a" * 64 + "b", "b" + "a" * 64]
    keys = [*_random_keys(rng, 400), *edge]
    alone = {k: int(key_hash(pa.array([k]))[0]) for k in keys}
    # In batches of other keys (other lengths, short and long), sliced, and chunked.
    for _ in range(5):
        rng.shuffle(keys)
        batch = pa.array(["padding-key-" * rng.randint(0, 12), *keys])
        hashed = key_hash(batch.slice(1))
        assert {k: int(h) for k, h in zip(keys, hashed, strict=True)} == alone
        chunked = pa.chunked_array([pa.array(keys[:100]), pa.array(keys[100:])])
        assert [int(h) for h in key_hash(chunked)] == [alone[k] for k in keys]
    # Distinct keys (including ones that differ only by trailing zero bytes or spaces, or in the
    # middle of a long key) get distinct hashes here.
    assert len(set(alone.values())) == len(keys)


def test_key_hash_spreads_keys_evenly():
    keys = pa.array([str(i * 7919) for i in range(50_000)])
    counts = np.bincount((key_hash(keys) % np.uint64(10)).astype(np.int64), minlength=10)
    assert counts.min() > 4_500 and counts.max() < 5_500


@pytest.mark.parametrize("hashing", ["real", "colliding", "constant"])
def test_key_map_lookups_are_exact(monkeypatch, hashing):
    """Lookups equal a dict's, also when keys share hashes: probes whose hash matches a key of
    the map but whose bytes differ, and maps whose own keys share hashes."""
    if hashing == "colliding":
        # Hash by length only: distinct within a map of keys of distinct lengths, but every
        # probe of such a length matches one.
        monkeypatch.setattr(
            keys_module, "key_hash", lambda k: pc.binary_length(k).to_numpy().astype(np.uint64)
        )
    elif hashing == "constant":
        monkeypatch.setattr(keys_module, "key_hash", lambda k: np.zeros(len(k), dtype=np.uint64))
    rng = random.Random(11)
    if hashing == "colliding":
        stored = ["x" * n for n in range(1, 60)]
        probes = ["y" * n for n in range(1, 70)] + stored[::3]
    else:
        stored = _random_keys(rng, 2_000)
        probes = _random_keys(rng, 2_000) + rng.sample(stored, 700)
    values = [None if i % 5 == 0 else f"file-{i % 7}" for i in range(len(stored))]
    model = dict(zip(stored, values, strict=True))
    key_map = KeyMap(pa.array(stored), pa.array(values, pa.string()))
    rng.shuffle(probes)
    at, found = key_map.lookup(pa.array(probes))
    assert sorted(zip(at.tolist(), found.to_pylist(), strict=True)) == sorted(
        (i, model[p]) for i, p in enumerate(probes) if p in model
    )
    empty_at, empty_found = KeyMap(pa.array([], pa.string()), pa.array([], pa.string())).lookup(
        pa.array(probes)
    )
    assert len(empty_at) == 0 and len(empty_found) == 0


def test_footer_tags_name_the_one_file_a_footer_admits(tmp_path):
    """Footer tags read no file: a key gets a file id when exactly that file's footer (key range
    and bloom filter) admits it; keys several footers admit are marked shared. Where a key is
    not shared, its footer tag is the unconfirmed tag (BloomIndex.tag(confirm=False))."""
    table = shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        record_key="id",
        options={
            "hoodie.parquet.max.file.size": "4000",
            "hoodie.parquet.small.file.limit": "0",
            "hoodie.index.bloom.num_entries": "20",
            "hoodie.index.bloom.fpp": "0.3",
            "hoodie.bloom.index.filter.type": "SIMPLE",
        },
    )
    for start in (0, 2, 4, 6):  # interleaved keys: key ranges overlap
        ids = list(range(start, 400, 8))
        table.insert(pa.table({"id": pa.array(ids, pa.int64()), "v": ids}))
    slices = table.file_slices()
    assert len(slices) >= 4
    keys = pa.array([str(k) for k in range(420)])
    admitted: list[set[str]] = [set() for _ in range(len(keys))]
    for sl in slices:
        footer = read_key_footer(table.storage, sl.base_file.path)
        in_range = [footer.min_key <= k <= footer.max_key for k in keys.to_pylist()]
        maybe = footer.bloom.might_contain_batch(keys).to_pylist()
        for i, (r, m) in enumerate(zip(in_range, maybe, strict=True)):
            if r and m:
                admitted[i].add(sl.file_id)
    index = BloomIndex(table.storage)
    ((tags, shared),) = index.footer_tags([(keys, slices)])
    (loose,) = index.tag([(keys, slices)], confirm=False)
    for i, files in enumerate(admitted):
        assert tags[i].as_py() == (next(iter(files)) if len(files) == 1 else None)
        assert bool(shared[i]) == (len(files) > 1)
        if len(files) < 2:
            assert tags[i].as_py() == loose[i].as_py()
    assert any(len(f) > 1 for f in admitted) and any(len(f) == 1 for f in admitted)


def test_only_inputs_that_could_change_are_checkpointed(spark, tmp_path):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from shoal.spark.frames import reproducible

    pa_table = pa.table({"k": [str(i) for i in range(20)], "p": ["a", "b"] * 10, "v": list(range(20))})
    source = tmp_path / "in.parquet"
    pq.write_table(pa_table, source)
    files = spark.read.parquet(str(source))
    local = spark.createDataFrame(pa_table)
    stable = {
        "files": files,
        "local": local,
        "projection and filter": files.select("k", "p").where(F.col("v") > 3),
        "join": files.join(local.select("k"), "k"),
        "aggregate": files.groupBy("p").agg(F.max("v").alias("v")),
        "union": files.unionByName(local),
        "repartition": files.repartition(3),
        "checkpointed": files.limit(5).localCheckpoint(),
    }
    changing = {
        "limit": files.limit(5),
        "sample": files.sample(0.5, seed=1),
        "random": files.withColumn("r", F.rand()),
        "dropDuplicates": files.dropDuplicates(["p"]),
        "first": files.groupBy("p").agg(F.first("k").alias("k")),
        "window": files.withColumn("n", F.row_number().over(Window.partitionBy("p").orderBy("v"))),
    }
    assert {name: reproducible(df) for name, df in stable.items()} == dict.fromkeys(stable, True)
    assert {name: reproducible(df) for name, df in changing.items()} == dict.fromkeys(changing, False)


def test_limited_input_is_evaluated_once(spark, tmp_path):
    """``df.limit(n)`` may take other rows when evaluated again: the write checkpoints it, and
    writes exactly the rows of one evaluation."""
    from shoal.spark.write import write as spark_write

    n = 3_000
    data = pa.table(
        {"id": [f"k{i:05d}" for i in range(n)], "p": [f"p{i % 4}" for i in range(n)], "v": list(range(n))}
    )
    df = spark.createDataFrame(data).repartition(8).limit(700)
    path = str(tmp_path / "t")
    spark_write(df, path, "upsert", table_name="t", record_key="id", partition_by="p", ordering_field="v")
    rows = rows_by(hudi_rs_read(path), ["id", "p", "v"], ["id"])
    assert len(rows) == 700
    assert all(r["p"] == f"p{r['v'] % 4}" and r["id"] == f"k{r['v']:05d}" for r in rows)


def _changing_keys(spark, tmp_path):
    """A table of keys a, b, c, and an input whose UDF (taken for deterministic) returns its key
    the first time it is evaluated, other keys after that."""
    from pyspark.sql import functions as F

    from shoal.spark.write import write as spark_write

    path = str(tmp_path / "t")
    base = pa.table({"id": ["a", "b", "c"], "v": [1, 2, 3]})
    spark_write(spark.createDataFrame(base), path, "bulk_insert", table_name="t", record_key="id")
    flag = tmp_path / "evaluated"

    def key(value):
        if flag.exists():
            return value + "-changed"
        flag.touch()
        return value

    changing = F.udf(key, "string")
    df = (
        spark.createDataFrame(pa.table({"id": ["a"], "v": [10]}))
        .repartition(1)
        .withColumn("id", changing("id"))
    )
    return path, df


def test_an_input_is_evaluated_once_without_a_global_index(spark, tmp_path):
    """The route pass is the write's one pass over its input: an input that would give other
    rows when evaluated again is written as that one evaluation gave it."""
    from shoal.spark.write import write as spark_write

    path, df = _changing_keys(spark, tmp_path)
    spark_write(df, path, "upsert")
    rows = rows_by(hudi_rs_read(path), ["id", "v"], ["id"])
    assert rows == [{"id": "a", "v": 10}, {"id": "b", "v": 2}, {"id": "c", "v": 3}]


def test_an_input_that_changes_between_evaluations_is_not_committed(spark, tmp_path):
    """A global index write evaluates its input twice (the key pass, then the route pass): an
    input that changes between the two fails the write with a typed error before its commit,
    and the next write rolls it back."""
    from shoal.spark.write import write as spark_write

    path, df = _changing_keys(spark, tmp_path)
    before = shoal.Table(path).latest_instant()
    with pytest.raises(InvalidArgumentError, match="changed between its two evaluations"):
        spark_write(df, path, "upsert", **{"hoodie.index.type": "GLOBAL_BLOOM"})
    assert shoal.Table(path).latest_instant() == before
    spark_write(spark.createDataFrame(pa.table({"id": ["d"], "v": [4]})), path, "upsert")
    rows = rows_by(hudi_rs_read(path), ["id", "v"], ["id"])
    assert rows == [{"id": "a", "v": 1}, {"id": "b", "v": 2}, {"id": "c", "v": 3}, {"id": "d", "v": 4}]
    on_disk = {p.name for p in Path(path).rglob("*.parquet") if ".hoodie" not in p.parts}
    assert on_disk == {Path(s).name for s in committed_paths(path)}


def test_bulk_insert_keeps_the_input_order_when_the_sort_mode_says_so(spark, tmp_path):
    from shoal.spark.write import write as spark_write

    ids = [f"k{i:03d}" for i in random.Random(5).sample(range(1000), 200)]
    df = spark.createDataFrame(pa.table({"id": ids, "v": list(range(200))})).repartition(1)
    for mode, expected in (("NONE", ids), ("GLOBAL_SORT", sorted(ids))):
        path = str(tmp_path / mode)
        spark_write(
            df, path, "bulk_insert", table_name="t", record_key="id", **{"hoodie.bulkinsert.sort.mode": mode}
        )
        (base,) = [p for p in Path(path).rglob("*.parquet") if ".hoodie" not in p.parts]
        assert pq.read_table(base, columns=["id"]).column("id").to_pylist() == expected


def test_log_append_tasks_split_off_keys_their_base_file_does_not_hold(tmp_path):
    from shoal.spark.write_tasks import split_strays
    from shoal.tasks.cow_write import OP_COLUMN, OP_HARD_DELETE, OP_UPSERT
    from shoal.tasks.mor_append import LogAppendSpec

    path = str(tmp_path / "t")
    table = shoal.Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id")
    table.bulk_insert(pa.table({"id": [f"k{i}" for i in range(10)], "v": list(range(10))}))
    (sl,) = table.file_slices()
    spec = LogAppendSpec(
        base_uri=table.storage.base_uri,
        instant="20990101000000000",
        partition_path="",
        file_id=sl.file_id,
        task_id=0,
        base_instant=sl.base_instant,
        base_file_name=sl.base_file.name,
        current_log_name=None,
        current_log_version=0,
        current_log_size=0,
        max_log_size=1 << 20,
        table_name="t",
        ordering_field=None,
    )
    records = pa.table(
        {
            "_hoodie_record_key": ["k1", "k2", "k11", "k12", "k3"],
            OP_COLUMN: pa.array([OP_UPSERT, OP_HARD_DELETE, OP_UPSERT, OP_HARD_DELETE, OP_UPSERT], pa.int8()),
        }
    )
    held, strays = split_strays(spec, records)
    assert held.column("_hoodie_record_key").to_pylist() == ["k1", "k2", "k3"]
    # New keys become inserts elsewhere; deletes of keys nobody holds are dropped.
    assert strays.column("_hoodie_record_key").to_pylist() == ["k11"]
    logs_only = dataclasses.replace(spec, base_file_name="")
    held, strays = split_strays(logs_only, records)
    assert held.num_rows == records.num_rows and strays.num_rows == 0
