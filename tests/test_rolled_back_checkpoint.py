"""A consumer whose checkpoint a rollback or a restore undid (shoal.read.undone): reading on from
it raises RolledBackInstantError instead of silently leaving the consumer's copy with rows the
table no longer holds. A checkpoint before what was undone, and rollbacks of failed writes,
read on as usual."""

from __future__ import annotations

import pyarrow as pa
import pytest

import shoal
from shoal.errors import RolledBackInstantError
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline


def _table(tmp_path) -> tuple[shoal.Table, list[str]]:
    t = shoal.Table.create(str(tmp_path / "t"), "t", record_key="id", ordering_field="ts")
    instants = [t.upsert(pa.table({"id": [i], "ts": [1], "v": [i * 10]})) for i in range(3)]
    return t, instants


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def test_reading_on_from_a_rolled_back_checkpoint_raises(tmp_path):
    t, instants = _table(tmp_path)
    assert _ids(t.read_incremental(instants[1])) == [2]  # the consumer read the latest commit
    t.rollback()
    with pytest.raises(RolledBackInstantError, match=f"start {instants[2]} .* rollback"):
        t.read_incremental(instants[2])
    with pytest.raises(RolledBackInstantError):
        next(t.stream(start=instants[2], max_polls=1))
    # A consumer that had not read the undone commit goes on as usual.
    assert t.read_incremental(instants[1]).num_rows == 0
    assert _ids(t.read_incremental(instants[0])) == [1]


def test_reading_on_from_a_checkpoint_a_restore_undid_raises(tmp_path):
    t, instants = _table(tmp_path)
    t.savepoint(instants[0])
    t.restore(instants[0])
    for undone in instants[1:]:
        with pytest.raises(RolledBackInstantError, match="restore"):
            t.read_incremental(undone)
    later = t.upsert(pa.table({"id": [7], "ts": [1], "v": [70]}))
    assert _ids(t.read_incremental(instants[0])) == [7]
    assert t.read_incremental(later).num_rows == 0


def test_the_rollback_of_a_failed_write_leaves_consumers_alone(tmp_path):
    t, instants = _table(tmp_path)
    timeline = Timeline.load(t.storage, t.config)
    failed = timeline.new_instant_time()
    timeline.transition_to_inflight(timeline.create_requested(failed, Action.COMMIT))  # a writer died
    after = t.upsert(pa.table({"id": [6], "ts": [1], "v": [60]}))  # rolls the failed write back
    rollbacks = [i for i in Timeline.load(t.storage, t.config).instants if i.action == Action.ROLLBACK]
    assert len(rollbacks) == 1, "the failed write was not rolled back: the test would prove nothing"
    assert not any(i.requested_time == failed for i in Timeline.load(t.storage, t.config).instants)
    assert _ids(t.read_incremental(instants[2])) == [6]
    assert t.read_incremental(after).num_rows == 0


def test_a_spark_stream_whose_last_batch_was_rolled_back_fails_on_restart(spark, tmp_path):
    from shoal.spark import register

    register(spark)
    t, _ = _table(tmp_path)
    seen: list[int] = []

    def start():
        stream = spark.readStream.format("shoal").load(t.path)
        return (
            stream.writeStream.foreachBatch(lambda df, _: seen.extend(r.id for r in df.collect()))
            .option("checkpointLocation", str(tmp_path / "ck"))
            .start()
        )

    query = start()
    query.processAllAvailable()
    query.stop()
    assert sorted(seen) == [0, 1, 2]
    t.rollback()
    query = start()
    with pytest.raises(Exception, match="RolledBackInstantError"):
        query.processAllAvailable()
    query.stop()


def test_a_spark_incremental_read_from_a_rolled_back_checkpoint_raises(spark, tmp_path):
    import shoal.spark

    t, instants = _table(tmp_path)
    t.rollback()
    with pytest.raises(RolledBackInstantError):
        shoal.spark.read(spark, t.path, query_type="incremental", start=instants[2])
    got = shoal.spark.read(spark, t.path, query_type="incremental", start=instants[0]).toArrow()
    assert _ids(got) == [1]
