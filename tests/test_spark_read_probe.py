"""Spark reads of shoal tables with Hudi's read options, as a pipeline moved from the embedded
engine to Spark uses them: time travel in each instant format Hudi takes, incremental ranges,
reads beside a pending write or compaction, and table services run on one engine for the other.
Options that cannot be right (a malformed instant, time travel before the first commit or past a
pending write, a begin instant after the end one, an option of another query type) fail when
``load()`` declares the schema, with a typed error naming the option, not at the first action."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import shoal
import shoal.spark
from shoal.errors import InvalidArgumentError, InvalidOptionError
from shoal.spark.datasource import read_options, register
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by

QUERY_TYPE = "hoodie.datasource.query.type"
BEGIN = "hoodie.datasource.read.begin.instanttime"
END = "hoodie.datasource.read.end.instanttime"
AS_OF = "as.of.instant"
FALLBACK = "hoodie.datasource.read.incr.fallback.fulltablescan.enable"


@pytest.fixture
def ss(spark):
    register(spark)
    return spark


def _batch(ids, ts: int, tag: str) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": [f"p{i % 2}" for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "v": [f"{tag}{i}" for i in ids],
        }
    )


def _load(ss, path, **options: str):
    return ss.read.format("shoal").options(**options).load(str(path))


def _rows(table: pa.Table) -> list[dict]:
    return rows_by(table, ["id", "v"], ["id"])


def _model(states: list[dict[int, str]], i: int) -> list[dict]:
    return [{"id": k, "v": v} for k, v in sorted(states[i].items())]


@pytest.fixture(scope="module")
def mor(tmp_path_factory) -> tuple[str, list[str], list[dict[int, str]]]:
    """A merge-on-read table of four delta commits (inserts, updates, a delete), the commits'
    instant times, and the model's rows (id -> v) after each."""
    path = str(tmp_path_factory.mktemp("probe") / "mor")
    table = shoal.Table.create(
        path, "mor", table_type="MERGE_ON_READ", record_key="id", partition_by="p", ordering_field="ts"
    )
    state: dict[int, str] = {}
    states, instants = [], []
    for op, batch in (
        ("upsert", _batch(range(1, 7), 1, "a")),
        ("upsert", _batch([2, 3, 7], 2, "b")),
        ("delete", _batch([4], 3, "x")),
        ("upsert", _batch([1, 8], 4, "c")),
    ):
        if op == "delete":
            instants.append(table.delete(batch.select(["id", "p", "ts"])))
            for i in batch["id"].to_pylist():
                state.pop(i, None)
        else:
            instants.append(table.upsert(batch))
            state.update(zip(batch["id"].to_pylist(), batch["v"].to_pylist(), strict=True))
        states.append(dict(state))
    return path, instants, states


# ---- bad options fail at load(), naming the option ------------------------------------------------


@pytest.mark.parametrize("value", ["garbage", "20251399000000", ""])
@pytest.mark.parametrize(
    "options",
    [{AS_OF: "{}"}, {QUERY_TYPE: "incremental", BEGIN: "{}"}, {QUERY_TYPE: "incremental", END: "{}"}],
    ids=["as_of", "begin", "end"],
)
def test_a_malformed_instant_option_is_refused_naming_the_option(mor, options, value):
    path = mor[0]
    given = {k: v.format(value) for k, v in options.items()}
    name = next(k for k in given if k != QUERY_TYPE)
    with pytest.raises(InvalidOptionError, match=f"option '{name}' must be an instant time"):
        read_options({"path": path, **given})


def test_bad_options_fail_when_load_declares_the_schema(ss, mor):
    path = mor[0]
    # No action runs: load() itself raises, as the embedded read raises when called.
    cases = [
        ({AS_OF: "not-a-time"}, r"InvalidOptionError: option 'as.of.instant' must be an instant time"),
        ({QUERY_TYPE: "incremental", BEGIN: "2025-13-01"}, f"InvalidOptionError: option '{BEGIN}'"),
        ({AS_OF: "2001-01-01"}, r"InstantNotFoundError: as_of 2001-01-01 is before the earliest instant"),
        ({"filters": json.dumps([["id", "=", "one"]])}, r"InvalidArgumentError: filters .* do not fit"),
        ({"filters": json.dumps([["nope", "=", 1]])}, r"InvalidArgumentError: unknown filter column"),
        (
            {QUERY_TYPE: "snapshot", FALLBACK: "true"},
            f"InvalidOptionError: option '{FALLBACK}' is for incremental reads",
        ),
    ]
    for options, message in cases:
        with pytest.raises(Exception, match=message):
            _load(ss, path, **options)


def test_begin_after_end_and_equal_bounds_read_nothing(ss, mor):
    """As in Hudi's incremental relation and Table.read_incremental: (begin, end] holds nothing
    when begin is not before end; a pipeline whose checkpoint passed the end reads nothing."""
    path, instants, _ = mor
    for begin, end in ((instants[3], instants[0]), (instants[1], instants[1])):
        got = _load(ss, path, **{QUERY_TYPE: "incremental", BEGIN: begin, END: end})
        assert got.count() == 0
        assert shoal.Table(path).read_incremental(begin, end).num_rows == 0


def test_the_fallback_option_needs_an_incremental_read(ss, mor):
    path = mor[0]
    for qt in ("snapshot", "read_optimized"):
        with pytest.raises(InvalidOptionError, match=f"option '{FALLBACK}' is for incremental reads"):
            read_options({"path": path, QUERY_TYPE: qt, FALLBACK: "true"})
        with pytest.raises(
            InvalidArgumentError, match=r"fallback_full_scan .* needs query_type='incremental'"
        ):
            shoal.spark.read(ss, path, query_type=qt, fallback_full_scan=True)
    # Without a query type a batch read is a snapshot read: refused when it is planned (the same
    # options may be a stream's, which reads incremental changes and takes the fallback).
    with pytest.raises(Exception, match=f"InvalidOptionError: option '{FALLBACK}' is for incremental"):
        _load(ss, path, **{FALLBACK: "true"}).count()
    query = (
        ss.readStream.format("shoal")
        .option(FALLBACK, "true")
        .load(path)
        .writeStream.format("memory")
        .queryName("fallback_stream")
        .start()
    )
    try:
        query.processAllAvailable()
        streamed = ss.table("fallback_stream").select("id").distinct().count()
    finally:
        query.stop()
    assert streamed == len(mor[2][-1])  # every live key, once each (no deletes asked for)
    # Off, it asks for nothing: accepted with any query type, as include_deletes=false is.
    assert read_options({"path": path, FALLBACK: "false"}).fallback_full_scan is False


def test_time_travel_past_a_pending_write_fails_at_load(ss, tmp_path):
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, "t", record_key="id", partition_by="p", ordering_field="ts")
    first = table.upsert(_batch([1, 2], 1, "a"))
    timeline = Timeline.load(table.storage, table.config)
    pending = timeline.new_instant_time()
    timeline.transition_to_inflight(timeline.create_requested(pending, Action.COMMIT))
    with pytest.raises(Exception, match=rf"CommitConflictError: time travel up to .* holds write {pending}"):
        _load(ss, path, **{AS_OF: "29990101000000000"})
    # Before the pending write the answer is settled: the first commit's rows.
    got = _load(ss, path, **{AS_OF: first}).toArrow()
    assert _rows(got) == [{"id": 1, "v": "a1"}, {"id": 2, "v": "a2"}]


# ---- parity: time travel formats, incremental ranges, pending data, services ------------------------


def test_time_travel_in_each_of_hudis_instant_formats(ss, fixture_table):
    # Two delta commits, 9 s apart: 20250118044623136 and 20250118044632401 (hudi-rs is the oracle).
    path = str(fixture_table("mor_parquet_v6_complexkeygen_hivestyle"))
    keys = ["_hoodie_record_key", "_hoodie_commit_time"]
    first = rows_by(hudi_rs_read(path, as_of="20250118044623136"), keys, keys)
    second = rows_by(hudi_rs_read(path, as_of="20250118044632401"), keys, keys)
    assert first != second
    for as_of, expected in (
        ("20250118044623136", first),
        ("20250118044623", first),  # yyyyMMddHHmmss: the end of that second
        ("2025-01-18 04:46:31", first),
        ("2025-01-18 04:46:32.401", second),
        ("20250118044632", second),
        ("2025-01-19", second),  # yyyy-MM-dd: that midnight
    ):
        got = rows_by(_load(ss, path, **{AS_OF: as_of}).toArrow(), keys, keys)
        assert got == expected, as_of
        assert rows_by(shoal.Table(path).read(as_of=as_of), keys, keys) == expected, as_of


def test_time_travel_and_incremental_ranges_match_the_model(ss, mor):
    path, instants, states = mor
    for i, instant in enumerate(instants):
        assert _rows(_load(ss, path, **{AS_OF: instant}).toArrow()) == _model(states, i)
    # (begin, end] between commits: the rows the model changed there, with their latest values.
    for lo in range(len(instants)):
        for hi in range(lo, len(instants)):
            got = _load(ss, path, **{QUERY_TYPE: "incremental", BEGIN: instants[lo], END: instants[hi]})
            changed = {k: v for k, v in states[hi].items() if states[lo].get(k) != v}
            assert _rows(got.toArrow()) == [{"id": k, "v": v} for k, v in sorted(changed.items())]


def test_pending_data_is_invisible_and_services_cross_engines(ss, tmp_path):
    """A compaction scheduled by the embedded engine runs on Spark and one scheduled on Spark
    runs embedded; while a compaction is pending and while a write is in flight, every read
    path returns the committed rows."""
    path = str(tmp_path / "mor")
    table = shoal.Table.create(
        path, "mor", table_type="MERGE_ON_READ", record_key="id", partition_by="p", ordering_field="ts"
    )
    model: dict[int, str] = {}

    def write(ids, ts, tag):
        batch = _batch(ids, ts, tag)
        table.upsert(batch)
        model.update(zip(batch["id"].to_pylist(), batch["v"].to_pylist(), strict=True))

    def check():
        expected = [{"id": k, "v": v} for k, v in sorted(model.items())]
        assert _rows(_load(ss, path).toArrow()) == expected
        assert _rows(shoal.spark.read(ss, path).toArrow()) == expected
        assert _rows(shoal.Table(path).read()) == expected

    write(range(1, 6), 1, "a")
    write([2, 3], 2, "b")
    scheduled = table.schedule_compaction()
    write([3, 6], 3, "c")  # into the slice after the pending compaction
    check()
    shoal.spark.run_compaction(ss, path, scheduled)
    write([1], 4, "d")
    on_spark = shoal.spark.spark_table(ss, path).schedule_compaction()
    check()
    table.run_compaction(on_spark)
    check()
    # A write in flight: its files are on storage, its instant is not completed.
    in_flight = table.upsert(_batch([1, 7], 5, "PENDING"))
    (tmp_path / "mor" / ".hoodie" / f"{in_flight}.deltacommit").unlink()
    check()
    assert _rows(hudi_rs_read(path)) == [{"id": k, "v": v} for k, v in sorted(model.items())]
