"""Instant-time generation: ``yyyyMMddHHmmssSSS``, strictly increasing (HUDI_FORMAT §2.1), on the
clock the table's ``hoodie.table.timeline.timezone`` names: UTC, or the machine's local time
(``LOCAL``, Hudi's default, which a table Hudi wrote without the property runs on)."""

from __future__ import annotations

import datetime as _dt
import threading
import time

_lock = threading.Lock()
# The latest time this process produced on each clock (UTC, local): a table on one clock must
# not push the instants of tables on the other.
_last = {False: "", True: ""}


def format_instant(moment: _dt.datetime) -> str:
    """Formats a datetime as a 17-digit instant time (milliseconds)."""
    return moment.strftime("%Y%m%d%H%M%S") + f"{moment.microsecond // 1000:03d}"


def parse_instant(instant: str) -> _dt.datetime:
    """Parses a 14- or 17-digit instant time as UTC; 14-digit values get 999 ms, as Java does."""
    if len(instant) == 14:
        instant += "999"
    base = _dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S")
    return base.replace(microsecond=int(instant[14:17]) * 1000, tzinfo=_dt.timezone.utc)


def runs_on_local_time(timeline_timezone: str | None) -> bool:
    """Whether a table whose ``hoodie.table.timeline.timezone`` is ``timeline_timezone`` runs its
    instants on the machine's local clock: ``LOCAL``, or no value (Hudi's default)."""
    return (timeline_timezone or "LOCAL").strip().upper() == "LOCAL"


def instant_of(moment: _dt.datetime, local: bool) -> str:
    """The instant time of ``moment`` on a timeline's clock (UTC, or with ``local`` the machine's
    local time). An aware datetime is converted to that clock; a naive one is taken as a time on
    it already, as Hudi takes ``yyyy-MM-dd HH:mm:ss`` (its digits, unconverted)."""
    if moment.tzinfo is not None and moment.utcoffset() is not None:
        # astimezone() without a zone: the machine's zone at that moment (DST included).
        moment = moment.astimezone() if local else moment.astimezone(_dt.timezone.utc)
    return format_instant(moment)


def instant_hours_before(now: _dt.datetime, hours: float, local: bool) -> str:
    """The instant time ``hours`` before ``now`` on a timeline's clock (UTC, or with ``local`` the
    machine's local time): a duration on the real time line, as Java's
    ``ZonedDateTime.minusHours``, so a DST change in between does not shift it. A naive ``now``
    is the machine's local time."""
    then = now.astimezone(_dt.timezone.utc) - _dt.timedelta(hours=hours)
    return format_instant(then.astimezone() if local else then)


def new_instant_time(after: str | None = None, local: bool = False) -> str:
    """A new instant time greater than ``after`` and than any this process produced before on the
    same clock: the UTC one, or (``local``) the machine's local one. When ``after`` is ahead of
    that clock by more than a moment (a table written on another zone's clock, or a clock set
    back), the time right after it, rather than a wait until the clock gets there."""
    with _lock:
        floor = max(_last[local], after or "")
        while True:
            now = _dt.datetime.now() if local else _dt.datetime.now(_dt.timezone.utc)
            candidate = format_instant(now)
            if candidate > floor:
                _last[local] = candidate
                return candidate
            if parse_instant(floor) - now.replace(tzinfo=_dt.timezone.utc) > _WAIT_AT_MOST:
                # Not kept as this process's latest: other tables on this clock are not ahead.
                return format_instant(parse_instant(floor) + _dt.timedelta(milliseconds=1))
            time.sleep(0.001)


# How far ahead of the clock the latest instant may be for a new one to wait for the clock.
_WAIT_AT_MOST = _dt.timedelta(seconds=1)
