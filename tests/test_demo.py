"""The main job's pieces: the change stream generator, the incremental consumer, and the whole
pipeline on the embedded engine and on Spark (the same stream through both gives one table)."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

import shoal
from shoal.demo import main as demo_main
from shoal.demo.changes import ChangeStream
from shoal.demo.consumer import Consumer, aggregate
from shoal.demo.engines import LocalEngine


def test_change_stream_holds_every_kind_of_event():
    stream = ChangeStream(seed=3, first_batch_orders=500, batch_events=400)
    first, stats = stream.next_batch()
    assert stats.inserts == first.num_rows == 500
    seen_late = seen_dup = 0
    for n in range(4):
        batch, stats = stream.next_batch(last=n == 3)
        assert stats.inserts and stats.updates and stats.deletes
        deleted = pc.sum(batch.column("_hoodie_is_deleted")).as_py()
        assert deleted >= stats.deletes  # duplicates may repeat a delete event
        ids = batch.column("order_id")
        assert len(pc.unique(ids)) < batch.num_rows  # duplicates and late events share ids
        seen_late += stats.late
        seen_dup += stats.duplicates
        if n == 3:
            assert stream._held == []  # the last batch holds nothing back
    assert seen_late and seen_dup
    # The event-time order of a batch is not its arrival order.
    times = batch.column("updated_at").to_pylist()
    assert times != sorted(times)


def test_consumer_follows_the_source_from_changes_only(tmp_path):
    engine = LocalEngine()
    source = str(tmp_path / "orders")
    shoal.Table.create(
        source,
        name="orders",
        table_type="MERGE_ON_READ",
        record_key="order_id",
        partition_by="region",
        ordering_field="updated_at",
    )
    stream = ChangeStream(seed=5, first_batch_orders=300, batch_events=200)
    consumer = Consumer(str(tmp_path / "downstream"), engine)
    for n in range(4):
        batch, _ = stream.next_batch(last=n == 3)
        engine.write(source, batch, "upsert")
        run = consumer.run(source)
        assert run is not None and run.end == shoal.Table(source).latest_instant()
        expected = aggregate(stream.source_rows()) if n == 3 else aggregate(engine.read(source))
        got = engine.read(consumer.totals, columns=expected.column_names).sort_by("customer_id").to_pylist()
        want = expected.sort_by("customer_id").to_pylist()
        counts = [(r["customer_id"], r["orders"]) for r in got]
        assert counts == [(r["customer_id"], r["orders"]) for r in want]
        # Sums of the same amounts in another order may differ in the last bit.
        assert [r["revenue"] for r in got] == pytest.approx([r["revenue"] for r in want], abs=0.011)
    assert consumer.run(source) is None  # nothing new since the checkpoint
    # A restarted consumer resumes from its stored checkpoint.
    assert Consumer(str(tmp_path / "downstream"), engine).checkpoint == shoal.Table(source).latest_instant()


def test_pipeline_on_the_embedded_engine(tmp_path):
    argv = ["--engine", "embedded", "--batches", "3", "--orders", "3000", "--path", str(tmp_path)]
    assert demo_main(argv) == 0


def test_pipeline_on_spark_and_embedded_gives_the_same_table(tmp_path, spark):
    """The demo's Spark run needs its own session; the shared test session is reused instead."""
    from shoal.demo import run_pipeline
    from shoal.demo.engines import SparkEngine

    ok_spark, on_spark = run_pipeline(SparkEngine(spark), tmp_path / "spark", batches=3, seed=11, orders=2000)
    ok_local, local = run_pipeline(LocalEngine(), tmp_path / "embedded", batches=3, seed=11, orders=2000)
    assert ok_spark and ok_local
    assert on_spark.sort_by("order_id").to_pylist() == local.sort_by("order_id").to_pylist()


@pytest.mark.parametrize("argv", [["--engine", "nope"], ["--batches", "x"]])
def test_bad_arguments_are_rejected(argv):
    with pytest.raises(SystemExit) as exc:
        demo_main(argv)
    assert exc.value.code == 2
