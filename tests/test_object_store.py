"""Tables on an object store: S3, served by a local moto server, through pyarrow's S3 file system.

An object store has no directories and no appends, and the Rust core cannot open its files, so
these tables take the paths a local table does not: a log append starts a new log file, and
base and log files reach the core as bytes. A table on S3 must hold what the same operations
give a local table, and hudi-rs must read it from S3.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hudi import HudiTableBuilder

import shoal

# moto takes any credentials. They go in the URIs, so that Spark's Python workers, which do not
# see this process's environment, reach the bucket too.
KEY, SECRET = "testing", "testing"
COLUMNS = ["id", "city", "ts", "v"]


class Bucket:
    """A bucket on the moto server, and the URIs shoal and hudi-rs reach it by."""

    def __init__(self, endpoint: str, name: str) -> None:
        self.endpoint = endpoint
        self.name = name

    def uri(self, table: str) -> str:
        return (
            f"s3://{KEY}:{SECRET}@{self.name}/{table}"
            f"?endpoint_override={self.endpoint}&scheme=http&region=us-east-1"
        )

    def hudi_rs_read(self, table: str) -> pa.Table:
        builder = HudiTableBuilder.from_base_uri(f"s3://{self.name}/{table}")
        options = {
            "aws_endpoint_url": f"http://{self.endpoint}",
            "aws_allow_http": "true",
            "aws_access_key_id": KEY,
            "aws_secret_access_key": SECRET,
            "aws_region": "us-east-1",
        }
        for key, value in options.items():
            builder = builder.with_storage_option(key, value)
        batches = builder.build().read()
        return pa.Table.from_batches(batches)


@pytest.fixture(scope="module")
def bucket() -> Iterator[Bucket]:
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        client = boto3.client(
            "s3",
            endpoint_url=f"http://{host}:{port}",
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="lake")
        yield Bucket(f"{host}:{port}", "lake")
    finally:
        server.stop()


def _rows(ids: list[str], cities: list[str], ts: int, v: list[float]) -> pa.Table:
    return pa.table({"id": ids, "city": cities, "ts": [ts] * len(ids), "v": v})


def _sorted(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r[c] for c in COLUMNS) for r in table.select(COLUMNS).to_pylist())


def test_a_merge_on_read_table_with_logs_is_read_from_s3(bucket):
    uri = bucket.uri("mor_logs")
    t = shoal.Table.create(
        uri, "trips", table_type="MERGE_ON_READ", record_key="id", partition_by="city", ordering_field="ts"
    )
    t.upsert(_rows(["a", "b", "c"], ["sf", "nyc", "sf"], 1, [1.0, 2.0, 3.0]))
    t.upsert(_rows(["a", "d"], ["sf", "la"], 2, [10.0, 4.0]))
    t.delete(pa.table({"id": ["b"], "city": ["nyc"]}))
    # Updates and deletes went to log files: the snapshot merges them.
    assert any(s.log_files for s in shoal.Table(uri).file_slices())
    expected = [("a", "sf", 2, 10.0), ("c", "sf", 1, 3.0), ("d", "la", 2, 4.0)]
    assert _sorted(shoal.Table(uri).read()) == expected
    assert _sorted(shoal.Table(uri).read(columns=["id", "city", "ts", "v"], filters=[("v", ">", 3.5)])) == [
        ("a", "sf", 2, 10.0),
        ("d", "la", 2, 4.0),
    ]
    assert _sorted(bucket.hudi_rs_read("mor_logs")) == expected
    # The read-optimized view is the base files alone: the first write's records, and the insert
    # of the second (inserts go to base files).
    assert _sorted(shoal.Table(uri).read(query_type="read_optimized")) == [
        ("a", "sf", 1, 1.0),
        ("b", "nyc", 1, 2.0),
        ("c", "sf", 1, 3.0),
        ("d", "la", 2, 4.0),
    ]
    changes = shoal.Table(uri).read_incremental(start=t.timeline[0].time, include_deletes=True)
    assert sorted(changes.column("_hoodie_record_key").to_pylist()) == ["a", "b", "d"]
    t.compact()
    assert _sorted(shoal.Table(uri).read()) == expected
    assert _sorted(shoal.Table(uri).read(query_type="read_optimized")) == expected
    assert _sorted(bucket.hudi_rs_read("mor_logs")) == expected


def _run(tables: list[shoal.Table], rng: random.Random, step: int, table_type: str, index: str) -> str:
    """One random operation, the same on every table; returns its name."""
    ops = ["upsert", "upsert", "insert", "delete", "clean", "archive", "rollback", "stream"]
    ops += ["compact"] if table_type == "MERGE_ON_READ" else []
    ops += [] if index == "BUCKET" else ["insert_overwrite"]
    op = rng.choice(ops) if step else "bulk_insert"
    keys = list(dict.fromkeys(f"k{rng.randrange(300)}" for _ in range(rng.randint(5, 50))))
    cities = [rng.choice(["sf", "nyc", "la"]) for _ in keys]
    data = _rows(keys, cities, step + 1, [rng.random() for _ in keys])
    if op in ("upsert", "bulk_insert", "insert"):
        for t in tables:
            getattr(t, op)(data)
    elif op == "delete":
        now = tables[0].read()
        if now.num_rows:
            picked = sorted(rng.sample(range(now.num_rows), min(5, now.num_rows)))
            for t in tables:
                t.delete(now.take(picked).select(["id", "city"]))
    elif op == "insert_overwrite":
        for t in tables:
            t.insert_overwrite(data.filter(pc.equal(data.column("city"), "sf")))
    elif op == "rollback":
        if sum(i.action in ("commit", "deltacommit") for i in tables[0].timeline) > 1:
            for t in tables:
                t.rollback()
    elif op == "stream":
        half = data.num_rows // 2
        for t in tables:
            with t.stream_writer() as w:
                w.write(data.slice(0, half))
                w.write(data.slice(half))
    else:
        for t in tables:
            getattr(t, op)()
    return op


def _first_write(t: shoal.Table) -> str:
    return next(i.time for i in t.timeline if i.action in ("commit", "deltacommit", "replacecommit"))


@pytest.mark.parametrize("index", ["BLOOM", "BUCKET"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_table_on_s3_holds_what_a_local_twin_holds(bucket, tmp_path: Path, table_type, index):
    rng = random.Random(f"{table_type}-{index}")
    options = {
        "hoodie.index.type": index,
        "hoodie.parquet.small.file.limit": "100000",
        # Every base file is above the small-file limit (its bloom filter alone is 435 KB), so
        # each write's inserts start file groups: several per partition.
        "hoodie.parquet.max.file.size": "2000000",
        "hoodie.cleaner.commits.retained": "2",
        "hoodie.keep.min.commits": "3",
        "hoodie.keep.max.commits": "4",
        "hoodie.bucket.index.num.buckets": "2",
    }
    name = f"twin_{table_type}_{index}"
    paths = [str(tmp_path / "t"), bucket.uri(name)]
    for p in paths:
        shoal.Table.create(
            p,
            "t",
            table_type=table_type,
            record_key="id",
            partition_by="city",
            ordering_field="ts",
            options=options,
        )
    done: list[str] = []
    saw_logs = False
    most_groups = 0  # the most file groups beyond one per partition, over the run
    steps = 10
    for step in range(steps):
        # Write options are the writer's, not the table's: each opening takes them again.
        done.append(_run([shoal.Table(p, options=options) for p in paths], rng, step, table_type, index))
        local, remote = (shoal.Table(p) for p in paths)
        assert [(i.action, i.state) for i in remote.timeline] == [(i.action, i.state) for i in local.timeline]
        assert _sorted(remote.read()) == _sorted(local.read()), done
        if step % 3 == 2 or step == steps - 1:  # each read of an S3 table costs many requests
            assert _sorted(remote.read(query_type="read_optimized")) == _sorted(
                local.read(query_type="read_optimized")
            ), done
            # What changed after each table's earliest active write (their instant times differ).
            changes = [t.read_incremental(start=_first_write(t)) for t in (remote, local)]
            assert _sorted(changes[0]) == _sorted(changes[1])
        slices = remote.file_slices()
        saw_logs = saw_logs or any(s.log_files for s in slices)
        extra_groups = len({s.file_id for s in slices}) - len({s.partition_path for s in slices})
        most_groups = max(most_groups, extra_groups)
    # Not a vacuous run: merge-on-read slices had logs to merge, and partitions several files.
    assert saw_logs == (table_type == "MERGE_ON_READ")
    assert most_groups > 0
    remote = shoal.Table(paths[1])
    assert _sorted(bucket.hudi_rs_read(name)) == _sorted(remote.read())


def test_spark_writes_reads_and_compacts_a_table_on_s3(bucket, spark):
    import shoal.spark

    uri = bucket.uri("spark_mor")
    options = {
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    }
    schema = "id string, city string, ts long, v double"
    writes = [
        ("upsert", [("a", "sf", 1, 1.0), ("b", "nyc", 1, 2.0), ("c", "sf", 1, 3.0)]),
        ("upsert", [("a", "sf", 2, 10.0), ("d", "la", 2, 4.0)]),
        ("delete", [("b", "nyc", 3, 0.0)]),
    ]
    for operation, rows in writes:
        shoal.spark.write(spark.createDataFrame(rows, schema), uri, operation, options)
    assert any(s.log_files for s in shoal.Table(uri).file_slices())
    expected = [("a", "sf", 2, 10.0), ("c", "sf", 1, 3.0), ("d", "la", 2, 4.0)]
    shoal.spark.register(spark)
    assert _sorted(shoal.spark.read(spark, uri).toArrow()) == expected
    assert _sorted(spark.read.format("shoal").load(uri).toArrow()) == expected
    shoal.spark.compact(spark, uri)
    assert not any(s.log_files for s in shoal.Table(uri).file_slices())
    assert _sorted(shoal.spark.read(spark, uri).toArrow()) == expected
    assert _sorted(bucket.hudi_rs_read("spark_mor")) == expected
