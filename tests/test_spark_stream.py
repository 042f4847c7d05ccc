"""Structured Streaming from shoal tables: ``spark.readStream.format("shoal")`` micro-batches
carry each commit's changes once, resume from the query's checkpoint, and honour the start
offset and the per-trigger limit."""

from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
from shoal.errors import InvalidArgumentError, InvalidOptionError
from shoal.spark.datasource import register
from shoal.spark.stream import split_stream_options
from tests.test_incremental import META_FIXTURES, _changed_keys, _data_instants, hudi_rs_incremental

COLUMNS = ["id", "city", "ts", "fare"]


@pytest.fixture
def ss(spark):
    register(spark)
    return spark


def _batch(ids, ts: int, fare: float) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": [("sf", "nyc", "la")[i % 3] for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "fare": [fare + i for i in ids],
        }
    )


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*(table.column(c).to_pylist() for c in COLUMNS), strict=True))


class Collector:
    """A streaming query whose micro-batches (their rows) are kept in this process, with its
    checkpoint location (foreachBatch runs on the driver)."""

    def __init__(self, ss, path: str, checkpoint: str, **options: str) -> None:
        self.batches: list[list[dict]] = []
        stream = ss.readStream.format("shoal").options(**options).load(path)
        self.query = (
            stream.writeStream.foreachBatch(lambda df, _: self.batches.append(_as_dicts(df)))
            .option("checkpointLocation", checkpoint)
            .start()
        )

    def drain(self) -> None:
        self.query.processAllAvailable()

    def rows(self, commit_time: str | None = None) -> list[tuple]:
        return sorted(
            tuple(r[c] for c in COLUMNS)
            for batch in self.batches
            for r in batch
            if commit_time is None or r["_hoodie_commit_time"] == commit_time
        )

    def commit_times(self) -> list[str]:
        return sorted({r["_hoodie_commit_time"] for batch in self.batches for r in batch})

    def stop(self) -> None:
        self.query.stop()


def _as_dicts(df) -> list[dict]:
    return [r.asDict() for r in df.collect()]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"], ids=["cow", "mor"])
def test_each_commit_is_streamed_once_and_a_restart_resumes(ss, tmp_path, table_type):
    path = str(tmp_path / "t")
    table = shoal.Table.create(
        path, name="t", table_type=table_type, record_key="id", partition_by="city", ordering_field="ts"
    )
    first = _batch(range(30), 1, 10.0)
    table.bulk_insert(first)
    c1 = table.latest_instant()
    checkpoint = str(tmp_path / "checkpoint")

    q = Collector(ss, path, checkpoint)
    q.drain()
    assert q.rows() == _rows(first)

    # Updates (on merge-on-read: log files) and inserts: the batch carries the new versions only.
    second = _batch(range(20, 45), 2, 100.0)
    table.upsert(second)
    c2 = table.latest_instant()
    q.drain()
    assert q.commit_times() == [c1, c2]
    assert q.rows(c2) == _rows(second)
    assert q.rows(c1) == _rows(first), "rows of earlier batches are not read again"
    q.stop()

    # Commits made while no query runs are read by the next query on the same checkpoint.
    third = _batch(range(40, 50), 3, 1000.0)
    table.upsert(third)
    c3 = table.latest_instant()
    resumed = Collector(ss, path, checkpoint)
    resumed.drain()
    assert resumed.commit_times() == [c3]
    assert resumed.rows() == _rows(third)
    resumed.stop()


def test_start_offset_and_the_per_trigger_limit(ss, tmp_path):
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, name="t", record_key="id", partition_by="city", ordering_field="ts")
    table.insert(_batch(range(10), 1, 1.0))
    c1 = table.latest_instant()
    table.insert(_batch(range(10, 20), 1, 1.0))
    c2 = table.latest_instant()

    latest = Collector(ss, path, str(tmp_path / "ck_latest"), start_offset="latest")
    latest.drain()
    assert latest.rows() == []
    table.insert(_batch(range(20, 25), 1, 1.0))
    c3 = table.latest_instant()
    latest.drain()
    assert latest.commit_times() == [c3]
    latest.stop()

    after_first = Collector(
        ss, path, str(tmp_path / "ck_after"), **{"hoodie.datasource.streaming.startOffset": c1}
    )
    after_first.drain()
    assert after_first.commit_times() == [c2, c3]
    after_first.stop()

    one_each = Collector(ss, path, str(tmp_path / "ck_one"), max_instants_per_trigger="1")
    one_each.drain()
    assert one_each.commit_times() == [c1, c2, c3]
    sizes = [len(b) for b in one_each.batches if b]
    assert sizes == [10, 10, 5], "one commit per micro-batch"
    assert [len({r["_hoodie_commit_time"] for r in b}) for b in one_each.batches if b] == [1, 1, 1]
    one_each.stop()


def test_bad_stream_options_are_refused(ss, tmp_path):
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, name="t", record_key="id", ordering_field="ts")
    table.insert(_batch(range(3), 1, 1.0).drop_columns(["city"]))
    with pytest.raises(InvalidOptionError, match="max_instants_per_trigger"):
        split_stream_options({"max_instants_per_trigger": "0"})
    with pytest.raises(InvalidArgumentError, match="startOffset"):
        split_stream_options({"start_offset": "yesterday"})
    with pytest.raises(InvalidOptionError, match="conflicts"):
        split_stream_options(
            {"start_offset": "earliest", "hoodie.datasource.streaming.startOffset": "latest"}
        )
    with pytest.raises(Exception, match="begin/end instant times are for batch reads"):
        Collector(ss, path, str(tmp_path / "ck"), query_type="incremental", start="1").drain()
    # A batch read refuses the stream-only options.
    with pytest.raises(Exception, match="unknown read option 'start_offset'"):
        ss.read.format("shoal").option("start_offset", "latest").load(path).collect()


@pytest.mark.parametrize("name", META_FIXTURES)
def test_fixture_streams_instant_by_instant_like_hudi_rs(ss, fixture_table, tmp_path, name):
    """Tables Hudi wrote (v6 and v8): one instant per micro-batch, each batch's changed keys as
    hudi-rs's incremental read of that instant's range gives them."""
    path = str(fixture_table(name))
    table = shoal.Table(path)
    positions = [k for _, k, _ in _data_instants(table)]
    q = Collector(ss, path, str(tmp_path / "ck"), max_instants_per_trigger="1")
    q.drain()
    q.stop()
    meta = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key"]
    batches = [sorted(tuple(r[c] for c in meta) for r in b) for b in q.batches if b]
    expected = [
        keys
        for keys in (
            _changed_keys(hudi_rs_incremental(path, lo, hi))
            for lo, hi in zip([None, *positions], positions, strict=False)
        )
        if keys
    ]
    assert batches == expected


def test_latest_offset_without_a_start_goes_on_from_the_last_commit(tmp_path):
    """Spark before 4.2 calls latestOffset() with no start offset."""
    from shoal.spark.datasource import ShoalDataSource

    path = str(tmp_path / "t")
    table = shoal.Table.create(path, name="t", record_key="id", partition_by="city", ordering_field="ts")
    instants = []
    for i in range(3):
        table.insert(_batch(range(i * 10, i * 10 + 10), 1, 1.0))
        instants.append(table.latest_instant())
    source = ShoalDataSource({"path": path, "max_instants_per_trigger": "1"})
    reader = source.streamReader(source.schema())
    for expected in instants:
        end = reader.latestOffset()
        assert end == {"checkpoint": expected}
        assert reader.latestOffset() == end, "nothing moves before Spark commits the batch"
        reader.commit(end)
    assert reader.latestOffset() == {"checkpoint": instants[-1]}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"], ids=["cow", "mor"])
def test_a_new_column_stops_the_query_and_a_restart_reads_it(ss, tmp_path, table_type):
    """Spark keeps a query's schema: a stream that went on would deliver the new column's values
    to no one, and the batches that carried them are never read again."""
    from pyspark.errors import StreamingQueryException

    path = str(tmp_path / "t")
    table = shoal.Table.create(
        path, name="t", table_type=table_type, record_key="id", partition_by="city", ordering_field="ts"
    )
    first = _batch(range(30), 1, 10.0)
    table.upsert(first)
    c1 = table.latest_instant()
    checkpoint = str(tmp_path / "checkpoint")
    q = Collector(ss, path, checkpoint)
    q.drain()
    assert q.commit_times() == [c1]

    second = _batch(range(20, 40), 2, 100.0).append_column("note", pa.array([f"n{i}" for i in range(20, 40)]))
    table.upsert(second)
    c2 = table.latest_instant()
    with pytest.raises(StreamingQueryException, match="new columns: note"):
        q.drain()
    assert q.commit_times() == [c1], "no batch went on without the new column"
    q.stop()

    resumed = Collector(ss, path, checkpoint)
    resumed.drain()
    assert resumed.commit_times() == [c2]
    assert resumed.rows() == _rows(second)
    assert sorted((r["id"], r["note"]) for b in resumed.batches for r in b) == [
        (i, f"n{i}") for i in range(20, 40)
    ]
    resumed.stop()


def test_a_widened_type_stops_the_query_and_a_new_column_not_projected_does_not(tmp_path):
    from shoal.errors import SchemaMismatchError
    from shoal.spark.datasource import ShoalDataSource

    path = str(tmp_path / "t")
    table = shoal.Table.create(path, name="t", record_key="id", ordering_field="ts")
    table.upsert(pa.table({"id": ["a", "b"], "ts": [1, 1], "n": pa.array([1, 2], pa.int32())}))
    followed = ShoalDataSource({"path": path})
    projected = ShoalDataSource({"path": path, "columns": "id,n", "query_type": "incremental"})
    readers = [s.streamReader(s.schema()) for s in (followed, projected)]
    ends = [r.latestOffset(r.initialOffset(), None) for r in readers]
    # A column the projection leaves out: that stream reads on.
    table.upsert(pa.table({"id": ["c"], "ts": [2], "n": pa.array([3], pa.int32()), "m": ["x"]}))
    with pytest.raises(SchemaMismatchError, match="new columns: m"):
        readers[0].latestOffset(ends[0], None)
    later = readers[1].latestOffset(ends[1], None)
    (part,) = readers[1].partitions(ends[1], later)
    assert [r["id"] for b in readers[1].read(part) for r in b.to_pylist()] == ["c"]
    readers[1].commit(later)
    # A type it declared, widened: its batches could not hold the values.
    table.upsert(pa.table({"id": ["a"], "ts": [3], "n": pa.array([2**40], pa.int64()), "m": ["y"]}))
    with pytest.raises(SchemaMismatchError, match=r"changed types: n \(int -> bigint\)"):
        readers[1].latestOffset(later, None)
