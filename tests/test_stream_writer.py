"""The streaming writer (DESIGN §3.4): batches buffered per bucket, flushed when a bucket or all
buffers together pass their limit, committed once per checkpoint.

Tiny limits make flushes happen on a few dozen rows. After every checkpoint the table equals a
model that applies each checkpoint's batches as one upsert (precombined), and equals a second
table written with one ``Table.upsert`` per checkpoint; shoal and hudi-rs both read it."""

from __future__ import annotations

import math
import random
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shoal
from shoal import _native
from shoal.errors import (
    CommitConflictError,
    InvalidArgumentError,
    InvalidOptionError,
    SchemaMismatchError,
    UnsupportedError,
)
from shoal.fs.markers import append_offset
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
from shoal.timeline.timeline import Timeline
from shoal.write.stream_writer import FLUSH_BUCKET_FULL, FLUSH_CHECKPOINT, FLUSH_TOTAL_FULL, RecordSizeSampler
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.test_table_model import Model

TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
CITIES = ["sf", "nyc", "chennai"]
COLUMNS = ["id", "city", "ts", "fare", "rider", "_hoodie_is_deleted"]
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
# Tiny files, so that small-file packing and several file groups per partition happen.
OPTIONS = {
    "hoodie.parquet.max.file.size": "6000",
    "hoodie.parquet.small.file.limit": "4500",
    "hoodie.index.bloom.num_entries": "200",
    "hoodie.bloom.index.filter.dynamic.max.entries": "400",
}


def _create(path: Path, table_type: str, options: dict | None = None) -> shoal.Table:
    return shoal.Table.create(
        path,
        name="stream",
        table_type=table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options={**OPTIONS, **(options or {})},
    )


def _row(key: int, city: str, ts: int, deleted: bool = False, fare: float | None = None) -> dict:
    return {
        "id": key,
        "city": city,
        "ts": ts,
        "fare": float(key * 10 + ts) if fare is None else fare,
        "rider": f"rider-{key}-{ts}",
        "_hoodie_is_deleted": deleted,
    }


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _expected(model: Model) -> list[dict]:
    return sorted(model.rows.values(), key=lambda r: (r["id"], r["city"]))


def _check(table: shoal.Table, model: Model, what: str) -> None:
    expected = _expected(model)
    assert rows_by(table.read(), COLUMNS, ["id", "city"]) == expected, f"shoal read differs ({what})"
    assert rows_by(hudi_rs_read(table.path), COLUMNS, ["id", "city"]) == expected, f"hudi-rs differs ({what})"


def _data_instants(table: shoal.Table) -> list[str]:
    return [i.requested_time for i in Timeline.load(table.storage, table.config).completed_data_instants()]


def _pending(table: shoal.Table) -> list[str]:
    return [i.requested_time for i in Timeline.load(table.storage, table.config).pending_data_instants()]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_stream_of_batches_equals_the_model_and_one_upsert_per_checkpoint(tmp_path, table_type):
    rng = random.Random(7)
    streamed = _create(tmp_path / "streamed", table_type)
    batched = _create(tmp_path / "batched", table_type)
    model = Model(partitioned=True)
    city_of: dict[int, str] = {}
    clock = 1000
    next_key = 0
    writer = streamed.stream_writer(bucket_buffer_bytes=1500, total_buffer_bytes=3000)
    flushes_before = 0
    for cp in range(3):
        batches = []
        touched: set[int] = set()
        for _ in range(4):
            rows = []
            for _ in range(rng.randint(10, 35)):
                clock += 1
                city_of[next_key] = rng.choice(CITIES)
                rows.append(_row(next_key, city_of[next_key], clock))
                next_key += 1
            # Keys committed before and keys written earlier in this checkpoint, late events
            # (older than what was written), soft deletes and duplicates within the batch.
            keys = rng.sample(sorted(city_of), min(len(city_of), rng.randint(5, 20)))
            keys += rng.sample(sorted(touched), min(len(touched), rng.randint(0, 10)))
            for key in sorted(set(keys)):
                clock += 1
                ts = clock if rng.random() < 0.6 else rng.randint(0, 1000)
                rows.append(_row(key, city_of[key], ts, deleted=rng.random() < 0.2))
                if rng.random() < 0.2:
                    rows.append(_row(key, city_of[key], ts + rng.choice([-1, 0, 1])))
            rng.shuffle(rows)
            touched.update(r["id"] for r in rows)
            batches.append(rows)
            writer.write(_table(rows))
        instant = writer.checkpoint()
        assert instant is not None
        stats = writer.stats
        flushes = sum(stats.flushes.values())
        assert flushes - flushes_before > 1, "a checkpoint should flush several times"
        flushes_before = flushes
        assert stats.buffered_records == 0 and stats.buffered_bytes == 0
        # One commit per checkpoint, whatever the number of flushes.
        assert _data_instants(streamed)[-1] == instant
        assert len(_data_instants(streamed)) == cp + 1
        assert _pending(streamed) == []
        everything = [row for rows in batches for row in rows]
        model.upsert(everything)
        batched.upsert(_table(everything))
        _check(streamed, model, f"checkpoint {cp}")
        _check(batched, model, f"batch upsert {cp}")
    writer.close()
    stats = writer.stats
    assert stats.flushes[FLUSH_BUCKET_FULL] > 0
    assert stats.flushes[FLUSH_TOTAL_FULL] > 0
    assert stats.flushes[FLUSH_CHECKPOINT] > 0
    assert stats.commits == 3
    action = "deltacommit" if table_type == "MERGE_ON_READ" else "commit"
    assert {e.action for e in streamed.timeline if e.time in _data_instants(streamed)} == {action}


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_same_key_in_several_batches_of_one_checkpoint(tmp_path, table_type):
    table = _create(tmp_path / "t", table_type)
    model = Model(partitioned=True)
    first = [_row(k, "sf", 1) for k in range(10)]
    table.upsert(_table(first))
    model.upsert(first)
    # Every batch fills its buckets: each is flushed before the next batch comes.
    writer = table.stream_writer(bucket_buffer_bytes=1, total_buffer_bytes=10**9)
    batches = [
        # A committed key updated, a new key.
        [_row(0, "sf", 5), _row(100, "sf", 5)],
        # A late event loses to the version flushed before; a newer one wins; another new key.
        [_row(0, "sf", 3, fare=-1.0), _row(100, "sf", 7), _row(101, "sf", 1)],
        # A tie goes to the later record; a key of this checkpoint deleted; a third new key.
        [_row(0, "sf", 5, fare=55.5), _row(101, "sf", 2, deleted=True), _row(102, "sf", 9)],
        # Lose against the delete and against the newer version.
        [_row(101, "sf", 1), _row(102, "sf", 8, deleted=True)],
    ]
    for batch in batches:
        writer.write(_table(batch))
        assert writer.stats.buffered_records == 0
        # A base file written again in the instant replaced the earlier one.
        pending = writer.pending_instant
        names = [parse_base_file_name(f.name) for f in table.storage.list_files("sf")]
        ours = [p.file_id for p in names if p is not None and p.instant_time == pending]
        assert ours and len(ours) == len(set(ours))
    instant = writer.checkpoint()
    assert instant is not None
    assert writer.stats.flushes[FLUSH_BUCKET_FULL] >= len(batches)
    assert _data_instants(table)[-1] == instant and len(_data_instants(table)) == 2
    model.upsert([row for batch in batches for row in batch])
    _check(table, model, "after the checkpoint")
    got = {r["id"]: r for r in table.read().to_pylist()}
    assert got[0]["fare"] == 55.5 and got[100]["ts"] == 7 and 101 not in got and got[102]["ts"] == 9
    # The new keys of later batches went to the file group the first one opened.
    assert len({got[k]["_hoodie_file_name"].split("_")[0] for k in (100, 102)}) == 1

    metadata = Timeline.load(table.storage, table.config).commit_metadata(instant)
    stats = metadata.write_stats()
    # One write stat per file: base files replaced within the instant left one, appends to the
    # same log file add up.
    assert len({s.path for s in stats}) == len(stats)
    for s in stats:
        assert table.storage.exists(s.path)
    base_files = [
        f.path
        for f in table.storage.list_files("sf")
        if (p := parse_base_file_name(f.name)) is not None and p.instant_time == instant
    ]
    assert sorted(base_files) == sorted(s.path for s in stats if s.path.endswith(".parquet"))
    if table_type == "MERGE_ON_READ":
        logs = [s for s in stats if parse_log_file_name(s.path.rsplit("/", 1)[-1]) is not None]
        assert len(logs) == 1
        blocks = _native.read_log_blocks(table.storage.read_bytes(logs[0].path))
        ours = [b for b in blocks if b.instant_time == instant and b.block_type == "AVRO_DATA_BLOCK"]
        assert len(ours) == 2, "the two flushes of key 0 should append to the same log file"
        assert logs[0].logOffset == 0 and logs[0].numWrites == 2 and logs[0].totalLogBlocks == 2


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize("how", ["abort", "exception"])
def test_abandoned_checkpoint_is_invisible_and_rolled_back_by_the_next_write(tmp_path, table_type, how):
    table = _create(tmp_path / "t", table_type)
    model = Model(partitioned=True)
    with table.stream_writer(bucket_buffer_bytes=10**9, total_buffer_bytes=10**9) as writer:
        rows = [_row(k, CITIES[k % 3], 1) for k in range(60)]
        writer.write(_table(rows))
    model.upsert(rows)
    committed = _data_instants(table)
    assert len(committed) == 1

    class Crash(Exception):
        pass

    writer = table.stream_writer(bucket_buffer_bytes=1, total_buffer_bytes=10**9)
    instant = None
    try:
        with writer:
            for ts in (2, 3):
                writer.write(
                    _table([_row(k, CITIES[k % 3], ts) for k in range(0, 60, 7)] + [_row(500 + ts, "sf", ts)])
                )
            instant = writer.pending_instant
            assert instant is not None and writer.stats.flushes[FLUSH_BUCKET_FULL] > 0
            if table_type == "MERGE_ON_READ":
                # Two appends to each log file: its marker keeps where the first one began.
                markers = [
                    (f.path, append_offset(table.storage, instant, _data_path(f.path, instant)))
                    for f in table.storage.list_files(f".hoodie/.temp/{instant}", recursive=True)
                    if f.path.endswith(".marker.APPEND")
                ]
                assert markers and all(offset == 0 for _, offset in markers)
            writer.write(_table([_row(900, "nyc", 4)]))  # buffered only
            if how == "abort":
                writer.abort()
            else:
                raise Crash
    except Crash:
        pass
    assert _pending(table) == [instant]
    assert _data_instants(table) == committed
    _check(table, model, "after the abandoned checkpoint")
    written = _files_of(table, instant)
    assert written, "the abandoned checkpoint flushed files"

    # The next write rolls the abandoned instant back before it plans.
    with table.stream_writer() as writer:
        rows = [_row(1, CITIES[1], 10), _row(700, "sf", 10)]
        writer.write(_table(rows))
    model.upsert(rows)
    assert _pending(table) == []
    assert any(e.action == "rollback" for e in table.timeline)
    assert _files_of(table, instant) == []
    _check(table, model, "after the next write")


def _data_path(marker: str, instant: str) -> str:
    return marker[len(f".hoodie/.temp/{instant}/") :].rsplit(".marker.", 1)[0]


def _files_of(table: shoal.Table, instant: str) -> list[str]:
    """Data files the instant created: base files named with it, log files holding its blocks."""
    out = []
    for f in table.storage.list_files("", recursive=True):
        if f.path.startswith(".hoodie"):
            continue
        base = parse_base_file_name(f.name)
        if base is not None and base.instant_time == instant:
            out.append(f.path)
        elif parse_log_file_name(f.name) is not None:
            blocks = _native.read_log_blocks(table.storage.read_bytes(f.path))
            if any(b.instant_time == instant for b in blocks):
                out.append(f.path)
    return out


def test_flush_reasons_follow_the_limits(tmp_path):
    rows = [[_row(k, CITIES[k % 3], t) for k in range(t * 20, t * 20 + 30)] for t in range(6)]
    # Only the total limit: the largest buffer goes until the rest fits.
    table = _create(tmp_path / "total", "COPY_ON_WRITE")
    writer = table.stream_writer(bucket_buffer_bytes=10**9, total_buffer_bytes=2500)
    for batch in rows:
        writer.write(_table(batch))
        assert writer.stats.buffered_bytes <= 2500
    stats = writer.stats
    assert stats.flushes[FLUSH_TOTAL_FULL] > 0 and stats.flushes[FLUSH_BUCKET_FULL] == 0
    assert stats.peak_buffered_bytes > 2500
    writer.close()
    # Only the per-bucket limit: no buffer stays above it.
    other = _create(tmp_path / "bucket", "COPY_ON_WRITE")
    writer = other.stream_writer(bucket_buffer_bytes=900, total_buffer_bytes=10**9)
    for batch in rows:
        writer.write(_table(batch))
        assert writer.stats.buffered_bytes <= 900 * writer.stats.buffered_buckets
    stats = writer.stats
    assert stats.flushes[FLUSH_BUCKET_FULL] > 0 and stats.flushes[FLUSH_TOTAL_FULL] == 0
    writer.close()
    model = Model(partitioned=True)
    model.upsert([r for batch in rows for r in batch])
    _check(table, model, "total limit")
    _check(other, model, "bucket limit")


def test_record_size_is_sampled_one_row_in_a_hundred(tmp_path):
    rng = random.Random(3)
    n = 1000
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "name": [("x" * rng.randint(10, 80)) for _ in range(n)],
            "score": pa.array([rng.random() for _ in range(n)], pa.float64()),
            "tags": [[f"t{i}" for i in range(rng.randint(0, 5))] for _ in range(n)],
        }
    )
    sampler = RecordSizeSampler()
    total = sum(sampler.measure(data.slice(lo, 37)) for lo in range(0, n, 37))
    # Rows 0, 100, 200, ... of the stream, whatever the batch boundaries.
    assert sampler.sampled == len(range(0, n, 100))
    real = data.nbytes
    assert real / 2 < total < real * 2, (total, real)

    table = _create(tmp_path / "t", "COPY_ON_WRITE")
    writer = table.stream_writer(bucket_buffer_bytes=10**9, total_buffer_bytes=10**9)
    rows = [_row(k, CITIES[k % 3], 1) for k in range(450)]
    for lo in range(0, 450, 45):
        writer.write(_table(rows[lo : lo + 45]))
    stats = writer.stats
    assert stats.sampled_records == math.ceil(450 / 100)
    assert stats.buffered_records == 450
    # The buffered bytes estimate the buffered records: the data plus the key, partition path
    # and operation columns.
    keyed = _table(rows).append_column("k", pc.cast(pa.chunked_array([pa.array(range(450))]), pa.string()))
    assert keyed.nbytes / 2 < stats.buffered_bytes < keyed.nbytes * 2, (stats.buffered_bytes, keyed.nbytes)
    writer.close()
    model = Model(partitioned=True)
    model.upsert(rows)
    _check(table, model, "sampled")


def test_delete_stream(tmp_path):
    table = _create(tmp_path / "t", "MERGE_ON_READ")
    model = Model(partitioned=True)
    rows = [_row(k, CITIES[k % 3], 1) for k in range(40)]
    table.upsert(_table(rows))
    model.upsert(rows)
    with table.stream_writer("delete", bucket_buffer_bytes=1, total_buffer_bytes=10**9) as writer:
        for keys in ([1, 2, 3, 99], [3, 4, 5], [5, 6]):
            batch = [{"id": k, "city": CITIES[k % 3]} for k in keys]
            writer.write(pa.Table.from_pylist(batch))
            model.delete(batch)
        assert writer.stats.flushes[FLUSH_BUCKET_FULL] > 0
    assert len(_data_instants(table)) == 2
    _check(table, model, "deletes")


def test_bad_input_and_options(tmp_path):
    table = _create(tmp_path / "t", "COPY_ON_WRITE")
    with pytest.raises(InvalidOptionError):
        table.stream_writer("insert")
    with pytest.raises(InvalidOptionError):
        table.stream_writer("merge")
    with pytest.raises(InvalidArgumentError):
        table.stream_writer(bucket_buffer_bytes=0)
    with pytest.raises(InvalidArgumentError):
        table.stream_writer(total_buffer_bytes=-5)
    with pytest.raises(InvalidOptionError):
        table.stream_writer(options={"hoodie.combine.before.upsert": "false"})
    writer = table.stream_writer(bucket_buffer_bytes=1)
    assert writer.checkpoint() is None  # nothing written: no instant
    writer.write(_table([_row(1, "sf", 1)]))
    with pytest.raises(SchemaMismatchError):
        writer.write(pa.table({"id": [2], "city": ["sf"]}))  # no ordering field
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            writer.checkpoint()
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], UnsupportedError)
    writer.write(_table([_row(2, "sf", 1)]))
    assert writer.close() is not None
    with pytest.raises(InvalidArgumentError):
        writer.write(_table([_row(3, "sf", 1)]))
    assert len(_data_instants(table)) == 1 and _pending(table) == []
    model = Model(partitioned=True)
    model.upsert([_row(1, "sf", 1), _row(2, "sf", 1)])
    _check(table, model, "after bad input")


def test_mor_slice_rewrite_after_appends_of_the_same_instant(tmp_path):
    # Without small files, inserts never land in the file group: its updates are log appends.
    table = _create(tmp_path / "t", "MERGE_ON_READ", {"hoodie.parquet.small.file.limit": "0"})
    model = Model(partitioned=True)
    for batch in ([_row(k, "sf", 10) for k in range(10)], [_row(1, "sf", 20, deleted=True)]):
        table.upsert(_table(batch))
        model.upsert(batch)
    writer = table.stream_writer(bucket_buffer_bytes=1, total_buffer_bytes=10**9)
    batches = [
        [_row(2, "sf", 30)],  # a log append
        # Names the key a committed delete block deleted: the slice is rewritten (under event
        # time a log record after the delete could lose to the deleted base record), and the
        # rewrite must carry the append of this instant before it.
        [_row(1, "sf", 5)],
        [_row(3, "sf", 40)],  # merged into the rewritten base file
    ]
    for batch in batches:
        writer.write(_table(batch))
    instant = writer.checkpoint()
    model.upsert([row for batch in batches for row in batch])
    _check(table, model, "after the rewrite")
    stats = Timeline.load(table.storage, table.config).commit_metadata(instant).write_stats()
    kinds = sorted("log" if parse_log_file_name(s.path.rsplit("/", 1)[-1]) else "base" for s in stats)
    assert kinds == ["base", "log"]
    (slice_,) = table.file_slices()
    assert slice_.base_instant == instant and not slice_.log_files


def test_checkpoint_refuses_an_instant_another_write_rolled_back(tmp_path):
    table = _create(tmp_path / "t", "COPY_ON_WRITE")
    writer = table.stream_writer(bucket_buffer_bytes=1)
    writer.write(_table([_row(1, "sf", 1)]))
    assert writer.pending_instant is not None
    # The same thread holds the write lock (re-entrant): this upsert rolls the open instant back.
    table.upsert(_table([_row(2, "sf", 1)]))
    # The next flush finds its instant gone, and abandons the checkpoint.
    with pytest.raises(CommitConflictError):
        writer.write(_table([_row(3, "sf", 1)]))
    assert writer.checkpoint() is None
    model = Model(partitioned=True)
    model.upsert([_row(2, "sf", 1)])
    _check(table, model, "after the refused checkpoint")


def test_checkpoint_commit_refuses_an_instant_another_write_rolled_back(tmp_path):
    table = _create(tmp_path / "t", "MERGE_ON_READ")
    writer = table.stream_writer(bucket_buffer_bytes=1)
    writer.write(_table([_row(1, "sf", 1)]))
    assert writer.pending_instant is not None
    table.upsert(_table([_row(2, "sf", 1)]))  # rolls the open instant back (same thread)
    with pytest.raises(CommitConflictError, match="rolled back by another writer"):
        writer.checkpoint()
    model = Model(partitioned=True)
    model.upsert([_row(2, "sf", 1)])
    _check(table, model, "after the refused checkpoint")
