"""Instant times against clock time, on tables whose timeline runs on UTC and on local time
(``hoodie.table.timeline.timezone``), with the process in a zone other than UTC.

Expected values are worked out by hand from Hudi's rules:

* a query instant given as a date/time string (``HoodieSqlCommonUtils.formatQueryInstant``) is
  read as the digits of an instant on the table's clock, unconverted: ``yyyy-MM-dd HH:mm:ss``
  -> ``yyyyMMddHHmmss`` (+ ``999`` ms), ``yyyy-MM-dd`` -> ``yyyyMMdd000000000`` (its midnight);
  a datetime that names its zone is therefore converted to the table's clock first;
* ``KEEP_LATEST_BY_HOURS`` (``CleanerUtils.getEarliestCommitToRetain``): the cutoff is now minus
  N hours on the real time line (``ZonedDateTime.minusHours``), formatted on the table's clock;
  the earliest commit to retain (ECTR) is the first completed commit at or after it, and a file
  group keeps its slices from ECTR on plus the last one before ECTR;
* heartbeats (``HoodieHeartbeatClient``): a pending write is dead when its heartbeat file's
  modification time (epoch milliseconds) is older than interval x tolerable misses.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import zoneinfo
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
import shoal.timeline.instant_time as instant_time_mod
import shoal.timeline.timeline as timeline_mod
from shoal.config.write_config import WriteConfig
from shoal.read.incremental import normalize_bound
from shoal.services import clean as clean_mod
from shoal.timeline.heartbeat import heartbeat_path
from shoal.timeline.timeline import Timeline
from shoal.write.concurrency import Concurrency
from tests.hudi_oracle import hudi_rs_read
from tests.local_zone import local_zone
from tests.table_files import set_table_properties

SHANGHAI = "Asia/Shanghai"  # UTC+8 all year
LOS_ANGELES = "America/Los_Angeles"  # UTC-8, UTC-7 from 2026-03-08 02:00 (clocks jump to 03:00)
UTC = dt.timezone.utc


def _table(root: Path, clock: str, instants: list[str], monkeypatch, rows=None) -> shoal.Table:
    """A copy-on-write table on ``clock`` (UTC or LOCAL) whose commits have the given instant
    times: commit i inserts id i (or upserts ``rows(i)``)."""
    shoal.Table.create(str(root), "t", record_key="id")
    set_table_properties(root, {"hoodie.table.timeline.timezone": clock})
    times = iter(instants)
    monkeypatch.setattr(timeline_mod, "new_instant_time", lambda after=None, local=False: next(times))
    table = shoal.Table(str(root))
    for i in range(len(instants)):
        table.upsert(rows(i) if rows else pa.table({"id": [i], "v": [i]}))
    assert [e.time for e in table.timeline] == instants
    return table


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


# ---- query instants given as datetimes and dates -------------------------------------------------

# A table on local time in Shanghai: its commits' digits are Shanghai wall-clock times.
LOCAL_COMMITS = ["20250228120000000", "20250301000000000", "20250301100000000", "20250301120000000"]


@pytest.fixture
def shanghai_local_table(tmp_path, monkeypatch) -> Iterator[shoal.Table]:
    with local_zone(SHANGHAI):
        yield _table(tmp_path / "t", "LOCAL", LOCAL_COMMITS, monkeypatch)


@pytest.mark.parametrize(
    "moment",
    [
        dt.datetime(2025, 3, 1, 3, 30, tzinfo=UTC),  # 11:30 in Shanghai
        dt.datetime(2025, 2, 28, 19, 30, tzinfo=zoneinfo.ZoneInfo(LOS_ANGELES)),  # 03:30Z, 11:30 CST
        dt.datetime(2025, 3, 1, 11, 30),  # naive: a time on the table's clock already
    ],
)
def test_a_datetime_as_of_on_a_local_table_is_read_on_the_tables_clock(shanghai_local_table, moment):
    # 11:30 on the table's clock -> instant 20250301113000000: the commits up to 10:00 (ids 0-2).
    assert _ids(shanghai_local_table.read(as_of=moment)) == [0, 1, 2]


def test_hudi_rs_reads_an_as_of_moment_on_a_local_table_as_shoal_does(shanghai_local_table):
    # hudi-rs converts an RFC 3339 time to the table's clock (LOCAL: the machine's zone).
    oracle = hudi_rs_read(shanghai_local_table.path, as_of="2025-03-01T03:30:00Z")
    assert _ids(oracle) == _ids(shanghai_local_table.read(as_of=dt.datetime(2025, 3, 1, 3, 30, tzinfo=UTC)))
    assert _ids(oracle) == [0, 1, 2]


def test_datetime_bounds_of_an_incremental_read_on_a_local_table(shanghai_local_table):
    start = dt.datetime(2025, 2, 28, 16, 30, tzinfo=UTC)  # 00:30 in Shanghai
    end = dt.datetime(2025, 3, 1, 3, 30, tzinfo=UTC)  # 11:30 in Shanghai
    # (20250301003000000, 20250301113000000]: the commit at 10:00 only.
    assert _ids(shanghai_local_table.read_incremental(start, end)) == [2]
    naive_start = dt.datetime(2025, 3, 1, 0, 30)  # the same moment, on the table's clock
    assert _ids(shanghai_local_table.read_incremental(naive_start)) == [2, 3]


def test_a_datetime_stream_start_on_a_local_table_is_read_on_the_tables_clock(shanghai_local_table):
    start = dt.datetime(2025, 3, 1, 3, 30, tzinfo=UTC)  # 11:30 in Shanghai
    changes = list(shanghai_local_table.stream(start=start, max_polls=1))
    assert [c.instant for c in changes] == ["20250301120000000"]


def test_an_aware_datetime_on_a_utc_table_in_another_zone_is_converted_to_utc(tmp_path, monkeypatch):
    commits = ["20250301030000000", "20250301040000000"]
    with local_zone(LOS_ANGELES):
        table = _table(tmp_path / "t", "UTC", commits, monkeypatch)
        half_past_eleven_in_shanghai = dt.datetime(
            2025, 3, 1, 11, 30, tzinfo=zoneinfo.ZoneInfo(SHANGHAI)
        )  # 03:30Z
        assert _ids(table.read(as_of=half_past_eleven_in_shanghai)) == [0]
        assert _ids(table.read_incremental(start=half_past_eleven_in_shanghai)) == [1]
        assert _ids(table.read(as_of=dt.datetime(2025, 3, 1, 3, 30))) == [0]  # naive: UTC digits


@pytest.mark.parametrize("day", ["2025-03-01", dt.date(2025, 3, 1), "20250301"])
def test_a_date_is_its_midnight_and_holds_a_commit_at_midnight(shanghai_local_table, day):
    # Hudi: yyyy-MM-dd -> 20250301000000000; the commit at exactly midnight is at the bound.
    assert _ids(shanghai_local_table.read(as_of=day)) == [0, 1]
    assert _ids(shanghai_local_table.read_incremental(end=day)) == [0, 1]  # (.., bound]
    assert _ids(shanghai_local_table.read_incremental(start=day)) == [2, 3]  # (bound, ..]


def test_bounds_short_of_milliseconds_name_their_first_millisecond_and_seconds_their_last():
    assert normalize_bound("2025-03-01", "end") == "20250301000000000"
    assert normalize_bound("2025-03-01 12:30", "end") == "20250301123000000"
    # Whole seconds keep Java's rule (fixInstantTimeCompatibility / getInstantForDateString).
    assert normalize_bound("2025-03-01 12:30:15", "end") == "20250301123015999"
    assert normalize_bound("2025-03-01 12:30:15.250", "end") == "20250301123015250"
    assert normalize_bound("0", "start") == "0"  # before every instant, as before


# ---- KEEP_LATEST_BY_HOURS --------------------------------------------------------------------


def _one_key(i: int) -> pa.Table:
    return pa.table({"id": [1], "v": [i]})  # every commit rewrites the one file group


def _base_instants(root: Path) -> list[str]:
    return sorted(p.stem.rsplit("_", 1)[1] for p in root.glob("*.parquet"))


@pytest.mark.parametrize(
    ("zone", "clock", "now", "hours", "commits", "ectr"),
    [
        # Shanghai, table on local time: now 04:00Z = 12:00 CST, minus 3 h = 09:00 CST.
        (
            SHANGHAI,
            "LOCAL",
            dt.datetime(2025, 3, 1, 4, 0, tzinfo=UTC),
            3,
            ["20250301060000000", "20250301080000000", "20250301093000000", "20250301110000000"],
            "20250301093000000",
        ),
        # Los Angeles, table on local time, across the jump to summer time: now 19:00Z = 12:00
        # PDT on 2026-03-08; 12 real hours before is 07:00Z = 23:00 PST on 2026-03-07 (not the
        # wall-clock 00:00 that subtracting on the dial would give).
        (
            LOS_ANGELES,
            "LOCAL",
            dt.datetime(2026, 3, 8, 19, 0, tzinfo=UTC),
            12,
            [
                "20260307200000000",
                "20260307220000000",
                "20260307233000000",
                "20260308030000000",
                "20260308100000000",
            ],
            "20260307233000000",
        ),
        # Los Angeles, table on UTC: the cutoff is 07:00Z in UTC digits.
        (
            LOS_ANGELES,
            "UTC",
            dt.datetime(2026, 3, 8, 19, 0, tzinfo=UTC),
            12,
            [
                "20260308040000000",
                "20260308060000000",
                "20260308073000000",
                "20260308100000000",
                "20260308180000000",
            ],
            "20260308073000000",
        ),
    ],
)
def test_keep_latest_by_hours_cuts_off_on_the_tables_clock(
    tmp_path, monkeypatch, zone, clock, now, hours, commits, ectr
):
    root = tmp_path / "t"
    clean_time = str(int(commits[-1]) + 1)
    with local_zone(zone):
        table = _table(root, clock, commits, monkeypatch, rows=_one_key)
        options = {
            "hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS",
            "hoodie.cleaner.hours.retained": str(hours),
        }
        times = iter([clean_time])
        monkeypatch.setattr(timeline_mod, "new_instant_time", lambda after=None, local=False: next(times))
        done = clean_mod.clean(table.storage, table.config, WriteConfig(options), clock=lambda: now)
        meta = clean_mod.clean_metadata(Timeline.load(table.storage, table.config), clean_time)
    assert done == [clean_time]
    assert meta["earliestCommitToRetain"] == ectr
    # Kept: the slices from ECTR on, and the last one before it; the older ones are gone.
    assert _base_instants(root) == commits[commits.index(ectr) - 1 :]


# ---- heartbeats ------------------------------------------------------------------------------


@pytest.mark.parametrize("zone", [SHANGHAI, LOS_ANGELES])
def test_heartbeats_tell_live_writers_from_dead_ones_in_any_zone(tmp_path, monkeypatch, zone):
    with local_zone(zone):
        table = _table(tmp_path / "t", "LOCAL", ["20250301100000000"], monkeypatch)
        hoodie = tmp_path / "t" / ".hoodie"
        live, dead = "20250301110000000", "20250301120000000"
        for t in (live, dead):
            (hoodie / f"{t}.commit.requested").write_bytes(b"")
            (hoodie / f"{t}.inflight").write_bytes(b"")
            (tmp_path / "t" / heartbeat_path(t)).parent.mkdir(exist_ok=True)
            (tmp_path / "t" / heartbeat_path(t)).write_bytes(b"")
        now = time.time()
        # Interval 60 s, 2 misses tolerated: dead after 120 s without a beat.
        os.utime(tmp_path / "t" / heartbeat_path(live), (now - 30, now - 30))
        os.utime(tmp_path / "t" / heartbeat_path(dead), (now - 600, now - 600))
        concurrency = Concurrency(table.storage, WriteConfig({"hoodie.cleaner.policy.failed.writes": "LAZY"}))
        failed = concurrency.failed_writes(Timeline.load(table.storage, table.config))
    assert [i.requested_time for i in failed] == [dead]


# ---- instant ordering across clocks ----------------------------------------------------------


class _FrozenDatetime(dt.datetime):
    """``datetime`` whose ``now()`` is a fixed wall-clock time (the local one when naive)."""

    wall: dt.datetime = dt.datetime(2000, 1, 1)

    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        # Naive: the wall clock of the zone the process is in (TZ) at that moment.
        moment = cls.wall.astimezone(tz) if tz is not None else cls.wall.astimezone().replace(tzinfo=None)
        return cls.combine(moment.date(), moment.time(), moment.tzinfo)


def test_a_local_table_stays_ordered_when_the_clock_falls_back(monkeypatch):
    """Los Angeles, 2026-11-01: 01:59:59 PDT is followed by 01:00:00 PST. A commit at 01:50 PDT,
    then one 30 real minutes later (01:20 PST on the dial): the second must still sort after."""

    monkeypatch.setattr(instant_time_mod, "_dt", _fake_dt_module())
    monkeypatch.setattr(instant_time_mod, "_last", {False: "", True: ""})
    la = zoneinfo.ZoneInfo(LOS_ANGELES)
    with local_zone(LOS_ANGELES):
        _FrozenDatetime.wall = dt.datetime(2026, 11, 1, 1, 20, tzinfo=la, fold=1)  # 09:20Z
        first = "20261101015000000"  # 08:50Z
        after = instant_time_mod.new_instant_time(after=first, local=True)
        on_utc = instant_time_mod.new_instant_time(after="20261101085000000", local=False)
    assert after == "20261101015000001"
    assert on_utc == "20261101092000000"


def test_a_utc_table_gets_utc_instants_from_a_process_in_another_zone(monkeypatch):
    monkeypatch.setattr(instant_time_mod, "_dt", _fake_dt_module())
    monkeypatch.setattr(instant_time_mod, "_last", {False: "", True: ""})
    with local_zone(SHANGHAI):
        _FrozenDatetime.wall = dt.datetime(2025, 3, 1, 4, 0, 0, 123000, tzinfo=UTC)  # 12:00:00.123 CST
        assert instant_time_mod.new_instant_time(local=False) == "20250301040000123"
        assert instant_time_mod.new_instant_time(local=True) == "20250301120000123"


def _fake_dt_module():
    class FakeDt:
        timezone = dt.timezone
        timedelta = dt.timedelta
        datetime = _FrozenDatetime

    return FakeDt


# ---- the lock file ---------------------------------------------------------------------------


def test_the_lock_file_records_its_creation_on_local_time_as_hudis_provider_does(tmp_path, monkeypatch):
    """Hudi's FileSystemBasedLockProvider writes ``lockCreateTime`` with a SimpleDateFormat, in the
    JVM's zone: a lock taken at 04:00:00.123Z in Shanghai says 12:00:00.123."""
    from shoal.timeline import file_lock

    monkeypatch.setattr(file_lock, "datetime", _FrozenDatetime)
    _FrozenDatetime.wall = dt.datetime(2025, 3, 1, 4, 0, 0, 123000, tzinfo=UTC)
    table = shoal.Table.create(str(tmp_path / "t"), "t", record_key="id")
    lock = file_lock.FileLock(table.storage, None, 0, 1000, 10)
    with local_zone(SHANGHAI), lock.held():
        holder = json.loads(lock.holder() or "{}")
    assert holder["lockCreateTime"] == "2025-03-01 12:00:00.123"


# ---- the table's clock in table creation and the compaction trigger ---------------------------


def test_a_table_created_with_the_local_timeline_option_runs_on_local_time(tmp_path):
    options = {"hoodie.table.timeline.timezone": "LOCAL"}
    shoal.Table.create(str(tmp_path / "t"), "t", record_key="id", options=options)
    props = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.timeline.timezone=LOCAL" in props


def test_the_time_elapsed_compaction_trigger_reads_a_local_table_on_local_time(tmp_path, monkeypatch):
    from shoal.services.compaction import compaction_due

    with local_zone(SHANGHAI):
        root = tmp_path / "t"
        shoal.Table.create(str(root), "t", table_type="MERGE_ON_READ", record_key="id")
        set_table_properties(root, {"hoodie.table.timeline.timezone": "LOCAL"})
        times = iter(["20250301100000000"])  # 02:00Z
        monkeypatch.setattr(timeline_mod, "new_instant_time", lambda after=None, local=False: next(times))
        table = shoal.Table(str(root))
        table.upsert(pa.table({"id": [1], "v": [1]}))
        options = {
            "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",
            "hoodie.compact.inline.max.delta.seconds": "3600",
        }
        timeline = Timeline.load(table.storage, table.config)
        # 03:30Z is 5400 s after the delta commit at 10:00 CST (02:00Z): due.
        assert compaction_due(timeline, WriteConfig(options), dt.datetime(2025, 3, 1, 3, 30, tzinfo=UTC))
