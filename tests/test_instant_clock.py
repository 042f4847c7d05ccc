"""The clock of new instant times: the table's ``hoodie.table.timeline.timezone`` (UTC, or the
machine's local time, Hudi's default for a table without the property), and a timeline whose
latest instant is ahead of that clock (a table written on another zone's clock)."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import shoal
import shoal.timeline.instant_time as instant_time
from shoal.timeline.instant_time import format_instant, new_instant_time, parse_instant
from tests.local_zone import local_zone
from tests.table_files import data_columns

ZONE = "Asia/Shanghai"  # UTC+8 all year: the local and UTC clocks differ by eight hours
FIXTURE = "cow_v6_simplekeygen_nonhivestyle"  # written by Hudi without the property


def _no_wait(monkeypatch) -> None:
    def refuse(seconds: float) -> None:
        raise AssertionError("new_instant_time waited for the clock")

    monkeypatch.setattr(instant_time.time, "sleep", refuse)


def _hours_from(instant: str, clock: dt.datetime) -> float:
    return (parse_instant(instant) - clock.replace(tzinfo=dt.timezone.utc)).total_seconds() / 3600


def test_a_latest_instant_hours_ahead_of_the_clock_is_followed_at_once(monkeypatch):
    _no_wait(monkeypatch)
    ahead = format_instant(dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=8))
    assert new_instant_time(after=ahead) == format_instant(
        parse_instant(ahead) + dt.timedelta(milliseconds=1)
    )


def test_writes_after_a_commit_made_on_a_clock_ahead_do_not_wait_and_stay_ordered(fixture_table, monkeypatch):
    """A writer eight hours ahead (local time in Shanghai, on a table on local time) commits; the
    next writers run on UTC: they come right after it, in order, instead of waiting eight hours."""
    table = shoal.Table(str(fixture_table(FIXTURE)))
    rows = table.read().select(data_columns(table.read())).slice(0, 1)
    with local_zone(ZONE):
        ahead = table.upsert(rows)
    with local_zone("UTC"):
        _no_wait(monkeypatch)
        second = table.upsert(rows)
        third = table.upsert(rows)
    assert _hours_from(ahead, dt.datetime.now(dt.timezone.utc)) > 7
    assert ahead < second < third
    assert [e.time for e in table.timeline][-3:] == [ahead, second, third]


def test_a_table_without_the_property_runs_on_local_time_as_hudi_does(fixture_table, tmp_path):
    root = fixture_table(FIXTURE)
    assert "hoodie.table.timeline.timezone" not in (root / ".hoodie" / "hoodie.properties").read_text()
    created = shoal.Table.create(str(tmp_path / "t"), "t", record_key="id")
    assert (
        "hoodie.table.timeline.timezone=UTC" in (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    )
    with local_zone(ZONE):
        instant = shoal.Table(str(root))._timeline().new_instant_time()
        local = dt.datetime.now(zoneinfo.ZoneInfo(ZONE)).replace(tzinfo=None)
        assert abs(_hours_from(instant, local)) < 0.1
        instant = created._timeline().new_instant_time()
        utc = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        assert abs(_hours_from(instant, utc)) < 0.1
