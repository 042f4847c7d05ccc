"""The public Table API on our own tables: inputs, projection, filters, partition pruning,
streaming reads, time travel, key generators, file sizing and rollback of failed writes.
Every table written here is also read back by hudi-rs."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal.config import table_config as tc
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import record_listings


def _trips(ids, ts=1, cities=("sf", "nyc", "chennai")):
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": [cities[i % len(cities)] for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "fare": [float(i) for i in ids],
        }
    )


def _same_as_hudi_rs(table: shoal.Table, columns=("id", "city", "ts", "fare")) -> list[dict]:
    ours = rows_by(table.read(), list(columns), ["id"])
    assert ours == rows_by(hudi_rs_read(table.path), list(columns), ["id"])
    return ours


@pytest.fixture
def trips(tmp_path) -> shoal.Table:
    t = shoal.Table.create(
        str(tmp_path / "trips"), name="trips", record_key="id", partition_by="city", ordering_field="ts"
    )
    t.bulk_insert(_trips(range(30)))
    return t


def test_pandas_and_polars_inputs(trips):
    trips.upsert(_trips(range(30, 35)).to_pandas())
    trips.upsert(pl.from_arrow(_trips(range(35, 40))))
    trips.upsert(pa.RecordBatchReader.from_batches(_trips([40]).schema, _trips([40]).to_batches()))
    rows = _same_as_hudi_rs(trips)
    assert [r["id"] for r in rows] == list(range(41))
    assert isinstance(pd.DataFrame(rows), pd.DataFrame)


def test_projection_filters_and_partition_pruning(trips, monkeypatch):
    read_files = []
    import shoal.read.snapshot as snapshot

    real = snapshot.read_base_slice

    def spy(spec, storage=None):
        read_files.append(spec.partition_path)
        return real(spec, storage)

    monkeypatch.setattr("shoal.table.read_base_slice", spy)
    out = trips.read(columns=["id", "fare"], filters=[("city", "=", "sf"), ("fare", ">=", 10.0)])
    assert out.column_names == ["id", "fare"]
    assert sorted(out["id"].to_pylist()) == [i for i in range(30) if i % 3 == 0 and i >= 10]
    assert set(read_files) == {"sf"}, "partitions other than sf must be pruned"
    read_files.clear()
    out = trips.read(columns=["id"], filters=[("city", "in", ["nyc", "chennai"]), ("id", "<", 5)])
    assert sorted(out["id"].to_pylist()) == [1, 2, 4]
    assert set(read_files) == {"nyc", "chennai"}


def test_read_batches_streams_the_same_rows(trips):
    trips.upsert(_trips(range(25, 45), ts=2))
    reader = trips.read_batches(columns=["id", "ts"])
    assert isinstance(reader, pa.RecordBatchReader)
    streamed = reader.read_all()
    assert rows_by(streamed, ["id", "ts"], ["id"]) == rows_by(
        trips.read(columns=["id", "ts"]), ["id", "ts"], ["id"]
    )


def test_time_travel_to_every_instant(trips):
    states = {trips.latest_instant(): set(range(30))}
    trips.upsert(_trips(range(30, 40)))
    states[trips.latest_instant()] = set(range(40))
    trips.delete(_trips(range(0, 10)).select(["id", "city"]))
    states[trips.latest_instant()] = set(range(10, 40))
    for instant, ids in states.items():
        assert set(trips.read(as_of=instant)["id"].to_pylist()) == ids
        assert set(hudi_rs_read(trips.path, as_of=instant)["id"].to_pylist()) == ids
    first = min(states)
    moment = dt.datetime.strptime(first[:14], "%Y%m%d%H%M%S").replace(
        microsecond=int(first[14:]) * 1000, tzinfo=dt.timezone.utc
    )
    assert set(trips.read(as_of=moment)["id"].to_pylist()) == states[first]


def test_timeline_lists_completed_instants(trips):
    trips.upsert(_trips([1], ts=5))
    entries = trips.timeline
    assert [e.action for e in entries] == ["commit", "commit"]
    assert all(e.state == "COMPLETED" for e in entries)
    assert entries[0].time < entries[1].time


def test_complex_keys_hive_style_and_url_encoding(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "c"),
        name="c",
        record_key=["id", "name"],
        partition_by=["region", "day"],
        ordering_field="ts",
        options={
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.write.partitionpath.urlencode": "true",
        },
    )
    data = pa.table(
        {
            "id": [1, 1, 2],
            "name": ["a", "b", "a"],
            "region": ["us/west", "eu", None],
            "day": ["2024-01-01", "2024-01-02", "2024-01-01"],
            "ts": [1, 1, 1],
        }
    )
    t.upsert(data)
    keys = sorted(t.read()["_hoodie_record_key"].to_pylist())
    assert keys == ["id:1,name:a", "id:1,name:b", "id:2,name:a"]
    paths = set(t.read()["_hoodie_partition_path"].to_pylist())
    assert paths == {
        "region=us%2Fwest/day=2024-01-01",
        "region=eu/day=2024-01-02",
        "region=__HIVE_DEFAULT_PARTITION__/day=2024-01-01",
    }
    props = (Path(t.path) / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.keygenerator.class=org.apache.hudi.keygen.ComplexKeyGenerator" in props
    theirs = hudi_rs_read(t.path)
    assert sorted(theirs["_hoodie_record_key"].to_pylist()) == keys


def test_timestamp_key_generator(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "ts"),
        name="ts",
        record_key="id",
        partition_by="event_ms",
        ordering_field="ts",
        key_generator="org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        options={
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        },
    )
    t.upsert(pa.table({"id": [1, 2], "event_ms": [1_700_000_000_000, 1_600_000_000_000], "ts": [1, 1]}))
    assert set(t.read()["_hoodie_partition_path"].to_pylist()) == {"2023/11/14", "2020/09/13"}
    assert sorted(hudi_rs_read(t.path)["id"].to_pylist()) == [1, 2]


def test_non_partitioned_table(tmp_path):
    t = shoal.Table.create(str(tmp_path / "np"), name="np", record_key="id", ordering_field="ts")
    t.upsert(_trips(range(5)))
    t.upsert(_trips(range(3, 8), ts=2))
    assert (Path(t.path) / ".hoodie_partition_metadata").exists()
    rows = _same_as_hudi_rs(t)
    assert [r["ts"] for r in rows] == [1, 1, 1, 2, 2, 2, 2, 2]


def test_bulk_insert_cuts_sorted_files_at_the_target_size(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "b"),
        name="b",
        record_key="id",
        ordering_field="ts",
        options={
            "hoodie.parquet.max.file.size": "60000",
            "hoodie.parquet.small.file.limit": "0",
            "hoodie.index.bloom.num_entries": "1000",
            "hoodie.bloom.index.filter.dynamic.max.entries": "2000",
        },
    )
    n = 20_000
    t.bulk_insert(
        pa.table(
            {
                "id": [f"k{i:06d}" for i in range(n)][::-1],
                "ts": [1] * n,
                "payload": [f"value-{i}" * 3 for i in range(n)],
            }
        )
    )
    files = sorted(Path(t.path).glob("*.parquet"))
    assert len(files) > 3
    ranges = []
    for f in files:
        meta = pq.read_metadata(f).metadata
        ranges.append((meta[b"hoodie_min_record_key"], meta[b"hoodie_max_record_key"]))
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()
        assert keys == sorted(keys), "bulk_insert writes each file sorted by key"
    ranges.sort()
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges)), "key ranges of files do not overlap"
    sizes = [os.path.getsize(f) for f in files]
    assert max(sizes) < 60000 * 1.5
    assert sorted(hudi_rs_read(t.path)["id"].to_pylist()) == sorted(f"k{i:06d}" for i in range(n))


@pytest.mark.parametrize(
    ("mode", "key_order"),
    [("GLOBAL_SORT", True), ("PARTITION_SORT", True), ("NONE", False), ("PARTITION_PATH_REPARTITION", False)],
)
def test_bulk_insert_sort_mode(tmp_path, mode, key_order):
    t = shoal.Table.create(
        str(tmp_path / "b"),
        name="b",
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options={"hoodie.bulkinsert.sort.mode": mode.lower() if mode == "NONE" else mode},
    )
    # Keys arrive in a shuffled order that is neither ascending nor descending.
    ids = [(i * 7919) % 1000 for i in range(1000)]
    data = pa.table(
        {
            "id": pa.array([f"k{i:04d}" for i in ids]),
            "city": [("sf", "nyc")[i % 2] for i in ids],
            "ts": pa.array([1] * len(ids), pa.int64()),
            "fare": [float(i) for i in ids],
        }
    )
    t.bulk_insert(data)
    files = sorted(Path(t.path).glob("*/*.parquet"))
    assert len(files) == 2
    for f in files:
        city = f.parent.name
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()
        pairs = zip(data["id"].to_pylist(), data["city"].to_pylist(), strict=True)
        given = [k for k, c in pairs if c == city]
        assert keys == (sorted(given) if key_order else given)
        meta = pq.read_metadata(f).metadata
        assert (meta[b"hoodie_min_record_key"], meta[b"hoodie_max_record_key"]) == (
            min(given).encode(),
            max(given).encode(),
        )
    rows = rows_by(hudi_rs_read(t.path), ["id", "city", "fare"], ["id"])
    assert rows == rows_by(data, ["id", "city", "fare"], ["id"])
    # The footers index every key, whatever the order: an upsert finds them all.
    t.upsert(data.set_column(3, "fare", pa.array([-1.0] * data.num_rows)))
    assert t.read().num_rows == 1000
    assert set(hudi_rs_read(t.path)["fare"].to_pylist()) == {-1.0}


@pytest.mark.parametrize("mode", ["GLOBAL_SORT", "NONE"])
def test_bulk_insert_cuts_partitions_into_several_files(tmp_path, mode):
    """Partitions larger than a file: every file holds a run of the partition's order (key
    order, equal keys in input order; or input order), and the runs cover it exactly once."""
    t = shoal.Table.create(
        str(tmp_path / "b"),
        name="b",
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options={
            "hoodie.parquet.max.file.size": "40000",
            "hoodie.parquet.small.file.limit": "0",
            "hoodie.combine.before.insert": "false",
            "hoodie.bulkinsert.sort.mode": mode,
        },
    )
    n = 12_000
    # Shuffled keys, a tenth of them twice (duplicates are kept without combining).
    ids = [(i * 7919) % (n - n // 10) for i in range(n)]
    data = pa.table(
        {
            "id": [f"k{i:06d}" for i in ids],
            "city": [("sf", "nyc", "la")[i % 3] for i in range(n)],
            "ts": pa.array([1] * n, pa.int64()),
            "seq": pa.array(range(n), pa.int64()),
        }
    )
    t.bulk_insert(data)
    for city in ("sf", "nyc", "la"):
        given = [(k, s) for k, c, s in zip(ids, data["city"].to_pylist(), range(n), strict=True) if c == city]
        expected = sorted(given) if mode == "GLOBAL_SORT" else given
        runs = []
        for f in (Path(t.path) / city).glob("*.parquet"):
            stored = pq.read_table(f, columns=["_hoodie_record_key", "seq"])
            keys = [int(k[1:]) for k in stored["_hoodie_record_key"].to_pylist()]
            runs.append(list(zip(keys, stored["seq"].to_pylist(), strict=True)))
        assert len(runs) > 2
        runs.sort(key=lambda run: expected.index(run[0]))
        assert [row for run in runs for row in run] == expected
    assert sorted(hudi_rs_read(t.path)["seq"].to_pylist()) == list(range(n))


def test_inserts_fill_small_files_before_new_file_groups(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "s"),
        name="s",
        record_key="id",
        ordering_field="ts",
        options={"hoodie.parquet.max.file.size": str(10 * 2**20)},
    )
    t.insert(_trips(range(100)).drop_columns(["city"]))
    t.insert(_trips(range(100, 200)).drop_columns(["city"]))
    t.upsert(_trips(range(200, 300)).drop_columns(["city"]))
    assert len(t.file_slices()) == 1, "new records go to the existing small file group"
    assert len(_same_as_hudi_rs(t, ("id", "ts", "fare"))) == 300


def test_failed_write_is_rolled_back_before_the_next_write(trips, monkeypatch):
    before = _same_as_hudi_rs(trips)
    import shoal.tasks.cow_write as cow

    real, real_spliced = cow.write_base_file, cow.write_spliced_base_file
    calls = []

    def crash_after_first_file(*args, **kwargs):
        if calls:
            raise OSError("disk full")
        calls.append(1)
        return real(*args, **kwargs)

    def spliced_crash_after_first_file(*args, **kwargs):
        if calls:
            raise OSError("disk full")
        calls.append(1)
        return real_spliced(*args, **kwargs)

    monkeypatch.setattr(cow, "write_base_file", crash_after_first_file)
    monkeypatch.setattr(cow, "write_spliced_base_file", spliced_crash_after_first_file)
    with pytest.raises(OSError):
        trips.upsert(_trips(range(100, 160), ts=3))
    monkeypatch.setattr(cow, "write_base_file", real)
    monkeypatch.setattr(cow, "write_spliced_base_file", real_spliced)
    # The failed instant is pending, its files are invisible to shoal...
    assert any(not i.is_completed for i in trips.instants())
    assert rows_by(trips.read(), ["id", "city", "ts", "fare"], ["id"]) == before
    # ...and the next write rolls it back, so hudi-rs (which does not check instants) is right too.
    trips.upsert(_trips([1], ts=9))
    assert all(i.is_completed for i in trips.instants())
    assert [e.action for e in trips.timeline].count("rollback") == 1
    rows = _same_as_hudi_rs(trips)
    assert len(rows) == 30 and next(r for r in rows if r["id"] == 1)["ts"] == 9


def test_rollback_of_the_last_commit(trips):
    trips.upsert(_trips(range(20, 40), ts=2))
    after_first = _same_as_hudi_rs(trips)
    first = trips.latest_instant()
    trips.upsert(_trips(range(0, 10), ts=3))
    with pytest.raises(shoal.InvalidArgumentError):
        trips.rollback(first)  # only the latest commit; older ones need restore
    trips.rollback()
    assert _same_as_hudi_rs(trips) == after_first
    assert trips.latest_instant() == first


def test_mor_log_files_roll_over_at_the_size_limit(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "m"),
        name="m",
        table_type="MERGE_ON_READ",
        record_key="id",
        ordering_field="ts",
        options={"hoodie.logfile.max.size": "2000"},
    )
    t.bulk_insert(_trips(range(50)).drop_columns(["city"]))
    for ts in range(2, 7):
        t.upsert(_trips(range(0, 50, 5), ts=ts).drop_columns(["city"]))
    (sl,) = t.file_slices()
    versions = sorted(lf.version for lf in sl.log_files)
    assert versions == list(range(1, len(versions) + 1)) and len(versions) >= 2
    rows = _same_as_hudi_rs(t, ("id", "ts", "fare"))
    assert [r["ts"] for r in rows if r["id"] % 5 == 0] == [6] * 10


def test_mor_torn_log_tail_keeps_the_last_committed_state(tmp_path):
    """A delta commit that died mid-append, its block cut at every byte offset: shoal's snapshot
    stays at the last committed state, and the next write rolls the torn tail back so hudi-rs
    (which drops a log file with a damaged tail) reads the right rows too."""
    from shoal import _native
    from shoal.fs.markers import create_marker
    from shoal.timeline.instant import Action

    t = shoal.Table.create(
        str(tmp_path / "m"), name="m", table_type="MERGE_ON_READ", record_key="id", ordering_field="ts"
    )
    t.bulk_insert(_trips(range(6)).drop_columns(["city"]))
    t.upsert(_trips([1, 2], ts=2).drop_columns(["city"]))
    committed = rows_by(t.read(), ["id", "ts", "fare"], ["id"])
    (sl,) = t.file_slices()
    log_rel = sl.log_files[-1].path
    log_path = os.path.join(t.path, log_rel)
    original = Path(log_path).read_bytes()
    # The crashed writer: requested + inflight + APPEND marker, then a partial block.
    timeline = t._timeline()
    crashed = timeline.new_instant_time()
    requested = timeline.create_requested(crashed, Action.DELTA_COMMIT)
    timeline.transition_to_inflight(requested, b"")
    create_marker(t.storage, crashed, log_rel, "APPEND", append_offset=len(original))
    batch = _trips([3], ts=7).drop_columns(["city"])
    schema = _native.arrow_to_avro_schema(batch.schema, "m_record", "hoodie.m")
    block = _native.encode_avro_data_block(batch.to_batches()[0], schema, crashed)
    for cut in range(1, len(block)):
        Path(log_path).write_bytes(original + block[:cut])
        assert rows_by(t.read(), ["id", "ts", "fare"], ["id"]) == committed, f"cut at {cut}"
    Path(log_path).write_bytes(original + block[: len(block) // 2] + os.urandom(64))
    assert rows_by(t.read(), ["id", "ts", "fare"], ["id"]) == committed
    # The next write rolls the failed instant back (restoring the log file) and commits.
    t.upsert(_trips([4], ts=3).drop_columns(["city"]))
    assert Path(log_path).read_bytes()[: len(original)] == original
    expected = [dict(r, ts=3) if r["id"] == 4 else r for r in committed]
    assert rows_by(t.read(), ["id", "ts", "fare"], ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), ["id", "ts", "fare"], ["id"]) == expected


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_soft_delete_keeps_the_row_with_only_key_partition_and_ordering(tmp_path, table_type):
    t = shoal.Table.create(
        str(tmp_path / "sd"),
        name="sd",
        table_type=table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
    )
    t.upsert(_trips(range(6), ts=5))
    assert t.soft_delete(pa.table({"id": [1, 4, 99], "city": ["nyc", "nyc", "sf"]})) is not None
    rows = {r["id"]: r for r in _same_as_hudi_rs(t)}
    assert len(rows) == 6, "soft-deleted rows stay in the table"
    for i in (1, 4):
        assert rows[i] == {"id": i, "city": "nyc", "ts": 5, "fare": None}
    assert rows[2]["fare"] == 2.0
    assert t.soft_delete(pa.table({"id": [1234], "city": ["sf"]})) is None


def test_simple_index_tags_like_the_bloom_index_without_footers(tmp_path, monkeypatch):
    footers = []
    import shoal.index.bloom as bloom_module

    real = bloom_module.read_key_footer

    def spy(storage, path):
        footers.append(path)
        return real(storage, path)

    monkeypatch.setattr(bloom_module, "read_key_footer", spy)
    tables = {}
    for index in ("BLOOM", "SIMPLE"):
        t = shoal.Table.create(
            str(tmp_path / index),
            name=index.lower(),
            record_key="id",
            partition_by="city",
            ordering_field="ts",
            options={"hoodie.index.type": index},
        )
        t.bulk_insert(_trips(range(60)))
        footers.clear()
        t.upsert(_trips(range(40, 90), ts=2))
        assert (len(footers) == 0) == (index == "SIMPLE")
        tables[index] = _same_as_hudi_rs(t)
    assert tables["SIMPLE"] == tables["BLOOM"]
    assert [r["ts"] for r in tables["SIMPLE"]] == [1] * 40 + [2] * 50


def test_unsupported_index_types_are_rejected(tmp_path):
    # BUCKET and the global indexes are supported (tests/test_bucket_index.py,
    # tests/test_global_index.py); HBASE and the record index are not.
    for index in ("HBASE", "RECORD_INDEX", "GLOBAL_HBASE"):
        with pytest.raises(shoal.InvalidOptionError, match="BLOOM, SIMPLE, BUCKET"):
            shoal.Table.create(
                str(tmp_path / "b"), name="b", record_key="id", options={"hoodie.index.type": index}
            )


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_timestamps_without_a_zone_are_stored_as_utc_instants(tmp_path, table_type):
    """A naive timestamp column is taken as UTC (hudi-rs reads no Avro local-timestamp type): the
    schema says timestamp-micros and every base file stores instants, so later writes merge."""
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type=table_type, record_key="id", ordering_field="ts"
    )
    naive = pa.timestamp("us")
    t.upsert(
        pa.table(
            {
                "id": [1, 2],
                "ts": [1, 1],
                "at": pa.array([dt.datetime(2024, 1, 1, 12), dt.datetime(2024, 1, 2)], naive),
            }
        )
    )
    t.upsert(
        pa.table(
            {
                "id": [2, 3],
                "ts": [2, 2],
                "at": pa.array([dt.datetime(2024, 1, 3, 8, 30), None], pa.timestamp("ns")),
            }
        )
    )
    # A zone other than UTC names the same instants.
    t.upsert(
        pa.table(
            {
                "id": [4],
                "ts": [1],
                "at": pa.array(
                    [dt.datetime(2024, 1, 5, 1, tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC")
                ).cast(pa.timestamp("us", tz="America/New_York")),
            }
        )
    )
    utc = dt.UTC
    expected = [
        {"id": 1, "at": dt.datetime(2024, 1, 1, 12, tzinfo=utc)},
        {"id": 2, "at": dt.datetime(2024, 1, 3, 8, 30, tzinfo=utc)},
        {"id": 3, "at": None},
        {"id": 4, "at": dt.datetime(2024, 1, 5, 1, tzinfo=utc)},
    ]
    ours = t.read()
    assert ours.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert rows_by(ours, ["id", "at"], ["id"]) == expected
    theirs = hudi_rs_read(t.path)
    theirs = theirs.set_column(
        theirs.schema.get_field_index("at"), "at", theirs["at"].cast(pa.timestamp("us", tz="UTC"))
    )
    assert rows_by(theirs, ["id", "at"], ["id"]) == expected
    last = t.timeline[-1]
    commit = json.loads((Path(t.path) / ".hoodie" / f"{last.time}.{last.action}").read_text())
    assert '"timestamp-micros"' in commit["extraMetadata"]["schema"]
    for f in Path(t.path).glob("*.parquet"):
        schema = pq.read_metadata(f).schema
        assert '"isAdjustedToUTC":true' in schema.column(schema.names.index("at")).logical_type.to_json()


@pytest.mark.parametrize(
    "options",
    [
        {"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"},
        {"hoodie.datasource.write.payload.class": tc.OVERWRITE_WITH_LATEST_PAYLOAD},
        {"hoodie.datasource.write.payload.class": "OverwriteWithLatestAvroPayload"},
    ],
)
def test_a_table_created_with_hudi_ordering_options_merges_by_them(tmp_path, options):
    """The options a Hudi writer (or shoal.spark.write) creates a table with decide its ordering:
    a late event then overwrites a newer one, in shoal and hudi-rs alike."""
    path = str(tmp_path / "t")
    table = shoal.Table.create(
        path, "t", "MERGE_ON_READ", record_key="id", partition_by="city", ordering_field="ts", options=options
    )
    props = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert (
        "hoodie.compaction.payload.class=org.apache.hudi.common.model.OverwriteWithLatestAvroPayload" in props
    )
    table.upsert(_trips(range(3), ts=10))
    table.upsert(_trips([1], ts=5))  # late: under commit-time ordering the latest write wins
    want = rows_by(pa.concat_tables([_trips([0, 2], ts=10), _trips([1], ts=5)]), ["id", "ts"], ["id"])
    assert rows_by(table.read(), ["id", "ts"], ["id"]) == want
    assert rows_by(hudi_rs_read(path), ["id", "ts"], ["id"]) == want


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {
                "merge_ordering": "EVENT_TIME_ORDERING",
                "options": {"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"},
            },
            shoal.InvalidOptionError,
            "conflicts",
        ),
        (
            {
                "options": {
                    "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
                    "hoodie.datasource.write.payload.class": "OverwriteWithLatestAvroPayload",
                }
            },
            shoal.InvalidOptionError,
            "different orderings",
        ),
        (
            {"options": {"hoodie.datasource.write.payload.class": "com.example.MyPayload"}},
            shoal.UnsupportedError,
            "MyPayload",
        ),
    ],
)
def test_ordering_options_that_cannot_hold_create_no_table(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        shoal.Table.create(str(tmp_path / "t"), "t", record_key="id", ordering_field="ts", **kwargs)
    assert not (tmp_path / "t").exists()


def test_a_write_asking_for_another_ordering_than_the_tables_fails_before_the_timeline(tmp_path):
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, "t", record_key="id", partition_by="city", ordering_field="ts")
    table.upsert(_trips(range(3), ts=10))
    timeline = sorted(p.name for p in (tmp_path / "t" / ".hoodie").iterdir())
    for option in (
        {"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"},
        {"hoodie.datasource.write.payload.class": "OverwriteWithLatestAvroPayload"},
    ):
        with pytest.raises(shoal.InvalidOptionError, match="EVENT_TIME_ORDERING"):
            table.upsert(_trips([1], ts=5), options=option)
    assert sorted(p.name for p in (tmp_path / "t" / ".hoodie").iterdir()) == timeline
    # Asking for the table's own ordering is fine.
    table.upsert(_trips([1], ts=11), options={"hoodie.record.merge.mode": "EVENT_TIME_ORDERING"})
    assert rows_by(table.read(), ["id", "ts"], ["id"]) == [
        {"id": 0, "ts": 10},
        {"id": 1, "ts": 11},
        {"id": 2, "ts": 10},
    ]


def test_widened_and_added_columns_on_merge_on_read(tmp_path):
    """int to long, float to double and a new column, over log blocks of the old types: the
    widening write compacts first, so hudi-rs 0.5 reads what shoal reads (docs/compatibility.md, "Schema
    evolution"); without that compaction it fails on the old-typed log block."""
    path = str(tmp_path / "t")
    table = shoal.Table.create(
        path, "t", "MERGE_ON_READ", record_key="id", partition_by="city", ordering_field="ts"
    )

    def rows(ids, ts, n_type, f_type, extra=None):
        data = {
            "id": pa.array(ids, pa.int64()),
            "city": ["sf"] * len(ids),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "n": pa.array([2**31 + i if n_type == pa.int64() else i for i in ids], n_type),
            "f": pa.array([i + 0.5 for i in ids], f_type),
        }
        if extra is not None:
            data["extra"] = [extra] * len(ids)
        return pa.table(data)

    table.upsert(rows([1, 2, 3], 1, pa.int32(), pa.float32()))
    table.upsert(rows([1], 2, pa.int32(), pa.float32()))  # a log block of the old types
    table.upsert(rows([2], 3, pa.int64(), pa.float64(), extra="x"))
    got = table.read()
    assert got.schema.field("n").type == pa.int64() and got.schema.field("f").type == pa.float64()
    want = [
        {"id": 1, "n": 1, "f": 1.5, "extra": None},
        {"id": 2, "n": 2**31 + 2, "f": 2.5, "extra": "x"},
        {"id": 3, "n": 3, "f": 3.5, "extra": None},
    ]
    assert rows_by(got, ["id", "n", "f", "extra"], ["id"]) == want
    assert rows_by(hudi_rs_read(path), ["id", "n", "f", "extra"], ["id"]) == want
    actions = [t.action for t in table.timeline]
    assert actions == ["deltacommit", "deltacommit", "compaction", "deltacommit"]  # the compaction first
    # A later column, logged over base files of the old types, reads in both too.
    table.upsert(rows([3], 4, pa.int64(), pa.float64(), extra="y").append_column("more", pa.array(["m"])))
    want[2] = {"id": 3, "n": 2**31 + 3, "f": 3.5, "extra": "y"}
    assert rows_by(table.read(), ["id", "n", "f", "extra"], ["id"]) == want
    assert rows_by(hudi_rs_read(path), ["id", "n", "f", "extra"], ["id"]) == want


def test_a_stream_batch_that_widens_a_type_inside_a_checkpoint_is_refused(tmp_path):
    table = shoal.Table.create(
        str(tmp_path / "t"), "t", "MERGE_ON_READ", record_key="id", ordering_field="ts"
    )
    narrow = pa.table(
        {"id": pa.array([1], pa.int64()), "ts": pa.array([1], pa.int64()), "n": pa.array([1], pa.int32())}
    )
    wide = narrow.set_column(2, "n", pa.array([2**40], pa.int64()))
    table.upsert(narrow)
    writer = table.stream_writer()
    writer.write(narrow)
    with pytest.raises(shoal.SchemaMismatchError, match="changes the type of n"):
        writer.write(wide)
    writer.checkpoint()  # the batch before it stays and commits
    writer.write(wide)  # a new checkpoint: compacts, then takes it
    writer.checkpoint()
    writer.close()
    assert table.read().column("n").to_pylist() == [2**40]
    assert hudi_rs_read(str(tmp_path / "t")).column("n").to_pylist() == [2**40]


def test_hudi_job_options_that_tune_hudis_engine_are_accepted(tmp_path):
    """A Hudi job's configuration runs unchanged: its parallelism and row-writer settings (which
    size Hudi's own Spark stages) are checked and ignored, and its metastore sync settings are
    taken while the sync is off. Turning a sync on is refused: shoal does not sync."""
    hudi_job = {
        "hoodie.upsert.shuffle.parallelism": "200",
        "hoodie.insert.shuffle.parallelism": "200",
        "hoodie.bulkinsert.shuffle.parallelism": "8",
        "hoodie.datasource.write.row.writer.enable": "true",
        "hoodie.datasource.hive_sync.enable": "false",
        "hoodie.datasource.hive_sync.database": "default",
        "hoodie.datasource.hive_sync.table": "trips",
        "hoodie.datasource.hive_sync.partition_fields": "city",
    }
    path = str(tmp_path / "t")
    table = shoal.Table.create(
        path, "t", record_key="id", partition_by="city", ordering_field="ts", options=hudi_job
    )
    table.upsert(_trips(range(5)), options=hudi_job)
    assert rows_by(hudi_rs_read(path), ["id"], ["id"]) == [{"id": i} for i in range(5)]
    before = table.instants()
    for bad, match in (
        ({"hoodie.datasource.hive_sync.enable": "true"}, "does not sync tables to a metastore"),
        ({"hoodie.datasource.meta.sync.enable": "true"}, "does not sync tables to a metastore"),
        ({"hoodie.upsert.shuffle.parallelism": "many"}, "hoodie.upsert.shuffle.parallelism"),
        ({"hoodie.upsert.shufle.parallelism": "8"}, "did you mean 'hoodie.upsert.shuffle.parallelism'"),
    ):
        with pytest.raises(shoal.InvalidOptionError, match=match):
            table.upsert(_trips([9]), options=bad)
    assert table.instants() == before


@pytest.mark.parametrize("index", ["BLOOM", "SIMPLE", "BUCKET", "GLOBAL_BLOOM"])
def test_a_write_lists_only_the_partitions_its_records_fall_in(tmp_path, monkeypatch, index):
    """As Hudi's partitioned indexes load only the affected partitions' files, a write lists
    only the partitions of its records (on an object store, listing every partition of a large
    table would cost more than the write); a global index looks keys up everywhere."""
    path = str(tmp_path / "t")
    options = {"hoodie.index.type": index, "hoodie.bucket.index.num.buckets": "2"}
    table = shoal.Table.create(
        path, name="t", record_key="id", partition_by="p", ordering_field="ts", options=options
    )
    n = 400
    table.insert(pa.table({"id": list(range(n)), "p": [f"p{i % 20}" for i in range(n)], "ts": [1] * n}))
    listed = record_listings(monkeypatch)
    table.upsert(pa.table({"id": [0, 20, 5000], "p": ["p0", "p0", "p3"], "ts": [2, 2, 2]}))
    monkeypatch.undo()
    data_listings = {rel for rel, _ in listed if not rel.startswith(".hoodie")}
    if index == "GLOBAL_BLOOM":
        assert ("", True) in listed
    else:
        assert data_listings == {"p0", "p3"}
    expected = [{"id": i, "p": f"p{i % 20}", "ts": 2 if i in (0, 20) else 1} for i in range(n)]
    expected.append({"id": 5000, "p": "p3", "ts": 2})
    assert rows_by(hudi_rs_read(path), ["id", "p", "ts"], ["id"]) == expected
